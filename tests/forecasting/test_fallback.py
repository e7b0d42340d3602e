"""The seasonal naive fallback of a panel's series that the model cannot forecast."""

import numpy as np
import pandas as pd
import pytest

from stacklstm.config import DataConfig
from stacklstm.data import prepare_series
from stacklstm.forecasting.fallback import (
    fallback_frame,
    fallback_ids,
    merge,
    seasonal_naive,
)


def test_seasonal_naive_repeats_the_last_season_or_the_last_value():
    y = np.arange(1.0, 8.0)[:, None] * np.array([[1.0, 10.0]])  # (7, 2): two targets
    got = seasonal_naive(y, season=3, horizon=5)
    # the last season is rows 4, 5, 6 (values 5, 6, 7), repeated
    np.testing.assert_array_equal(got[:, 0], [5.0, 6.0, 7.0, 5.0, 6.0])
    np.testing.assert_array_equal(got[:, 1], [50.0, 60.0, 70.0, 50.0, 60.0])
    # fewer rows than a season: the last value
    np.testing.assert_array_equal(seasonal_naive(y[:2], season=3, horizon=2)[:, 0], [2.0, 2.0])


def _panel():
    frame = pd.DataFrame(
        {
            "id": ["a"] * 6 + ["b"] * 3 + ["c"] * 5,
            "t": list(range(6)) + list(range(3)) + list(range(5)),
            "y": [1.0, 2, 3, 4, 5, 6, 10, 20, 30, 7, 8, 9, 10, 11],
        }
    )
    cfg = DataConfig(target=("y",), id_column="id", time_column="t", window=4, horizon=2, season=2)
    return prepare_series(frame, cfg), cfg


def test_fallback_ids_name_the_short_and_the_untrained_series():
    series, cfg = _panel()
    assert fallback_ids(series, ["a", "b"], cfg.input_steps) == {
        "b": "3 rows, one input window needs 4",
        "c": "no scaler: the run was not trained on it",
    }
    assert fallback_ids(series, ["a", "b", "c"], 3) == {}


def test_the_fallback_rows_and_their_place_among_the_models():
    series, _ = _panel()
    rows = fallback_frame(series, ["b", "c"], ["y"], 2, 2, others=("combination",))
    assert rows.columns.tolist() == [
        "id",
        "origin",
        "y_h1",
        "y_h1_combination",
        "y_h2",
        "y_h2_combination",
    ]
    # b: season 2 of rows 20, 30; c: 10, 11; each from its last stamp
    assert rows["y_h1"].tolist() == [20.0, 10.0] and rows["y_h2"].tolist() == [30.0, 11.0]
    assert rows["origin"].tolist() == [2, 4] and rows["y_h1_combination"].isna().all()
    model = pd.DataFrame(
        {
            "id": ["a", "a"],
            "origin": [4, 5],
            "y_h1": [0.5, 0.6],
            "y_h2": [0.7, 0.8],
            "y_h1_q0.1": [0.1, 0.2],
            "y_h2_q0.1": [0.3, 0.4],
        }
    )
    both = merge(model, rows[["id", "origin", "y_h1", "y_h2"]], ["c", "a", "b"])
    assert both.columns.tolist() == [
        "id",
        "origin",
        "forecaster",
        "y_h1",
        "y_h2",
        "y_h1_q0.1",
        "y_h2_q0.1",
    ]
    assert both["id"].tolist() == ["c", "a", "a", "b"]  # in the table's order
    assert both["forecaster"].tolist() == ["seasonal_naive", "model", "model", "seasonal_naive"]
    assert both["y_h1_q0.1"].isna().tolist() == [True, False, False, True]
    assert both.loc[1:2, "y_h1"].tolist() == [0.5, 0.6]


def test_a_panel_whose_every_series_needs_the_fallback(tmp_path):
    """A table of series the model cannot forecast gives every one the fallback, with the
    combination's columns (NaN) when it is asked for."""
    pytest.importorskip("pyarrow")
    from helpers import TINY
    from helpers import _panel as panel
    from stacklstm.estimator import LSTMForecaster
    from stacklstm.forecasting import predict

    model = LSTMForecaster(**TINY, run_dir=tmp_path / "run").fit(panel())
    short = pd.DataFrame(
        {
            "unique_id": ["new"] * 5,
            "ds": pd.date_range("2020-01-01", periods=5),
            "y": [1.0, 2.0, 3.0, 4.0, 5.0],
        }
    )
    table = tmp_path / "short.csv"
    short.to_csv(table, index=False)
    wide = predict(model.run_dir, table, combine=True)
    assert wide["forecaster"].tolist() == ["seasonal_naive"]
    assert wide[["y_h1", "y_h2", "y_h3"]].iloc[0].tolist() == [5.0, 5.0, 5.0]  # < a season
    long = predict(model.run_dir, table, format="long", combine=True)
    assert long["stacklstm"].tolist() == [5.0] * 3 and long["combination"].isna().all()
