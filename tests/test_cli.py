"""The command line: train -> evaluate -> predict end to end, flags -> config, user errors."""

import contextlib
import dataclasses
import io
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from helpers import cache_env, tiny_run
from stacklstm import cli
from stacklstm.cli import build_parser, main
from stacklstm.data import DataConfig, bundled_dataset_path, read_table
from stacklstm.train import ModelConfig, TrainConfig, read_run_info

# The tiny run of test_train.py (same settings, so a shared compilation cache can hit).
TINY_FLAGS, TINY_RUN = tiny_run()


def _run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


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
    assert set(report["test"]) == {"model", "last_value", "seasonal_naive"}
    for scores in report["test"].values():
        assert set(scores) == {"mae", "rmse", "mape", "smape", "mase"}
    assert report["n_test"] == 343 and report["n_val"] == 343
    assert f"{report['test']['model']['rmse']:.4f}" in train_out
    assert "run folder:" in train_out and "48 steps" in train_out

    code, out, err = _run(capsys, "evaluate", run)
    assert code == 0 and "filled 59 rows" in err  # info logs go to stderr
    assert out.splitlines()[:8] == train_out.splitlines()[:8]  # the same table again
    assert json.loads((run / "report.json").read_text()) == report

    csv = tmp_path / "forecasts.csv"
    code, out, _ = _run(capsys, "predict", run, "--data", bundled_dataset_path(), "--output", csv)
    assert code == 0 and out.strip() == f"wrote 2279 forecasts to {csv}"
    frame = pd.read_csv(csv)
    assert list(frame.columns) == ["origin", "co2_h1"] and len(frame) == 2279
    assert frame["origin"].iloc[0] == "1958-05-03"  # row 6 of the weekly table: first full window
    assert np.isfinite(frame["co2_h1"]).all()
    assert abs(frame["co2_h1"].iloc[-1] - 371.0) < 3  # the last value of the series is ~370.6
    code, _, _ = _run(capsys, "predict", run)  # defaults: the run's data, RUN_DIR/predictions.csv
    assert code == 0
    pd.testing.assert_frame_equal(pd.read_csv(run / "predictions.csv"), frame)


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


def test_flags_map_onto_config_fields_without_defaults_of_their_own():
    parser = build_parser()
    assert cli._overrides(parser.parse_args(["train"])) == {"data": {}, "model": {}, "train": {}}
    args = parser.parse_args(
        ["train", "--target", "a,b", "--features", "", "--time-column", "none",
         "--linear-layer-sizes", "", "--mean-aggregation", "--no-skip-nonfinite", "--lr", "1e-3",
         "--loss", "huber", "--val-fraction", "0.2"]
    )  # fmt: skip
    assert cli._overrides(args) == {
        "data": {"target": ("a", "b"), "features": (), "time_column": None, "val_fraction": 0.2},
        "model": {"linear_layer_sizes": (), "mean_aggregation": True},
        "train": {"skip_nonfinite": False, "lr": 1e-3, "loss": "huber"},
    }
    flags = {a.dest for a in parser._subparsers._group_actions[0].choices["train"]._actions}
    for section, cls in (("data", DataConfig), ("model", ModelConfig), ("train", TrainConfig)):
        for field in dataclasses.fields(cls):
            assert f"{section}.{field.name}" in flags  # every setting has a flag


def test_config_file_then_flags(tmp_path, capsys):
    config = tmp_path / "run.toml"
    config.write_text(
        "[data]\nwindow = 6\n[model]\nhidden_size = 8\nlinear_layer_sizes = [8]\ndropout = 0.2\n"
        "[train]\nepochs = 1\nbatch_size = 64\nlog_every = 10\ncheckpoint_every = 20\n"
        'baselines = "naive"\n'
    )
    code, _, err = _run(
        capsys, "train", "--config", config, "--epochs", "2", "--out", tmp_path / "r", "--quiet"
    )
    assert code == 0, err
    assert read_run_info(tmp_path / "r").config == TINY_RUN  # file, then --epochs 2 on top


def test_help_shows_a_worked_example(capsys):
    for argv in (["--help"], ["train", "--help"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 0
        out = capsys.readouterr().out
        assert "examples:" in out and "stacklstm train --data sales.csv --target units" in out
    assert "--linear-layer-sizes N,M" in out and "(default: 32,16)" in out


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
    "too-short series": (["--data", "{tmp}/short.csv"], "the series has 8 rows but window (10)"),
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
    "batch too big": (["--batch-size", "4096"], "--batch-size (4096) is larger than the 1588"),
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


def test_usage_errors_without_a_command(capsys):
    code, _, err = _run(capsys)
    assert code == 2 and err.strip() == (
        "stacklstm: error: the following arguments are required: COMMAND"
    )
    code, _, err = _run(capsys, "fly")
    assert code == 2 and len(err.splitlines()) == 1 and "invalid choice: 'fly'" in err
    assert read_table(bundled_dataset_path()).shape == (2284, 2)
