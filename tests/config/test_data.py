"""DataConfig: each field's checks, the dict round trip, and a section checked once when built."""

import dataclasses
import json

import numpy as np
import pytest

from helpers import raises_one_line
from stacklstm.checks import SettingError
from stacklstm.config import DataConfig, RunConfig


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"window": 0}, "window must be an integer >= 1, got 0"),
        ({"horizon": 1.5}, "horizon must be an integer >= 1, got 1.5"),
        ({"stride": True}, "stride must be an integer >= 1, got True"),
        ({"val_fraction": 1.0}, r"val_fraction must be a number in \[0.0, 1.0\), got 1.0"),
        ({"test_fraction": -0.1}, r"test_fraction must be a number in \[0.0, 1.0\), got -0.1"),
        ({"val_fraction": 0.5, "test_fraction": 0.5}, "below 1 .* got 0.5 \\+ 0.5"),
        ({"target": ()}, "target must name at least one column"),
        ({"target": "co2"}, "got the string 'co2'; write \\('co2',\\)"),
        ({"features": ("co2",)}, "'co2' is in both target and features"),
        ({"features": ("t", "t")}, "features names column 't' more than once"),
        ({"time_column": "co2"}, "time_column 'co2' is also listed"),
        (
            {"scaler": "zscore"},
            "scaler must be one of 'auto', 'standard', 'minmax', 'robust', 'mean', 'naive', "
            "'seasonal_naive', 'none'",
        ),
        ({"normalize": "revin"}, "normalize must be one of 'none', 'window', got 'revin'"),
        ({"gaps": "drop"}, "gaps must be one of 'interpolate', 'reject', got 'drop'"),
        ({"difference": "yes"}, "difference must be true or false, got 'yes'"),
        ({"future_features": ("co2",)}, "'co2' is in both target and future_features; give each"),
        (
            {"features": ("p",), "static_features": ("p",)},
            "'p' is in both features and static_features",
        ),
        (
            {"future_features": ("p",), "static_features": ("p",)},
            "'p' is in both future_features and static_features",
        ),
        ({"future_features": ("p", "p")}, "future_features names column 'p' more than once"),
        ({"static_features": "size"}, "static_features must be a tuple of column names"),
        ({"future_features": ("date",)}, "time_column 'date' is also listed"),
        ({"calendar": "yes"}, "calendar must be one of 'auto', 'none', got 'yes'"),
        ({"calendar": "auto", "time_column": None}, "calendar='auto' needs a time column"),
        (
            {"calendar": "auto", "future_features": ("calendar_x",)},
            "column 'calendar_x' starts with 'calendar_', the prefix of the calendar columns",
        ),
    ],
)
def test_config_rejects_bad_values(overrides, match):
    raises_one_line(match, DataConfig, error=SettingError, **overrides)


def test_config_dict_round_trip_and_unknown_keys():
    cfg = DataConfig(target=("a", "b"), features=("c",), window=24, difference=True)
    assert DataConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert DataConfig.from_dict({}) == DataConfig()
    assert DataConfig(window=np.int64(5)).to_dict()["window"] == 5
    raises_one_line(
        "unknown DataConfig key\\(s\\) 'windw'; expected some of: target",
        DataConfig.from_dict,
        {"windw": 3},
        error=SettingError,
    )
    raises_one_line(
        "window must be an integer", DataConfig.from_dict, {"window": "3"}, error=SettingError
    )


def test_a_section_is_checked_once_when_built_and_again_when_replaced(monkeypatch):
    cfg = DataConfig(window=12, horizon=3)
    calls = []

    def counted(self):
        calls.append(self.horizon)
        raise SettingError("checked again")

    monkeypatch.setattr(DataConfig, "_check", counted)
    cfg.validate()  # built and checked already: frozen, so still valid
    RunConfig(data=cfg).validate()
    assert calls == []
    with pytest.raises(SettingError, match="checked again"):
        dataclasses.replace(cfg, horizon=4)  # a new section: checked
    with pytest.raises(SettingError, match="checked again"):
        RunConfig(data=cfg).replace({"data": {"horizon": 5}})
    assert calls == [4, 5]
    RunConfig(data=cfg).replace({"train": {"epochs": 2}})  # [data] untouched: not rebuilt
    assert calls == [4, 5]
