"""The dependencies' late asynchronous errors never reach the command line's terminal."""

import shutil
import subprocess
import sys
import types

import pytest

from helpers import cache_env
from stacklstm._quiet import dropping_dependency_noise


def _unraisable(exc):
    return types.SimpleNamespace(exc_type=type(exc), exc_value=exc, exc_traceback=None,
                                 err_msg=None, object=None)  # fmt: skip


def test_only_the_dependencies_noise_is_dropped(monkeypatch):
    shown = []
    monkeypatch.setattr(sys, "unraisablehook", shown.append)
    closed, other = RuntimeError("Event loop is closed"), ValueError("a real problem")
    with dropping_dependency_noise():
        sys.unraisablehook(_unraisable(closed))
        sys.unraisablehook(_unraisable(other))
    assert [u.exc_value for u in shown] == [other]
    sys.unraisablehook(_unraisable(closed))  # after the block: shown again
    assert [u.exc_value for u in shown] == [other, closed]


@pytest.mark.slow
def test_evaluate_of_a_damaged_checkpoint_prints_only_its_error_line(trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained_run.out_dir, run)
    (best,) = (run / "checkpoints_best").iterdir()
    for path in (best / "state" / "d").iterdir():  # every array file cut in half
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    done = subprocess.run(
        [sys.executable, "-m", "stacklstm", "evaluate", str(run), "--quiet"],
        env=cache_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
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
        env=cache_env(), capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr[-3000:]  # the fallback's warning, no traceback
    assert lines[0].startswith("cannot restore step 48 from ")
    assert "using step 40, the newest intact checkpoint, and deleting step 48" in lines[0]
