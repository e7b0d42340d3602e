"""The plan of a run resolves every ``"auto"`` setting once, from the data, as it always has.

The expected values are worked by hand from the rules (:mod:`stacklstm.data.season`,
:mod:`stacklstm.train.budget`) and the split sizes of each table.
"""

import numpy as np
import pandas as pd
import pytest

from stacklstm.checks import DataError
from stacklstm.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from stacklstm.data.rows import check_length
from stacklstm.data.season import require_resolved
from stacklstm.rundir.info import write_run_info
from stacklstm.train.plan import make_plan
from stacklstm.train.resolve import planned_batch, planned_window, resolve_run_config

MODEL = ModelConfig(lstm_hidden_size=4, num_lstm_layers=1, linear_layer_sizes=())


def _table(tmp_path, n_rows, freq):
    """A seasonal series of ``n_rows`` rows on the ``freq`` grid, as a CSV."""
    t = np.arange(n_rows)
    frame = pd.DataFrame(
        {
            "date": pd.date_range("2000-01-03", periods=n_rows, freq=freq).strftime("%Y-%m-%d"),
            "co2": 10.0 + np.sin(2 * np.pi * t / 12) + 0.01 * t,
        }
    )
    path = tmp_path / f"{freq}.csv"
    frame.to_csv(path, index=False)
    return path


def _auto(**data):
    """Every data and budget setting "auto" (the defaults), a tiny model, naive baselines."""
    return RunConfig(DataConfig(**data), MODEL, TrainConfig(baselines="naive"))


def test_monthly_data_resolves_season_window_and_budget(tmp_path):
    plan = make_plan(_auto(), tmp_path / "run", False, _table(tmp_path, 120, "MS"))
    devices = int(plan.mesh.devices.size)
    # monthly: season 12, window 2 x 12 = 24
    assert (plan.cfg.data.season, plan.cfg.data.window) == (12, 24)
    # 120 rows: 18 test, 18 validation, 84 training rows; training origins 23 .. 82
    assert len(plan.train) == 60
    np.testing.assert_array_equal(plan.train.origin, np.arange(23, 83))
    if devices == 1:
        # batch: 60 // 8 = 7, raised to 8; 60 // 8 = 7 steps an epoch; 60 epochs give 420 <
        # 1000 steps, so ceil(1000 / 7) = 143 epochs; patience ceil(15 * 143 / 60) = 36
        t = plan.cfg.train
        assert (t.batch_size, t.epochs, t.patience) == (8, 143, 36)
        assert (plan.per_epoch, plan.total_steps) == (7, 1001)
    assert plan.info.config == plan.cfg  # config.json holds the resolved settings


def test_weekly_data_clips_the_window_at_52(tmp_path):
    plan = make_plan(_auto(), tmp_path / "run", False, _table(tmp_path, 200, "7D"))
    # weekly: season 52, window min(2 x 52, 52) = 52
    assert (plan.cfg.data.season, plan.cfg.data.window) == (52, 52)
    # 200 rows: 30 test, 30 validation, 140 training; origins 51 .. 138: 88 windows
    assert len(plan.train) == 88
    if int(plan.mesh.devices.size) == 1:
        # batch 88 // 8 = 11; 8 steps an epoch; ceil(1000 / 8) = 125 epochs; ceil(31.25) = 32
        t = plan.cfg.train
        assert (t.batch_size, t.epochs, t.patience) == (11, 125, 32)


def test_given_settings_are_kept_and_only_auto_ones_derived(tmp_path):
    cfg = RunConfig(
        DataConfig(window=5), MODEL, TrainConfig(baselines="naive", epochs=3, batch_size=4)
    )
    plan = make_plan(cfg, tmp_path / "run", False, _table(tmp_path, 60, "QS"))
    # quarterly: season 4; the window, epochs and batch given are kept; patience follows
    # the given epochs (factor 1): 15
    assert (plan.cfg.data.season, plan.cfg.data.window) == (4, 5)
    assert (plan.cfg.train.epochs, plan.cfg.train.batch_size, plan.cfg.train.patience) == (3, 4, 15)
    # 60 rows: 9 test, 9 validation, 42 training; origins 4 .. 40: 37 windows, 9 steps of 4
    assert (len(plan.train), plan.per_epoch, plan.total_steps) == (37, 9, 27)


def test_an_auto_window_too_long_for_the_series_is_one_data_error(tmp_path):
    # monthly: window 24, so 24 + 1 = 25 rows for one training window; with 15% each for
    # validation and test the fewest is 35 (35 - 2 x round(5.25) = 25). 3 rows leave no room
    # for even a window of one step (1 training row), so "auto" keeps 24 and says so
    with pytest.raises(DataError) as caught:
        make_plan(_auto(), tmp_path / "run", False, _table(tmp_path, 3, "MS"))
    assert str(caught.value) == (
        "the series has 3 rows but window (24) + horizon (1) = 25 are needed for one training "
        "window; with the validation and test rows the run needs at least 35"
    )
    assert not (tmp_path / "run").exists()


def test_resume_with_other_settings_is_refused_once(tmp_path):
    data = _table(tmp_path, 120, "MS")
    out = tmp_path / "run"
    first = make_plan(_auto(), out, False, data)
    out.mkdir()
    write_run_info(out, first.info)
    # "auto" again resolves to the saved values: the same plan
    assert make_plan(_auto(), out, True, data).cfg == first.cfg
    other = RunConfig(DataConfig(), MODEL, TrainConfig(baselines="naive", lr=1e-3))
    with pytest.raises(ValueError) as caught:
        make_plan(other, out, True, data)
    assert str(caught.value) == (
        f"cannot resume {out}: the settings differ from the saved run's (train.lr: 0.001 != "
        "0.003); resume with the same settings or start a new run"
    )
    # a season of 4 gives window 8, so 76 training windows (origins 7 .. 82) and another
    # budget: every resolved difference is named, the window first (the saved order)
    with pytest.raises(ValueError, match=r"\(data\.window: 8 != 24; data\.season: 4 != 12; "):
        make_plan(_auto(season=4), out, True, data)


def test_resolve_run_config_and_the_planned_sizes():
    cfg = resolve_run_config(RunConfig(), "MS", (2000, 1))
    assert (cfg.data.season, cfg.data.window) == (12, 24)
    # 2000 windows: batch 32, 62 steps an epoch, 60 epochs = 3720 >= 1000 steps: as given
    assert (cfg.train.batch_size, cfg.train.epochs, cfg.train.patience) == (32, 60, 15)
    # 4 devices: an automatic batch of 8 (37 // 8 = 4, raised to 8) stays a multiple of 4
    assert resolve_run_config(RunConfig(), None, (37, 4)).train.batch_size == 8
    # 3 devices: 8 is rounded up to 9
    assert resolve_run_config(RunConfig(), None, (37, 3)).train.batch_size == 9
    explicit = RunConfig(
        DataConfig(
            season=7,
            window=9,
            start_padding="none",
            season_window=None,
            scaler="standard",
            target_transform="none",
        )
    )
    assert resolve_run_config(explicit, "MS", None) is explicit  # nothing "auto" there
    # the seasonal pattern: the last 10 seasons of each series of a panel, every row of one
    assert resolve_run_config(RunConfig(), "MS", None).data.season_window is None
    assert (
        resolve_run_config(RunConfig(DataConfig(id_column="id")), "MS", None).data.season_window
        == 10
    )
    # the default transform: each series' own log for a panel with a season, else none
    panel = RunConfig(DataConfig(id_column="id"))
    assert resolve_run_config(panel, "MS", None).data.target_transform == "per_series"
    assert resolve_run_config(panel, None, None).data.target_transform == "none"  # season 1
    assert resolve_run_config(RunConfig(), "MS", None).data.target_transform == "none"
    # the default scaler: a panel's series by MASE's own scale for a short season, else standard
    scalers = {
        freq: resolve_run_config(panel, freq, None).data.scaler for freq in (None, "QS", "MS", "D")
    }
    assert scalers == {None: "naive", "QS": "seasonal_naive", "MS": "standard", "D": "standard"}
    assert resolve_run_config(RunConfig(), "QS", None).data.scaler == "standard"  # one series
    assert planned_window(DataConfig(season=7)) == (14, True)
    assert planned_window(DataConfig(time_column=None)) == (10, True)  # no time step: season 1
    assert planned_batch(TrainConfig()) == 32


def test_an_unresolved_setting_below_the_plan_is_a_programming_error():
    with pytest.raises(ValueError, match=r"^check_length needs resolved settings, got window="):
        check_length(100, DataConfig(), forecast_only=False)
    with pytest.raises(ValueError, match=r"got season='auto', window='auto'; resolve them"):
        require_resolved(DataConfig(), "make_splits")
    require_resolved(DataConfig(season=1, window=3), "make_splits")  # resolved: passes


def test_a_run_folder_may_hold_its_own_table_which_config_json_names_relative(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    table = _table(run, 60, "MS")  # run/MS.csv: the only file of the new folder
    cfg = _auto().replace({"data": {"window": 12, "season": 12}})
    plan = make_plan(cfg, run, False, table)
    assert plan.data_path == table.absolute()
    assert plan.info.data_relative == "MS.csv" and plan.info.to_dict()["data_path"] == "MS.csv"
    elsewhere = _table(tmp_path, 60, "MS")
    assert make_plan(cfg, tmp_path / "new", False, elsewhere).info.to_dict()["data_path"] == (
        str(elsewhere.absolute())
    )
    (run / "notes.txt").write_text("x")
    with pytest.raises(ValueError, match=r"is not empty but for its table MS\.csv"):
        make_plan(cfg, run, False, table)
