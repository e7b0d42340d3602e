"""Ctrl-C and SIGTERM: one line, exit 130 or 143, the newest complete checkpoint kept.

The child-process tests run ``python -m stacklstm train`` with ``STACKLSTM_TEST_HOOK``, which
makes the child signal itself at a set moment (see :func:`stacklstm.signals.test_hook`)."""

import os
import signal
import subprocess
import sys

import pytest

from helpers import CRASH_FLAGS, _complete_steps, _main, _saved, cache_env
from stacklstm.signals import Interrupted, deferred, handling_signals
from stacklstm.train import load_run

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


def test_a_signal_inside_deferred_waits_for_the_end_of_the_block():
    seen = []
    with handling_signals(lambda signum: "interrupted"):
        with pytest.raises(Interrupted) as info, deferred():
            os.kill(os.getpid(), signal.SIGTERM)
            seen.append("the block ran to its end")
        assert info.value.signum == signal.SIGTERM and info.value.exit_code == 143
        assert isinstance(info.value, KeyboardInterrupt)
    assert seen == ["the block ran to its end"]
    assert signal.getsignal(signal.SIGTERM) == signal.SIG_DFL  # restored
    with deferred():  # outside handling_signals: nothing held back, nothing changed
        pass


def test_interrupted_predict_and_evaluate_never_suggest_resume(trained_run, monkeypatch):
    monkeypatch.setenv("STACKLSTM_TEST_HOOK", "evaluate=SIGINT")
    for command in ("evaluate", "predict"):
        args = [command, trained_run.out_dir, "--quiet"]
        if command == "predict":
            monkeypatch.setattr("stacklstm.train.inference.load_run", _interrupt)
        code, out, err = _main(*args)
        assert (code, out, err) == (130, "", "stacklstm: interrupted\n"), command


def _interrupt(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)


def _start(tmp_path, hook, n):
    run, log = tmp_path / f"run{n}", tmp_path / f"child{n}.log"
    env = {**cache_env(), "STACKLSTM_TEST_HOOK": hook}
    with log.open("w") as stderr:
        child = subprocess.Popen(
            [sys.executable, "-m", "stacklstm", "train", "--out", str(run), "--quiet",
             *CRASH_FLAGS],
            env=env, stdout=subprocess.DEVNULL, stderr=stderr, cwd=tmp_path,
        )  # fmt: skip
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
