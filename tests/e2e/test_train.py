"""Training runs end to end: a killed or interrupted run resumes to the uninterrupted numbers
(SIGKILL mid-epoch or mid-checkpoint, a damaged checkpoint, every interval loss, a seed
ensemble), concurrent trains on one folder, ``python -m stacklstm train``, and the one line a
damaged checkpoint prints.

The crash tests kill real ``python -m stacklstm train`` processes and compare the resumed run
with an uninterrupted one bit for bit (CPU)."""

import json
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import (
    CRASH_FLAGS,
    CRASH_RUN,
    ENSEMBLE_RUN,
    ORBAX_ABANDONS_READS,
    STEPS_PER_EPOCH,
    TINY_RUN,
    _assert_same_run,
    _complete_steps,
    _last_logged_step,
    _leaves,
    _main,
    _metric_lines,
    _saved,
    _truncate,
    cache_env,
    tiny_run,
)
from stacklstm.forecasting import load_run
from stacklstm.run import fit
from stacklstm.rundir.lock import LOCK_FILE

TINY_FLAGS = tiny_run()[0]
ENSEMBLE = ENSEMBLE_RUN  # the run of the `ensemble` fixture (tests/conftest.py)
STEPS = 48  # per member: 2 epochs of 24 steps


def _report(run_dir):
    return json.loads((Path(run_dir) / "report.json").read_text())


@pytest.mark.slow
@pytest.mark.parametrize(
    "train", [{"loss": "quantile", "quantiles": [0.1, 0.9]},
              {"loss": "student_t", "conformal": True}],
)  # fmt: skip
def test_resume_is_bit_identical_for_every_interval_loss(tmp_path, train):
    """The quantile and distribution heads, and conformal calibration, keep resume exact
    (a smaller run: one LSTM layer, 6 steps per epoch, stopped mid-epoch 2). The point losses
    are run/test_loop.py's; ``normal`` is ``student_t``'s head without its third parameter (the
    loop never looks at the loss), so it is left out to save a minute."""
    cfg = TINY_RUN.replace(
        {
            "model": {"num_lstm_layers": 1, "dropout_rate": 0.0},
            "train": {"batch_size": 256, "checkpoint_every": 0, **train},
        }
    )
    whole = fit(cfg, tmp_path / "whole", quiet=True)
    stopped = fit(cfg, tmp_path / "split", quiet=True, stop_after_steps=8)
    assert (stopped.step, stopped.report) == (8, None)
    resumed = fit(cfg, tmp_path / "split", quiet=True, resume=True)
    assert resumed.step == whole.step == 12
    for a, b in zip(
        _leaves(load_run(whole.out_dir).params),
        _leaves(load_run(resumed.out_dir).params),
        strict=True,
    ):
        np.testing.assert_array_equal(a, b)
    assert _metric_lines(resumed.out_dir) == _metric_lines(whole.out_dir)
    report = {**resumed.report.data, "data_path": whole.report.data["data_path"]}
    assert report == whole.report.data
    assert whole.report.data["test"]["model"]["coverage"] is not None


def _wait_for(child, condition, log, timeout=300):
    start = time.monotonic()
    while not condition():
        if child.poll() is not None or time.monotonic() - start > timeout:
            child.kill()
            child.wait()
            pytest.fail(f"the child ended or stalled first:\n{log.read_text()[-3000:]}")
        time.sleep(0.01)


@pytest.mark.slow
def test_sigkill_mid_epoch_then_resume_equals_an_uninterrupted_run(reference, tmp_path):
    run, log = tmp_path / "run", tmp_path / "child.log"
    with log.open("w") as stderr:
        child = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "stacklstm",
                "train",
                "--out",
                str(run),
                "--quiet",
                *CRASH_FLAGS,
            ],
            env=cache_env(),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            cwd=tmp_path,
        )
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
            [
                sys.executable,
                "-c",
                STALL_COMMIT_OF_STEP_40,
                str(marker),
                "train",
                "--out",
                str(run),
                "--quiet",
                *CRASH_FLAGS,
            ],
            env=cache_env(),
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            cwd=tmp_path,
        )
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


@pytest.mark.slow
def test_interrupted_ensemble_resumes_to_the_uninterrupted_result(ensemble, tmp_path):
    """Stopped in member 1 (member 0 finished), then resumed through the CLI: every member
    folder and the ensemble's report equal the uninterrupted run's."""
    reference, _ = ensemble
    out = tmp_path / "run"
    stopped = fit(ENSEMBLE, out, quiet=True, stop_after_steps=STEPS + 10)
    assert stopped.report is None and stopped.stop_reason == "stop_after_steps"
    assert [m.step for m in stopped.members] == [STEPS, 10]
    assert not (out / "report.json").exists()
    first = (out / "members" / "0" / "report.json").stat().st_mtime_ns
    code, stdout, err = _main("train", "--out", out, "--resume", "--quiet")
    assert code == 0, err
    # the finished member is not trained or scored again
    assert (out / "members" / "0" / "report.json").stat().st_mtime_ns == first
    assert "ensemble of 2 members" in stdout and "best member" in stdout
    for k in range(2):
        _assert_same_run(_saved(out / "members" / str(k)), _saved(reference / "members" / str(k)))
    mine, theirs = _report(out), _report(reference)
    for data in (mine, theirs):
        data.pop("data_path")
    assert mine == theirs


@pytest.mark.slow
def test_concurrent_trains_on_one_folder_and_predict_during_training(reference, tmp_path):
    run = tmp_path / "run"
    children, logs = [], []
    for n in range(3):
        logs.append(tmp_path / f"train{n}.log")
        with logs[-1].open("w") as stderr:
            children.append(
                subprocess.Popen(
                    [
                        sys.executable,
                        "-m",
                        "stacklstm",
                        "train",
                        "--out",
                        str(run),
                        "--quiet",
                        *CRASH_FLAGS,
                    ],
                    env=cache_env(),
                    stdout=subprocess.DEVNULL,
                    stderr=stderr,
                    cwd=tmp_path,
                )
            )
    predictions = []
    deadline = time.monotonic() + 300
    while any(child.poll() is None for child in children) and time.monotonic() < deadline:
        if not (run / "checkpoints" / "0").is_dir():
            time.sleep(0.05)
            continue
        code, _, err = _main("predict", run, "--output", tmp_path / "p.csv", "--quiet")
        assert code == 0, err  # a reader never errs because the run is writing
        predictions.append(tmp_path / "p.csv")
    codes = [child.wait(timeout=max(deadline - time.monotonic(), 1)) for child in children]
    assert sorted(codes) == [0, 2, 2], [log.read_text()[-2000:] for log in logs]
    winner = children[codes.index(0)].pid
    for _child, code, log in zip(children, codes, logs, strict=True):
        if code == 2:
            lines = log.read_text().splitlines()
            assert len(lines) == 1, lines
            assert lines[0].startswith(f"stacklstm: error: {run}")
            assert (
                f"in use by another `stacklstm train` (pid {winner})" in lines[0]
                or "already holds a run" in lines[0]
            )
    assert len(predictions) >= 3
    # the winner's run is exactly an undisturbed one: no lost or duplicated line or step
    got, expected = _saved(run), reference[1]
    assert got["metrics"] == expected["metrics"]
    for which in ("latest", "best"):
        assert got[which][0] == expected[which][0] and got[which][2] == expected[which][2]
        for a, b in zip(got[which][1], expected[which][1], strict=True):
            np.testing.assert_array_equal(a, b)
    assert got["report"] == expected["report"]
    assert (run / LOCK_FILE).exists() and not any(
        p.name.endswith(".tmp") for p in Path(run).iterdir()
    )


@pytest.mark.slow
def test_python_dash_m_stacklstm_trains(tmp_path):
    env = cache_env()
    done = subprocess.run(
        [sys.executable, "-m", "stacklstm", "train", "--out", str(tmp_path / "run"), *TINY_FLAGS],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "test  model" in done.stdout and "stopped by epochs" in done.stdout
    assert "epoch 2/2 step 48" in done.stderr  # progress is logged on stderr
    assert (tmp_path / "run" / "report.json").exists()


@pytest.mark.slow
def test_evaluate_of_a_damaged_checkpoint_prints_only_its_error_line(trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained_run.out_dir, run)
    (best,) = (run / "checkpoints_best").iterdir()
    for path in (best / "state" / "d").iterdir():  # every array file cut in half
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    done = subprocess.run(
        [sys.executable, "-m", "stacklstm", "evaluate", str(run), "--quiet"],
        env=cache_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("stacklstm: error: cannot restore step"), (
        done.stderr[-3000:]
    )


@pytest.mark.slow
def test_resume_falling_back_from_a_damaged_checkpoint_prints_only_its_warning(
    trained_run, tmp_path
):
    run = tmp_path / "run"
    shutil.copytree(trained_run.out_dir, run)
    for path in (run / "checkpoints" / "48" / "state" / "d").iterdir():
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    done = subprocess.run(
        [sys.executable, "-m", "stacklstm", "train", "--out", str(run), "--resume", "--quiet"],
        env=cache_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr[-3000:]  # the fallback's warning, no traceback
    assert lines[0].startswith("cannot restore step 48 from ")
    assert "using step 40, the newest intact checkpoint, and deleting step 48" in lines[0]
