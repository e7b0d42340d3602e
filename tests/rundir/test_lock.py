"""One writer per run folder: the lock, unique default folders, readers during a write."""

import json
import os
import subprocess
import sys

import pytest

import stacklstm.cli.commands as cli_commands
import stacklstm.rundir.lock as lock_module
from helpers import _main, tiny_run
from stacklstm.rundir.folder import check_new_run_dir, creating_run_dir
from stacklstm.rundir.info import CONFIG_FILE
from stacklstm.rundir.lock import LOCK_FILE, RunInUseError, RunLock

HOLD_LOCK = """
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.write(fd, f"{os.getpid()}\\n".encode())
print("locked", flush=True)
time.sleep(60)
"""


def test_a_second_writer_is_refused_naming_the_folder_and_the_holders_pid(tmp_path):
    holder = subprocess.Popen(
        [sys.executable, "-c", HOLD_LOCK, str(tmp_path / LOCK_FILE)], stdout=subprocess.PIPE
    )
    try:
        assert holder.stdout.readline() == b"locked\n"
        (tmp_path / CONFIG_FILE).write_text("{}")  # the holder's run
        before = sorted((p.name, p.read_bytes()) for p in tmp_path.iterdir())
        message = f"{tmp_path} is in use by another `stacklstm train` (pid {holder.pid})"
        with pytest.raises(RunInUseError, match=message.replace("(", r"\(").replace(")", r"\)")):
            RunLock.acquire(tmp_path)
        with pytest.raises(RunInUseError, match=f"pid {holder.pid}"):
            check_new_run_dir(tmp_path)
        with (
            pytest.raises(RunInUseError, match=f"pid {holder.pid}"),
            creating_run_dir(tmp_path),
        ):
            pytest.fail("the block must not run")
        # nothing was touched: not the holder's config.json, not its lock file
        assert sorted((p.name, p.read_bytes()) for p in tmp_path.iterdir()) == before
    finally:
        holder.kill()
        holder.wait()
    with RunLock.acquire(tmp_path) as lock:  # the kernel dropped the dead holder's lock
        assert (tmp_path / LOCK_FILE).read_text() == f"{os.getpid()}\n"
        with pytest.raises(RunInUseError, match=f"pid {os.getpid()}"):
            RunLock.acquire(tmp_path)
    assert lock._fd == -1
    RunLock.acquire(tmp_path).release()


def test_a_failed_new_run_removes_only_what_it_made(tmp_path):
    other = tmp_path / "runs" / "other"
    other.mkdir(parents=True)
    (other / "keep").write_text("another run's file")
    out = tmp_path / "runs" / "new" / "deep"
    with pytest.raises(OSError, match="nothing was left behind"), creating_run_dir(out) as lock:
        assert lock is not None and (out / LOCK_FILE).exists()
        (out / CONFIG_FILE).write_text("{}")
        raise OSError(28, "No space left on device")
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["other"]
    assert (other / "keep").read_text() == "another run's file"
    # an existing empty folder is emptied, kept, and can be used again
    (tmp_path / "empty").mkdir()
    with pytest.raises(KeyboardInterrupt), creating_run_dir(tmp_path / "empty"):
        (tmp_path / "empty" / CONFIG_FILE).write_text("{}")
        raise KeyboardInterrupt
    assert list((tmp_path / "empty").iterdir()) == []
    # a folder that filled up between the checks and the lock is refused, not emptied
    full = tmp_path / "full"
    full.mkdir()
    (full / CONFIG_FILE).write_text("{}")
    with pytest.raises(ValueError, match="is not empty"), creating_run_dir(full):
        pytest.fail("the block must not run")
    assert (full / CONFIG_FILE).read_text() == "{}"


# A child that loads only stacklstm/rundir/lock.py (standard library only; no jax to import),
# waits for the start signal, then claims two folders as fast as it can.
CLAIM = """
import importlib.util, os, sys, time
spec = importlib.util.spec_from_file_location("lock", sys.argv[1])
lock = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lock)
while not os.path.exists(sys.argv[3]):
    time.sleep(0.001)
for _ in range(2):
    with lock.unique_dir(sys.argv[2], "20260101-000000") as path:
        print(path.name, flush=True)
"""


def test_unique_dir_gives_each_of_many_processes_its_own_folder(tmp_path):
    go = tmp_path / "go"
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CLAIM, lock_module.__file__, str(tmp_path / "runs"), str(go)],
            stdout=subprocess.PIPE,
            text=True,
        )
        for _ in range(8)
    ]
    go.touch()  # all start together
    names = [name for child in children for name in child.communicate(timeout=60)[0].split()]
    assert all(child.returncode == 0 for child in children)
    assert sorted(names) == sorted(
        ["20260101-000000"] + [f"20260101-000000-{n}" for n in range(2, 17)]
    )  # sixteen folders, none given twice


@pytest.mark.slow  # two trainings: about 14 s
def test_trains_without_out_in_the_same_second_get_their_own_folders(tmp_path, monkeypatch):
    class Frozen:
        @staticmethod
        def now():
            from datetime import datetime

            return datetime(2026, 1, 1, 12, 0, 0)

    monkeypatch.setattr(cli_commands, "datetime", Frozen)
    monkeypatch.chdir(tmp_path)
    flags = [*tiny_run()[0], "--epochs", "1", "--quiet"]
    for lr in ("0.01", "0.02"):
        code, _out, err = _main("train", *flags, "--lr", lr)
        assert code == 0, err
    runs = sorted(p.name for p in (tmp_path / "runs").iterdir())
    assert runs == ["20260101-120000", "20260101-120000-2"]
    for name, lr in zip(runs, (0.01, 0.02), strict=True):
        config = json.loads((tmp_path / "runs" / name / CONFIG_FILE).read_text())
        assert config["config"]["train"]["lr"] == lr
        lines = [
            json.loads(s)
            for s in (tmp_path / "runs" / name / "metrics.jsonl").read_text().splitlines()
        ]
        keys = [(line["kind"], line["step"]) for line in lines]
        assert len(set(keys)) == len(keys) and keys[-1] == ("epoch", 24)  # one run's lines
    # a bad setting leaves no folder behind, not even runs/
    (tmp_path / "bad").mkdir()
    monkeypatch.chdir(tmp_path / "bad")
    code, _, err = _main("train", *flags, "--window", "100000")
    assert code == 2 and err.count("\n") == 1, err
    assert list((tmp_path / "bad").iterdir()) == []


def test_a_fifo_at_the_lock_file_is_refused_not_waited_on(tmp_path):
    os.mkfifo(tmp_path / ".lock")
    with pytest.raises(RunInUseError, match=r"\.lock is not a plain file"):
        RunLock.check_free(tmp_path)
    with pytest.raises(RunInUseError, match=r"\.lock is not a plain file"):
        RunLock.acquire(tmp_path)
