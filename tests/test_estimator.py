"""LSTMForecaster: the DataFrame API on the fit/predict path of the command line, checked
against stacklstm.forecasting.predict on the same run folder. (Cross-validation, the settings and
the frames are tests/estimator/.)"""

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
from helpers import TINY, _main, _panel, cache_env
from stacklstm.estimator import TABLE_FILE, LSTMForecaster
from stacklstm.forecasting import predict


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


def test_combine_adds_the_reports_combination_as_predict_gives_it(fitted):
    out = fitted.predict(combine=True)
    wide = _last_origins(predict(fitted.run_dir, combine=True))
    assert list(out.columns) == ["unique_id", "ds", "stacklstm", "stacklstm-combination"]
    for _, row in wide.iterrows():
        mine = out[out["unique_id"] == row["id"]].reset_index(drop=True)
        np.testing.assert_array_equal(
            mine["stacklstm-combination"], [row[f"y_h{k}_combination"] for k in (1, 2, 3)]
        )
        np.testing.assert_array_equal(mine["stacklstm"], [row[f"y_h{k}"] for k in (1, 2, 3)])


def test_levels_are_named_as_statsforecast_and_nest_around_the_point(fitted):
    out = fitted.predict(level=[80, 95])
    assert list(out.columns) == [
        "unique_id",
        "ds",
        "stacklstm",
        "stacklstm-lo-80",
        "stacklstm-hi-80",
        "stacklstm-lo-95",
        "stacklstm-hi-95",
    ]
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
            assert report[split]["model"][key] == pytest.approx(
                trained[split]["model"][key], rel=1e-12
            )
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
    future = pd.DataFrame(
        {
            "unique_id": np.repeat(["a", "b"], 3),
            "ds": np.tile(pd.date_range("2020-03-01", periods=3, freq="D"), 2),
            "promo": [1.0, 0.0, 0.0, 0.0, 1.0, 0.0],
        }
    )
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
    new = df[df["unique_id"] == "a"].assign(unique_id="z")  # a series the run never saw
    said = r"df has series the model was not trained on \(\['z'\]\) and lacks the static "
    with pytest.raises(ValueError, match=said):
        model.predict(df=new, futr_df=future.assign(unique_id=["z"] * 3 + ["b"] * 3))


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
    ]
    code, _, err = _main("evaluate", run, "--quiet")  # its own table, no --data
    assert code == 0, err
    before = json.loads((run / "report.json").read_text())["test"]["model"]
    expected = model.predict()
    moved = shutil.move(run, tmp_path / "moved")
    code, _, err = _main("evaluate", moved, "--quiet")
    assert code == 0, err
    assert json.loads((tmp_path / "moved" / "report.json").read_text())["test"]["model"] == before
    assert LSTMForecaster.load(moved).predict().equals(expected)
    with pytest.raises(ValueError, match=r"not empty; load the run in it"):  # refused, kept
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
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=300,
        env=cache_env(),
        cwd=tmp_path,
    )
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


def test_a_series_too_short_for_a_window_gets_the_seasonal_naive_forecast_named():
    panel = _panel()
    # 3 rows: not one training window of horizon 3 even in the model trained on every row
    short = pd.DataFrame(
        {"unique_id": "short", "ds": pd.date_range("2020-02-27", periods=3), "y": [3.0, 4.0, 5.0]}
    )
    model = LSTMForecaster(**TINY).fit(pd.concat([panel, short], ignore_index=True))
    out = model.predict()
    assert list(out.columns) == ["unique_id", "ds", "forecaster", "stacklstm"]
    mine = out[out["unique_id"] == "short"]
    # 3 rows, fewer than a season of 7: the last value, for each of the 3 steps
    assert mine["forecaster"].tolist() == ["seasonal_naive"] * 3
    assert mine["stacklstm"].tolist() == [5.0, 5.0, 5.0]
    assert mine["ds"].tolist() == list(pd.date_range("2020-03-01", periods=3))
    # the other series: the model's forecasts, as without the short one
    others = out[out["unique_id"] != "short"].drop(columns="forecaster").reset_index(drop=True)
    assert set(out[out["unique_id"] != "short"]["forecaster"]) == {"model"}
    alone = LSTMForecaster(**TINY).fit(panel).predict()
    pd.testing.assert_frame_equal(others, alone)
    report = json.loads((model.run_dir / "report.json").read_text())
    assert report["fallback"] == {"short": "seasonal_naive"}
