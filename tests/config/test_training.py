"""ModelConfig and TrainConfig: LSTMModel's defaults, and one error per kind of mistake."""

import dataclasses
import inspect

import pytest

from stacklstm import LSTMModel, StackedLSTM
from stacklstm.checks import SettingError, SettingTypeError
from stacklstm.config import ModelConfig
from stacklstm.forecaster import build_model


def test_model_config_defaults_are_lstm_models():
    model_defaults = {
        name: p.default
        for name, p in inspect.signature(LSTMModel).parameters.items()
        if name in {f.name for f in dataclasses.fields(ModelConfig)}
    }
    # every field but `hybrid` (which model to build) is an LSTMModel argument, same default
    config_defaults = {f.name: f.default for f in dataclasses.fields(ModelConfig)}
    assert config_defaults.pop("hybrid") is False
    assert config_defaults == model_defaults
    assert build_model(ModelConfig(), output_size=1) == LSTMModel()


def test_one_exception_type_and_message_per_kind_of_mistake():
    """The model and the config reject the same value the same way."""
    for bad, kind in (("32,16", SettingTypeError), ([32, 0], SettingError)):
        with pytest.raises(kind) as from_model:
            LSTMModel(linear_layer_sizes=bad)
        with pytest.raises(kind) as from_config:
            ModelConfig(linear_layer_sizes=bad)
        assert str(from_model.value) == str(from_config.value)
    with pytest.raises(SettingTypeError, match="bidirectional must be true or false"):
        StackedLSTM(4, bidirectional="yes")
    with pytest.raises(SettingTypeError, match="bidirectional must be true or false"):
        ModelConfig(bidirectional="yes")
    # a type mistake is both a TypeError and a ValueError
    assert issubclass(SettingTypeError, TypeError) and issubclass(SettingTypeError, ValueError)
