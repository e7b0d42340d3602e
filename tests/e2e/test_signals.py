"""Ctrl-C and SIGTERM reaching ``python -m stacklstm``: one line, exit 130 or 143, the newest
complete checkpoint kept; during a search, and inside a long statistical baseline.

The child-process tests run ``python -m stacklstm train`` with ``STACKLSTM_TEST_HOOK``, which
makes the child signal itself at a set moment (see :func:`stacklstm.signals.test_hook`)."""

import os
import signal
import subprocess
import sys
import time

import pandas as pd
import pytest

from helpers import (
    CRASH_FLAGS,
    TRIAL_FLAGS,
    _complete_steps,
    _long_series,
    _main,
    _saved,
    cache_env,
)
from stacklstm.forecasting import load_run

RESUME = "; continue with: stacklstm train --out {run} --resume"


# hook -> (exit status, resumable afterwards?, the newest complete checkpoint or None)
SCENARIOS = {
    "imports=SIGINT": (130, False, None),
    "compile=SIGTERM@0.2": (143, True, 0),  # arrives while the first step compiles
    "checkpoint=SIGINT": (130, True, 10),  # held back until the write of step 10 is done
    "checkpoint=SIGINT*2": (130, True, 0),  # the second stops at once, mid-write
    "epoch=SIGTERM": (143, True, 20),  # after step 30 is taken, before it is saved
    "evaluate=SIGINT": (130, True, 198),  # the final report; resume only rewrites it
}


def _start(tmp_path, hook, n):
    run, log = tmp_path / f"run{n}", tmp_path / f"child{n}.log"
    env = {**cache_env(), "STACKLSTM_TEST_HOOK": hook}
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
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
            cwd=tmp_path,
        )
    return child, run, log


@pytest.mark.slow
@pytest.mark.parametrize("attempt", range(3))
def test_a_signal_at_any_moment_is_one_line_and_keeps_the_newest_checkpoint(
    reference, tmp_path, attempt
):
    started = {
        hook: _start(tmp_path, hook, n) for n, hook in enumerate(SCENARIOS)
    }  # all at once: the moments shift with the load, as they would for a user
    for hook, (child, run, log) in started.items():
        code, resumable, newest = SCENARIOS[hook]
        assert child.wait(timeout=300) == code, (hook, log.read_text()[-3000:])
        words = "interrupted" if code == 130 else "terminated (SIGTERM)"
        if hook.endswith("*2"):
            words = "interrupted twice, stopped at once"
        expected = f"stacklstm: {words}" + (RESUME.format(run=run) if resumable else "")
        assert log.read_text().splitlines() == [expected], hook
        if not resumable:
            assert not run.exists(), hook  # nothing was left behind
            continue
        assert max(_complete_steps(run)) == newest, hook
        assert load_run(run).checkpoint["step"] >= 0  # the newest complete one reads back
    if attempt == 0:  # and the interrupted run continues to the same numbers
        run = started["epoch=SIGTERM"][1]
        code, _, err = _main("train", "--out", run, "--resume", "--quiet")
        assert code == 0, err
        got, expected = _saved(run), reference[1]
        assert got["metrics"] == expected["metrics"] and got["report"] == expected["report"]


@pytest.mark.slow
def test_a_signal_during_a_search_is_the_one_line_of_the_command(tmp_path):
    children = {}
    for hook in ("epoch=SIGINT", "epoch=SIGTERM"):
        out = tmp_path / hook.replace("=", "-")
        children[hook] = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "stacklstm",
                "tune",
                "--trials",
                "2",
                "--out",
                str(out),
                *TRIAL_FLAGS,
            ],
            env=cache_env({**os.environ, "STACKLSTM_TEST_HOOK": hook}),
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
    for hook, child in children.items():
        _, stderr = child.communicate(timeout=600)
        code = 130 if hook.endswith("SIGINT") else 143
        words = "interrupted" if code == 130 else "terminated (SIGTERM)"
        assert (child.returncode, stderr.splitlines()) == (code, [f"stacklstm: {words}"]), hook


@pytest.mark.slow
@pytest.mark.serial  # a bound in seconds: not beside another worker's training
def test_sigterm_ends_a_train_in_its_statistical_baselines_at_once(tmp_path):
    pytest.importorskip("statsforecast")
    data = tmp_path / "long.csv"
    pd.DataFrame({"y": _long_series()}).to_csv(data, index=False)
    run = tmp_path / "run"
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "stacklstm",
            "train",
            "--data",
            str(data),
            "--target",
            "y",
            "--time-column",
            "none",
            "--out",
            str(run),
            "--window",
            "8",
            "--hidden-size",
            "4",
            "--num-layers",
            "1",
            "--linear-layer-sizes",
            "",
            "--epochs",
            "1",
            "--min-steps",
            "0",
            "--batch-size",
            "512",
            "--stride",
            "50",
            "--season",
            "52",
            "--no-deseasonalize",
            "--baselines",
            "all",
        ],
        env=cache_env({**os.environ, "PYTHONUNBUFFERED": "1"}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines = []
    try:
        for line in child.stderr:  # the report's statistical baselines begin
            lines.append(line)
            if line.startswith("statsforecast: fitting"):
                break
        assert child.poll() is None, "".join(lines)[-3000:]
        time.sleep(4.0)  # inside the first fit, on 85,001 rows
        child.send_signal(signal.SIGTERM)
        sent = time.monotonic()
        rest = child.communicate(timeout=60)[1]
        taken = time.monotonic() - sent
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 143, rest[-3000:]
    assert rest.splitlines()[-1].startswith("stacklstm: terminated (SIGTERM)"), rest[-3000:]
    assert taken < 2.0, f"SIGTERM took {taken:.1f} s"
