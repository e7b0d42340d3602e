"""LSTMForecaster under odd use: pickled and loaded in another process, future rows given to a
model without future features, a named column missing, time zones, mixed ids, an alias that
clashes."""

import pickle
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from helpers import TINY, _panel
from stacklstm.estimator import LSTMForecaster

SETTINGS = {**TINY, "retrain": "off"}  # one run each: these tests are about the frames


@pytest.fixture(scope="module")
def fitted():
    return LSTMForecaster(**SETTINGS).fit(_panel())


def test_a_pickled_estimator_forecasts_in_another_process(fitted, tmp_path):
    path = tmp_path / "model.pkl"
    path.write_bytes(pickle.dumps(fitted))
    expected = fitted.predict()
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            textwrap.dedent(f"""
            import pickle
            model = pickle.loads(open({str(path)!r}, "rb").read())
            model.predict().to_parquet({str(tmp_path / "out.parquet")!r})
        """),
        ],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    pd.testing.assert_frame_equal(pd.read_parquet(tmp_path / "out.parquet"), expected)
    copy = pickle.loads(pickle.dumps(fitted))  # a folder of its own, not the original's
    assert copy.run_dir != fitted.run_dir and copy.run_dir.is_dir()
    pd.testing.assert_frame_equal(copy.predict(), expected)
    unfitted = pickle.loads(pickle.dumps(LSTMForecaster(horizon=3)))
    assert unfitted.settings == {"horizon": 3}


def test_future_rows_for_a_model_without_future_features_are_refused(fitted):
    futr = pd.DataFrame({"unique_id": ["a"] * 3, "ds": pd.date_range("2020-03-01", periods=3)})
    with pytest.raises(ValueError, match="trained without `future_features`"):
        fitted.predict(futr_df=futr)


def test_a_named_time_column_missing_from_the_frame_is_an_error():
    shuffled = _panel().sample(frac=1.0, random_state=0)
    with pytest.raises(ValueError, match=r"df lacks the column\(s\) 'date'"):
        LSTMForecaster(**SETTINGS, time_col="date").fit(shuffled)


def test_time_zones_come_back_as_given():
    df = _panel()
    df["ds"] = df["ds"].dt.tz_localize("Europe/Paris")
    out = LSTMForecaster(**SETTINGS).fit(df).predict()
    assert out["ds"].dt.tz is not None and str(out["ds"].dt.tz) == "Europe/Paris"
    last = df.groupby("unique_id")["ds"].max().iloc[0]
    assert out["ds"].min() == last + pd.Timedelta(days=1)


def test_mixed_ids_and_a_clashing_alias_are_named():
    df = _panel()
    df["unique_id"] = df["unique_id"].astype(object)
    df.loc[df["unique_id"] == "a", "unique_id"] = 1
    with pytest.raises(TypeError, match="column 'unique_id' mixes values of the types int, str"):
        LSTMForecaster(**SETTINGS).fit(df)
    for alias in ("y", "unique_id", "ds", "cutoff"):
        with pytest.raises(ValueError, match=f"alias '{alias}' is also"):
            LSTMForecaster(alias=alias)
    assert np.isfinite(
        LSTMForecaster(**SETTINGS, alias="lstm").fit(_panel()).predict()["lstm"]
    ).all()


def test_a_history_of_one_row_per_series_forecasts_at_the_runs_time_step(fitted, tmp_path):
    from stacklstm.forecasting import predict

    df = _panel()
    last = df.sort_values("ds").groupby("unique_id").tail(1)
    out = fitted.predict(df=last)  # too short to show a time step: the training data's
    ends = last.set_index("unique_id")["ds"]
    for name, rows in out.groupby("unique_id"):
        expected = pd.date_range(ends[name], periods=4, freq="D")[1:]
        assert list(rows["ds"]) == list(expected)
    last.to_parquet(tmp_path / "last.parquet")
    wide = predict(fitted.run_dir, tmp_path / "last.parquet")  # the every-origin table
    for name, rows in out.groupby("unique_id"):
        at = wide[wide["id"] == name].iloc[-1]
        np.testing.assert_allclose(rows["stacklstm"], [at[f"y_h{k}"] for k in (1, 2, 3)])
