"""best.toml: the best trial's settings as a config file that reads back the same."""

import tomllib

import pytest

from stacklstm.checks import SettingError
from stacklstm.config import RunConfig
from stacklstm.tune import to_toml


def test_best_config_toml_round_trips():
    cfg = RunConfig().replace(
        {"model": {"linear_layer_sizes": [], "dropout_rate": 0.125}, "data": {"target": ["a"]}}
    )
    assert RunConfig.from_dict(tomllib.loads(to_toml(cfg.to_dict()))) == cfg
    with pytest.raises(SettingError, match="time_column is None"):
        to_toml(RunConfig().replace({"data": {"time_column": None}}).to_dict())
