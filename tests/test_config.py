"""Configs across the sections: each field's error names the field (the sections are
tests/config/)."""

import pytest

from stacklstm.checks import SettingError
from stacklstm.config import DataConfig, ModelConfig, TrainConfig


@pytest.mark.parametrize(
    ("cls", "kwargs", "message"),
    [
        (DataConfig, {"window": 0}, "window must be an integer >= 1, got 0"),
        (ModelConfig, {"dropout_rate": 1.0}, r"dropout_rate must be a number in \[0.0, 1.0\)"),
        (TrainConfig, {"lr": 0.0}, r"lr must be a number in \(0.0, inf\), got 0.0"),
        (
            TrainConfig,
            {"loss": "l3"},
            "loss must be one of 'mse', 'mae', 'huber', 'quantile', 'normal', 'student_t', "
            "got 'l3'",
        ),
        (TrainConfig, {"quantiles": (0.5, 1.0)}, r"quantiles must lie strictly between 0 and 1"),
        (
            TrainConfig,
            {"quantiles": (0.9, 0.1), "loss": "quantile"},
            r"quantiles must be ascending without repeats, got \(0.9, 0.1\)",
        ),
        (
            TrainConfig,
            {"quantiles": (0.1, 0.1, 0.9), "loss": "quantile"},
            "quantiles must be ascending without repeats",
        ),
        (TrainConfig, {"quantiles": (0.1, 0.9)}, "quantiles apply to `loss=quantile`"),
        (TrainConfig, {"interval_levels": (0.0,)}, "interval_levels must lie strictly between"),
        (TrainConfig, {"interval_levels": ("0.8",)}, "interval_levels must hold numbers"),
        (TrainConfig, {"conformal": "yes"}, "conformal must be true or false"),
    ],
)
def test_setting_errors_name_the_field(cls, kwargs, message):
    with pytest.raises(SettingError, match=message) as err:
        cls(**kwargs)
    assert err.value.field == next(iter(kwargs))
