"""Rolling-origin backtests end to end: baselines against statsforecast's cross_validation,
refit schedules, exact resume of a killed backtest, impossible layouts, covariates. (The folds
and the scoring alone are tests/backtest/.)"""

import json

import numpy as np
import pandas as pd
import pytest

from helpers import _cfg, seasonal_values
from stacklstm import backtest as bt
from stacklstm.checks import DataError, SettingError
from stacklstm.cli import main
from stacklstm.data import prepare_series, read_table
from stacklstm.forecasting import predict
from test_baselines import statsforecast_cv


def _write_series(path, n=80):
    pd.DataFrame({"t": np.arange(n), "y": seasonal_values(n)}).to_csv(path, index=False)
    return path


FLAGS = [
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
    "3",
    "--batch-size",
    "16",
    "--log-every",
    "5",
    "--checkpoint-every",
    "5",
    "--quiet",
]


def test_refit_never_trains_once_and_scores_like_statsforecast(tmp_path, monkeypatch, capsys):
    import stacklstm.run.loop as loop

    data = _write_series(tmp_path / "s.csv")
    fits = []
    real_fit = loop.fit
    monkeypatch.setattr(loop, "fit", lambda *a, **k: fits.append(a[1]) or real_fit(*a, **k))
    out = tmp_path / "bt"
    argv = [
        "backtest",
        "--data",
        data,
        *FLAGS,
        "--baselines",
        "all",
        "--folds",
        "3",
        "--step",
        "4",
        "--refit",
        "never",
        "--out",
        out,
    ]
    code = main([str(a) for a in argv])
    stdout, err = capsys.readouterr()
    assert code == 0, err
    assert fits == [out / "fold_00"]  # one model, trained at the first cut-off
    assert sorted(p.name for p in out.iterdir()) == [
        "backtest.json",
        "backtest.png",
        "fold_00",
        "plan.json",
    ]
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


@pytest.mark.slow  # a backtest of a panel with covariates: about 16 s
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
    cfg = _cfg("naive").replace(
        {
            "data": {
                "id_column": "id",
                "time_column": "ds",
                "future_features": ("promo",),
                "static_features": ("size",),
                "calendar": "auto",
            }
        }
    )
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
