"""The training loop: the run it writes, resume (also after SIGKILL or a damaged checkpoint),
seeds, and a full disk mid-run (the NaN/Inf guard and early stopping are test_trainer.py).
(The crash tests, which kill
real ``python -m stacklstm train`` processes, are tests/e2e/test_train.py.)"""

import errno
import io
import json
import shutil
from pathlib import Path

import jax
import numpy as np
import pandas as pd
import pytest

from helpers import (
    CRASH_RUN,
    TINY_RUN,
    _full_disk_at_commit,
    _last_logged_step,
    _leaves,
    _main,
    _metric_lines,
    _no_space,
)
from stacklstm.data import DataError
from stacklstm.forecaster import build_model
from stacklstm.forecasting import load_run
from stacklstm.run import FitResult, fit
from stacklstm.rundir.files import METRICS_FILE
from stacklstm.train.checkpoint import BEST_DIR, RunCheckpoints
from stacklstm.train.step import init_state, make_optimizer, make_schedule


def test_fit_writes_the_run_folder(trained_run):
    out = trained_run.out_dir
    assert isinstance(trained_run, FitResult)
    assert (trained_run.step, trained_run.epochs, trained_run.stop_reason) == (48, 2, "epochs")
    names = {"config.json", "checkpoints", BEST_DIR, METRICS_FILE, "report.json"}
    assert names | {"forecast.png", "loss.png"} <= {p.name for p in out.iterdir()}
    lines = _metric_lines(out)
    # log every 10 steps within each 24-step epoch, plus the epoch lines
    assert [(r["kind"], r["step"]) for r in lines] == [
        ("train", 10), ("train", 20), ("train", 24), ("epoch", 24),
        ("train", 34), ("train", 44), ("train", 48), ("epoch", 48),
    ]  # fmt: skip
    assert all(r["val_loss"] > 0 for r in lines if r["kind"] == "epoch")
    schedule = make_schedule(TINY_RUN.train, total_steps=48)
    assert lines[0]["lr"] == pytest.approx(float(schedule(9)))
    with RunCheckpoints(out) as ckpts:
        assert ckpts.latest_step("latest") == 48  # 0 and 20 saved before; two are kept
        assert ckpts.latest_step("best") == trained_run.best_step
    report = json.loads((out / "report.json").read_text())
    assert set(report["test"]) == {"model", "last_value", "seasonal_naive", "combination"}
    assert set(report["test"]["model"]) >= {"mae", "rmse", "mape"}
    assert report["n_test"] == 343 and report["checkpoint"]["kind"] == "best"


def test_resume_is_bit_identical_to_an_uninterrupted_run(trained_run, tmp_path):
    whole = trained_run
    # stopped mid-epoch 2 (step 30, a checkpoint), then resumed
    stopped = fit(TINY_RUN, tmp_path / "split", quiet=True, stop_after_steps=30)
    assert (stopped.step, stopped.stop_reason, stopped.report) == (30, "stop_after_steps", None)
    resumed = fit(TINY_RUN, tmp_path / "split", quiet=True, resume=True)
    # a crash at step 45: metrics lines up to step 44 were written, the last checkpoint is 40
    crashed = fit(TINY_RUN, tmp_path / "crash", quiet=True, stop_after_steps=45)
    assert crashed.step == 45
    with RunCheckpoints(tmp_path / "crash") as ckpts:
        ckpts._managers["latest"].delete(45)  # as if killed before that save
        assert ckpts.latest_step("latest") == 40
    assert max(r["step"] for r in _metric_lines(tmp_path / "crash")) == 44
    recovered = fit(TINY_RUN, tmp_path / "crash", quiet=True, resume=True)

    expected = _leaves(load_run(whole.out_dir).params)
    for result in (resumed, recovered):
        assert result.step == whole.step == 48
        assert result.best_val_loss == whole.best_val_loss
        for a, b in zip(expected, _leaves(load_run(result.out_dir).params), strict=True):
            np.testing.assert_array_equal(a, b)
        assert _metric_lines(result.out_dir) == _metric_lines(whole.out_dir)  # no duplicates
        report = {**result.report.data, "data_path": whole.report.data["data_path"]}
        assert report == whole.report.data


def test_resume_refuses_another_config(trained_run):
    other = TINY_RUN.replace({"train": {"epochs": 3}, "model": {"lstm_hidden_size": 9}})
    with pytest.raises(ValueError, match=r"model\.lstm_hidden_size: 9 != 8; train\.epochs: 3 != 2"):
        fit(other, trained_run.out_dir, resume=True, quiet=True)
    with pytest.raises(ValueError, match="already holds a run; pass `resume=True`"):
        fit(TINY_RUN, trained_run.out_dir, quiet=True)


def test_resume_of_a_finished_run_only_rewrites_the_report(trained_run):
    before = _metric_lines(trained_run.out_dir)
    again = fit(TINY_RUN, trained_run.out_dir, resume=True, quiet=True)
    assert again.step == trained_run.step and again.stop_reason == "epochs"
    assert _metric_lines(trained_run.out_dir) == before


def test_resuming_a_finished_run_says_so_and_a_failed_report_says_what_is_safe(
    trained_run, tmp_path, monkeypatch
):
    import stacklstm.report.contents as report

    run = tmp_path / "run"
    shutil.copytree(trained_run.out_dir, run)
    code, _, err = _main("train", "--out", run, "--resume")  # not quiet: the info line
    assert code == 0, err
    assert f"resumed {run} at step 48: training finished after epoch 2; writing the report" in err
    assert "(epoch 3" not in err
    monkeypatch.setattr(report, "atomic_write", _no_space)
    code, _, err = _main("train", "--out", run, "--resume", "--quiet")
    assert code == 2 and len(err.splitlines()) == 1, err
    assert (
        f"training finished (48 steps; its checkpoints in {run} are complete) but writing the "
        "report failed: No space left on device; fix the cause (a full disk?) and write the "
        f"report with: stacklstm evaluate {run}"
    ) in err


def test_fit_validates_before_creating_the_run_folder(tmp_path):
    short = tmp_path / "short.csv"
    frame = pd.DataFrame({"date": pd.date_range("2000-01-01", periods=8, freq="D"), "co2": 1.0})
    frame.to_csv(short, index=False)
    out = tmp_path / "run"
    with pytest.raises(DataError, match="training split has 6 of 8 rows"):
        fit(TINY_RUN, out, data_path=short, quiet=True)
    with pytest.raises(DataError, match="not found"):
        fit(TINY_RUN, out, data_path=tmp_path / "missing.csv", quiet=True)
    big_batch = TINY_RUN.replace({"train": {"batch_size": 5000}})
    with pytest.raises(DataError, match=r"`batch_size` \(5000\) is larger than the 1592"):
        fit(big_batch, out, quiet=True)
    assert not out.exists()


def test_same_seed_is_bit_identical_and_another_seed_differs(reference, tmp_path):
    runs = {}
    for name, seed in (("a", 0), ("b", 0), ("other", 1)):
        cfg = CRASH_RUN.replace({"train": {"seed": seed}})
        fit(cfg, tmp_path / name, quiet=True, stop_after_steps=20)
        with RunCheckpoints(tmp_path / name, read_only=True) as ckpts:
            state, _, _ = ckpts.restore("latest", _abstract_state(cfg))
        runs[name] = (
            [np.asarray(a) for a in jax.tree.leaves(state)],
            _metric_lines(tmp_path / name),
        )
    (a, a_lines), (b, b_lines), (other, other_lines) = runs["a"], runs["b"], runs["other"]
    for x, y in zip(a, b, strict=True):
        np.testing.assert_array_equal(x, y)
    assert a_lines == b_lines == reference[1]["metrics"][: len(a_lines)]  # = the longer run's
    params = slice(1, 1 + len(jax.tree.leaves(_abstract_state(CRASH_RUN).params)))
    assert all(not np.array_equal(x, y) for x, y in zip(a[params], other[params], strict=True))
    assert [r["train_loss"] for r in a_lines] != [r["train_loss"] for r in other_lines]


def _abstract_state(cfg):
    model = build_model(cfg.model, output_size=1)
    optimizer = make_optimizer(cfg.train, total_steps=1)
    x = np.zeros((1, 1, 1), np.float32)
    return jax.eval_shape(lambda: init_state(model, optimizer, jax.random.key(0), x))


def _full_after(writes):
    """``Path.open`` whose metrics file refuses the ``writes + 1``-th write (a full disk)."""
    real_open = Path.open

    class Full(io.TextIOWrapper):
        count = 0

        def write(self, text):
            Full.count += 1
            if Full.count > writes:
                raise OSError(errno.ENOSPC, "No space left on device")
            return super().write(text)

    def open_(self, mode="r", *args, **kwargs):
        if self.name == METRICS_FILE and mode == "a":
            return Full(real_open(self, "ab"), encoding="utf-8")
        return real_open(self, mode, *args, **kwargs)

    return open_


@pytest.mark.parametrize("where", ["checkpoint", "metrics"])
def test_disk_full_mid_run_names_the_step_and_keeps_the_last_checkpoint(
    reference, tmp_path, monkeypatch, where
):
    if where == "checkpoint":
        _full_disk_at_commit(monkeypatch, 40)
        expected = "cannot write checkpoint step 40 to {run}/checkpoints: [Errno 28] No space"
        expected_tail = "the newest complete checkpoint is still step 30: fix the cause"
    else:
        monkeypatch.setattr(Path, "open", _full_after(writes=4))  # lines of steps 5-20 only
        expected = "cannot write {run}/metrics.jsonl at step 25: No space left on device"
        expected_tail = "the newest complete checkpoint is step 20: fix the cause"
    run = tmp_path / "run"
    with pytest.raises(OSError) as info:
        fit(CRASH_RUN, run, quiet=True)
    assert info.value.errno == errno.ENOSPC
    assert expected.format(run=run) in str(info.value) and expected_tail in str(info.value)
    assert "continue from it with `resume=True`" in str(info.value)
    monkeypatch.undo()

    fit(CRASH_RUN, run, quiet=True, resume=True, stop_after_steps=60)  # space freed
    assert _metric_lines(run) == reference[1]["metrics"][: len(_metric_lines(run))]
    assert _last_logged_step(run) == 60
