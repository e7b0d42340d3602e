"""Ctrl-C and SIGTERM in-process: a signal inside a deferred block waits for its end, and an
interrupted predict or evaluate never suggests resume. (The child processes signalled at
every moment of a train are tests/e2e/test_signals.py.)"""

import os
import signal
import sys
import weakref

import pytest

from helpers import _main
from stacklstm.signals import Interrupted, check, deferred, handling_signals


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
            monkeypatch.setattr("stacklstm.forecasting.inference.load_run", _interrupt)
        code, out, err = _main(*args)
        assert (code, out, err) == (130, "", "stacklstm: interrupted\n"), command


def _interrupt(*args, **kwargs):
    os.kill(os.getpid(), signal.SIGINT)


def test_a_signal_inside_a_weak_dictionarys_removal_waits_for_the_next_check(monkeypatch):
    # A WeakKeyDictionary drops a dead key in a weakref callback, whose exceptions Python
    # drops too ("Exception ignored in: <function WeakKeyDictionary.__init__.<locals>.remove>")
    dropped = []
    monkeypatch.setattr(sys, "unraisablehook", dropped.append)

    class Killing(dict):
        def __delitem__(self, key):  # called by the dictionary's removal callback
            super().__delitem__(key)
            os.kill(os.getpid(), signal.SIGTERM)

    class Key:
        pass

    with handling_signals(lambda signum: "interrupted"):
        table = weakref.WeakKeyDictionary()
        table.data = Killing()
        key = Key()
        table[key] = 1
        del key  # its removal runs here; the signal arrives inside it
        assert dropped == [] and len(table) == 0
        with pytest.raises(Interrupted) as info:
            check()
        assert info.value.signum == signal.SIGTERM


def test_a_signal_inside_a_finalizer_is_raised_at_the_next_check_not_dropped(monkeypatch):
    # A weakref.finalize callback runs wherever the collector does (inside a JAX compile,
    # say), and Python drops its exceptions with an "Exception ignored in" traceback: the
    # signal must wait for the next check instead, with nothing printed.
    dropped = []
    monkeypatch.setattr(sys, "unraisablehook", dropped.append)

    class Resource:
        pass

    with handling_signals(lambda signum: "interrupted"):
        resource = Resource()
        weakref.finalize(resource, os.kill, os.getpid(), signal.SIGTERM)
        del resource  # the finalizer runs here; the signal arrives inside it
        assert dropped == []
        with pytest.raises(Interrupted) as info:
            check()
        assert info.value.signum == signal.SIGTERM
        check()  # raised once
