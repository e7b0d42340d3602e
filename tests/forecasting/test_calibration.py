"""A run's conformal calibration: the offsets fitted on validation forecasts, and
calibration.json kept with its checkpoint and checksum."""

import hashlib
import json

import numpy as np
import pytest

from stacklstm.config import TrainConfig
from stacklstm.forecasting.calibration import (
    calibration_checksum,
    fit_calibration,
    read_calibration,
    write_calibration,
)
from stacklstm.intervals import Forecast


def _validation():
    """Horizon 2: step 1's intervals [0, 2] too narrow, step 2's [-10, 10] too wide."""
    y = np.array([[[1.0], [0.0]], [[3.0], [1.0]], [[-2.0], [2.0]], [[4.0], [0.5]]])
    q = np.zeros((4, 2, 1, 3))
    q[:, 0, 0] = [0.0, 1.0, 2.0]
    q[:, 1, 0] = [-10.0, 0.0, 10.0]
    return y, Forecast(q[..., 1], q, (0.1, 0.5, 0.9))


def test_fit_calibration_gives_the_offsets_only_when_asked_and_finite(caplog):
    y, val = _validation()
    cfg = TrainConfig(loss="quantile", quantiles=(0.1, 0.9), conformal=True)
    # scores max(q0.1 - y, y - q0.9): step 1 -1, 1, 2, 2; step 2 -10, -9, -8, -9.5;
    # rank ceil(5 * 0.8) = 4 of 4: 2 and -8
    np.testing.assert_array_equal(fit_calibration(cfg, y, val).offsets, [[[2.0], [-8.0]]])
    assert fit_calibration(TrainConfig(loss="quantile", quantiles=(0.1, 0.9)), y, val) is None
    assert fit_calibration(cfg, y[:0], val) is None  # no validation windows
    val.quantiles[0, 0, 0, 0] = np.nan
    assert fit_calibration(cfg, y, val) is None
    assert "hold NaN/Inf" in caplog.text


def test_calibration_json_round_trips_for_its_checkpoint_and_refuses_edits(tmp_path):
    y, val = _validation()
    cfg = TrainConfig(loss="quantile", quantiles=(0.1, 0.9), conformal=True)
    calibration = fit_calibration(cfg, y, val)
    checkpoint = {"kind": "best", "step": 40}
    write_calibration(tmp_path, calibration, checkpoint)
    path = tmp_path / "calibration.json"
    saved = json.loads(path.read_text())
    content = {k: v for k, v in saved.items() if k != "sha256"}
    text = json.dumps(content, sort_keys=True, allow_nan=False)
    assert saved["sha256"] == calibration_checksum(content)
    assert saved["sha256"] == hashlib.sha256(text.encode()).hexdigest()
    back = read_calibration(path, checkpoint)
    np.testing.assert_array_equal(back.offsets, calibration.offsets)
    assert read_calibration(path, {"kind": "best", "step": 60}) is None  # another checkpoint
    edited = json.loads(path.read_text())
    edited["offsets"] = [[[3.0], [-8.0]]]
    path.write_text(json.dumps(edited))
    with pytest.raises(ValueError, match="differs from the checksum written with it"):
        read_calibration(path, checkpoint)
    del edited["sha256"]  # written before checksums existed: read as it is
    path.write_text(json.dumps(edited))
    assert read_calibration(path, checkpoint).offsets.tolist() == [[[3.0], [-8.0]]]
    path.write_text("[1, 2]")
    with pytest.raises(ValueError, match="expected a JSON object, got list"):
        read_calibration(path, checkpoint)
