"""cross_validation: statsforecast's rows, the run's forecasts from each cut-off, refits."""

import numpy as np
import pandas as pd
import pytest

import stacklstm.estimator.crossval as crossval
from helpers import TINY, _panel
from stacklstm.estimator import LSTMForecaster
from stacklstm.forecasting import predict


@pytest.fixture
def scratches(monkeypatch):
    """The estimators that cross_validation trains (copies; the caller's is left alone)."""
    made = []

    def spy(model):
        made.append(real(model))
        return made[-1]

    real = crossval._scratch_copy
    monkeypatch.setattr(crossval, "_scratch_copy", spy)
    return made


def test_cross_validation_has_statsforecasts_rows_and_the_models_forecasts(scratches):
    from statsforecast import StatsForecast
    from statsforecast.models import Naive

    df = _panel(seed=1).sample(frac=1.0, random_state=0)  # any row order
    model = LSTMForecaster(**TINY, alias="lstm")
    cv = model.cross_validation(df, n_windows=3, step_size=2)
    ref = StatsForecast(models=[Naive()], freq="D").cross_validation(
        df=df, h=3, n_windows=3, step_size=2
    )
    keys = ["unique_id", "ds", "cutoff", "y"]
    assert list(cv.columns) == [*keys, "lstm"]
    ours = cv[keys].sort_values(["unique_id", "cutoff", "ds"]).reset_index(drop=True)
    theirs = ref[keys].sort_values(["unique_id", "cutoff", "ds"]).reset_index(drop=True)
    pd.testing.assert_frame_equal(ours, theirs)
    merged = cv.merge(ref, on=["unique_id", "ds", "cutoff"], validate="one_to_one")
    assert len(merged) == len(cv) == 3 * 3 * 3
    with pytest.raises(ValueError, match="not fitted"):  # the estimator was left unfitted
        model.predict()
    (model,) = scratches
    # trained on the rows up to the first cut-off only
    train = pd.read_parquet(model._table)
    assert train.groupby("unique_id")["ds"].max().eq(pd.Timestamp("2020-02-22")).all()
    # the forecasts are the run's forecasts from the cut-offs, whatever rows follow them
    full = model._table.parent / "full.parquet"
    df.to_parquet(full)
    wide = predict(model.run_dir, full)
    for _, row in cv.iterrows():
        k = (row["ds"] - row["cutoff"]).days
        at = wide[(wide["id"] == row["unique_id"]) & (wide["origin"] == row["cutoff"])]
        assert len(at) == 1
        np.testing.assert_allclose(row["lstm"], at[f"y_h{k}"].iloc[0], rtol=1e-6)


@pytest.mark.slow  # a fit per cut-off: about 16 s
def test_cross_validation_with_refit_trains_up_to_each_cutoff(scratches, tmp_path):
    df = _panel(ids=("a", "b"), seed=5)
    model = LSTMForecaster(**{**TINY, "epochs": 1}, run_dir=tmp_path / "run")
    cv = model.cross_validation(df, n_windows=2, step_size=3, refit=True)
    assert not (tmp_path / "run").exists()  # the cross-validation's runs are its own
    assert sorted(cv["cutoff"].unique()) == [pd.Timestamp("2020-02-23"), pd.Timestamp("2020-02-26")]
    assert len(cv) == 2 * 2 * 3
    model = scratches[0]  # the last window's model, trained on the rows up to its cut-off
    train = pd.read_parquet(model._table)
    assert train.groupby("unique_id")["ds"].max().eq(pd.Timestamp("2020-02-26")).all()
    full = model._table.parent / "full.parquet"
    df.to_parquet(full)
    wide = predict(model.run_dir, full)
    last = cv[cv["cutoff"] == pd.Timestamp("2020-02-26")]
    for _, row in last.iterrows():
        k = (row["ds"] - row["cutoff"]).days
        at = wide[(wide["id"] == row["unique_id"]) & (wide["origin"] == row["cutoff"])]
        np.testing.assert_allclose(row["stacklstm"], at[f"y_h{k}"].iloc[0], rtol=1e-6)
    np.testing.assert_array_equal(
        cv["y"],
        df.set_index(["unique_id", "ds"]).loc[
            list(zip(cv["unique_id"], cv["ds"], strict=True)), "y"
        ],
    )


def test_cross_validation_refuses_too_few_rows_before_the_first_cutoff():
    model = LSTMForecaster(**{**TINY, "epochs": 1})
    with pytest.raises(ValueError, match=r"has 40 rows but 14 window.*need more than 42"):
        model.cross_validation(_panel(ids=("a",), n=40), n_windows=14, step_size=3)
    with pytest.raises(ValueError, match="10 rows but the run needs at least 16"):
        model.cross_validation(_panel(ids=("a",), n=40), n_windows=10, step_size=3)


@pytest.mark.slow  # a fit and a cross-validation: about 20 s
def test_cross_validation_leaves_a_fitted_estimator_as_it_was(tmp_path):
    df = _panel(ids=("a", "b"), seed=3)
    model = LSTMForecaster(**{**TINY, "epochs": 1}, run_dir=tmp_path / "run").fit(df)
    before = model.predict()
    files = sorted(p.relative_to(model.run_dir) for p in model.run_dir.rglob("*"))
    model.cross_validation(df, n_windows=2, step_size=3, refit=True)
    pd.testing.assert_frame_equal(model.predict(), before)
    assert model.run_dir == (tmp_path / "run").absolute()
    assert sorted(p.relative_to(model.run_dir) for p in model.run_dir.rglob("*")) == files


def test_cross_validation_refuses_a_frame_with_gaps():
    df = _panel(ids=("a", "b"), seed=2)
    gappy = df.drop(df.index[(df["unique_id"] == "b") & (df["ds"] == pd.Timestamp("2020-02-10"))])
    model = LSTMForecaster(**{**TINY, "epochs": 1})
    said = r"series 'b' misses 1 time step\(s\) of its grid \(step D\), the first 2020-02-10"
    with pytest.raises(ValueError, match=said):
        model.cross_validation(gappy, n_windows=2)


def test_cross_validation_names_a_duplicate_row_as_the_caller_numbers_it():
    df = _panel(ids=("a", "b"), seed=2).sample(frac=1.0, random_state=1).reset_index(drop=True)
    twice = pd.concat([df, df.iloc[[5]]], ignore_index=True)  # row 5 again, as row len(df)
    model = LSTMForecaster(**{**TINY, "epochs": 1})
    with pytest.raises(ValueError, match=rf"the first at rows \[5, {len(df)}\] of df"):
        model.cross_validation(twice, n_windows=2)
