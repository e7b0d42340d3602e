"""LSTMForecaster: the DataFrame API on the fit/predict path of the command line, checked
against stacklstm.train.predict on the same run folder and against statsforecast's
cross-validation rows."""

import gc
import json
import os
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

import stacklstm
from helpers import _main, cache_env
from stacklstm.estimator import TABLE_FILE, LSTMForecaster
from stacklstm.train import predict

# tiny and fully explicit settings (nothing "auto" to resolve from the data), naive baselines
TINY = dict(
    horizon=3, window=8, season=7, deseasonalize=False, lstm_hidden_size=8, epochs=2,
    batch_size=16, patience=0, min_steps=0, baselines="naive", test_size=6, val_size=6, seed=0,
)  # fmt: skip


def _panel(ids=("a", "b", "c"), n=60, start="2020-01-01", seed=0):
    """A daily panel of weekly sines with noise: ``unique_id, ds, y``."""
    rng = np.random.default_rng(seed)
    parts = []
    for i, name in enumerate(ids):
        t = np.arange(n)
        y = 10 + i + np.sin(2 * np.pi * t / 7) + 0.1 * rng.standard_normal(n)
        ds = pd.date_range(start, periods=n, freq="D")
        parts.append(pd.DataFrame({"unique_id": name, "ds": ds, "y": y}))
    return pd.concat(parts, ignore_index=True)


@pytest.fixture(scope="module")
def fitted():
    """One conformal model on the panel (intervals at 80 and 95)."""
    return LSTMForecaster(**TINY, conformal=True).fit(_panel())


def _last_origins(wide):
    """The wide frame's row of each series' last origin."""
    return wide.groupby("id", sort=False).tail(1).reset_index(drop=True)


def test_predict_is_the_run_folders_forecast_from_each_series_last_row(fitted):
    out = fitted.predict()
    wide = _last_origins(predict(fitted.run_dir))  # the same run folder, the library's call
    assert list(out.columns) == ["unique_id", "ds", "stacklstm"]
    assert len(out) == 3 * 3
    for _, row in wide.iterrows():
        mine = out[out["unique_id"] == row["id"]].reset_index(drop=True)
        assert row["origin"] == pd.Timestamp("2020-02-29")  # 60 days from 2020-01-01
        expected_ds = [row["origin"] + pd.Timedelta(days=k) for k in (1, 2, 3)]
        assert mine["ds"].tolist() == expected_ds
        np.testing.assert_array_equal(mine["stacklstm"], [row[f"y_h{k}"] for k in (1, 2, 3)])
    assert out["ds"].dtype == _panel()["ds"].dtype


def test_levels_are_named_as_statsforecast_and_nest_around_the_point(fitted):
    out = fitted.predict(level=[80, 95])
    assert list(out.columns) == [
        "unique_id", "ds", "stacklstm", "stacklstm-lo-80", "stacklstm-hi-80",
        "stacklstm-lo-95", "stacklstm-hi-95",
    ]  # fmt: skip
    assert (out["stacklstm-lo-95"] <= out["stacklstm-lo-80"]).all()
    assert (out["stacklstm-lo-80"] <= out["stacklstm"]).all()
    assert (out["stacklstm"] <= out["stacklstm-hi-80"]).all()
    assert (out["stacklstm-hi-80"] <= out["stacklstm-hi-95"]).all()
    assert (out["stacklstm-hi-95"] > out["stacklstm-lo-95"]).all()
    wide = _last_origins(predict(fitted.run_dir))
    first = wide.iloc[0]
    np.testing.assert_array_equal(
        out[out["unique_id"] == first["id"]]["stacklstm-lo-80"],
        [first[f"y_h{k}_q0.1"] for k in (1, 2, 3)],
    )
    with pytest.raises(ValueError, match=r"no interval at level 50.*80, 95"):
        fitted.predict(level=[50])


def test_a_model_without_intervals_refuses_a_level():
    model = LSTMForecaster(**{**TINY, "epochs": 1}).fit(_panel(ids=("a",)))
    assert list(model.predict().columns) == ["unique_id", "ds", "stacklstm"]
    with pytest.raises(ValueError, match=r"without intervals.*conformal"):
        model.predict(level=[80])


def test_cross_validation_has_statsforecasts_rows_and_the_models_forecasts():
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


def test_cross_validation_with_refit_trains_up_to_each_cutoff():
    df = _panel(ids=("a", "b"), seed=5)
    model = LSTMForecaster(**{**TINY, "epochs": 1})
    cv = model.cross_validation(df, n_windows=2, step_size=3, refit=True)
    assert sorted(cv["cutoff"].unique()) == [pd.Timestamp("2020-02-23"), pd.Timestamp("2020-02-26")]
    assert len(cv) == 2 * 2 * 3
    # the estimator keeps the last window's model, trained on the rows up to its cut-off
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
    np.testing.assert_array_equal(cv["y"], df.set_index(["unique_id", "ds"]).loc[
        list(zip(cv["unique_id"], cv["ds"], strict=True)), "y"])  # fmt: skip


def test_cross_validation_refuses_too_few_rows_before_the_first_cutoff():
    model = LSTMForecaster(**{**TINY, "epochs": 1})
    with pytest.raises(ValueError, match=r"has 40 rows but 14 window.*need more than 42"):
        model.cross_validation(_panel(ids=("a",), n=40), n_windows=14, step_size=3)
    with pytest.raises(ValueError, match="10 rows but the run needs at least 23"):
        model.cross_validation(_panel(ids=("a",), n=40), n_windows=10, step_size=3)


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


def test_save_and_load_give_the_same_forecasts_and_the_cli_reads_the_folder(fitted, tmp_path):
    saved = fitted.save(tmp_path / "saved")
    assert (saved / TABLE_FILE).is_file()
    # the folder names its own table relative to itself: nothing outside it is read
    assert json.loads((saved / "config.json").read_text())["data_path"] == TABLE_FILE
    moved = tmp_path / "elsewhere" / "moved"
    moved.parent.mkdir()
    shutil.move(saved, moved)
    code, _, err = _main("evaluate", moved, "--quiet")  # no --data: the folder's own table
    assert code == 0, err
    report = json.loads((moved / "report.json").read_text())
    assert report["data_path"] == str(moved.absolute() / TABLE_FILE)
    trained = json.loads((fitted.run_dir / "report.json").read_text())
    for split in ("test", "val"):
        for key in ("mae", "rmse", "mape", "smape", "mase"):
            assert report[split]["model"][key] == pytest.approx(trained[split]["model"][key],
                                                                rel=1e-12)  # fmt: skip
    saved = moved
    loaded = LSTMForecaster.load(saved)
    pd.testing.assert_frame_equal(loaded.predict(level=[80]), fitted.predict(level=[80]))
    code, _, err = _main("predict", saved, "--format", "long", "--output", tmp_path / "f.csv")
    assert code == 0, err
    cli = pd.read_csv(tmp_path / "f.csv", parse_dates=["ds"])
    mine = fitted.predict(level=[80, 95])
    pd.testing.assert_frame_equal(cli, mine)
    with pytest.raises(ValueError, match="new or empty folder"):
        fitted.save(saved)


def test_future_and_static_covariates_come_from_futr_df_and_static_df():
    df = _panel(ids=("a", "b"), seed=2)
    df["promo"] = (df["ds"].dt.dayofweek == 5).astype(float)
    df["y"] += df["promo"]
    static = pd.DataFrame({"unique_id": ["a", "b"], "size": [1.0, 3.0]})
    model = LSTMForecaster(**TINY, future_features=("promo",)).fit(df, static_df=static)
    assert model.config.data.static_features == ("size",)
    future = pd.DataFrame({
        "unique_id": np.repeat(["a", "b"], 3),
        "ds": np.tile(pd.date_range("2020-03-01", periods=3, freq="D"), 2),
        "promo": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0],
    })  # fmt: skip
    out = model.predict(futr_df=future)
    table = pd.concat([df.merge(static), future.merge(static).assign(y=np.nan)])
    path = model._table.parent / "with_future.parquet"
    table.to_parquet(path)
    wide = _last_origins(predict(model.run_dir, path))
    np.testing.assert_array_equal(
        out["stacklstm"], wide[["y_h1", "y_h2", "y_h3"]].to_numpy().ravel()
    )
    other = model.predict(futr_df=future.assign(promo=1 - future["promo"]))
    assert not np.allclose(other["stacklstm"], out["stacklstm"])  # the future values are read
    with pytest.raises(ValueError, match="horizon"):
        model.predict()  # no future rows in the training frame


def test_one_series_without_id_or_time_column_steps_in_whole_numbers():
    df = _panel(ids=("a",))[["y"]]
    model = LSTMForecaster(**{**TINY, "epochs": 1, "season": 1}).fit(df)
    out = model.predict()
    assert out["ds"].tolist() == [60, 61, 62]
    assert out["unique_id"].tolist() == ["y"] * 3
    wide = predict(model.run_dir)
    np.testing.assert_array_equal(out["stacklstm"], wide.iloc[-1][["y_h1", "y_h2", "y_h3"]])


def test_run_dir_keeps_a_self_contained_run_the_cli_reads(tmp_path):
    run = tmp_path / "runs" / "panel"
    model = LSTMForecaster(**{**TINY, "epochs": 1}, run_dir=run).fit(_panel(ids=("a", "b")))
    assert model.run_dir == run
    assert (run / TABLE_FILE).is_file() and sorted(p.name for p in run.parent.iterdir()) == [
        "panel"
    ]  # fmt: skip
    code, _, err = _main("evaluate", run, "--quiet")  # its own table, no --data
    assert code == 0, err
    before = json.loads((run / "report.json").read_text())["test"]["model"]
    expected = model.predict()
    moved = shutil.move(run, tmp_path / "moved")
    code, _, err = _main("evaluate", moved, "--quiet")
    assert code == 0, err
    assert json.loads((tmp_path / "moved" / "report.json").read_text())["test"]["model"] == before
    assert LSTMForecaster.load(moved).predict().equals(expected)
    with pytest.raises(ValueError, match="already holds a run"):  # refused, and kept
        LSTMForecaster(**{**TINY, "epochs": 1}, run_dir=moved).fit(_panel(ids=("a",)))
    assert (tmp_path / "moved" / "config.json").is_file()


def test_the_temporary_run_folder_goes_with_the_estimator():
    model = LSTMForecaster(**{**TINY, "epochs": 1}).fit(_panel(ids=("a",)))
    workspace = model.run_dir.parent
    assert (workspace / "run" / "config.json").is_file()
    model.fit(_panel(ids=("a",), seed=3))  # a new fit: the old folder is removed
    assert not workspace.exists()
    workspace = model.run_dir.parent
    del model
    gc.collect()
    assert not workspace.exists()


def test_the_temporary_run_folder_is_removed_at_exit(tmp_path):
    script = textwrap.dedent(f"""
        import numpy as np, pandas as pd
        from stacklstm import LSTMForecaster
        df = pd.DataFrame({{"y": np.sin(np.arange(40.0))}})
        model = LSTMForecaster(**{dict(TINY, epochs=1, season=1)!r}).fit(df)
        print(model.run_dir.parent)
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=300, env=cache_env(), cwd=tmp_path)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    workspace = done.stdout.strip().splitlines()[-1]
    assert "stacklstm-" in workspace
    assert not os.path.exists(workspace)
    assert list(tmp_path.iterdir()) == []  # nothing written where it ran


def test_the_estimator_loads_lazily():
    code = "import sys, stacklstm; print('stacklstm.estimator' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr
    assert stacklstm.LSTMForecaster is LSTMForecaster


def test_to_long_by_hand_two_targets_monthly_steps_and_levels():
    from stacklstm.train.prediction import to_long

    wide = pd.DataFrame({
        "id": ["s", "s", "t"],
        "origin": pd.to_datetime(["2020-01-01", "2020-02-01", "2020-12-01"]),
        "u_h1": [1.0, 2.0, 3.0], "u_h1_q0.1": [0.5, 1.5, 2.5], "u_h1_q0.9": [1.5, 2.5, 3.5],
        "u_h2": [4.0, 5.0, 6.0], "u_h2_q0.1": [3.5, 4.5, 5.5], "u_h2_q0.9": [4.5, 5.5, 6.5],
        "v_h1": [7.0, 8.0, 9.0], "v_h1_q0.1": [7.0, 8.0, 9.0], "v_h1_q0.9": [7.0, 8.0, 9.0],
        "v_h2": [0.0, 0.0, 1.0], "v_h2_q0.1": [0.0, 0.0, 1.0], "v_h2_q0.9": [0.0, 0.0, 1.0],
    })  # fmt: skip
    long = to_long(wide, ["u", "v"], 2, "MS", levels=[80], alias="m")
    assert list(long.columns) == ["unique_id", "ds", "m", "m-lo-80", "m-hi-80"]
    assert long["unique_id"].tolist() == ["s/u", "s/u", "t/u", "t/u", "s/v", "s/v", "t/v", "t/v"]
    assert long["ds"].dt.strftime("%Y-%m-%d").tolist() == [
        "2020-03-01", "2020-04-01", "2021-01-01", "2021-02-01",
    ] * 2  # fmt: skip
    assert long["m"].tolist() == [2.0, 5.0, 3.0, 6.0, 8.0, 0.0, 9.0, 1.0]
    assert long["m-lo-80"].tolist()[:4] == [1.5, 4.5, 2.5, 5.5]
    every = to_long(wide[["id", "origin", "u_h1", "u_h2"]], ["u"], 2, "MS", every_origin=True)
    assert list(every.columns) == ["unique_id", "ds", "cutoff", "stacklstm"]
    assert len(every) == 6 and every["cutoff"].nunique() == 3
    with pytest.raises(ValueError, match=r"level 95 needs the quantiles 0\.025 and 0\.975"):
        to_long(wide, ["u", "v"], 2, "MS", levels=[95])
    with pytest.raises(ValueError, match="irregular"):
        to_long(wide, ["u"], 2, None)
