"""What a run writes and reads back: a calibration file that must match its checksum,
checkpoints at every epoch end, metrics that stay numbers (or null) at any scale and on
all-zero targets, the dependencies' noise kept off stderr, and a full disk that names the
checkpoint to continue from."""

import dataclasses
import errno
import json
import logging
import math
import shutil
import warnings

import numpy as np
import pandas as pd
import pytest

from helpers import TINY_RUN, _complete_steps, _main, _metric_lines, _saved, tiny_run
from stacklstm._quiet import dropping_dependency_noise
from stacklstm.forecasting import predict
from stacklstm.forecasting.calibration import CALIBRATION_FILE
from stacklstm.metrics import forecast_metrics, mae, rmse
from stacklstm.plots.loss import plot_loss
from stacklstm.report import evaluate_run
from stacklstm.run import fit

# --------------------------------------------------------------------------- metrics


def test_rmse_is_scale_safe_and_the_plain_formula_on_ordinary_data():
    rng = np.random.default_rng(0)
    true, pred = rng.normal(size=(50, 3, 2)), rng.normal(size=(50, 3, 2))
    plain = float(np.sqrt(np.mean((pred - true) ** 2)))
    assert rmse(true, pred) == plain  # ordinary data: exactly the plain formula
    # errors of 1e-300 (their squares underflow to 0): the same RMSE, scaled
    for scale in (1e-300, 1e-160, 1e200):
        assert rmse(true * scale, pred * scale) == pytest.approx(plain * scale, rel=1e-12, abs=0)
    assert rmse([1e-300] * 3, [2.19e-300] * 3) == pytest.approx(1.19e-300, rel=1e-12, abs=0)
    assert mae([1e-300] * 3, [2.19e-300] * 3) == pytest.approx(1.19e-300, rel=1e-12, abs=0)
    assert rmse([0.0, 0.0], [0.0, 0.0]) == 0.0


def test_an_undefined_mape_is_none_and_json_null():
    out = forecast_metrics([0.0, 0.0], [1.0, -3.0])
    assert out == {"mae": 2.0, "rmse": math.sqrt(5.0), "mape": None, "smape": 200.0}
    assert json.loads(json.dumps(out, allow_nan=False)) == out


def _zero_csv(path, n=400):
    frame = pd.DataFrame(
        {"date": pd.date_range("2000-01-02", periods=n, freq="W"), "co2": np.zeros(n)}
    )
    frame.to_csv(path, index=False)
    return path


def test_an_all_zero_series_gets_a_report_with_null_mape_and_evaluate_and_resume_work(tmp_path):
    data, run = _zero_csv(tmp_path / "zero.csv"), tmp_path / "run"
    code, out, err = _main("train", "--out", run, "--data", data, "--quiet", *tiny_run()[0])
    assert code == 0, err
    assert err == ""  # no "No artists with labels" from the loss plot of zero losses
    report = json.loads((run / "report.json").read_text())
    for split in ("test", "val"):
        for name in ("model", "last_value", "seasonal_naive"):
            metrics = report[split][name]
            assert metrics["mape"] is None and metrics["mase"] is None, (split, name)
            assert math.isfinite(metrics["mae"]) and math.isfinite(metrics["smape"])
        assert report[split]["last_value"]["mae"] == 0.0  # 0 forecasts 0 exactly
    model_line = next(line for line in out.splitlines() if line.startswith("test  model"))
    assert model_line.split()[-2:] == ["n/a", "n/a"]
    assert "MAPE n/a (test and val): every target is 0, where a percentage error is undefined" in (
        out.splitlines()
    )
    assert any(line.startswith("MASE n/a (test and val): ") for line in out.splitlines())
    assert (run / "loss.png").stat().st_size > 0
    for command in (("evaluate", run), ("train", "--out", run, "--resume")):
        code, again, err = _main(*command, "--quiet")
        assert code == 0 and err == "", (command, err)
        assert again.splitlines()[:-1] == out.splitlines()[:-1]  # the same table
        assert json.loads((run / "report.json").read_text()) == report


def _no_nan(text):
    """``text`` as JSON, refusing NaN and Infinity (which ``json.loads`` accepts)."""

    def refuse(constant):
        raise AssertionError(f"{constant} in the JSON")

    return json.loads(text, parse_constant=refuse)


def test_a_backtest_of_an_all_zero_series_writes_null_metrics_and_a_note(tmp_path):
    from stacklstm.backtest import backtest
    from stacklstm.config import DataConfig, ModelConfig, RunConfig, TrainConfig

    pd.DataFrame({"y": np.zeros(80)}).to_csv(tmp_path / "zero.csv", index=False)
    cfg = RunConfig(
        DataConfig(target=("y",), time_column=None, window=6, horizon=3, season=4),
        ModelConfig(lstm_hidden_size=8, num_lstm_layers=1, linear_layer_sizes=(8,)),
        TrainConfig(epochs=1, batch_size=16, baselines="naive"),
    )
    result = backtest(cfg, tmp_path / "bt", folds=2, data_path=tmp_path / "zero.csv", quiet=True)
    saved = _no_nan((tmp_path / "bt" / "backtest.json").read_text())
    assert saved == json.loads(json.dumps(result.data))
    for fold in saved["folds"]:
        for name in ("model", "last_value", "seasonal_naive"):
            scores = fold["scores"][name]
            assert scores["mape"] is None and scores["mase"] is None and scores["mae"] == 0.0
            assert all(step["mape"] is None for step in fold["by_step"][name])
    overall = saved["summary"]["model"]["overall"]
    assert overall["mean"]["mape"] is None and overall["mean"]["mae"] == 0.0
    assert "MASE n/a: in some fold the in-sample seasonal naive error is 0" in result.table


def test_an_all_zero_ensemble_and_an_all_zero_store_get_null_mape(tmp_path):
    data, run = _zero_csv(tmp_path / "zero.csv"), tmp_path / "ensemble"
    code, out, err = _main(
        "train", "--out", run, "--data", data, "--quiet", *tiny_run()[0], "--ensemble", "2"
    )
    assert code == 0, err
    report = _no_nan((run / "report.json").read_text())
    assert report["test"]["model"]["mape"] is None
    assert [m["test"]["mape"] for m in report["ensemble"]["members"]] == [None, None]
    assert report["ensemble"]["ranked_by"] == "mae"  # no member has a MASE
    assert "MAPE n/a (test and val): every target is 0" in out

    # a panel where one store sold nothing: its own MAPE is null, the pooled one skips it
    days = pd.date_range("2021-01-01", periods=60, freq="D")
    t = np.arange(60)
    frame = pd.concat(
        [
            pd.DataFrame({"day": days, "store": "a", "sales": 10 + 3 * np.sin(2 * np.pi * t / 7)}),
            pd.DataFrame({"day": days, "store": "z", "sales": 0.0}),
        ]
    ).sort_values(["day", "store"])
    frame.to_csv(tmp_path / "sales.csv", index=False)
    flags = [
        "--id-column",
        "store",
        "--target",
        "sales",
        "--time-column",
        "day",
        "--window",
        "4",
        "--horizon",
        "2",
        "--season",
        "7",
        "--test-size",
        "6",
        "--val-size",
        "6",
        "--hidden-size",
        "8",
        "--num-layers",
        "1",
        "--linear-layer-sizes",
        "8",
        "--epochs",
        "1",
        "--batch-size",
        "16",
        "--baselines",
        "naive",
        "--quiet",
    ]
    panel = tmp_path / "panel"
    code, out, err = _main("train", "--data", tmp_path / "sales.csv", "--out", panel, *flags)
    assert code == 0, err
    report = _no_nan((panel / "report.json").read_text())
    for split in ("test", "val"):
        zero, a = report["per_series"]["z"][split], report["per_series"]["a"][split]
        for name in ("model", "last_value", "seasonal_naive"):
            assert zero[name]["mape"] is None and zero[name]["mase"] is None
            # the pooled MAPE skips the zero targets: that of store a's
            assert report[split][name]["mape"] == pytest.approx(a[name]["mape"], rel=1e-12)
    assert "MAPE n/a" not in out
    code, _, err = _main("evaluate", panel, "--quiet")
    assert code == 0, err
    assert _no_nan((panel / "report.json").read_text()) == report


def test_a_loss_plot_without_positive_losses_warns_nothing(tmp_path):
    lines = [{"kind": "train", "step": 10, "train_loss": 0.0},
             {"kind": "epoch", "step": 24, "train_loss": 0.0, "val_loss": 0.0}]  # fmt: skip
    (tmp_path / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # matplotlib's "No artists with labels" fails here
        plot_loss(tmp_path / "loss.png", tmp_path / "m.jsonl")
    assert (tmp_path / "loss.png").stat().st_size > 0


# --------------------------------------------------------------------------- noise


def test_orbax_metadata_records_are_dropped_and_other_records_pass(tmp_path):
    from orbax.checkpoint._src.metadata.checkpoint import _MetadataStoreImpl

    records = []

    class Keep(logging.Handler):
        def emit(self, record):
            records.append(record.getMessage())

    absl, handler = logging.getLogger("absl"), Keep()
    absl.addHandler(handler)
    damaged = tmp_path / "_CHECKPOINT_METADATA"
    damaged.write_text('{"item_handlers": ')
    store = _MetadataStoreImpl()
    try:
        with dropping_dependency_noise():
            assert store.read(tmp_path / "absent") is None  # a step still being written
            assert store.read(damaged) is None  # a damaged file
            absl.warning("a real problem")
        assert records == ["a real problem"]
        store.read(tmp_path / "absent")  # after the block: shown again
        assert len(records) == 2 and records[1].startswith("Metadata file does not exist")
    finally:
        absl.removeHandler(handler)


def test_readers_print_no_orbax_metadata_noise(trained_run, tmp_path):
    """A step folder whose metadata file is not there (yet), as a reader can meet while a run
    trains, and a damaged metadata file: evaluate succeeds and prints nothing."""
    run = tmp_path / "run"
    shutil.copytree(trained_run.out_dir, run)
    (run / "checkpoints" / "70").mkdir()
    (best,) = (run / "checkpoints_best").iterdir()
    (best / "_CHECKPOINT_METADATA").write_text('{"item_handlers": ')
    code, _, err = _main("evaluate", run, "--quiet")
    assert code == 0 and err == "", err
    assert _no_nan((run / "report.json").read_text()) == trained_run.report.data


# --------------------------------------------------------------------------- calibration

CONFORMAL_RUN = dataclasses.replace(
    TINY_RUN,
    train=dataclasses.replace(
        TINY_RUN.train, epochs=1, loss="quantile", quantiles=(0.1, 0.9), conformal=True
    ),
)


def _quantile_columns(frame):
    return frame[[c for c in frame.columns if "_q" in c]].to_numpy()


def test_an_edited_calibration_file_is_recalibrated_and_an_old_one_still_loads(tmp_path, caplog):
    run = tmp_path / "run"
    fit(CONFORMAL_RUN, run, quiet=True)
    path = run / CALIBRATION_FILE
    saved = json.loads(path.read_text())
    assert len(saved["sha256"]) == 64
    with caplog.at_level(logging.WARNING, logger="stacklstm"):
        expected = _quantile_columns(predict(run))
    assert caplog.records == []  # the kept offsets, read as written

    edited = json.loads(path.read_text())
    edited["offsets"][0][0][0] += 5.0
    path.write_text(json.dumps(edited, indent=2))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="stacklstm"):
        got = _quantile_columns(predict(run))
    np.testing.assert_array_equal(got, expected)  # not moved by the edited offset
    (warning,) = [r.getMessage() for r in caplog.records]
    assert warning == (
        f"cannot use {path} (its content differs from the checksum written with it: edited "
        "or damaged); calibrating again from the validation windows of the run's own table"
    )

    # a file written before checksums existed is used as it is: the edit moves the intervals
    del edited["sha256"]
    path.write_text(json.dumps(edited, indent=2))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="stacklstm"):
        moved = _quantile_columns(predict(run))
    assert caplog.records == []
    assert not np.array_equal(moved, expected)
    # evaluate writes the file again, with its checksum
    evaluate_run(run)
    assert json.loads(path.read_text()) == saved


# --------------------------------------------------------------------------- checkpoints


def test_checkpoint_every_0_saves_every_epoch_end_with_the_same_numbers(
    trained_run, tmp_path, monkeypatch
):
    monkeypatch.setenv("STACKLSTM_CHECKPOINT_SECONDS", "0")  # every epoch end
    run = tmp_path / "run"
    on_disk = []
    cfg = dataclasses.replace(
        TINY_RUN, train=dataclasses.replace(TINY_RUN.train, checkpoint_every=0)
    )

    def at_epoch_end(end):  # before the epoch's own checkpoint: what a kill -9 leaves
        on_disk.append((end.epoch, _complete_steps(run)))

    fit(cfg, run, quiet=True, callbacks=[at_epoch_end])
    assert on_disk == [(1, [0]), (2, [0, 24])]  # epoch 1's work was on disk during epoch 2
    assert _complete_steps(run) == [24, 48]
    ours, reference = _saved(run), _saved(trained_run.out_dir)  # checkpoint_every=20
    for which in ("latest", "best"):
        assert ours[which][0] == reference[which][0]
        for a, b in zip(ours[which][1], reference[which][1], strict=True):
            np.testing.assert_array_equal(a, b)
    assert ours["metrics"] == reference["metrics"]


def test_short_epochs_checkpoint_every_checkpoint_seconds_with_the_same_numbers(
    trained_run, tmp_path, monkeypatch
):
    from stacklstm.train import trainer

    clock = iter(range(0, 1000, 6))  # each reading of the clock 6 "seconds" later
    monkeypatch.setattr(trainer, "_clock", lambda: next(clock))
    monkeypatch.setenv("STACKLSTM_CHECKPOINT_SECONDS", "10")
    run = tmp_path / "run"
    cfg = dataclasses.replace(
        TINY_RUN, train=dataclasses.replace(TINY_RUN.train, checkpoint_every=0)
    )
    on_disk = []
    fit(cfg, run, quiet=True, callbacks=[lambda end: on_disk.append(_complete_steps(run))])
    # start 0; epoch 1 ends at 6 (6 s after the start: not due), epoch 2 at 12: the run's end
    assert on_disk == [[0], [0]] and _complete_steps(run) == [0, 48]
    ours, reference = _saved(run), _saved(trained_run.out_dir)
    for which in ("latest", "best"):
        for a, b in zip(ours[which][1], reference[which][1], strict=True):
            np.testing.assert_array_equal(a, b)
    monkeypatch.setenv("STACKLSTM_CHECKPOINT_SECONDS", "soon")
    with pytest.raises(ValueError, match="STACKLSTM_CHECKPOINT_SECONDS must be a number"):
        trainer.checkpoint_seconds()


def _full_disk_at_best_commit(monkeypatch, step):
    """Orbax's commit of best checkpoint ``step`` fails as on a full disk."""
    from orbax.checkpoint._src.path import atomicity

    from helpers import _no_space

    commit = atomicity.AtomicRenameTemporaryPath.finalize

    async def full(self):
        final = self.get_final()
        if final.name == str(step) and final.parent.name == "checkpoints_best":
            _no_space()
        return await commit(self)

    monkeypatch.setattr(atomicity.AtomicRenameTemporaryPath, "finalize", full)


def test_a_full_disk_at_a_best_checkpoint_names_the_intact_one_and_resume_is_exact(
    trained_run, tmp_path, monkeypatch
):
    run = tmp_path / "run"
    shutil.rmtree(run, ignore_errors=True)
    _full_disk_at_best_commit(monkeypatch, 24)
    with pytest.raises(OSError) as info:
        fit(TINY_RUN, run, quiet=True)
    assert info.value.errno == errno.ENOSPC
    message = info.value.strerror
    assert "\n" not in message
    assert message.startswith(f"cannot write checkpoint step 24 to {run}/checkpoints_best: ")
    assert message.endswith(
        f"; the newest complete checkpoint is still step 20 in {run}/checkpoints: fix the "
        "cause (a full disk?) and continue from it with `resume=True`"
    )
    assert _complete_steps(run) == [0, 20]
    monkeypatch.undo()

    code, _, err = _main("train", "--out", run, "--resume", "--quiet")
    assert code == 0, err
    ours, reference = _saved(run), _saved(trained_run.out_dir)
    for which in ("latest", "best"):
        assert ours[which][0] == reference[which][0]
        for a, b in zip(ours[which][1], reference[which][1], strict=True):
            np.testing.assert_array_equal(a, b)
        assert ours[which][2] == reference[which][2]
    assert _metric_lines(run) == _metric_lines(trained_run.out_dir)
    assert ours["report"] == reference["report"]


def test_readers_say_in_one_line_when_they_forecast_before_any_epoch_ended(tmp_path, caplog):
    import shutil

    from helpers import TINY_RUN
    from stacklstm.forecasting import load_run
    from stacklstm.run import fit

    run = tmp_path / "run"
    fit(TINY_RUN, run, quiet=True, stop_after_steps=3)  # stopped inside the first epoch
    with caplog.at_level(logging.WARNING, logger="stacklstm.train"):
        assert load_run(run).checkpoint == {"kind": "latest", "step": 3}
    said = [r.getMessage() for r in caplog.records if "no best checkpoint" in r.getMessage()]
    assert said == [
        f"{run} has no best checkpoint yet (no epoch has ended); forecasting with the latest "
        "one, step 3"
    ]
    shutil.rmtree(run / "checkpoints" / "3")  # only the run's first checkpoint is left
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="stacklstm.train"):
        assert load_run(run).checkpoint == {"kind": "latest", "step": 0}
    said = [r.getMessage() for r in caplog.records if "no best checkpoint" in r.getMessage()]
    assert len(said) == 1 and said[0].endswith("step 0 (the untrained initial model)")


def test_a_partial_copy_without_the_best_and_newest_checkpoints_is_refused(trained_run, tmp_path):
    from stacklstm.forecasting import load_run

    copy = tmp_path / "copy"
    shutil.copytree(trained_run.out_dir, copy)
    shutil.rmtree(copy / "checkpoints_best")
    steps = sorted(int(p.name) for p in (copy / "checkpoints").iterdir() if p.name.isdigit())
    for newer in steps[1:]:  # only the oldest checkpoint is left
        shutil.rmtree(copy / "checkpoints" / str(newer))
    said = rf"{copy} is incomplete: .*newest checkpoint is step {steps[0]}"
    with pytest.raises(ValueError, match=said):
        load_run(copy)
    code, _, err = _main("predict", copy, "--output", tmp_path / "f.csv")
    assert code == 2 and "is incomplete" in err and not (tmp_path / "f.csv").exists()
