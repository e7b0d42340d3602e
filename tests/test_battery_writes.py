"""User-named output paths: ``--output`` (and ``--out``) never replace a file or folder that a
run folder owns, the input table, or a folder; a lock is never replaced; standard output
closed and ids that select nothing are one-line errors with exit status 2."""

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from helpers import _main, cache_env
from stacklstm.data import bundled_dataset_path
from stacklstm.rundir.info import CONFIG_FILE
from stacklstm.rundir.lock import LOCK_FILE, RunInUseError, RunLock
from stacklstm.rundir.outputs import check_new_folder, check_output
from stacklstm.rundir.owners import run_folder_owner
from test_panel import PANEL_FLAGS, panel_csv


def _files(folder):
    """Every file under ``folder`` (relative path -> bytes), and every folder (-> None)."""
    folder = Path(folder)
    return {
        str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes()
        for p in sorted(folder.rglob("*"))
    }


def _refused(code, out, err, *words):
    """Exit status 2, nothing on stdout, one line on stderr holding ``words``."""
    assert code == 2, (code, err)
    assert out == "" and len(err.splitlines()) == 1, (out, err)
    assert err.startswith("stacklstm: error: "), err
    for word in words:
        assert word in err, err
    return err


def _owned_paths(run):
    """Paths the tiny run owns: its files, the lock, a file deep in a checkpoint, a new file
    in a checkpoint folder, a checkpoint folder itself, the calibration file (absent)."""
    metadata = next(p for p in sorted((run / "checkpoints_best").rglob("*")) if p.is_file())
    return [
        run / CONFIG_FILE,
        run / LOCK_FILE,
        run / "metrics.jsonl",
        run / "report.json",
        run / "loss.png",
        run / "forecast.png",
        metadata,
        run / "checkpoints" / "mine.csv",
        run / "checkpoints",
        run / "calibration.json",
    ]


def test_predict_and_export_refuse_every_file_a_run_folder_owns(trained_run, tmp_path):
    run = trained_run.out_dir
    before = _files(run)
    for target in _owned_paths(run):
        for command in ("predict", "export"):
            err = _refused(*_main(command, run, "--output", target, "--quiet"), "cannot write")
            assert "which stacklstm writes" in err or "is a folder" in err, err
            assert _files(run) == before, (command, target)  # byte for byte, nothing added
    # a symlink is judged by what it resolves to: a link to config.json is refused, kept
    link = tmp_path / "latest.json"
    link.symlink_to(run / CONFIG_FILE)
    _refused(*_main("predict", run, "--output", link), f"a link to {run / CONFIG_FILE}")
    assert link.is_symlink() and _files(run) == before
    code, _, err = _main("predict", run, "--quiet")  # the run still works
    assert code == 0, err
    (run / "predictions.csv").unlink()


def test_a_new_file_of_the_users_own_inside_a_run_folder_is_written(trained_run):
    run = trained_run.out_dir
    before = _files(run)
    mine = run / "my_forecasts.csv"
    try:
        code, out, err = _main("predict", run, "--output", mine, "--quiet", "--history")
        assert code == 0, err
        frame = pd.read_csv(mine)
        assert list(frame.columns) == ["origin", "co2_h1"] and len(frame) == 2279
        assert out.strip() == f"wrote 2279 forecasts to {mine}"
        assert {k: v for k, v in _files(run).items() if k != mine.name} == before
    finally:
        mine.unlink(missing_ok=True)


def test_predict_refuses_to_replace_its_input_table_through_links(trained_run, tmp_path):
    table = tmp_path / "single.csv"
    shutil.copyfile(bundled_dataset_path(), table)
    (tmp_path / "link.csv").symlink_to(table)
    os.link(table, tmp_path / "hard.csv")  # another name of the same file
    data = table.read_bytes()
    run = trained_run.out_dir
    for given, output in (
        (table, table),
        (table, tmp_path / "link.csv"),
        (tmp_path / "link.csv", table),
        (table, tmp_path / "hard.csv"),
        (tmp_path / "hard.csv", table),
    ):
        err = _refused(
            *_main("predict", run, "--data", given, "--output", output, "--quiet"),
            f"it is the input table {given}",
        )
        assert table.read_bytes() == data and os.stat(table).st_nlink == 2, err
        assert (tmp_path / "link.csv").is_symlink()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["hard.csv", "link.csv", "single.csv"]
    with pytest.raises(ValueError, match="the same file"):
        check_output(tmp_path / "hard.csv", inputs=(table,))
    check_output(tmp_path / "other.csv", inputs=(table,))  # a new file is fine


def test_a_lock_is_never_replaced_and_stays_held(trained_run, tmp_path):
    run = trained_run.out_dir
    with RunLock.acquire(run):  # a `train` of this run is going on
        lock = run / LOCK_FILE
        inode, data = os.stat(lock).st_ino, lock.read_bytes()
        before = _files(run)
        for argv in (
            ("predict", run, "--output", lock),
            ("export", run, "--output", lock),
            ("train", "--out", lock, "--epochs", "1"),
            ("backtest", "--out", lock),
            ("tune", "--out", lock, "--trials", "1"),
        ):
            _refused(*_main(*argv, "--quiet"), str(lock))
            assert os.stat(lock).st_ino == inode and lock.read_bytes() == data, argv
            assert _files(run) == before, argv
        with pytest.raises(RunInUseError):  # still the one writer
            RunLock.check_free(run)
    # the lock file of any folder, even one that holds no run yet
    (tmp_path / LOCK_FILE).write_bytes(b"123\n")
    _refused(*_main("predict", run, "--output", tmp_path / LOCK_FILE, "--quiet"), LOCK_FILE)
    assert (tmp_path / LOCK_FILE).read_bytes() == b"123\n"


def test_a_new_run_is_never_created_inside_another_runs_own_folders(trained_run):
    run = trained_run.out_dir
    before = _files(run)
    for argv in (
        ("train", "--out", run / "checkpoints" / "999", "--epochs", "1"),
        ("backtest", "--out", run / "checkpoints_best" / "bt"),
        ("tune", "--out", run / "checkpoints" / "search", "--trials", "1"),
    ):
        _refused(*_main(*argv, "--quiet"), "cannot create", "choose another --out")
        assert _files(run) == before, argv


@pytest.mark.parametrize("command", ["predict", "export"])
def test_an_output_written_as_a_folder_is_refused(trained_run, tmp_path, command):
    run = trained_run.out_dir
    (tmp_path / "existing").mkdir()
    (tmp_path / "existing" / "keep.csv").write_text("mine\n")
    before = _files(tmp_path)
    for output in (f"{tmp_path}/new/", f"{tmp_path}/existing/", f"{tmp_path}/existing"):
        err = _refused(
            *_main(command, run, "--output", output, "--quiet"), f"cannot write {output}"
        )
        assert "folder" in err, err
        assert _files(tmp_path) == before, output  # no file named "new" or "existing"


def test_standard_output_closed_or_gone_is_one_line_exit_2(trained_run, monkeypatch, capsys):
    from stacklstm.cli import main

    class Gone:
        """A pipe whose reader has exited."""

        class buffer:  # stands for the binary buffer of sys.stdout
            @staticmethod
            def write(data):
                raise BrokenPipeError(32, "Broken pipe")

            @staticmethod
            def flush():
                pass

        @staticmethod
        def flush():
            pass

    run = trained_run.out_dir
    before = _files(run)
    for stdout, why in ((None, "it is closed"), (Gone(), "the reader has gone")):
        monkeypatch.setattr(sys, "stdout", stdout)
        code = main(["predict", str(run), "--output", "-", "--quiet"])
        monkeypatch.undo()
        out, err = capsys.readouterr()
        _refused(code, out, err, f"cannot write to standard output (--output -): {why}")
        assert _files(run) == before


def test_standard_output_closed_in_a_real_process(trained_run, tmp_path):
    command = [
        sys.executable,
        "-m",
        "stacklstm",
        "predict",
        str(trained_run.out_dir),
        "--output",
        "-",
        "--quiet",
    ]
    before = _files(trained_run.out_dir)
    done = subprocess.run(
        ["bash", "-c", 'exec "$@" >&-', "bash", *command],  # standard output closed: `>&-`
        stdin=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=tmp_path,
        timeout=600,
        env=cache_env(),
    )
    err = done.stderr.decode()
    _refused(done.returncode, "", err, "cannot write to standard output (--output -)")
    assert _files(trained_run.out_dir) == before and list(tmp_path.iterdir()) == []


@pytest.fixture(scope="module")
def panel(tmp_path_factory):
    """A tiny panel run (stores a and b trained; c too short and unknown to the run)."""
    base = tmp_path_factory.mktemp("panel")
    panel_csv(base / "sales.csv")
    code, _, err = _main("train", "--data", base / "sales.csv", "--out", base / "run", *PANEL_FLAGS)
    assert code == 0, err
    return base


@pytest.mark.parametrize(
    ("ids", "words"),
    [
        ("", ("--ids is empty", "the table has 'a', 'b', 'c'")),
        ("c", ("--ids 'c' select no series the run was trained on", "trained on 'a', 'b'")),
    ],
)
def test_ids_that_select_nothing_are_refused(panel, ids, words):
    output = panel / "p.csv"
    output.write_text("mine\n")
    before = _files(panel)
    run = panel / "run" / "selection"  # trained without c (too short for its splits)
    _refused(*_main("predict", run, "--ids", ids, "--output", output), *words)
    assert _files(panel) == before and output.read_text() == "mine\n"
    code, _, err = _main("predict", run, "--ids", "b", "--output", output)
    assert code == 0, err
    assert set(pd.read_csv(output)["unique_id"]) == {"b"}
    output.unlink()


def test_the_owner_of_a_path_of_an_ensemble_a_backtest_and_a_search(tmp_path):
    ens, member = tmp_path / "ens", tmp_path / "ens" / "members" / "0"
    (member / "checkpoints").mkdir(parents=True)
    for folder in (ens, member):
        (folder / CONFIG_FILE).write_text("{}")
        (folder / LOCK_FILE).write_text("")
    bt = tmp_path / "bt"
    (bt / "fold_00" / "checkpoints").mkdir(parents=True)
    (bt / "plan.json").write_text("{}")
    search = tmp_path / "search"
    search.mkdir()
    (search / "study.db").write_bytes(b"")
    owned = {
        member / CONFIG_FILE: (member, "run folder", CONFIG_FILE),
        member / "checkpoints" / "1": (member, "run folder", "checkpoints"),
        ens / "members" / "mine.csv": (ens, "run folder", "members"),
        member / "mine.csv": (ens, "run folder", "members"),  # the ensemble's, too
        ens / "members" / "7": (ens, "run folder", "members"),
        bt / "backtest.json": (bt, "backtest folder", "backtest.json"),
        bt / "fold_03" / "x.csv": (bt, "backtest folder", "fold_03"),
        bt / "fold_00" / "config.json": (bt, "backtest folder", "fold_00"),
        search / "best.toml": (search, "search folder", "best.toml"),
    }
    for path, owner in owned.items():
        assert run_folder_owner(path) == owner, path
        with pytest.raises(ValueError, match="which stacklstm writes"):
            check_output(path)
        with pytest.raises(ValueError, match="choose another `out_dir`"):
            check_new_folder(path)
    for mine in (
        ens / "forecasts.csv",
        bt / "fold_1",
        bt / "mine.csv",
        search / "trials_of_mine.csv",
        tmp_path / CONFIG_FILE,
    ):
        assert run_folder_owner(mine) is None, mine
        check_output(mine)
    # a config.json of the user's own, in a folder that holds no run, is the user's to write
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / CONFIG_FILE).write_text("{}")
    assert run_folder_owner(tmp_path / "mine" / CONFIG_FILE) is None
