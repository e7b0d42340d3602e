"""Rolling-origin backtests: cut-offs and origins by hand, baselines against statsforecast's
cross_validation, refit schedules, exact resume of a killed backtest, impossible layouts."""

import json

import numpy as np
import pandas as pd
import pytest

from stacklstm import backtest as bt
from stacklstm.checks import DataError, SettingError
from stacklstm.cli import main
from stacklstm.data import (
    DataConfig,
    make_inference_windows,
    make_splits,
    prepare_series,
    read_table,
)
from stacklstm.train import ModelConfig, RunConfig, TrainConfig, predict
from test_baselines import SEASON, seasonal_values, statsforecast_cv


def test_cutoffs_origins_and_fold_rows_on_arange():
    # 20 rows, horizon 2, 3 folds of 4 origins: cut-offs 6, 10, 14; origins 6..9, 10..13,
    # 14..17; the last forecast (origin 17) ends on row 19
    assert bt.fold_cutoffs(20, horizon=2, folds=3, step=4) == [6, 10, 14]
    assert bt.fold_cutoffs(20, horizon=2, folds=1, step=18) == [0]
    cfg = RunConfig(DataConfig(target=("v",), time_column=None, window=3, horizon=2, season=4,
                               val_fraction=0.25, scaler="none", normalize="none"))  # fmt: skip
    series = prepare_series(pd.DataFrame({"v": np.arange(20.0)}), cfg.data)
    # the fold at cut-off 10 trains on rows 0..10: 8 for training, the last 3 for validation
    fold = bt.fold_config(cfg, 20, 10)
    splits, _ = make_splits(series, fold.data)
    assert (splits.n_train, splits.n_val, splits.n_test) == (8, 3, 9)
    assert splits.train.target_index.max() == 7 and splits.val.target_index.max() == 10
    assert splits.train.origin.tolist() == [2, 3, 4, 5]
    assert splits.val.origin.tolist() == [7, 8]
    assert fold.train.baselines == "naive" and fold.model == cfg.model
    # its forecasts: origins 10..13 see rows up to the origin and target the next two rows
    windows = make_inference_windows(series, fold.data, make_splits(series, fold.data)[1])
    windows = windows.take(np.isin(windows.origin, np.arange(10, 14)))
    assert windows.x[..., 0].tolist() == [[8, 9, 10], [9, 10, 11], [10, 11, 12], [11, 12, 13]]
    assert windows.y_true[..., 0].tolist() == [[11, 12], [12, 13], [13, 14], [14, 15]]
    # which fold's model forecasts each fold
    assert bt.model_folds(4, "every") == [0, 1, 2, 3]
    assert bt.model_folds(4, "never") == [0, 0, 0, 0]
    assert bt.model_folds(5, 2) == [0, 0, 2, 2, 4]
    assert bt.model_folds(3, 7) == [0, 0, 0]


def _write_series(path, n=80):
    pd.DataFrame({"t": np.arange(n), "y": seasonal_values(n)}).to_csv(path, index=False)
    return path


def _cfg(baselines: str = "all") -> RunConfig:
    return RunConfig(
        DataConfig(target=("y",), time_column=None, window=6, horizon=3, season=SEASON),
        ModelConfig(lstm_hidden_size=8, num_lstm_layers=1, linear_layer_sizes=(8,)),
        TrainConfig(epochs=3, batch_size=16, log_every=5, checkpoint_every=5, baselines=baselines),
    )


FLAGS = ["--target", "y", "--time-column", "none", "--window", "6", "--horizon", "3",
         "--season", "4", "--hidden-size", "8", "--num-layers", "1", "--linear-layer-sizes",
         "8", "--epochs", "3", "--batch-size", "16", "--log-every", "5", "--checkpoint-every",
         "5", "--quiet"]  # fmt: skip


def test_refit_never_trains_once_and_scores_like_statsforecast(tmp_path, monkeypatch, capsys):
    import stacklstm.train.loop as loop

    data = _write_series(tmp_path / "s.csv")
    fits = []
    real_fit = loop.fit
    monkeypatch.setattr(loop, "fit", lambda *a, **k: fits.append(a[1]) or real_fit(*a, **k))
    out = tmp_path / "bt"
    argv = ["backtest", "--data", data, *FLAGS, "--baselines", "all", "--folds", "3",
            "--step", "4", "--refit", "never", "--out", out]  # fmt: skip
    code = main([str(a) for a in argv])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    assert fits == [out / "fold_00"]  # one model, trained at the first cut-off
    assert sorted(p.name for p in out.iterdir()) == [
        "backtest.json", "backtest.png", "fold_00", "plan.json"
    ]  # fmt: skip
    result = json.loads((out / "backtest.json").read_text())
    # 80 rows, horizon 3, 3 folds of 4: cut-offs 65, 69, 73; origins 65..76
    assert result["cutoffs"] == [65, 69, 73]
    assert [f["origins"] for f in result["folds"]] == [[65, 68], [69, 72], [73, 76]]
    assert [f["model_fold"] for f in result["folds"]] == [0, 0, 0]
    assert [f["n_scored"] for f in result["folds"]] == [12, 12, 12]
    y = prepare_series(read_table(data), _cfg().data).values[:, 0]  # as the backtest read it
    origins = np.arange(65, 77)
    theirs = statsforecast_cv(y[:, None], origins, 3, refit=False)
    model = predict(out / "fold_00", data).set_index("origin")
    for k, fold in enumerate(result["folds"]):
        o = origins[4 * k : 4 * k + 4]
        actual = y[o[:, None] + np.arange(1, 4)]
        scale = np.mean(np.abs(y[4 : 66 + 4 * k] - y[: 62 + 4 * k]))  # rows 0..cut-off
        expected = {
            "last_value": np.repeat(y[o][:, None], 3, axis=1),
            "seasonal_naive": y[o[:, None] + np.arange(1, 4) - 4],
            **{name: theirs[name][4 * k : 4 * k + 4, :, 0] for name in theirs},
        }
        for name, forecast in expected.items():
            scores = fold["scores"][name]
            assert scores["mae"] == pytest.approx(np.mean(np.abs(forecast - actual)), rel=1e-12)
            assert scores["mase"] == pytest.approx(scores["mae"] / scale, rel=1e-12)
            step3 = fold["by_step"][name][2]["mae"]
            assert step3 == pytest.approx(np.mean(np.abs(forecast[:, 2] - actual[:, 2])), rel=1e-12)
        forecast = model.loc[o, ["y_h1", "y_h2", "y_h3"]].to_numpy()
        assert fold["scores"]["model"]["mae"] == pytest.approx(
            np.mean(np.abs(forecast - actual)), rel=1e-9
        )
    maes = [f["scores"]["auto_ets"]["mae"] for f in result["folds"]]
    summary = result["summary"]["auto_ets"]["overall"]
    assert summary["mean"]["mae"] == pytest.approx(np.mean(maes), rel=1e-12)
    assert summary["std"]["mae"] == pytest.approx(np.std(maes), rel=1e-12)
    assert len(result["summary"]["model"]["by_step"]) == 3
    assert "auto_arima" in stdout and "refit never" in stdout


@pytest.mark.slow
def test_a_killed_backtest_resumes_to_the_same_numbers(tmp_path):
    data = _write_series(tmp_path / "s.csv")
    cfg = _cfg("all")
    kwargs = {"folds": 2, "step": 4, "refit": "every", "data_path": data, "quiet": True}
    whole = bt.backtest(cfg, tmp_path / "whole", **kwargs)
    assert [f["model_fold"] for f in whole.data["folds"]] == [0, 1]
    calls = []

    def crash_in_the_second_fold(end):
        calls.append(end.epoch)
        if len(calls) == 5:  # fold 0 has 3 epochs; fold 1 dies at the end of its 2nd
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        bt.backtest(cfg, tmp_path / "killed", callbacks=[crash_in_the_second_fold], **kwargs)
    killed = tmp_path / "killed"
    assert (killed / "fold_00" / "report.json").exists()
    assert not (killed / "fold_01" / "report.json").exists()
    assert not (killed / "backtest.json").exists()
    resumed = bt.backtest(cfg, killed, resume=True, data_path=data, quiet=True)
    assert resumed.data["settings"]["data_path"] == str(data.absolute())
    whole_text = (tmp_path / "whole" / "backtest.json").read_text()
    assert (killed / "backtest.json").read_text() == whole_text  # every number, every byte
    assert resumed.table == whole.table
    # a resume with other settings is refused and changes nothing
    with pytest.raises(ValueError, match=r"settings differ .*step: 3 != 4"):
        bt.backtest(cfg, killed, resume=True, step=3)
    assert (killed / "backtest.json").read_text() == whole_text


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--folds", "30", "--step", "4"], "30 folds of 4 origins with horizon 3 need at "
         "least 123 rows, but the data has 80; lower --folds or --step"),
        (["--step", "0"], "--step must be an integer >= 1, got 0"),
        (["--folds", "0"], "--folds must be an integer >= 1, got 0"),
        (["--refit", "0"], "--refit must be 'every', 'never' or an integer >= 1, got 0"),
        (["--refit", "sometimes"], "argument --refit: expected every, never or an integer"),
        # 8 rows: round(0.15 x 8) = 1 validation row, raised to the horizon, 3
        (["--folds", "7", "--step", "10"], "fold 0's cut-off leaves 8 rows, 5 for training "
         "after the validation tail (val_fraction=0.15), but window + horizon need 9"),
    ],
)  # fmt: skip
def test_impossible_layouts_are_one_line_exit_2_and_write_nothing(tmp_path, capsys, flags, message):
    data = _write_series(tmp_path / "s.csv")
    argv = ["backtest", "--data", data, *FLAGS, "--out", tmp_path / "bt", *flags]
    code = main([str(a) for a in argv])
    _, err = capsys.readouterr()
    assert code == 2
    assert len(err.strip().splitlines()) == 1 and message in err, err
    assert not (tmp_path / "bt").exists()


def test_library_errors_name_the_setting(tmp_path):
    with pytest.raises(SettingError, match="step must be an integer >= 1") as err:
        bt.fold_cutoffs(20, 2, 3, 0)
    assert err.value.field == "step"
    with pytest.raises(SettingError, match="refit must be"):
        bt.model_folds(3, "sometimes")
    data = _write_series(tmp_path / "s.csv", n=30)
    with pytest.raises(DataError, match="lower `folds` or `step`"):
        bt.backtest(_cfg("naive"), tmp_path / "bt", folds=2, step=10, data_path=data)
    assert not (tmp_path / "bt").exists()
    with pytest.raises(ValueError, match="holds no backtest to resume"):
        bt.backtest(_cfg("naive"), tmp_path, resume=True, data_path=data)


def test_the_backtest_plan_resolves_auto_as_a_run_does(tmp_path):
    """The folds are planned on the settings a run's plan resolves (monthly: season 12,
    window 24), and a resume with other settings is refused with the run's message."""
    n = 120
    frame = pd.DataFrame(
        {
            "date": pd.date_range("2000-01-01", periods=n, freq="MS").strftime("%Y-%m-%d"),
            "co2": 10.0 + np.sin(2 * np.pi * np.arange(n) / 12),
        }
    )
    data = tmp_path / "monthly.csv"
    frame.to_csv(data, index=False)
    cfg = RunConfig(train=TrainConfig(baselines="naive"))
    out = tmp_path / "bt"
    plan = bt.prepare_backtest(cfg, out, 2, 3, None, data, False)
    assert (plan.cfg.data.season, plan.cfg.data.window) == (12, 24)
    assert plan.cfg.train.epochs == "auto"  # the budget is each fold's run's to resolve
    # cut-offs: 120 - 1 - 3 x 2 = 113, then 116; origins 113 .. 115 and 116 .. 118
    assert plan.cutoffs == [113, 116] and plan.uses == [0, 1]
    np.testing.assert_array_equal(plan.origins(1), [116, 117, 118])
    out.mkdir()
    (out / "plan.json").write_text(json.dumps(plan.settings))
    with pytest.raises(ValueError) as caught:
        bt.prepare_backtest(cfg, out, None, 4, None, None, True)
    assert str(caught.value) == (
        f"cannot resume {out}: the settings differ from the saved backtest's (step: 4 != 3); "
        "resume with the same settings or start a new backtest"
    )


def _panel_table(path, lengths=(60, 50)):
    """Two series ``a`` (60 rows) and ``b`` (50 rows, another level and noise), no time."""
    parts = [
        pd.DataFrame({"id": name, "y": seasonal_values(n, seed=i) * (1 + i) + 5 * i})
        for i, (name, n) in enumerate(zip("ab", lengths, strict=True))
    ]
    pd.concat(parts).to_csv(path, index=False)
    return path


def test_a_panel_is_cut_series_by_series_and_scored_per_series_and_pooled(tmp_path):
    from stacklstm import baselines
    from stacklstm.train import read_run_info

    data = _panel_table(tmp_path / "panel.csv")
    cfg = _cfg("all").replace({"data": {"id_column": "id"}})
    out = tmp_path / "bt"
    result = bt.backtest(cfg, out, folds=2, step=3, data_path=data, quiet=True)
    # cut-offs from each series' end: b (50 rows) at 50 - 3 - 3 * 2 = 41, 44; a 10 rows later
    assert result.data["cutoffs"] == [51, 54] and result.data["n_series"] == 2
    series = prepare_series(read_table(data), read_run_info(out / "fold_00").config.data)
    for k, fold in enumerate(result.data["folds"]):
        assert {n: s["cutoff"] for n, s in fold["per_series"].items()} == {
            "a": 51 + 3 * k, "b": 41 + 3 * k
        }  # fmt: skip
        # the fold's training and validation rows end at the cut-off of every series
        run_data = read_run_info(out / f"fold_{k:02d}").config.data
        splits, _ = make_splits(series, run_data)
        assert (splits.rows[:, 0] + splits.rows[:, 1]).tolist() == [52 + 3 * k, 42 + 3 * k]
        assert splits.val.target_index.max() == 60 + 41 + 3 * k  # b's last validation row
        forecasts = result.forecasts[k]
        assert forecasts["origin"].tolist() == [51 + 3 * k + j for j in range(3)] + [
            60 + 41 + 3 * k + j for j in range(3)
        ]  # fmt: skip
        for name, pooled in fold["scores"].items():
            each = [fold["per_series"][s]["scores"][name] for s in "ab"]
            # the pooled MASE is the mean of the series' MASE; MAE the mean over all targets
            assert pooled["mase"] == pytest.approx(np.mean([m["mase"] for m in each]), rel=1e-12)
            assert pooled["mae"] == pytest.approx(np.mean([m["mae"] for m in each]), rel=1e-12)
            steps = fold["by_step"][name]
            assert np.mean([s["mae"] for s in steps]) == pytest.approx(pooled["mae"], rel=1e-12)
    # the statistical baselines of each series: statistical_forecasts on that series alone
    for i, (name, start, n) in enumerate((("a", 0, 60), ("b", 60, 50))):
        y = series.values[start : start + n, :1]
        cuts = [n - 9, n - 6]
        origins = np.concatenate([np.arange(c, c + 3) for c in cuts])
        alone = baselines.statistical_forecasts(y, origins, 3, SEASON, cuts)
        for k, fold in enumerate(result.data["folds"]):
            o = origins[3 * k : 3 * k + 3]
            actual = y[o[:, None] + np.arange(1, 4), 0]
            scale = np.mean(np.abs(y[4 : cuts[k] + 1, 0] - y[: cuts[k] - 3, 0]))
            scores = fold["per_series"][name]["scores"]
            for model in ("auto_ets", "auto_arima", "auto_theta"):
                mine = result.forecasts[k][model][3 * i : 3 * i + 3]
                np.testing.assert_allclose(mine, alone[model][3 * k : 3 * k + 3], rtol=1e-12)
                mae = np.mean(np.abs(alone[model][3 * k : 3 * k + 3, :, 0] - actual))
                assert scores[model]["mae"] == pytest.approx(mae, rel=1e-12)
                assert scores[model]["mase"] == pytest.approx(mae / scale, rel=1e-12)
            last = np.mean(np.abs(y[o, :1] - actual))
            assert scores["last_value"]["mae"] == pytest.approx(last, rel=1e-12)
    summary = result.data["per_series"]["b"]["auto_ets"]["mean"]["mae"]
    folds = result.data["folds"]
    assert summary == pytest.approx(
        np.mean([f["per_series"]["b"]["scores"]["auto_ets"]["mae"] for f in folds]), rel=1e-12
    )
    assert "2 series scored together" in result.table


def test_a_panel_with_time_stamps_must_end_together(tmp_path):
    frame = pd.read_csv(_panel_table(tmp_path / "p.csv"))
    frame["t"] = np.concatenate([np.arange(60), np.arange(50)])  # b ends 10 steps early
    frame.to_csv(tmp_path / "p.csv", index=False)
    cfg = _cfg("naive").replace({"data": {"id_column": "id", "time_column": "t"}})
    with pytest.raises(DataError, match=r"series 'b' ends at 49 and 'a' at 59"):
        bt.backtest(cfg, tmp_path / "bt", folds=2, step=3, data_path=tmp_path / "p.csv")
    assert not (tmp_path / "bt").exists()
    # without stamps: the same rows from each series' end; the shortest sets the folds
    cfg = cfg.replace({"data": {"time_column": None}})
    with pytest.raises(SettingError, match=r"but the data has 50; .*shortest series, 'b'"):
        bt.prepare_backtest(cfg, tmp_path / "bt", 16, 3, None, tmp_path / "p.csv", False)
    with pytest.raises(DataError, match=r"fold 0's cut-off in series 'b' leaves 9 rows, 6 for"):
        bt.prepare_backtest(cfg, tmp_path / "bt", 13, 3, None, tmp_path / "p.csv", False)
    plan = bt.prepare_backtest(cfg, tmp_path / "bt", 3, 3, "never", tmp_path / "p.csv", False)
    assert plan.cutoffs == [48, 51, 54] and plan.series_cutoffs(1).tolist() == [51, 41]
    assert plan.fold_config(0).data.val_size == 6  # round(0.15 x 39) = 6 rows in each
    assert not (tmp_path / "bt").exists()


def test_covariates_come_from_the_table_as_predict_reads_them(tmp_path):
    """A fold's forecasts equal ``predict`` on its run folder with the table cut at the
    cut-off plus the known-future rows after it."""
    n = 80
    rng = np.random.default_rng(3)
    promo = (rng.random(n) < 0.3).astype(float)
    frame = pd.DataFrame(
        {
            "ds": pd.date_range("2020-01-06", periods=n, freq="D").strftime("%Y-%m-%d"),
            "y": seasonal_values(n) + 3 * promo,
            "promo": promo,
        }
    )
    data = tmp_path / "promo.csv"
    frame.to_csv(data, index=False)
    cfg = _cfg("naive").replace(
        {"data": {"time_column": "ds", "future_features": ("promo",), "calendar": "auto"}}
    )
    out = tmp_path / "bt"
    result = bt.backtest(cfg, out, folds=2, step=3, data_path=data, quiet=True)
    assert result.data["cutoffs"] == [71, 74]
    for k, cutoff in enumerate(result.data["cutoffs"]):
        table = frame.iloc[: cutoff + 1 + 3].copy()
        table.loc[table.index[cutoff + 1 :], "y"] = np.nan  # the future rows: promo only
        path = tmp_path / f"cut{k}.csv"
        table.to_csv(path, index=False)
        last = predict(out / f"fold_{k:02d}", path).iloc[-1]  # from the cut-off's row
        assert str(last["origin"])[:10] == frame["ds"][cutoff]
        mine = result.forecasts[k]
        assert mine["origin"][0] == cutoff
        expected = last[["y_h1", "y_h2", "y_h3"]].to_numpy(dtype=float)
        np.testing.assert_allclose(mine["model"][0, :, 0], expected, rtol=1e-6)


def test_a_panel_with_static_and_known_future_covariates_forecasts_as_predict(tmp_path):
    """Each series' fold forecast equals ``predict`` on the fold's run folder with every
    series cut at the cut-off plus its known-future rows (the static values from the table)."""
    n, parts = 60, []
    for i, (name, size) in enumerate((("a", 1.0), ("b", 3.0))):
        promo = (np.random.default_rng(i).random(n) < 0.3).astype(float)
        parts.append(
            pd.DataFrame(
                {
                    "id": name,
                    "ds": pd.date_range("2021-03-01", periods=n, freq="D").strftime("%Y-%m-%d"),
                    "y": seasonal_values(n, seed=i) * size + 2 * promo,
                    "promo": promo,
                    "size": size,
                }
            )
        )
    frame = pd.concat(parts, ignore_index=True)
    data = tmp_path / "panel.csv"
    frame.to_csv(data, index=False)
    cfg = _cfg("naive").replace({"data": {
        "id_column": "id", "time_column": "ds", "future_features": ("promo",),
        "static_features": ("size",), "calendar": "auto",
    }})  # fmt: skip
    out = tmp_path / "bt"
    result = bt.backtest(cfg, out, folds=2, step=3, data_path=data, quiet=True)
    assert result.data["cutoffs"] == [51, 54]
    for k, cutoff in enumerate(result.data["cutoffs"]):
        position = frame.groupby("id").cumcount()
        table = frame[position <= cutoff + 3].copy()
        table.loc[position[position <= cutoff + 3] > cutoff, "y"] = np.nan  # future rows
        path = tmp_path / f"cut{k}.csv"
        table.to_csv(path, index=False)
        last = predict(out / f"fold_{k:02d}", path).groupby("id").tail(1).set_index("id")
        mine = result.forecasts[k]
        for i, name in enumerate("ab"):
            assert str(last.loc[name, "origin"])[:10] == frame["ds"][cutoff]
            row = mine["origin"].tolist().index(60 * i + cutoff)
            expected = last.loc[name, ["y_h1", "y_h2", "y_h3"]].to_numpy(dtype=float)
            np.testing.assert_allclose(mine["model"][row, :, 0], expected, rtol=1e-6)
