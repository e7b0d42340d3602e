"""The data-derived settings: the window of a series too short for two seasons."""

import numpy as np
import pandas as pd
import pytest

from stacklstm.config import DataConfig, RunConfig
from stacklstm.data import make_splits
from stacklstm.train.resolve import prepare_resolved, resolve_data


def _cfg(**data):
    return RunConfig.from_dict({"data": {"target": ["y"], "time_column": None, **data}})


def test_auto_window_shrinks_to_fit_a_short_series():
    # no time column: season 1, window "auto" = 10. 24 rows, horizon 6: validation and test
    # each get max(round(0.15 * 24) = 4, 6) = 6 rows, training 12; room 12 - 6 = 6 < 10, so the
    # window is (6 + 1) // 2 = 3, leaving 12 - 3 - 6 + 1 = 4 training windows
    frame = pd.DataFrame({"y": np.sin(np.arange(24.0))})
    series, cfg = prepare_resolved(frame, _cfg(horizon=6))
    assert cfg.data.window == 3 and cfg.data.season == 1
    splits, _ = make_splits(series, cfg.data)
    assert (len(splits.train), len(splits.val), len(splits.test)) == (4, 1, 1)


def test_auto_window_is_two_seasons_where_it_fits_and_a_given_window_is_kept():
    frame = pd.DataFrame({"y": np.sin(np.arange(40.0))})  # 40 - 6 - 6 = 28 training rows
    assert prepare_resolved(frame, _cfg(horizon=6))[1].data.window == 10
    short = pd.DataFrame({"y": np.sin(np.arange(24.0))})
    series, cfg = prepare_resolved(short, _cfg(horizon=6, window=10))
    assert cfg.data.window == 10  # a window given by the user is never changed: it is refused
    with pytest.raises(ValueError, match=r"training split has 12 of 24 rows .* window \(10\)"):
        make_splits(series, cfg.data)


@pytest.mark.parametrize(
    ("freq", "id_column", "scaler", "padding"),
    [
        ("YS", "id", "naive", "repeat"),  # a panel without a season: steps set the scale
        ("MS", "id", "standard", "repeat"),  # a seasonal panel
        ("YS", None, "standard", "none"),  # one series
        (None, "id", "naive", "repeat"),  # no time step: season 1
    ],
)
def test_auto_scaler_and_padding_follow_the_panel_and_its_season(freq, id_column, scaler, padding):
    cfg = resolve_data(DataConfig(id_column=id_column), freq)
    assert (cfg.scaler, cfg.start_padding) == (scaler, padding)
    assert resolve_data(DataConfig(id_column=id_column, scaler="robust"), freq).scaler == "robust"
