"""The run folder: config.json (layout version), new-folder checks, atomic writes."""

import dataclasses
import json
import shutil

import numpy as np
import pytest

from stacklstm.data import Scaler
from stacklstm.rundir.folder import (
    atomic_write,
    atomic_write_text,
    check_new_run_dir,
)
from stacklstm.rundir.info import (
    CONFIG_FILE,
    RunInfo,
    read_run_info,
    write_run_info,
)
from stacklstm.train import LAYOUT_VERSION, RunConfig


def _info():
    scaler = Scaler.fit(np.array([[1.0], [3.0]]), "standard", ("co2",), 1)
    return RunInfo(RunConfig().replace({"train": {"epochs": 3}}), None, scaler)


def test_run_info_round_trips_and_checks_the_layout_version(tmp_path):
    write_run_info(tmp_path, _info())
    raw = json.loads((tmp_path / CONFIG_FILE).read_text())
    assert raw["layout_version"] == LAYOUT_VERSION
    assert raw["config"]["train"]["epochs"] == 3 and raw["scaler"]["center"] == [2.0]
    info = read_run_info(tmp_path)
    assert info.config == _info().config and info.data_path is None
    assert info.scaler.to_dict() == _info().scaler.to_dict()
    raw["layout_version"] = LAYOUT_VERSION + 1
    (tmp_path / CONFIG_FILE).write_text(json.dumps(raw))
    with pytest.raises(ValueError, match=f"has layout version {LAYOUT_VERSION + 1} but this"):
        read_run_info(tmp_path)
    with pytest.raises(ValueError, match="run folder not found"):
        read_run_info(tmp_path / "nope")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=r"is not a run folder: it has no config\.json"):
        read_run_info(tmp_path / "empty")


def test_check_new_run_dir(tmp_path):
    check_new_run_dir(tmp_path / "a" / "b")  # absent: fine, and nothing is created
    assert not (tmp_path / "a").exists()
    check_new_run_dir(tmp_path)  # empty folder: fine
    write_run_info(tmp_path / "", _info())
    with pytest.raises(ValueError, match="already holds a run; pass `resume=True`"):
        check_new_run_dir(tmp_path)
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="is a file"):
        check_new_run_dir(tmp_path / "file")
    with pytest.raises(ValueError, match=r"cannot create the run folder .*file is not writable"):
        check_new_run_dir(tmp_path / "file" / "run")  # under a file: nothing can be created


def test_atomic_write_replaces_whole_files_only(tmp_path):
    path = tmp_path / "report.json"
    atomic_write_text(path, "old")

    class Boom(Exception):
        pass

    def fail(handle):
        handle.write(b"half")
        raise Boom

    with pytest.raises(Boom):
        atomic_write(path, fail)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["report.json"]  # no temporary left over
    atomic_write_text(path, "new")
    assert path.read_text() == "new"


def test_edits_to_config_json_are_refused_naming_the_changed_keys(trained_run, tmp_path):
    from helpers import _main

    run = tmp_path / "run"
    shutil.copytree(trained_run.out_dir, run)
    raw = json.loads((run / CONFIG_FILE).read_text())
    raw["config"]["data"]["window"] = 8  # the same array shapes: only the copy can tell
    raw["config"]["train"]["batch_size"] = 10**9
    (run / CONFIG_FILE).write_text(json.dumps(raw))
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*")}
    for argv in (["predict", run], ["evaluate", run], ["train", "--out", run, "--resume"]):
        code, _, err = _main(*argv, "--quiet")
        assert code == 2 and len(err.splitlines()) == 1, (argv, err)
        step = 48 if argv[0] == "train" else trained_run.best_step  # the checkpoint it reads
        assert f"{run / CONFIG_FILE} was edited after checkpoint step {step} was written" in err
        assert (
            "config.data.window: 8 != 6" in err
            and "config.train.batch_size: 1000000000 != 64" in err
        )
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*")} == before
    raw["config"]["data"]["horizon"] = 5  # other array shapes: named, not Orbax's error
    (run / CONFIG_FILE).write_text(json.dumps(raw))
    for argv in (["predict", run], ["train", "--out", run, "--resume"]):
        code, _, err = _main(*argv, "--quiet")
        assert code == 2 and len(err.splitlines()) == 1, (argv, err)
        assert "config.data.horizon: 5 != " in err and "strict" not in err


def test_a_table_inside_the_run_folder_is_stored_relative_and_resolved_where_it_is(tmp_path):
    from stacklstm.rundir.info import run_data_path

    run = tmp_path / "run"
    table = run / "data.parquet"
    assert run_data_path(run, table) == (table.absolute(), "data.parquet")
    assert run_data_path(run, tmp_path / "t.csv") == ((tmp_path / "t.csv").absolute(), None)
    # a seed ensemble's member: its ensemble's table, two folders up
    assert run_data_path(run / "members" / "1", table)[1] == "../../data.parquet"
    assert run_data_path(tmp_path / "other" / "members" / "1", table)[1] is None
    assert run_data_path(run, None) == (None, None)
    absolute, relative = run_data_path(run, table)
    write_run_info(
        run.parent / "", RunInfo(_info().config, absolute, _info().scaler, None, relative)
    )
    run.mkdir()
    shutil.move(tmp_path / CONFIG_FILE, run / CONFIG_FILE)
    assert json.loads((run / CONFIG_FILE).read_text())["data_path"] == "data.parquet"
    moved = tmp_path / "deep" / "moved"
    moved.parent.mkdir()
    shutil.move(run, moved)
    info = read_run_info(moved)
    assert info.data_path == moved.absolute() / "data.parquet"
    assert info.data_relative == "data.parquet"
    assert info.to_dict()["data_path"] == "data.parquet"  # what the checkpoints' copy holds
    member = moved / "members" / "0"
    member.mkdir(parents=True)
    write_run_info(member, dataclasses.replace(info, data_relative="../../data.parquet"))
    assert read_run_info(member).data_path == moved.absolute() / "data.parquet"


def test_an_older_run_folder_with_an_absolute_data_path_loads_as_it_did(tmp_path):
    write_run_info(tmp_path, RunInfo(_info().config, tmp_path / "t.csv", _info().scaler))
    raw = json.loads((tmp_path / CONFIG_FILE).read_text())
    assert raw["data_path"] == str(tmp_path / "t.csv")
    info = read_run_info(tmp_path)
    assert info.data_path == tmp_path / "t.csv" and info.data_relative is None
    assert info.to_dict() == raw


def test_a_new_run_folder_may_hold_just_its_own_table(tmp_path):
    from stacklstm.rundir.folder import creating_run_dir

    run = tmp_path / "run"
    run.mkdir()
    table = run / "data.parquet"
    table.write_bytes(b"table")
    check_new_run_dir(run, table)  # its own table: fine
    with pytest.raises(ValueError, match="is not empty; choose"):
        check_new_run_dir(run)  # another run's table is not its own
    with pytest.raises(ValueError, match="is not empty; choose"):
        check_new_run_dir(run, tmp_path / "data.parquet")
    (run / "notes.txt").write_text("mine")
    with pytest.raises(ValueError, match=r"is not empty but for its table data\.parquet"):
        check_new_run_dir(run, table)
    (run / "notes.txt").unlink()

    class Boom(Exception):
        pass

    with pytest.raises(Boom), creating_run_dir(run):  # a failed creation keeps the table
        (run / CONFIG_FILE).write_text("{}")
        raise Boom
    assert sorted(p.name for p in run.iterdir()) == ["data.parquet"]
    assert table.read_bytes() == b"table"
    (run / "other.csv").write_text("x")
    with pytest.raises(ValueError, match="is not empty"), creating_run_dir(run):
        pass  # two files: not a run's own table
    assert sorted(p.name for p in run.iterdir() if p.name != ".lock") == [
        "data.parquet",
        "other.csv",
    ]
