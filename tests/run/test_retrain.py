"""``retrain``: the epochs chosen on validation, then a fresh model trained on every row
(``"all"``, the default) or on the training and validation windows together (``"on"``); the
same numbers as that run trained by hand, resumed bit-identically, its report scored with the
selection's model where the saved model trained on the scored rows."""

import json

import numpy as np
import pandas as pd
import pytest

from helpers import _assert_same_run, _leaves, _saved
from stacklstm.checks import SettingError
from stacklstm.config import RunConfig, TrainConfig
from stacklstm.data import DataError
from stacklstm.forecasting import load_run
from stacklstm.run.loop import fit
from stacklstm.run.retrain import RetrainResult
from stacklstm.rundir import read_run_info
from stacklstm.train.plan import make_plan


def panel_csv(path):
    """Two daily series around 1 (a weekly swing and noise), of 90 and 120 rows."""
    rng = np.random.default_rng(0)
    frames = []
    for store, n in (("a", 90), ("b", 120)):
        t = np.arange(n)
        sales = 1 + 0.3 * np.sin(2 * np.pi * t / 7) + 0.2 * rng.normal(size=n)
        frames.append(
            pd.DataFrame(
                {
                    "day": pd.date_range("2021-01-01", periods=n, freq="D"),
                    "store": store,
                    "sales": sales,
                }
            )
        )
    pd.concat(frames).to_csv(path, index=False)


# no padding and no auto choice left to the rows: the run trained by hand on the merged rows
# (val_size 0) cuts the very same windows, scaled on the same rows
SETTINGS = {
    "data": {
        "id_column": "store",
        "target": ("sales",),
        "time_column": "day",
        "window": 4,
        "horizon": 2,
        "season": 7,
        "test_size": 6,
        "val_size": 12,
        "start_padding": "none",
        "deseasonalize": False,
        "target_transform": "none",
    },
    "model": {"lstm_hidden_size": 8, "num_lstm_layers": 1, "linear_layer_sizes": (8,)},
    "train": {
        "epochs": 40,
        "patience": 3,
        "batch_size": 16,
        "lr": 3e-2,
        "baselines": "naive",
        "log_every": 2,
        "checkpoint_every": 5,
        "retrain": "on",
    },
}


@pytest.fixture(scope="module")
def table(tmp_path_factory):
    path = tmp_path_factory.mktemp("retrain") / "sales.csv"
    panel_csv(path)
    return path


@pytest.fixture(scope="module")
def retrained(table):
    run = table.parent / "run"
    result = fit(RunConfig().replace(SETTINGS), run, quiet=True, data_path=table)
    return run, result


def _epoch_lines(run):
    lines = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines()]
    return [line for line in lines if line["kind"] == "epoch"]


def test_the_retrained_model_is_a_run_on_the_merged_rows_for_the_best_epochs(table, retrained):
    run, result = retrained
    assert isinstance(result, RetrainResult) and result.stop_reason == "epochs"
    # the epochs: the selection's lowest validation loss, which early stopping found
    val = [line["val_loss"] for line in _epoch_lines(run / "selection")]
    best = int(np.argmin(val)) + 1
    assert best + 3 == len(val) < 40  # stopped early, after `patience` worse epochs
    assert result.epochs == best and result.selection.best_val_loss == min(val)
    assert [line["val_loss"] for line in _epoch_lines(run)] == [None] * best
    # the same as a run trained by hand: no validation rows, `best` epochs, no stopping
    by_hand = table.parent / "by_hand"
    fit(
        RunConfig().replace(
            {
                **SETTINGS,
                "data": {**SETTINGS["data"], "val_size": 0},
                "train": {**SETTINGS["train"], "epochs": best, "patience": 0, "retrain": "off"},
            }
        ),
        by_hand,
        quiet=True,
        data_path=table,
    )
    mine, theirs = load_run(run), load_run(by_hand)
    assert mine.checkpoint == theirs.checkpoint  # its last epoch, the same step
    for a, b in zip(_leaves(mine.params), _leaves(theirs.params), strict=True):
        np.testing.assert_array_equal(a, b)
    # config.json: the settings as given (retrain resolved); the report names the epochs
    assert read_run_info(run).config.train.epochs == 40
    assert read_run_info(run).config.train.retrain == "on"
    assert result.report.data["retrain"]["epochs"] == best
    assert f"retrained for {best} epochs" in result.report.table


def test_the_validation_split_is_scored_with_the_selections_model(retrained):
    run, result = retrained
    selection = json.loads((run / "selection" / "report.json").read_text())
    report = result.report.data
    # the same model on the same windows, scaled as it trained (its training rows only)
    assert report["val"]["model"] == selection["val"]["model"]
    assert report["test"]["model"] != selection["test"]["model"]  # the retrained model
    # the combination is weighed by the selection's validation error, out of sample
    model_mae = report["combination"]["val_mae"]["model"]
    assert model_mae == pytest.approx(selection["val"]["model"]["mae"], rel=1e-12)


def test_a_retrained_run_resumes_bit_identically_from_either_run(table, retrained):
    run, result = retrained
    selection_steps = result.selection.step
    cfg = RunConfig().replace(SETTINGS)
    again = table.parent / "again"
    first = fit(cfg, again, quiet=True, data_path=table, stop_after_steps=7)
    assert first.stop_reason == "stop_after_steps" and first.step == 7
    assert not (again / "config.json").exists() and (again / "selection").is_dir()
    second = fit(cfg, again, resume=True, quiet=True, stop_after_steps=selection_steps + 3)
    assert second.stop_reason == "stop_after_steps" and second.step == selection_steps + 3
    assert (again / "config.json").exists()
    third = fit(cfg, again, resume=True, quiet=True)
    assert third.stop_reason == "epochs" and third.step == result.step
    _assert_same_run(_saved(again / "selection"), _saved(run / "selection"))
    _assert_same_run(_saved(again), _saved(run))
    with pytest.raises(ValueError, match="already holds a run"):
        fit(cfg, again, quiet=True, data_path=table)


def test_a_folder_holding_a_selection_is_not_a_new_run(table, tmp_path):
    cfg = RunConfig().replace(SETTINGS)
    fit(cfg, tmp_path / "run", quiet=True, data_path=table, stop_after_steps=2)
    with pytest.raises(ValueError, match="is not empty"):
        fit(cfg, tmp_path / "run", quiet=True, data_path=table)
    off = cfg.replace({"train": {"retrain": "off"}})
    with pytest.raises(ValueError, match="selection run of a retrained run"):
        fit(off, tmp_path / "run", resume=True, quiet=True)


def test_auto_retrains_a_panel_with_validation_windows(table, tmp_path):
    def resolved(overrides, data_path=table):
        cfg = RunConfig().replace(SETTINGS).replace(overrides)
        return make_plan(cfg, tmp_path / "new", False, data_path).cfg.train.retrain

    assert resolved({"train": {"retrain": "auto"}}) == "all"
    assert resolved({"train": {"retrain": "auto"}, "data": {"val_size": 0}}) == "off"
    assert resolved({"train": {"retrain": "auto", "ensemble": 2}}) == "all"  # each member
    single = RunConfig(train=TrainConfig(epochs=1, baselines="naive"))  # the bundled series
    assert make_plan(single, tmp_path / "co2", False, None).cfg.train.retrain == "all"
    for kind in ("on", "all"):
        with pytest.raises(DataError, match=f"retrain='{kind}' chooses the epochs on the val"):
            resolved({"train": {"retrain": kind}, "data": {"val_size": 0}})


# ---------------------------------------------------------------- retrain="all", the default


@pytest.fixture(scope="module")
def retrained_all(table):
    run = table.parent / "run_all"
    cfg = RunConfig().replace(SETTINGS).replace({"train": {"retrain": "all"}})
    return run, fit(cfg, run, quiet=True, data_path=table)


def test_all_trains_the_saved_model_on_every_row_for_the_best_epochs(table, retrained_all):
    run, result = retrained_all
    val = [line["val_loss"] for line in _epoch_lines(run / "selection")]
    best = int(np.argmin(val)) + 1
    assert (
        result.epochs == best and [line["val_loss"] for line in _epoch_lines(run)] == [None] * best
    )
    # the same as a run trained by hand on every row (no validation, no test), `best` epochs
    by_hand = table.parent / "by_hand_all"
    fit(
        RunConfig().replace(
            {
                **SETTINGS,
                "data": {**SETTINGS["data"], "val_size": 0, "test_size": 0},
                "train": {**SETTINGS["train"], "epochs": best, "patience": 0, "retrain": "off"},
            }
        ),
        by_hand,
        quiet=True,
        data_path=table,
    )
    mine, theirs = load_run(run), load_run(by_hand)
    assert mine.checkpoint == theirs.checkpoint
    for a, b in zip(_leaves(mine.params), _leaves(theirs.params), strict=True):
        np.testing.assert_array_equal(a, b)
    # its scaler is fitted on every row, the selection's on the training rows only
    assert read_run_info(run).scaler.to_dict() == read_run_info(by_hand).scaler.to_dict()
    assert read_run_info(run).scaler.to_dict() != read_run_info(run / "selection").scaler.to_dict()
    assert read_run_info(run).config.train.retrain == "all"


def test_all_scores_both_splits_with_the_selection_which_did_not_train_on_them(retrained_all):
    run, result = retrained_all
    selection = json.loads((run / "selection" / "report.json").read_text())
    report = result.report.data
    for split in ("val", "test"):  # the same model on the same windows, as it was scaled
        assert report[split]["model"] == selection[split]["model"]
    assert report["retrain"]["rows"] == "all" and report["retrain"]["epochs"] == result.epochs
    assert "trained again on every row" in result.report.table


def test_all_forecasts_from_the_model_that_saw_the_newest_rows(table, retrained_all):
    from stacklstm.forecasting import predict

    run, _ = retrained_all
    mine = predict(run, table, format="long")
    selection = predict(run / "selection", table, format="long")
    assert mine[["unique_id", "ds"]].equals(selection[["unique_id", "ds"]])
    assert not np.allclose(mine["stacklstm"], selection["stacklstm"])


def test_all_resumes_bit_identically_from_either_run(table, retrained_all):
    run, result = retrained_all
    cfg = RunConfig().replace(SETTINGS).replace({"train": {"retrain": "all"}})
    again = table.parent / "again_all"
    fit(cfg, again, quiet=True, data_path=table, stop_after_steps=7)
    fit(cfg, again, resume=True, quiet=True, stop_after_steps=result.selection.step + 3)
    third = fit(cfg, again, resume=True, quiet=True)
    assert third.stop_reason == "epochs" and third.step == result.step
    _assert_same_run(_saved(again), _saved(run))
    assert TrainConfig(retrain="on", ensemble=2).retrain == "on"
    with pytest.raises(SettingError, match="retrain"):
        TrainConfig(retrain="yes")


def test_the_cli_resumes_a_run_stopped_in_its_selection(table, retrained_all, capsys):
    from stacklstm.cli import main

    run, _ = retrained_all  # the default, retrain="all"
    stopped = table.parent / "stopped"
    cfg = RunConfig().replace(SETTINGS).replace({"train": {"retrain": "auto"}})
    fit(cfg, stopped, quiet=True, data_path=table, stop_after_steps=4)
    # no config.json of its own yet: the settings come from the selection's
    code = main(["train", "--out", str(stopped), "--resume", "--baselines", "naive", "--quiet"])
    out = capsys.readouterr().out
    assert code == 0 and f"with its selection run in {stopped / 'selection'}" in out
    _assert_same_run(_saved(stopped / "selection"), _saved(run / "selection"))
    _assert_same_run(_saved(stopped), _saved(run))


@pytest.mark.slow  # a retrained seed ensemble: about 30 s
def test_a_seed_ensemble_retrains_each_member(table, retrained):
    run, result = retrained
    cfg = RunConfig().replace(SETTINGS).replace({"train": {"ensemble": 2}})
    ens = table.parent / "ensemble"
    got = fit(cfg, ens, quiet=True, data_path=table)
    # member 0 is the single retrained run of the same seed, bit for bit; member 1 its own
    _assert_same_run(_saved(ens / "members" / "0"), _saved(run))
    _assert_same_run(_saved(ens / "members" / "0" / "selection"), _saved(run / "selection"))
    assert (ens / "members" / "1" / "selection" / "config.json").is_file()
    assert got.step == sum(m.step for m in got.members) and got.members[0].step == result.step
    assert read_run_info(ens).config.train.retrain == "on"
    # the test split: the median of the retrained members (for two, their mean)
    report = got.report.data
    members = [json.loads((ens / "members" / str(k) / "report.json").read_text()) for k in (0, 1)]

    def point(metrics, like):  # the point metrics the ensemble's report keeps per member
        return {key: metrics[key] for key in like}

    for k in (0, 1):
        scored = report["ensemble"]["members"][k]["test"]
        assert scored == point(members[k]["test"]["model"], scored)
    # the validation split: each member's selection run, which did not train on it
    for k in (0, 1):
        scored = report["ensemble"]["members"][k]["val"]
        assert scored == point(members[k]["val"]["model"], scored)
    selections = [
        json.loads((ens / "members" / str(k) / "selection" / "report.json").read_text())["val"][
            "model"
        ]
        for k in (0, 1)
    ]
    assert [members[k]["val"]["model"] for k in (0, 1)] == selections
    assert report["val"]["model"]["mae"] <= max(s["mae"] for s in selections)
    assert report["retrain"]["epochs"] == [result.epochs, got.members[1].epochs]
    assert "members: each retrained" in got.report.table


@pytest.mark.slow  # an ensemble trained, killed and resumed twice: about 60 s
def test_a_retrained_ensemble_resumes_bit_identically_from_a_members_selection(table, retrained):
    cfg = RunConfig().replace(SETTINGS).replace({"train": {"ensemble": 2}})
    whole = table.parent / "ensemble_whole"
    full = fit(cfg, whole, quiet=True, data_path=table)
    member0 = full.members[0].step
    again = table.parent / "ensemble_again"
    # stopped inside member 1's selection run: members/1 holds only selection/
    first = fit(cfg, again, quiet=True, data_path=table, stop_after_steps=member0 + 3)
    assert first.stop_reason == "stop_after_steps" and first.step == member0 + 3
    assert not (again / "members" / "1" / "config.json").exists()
    assert (again / "members" / "1" / "selection").is_dir()
    second = fit(cfg, again, resume=True, quiet=True)
    assert second.stop_reason == full.stop_reason and second.step == full.step
    for k in ("0", "1"):
        _assert_same_run(_saved(again / "members" / k), _saved(whole / "members" / k))
        _assert_same_run(
            _saved(again / "members" / k / "selection"), _saved(whole / "members" / k / "selection")
        )
    assert second.report.data["test"] == full.report.data["test"]
    assert second.report.data["val"] == full.report.data["val"]
