"""The dependencies' late asynchronous errors never reach the command line's terminal."""

import sys
import types

from stacklstm._quiet import dropping_dependency_noise


def _unraisable(exc):
    return types.SimpleNamespace(
        exc_type=type(exc), exc_value=exc, exc_traceback=None, err_msg=None, object=None
    )


def test_only_the_dependencies_noise_is_dropped(monkeypatch):
    shown = []
    monkeypatch.setattr(sys, "unraisablehook", shown.append)
    closed, other = RuntimeError("Event loop is closed"), ValueError("a real problem")
    with dropping_dependency_noise():
        sys.unraisablehook(_unraisable(closed))
        sys.unraisablehook(_unraisable(other))
    assert [u.exc_value for u in shown] == [other]
    sys.unraisablehook(_unraisable(closed))  # after the block: shown again
    assert [u.exc_value for u in shown] == [other, closed]
