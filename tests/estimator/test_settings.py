"""The estimator's keywords: unknown ones and column settings are type errors."""

import pytest

from stacklstm.estimator import LSTMForecaster


def test_unknown_keywords_and_column_settings_are_type_errors():
    with pytest.raises(
        TypeError, match=r"'lstm_hiden_size'.*accepts alias, id_col.*lstm_hidden_size"
    ):
        LSTMForecaster(lstm_hiden_size=8)
    with pytest.raises(TypeError, match="pass target_col"):
        LSTMForecaster(target=("y",))
    with pytest.raises(TypeError, match="'hidden_size' and 'lstm_hidden_size' are the same"):
        LSTMForecaster(hidden_size=8, lstm_hidden_size=8)
    with pytest.raises(ValueError, match="horizon"):  # a bad value: the config's own check
        LSTMForecaster(horizon=0)
    cfg = LSTMForecaster(hidden_size=4)._base_config(time=True, ids=False, statics=())
    assert cfg.model.lstm_hidden_size == 4  # the older spelling, as on the command line
