"""The command line: train -> evaluate -> predict end to end, config files, user errors.
(Flags -> config and the parser are test_flags.py and test_parser.py.)"""

import contextlib
import dataclasses
import io
import json
import os
import re
import shutil
import tempfile
import typing
from pathlib import Path
from typing import Literal

import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

import stacklstm.run.loop as loop
from helpers import (
    _JSON,
    CRASH_FLAGS,
    PROPERTY,
    _complete_steps,
    _full_disk_at_commit,
    _main,
    _no_space,
    _run,
    tiny_run,
)
from stacklstm.cli import main
from stacklstm.cli.flags import _floats, _ints, _names
from stacklstm.data import DataConfig, bundled_dataset_path
from stacklstm.rundir import read_run_info
from stacklstm.rundir.info import CONFIG_FILE
from stacklstm.train import ModelConfig, TrainConfig
from stacklstm.train.checkpoint import RunCheckpoints

# The tiny run of run/test_loop.py (same settings, so a shared compilation cache can hit).
TINY_FLAGS, TINY_RUN = tiny_run()


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory):
    """``stacklstm train`` in-process with the tiny settings; returns (run folder, stdout)."""
    run = tmp_path_factory.mktemp("cli") / "run"
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["train", "--out", str(run), "--quiet", *TINY_FLAGS])
    assert code == 0
    return run, out.getvalue()


def test_cli_train_evaluate_predict_end_to_end(cli_run, capsys, tmp_path):
    run, train_out = cli_run
    assert read_run_info(run).config == TINY_RUN  # flags -> exactly these settings
    report = json.loads((run / "report.json").read_text())
    assert set(report["test"]) == {"model", "last_value", "seasonal_naive", "combination"}
    for scores in report["test"].values():
        assert set(scores) == {"mae", "rmse", "mape", "smape", "mase", "coverage", "width", "wql"}
    # the default levels: the model (mse, no --conformal) has none; the baselines' come from
    # their validation residuals
    assert report["interval_levels"] == ["0.8", "0.95"] and not report["conformal"]
    assert report["test"]["model"]["coverage"] is None
    assert set(report["test"]["last_value"]["coverage"]) == {"0.8", "0.95"}
    assert report["n_test"] == 343 and report["n_val"] == 343
    assert f"{report['test']['model']['rmse']:.4f}" in train_out
    assert "run folder:" in train_out and "48 steps" in train_out

    code, out, err = _run(capsys, "evaluate", run)
    assert code == 0 and "filled 59 rows" in err  # info logs go to stderr
    assert out.splitlines()[:8] == train_out.splitlines()[:8]  # the same table again
    assert json.loads((run / "report.json").read_text()) == report

    # the default: the future, one row per step after the series' last row (2001-12-29)
    csv = tmp_path / "future.csv"
    code, out, _ = _run(capsys, "predict", run, "--output", csv)
    assert code == 0 and out.strip() == f"wrote 1 forecasts to {csv}"
    future = pd.read_csv(csv)
    assert list(future.columns) == ["unique_id", "ds", "stacklstm"]
    assert future.values[0, :2].tolist() == ["co2", "2002-01-05"]
    assert abs(future["stacklstm"].iloc[0] - 371.0) < 3  # the last value is ~370.6
    # --history: the forecasts from every origin, the last of which is the future's
    csv = tmp_path / "forecasts.csv"
    code, out, _ = _run(
        capsys, "predict", run, "--data", bundled_dataset_path(), "--output", csv, "--history"
    )
    assert code == 0 and out.strip() == f"wrote 2279 forecasts to {csv}"
    frame = pd.read_csv(csv)
    assert frame["co2_h1"].iloc[-1] == pytest.approx(future["stacklstm"].iloc[0], rel=1e-12)
    assert list(frame.columns) == ["origin", "co2_h1"] and len(frame) == 2279
    assert frame["origin"].iloc[0] == "1958-05-03"  # row 6 of the weekly table: first full window
    assert np.isfinite(frame["co2_h1"]).all()
    assert abs(frame["co2_h1"].iloc[-1] - 371.0) < 3  # the last value of the series is ~370.6
    code, _, _ = _run(capsys, "predict", run)  # defaults: the run's data, RUN_DIR/predictions.csv
    assert code == 0
    pd.testing.assert_frame_equal(pd.read_csv(run / "predictions.csv"), future)


def test_config_file_then_flags(tmp_path, capsys):
    config = tmp_path / "run.toml"
    config.write_text(
        "[data]\nwindow = 6\nseason = 52\ndeseasonalize = false\n"
        "[model]\nhidden_size = 8\nlinear_layer_sizes = [8]\ndropout = 0.2\n"
        "[train]\nepochs = 1\nbatch_size = 64\nlog_every = 10\ncheckpoint_every = 20\n"
        'baselines = "naive"\npatience = 15\nretrain = "off"\n'
    )
    code, _, err = _run(
        capsys, "train", "--config", config, "--epochs", "2", "--out", tmp_path / "r", "--quiet"
    )
    assert code == 0, err
    assert read_run_info(tmp_path / "r").config == TINY_RUN  # file, then --epochs 2 on top


def _table(tmp_path, name, text):
    path = tmp_path / name
    path.write_text(text)
    return path


def _weekly(n, **columns):
    dates = pd.date_range("2000-01-01", periods=n, freq="W").strftime("%Y-%m-%d")
    return pd.DataFrame({"date": dates, **columns}).to_csv(index=False)


BAD_INPUTS = {
    "missing file": (["--data", "{tmp}/nope.csv"], "data file not found"),
    "unknown column": (["--target", "ch4"], "column 'ch4' not found; available columns"),
    "non-numeric target": (["--data", "{tmp}/text.csv"], "must be numeric; row 3 holds 'abc'"),
    "too-short series": (
        ["--data", "{tmp}/short.csv", "--window", "52"],
        "the series has 8 rows but window (52)",
    ),
    "unparseable time": (["--data", "{tmp}/time.csv"], "cannot parse 'yesterday' in row 2"),
    "duplicated stamps": (["--data", "{tmp}/dup.csv"], "repeats 2000-01-09 (rows 2 and 3)"),
    "window 0": (["--window", "0"], "window must be an integer >= 1, got 0"),
    "negative size": (["--hidden-size", "-3"], "--hidden-size must be an integer >= 1, got -3"),
    "bad sizes": (["--linear-layer-sizes", "3,x"], "expected comma-separated integers"),
    "bad number": (["--lr", "fast"], "argument --lr: expected a number, got 'fast'"),
    "bad choice": (["--loss", "l2"], "argument --loss: invalid choice: 'l2'"),
    "nan fraction": (["--val-fraction", "nan"], "--val-fraction must be a number in [0.0, 1.0)"),
    "unknown flag": (["--hiden-size", "3"], "unrecognized arguments: --hiden-size 3"),
    "missing config": (["--config", "{tmp}/none.toml"], "config file not found"),
    "bad config key": (["--config", "{tmp}/bad.toml"], "unknown [model] key(s) 'hidden'"),
    "resume without out": (["--resume"], "--resume needs --out RUN_DIR"),
    "batch too big": (["--batch-size", "4096"], "--batch-size (4096) is larger than the 1546"),
}


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_user_errors_are_one_line_exit_2_and_leave_no_run_folder(case, tmp_path, capsys):
    _table(tmp_path, "text.csv", _weekly(20, co2=["1", "2", "abc"] + ["4"] * 17))
    _table(tmp_path, "short.csv", _weekly(8, co2=range(8)))
    _table(tmp_path, "time.csv", "date,co2\n2000-01-02,1\nyesterday,2\n")
    _table(tmp_path, "dup.csv", "date,co2\n2000-01-02,1\n2000-01-09,2\n2000-01-09,3\n")
    _table(tmp_path, "bad.toml", "[model]\nhidden = 3\n")
    flags, message = BAD_INPUTS[case]
    out = tmp_path / "runs" / "r"
    argv = ["train", "--out", out, *[f.format(tmp=tmp_path) for f in flags]]
    if case == "resume without out":
        argv = ["train", "--resume"]
    code, stdout, err = _run(capsys, *argv)
    assert code == 2
    assert len(err.splitlines()) == 1, err
    assert err.startswith("stacklstm: error: ") and message in err, err
    assert stdout == ""
    assert not (tmp_path / "runs").exists()


def test_run_folder_errors_are_one_line_and_change_nothing(cli_run, capsys, tmp_path):
    run, _ = cli_run
    before = {p: p.stat().st_mtime_ns for p in run.rglob("*")}
    cases = [
        (["train", "--out", run, "--resume", "--epochs", "3"], "train.epochs: 3 != 2"),
        (["train", "--out", run, *TINY_FLAGS], "already holds a run; pass --resume"),
        (["train", "--out", tmp_path / "none", "--resume"], "run folder not found"),
        (["evaluate", tmp_path], "is not a run folder: it has no config.json"),
        (["predict", run, "--data", tmp_path / "x.csv"], "data file not found"),
        (["predict", run, "--output", tmp_path / "no" / "x.csv"], "folder"),
        (["predict", run, "--data", _table(tmp_path, "t.csv", _weekly(30, ch4=range(30)))],
         "column 'co2' not found"),
    ]  # fmt: skip
    for argv, message in cases:
        code, _, err = _run(capsys, *argv)
        assert (code, len(err.splitlines())) == (2, 1), (argv, err)
        assert err.startswith("stacklstm: error: ") and message in err, err
    assert {p: p.stat().st_mtime_ns for p in run.rglob("*")} == before
    assert not (tmp_path / "none").exists()


def _one_line_error(code, stdout, stderr, expected_code=2):
    assert code == expected_code, (code, stderr)
    assert len(stderr.splitlines()) == 1, stderr
    assert stderr.startswith("stacklstm: error: "), stderr
    assert stdout == ""
    return stderr


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
    args = [
        "train",
        "--data",
        csv,
        "--out",
        tmp_path / "runs" / "r",
        "--window",
        "3",
        "--batch-size",
        "4",
        *flags,
    ]
    err = _one_line_error(*_main(*args))
    assert message in err
    assert not (tmp_path / "runs").exists()


def test_gaps_reject_names_missing_time_stamps(tmp_path):
    dates = pd.date_range("2000-01-02", periods=41, freq="W").delete(20)  # one week missing
    csv = _weekly_csv(tmp_path / "data.csv", np.arange(40.0), dates)
    args = [
        "train",
        "--data",
        csv,
        "--out",
        tmp_path / "r",
        "--window",
        "3",
        "--batch-size",
        "4",
        "--gaps",
        "reject",
    ]
    err = _one_line_error(*_main(*args))
    assert "1 time stamps of step 7D are missing, the first 2000-05-21" in err
    assert not (tmp_path / "r").exists()


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
    assert re.search(  # named from the config kept with the checkpoint, before restoring
        r"config\.json was edited after checkpoint step 198 was written "
        r"\(config\.model\.lstm_hidden_size: 9 != 8; config\.json first\)",
        err,
    ), err
    (run / CONFIG_FILE).write_text(
        json.dumps({**raw, "config": read_run_info(reference[0]).config.to_dict()})
    )
    err = _one_line_error(*_main("train", "--out", run, "--resume", "--hidden-size", "9"))
    assert "the settings differ from the saved run's (model.lstm_hidden_size: 9 != 8)" in err
    after = {p: p.stat().st_mtime_ns for p in run.rglob("*") if p.name != CONFIG_FILE}
    assert after == {p: t for p, t in before.items() if p.name != CONFIG_FILE}


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
    if kind == (int | None):  # "none" (or nothing) is a valid value
        return st.one_of(
            st.integers(max_value=-1).map(str),
            text.filter(lambda s: not _is(int, s) and s.strip().lower() not in ("", "none")),
        )
    if kind == (int | Literal["auto"]):  # "auto" is a valid value
        return st.one_of(
            st.integers(max_value=-1).map(str),
            text.filter(lambda s: not _is(int, s) and s.strip().lower() != "auto"),
        )
    if kind == (int | Literal["auto"] | None):  # "auto", "none" (or nothing) are valid
        return st.one_of(
            st.integers(max_value=1).map(str),
            text.filter(
                lambda s: not _is(int, s) and s.strip().lower() not in ("", "auto", "none")
            ),
        )
    if kind == tuple[int, ...]:
        return st.one_of(
            st.lists(st.integers(max_value=0), min_size=1, max_size=3).map(
                lambda v: ",".join(map(str, v))
            ),
            text.filter(lambda s: not _is(_ints, s)),
        )
    if kind == tuple[float, ...]:  # levels: each strictly between 0 and 1
        outside = st.one_of(st.floats(max_value=0.0), st.floats(min_value=1.0))
        return st.one_of(
            st.lists(outside, min_size=1, max_size=3).map(lambda v: ",".join(map(repr, v))),
            text.filter(lambda s: not _is(_floats, s)),
        )
    raise AssertionError(kind)


def _setting_flags():
    for cls in (DataConfig, ModelConfig, TrainConfig):
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            yield "--" + field.name.replace("_", "-"), hints[field.name]


_COLUMN_FLAGS = {
    # target: anything but exactly co2; (future, static) features: anything naming a column
    # (the bundled table has none besides co2); time: not 'date'
    "--target": st.text(max_size=6).filter(lambda s: not _is(_names, s) or _names(s) != ("co2",)),
    "--features": st.text(max_size=6).filter(lambda s: not _is(_names, s) or _names(s) != ()),
    "--future-features": st.text(max_size=6).filter(
        lambda s: not _is(_names, s) or _names(s) != ()
    ),
    "--static-features": st.text(max_size=6).filter(
        lambda s: not _is(_names, s) or _names(s) != ()
    ),
    "--time-column": st.text(min_size=1, max_size=6).filter(
        lambda s: s.strip().lower() not in ("", "none", "date")
    ),
    # id: any name ('none' is the default, one series); the bundled table has no id column
    "--id-column": st.text(min_size=1, max_size=6).filter(
        lambda s: s.strip().lower() not in ("", "none")
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
    argv = [
        "train",
        "--data",
        base / "data.csv",
        "--out",
        base / "runs" / "r",
        "--window",
        "3",
        "--batch-size",
        "4",
        "--epochs",
        "1",
        "--gaps",
        "reject",
    ]
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
        {
            "layout_version": st.just(1),
            "config": st.just({}),
            "data_path": st.none(),
            "scaler": st.fixed_dictionaries(
                {
                    "kind": st.just("standard") | _JSON,
                    "columns": st.just(["co2"]) | _JSON,
                    "n_targets": st.just(1) | _JSON,
                    "center": st.just([1.0]) | _JSON,
                    "scale": st.just([2.0]) | _JSON,
                }
            ),
        }
    ),
)


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


def test_values_too_large_for_float32_are_refused_before_the_run_folder(tmp_path):
    rows = np.linspace(1.0, 2.0, 300)
    cases = [  # (values, scaler, what the message says)
        (rows * 1e39, "none", "scaled with --scaler none it reaches 1e+37"),
        (rows * 1e20, "none", "scaled with --scaler none it reaches 1e+18"),
        (rows * 1e200, "standard", "reaches 2e+200; values up to 1e+150"),
        (rows * 1e200, "minmax", "reaches 2e+200; values up to 1e+150"),
    ]
    for n, (values, scaler, words) in enumerate(cases):
        path = tmp_path / f"t{n}.csv"
        pd.DataFrame({"v": values}).to_csv(path, index=False)
        out = tmp_path / f"run{n}"
        err = _one_line_error(
            *_main(
                "train",
                "--data",
                path,
                "--target",
                "v",
                "--time-column",
                "none",
                "--scaler",
                scaler,
                "--window",
                "4",
                "--epochs",
                "1",
                "--out",
                out,
                "--quiet",
            )
        )
        assert f"column 'v' of {path} " in err and words in err, err
        assert "--lr" not in err and not out.exists()
    pd.DataFrame({"v": rows * 1e15}).to_csv(tmp_path / "ok.csv", index=False)  # large, fits
    code, _, err = _main(
        "train",
        "--data",
        tmp_path / "ok.csv",
        "--target",
        "v",
        "--time-column",
        "none",
        "--scaler",
        "none",
        "--window",
        "4",
        "--epochs",
        "1",
        "--baselines",
        "naive",
        "--out",
        tmp_path / "ok",
        "--quiet",
    )
    assert code == 0, err


def test_series_that_cannot_fit_in_memory_are_refused_before_allocating(
    tmp_path, monkeypatch, cli_run
):
    from stacklstm.train import memory

    rows = 200_000
    pd.DataFrame({"co2": np.arange(rows, dtype=np.float64)}).to_csv(tmp_path / "t.csv")
    # windows are gathered per batch: a window of 100000 costs one batch, not rows x window
    held, batch = memory.series_bytes(rows, 1, 1, 100_000, 32)
    assert (held, batch) == (rows * (24 + 16 + 2 * 32), 32 * 100_000 * 20)
    memory.check_series_fit(rows, 1, 1, 100_000, 32, available=held + batch)
    monkeypatch.setattr(memory, "available_memory", lambda: 10 * 2**20)  # 10 MiB left
    err = _one_line_error(
        *_main(
            "train",
            "--data",
            tmp_path / "t.csv",
            "--time-column",
            "none",
            "--out",
            tmp_path / "run",
        )
    )
    assert (
        "the series of 200000 rows x 1 columns need about 0.02 GiB held in memory, and one "
        "batch of 32 windows of 10 steps 0.00 GiB more, but 0.01 GiB of memory is available; "
        "use fewer rows or columns, or lower --window or --batch-size"
    ) in err
    assert not (tmp_path / "run").exists()
    run, _ = cli_run  # predict and evaluate check the same before reading the series
    monkeypatch.setattr(memory, "available_memory", lambda: 10_000)  # < 2284 rows' 0.2 MiB
    before = sorted(run.rglob("*"))
    for argv in (["predict", run, "--output", tmp_path / "p.csv"], ["evaluate", run]):
        assert "held in memory" in _one_line_error(*_main(*argv))
    assert sorted(run.rglob("*")) == before and not (tmp_path / "p.csv").exists()
