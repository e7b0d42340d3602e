"""Backtest folds: cut-offs, origins and fold rows by hand, the plan's settings, panels' ends."""

import json

import numpy as np
import pandas as pd
import pytest

from helpers import _cfg, _panel_table
from stacklstm import backtest as bt
from stacklstm.checks import DataError, SettingError
from stacklstm.data import DataConfig, make_inference_windows, make_splits, prepare_series
from stacklstm.train import RunConfig, TrainConfig


def test_cutoffs_origins_and_fold_rows_on_arange():
    # 20 rows, horizon 2, 3 folds of 4 origins: cut-offs 6, 10, 14; origins 6..9, 10..13,
    # 14..17; the last forecast (origin 17) ends on row 19
    assert bt.fold_cutoffs(20, horizon=2, folds=3, step=4) == [6, 10, 14]
    assert bt.fold_cutoffs(20, horizon=2, folds=1, step=18) == [0]
    cfg = RunConfig(
        DataConfig(
            target=("v",),
            time_column=None,
            window=3,
            horizon=2,
            season=4,
            val_fraction=0.25,
            scaler="none",
            normalize="none",
        )
    )
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
    cfg = RunConfig(train=TrainConfig(baselines="naive", init="random"))
    out = tmp_path / "bt"
    plan = bt.prepare_backtest(cfg, out, 2, 3, None, data, False)
    assert (plan.cfg.data.season, plan.cfg.data.window) == (12, 24)
    assert plan.cfg.train.epochs == "auto"  # the budget is each fold's run's to resolve
    # init="auto" (the default) on one monthly series: every fold fine-tunes the weights
    tuned = bt.prepare_backtest(RunConfig(), tmp_path / "ft", 2, 3, None, data, False).cfg
    assert (tuned.train.init, tuned.train.epochs, tuned.train.lr) == ("pretrained", 20, 1e-4)
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


def test_a_panel_with_time_stamps_must_end_together(tmp_path):
    frame = pd.read_csv(_panel_table(tmp_path / "p.csv"))
    frame["t"] = np.concatenate([np.arange(60), np.arange(50)])  # b ends 10 steps early
    frame.to_csv(tmp_path / "p.csv", index=False)
    data = {"id_column": "id", "time_column": "t", "start_padding": "none"}  # full windows
    cfg = _cfg("naive").replace({"data": data})
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


@pytest.mark.parametrize(
    ("retrain", "id_column", "expected"),
    [
        ("auto", None, "off"),  # as a backtest of one series always trained
        ("auto", "id", "on"),  # a panel: retrained on its rows up to the cut-off
        ("all", None, "on"),  # never on the rows after the cut-off, which score it
        ("all", "id", "on"),
        ("on", None, "on"),
        ("off", "id", "off"),
    ],
)
def test_a_fold_never_trains_on_the_rows_after_its_cutoff(retrain, id_column, expected):
    cfg = RunConfig(
        DataConfig(
            target=("v",),
            time_column=None,
            id_column=id_column,
            window=3,
            horizon=2,
            season=4,
            val_fraction=0.25,
        ),
        train=TrainConfig(retrain=retrain),
    )
    fold = bt.fold_config(cfg, 20, 10)
    assert fold.train.retrain == expected
    # and the rows after the cut-off are the fold's test rows, outside what "on" trains on
    assert fold.data.test_fraction == pytest.approx(9 / 20)
