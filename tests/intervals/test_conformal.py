"""Split-conformal calibration: the finite-sample rank and the per-step offsets."""

import json
import logging

import numpy as np

from stacklstm.intervals import (
    Calibration,
    Forecast,
    calibrate,
    conformal_offsets,
    conformal_quantile,
)


def test_conformal_quantile_uses_the_finite_sample_rank(caplog):
    scores = np.array([5.0, 1.0, 4.0, 2.0, 3.0])
    assert conformal_quantile(scores, 0.5).item() == 3.0  # ceil(6 * 0.5) = 3rd smallest
    assert conformal_quantile(scores, 0.6).item() == 4.0  # ceil(6 * 0.6) = 4th
    with caplog.at_level(logging.WARNING, logger="stacklstm.intervals.conformal"):
        assert conformal_quantile(scores, 0.95).item() == 5.0  # rank 6 > 5: the largest
    assert "too few" in caplog.text


def test_cqr_offsets_widen_or_narrow_each_step_and_keep_quantiles_sorted():
    # horizon 2: step 1 intervals [0, 2] too narrow, step 2 [-10, 10] too wide
    y = np.array([[[1.0], [0.0]], [[3.0], [1.0]], [[-2.0], [2.0]], [[4.0], [0.5]]])
    q = np.zeros((4, 2, 1, 3))
    q[:, 0, 0] = [0.0, 1.0, 2.0]
    q[:, 1, 0] = [-10.0, 0.0, 10.0]
    f = Forecast(q[..., 1], q, (0.1, 0.5, 0.9))
    cal = conformal_offsets(y, f)
    # scores step 1: max(0 - y, y - 2) = -1, 1, 2, 2 -> rank ceil(5 * 0.8) = 4: 2
    # step 2: max(-10 - y, y - 10) = -10, -9, -8, -9.5 -> 4th smallest: -8
    np.testing.assert_array_equal(cal.offsets, [[[2.0], [-8.0]]])
    out = calibrate(f, cal)
    np.testing.assert_array_equal(out.quantiles[0, 0, 0], [-2.0, 1.0, 4.0])
    np.testing.assert_array_equal(out.quantiles[0, 1, 0], [-2.0, 0.0, 2.0])
    np.testing.assert_array_equal(out.point, f.point)
    # an offset that crosses the interval over: re-sorted, never crossing
    crossed = calibrate(f, Calibration((0.8,), (0.1, 0.5, 0.9), np.array([[[-3.0], [0.0]]]), 4))
    np.testing.assert_array_equal(crossed.quantiles[0, 0, 0], [-1.0, 1.0, 3.0])
    assert Calibration.from_dict(json.loads(json.dumps(cal.to_dict()))).offsets.tolist() == [
        [[2.0], [-8.0]]
    ]
