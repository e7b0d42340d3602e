"""The run folder: config.json (layout version), new-folder checks, atomic writes."""

import json
import shutil

import numpy as np
import pytest

from stacklstm.data import Scaler
from stacklstm.train import LAYOUT_VERSION, RunConfig
from stacklstm.train.rundir import (
    CONFIG_FILE,
    RunInfo,
    atomic_write,
    atomic_write_text,
    check_new_run_dir,
    read_run_info,
    write_run_info,
)


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
