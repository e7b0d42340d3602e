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
    cfg = RunConfig(DataConfig(target=("v",), time_column=None, window=3, horizon=2,
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
        (["--folds", "7", "--step", "10"], "fold 0's cut-off leaves 8 rows, 7 for training "
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
