"""stacklstm tune: the study shared by workers, and what a search leaves. (The search space
and best.toml are tests/tune/.)"""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import cache_env
from stacklstm import cli
from stacklstm.configfile import load_config

optuna = pytest.importorskip("optuna")

# Cheap trials: the tiny model on the bundled data, two epochs of 6 steps.
FLAGS = [
    "--window",
    "6",
    "--hidden-size",
    "8",
    "--num-layers",
    "1",
    "--linear-layer-sizes",
    "8",
    "--epochs",
    "2",
    "--batch-size",
    "256",
    "--quiet",
]
SPACE = """
[tune.model]
lstm_hidden_size = [4, 8]
[tune.train]
lr = {low = 1e-3, high = 1e-2, log = true}
"""


def _one_line(code, capsys):
    out, err = capsys.readouterr()
    assert code == 2 and out == "" and len(err.strip().splitlines()) == 1, err
    return err


def test_cli_errors_are_one_line(tmp_path, capsys):
    err = _one_line(cli.main(["tune", "--trials", "0", "--out", str(tmp_path / "a")]), capsys)
    assert "--trials must be an integer >= 1, got 0" in err
    config = tmp_path / "space.toml"
    config.write_text("[tune.model]\nlstm_hidden_size = {low = 8}\n")
    err = _one_line(
        cli.main(["tune", "--config", str(config), "--out", str(tmp_path / "b")]), capsys
    )
    assert "[tune.model] lstm_hidden_size: a range is" in err
    bad = "sqlite:////nonexistent-folder/here/study.db"
    err = _one_line(
        cli.main(["tune", "--storage", bad, "--out", str(tmp_path / "c"), "--trials", "1"]),
        capsys,
    )
    assert f"cannot open the study storage '{bad}'" in err
    err = _one_line(cli.main(["tune", "--val-fraction", "0", "--out", str(tmp_path / "d")]), capsys)
    assert "--val-fraction must be above 0" in err
    assert not any((tmp_path / name).exists() for name in "abcd")


def _worker(out, trials, *extra, heartbeat="60"):
    env = cache_env({**os.environ, "PYTHONUNBUFFERED": "1"})
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stacklstm",
            "tune",
            "--out",
            str(out),
            "--trials",
            str(trials),
            "--heartbeat",
            heartbeat,
            *FLAGS,
            *extra,
        ],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _study(out):
    return optuna.load_study(study_name="stacklstm", storage=f"sqlite:///{out}/study.db")


@pytest.mark.slow
def test_two_workers_share_one_study_and_best_toml_trains(tmp_path):
    out = tmp_path / "search"
    config = tmp_path / "space.toml"
    config.write_text(SPACE)
    workers = [_worker(out, 2, "--config", str(config)) for _ in range(2)]
    for w in workers:
        _, stderr = w.communicate(timeout=600)
        assert w.returncode == 0, stderr[-3000:]
    trials = _study(out).trials
    assert sorted(t.number for t in trials) == [0, 1, 2, 3]  # none lost, none duplicated
    assert all(t.state.name in ("COMPLETE", "PRUNED") for t in trials), trials
    for t in trials:
        metrics = Path(t.user_attrs["run_dir"]) / "metrics.jsonl"
        lines = [json.loads(s) for s in metrics.read_text().splitlines()]
        val = [r["val_loss"] for r in lines if r["kind"] == "epoch"]
        assert t.params["model.lstm_hidden_size"] in (4, 8)
        if t.state.name == "COMPLETE":  # the objective is the run's best validation loss
            assert t.value == min(val)
    best = load_config(out / "best.toml")
    study = _study(out)
    assert best.model.lstm_hidden_size == study.best_params["model.lstm_hidden_size"]
    assert best.train.lr == study.best_params["train.lr"]
    assert (out / "trials.csv").read_text().count("\n") == 5  # header + 4 trials
    assert (out / "history.png").stat().st_size > 0
    code = cli.main(
        [
            "train",
            "--config",
            str(out / "best.toml"),
            "--epochs",
            "1",
            "--baselines",
            "naive",
            "--out",
            str(tmp_path / "best-run"),
            "--quiet",
        ]
    )
    assert code == 0 and (tmp_path / "best-run" / "report.json").exists()


@pytest.mark.slow
def test_a_worker_killed_mid_trial_leaves_the_study_usable(tmp_path):
    out = tmp_path / "search"
    first = _worker(out, 4, heartbeat="1")
    deadline = time.monotonic() + 300
    while not (out / "trials" / "0000" / "config.json").exists():  # mid-trial: training
        assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()
        time.sleep(0.2)
    first.send_signal(signal.SIGKILL)
    first.communicate()
    time.sleep(3)  # past the grace period (2 heartbeats): the next trial start finds it stale
    second = _worker(out, 1, heartbeat="1")
    _, stderr = second.communicate(timeout=600)
    assert second.returncode == 0, stderr[-3000:]
    states = {t.number: t.state.name for t in _study(out).trials}
    assert states[0] == "FAIL", states  # the killed trial, failed by the second worker
    assert sorted(n for n, s in states.items() if s in ("COMPLETE", "PRUNED")) == [1]
