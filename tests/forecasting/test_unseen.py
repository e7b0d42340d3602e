"""A panel run forecasts series it was never trained on (``predict(..., unseen="model")``),
each scaled on its own rows as the run scaled its series on their training rows: a series
that is a copy of a trained one gets that series' forecast, and one that is an affine copy
of another new series gets the affine copy of its forecast."""

import numpy as np
import pandas as pd
import pytest

from helpers import _panel
from stacklstm.config import RunConfig
from stacklstm.data import DataError
from stacklstm.forecasting import predict
from stacklstm.run import fit

SETTINGS = {
    "data": {"target": ("y",), "time_column": "ds", "id_column": "unique_id", "window": 8,
             "horizon": 3, "season": 7, "val_fraction": 0.0, "test_fraction": 0.0},
    "model": {"lstm_hidden_size": 8},
    "train": {"epochs": 2, "batch_size": 16, "patience": 0, "min_steps": 0, "baselines": "naive"},
}  # fmt: skip


def _run(tmp_path, name, **data):
    table = tmp_path / f"{name}.csv"
    _panel(("a", "b", "c"), n=60).to_csv(table, index=False)
    cfg = RunConfig().replace({**SETTINGS, "data": {**SETTINGS["data"], **data}})
    fit(cfg, tmp_path / name, quiet=True, data_path=table)
    return tmp_path / name


def _forecasts(frame):
    return {name: rows.drop(columns="unique_id").reset_index(drop=True)
            for name, rows in frame.groupby("unique_id")}  # fmt: skip


def test_a_copy_of_a_trained_series_gets_its_forecast(tmp_path):
    run = _run(tmp_path, "run")  # every row scales each series: no validation or test rows
    panel = _panel(("a", "b", "c"), n=60)
    copy = panel[panel["unique_id"] == "a"].assign(unique_id="new")
    table = tmp_path / "new.csv"
    pd.concat([panel, copy]).to_csv(table, index=False)
    got = _forecasts(predict(run, table, format="long", unseen="model"))
    assert sorted(got) == ["a", "b", "c", "new"] and "forecaster" not in got["new"]
    pd.testing.assert_frame_equal(got["new"], got["a"])
    # the default: the new series gets the seasonal naive forecast, as before
    before = predict(run, table, format="long")
    fallback = before[before["unique_id"] == "new"]
    assert (fallback["forecaster"] == "seasonal_naive").all()
    np.testing.assert_allclose(fallback["stacklstm"], copy["y"].to_numpy()[-7:-4], rtol=1e-12)


def test_an_affine_copy_of_a_new_series_gets_the_affine_copy_of_its_forecast(tmp_path):
    run = _run(tmp_path, "plain", target_transform="none")  # the log is not affine
    fresh = _panel(("x",), n=40, seed=3)
    fresh["y"] = 3 + 2 * np.cos(np.arange(40) * 0.9) + 0.3 * np.sin(np.arange(40))
    scaled = fresh.assign(unique_id="y", y=10 * fresh["y"] + 5)
    table = tmp_path / "fresh.csv"
    pd.concat([fresh, scaled]).to_csv(table, index=False)
    got = _forecasts(predict(run, table, format="long", unseen="model"))
    assert sorted(got) == ["x", "y"]
    np.testing.assert_allclose(got["y"]["stacklstm"], 10 * got["x"]["stacklstm"] + 5, rtol=1e-5)
    assert not np.allclose(got["x"]["stacklstm"], got["x"]["stacklstm"].iloc[0])  # a forecast


def test_unseen_is_checked_and_a_new_series_shorter_than_the_window_is_forecast(tmp_path):
    run = _run(tmp_path, "run")
    with pytest.raises(ValueError, match="unseen must be 'fallback' or 'model', got 'all'"):
        predict(run, unseen="all")
    short = _panel(("tiny",), n=5)
    table = tmp_path / "short.csv"
    pd.concat([_panel(("a",), n=60), short]).to_csv(table, index=False)
    got = predict(run, table, format="long", unseen="model")  # padded windows: 5 rows do
    assert sorted(set(got["unique_id"])) == ["a", "tiny"] and "forecaster" not in got
    assert np.isfinite(got["stacklstm"]).all()
    with pytest.raises(DataError):  # the run's own data, a name it lacks
        predict(run, ids=["zz"], unseen="model")
