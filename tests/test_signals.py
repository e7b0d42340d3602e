"""Ctrl-C and SIGTERM in-process: a signal inside a deferred block waits for its end, and an
interrupted predict or evaluate never suggests resume. (The child processes signalled at
every moment of a train are tests/e2e/test_signals.py.)"""

import os
import signal

import pytest

from helpers import _main
from stacklstm.signals import Interrupted, deferred, handling_signals


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
