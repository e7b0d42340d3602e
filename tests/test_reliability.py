"""Reliability: no lost work, no silent corruption, a clear message for every bad input.

Each test here backs a promise in ``docs/guarantees.md``. The crash tests kill real
``python -m stacklstm train`` processes and compare the resumed run with an uninterrupted one
bit for bit (CPU); the property tests throw malformed input at the public API and the CLI.
"""

import contextlib
import dataclasses
import errno
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import typing
from pathlib import Path
from typing import Literal

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import stacklstm.train.loop as loop
from helpers import cache_env, tiny_run
from stacklstm import LSTMModel, LSTMState, StackedLSTM, lstm_layer
from stacklstm.cli import _ints, _names, main
from stacklstm.data import DataConfig
from stacklstm.train import ModelConfig, RunConfig, TrainConfig, fit, read_run_info
from stacklstm.train.checkpoint import Meter, Progress, RunCheckpoints
from stacklstm.train.rundir import CONFIG_FILE, METRICS_FILE
from stacklstm.train.step import StepMetrics, TrainState, init_state, make_optimizer

# Small enough to run in seconds, long enough to kill in the middle of an epoch: 1592
# training windows of 6 weeks -> 99 steps per epoch at batch 16, 198 in all; a metrics line
# every 5 steps, a checkpoint every 10. Dropout is on, so a resume must restore the RNG too.
CRASH_FLAGS, CRASH_RUN = tiny_run(batch_size=16, log_every=5, checkpoint_every=10)
STEPS_PER_EPOCH = 99
# When one array of a checkpoint cannot be read, Orbax's other reads are dropped unawaited.
ORBAX_ABANDONS_READS = pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")
PROPERTY = settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


# --------------------------------------------------------------------------- helpers


def _main(*argv):
    """``stacklstm ...`` in-process: (exit status, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def _one_line_error(code, stdout, stderr, expected_code=2):
    assert code == expected_code, (code, stderr)
    assert len(stderr.splitlines()) == 1, stderr
    assert stderr.startswith("stacklstm: error: "), stderr
    assert stdout == ""
    return stderr


def _metric_lines(run_dir):
    """metrics.jsonl without the wall-clock throughput (the one field allowed to differ)."""
    lines = (Path(run_dir) / METRICS_FILE).read_text().splitlines()
    return [{k: v for k, v in json.loads(s).items() if k != "steps_per_s"} for s in lines]


def _saved(run_dir):
    """Everything a run folder holds that must not depend on interruptions."""
    run_dir = Path(run_dir)
    info = read_run_info(run_dir)
    cfg = info.config
    model = cfg.model.build(output_size=cfg.data.horizon * len(cfg.data.target))
    x = np.zeros((1, 1, len(info.scaler.columns)), np.float32)
    optimizer = make_optimizer(cfg.train, total_steps=1)  # the state's structure only
    target = jax.eval_shape(lambda: init_state(model, optimizer, jax.random.key(0), x))
    saved = {"metrics": _metric_lines(run_dir), "config": cfg}
    with RunCheckpoints(run_dir, read_only=True) as ckpts:
        for which in ("latest", "best"):
            step = ckpts.latest_step(which)
            state, rng, progress = ckpts.restore(which, target)
            leaves = [np.asarray(a) for a in jax.tree.leaves(state)]
            saved[which] = (step, [*leaves, np.asarray(jax.random.key_data(rng))], progress)
    report = run_dir / "report.json"
    saved["report"] = json.loads(report.read_text()) if report.exists() else None
    return saved


def _assert_same_run(got, expected):
    """Bit-identical params, optimizer state, RNG and bookkeeping, metrics and report."""
    assert got["config"] == expected["config"]
    for which in ("latest", "best"):
        (step, leaves, progress), (e_step, e_leaves, e_progress) = got[which], expected[which]
        assert step == e_step and progress == e_progress, which
        assert len(leaves) == len(e_leaves)
        for a, b in zip(leaves, e_leaves, strict=True):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)
    assert got["metrics"] == expected["metrics"]
    assert got["report"] == expected["report"]


def _complete_steps(run_dir):
    """Committed checkpoint steps (Orbax renames ``<step>.orbax-checkpoint-tmp`` when done)."""
    folder = Path(run_dir) / "checkpoints"
    if not folder.is_dir():
        return [-1]
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit()) or [-1]


def _last_logged_step(run_dir):
    path = Path(run_dir) / METRICS_FILE
    steps = [0]
    for line in path.read_text().splitlines() if path.exists() else []:
        with contextlib.suppress(json.JSONDecodeError, KeyError, TypeError):
            steps.append(json.loads(line)["step"])  # a line may be half written
    return max(steps)


def _wait_for(child, condition, log, timeout=300):
    start = time.monotonic()
    while not condition():
        if child.poll() is not None or time.monotonic() - start > timeout:
            child.kill()
            child.wait()
            pytest.fail(f"the child ended or stalled first:\n{log.read_text()[-3000:]}")
        time.sleep(0.01)


def _truncate(path, keep=0.5):
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """One uninterrupted ``stacklstm train`` with CRASH_FLAGS: (run folder, its contents)."""
    run = tmp_path_factory.mktemp("reference") / "run"
    code, _, err = _main("train", "--out", run, "--quiet", *CRASH_FLAGS)
    assert code == 0, err
    assert read_run_info(run).config == CRASH_RUN
    saved = _saved(run)
    assert saved["latest"][0] == 2 * STEPS_PER_EPOCH
    return run, saved


# --------------------------------------------------------------------------- 1. crash, resume


@pytest.mark.slow
def test_sigkill_mid_epoch_then_resume_equals_an_uninterrupted_run(reference, tmp_path):
    run, log = tmp_path / "run", tmp_path / "child.log"
    with log.open("w") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-m", "stacklstm", "train", "--out", str(run), "--quiet",
             *CRASH_FLAGS],
            env=cache_env(), stdout=subprocess.DEVNULL, stderr=stderr, cwd=tmp_path,
        )  # fmt: skip
        # at least one checkpoint besides step 0, and well inside epoch 1
        started = lambda: _last_logged_step(run) >= 30 and max(_complete_steps(run)) >= 10  # noqa: E731
        _wait_for(child, started, log)
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    killed_at = _last_logged_step(run)
    assert 30 <= killed_at < STEPS_PER_EPOCH, killed_at  # mid-epoch, nothing finished
    assert 10 <= _complete_steps(run)[-1] <= killed_at
    assert not (run / "report.json").exists()

    code, _, err = _main("train", "--out", run, "--resume", "--quiet")
    assert code == 0, err
    _assert_same_run(_saved(run), reference[1])


# Run by the child below: Orbax's last act of a save (renaming "40.orbax-checkpoint-tmp" to
# "40") stalls, so the test can SIGKILL it with step 40 written but not committed.
STALL_COMMIT_OF_STEP_40 = """
import pathlib, runpy, sys, time
from orbax.checkpoint._src.path import atomicity

commit = atomicity.AtomicRenameTemporaryPath.finalize
marker = pathlib.Path(sys.argv[1])

async def stalled(self):
    final = self.get_final()
    if final.parent.name == "checkpoints" and final.name == "40":
        marker.write_text(str(self.get()))
        time.sleep(600)
    return await commit(self)

atomicity.AtomicRenameTemporaryPath.finalize = stalled
sys.argv = ["stacklstm", *sys.argv[2:]]
runpy.run_module("stacklstm", run_name="__main__", alter_sys=True)
"""


@pytest.mark.slow
def test_kill_during_a_checkpoint_write_keeps_the_previous_checkpoint(reference, tmp_path):
    run, log, marker = tmp_path / "run", tmp_path / "child.log", tmp_path / "stalled"
    with log.open("w") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-c", STALL_COMMIT_OF_STEP_40, str(marker), "train", "--out",
             str(run), "--quiet", *CRASH_FLAGS],
            env=cache_env(), stdout=subprocess.DEVNULL, stderr=stderr, cwd=tmp_path,
        )  # fmt: skip
        _wait_for(child, marker.exists, log)
        partial = Path(marker.read_text())
        assert partial.name == "40.orbax-checkpoint-tmp" and partial.is_dir()
        for path in partial.rglob("*"):  # and make it a half-written one
            if path.is_file():
                _truncate(path)
        child.send_signal(signal.SIGKILL)
        child.wait()
    assert child.returncode == -signal.SIGKILL
    assert _complete_steps(run) == [20, 30]  # the previous checkpoints, untouched

    code, _, err = _main("train", "--out", run, "--resume")  # not quiet: see where it resumed
    assert code == 0, err
    assert f"resumed {run} at step 30" in err
    assert not partial.exists()  # the stale temporary folder is cleaned up
    _assert_same_run(_saved(run), reference[1])


# --------------------------------------------------------------------------- 4. determinism


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
    model = cfg.model.build(output_size=1)
    optimizer = make_optimizer(cfg.train, total_steps=1)
    x = np.zeros((1, 1, 1), np.float32)
    return jax.eval_shape(lambda: init_state(model, optimizer, jax.random.key(0), x))


# --------------------------------------------------------------------------- 2. non-finite


def test_nonfinite_guard_reads_the_host_once_per_log_interval(monkeypatch, tmp_path):
    """The NaN/Inf check costs no per-step sync: step results are read in blocks."""
    reads, steps = [], []
    device_get = jax.device_get

    def counting_get(tree):
        if isinstance(tree, list) and tree and all(isinstance(m, StepMetrics) for m in tree):
            reads.append(len(tree))
        return device_get(tree)

    make_train_step = loop.make_train_step

    def counted_step(*args, **kwargs):
        step = make_train_step(*args, **kwargs)
        return lambda *a: steps.append(1) or step(*a)

    monkeypatch.setattr(jax, "device_get", counting_get)
    monkeypatch.setattr(loop, "make_train_step", counted_step)
    fit(CRASH_RUN, tmp_path / "run", quiet=True, stop_after_steps=30)
    assert len(steps) == 30
    assert reads == [5] * 6  # log_every=5 (checkpoints every 10 fall on log steps)


def test_cli_diverged_run_exits_1_naming_the_steps_and_last_good_checkpoint(tmp_path):
    run = tmp_path / "run"
    flags = [*CRASH_FLAGS, "--batch-size", "64", "--log-every", "10", "--lr", "1e30"]
    err = _one_line_error(*_main("train", "--out", run, "--quiet", *flags), expected_code=1)
    # the first update (warm-up starts at 0) is fine; the ones after it blow up
    assert re.search(r"became NaN/Inf at step [23] \(steps 1-10 checked together\)", err), err
    assert f"the last good checkpoint is step 0 in {run / 'checkpoints'}" in err
    assert _complete_steps(run) == [0]  # the run stays resumable from its last good step
    with RunCheckpoints(run, read_only=True) as ckpts:
        assert ckpts.latest_step("best") is None  # never a best checkpoint of NaN params


def _weekly_csv(path, values, dates=None):
    """A ``date,co2`` table, weekly from 2000-01-02 unless ``dates`` are given."""
    dates = pd.date_range("2000-01-02", periods=len(values), freq="W") if dates is None else dates
    rows = "".join(f"{d:%Y-%m-%d},{v}\n" for d, v in zip(dates, values, strict=True))
    path.write_text("date,co2\n" + rows)
    return path


@pytest.mark.parametrize(
    ("cells", "flags", "message"),
    [
        ({7: "inf", 12: "-inf"}, [], "target column 'co2' holds infinite values in rows 7, 12;"),
        ({5: "1e999"}, [], "holds infinite values in rows 5;"),
        ({3: "", 9: "nan"}, ["--gaps", "reject"], "gaps='reject' but rows 3, 9 hold empty values"),
        ({4: "NaN"}, ["--gaps", "reject"], "gaps='reject' but rows 4 hold empty values"),
        ({6: "12kg"}, [], "target column 'co2' must be numeric; row 6 holds '12kg'"),
    ],
)
def test_nan_or_inf_in_the_data_is_named_by_row_before_training(tmp_path, cells, flags, message):
    values = [str(300.0 + i) for i in range(40)]
    for row, cell in cells.items():
        values[row - 1] = cell  # row 1 is the first row below the header
    csv = _weekly_csv(tmp_path / "data.csv", values)
    # these settings train on the clean table
    args = ["train", "--data", csv, "--out", tmp_path / "runs" / "r", "--window", "3",
            "--batch-size", "4", *flags]  # fmt: skip
    err = _one_line_error(*_main(*args))
    assert message in err
    assert not (tmp_path / "runs").exists()


def test_gaps_reject_names_missing_time_stamps(tmp_path):
    dates = pd.date_range("2000-01-02", periods=41, freq="W").delete(20)  # one week missing
    csv = _weekly_csv(tmp_path / "data.csv", np.arange(40.0), dates)
    args = ["train", "--data", csv, "--out", tmp_path / "r", "--window", "3", "--batch-size", "4",
            "--gaps", "reject"]  # fmt: skip
    err = _one_line_error(*_main(*args))
    assert "1 time stamps of step 7D are missing, the first 2000-05-21" in err
    assert not (tmp_path / "r").exists()


# --------------------------------------------------------------------------- 5. hygiene


@pytest.fixture(scope="module")
def big_checkpoints(tmp_path_factory):
    """Checkpoints at steps 10 and 20 of a state with arrays large enough to be stored in
    data files of their own (small ones are inlined in Orbax's index)."""
    folder = tmp_path_factory.mktemp("ckpts")
    rng = np.random.default_rng(0)
    states = {}
    for step in (10, 20):
        params = {"w": jnp.asarray(rng.normal(size=(64, 256)), jnp.float32),
                  "b": jnp.asarray(rng.normal(size=(256,)), jnp.float32)}  # fmt: skip
        states[step] = (TrainState(jnp.asarray(step, jnp.int32), params, {"m": params["b"] * 2}),
                        Progress(epoch=step, interval=Meter(loss_sum=0.1 + step)))  # fmt: skip
        with RunCheckpoints(folder) as ckpts:
            ckpts.save("latest", step, states[step][0], jax.random.key(step), states[step][1])
    return folder, states


def _copy(folder, base):
    copy = Path(tempfile.mkdtemp(dir=base)) / "run"
    shutil.copytree(folder, copy)
    return copy


def _assert_restored(restored, expected):
    state, _, progress = restored
    assert progress == expected[1]
    for a, b in zip(jax.tree.leaves(state), jax.tree.leaves(expected[0]), strict=True):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))


@ORBAX_ABANDONS_READS
@PROPERTY
@given(data=st.data())
def test_a_damaged_checkpoint_is_reported_never_read_as_other_numbers(
    big_checkpoints, tmp_path_factory, data
):
    """Flip a byte or cut short any file of the newest checkpoint: it restores exactly what was
    saved or fails with a ValueError naming the step, and the fallback takes the older one."""
    folder, states = big_checkpoints
    run = _copy(folder, tmp_path_factory.getbasetemp())
    files = sorted(p for p in (run / "checkpoints" / "20").rglob("*") if p.is_file())
    path = data.draw(st.sampled_from(files), label="file")
    content = bytearray(path.read_bytes())
    if data.draw(st.booleans(), label="truncate") or not content:
        path.write_bytes(content[: data.draw(st.integers(0, max(len(content) - 1, 0)))])
    else:
        at = data.draw(st.integers(0, len(content) - 1), label="offset")
        content[at] ^= data.draw(st.integers(1, 255), label="xor")
        path.write_bytes(bytes(content))
    target = states[20][0]
    with RunCheckpoints(run) as ckpts:
        try:
            restored = ckpts.restore("latest", target, 20)
        except ValueError as err:
            assert str(err).startswith(f"cannot restore step 20 from {run / 'checkpoints'}")
            _assert_restored(ckpts.restore_intact("latest", target), states[10])
            assert ckpts._managers["latest"].all_steps() == [10]  # the damaged one is gone
        else:
            _assert_restored(restored, states[20])


@ORBAX_ABANDONS_READS
@pytest.mark.parametrize("damage", ["truncate", "garble"])
def test_unreadable_newest_checkpoint_is_named_and_the_previous_one_used(
    big_checkpoints, tmp_path, caplog, damage
):
    folder, states = big_checkpoints
    run = _copy(folder, tmp_path)
    biggest = max((run / "checkpoints" / "20").rglob("*"), key=lambda p: p.stat().st_size)
    if damage == "truncate":
        _truncate(biggest)
    else:  # random floats compress to nothing: flipped bytes still decode, to other numbers
        content = bytearray(biggest.read_bytes())
        content[len(content) // 2] ^= 0xFF
        biggest.write_bytes(bytes(content))
    with RunCheckpoints(run) as ckpts:
        with pytest.raises(ValueError, match=f"cannot restore step 20 from {run}") as info:
            ckpts.restore("latest", states[20][0])
        if damage == "garble":
            assert "differ from the checksum written with them" in str(info.value)
        _assert_restored(ckpts.restore_intact("latest", states[20][0]), states[10])
    assert "using step 10, the newest intact checkpoint, and deleting step 20" in caplog.text
    for path in (run / "checkpoints" / "10").rglob("*"):  # now the only one: damage it too
        if path.is_file() and path.stat().st_size > 1000:
            _truncate(path)
    with RunCheckpoints(run) as ckpts, pytest.raises(ValueError) as info:
        ckpts.restore_intact("latest", states[20][0])
    assert str(info.value).startswith(f"no checkpoint in {run / 'checkpoints'} is readable: ")
    assert "cannot restore step 10" in str(info.value)


@ORBAX_ABANDONS_READS
@pytest.mark.slow
def test_resume_skips_a_damaged_newest_checkpoint_and_still_matches(reference, tmp_path):
    run = tmp_path / "run"
    fit(CRASH_RUN, run, quiet=True, stop_after_steps=50)  # checkpoints 40 and 50
    for path in (run / "checkpoints" / "50" / "state").rglob("*"):
        if path.is_file():
            _truncate(path)
    code, _, err = _main("train", "--out", run, "--resume", "--quiet")
    assert code == 0, err
    assert f"cannot restore step 50 from {run / 'checkpoints'}" in err
    assert "using step 40, the newest intact checkpoint, and deleting step 50" in err
    _assert_same_run(_saved(run), reference[1])


def test_run_folder_of_another_layout_version_or_config_is_refused(reference, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(reference[0], run)
    raw = json.loads((run / CONFIG_FILE).read_text())
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*")}
    (run / CONFIG_FILE).write_text(json.dumps({**raw, "layout_version": 99}))
    for argv in (["evaluate", run], ["predict", run], ["train", "--out", run, "--resume"]):
        err = _one_line_error(*_main(*argv))
        assert "has layout version 99 but this stacklstm reads versions 1, 2" in err, argv
    raw["config"]["model"]["lstm_hidden_size"] = 9  # a config the checkpoints were not made with
    (run / CONFIG_FILE).write_text(json.dumps(raw))
    err = _one_line_error(*_main("evaluate", run))
    assert re.search(
        r"cannot restore step 198 from .*: Requested shape: \(.*\) is not compatible "
        r"with the stored shape: \(.*\)",
        err,
    ), err
    (run / CONFIG_FILE).write_text(
        json.dumps({**raw, "config": read_run_info(reference[0]).config.to_dict()})
    )
    err = _one_line_error(*_main("train", "--out", run, "--resume", "--hidden-size", "9"))
    assert "the settings differ from the saved run's (model.lstm_hidden_size: 9 != 8)" in err
    after = {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.name != CONFIG_FILE}
    assert after == {p: t for p, t in before.items() if p.name != CONFIG_FILE}


# --------------------------------------------------------------------------- 6. disk, folders


def test_unwritable_output_folder_is_refused_before_training(tmp_path, monkeypatch):
    (tmp_path / "file").write_text("x")
    err = _one_line_error(*_main("train", "--out", tmp_path / "file" / "run"))
    assert f"cannot create the run folder {tmp_path / 'file' / 'run'}" in err
    # tests run as root, where a chmod does not stop writes: stand in for a read-only parent
    real_access = os.access
    monkeypatch.setattr(os, "access", lambda p, mode: Path(p) != tmp_path and real_access(p, mode))
    err = _one_line_error(*_main("train", "--out", tmp_path / "runs" / "r"))
    assert f"{tmp_path} is not writable" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def _no_space(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


def _full_disk_at_commit(monkeypatch, step):
    """Orbax's commit of checkpoint ``step`` (writing its commit file, then the rename) fails
    as on a full disk. (Failing an item's write instead races with Orbax's clean-up of the
    other items, which may then report its own error first.)"""
    from orbax.checkpoint._src.path import atomicity

    commit = atomicity.AtomicRenameTemporaryPath.finalize

    async def full(self):
        if self.get_final().name == str(step) and self.get_final().parent.name == "checkpoints":
            _no_space()
        return await commit(self)

    monkeypatch.setattr(atomicity.AtomicRenameTemporaryPath, "finalize", full)


@pytest.mark.parametrize("where", ["config", "first checkpoint"])
def test_disk_full_while_creating_a_run_leaves_nothing_behind(tmp_path, monkeypatch, where):
    if where == "config":
        monkeypatch.setattr(loop, "write_run_info", _no_space)
    else:
        _full_disk_at_commit(monkeypatch, 0)
    out = tmp_path / "runs" / "r"
    err = _one_line_error(*_main("train", "--out", out, "--quiet", *CRASH_FLAGS))
    assert f"cannot create the run folder {out}: " in err and "No space left on device" in err
    assert "nothing was left behind" in err
    assert list(tmp_path.iterdir()) == []  # not even runs/


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


# --------------------------------------------------------------------------- 3. bad input: API


@pytest.fixture(scope="module")
def model_and_params():
    model = LSTMModel(4, 2, (3,))
    x = np.zeros((2, 5, 3), np.float32)  # (batch, time, features)
    return model, model.init(jax.random.key(0), x)


def _raises_value_or_type_error(call):
    with pytest.raises((ValueError, TypeError)) as info:
        call()
    assert str(info.value).strip(), "an error must say what is wrong"


_WRONG_NDIM = st.lists(st.integers(0, 3), max_size=5).filter(lambda s: len(s) not in (2, 3))
_NOT_FLOAT = st.sampled_from([np.int8, np.int32, np.int64, np.uint8, np.bool_, np.complex64])
_NON_ARRAYS = st.sampled_from([None, "abc", object(), {"x": 1}, [[1.0], [1.0, 2.0]]])
# (batch=2, time=5, features=3) is right; each of these is wrong in one way
BAD_X = st.one_of(
    _WRONG_NDIM.map(lambda s: np.zeros(s, np.float32)),
    _NOT_FLOAT.map(lambda d: np.zeros((2, 5, 3), d)),
    st.integers(0, 3).map(lambda b: np.zeros((b, 0, 3), np.float32)),  # no time steps
    st.integers(0, 7).filter(lambda f: f != 3).map(lambda f: np.zeros((2, 5, f), np.float32)),
    st.just(np.full((2, 5), np.nan, np.float32)),  # (batch, time): 1 feature, not 3
    _NON_ARRAYS,
)
_STATE = st.builds(
    lambda b, h: LSTMState(jnp.zeros((b, h)), jnp.zeros((b, h))),
    st.integers(0, 3),
    st.integers(0, 5),
)
_RIGHT_STATE = LSTMState(jnp.zeros((2, 4)), jnp.zeros((2, 4)))  # (batch, hidden) of MODEL
BAD_CARRY = st.one_of(
    st.integers(0, 4).filter(lambda n: n != 2).map(lambda n: (_RIGHT_STATE,) * n),
    st.tuples(_STATE, _STATE).filter(lambda c: c[0].h.shape != (2, 4) or c[1].h.shape != (2, 4)),
    _NON_ARRAYS.map(lambda v: (v, v)),
    _NON_ARRAYS.filter(lambda v: v is not None),
    st.just((LSTMState("a", "b"),) * 2),
)  # fmt: skip
BAD_LENGTHS = st.one_of(
    st.lists(st.integers(1, 5), max_size=4).filter(lambda v: len(v) != 2).map(np.array),
    st.tuples(st.integers(-3, 9), st.integers(-3, 9))
    .filter(lambda v: not all(1 <= n <= 5 for n in v))
    .map(np.array),
    st.just(np.array([np.nan, 2.0])),
    st.just(np.array([3.0, 2.0])),
    st.just(np.array([True, True])),
    _NON_ARRAYS.filter(lambda v: v is not None),
)


@PROPERTY
@given(x=BAD_X)
def test_model_rejects_malformed_x(model_and_params, x):
    model, params = model_and_params
    _raises_value_or_type_error(lambda: model.apply(params, x))


@PROPERTY
@given(carry=BAD_CARRY, lengths=st.none() | BAD_LENGTHS)
def test_model_rejects_malformed_carry_and_seq_lengths(model_and_params, carry, lengths):
    model, params = model_and_params
    x = np.zeros((2, 5, 3), np.float32)
    _raises_value_or_type_error(lambda: model.apply(params, x, carry, seq_lengths=lengths))
    if lengths is not None:
        _raises_value_or_type_error(lambda: model.apply(params, x, seq_lengths=lengths))


_BAD_COUNT = st.one_of(
    st.integers(max_value=0), st.floats(allow_nan=True), st.booleans(), st.text(max_size=3),
    st.none(), st.just(np.float32(3.0)),
)  # fmt: skip
_BAD_RATE = st.one_of(
    st.floats().filter(lambda r: not 0 <= r < 1), st.text(max_size=3), st.none(), st.just([0.1])
)


@PROPERTY
@given(
    field=st.sampled_from(
        ["lstm_hidden_size", "num_lstm_layers", "output_size", "linear_layer_sizes", "dropout_rate"]
    ),
    data=st.data(),
)
def test_model_and_stack_reject_malformed_settings(field, data):
    if field == "dropout_rate":
        value = data.draw(_BAD_RATE)
    elif field == "linear_layer_sizes":
        value = data.draw(st.one_of(_BAD_COUNT, st.lists(_BAD_COUNT, min_size=1, max_size=3)))
    else:
        value = data.draw(_BAD_COUNT)
    _raises_value_or_type_error(lambda: LSTMModel(**{field: value}))
    stack_field = {"lstm_hidden_size": "hidden_size", "num_lstm_layers": "num_layers"}
    if field in stack_field or field == "dropout_rate":
        kwargs = {"hidden_size": 4, stack_field.get(field, field): value}
        _raises_value_or_type_error(lambda: StackedLSTM(**kwargs))


@PROPERTY
@given(x=BAD_X, state=st.none() | BAD_CARRY, lengths=st.none() | BAD_LENGTHS)
def test_stacked_lstm_rejects_malformed_input(x, state, lengths):
    stack = StackedLSTM(4, num_layers=2)
    params = stack.init(jax.random.key(0), np.zeros((2, 5, 3), np.float32))
    _raises_value_or_type_error(lambda: stack.apply(params, x, state, seq_lengths=lengths))
    good = np.zeros((2, 5, 3), np.float32)
    if state is not None or lengths is not None:
        _raises_value_or_type_error(lambda: stack.apply(params, good, state, seq_lengths=lengths))


_GOOD_LAYER = {"kernel_ih": jnp.zeros((3, 8)), "kernel_hh": jnp.zeros((2, 8)), "bias": jnp.zeros(8)}
_GOOD_STATE = LSTMState(jnp.zeros((2, 2)), jnp.zeros((2, 2)))
_SHAPES = st.lists(st.integers(0, 9), min_size=1, max_size=2).map(tuple)
BAD_LAYER_PARAMS = st.one_of(
    st.sampled_from(["kernel_ih", "kernel_hh", "bias"]).map(
        lambda k: {n: v for n, v in _GOOD_LAYER.items() if n != k}
    ),  # a key missing
    st.tuples(st.sampled_from(["kernel_ih", "kernel_hh", "bias"]), _SHAPES)
    .filter(lambda kv: kv[1] != _GOOD_LAYER[kv[0]].shape)
    .map(lambda kv: {**_GOOD_LAYER, kv[0]: jnp.zeros(kv[1])}),  # a wrong shape
    st.sampled_from([None, "abc", 3, [1, 2]]),
)


@PROPERTY
@given(
    case=st.one_of(
        BAD_LAYER_PARAMS.map(lambda p: (p, np.zeros((2, 5, 3), np.float32), _GOOD_STATE, None)),
        _WRONG_NDIM.map(lambda s: (_GOOD_LAYER, np.zeros(s, np.float32), _GOOD_STATE, None)),
        _STATE.filter(lambda s: s.h.shape != (2, 2)).map(
            lambda s: (_GOOD_LAYER, np.zeros((2, 5, 3), np.float32), s, None)
        ),
        BAD_LENGTHS.map(lambda n: (_GOOD_LAYER, np.zeros((2, 5, 3), np.float32), _GOOD_STATE, n)),
    ),
    remat=st.sampled_from([False, True, 2]),
)
def test_lstm_layer_rejects_malformed_input(case, remat):
    params, x, state, lengths = case
    _raises_value_or_type_error(lambda: lstm_layer(params, x, state, lengths, remat=remat))


@PROPERTY
@given(remat=st.one_of(st.integers(max_value=-1), st.text(max_size=3), st.floats(0.5, 9.5)))
def test_lstm_layer_rejects_malformed_remat(remat):
    x = np.zeros((2, 5, 3), np.float32)
    _raises_value_or_type_error(lambda: lstm_layer(_GOOD_LAYER, x, _GOOD_STATE, remat=remat))


# Escapes the tests above found once (each now a clear ValueError/TypeError).
def _zero_feature_init():
    LSTMModel(4, 1).init(jax.random.key(0), np.zeros((2, 5, 0), np.float32))


def _other_model_params():
    params = LSTMModel(5, 2, (3,)).init(jax.random.key(0), np.zeros((2, 5, 3), np.float32))
    LSTMModel(4, 2, (3,)).apply(params, np.zeros((2, 5, 3), np.float32))


KNOWN_API_ESCAPES = {
    "mean_aggregation not a bool is taken as truthy": lambda: LSTMModel(mean_aggregation="no"),
    "bidirectional not a bool is taken as truthy": lambda: StackedLSTM(4, bidirectional="no"),
    "zero features: ZeroDivisionError from the initializer": _zero_feature_init,
    "params of another model: flax ScopeParamShapeError": _other_model_params,
    "lstm_layer state None: AttributeError": lambda: lstm_layer(
        _GOOD_LAYER, np.zeros((2, 5, 3), np.float32), None
    ),
    "lstm_layer 0-d kernel_hh: IndexError": lambda: lstm_layer(
        {**_GOOD_LAYER, "kernel_hh": jnp.zeros(())}, np.zeros((2, 5, 3), np.float32), _GOOD_STATE
    ),
}


def test_lstm_layer_takes_params_as_nested_lists():
    as_lists = {k: np.asarray(v).tolist() for k, v in _GOOD_LAYER.items()}
    x = np.ones((2, 5, 3), np.float32)
    np.testing.assert_array_equal(
        lstm_layer(as_lists, x, _GOOD_STATE)[0], lstm_layer(_GOOD_LAYER, x, _GOOD_STATE)[0]
    )


@pytest.mark.parametrize("case", list(KNOWN_API_ESCAPES))
def test_once_known_api_escapes_are_clear_errors(case):
    _raises_value_or_type_error(KNOWN_API_ESCAPES[case])


_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats() | st.text(max_size=6),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.text(max_size=4), inner, max_size=3),
    max_leaves=6,
)  # fmt: skip
_FIELDS = {
    section: [f.name for f in dataclasses.fields(cls)]
    for section, cls in (("data", DataConfig), ("model", ModelConfig), ("train", TrainConfig))
}


@settings(max_examples=150, deadline=None)
@given(
    raw=st.dictionaries(
        st.sampled_from(["data", "model", "train", "extra"]),
        st.one_of(
            _JSON,
            st.sampled_from(["data", "model", "train"]).flatmap(
                lambda s: st.dictionaries(st.sampled_from([*_FIELDS[s], "junk"]), _JSON, max_size=4)
            ),
        ),
        max_size=3,
    )
)
def test_run_config_from_dict_accepts_a_valid_config_or_says_why_not(raw):
    try:
        cfg = RunConfig.from_dict(raw)
    except (ValueError, TypeError) as err:
        assert str(err) and "\n" not in str(err), str(err)
        return
    cfg.validate()
    assert RunConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg


# --------------------------------------------------------------------------- 3. bad input: CLI


def _is(parse, text):
    try:
        parse(text)
    except Exception:  # ValueError, OverflowError, argparse.ArgumentTypeError
        return False
    return True


def _bad_value(kind):
    """Values no field of this type accepts (every number field's lower bound is >= 0)."""
    text = st.text(max_size=6)
    if kind is int:
        return st.one_of(st.integers(max_value=-1).map(str), text.filter(lambda s: not _is(int, s)))
    if kind is float:
        return st.one_of(
            st.floats(max_value=-1e-6).map(repr),
            st.sampled_from(["nan", "inf", "-inf", "1e999"]),
            text.filter(lambda s: not _is(float, s)),
        )
    if kind is bool:  # a switch: --flag=VALUE is an error
        return text
    if typing.get_origin(kind) is Literal:
        return text.filter(lambda s: s not in typing.get_args(kind))
    if kind == tuple[int, ...]:
        return st.one_of(
            st.lists(st.integers(max_value=0), min_size=1, max_size=3).map(
                lambda v: ",".join(map(str, v))
            ),
            text.filter(lambda s: not _is(_ints, s)),
        )  # fmt: skip
    raise AssertionError(kind)


def _setting_flags():
    for cls in (DataConfig, ModelConfig, TrainConfig):
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            yield "--" + field.name.replace("_", "-"), hints[field.name]


_COLUMN_FLAGS = {
    # target: anything but exactly co2; features: anything naming a column; time: not 'date'
    "--target": st.text(max_size=6).filter(lambda s: not _is(_names, s) or _names(s) != ("co2",)),
    "--features": st.text(max_size=6).filter(lambda s: not _is(_names, s) or _names(s) != ()),
    "--time-column": st.text(min_size=1, max_size=6).filter(
        lambda s: s.strip().lower() not in ("", "none", "date")
    ),
}
BAD_FLAGS = st.one_of(
    *[
        (_COLUMN_FLAGS[flag] if flag in _COLUMN_FLAGS else _bad_value(kind)).map(
            lambda value, flag=flag: [f"{flag}={value}"]
        )
        for flag, kind in _setting_flags()
    ],
    st.text(min_size=1, max_size=6).map(lambda s: ["--zz" + s]),  # no such flag
    st.text(max_size=6).map(lambda s: ["--window", "5", "extra" + s]),  # a stray argument
)


@PROPERTY
@given(flags=st.lists(BAD_FLAGS, min_size=1, max_size=2).map(lambda f: [a for x in f for a in x]))
def test_cli_bad_flags_exit_2_with_one_line_and_no_run_folder(tmp_path_factory, flags):
    base = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    code, out, err = _main("train", "--out", base / "runs" / "r", "--epochs", "1", *flags)
    _one_line_error(code, out, err)
    assert not (base / "runs").exists()


_MISSING = "time stamps of step 7D are missing"
_DEFECTS = {  # kind -> (what it does to row r, what the message may say; {row}: its file row)
    "text": (lambda rows, r, v: rows[r].update(co2=v), ["must be numeric; row {row} holds"]),
    "inf": (lambda rows, r, v: rows[r].update(co2=v), ["holds infinite values in rows {row}"]),
    "empty": (lambda rows, r, v: rows[r].update(co2=v), ["gaps='reject' but rows {row}"]),
    "bad date": (lambda rows, r, v: rows[r].update(date=v), ["cannot parse"]),
    # the week before, whatever it holds now (a bad date; or its row is gone: a week is missing)
    "repeated date": (
        lambda rows, r, v: rows[r].update(date=rows[r - 1]["date"]),
        ["repeats", "cannot parse", _MISSING],
    ),
    "missing week": (lambda rows, r, v: rows[r].update(drop=True), [_MISSING]),
}
_DEFECT_VALUES = {
    "text": ["abc", "1.2.3", "12kg", "--", "0x1G"],
    "inf": ["inf", "-inf", "1e999", "-1E400"],
    "empty": ["", "nan", "NaN", "NA", "null"],
    "bad date": ["yesterday", "2000-13-45", "x", "2000-02-30"],
    "repeated date": [""],
    "missing week": [""],
}


@PROPERTY
@given(
    defects=st.lists(
        st.tuples(st.sampled_from(sorted(_DEFECTS)), st.integers(1, 38), st.integers(0, 4)),
        min_size=1,
        max_size=3,
    )
)
def test_cli_malformed_csv_exit_2_naming_the_problem_and_no_run_folder(tmp_path_factory, defects):
    base = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp()))
    dates = pd.date_range("2000-01-02", periods=40, freq="W").strftime("%Y-%m-%d")
    rows = [{"date": d, "co2": f"{300 + i}.5"} for i, d in enumerate(dates)]
    for kind, row, choice in defects:
        values = _DEFECT_VALUES[kind]
        _DEFECTS[kind][0](rows, row, values[choice % len(values)])
    text = "date,co2\n" + "".join(f"{r['date']},{r['co2']}\n" for r in rows if not r.get("drop"))
    (base / "data.csv").write_text(text)
    # 40 clean rows train with these flags; every defect above must stop it
    argv = ["train", "--data", base / "data.csv", "--out", base / "runs" / "r", "--window", "3",
            "--batch-size", "4", "--epochs", "1", "--gaps", "reject"]  # fmt: skip
    err = _one_line_error(*_main(*argv))
    file_row = {id(r): i for i, r in enumerate((r for r in rows if not r.get("drop")), 1)}
    expected = [
        message.format(row=file_row.get(id(rows[row])))
        for kind, row, _ in defects
        if kind == "missing week" or id(rows[row]) in file_row  # (a dropped row says nothing)
        for message in _DEFECTS[kind][1]
    ]
    assert any(message in err for message in expected), (err, defects)
    assert not (base / "runs").exists()


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--hidden-size", "10000000"], "training needs about"),  # would allocate petabytes
        (["--linear-layer-sizes", "1000000000"], "lower --lstm-hidden-size, --num-lstm-layers or"),
        (["--num-layers", "1000"], "--num-layers must be an integer in [1, 128], got 1000"),
        (["--epochs", str(10**12)], "more than the step counter holds (2147483647)"),
        (["--seed", str(2**64)], "seed must be an integer in [0, 9223372036854775807]"),
        (["--season", str(10**30)], "season must be an integer in [1, 2147483647]"),
        (["--data", "{tmp}/dates.csv"], "cannot parse '99999-01-01' in row 1 as a date"),
    ],
)
def test_cli_refuses_what_cannot_run_before_allocating_anything(tmp_path, flags, message):
    """Settings that would exhaust memory, overflow a counter or hang are refused up front;
    a library warning on the way (pandas on the dates) does not add a line."""
    dates = "".join(f"99999-01-{day:02d},{day}\n" for day in range(1, 29))
    (tmp_path / "dates.csv").write_text("date,co2\n" + dates)
    argv = [f.format(tmp=tmp_path) for f in flags]
    err = _one_line_error(*_main("train", "--out", tmp_path / "runs" / "r", *argv))
    assert message in err
    assert not (tmp_path / "runs").exists()


_RUN_INFO = st.one_of(
    _JSON,
    st.fixed_dictionaries(
        {"layout_version": st.just(1) | _JSON, "config": _JSON, "data_path": _JSON, "scaler": _JSON}
    ),
    st.fixed_dictionaries(
        {"layout_version": st.just(1), "config": st.just({}), "data_path": st.none(),
         "scaler": st.fixed_dictionaries({"kind": st.just("standard") | _JSON,
                                          "columns": st.just(["co2"]) | _JSON,
                                          "n_targets": st.just(1) | _JSON,
                                          "center": st.just([1.0]) | _JSON,
                                          "scale": st.just([2.0]) | _JSON})}
    ),
)  # fmt: skip


@PROPERTY
@given(config=_RUN_INFO, garbage=st.binary(max_size=40))
def test_cli_evaluate_and_predict_refuse_a_broken_run_folder(tmp_path_factory, config, garbage):
    run = Path(tempfile.mkdtemp(dir=tmp_path_factory.getbasetemp())) / "run"
    run.mkdir()
    (run / CONFIG_FILE).write_bytes(
        json.dumps(config).encode() if garbage[:1] != b"\x00" else garbage
    )
    (run / "checkpoints").mkdir()
    before = sorted(run.rglob("*"))
    for argv in (["evaluate", run], ["predict", run]):
        _one_line_error(*_main(*argv))
    assert sorted(run.rglob("*")) == before
