"""Prediction intervals across modules: a baseline's intervals from its validation
residuals and the flags' errors (the heads, conformal calibration and the scores are
test_heads.py, test_conformal.py and test_scores.py). (A whole run whose conformal 80 %
intervals cover 80 % of the test targets is tests/e2e/test_forecasts.py.)"""

import numpy as np
import pytest

from helpers import _main
from stacklstm.baselines import residual_intervals


def test_baseline_intervals_come_from_its_validation_residuals():
    y_val = np.array([1.0, -2.0, 3.0, 0.5]).reshape(4, 1, 1)
    # |residuals| of a zero forecast: 1, 2, 3, 0.5 -> rank ceil(5 * 0.5) = 3: 2.0
    out = residual_intervals(
        y_val, np.zeros((4, 1, 1)), np.full((2, 1, 1), 10.0), (0.25, 0.5, 0.75)
    )
    np.testing.assert_array_equal(out.quantiles[:, 0, 0], [[8.0, 10.0, 12.0]] * 2)
    assert residual_intervals(y_val, None, np.zeros((2, 1, 1)), (0.25, 0.5, 0.75)) is None


# --------------------------------------------------------------------------- flags


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--loss", "quantile", "--quantiles", "0.1,1.5"], "--quantiles must lie strictly"),
        (["--loss", "quantile", "--quantiles", "0.9,0.1"], "--quantiles must be ascending"),
        (["--loss", "quantile", "--quantiles", "0.1,0.1,0.9"], "without repeats"),
        (["--quantiles", "0.1,0.9"], "--quantiles apply to --loss quantile"),
        (["--conformal", "--val-fraction", "0"], "--val-fraction is 0"),
        (["--conformal", "--val-size", "0"], "validation windows but --val-size is 0"),
        (["--loss", "quantile", "--quantiles", "a,b"], "expected comma-separated numbers"),
    ],
)
def test_bad_interval_flags_are_one_line_and_write_nothing(tmp_path, flags, message):
    out = tmp_path / "run"
    code, stdout, stderr = _main("train", "--out", out, "--baselines", "naive", *flags)
    assert code == 2 and not stdout
    assert len(stderr.strip().splitlines()) == 1 and message in stderr, stderr
    assert not out.exists()
