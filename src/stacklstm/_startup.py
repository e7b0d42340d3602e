"""Ctrl-C while ``stacklstm`` is still importing jax: one line and exit 130/143, no traceback.

Only when this process is the ``stacklstm`` command (``stacklstm ...`` or ``python -m
stacklstm ...``); importing the library anywhere else changes nothing. Once
:func:`stacklstm.cli.main` runs, its own handlers (:mod:`stacklstm.signals`) take over.
"""

from __future__ import annotations

import os
import signal
import sys
import threading


def _is_command_line() -> bool:
    argv = list(getattr(sys, "orig_argv", ()))
    if "-m" in argv[:-1] and argv[argv.index("-m") + 1] == "stacklstm":
        return True
    return bool(sys.argv) and os.path.basename(sys.argv[0]) == "stacklstm"


def _leave(signum: int, frame: object) -> None:
    words = "interrupted" if signum == signal.SIGINT else "terminated (SIGTERM)"
    os.write(2, f"stacklstm: {words}\n".encode())
    os._exit(128 + signum)


def guard_imports() -> None:
    """Until the command line starts, SIGINT/SIGTERM end the process with one line."""
    if threading.current_thread() is not threading.main_thread() or not _is_command_line():
        return
    for signum in (signal.SIGINT, signal.SIGTERM):
        if signal.getsignal(signum) in (signal.default_int_handler, signal.SIG_DFL):
            signal.signal(signum, _leave)


guard_imports()
