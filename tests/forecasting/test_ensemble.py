"""Seed ensembles: N members (seed, seed+1, ...) trained as ordinary runs under members/, the
median of their forecasts, the report against the best and worst member, resume, refusals."""

import json
import shutil

import numpy as np
import pytest

from helpers import _main, _report, tiny_run
from stacklstm.checks import SettingError
from stacklstm.config import RunConfig, TrainConfig
from stacklstm.data import make_splits
from stacklstm.forecasting import (
    EnsembleRun,
    TrainedRun,
    load_run,
    predict,
)
from stacklstm.forecasting.ensemble import (
    load_model,
    median_forecast,
    member_config,
    rank_members,
)
from stacklstm.forecasting.export import export_run
from stacklstm.forecasting.inference import load_series
from stacklstm.intervals import Forecast
from stacklstm.rundir import read_run_info

FLAGS, TINY = tiny_run()
LEVELS = (0.1, 0.5, 0.9)


def test_median_forecast_is_numpys_median_over_members():
    # three members, two windows, horizon 1, one target; quantiles: point - 1, point, point + s
    points = [np.array([1.0, 5.0]), np.array([3.0, 4.0]), np.array([2.0, 9.0])]
    spreads = (1.0, 2.0, 7.0)
    members = [
        Forecast(p[:, None, None], np.stack([p - 1, p, p + s], -1)[:, None, None, :], LEVELS)
        for p, s in zip(points, spreads, strict=True)
    ]
    odd = median_forecast(members)
    np.testing.assert_array_equal(odd.point[:, 0, 0], [2.0, 5.0])  # by hand
    # upper quantiles: (2, 5, 9) and (6, 6, 16): medians 5 and 6
    np.testing.assert_array_equal(odd.quantiles[:, 0, 0, 2], [5.0, 6.0])
    np.testing.assert_array_equal(odd.quantiles[:, 0, 0, 0], [1.0, 4.0])
    assert odd.levels == LEVELS
    even = median_forecast(members[:2])
    np.testing.assert_array_equal(even.point[:, 0, 0], [2.0, 4.5])  # the two middle values' mean
    np.testing.assert_array_equal(even.quantiles[:, 0, 0, 2], [3.5, 6.0])
    assert median_forecast([Forecast(p[:, None, None]) for p in points]).quantiles is None
    with pytest.raises(ValueError, match="levels differ"):
        median_forecast(
            [members[0], Forecast(members[1].point, members[1].quantiles, (0.2, 0.5, 0.8))]
        )


def test_member_config_and_ranking():
    cfg = member_config(RunConfig(train=TrainConfig(seed=7, ensemble=3, baselines="all")), 2)
    assert (cfg.train.seed, cfg.train.ensemble, cfg.train.baselines) == (9, 1, "naive")
    ranks = rank_members([{"mae": 1.0, "mase": 0.7}, None, {"mae": 3.0, "mase": 0.2}])
    assert ranks == {"ranked_by": "mase", "best": 2, "worst": 1}
    ranks = rank_members([{"mae": 1.0, "mase": None}, {"mae": 0.5, "mase": 0.2}])
    assert ranks == {"ranked_by": "mae", "best": 1, "worst": 0}


@pytest.mark.parametrize("value", [0, -1])
def test_bad_ensemble_is_refused(value, tmp_path):
    with pytest.raises(SettingError, match="ensemble must be an integer >= 1"):
        TrainConfig(ensemble=value).validate()
    code, out, err = _main("train", "--out", tmp_path / "run", "--ensemble", value, *FLAGS)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and "--ensemble must be an integer >= 1" in err
    assert not (tmp_path / "run").exists()


def test_ensemble_seed_overflow_is_refused():
    with pytest.raises(SettingError, match="largest seed"):
        TrainConfig(seed=2**63 - 1, ensemble=2).validate()


def test_ensemble_predict_is_the_median_of_the_members_predictions(ensemble, tmp_path):
    out, _ = ensemble
    frame = predict(out, output=tmp_path / "p.csv")
    members = [predict(out / "members" / str(k)) for k in range(2)]
    values = [c for c in frame.columns if c != "origin"]
    assert values and list(members[0].columns) == list(frame.columns)
    np.testing.assert_array_equal(frame["origin"], members[0]["origin"])
    stacked = np.stack([m[values].to_numpy() for m in members])
    np.testing.assert_array_equal(frame[values].to_numpy(), np.median(stacked, axis=0))
    assert not np.array_equal(frame[values].to_numpy(), stacked[0])
    code, _, err = _main("predict", out, "--output", tmp_path / "cli.csv", "--quiet", "--history")
    assert code == 0, err
    assert (tmp_path / "cli.csv").read_text() == (tmp_path / "p.csv").read_text()


def test_ensemble_evaluate_rewrites_the_same_report(ensemble):
    out, _ = ensemble
    before = _report(out)
    code, stdout, err = _main("evaluate", out, "--quiet")
    assert code == 0, err
    assert "best member" in stdout and _report(out) == before


def test_export_refuses_an_ensemble(ensemble, tmp_path):
    out, _ = ensemble
    code, stdout, err = _main("export", out, "--output", tmp_path / "m.stacklstm")
    assert code == 2 and stdout == "" and err.count("\n") == 1
    assert "seed ensemble of 2 models" in err and "members/0" in err
    assert not (tmp_path / "m.stacklstm").exists()
    with pytest.raises(ValueError, match="seed ensemble"):
        export_run(out, tmp_path / "m.stacklstm")


def test_load_run_loads_an_ensemble_whose_forecast_is_the_members_median(ensemble, tmp_path):
    out, result = ensemble
    run = load_run(out)
    assert isinstance(run, EnsembleRun) and len(run.members) == 2
    assert all(isinstance(m, TrainedRun) for m in run.members)
    assert load_model is load_run  # the former name loads the same
    _, series = load_series(run.info, None)
    test = make_splits(series, run.info.config.data, scaler=run.info.scaler)[0].test
    forecast, members = run.forecasts(test)
    # each member as loaded on its own, and the median by hand (for 2: their mean)
    alone = [load_run(out / "members" / str(k)).forecast_quantiles(test).point for k in range(2)]
    for got, own in zip(members, alone, strict=True):
        np.testing.assert_array_equal(got.point, own)
    np.testing.assert_array_equal(forecast.point, (alone[0] + alone[1]) / 2)
    np.testing.assert_array_equal(forecast.point, result.report.test_forecast)
    np.testing.assert_array_equal(run.forecast_quantiles(test).point, forecast.point)
    # a member that is not the ensemble's is named
    foreign = tmp_path / "foreign"
    shutil.copytree(out, foreign)
    info = json.loads((foreign / "members" / "1" / "config.json").read_text())
    info["config"]["train"]["seed"] = 99
    (foreign / "members" / "1" / "config.json").write_text(json.dumps(info))
    with pytest.raises(ValueError, match=r"member 1 .* does not belong to the ensemble"):
        load_run(foreign)


def test_an_ensemble_backtest_forecasts_each_fold_with_its_members_median(tmp_path):
    """``backtest --ensemble 2``: each trained fold is an ensemble's folder, as ``fit`` writes
    it, and each fold's model forecast is the median of its members' (scored as such)."""
    from stacklstm import backtest as bt
    from stacklstm.data import make_inference_windows
    from stacklstm.forecasting.inference import forecast

    out = tmp_path / "bt"
    code, _, err = _main(
        "backtest",
        "--out",
        out,
        "--ensemble",
        "2",
        "--folds",
        "2",
        "--refit",
        "never",
        "--quiet",
        *FLAGS,
    )
    assert code == 0, err
    fold = out / "fold_00"
    assert sorted(p.name for p in out.iterdir() if p.is_dir()) == ["fold_00"]
    assert isinstance(load_run(fold), EnsembleRun)
    assert [read_run_info(fold / "members" / str(k)).config.train.seed for k in (0, 1)] == [
        TINY.train.seed,
        TINY.train.seed + 1,
    ]
    # scored again from the saved folds (nothing is trained): the forecasts come back
    result = bt.backtest(bt.read_plan(out)["config"], out, resume=True, quiet=True)
    info = read_run_info(fold)
    _, series = load_series(info, None)
    windows = make_inference_windows(series, info.config.data, info.scaler)
    members = [load_run(fold / "members" / str(k)) for k in (0, 1)]
    for k, mine in enumerate(result.forecasts):
        part = windows.take(np.isin(windows.origin, mine["origin"]))
        each = [forecast(m, part) for m in members]
        assert not np.allclose(each[0], each[1])  # two seeds, two forecasts
        np.testing.assert_array_equal(mine["model"], np.median(np.stack(each), axis=0))
        mae = np.mean(np.abs(np.median(np.stack(each), axis=0) - part.y_true))
        assert result.data["folds"][k]["scores"]["model"]["mae"] == pytest.approx(mae, rel=1e-12)


def test_tune_refuses_an_ensemble(tmp_path):
    pytest.importorskip("optuna")
    code, stdout, err = _main(
        "tune", "--out", tmp_path / "t", "--trials", "1", "--ensemble", "2", *FLAGS
    )
    assert code == 2 and stdout == "" and err.count("\n") == 1
    assert "--ensemble" in err and not (tmp_path / "t").exists()
