"""Baselines: statsforecast's models against its own cross_validation, the report's every-origin
scoring and MASE against numpy, and the naive path without statsforecast."""

import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from helpers import SEASON, seasonal_values
from stacklstm import baselines, config
from stacklstm.checks import SettingError
from stacklstm.cli import main
from stacklstm.data import DataConfig, make_splits, prepare_series, read_table
from stacklstm.forecasting import predict
from stacklstm.run import fit
from stacklstm.train import ModelConfig, RunConfig, TrainConfig


def statsforecast_cv(history: np.ndarray, origins: np.ndarray, horizon: int, refit) -> dict:
    """``{name: (n, horizon, n_targets)}`` from statsforecast's own ``cross_validation``."""
    from statsforecast import StatsForecast

    n_rows, n_targets = history.shape
    frame = pd.concat(
        pd.DataFrame({"unique_id": f"s{j}", "ds": np.arange(n_rows), "y": history[:, j]})
        for j in range(n_targets)
    )
    models = baselines.statistical_models(SEASON, int(origins[0]) + 1)
    cv = StatsForecast(models=list(models.values()), freq=1).cross_validation(
        df=frame, h=horizon, n_windows=origins.size, step_size=1, refit=refit
    )
    # one row per (series, cutoff, ds): cutoff is the origin, ds = cutoff + step
    assert sorted(cv["cutoff"].unique().tolist()) == origins.tolist()
    cv = cv.sort_values(["unique_id", "cutoff", "ds"])
    columns = {"auto_ets": "AutoETS", "auto_arima": "AutoARIMA", "auto_theta": "AutoTheta"}
    out = {}
    for name, column in columns.items():
        values = cv[column].to_numpy().reshape(n_targets, origins.size, horizon)
        out[name] = values.transpose(1, 2, 0)  # (n, horizon, n_targets)
    return out


@pytest.mark.parametrize(("refit_every", "refit"), [(None, False), (5, 5)])
def test_statistical_forecasts_equal_statsforecast_cross_validation(refit_every, refit):
    history = np.stack([seasonal_values(60), seasonal_values(60, seed=1) * 3], axis=1)
    origins = np.arange(44, 57)  # 13 origins, horizon 3: the last target is row 59
    refit_at = [] if refit_every is None else origins[::refit_every].tolist()
    ours = baselines.statistical_forecasts(history, origins, 3, SEASON, refit_at)
    theirs = statsforecast_cv(history, origins, 3, refit)
    for name in baselines.STATISTICAL:
        assert ours[name].shape == (13, 3, 2)
        if name == "auto_theta":  # its decomposition's sums in another order: to rounding
            np.testing.assert_allclose(ours[name], theirs[name], rtol=1e-12, atol=0)
        else:
            np.testing.assert_array_equal(ours[name], theirs[name])
    # the forecasts use the data: a refit changes them, and they differ between models
    assert not np.array_equal(ours["auto_ets"], ours["auto_theta"])


def test_statistical_forecasts_refuse_bad_origins():
    history = seasonal_values(30)[:, None]
    with pytest.raises(ValueError, match="origins must ascend"):
        baselines.statistical_forecasts(history, np.array([20, 19]), 2, SEASON)
    with pytest.raises(ValueError, match=r"refit_at must be among the origins, got \[3\]"):
        baselines.statistical_forecasts(history, np.array([20, 21]), 2, SEASON, [3])


def _write_series(path, n=80):
    pd.DataFrame({"t": np.arange(n), "y": seasonal_values(n)}).to_csv(path, index=False)
    return path


def _tiny_cfg(baselines_kind: str, horizon: int = 3) -> RunConfig:
    return RunConfig(
        DataConfig(target=("y",), time_column=None, window=6, horizon=horizon, season=SEASON),
        ModelConfig(lstm_hidden_size=8, num_lstm_layers=1, linear_layer_sizes=(8,)),
        TrainConfig(epochs=2, batch_size=16, log_every=5, baselines=baselines_kind),
    )


@pytest.fixture(scope="module")
def all_run(tmp_path_factory):
    """A tiny run on 80 rows (12 test rows, horizon 3) with every baseline."""
    folder = tmp_path_factory.mktemp("baselines")
    data = _write_series(folder / "s.csv")
    cfg = _tiny_cfg("all")
    result = fit(cfg, folder / "run", quiet=True, data_path=data)
    return folder / "run", data, cfg, result


def test_report_scores_every_test_origin_next_to_statsforecast(all_run):
    run, data, cfg, result = all_run
    report = json.loads((run / "report.json").read_text())
    series = prepare_series(read_table(data), cfg.data)
    y = series.values[:, 0]
    # 80 rows: 56 train, 12 val, 12 test; origins 67 .. 76 (the last target is row 79)
    splits, _ = make_splits(series, cfg.data)
    assert (splits.n_train, splits.n_val, splits.n_test) == (56, 12, 12)
    origins = np.arange(67, 77)
    assert splits.test.origin.tolist() == origins.tolist()
    assert report["n_test"] == 10 * 3 and report["n_val"] == len(splits.val) * 3
    assert report["baselines"] == "all"
    assert list(report["test"]) == [
        "model",
        "last_value",
        "seasonal_naive",
        "auto_ets",
        "auto_arima",
        "auto_theta",
        "combination",
    ]
    assert list(report["val"]) == ["model", "last_value", "seasonal_naive"]
    # every target once per (origin, step), in original units
    actual = y[origins[:, None] + np.arange(1, 4)]  # (10, 3)
    scale = np.mean(np.abs(y[4:68] - y[:64]))  # in-sample seasonal naive MAE of rows 0..67

    def check(name, forecast, rel=1e-12):
        scores = report["test"][name]
        assert scores["mae"] == pytest.approx(np.mean(np.abs(forecast - actual)), rel=rel)
        rmse = np.sqrt(np.mean((forecast - actual) ** 2))
        assert scores["rmse"] == pytest.approx(rmse, rel=rel)
        assert scores["mase"] == pytest.approx(scores["mae"] / scale, rel=1e-12)

    check("last_value", np.repeat(y[origins][:, None], 3, axis=1))
    k = np.arange(1, 4)
    check("seasonal_naive", y[origins[:, None] + k - SEASON])  # k <= season: 4 rows back
    # the statistical models: statsforecast's own cross-validation fitted at the first
    # validation origin (on the training rows, as the model) and on without refitting
    first = int(splits.val.origin[0])
    theirs = statsforecast_cv(series.values[:, :1], np.arange(first, 77), 3, refit=False)
    for name in baselines.STATISTICAL:
        check(name, theirs[name][origins - first, :, 0])
    # the model: the selection's forecasts from predict() at the same origins (the saved
    # model then trained on every row: retrain="all", the default)
    assert report["retrain"]["rows"] == "all"
    frame = predict(run / "selection", data).set_index("origin")
    # (float32 model outputs, batched differently: the report's own tolerance in test_train)
    check("model", frame.loc[origins, ["y_h1", "y_h2", "y_h3"]].to_numpy(), rel=1e-9)
    # the table marks the lowest value of each metric in each split
    lines = result.report.table.splitlines()
    test_lines = [line for line in lines if line.startswith("test ")]
    for column, key in enumerate(("mae", "rmse", "mape", "mase")):
        best = min(report["test"], key=lambda name: report["test"][name][key])
        marked = [line.split()[1] for line in test_lines if line.split()[2 + column][-1] == "*"]
        assert marked == [best], (key, lines)


def test_without_statsforecast_the_naive_path_works_and_all_is_refused(
    tmp_path, monkeypatch, capsys
):
    for module in ("statsforecast", "statsforecast.models"):
        monkeypatch.setitem(sys.modules, module, None)  # `import statsforecast` now fails
    assert config.default_baselines() == "naive"
    assert not baselines.statsforecast_available()
    with pytest.raises(SettingError, match=r"pip install 'stacklstm\[baselines\]'"):
        baselines.require("all")
    data = _write_series(tmp_path / "s.csv")
    flags = [
        "--data",
        data,
        "--target",
        "y",
        "--time-column",
        "none",
        "--window",
        "6",
        "--horizon",
        "3",
        "--season",
        "4",
        "--hidden-size",
        "8",
        "--num-layers",
        "1",
        "--linear-layer-sizes",
        "8",
        "--epochs",
        "2",
        "--batch-size",
        "16",
        "--quiet",
    ]
    code = main(["train", "--out", str(tmp_path / "all"), "--baselines", "all", *map(str, flags)])
    _, err = capsys.readouterr()
    assert code == 2 and not (tmp_path / "all").exists()
    assert err.strip().splitlines() == [
        "stacklstm: error: --baselines 'all' needs statsforecast, which is not installed: "
        "pip install 'stacklstm[baselines]' (or pass --baselines naive)"
    ]
    code = main(
        ["train", "--out", str(tmp_path / "naive"), "--baselines", "naive", *map(str, flags)]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    report = json.loads((tmp_path / "naive" / "report.json").read_text())
    assert list(report["test"]) == ["model", "last_value", "seasonal_naive", "combination"]
    assert report["n_test"] == 30 and report["baselines"] == "naive"
    y = read_table(data)["y"].to_numpy()  # the values as the run read them
    origins = np.arange(67, 77)
    actual = y[origins[:, None] + np.arange(1, 4)]
    last = np.mean(np.abs(actual - y[origins][:, None]))
    assert report["test"]["last_value"]["mae"] == pytest.approx(last, rel=1e-12)
    assert report["test"]["last_value"]["mase"] == pytest.approx(
        last / np.mean(np.abs(y[4:68] - y[:64])), rel=1e-12
    )
    assert "auto_ets" not in out


def test_old_run_folders_mean_naive_baselines():
    saved = RunConfig().to_dict()
    del saved["train"]["baselines"]  # a config.json written before the field existed
    assert RunConfig.from_dict(saved, saved=True).train.baselines == "naive"


def test_import_stacklstm_does_not_import_statsforecast():
    code = (
        "import sys, stacklstm, stacklstm.train, stacklstm.backtest, stacklstm.baselines\n"
        "assert 'statsforecast' not in sys.modules, 'statsforecast imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]


# --------------------------------------------------------------------------- one pass


def test_forecast_parts_equal_separate_fits_report_progress_and_are_reused(monkeypatch):
    from stacklstm.baselines import worker

    history = np.stack([seasonal_values(70), seasonal_values(70, seed=2) * 2], axis=1)
    val, test = np.arange(38, 50), np.arange(50, 67)
    baselines.cache.clear()
    separate = [baselines.statistical_forecasts(history, o, 3, SEASON) for o in (val, test)]
    baselines.cache.clear()
    calls = []
    parts = baselines.forecast_parts(
        [(history, val), (history, test)], 3, SEASON, lambda *a: calls.append(a)
    )
    for one, other in zip(parts, separate, strict=True):
        for name in baselines.STATISTICAL:
            np.testing.assert_array_equal(one[name], other[name])
    # one progress line per model: counts that only grow, to every forecast of both parts
    assert sorted({c[0] for c in calls}) == sorted(baselines.STATISTICAL)
    for name in baselines.STATISTICAL:
        mine = [c for c in calls if c[0] == name]
        assert all(c[2] == (12 + 17) * 2 for c in mine)
        assert [c[1] for c in mine] == sorted(c[1] for c in mine)
        assert mine[-1][1:] == (29 * 2, 29 * 2, "done") and mine[0][3] == "fitting"

    def no_work(jobs, on_progress=None):
        raise AssertionError(f"computed again: {len(jobs)} jobs")

    monkeypatch.setattr(worker, "run_jobs", no_work)
    again = baselines.forecast_parts([(history, test)], 3, SEASON)[0]
    np.testing.assert_array_equal(again["auto_arima"], parts[1]["auto_arima"])


def test_report_intervals_come_from_the_validation_fit_once(all_run, monkeypatch, tmp_path):
    import shutil

    from stacklstm.forecasting import baseline_forecasts as report_baselines
    from stacklstm.intervals import interval_scores
    from stacklstm.report import evaluate_run

    run, data, cfg, _ = all_run
    report = json.loads((run / "report.json").read_text())
    series = prepare_series(read_table(data), cfg.data)
    splits, _ = make_splits(series, cfg.data)
    history = series.values[:, :1]
    # the baselines' intervals: their residuals on the validation windows around the test's
    # forecasts, both from one fit at the first validation origin (statsforecast's
    # cross-validation from there, without refitting)
    first = int(splits.val.origin[0])
    cv = statsforecast_cv(history, np.arange(first, splits.test.origin[-1] + 1), 3, False)
    val_rows, test_rows = splits.val.origin - first, splits.test.origin - first
    for name in baselines.STATISTICAL:
        bands = baselines.residual_intervals(
            splits.val.y_true, cv[name][val_rows], cv[name][test_rows], tuple(report["quantiles"])
        )
        want = interval_scores(splits.test.y_true, bands)
        got = report["test"][name]
        assert got["width"] == pytest.approx(want["width"], rel=1e-12)
        assert got["coverage"] == want["coverage"] and got["wql"] == pytest.approx(want["wql"])
    # one computation for both splits, and none in a process that does not write the report
    real, seen = baselines.forecast_parts, []
    monkeypatch.setattr(
        baselines,
        "forecast_parts",
        lambda parts, *a, **k: seen.append([o.tolist() for _, o in parts]) or real(parts, *a, **k),
    )
    copy = shutil.copytree(run, tmp_path / "run")
    assert evaluate_run(copy).data["test"] == report["test"]
    assert seen == [[splits.val.origin.tolist() + splits.test.origin.tolist()]]
    # a new process reads them from the run folder: nothing is fitted again
    from stacklstm.baselines import worker

    baselines.cache.clear()
    monkeypatch.setattr(worker, "run_jobs", lambda *a, **k: pytest.fail("fitted again"))
    assert (copy / "baselines.npz").is_file()
    assert evaluate_run(copy).data["test"] == report["test"]
    monkeypatch.setattr(report_baselines, "is_primary", lambda: False)
    other = evaluate_run(copy).data["test"]
    assert len(seen) == 2 and all(other[name] is None for name in baselines.STATISTICAL)


def test_fit_starts_the_baselines_while_the_model_trains(tmp_path, monkeypatch):
    """``fit`` hands the report's statistical parts to the background before training, and
    the report computes nothing more (one batch of worker jobs in all)."""
    from stacklstm.baselines import worker

    data = _write_series(tmp_path / "s.csv")
    real_prefetch, real_jobs, started, batches = baselines.prefetch, worker.run_jobs, [], []
    monkeypatch.setattr(
        baselines, "prefetch", lambda *a, **k: started.append(a) or real_prefetch(*a, **k)
    )

    def run_jobs(jobs, *args, **kwargs):
        batches.append(len(jobs))
        return real_jobs(jobs, *args, **kwargs)

    monkeypatch.setattr(worker, "run_jobs", run_jobs)
    baselines.cache.clear()
    cfg = _tiny_cfg("all", horizon=2)
    result = fit(cfg, tmp_path / "run", quiet=True, data_path=data)
    assert len(started) == 1 and batches == [3]  # three models, one fit each
    assert all(result.report.data["test"][name] for name in baselines.STATISTICAL)
    baselines.cache.clear()
    fit(cfg, tmp_path / "other", quiet=True, data_path=data, stop_after_steps=1)
    assert len(started) == 1  # no report to come: nothing started


@pytest.mark.slow  # a panel's statistical baselines: about 18 s
def test_a_panels_baselines_are_computed_once_for_every_series(tmp_path, monkeypatch):
    """Ten series: the background computes each series' fits once, and the report takes
    all of them from it (none is fitted again)."""
    from stacklstm.baselines import worker
    from stacklstm.estimator import LSTMForecaster

    real_jobs, batches = worker.run_jobs, []

    def run_jobs(jobs, *args, **kwargs):
        batches.append(len(jobs))
        return real_jobs(jobs, *args, **kwargs)

    monkeypatch.setattr(worker, "run_jobs", run_jobs)
    frame = pd.concat(
        pd.DataFrame({"unique_id": f"s{k}", "ds": np.arange(40), "y": seasonal_values(40, seed=k)})
        for k in range(10)
    )
    baselines.cache.clear()
    model = LSTMForecaster(
        horizon=2,
        window=6,
        season=SEASON,
        lstm_hidden_size=4,
        epochs=1,
        batch_size=16,
        baselines="all",
        test_size=6,
        val_size=6,
        run_dir=tmp_path / "run",
    ).fit(frame)
    assert batches == [10 * 3]  # one fit per model and series, in one batch
    report = json.loads((model.run_dir / "report.json").read_text())
    assert all(report["test"][name]["mae"] > 0 for name in baselines.STATISTICAL)
    baselines.cache.clear()
