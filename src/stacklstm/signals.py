"""Ctrl-C and SIGTERM for the command line: one line and exit 130 or 143, never a crash.

:func:`handling_signals` (used by :func:`stacklstm.cli.main`) turns SIGINT and SIGTERM into
:class:`Interrupted` (a ``KeyboardInterrupt``), raised where the program is, so that
``finally`` blocks and the run folder's clean-up run. Inside :func:`deferred` (a checkpoint
being written or read through Orbax's event loop) a signal waits until the block ends, so
no write is torn by it and no asyncio traceback reaches the terminal. A second signal while
the first is being handled stops the process at once (``os._exit``) with one line: writes
in progress are left as temporary files, which are never read and are removed on resume.

Outside :func:`handling_signals` (the Python API) nothing changes: :func:`deferred` is then
a no-op.

For tests, ``STACKLSTM_TEST_HOOK=<point>=<SIGNAL>[*2][@<seconds>]`` makes the process send
itself SIGNAL (twice with ``*2``; after a delay, from a helper thread, with ``@``) when it
reaches ``point`` (see :func:`test_hook`).

Example:
    >>> with deferred():  # no handler installed: an ordinary block
    ...     1 + 1
    2
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
import types
import weakref
from collections.abc import Callable, Iterator

EXIT_CODES = {signal.SIGINT: 130, signal.SIGTERM: 143}


class Interrupted(KeyboardInterrupt):
    """SIGINT or SIGTERM arrived; ``signum`` says which (exit status ``128 + signum``)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signal.Signals(signum).name)
        self.signum = signum

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


class _State:
    installed = False
    depth = 0  # nesting of `deferred` blocks
    pending: int | None = None  # a signal held back by `deferred`
    raised = False  # the first signal has been raised: the next one stops at once
    unhandled: int | None = None  # raised, but maybe dropped by Python (see `check`)
    final_words: Callable[[int], str] = staticmethod(lambda signum: "interrupted")


#: Functions whose exceptions Python drops ("Exception ignored in ..."): a signal that
#: arrives in one is raised at the next :func:`check` instead. By name (XLA's collection
#: callback, destructors), and by code: ``weakref.finalize`` calling its callback, and the
#: callbacks by which a ``WeakKeyDictionary``, ``WeakValueDictionary`` or ``WeakSet`` drops
#: a dead entry; they run wherever the garbage collector does, during a JAX compile, say.
_SWALLOWING = frozenset({"_xla_gc_callback", "__del__"})
_SWALLOWING_CODES = frozenset(
    {weakref.finalize.__call__.__code__}
    | {
        code
        for cls in (weakref.WeakKeyDictionary, weakref.WeakValueDictionary, weakref.WeakSet)
        for code in cls.__init__.__code__.co_consts
        if isinstance(code, types.CodeType)
    }
)


def _handler(signum: int, frame: object) -> None:
    if _State.raised or _State.pending is not None:
        stop_now(signum, again=True)
    _State.unhandled = signum
    if _State.depth > 0:
        _State.pending = signum
        return
    _State.raised = True
    caller = frame
    while caller is not None:
        if caller.f_code.co_name in _SWALLOWING or caller.f_code in _SWALLOWING_CODES:
            return  # raised by the next `check`
        caller = caller.f_back
    raise Interrupted(signum)


def check() -> None:
    """Raise :class:`Interrupted` for a signal whose exception Python dropped (one that
    arrived inside a garbage-collection callback, say). Called between training steps."""
    if _State.unhandled is not None and _State.depth == 0:
        signum, _State.unhandled = _State.unhandled, None
        raise Interrupted(signum)


def stop_now(signum: int, *, again: bool = False) -> None:
    """Write the final line and leave at once, without Python's teardown (which may crash
    while XLA or Orbax threads are busy)."""
    words = _State.final_words(signum)
    if again:
        words = words.replace("interrupted", "interrupted twice, stopped at once", 1)
    with contextlib.suppress(Exception):
        sys.stdout.flush()
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    with contextlib.suppress(OSError):
        os.write(2, f"stacklstm: {words}\n".encode())
    os._exit(EXIT_CODES.get(signum, 128 + signum))


@contextlib.contextmanager
def handling_signals(final_words: Callable[[int], str]) -> Iterator[None]:
    """Within the block, SIGINT/SIGTERM raise :class:`Interrupted`; a second one calls
    :func:`stop_now`, whose line is ``"stacklstm: " + final_words(signum)``. Only in the main
    thread; elsewhere the block changes nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {sig: signal.getsignal(sig) for sig in EXIT_CODES}
    saved = (_State.installed, _State.depth, _State.pending, _State.raised, _State.final_words)
    _State.installed, _State.depth, _State.pending, _State.raised = True, 0, None, False
    _State.unhandled = None
    _State.final_words = final_words
    for sig in EXIT_CODES:
        signal.signal(sig, _handler)
    try:
        yield
    finally:
        for sig, handler in old.items():
            signal.signal(sig, handler)
        (_State.installed, _State.depth, _State.pending, _State.raised, _State.final_words) = saved
        _State.unhandled = None


@contextlib.contextmanager
def deferred() -> Iterator[None]:
    """Hold SIGINT/SIGTERM back until the block ends (then raise :class:`Interrupted`)."""
    if not _State.installed:
        yield
        return
    _State.depth += 1
    try:
        yield
    finally:
        _State.depth -= 1
        if _State.depth == 0 and _State.pending is not None:
            signum, _State.pending = _State.pending, None
            _State.raised, _State.unhandled = True, None
            raise Interrupted(signum)


def test_hook(point: str) -> None:
    """Send this process the signal ``STACKLSTM_TEST_HOOK`` names for ``point``, if any.

    Points: ``imports`` (the CLI's modules loaded), ``compile`` (the first training step is
    about to compile), ``checkpoint`` (inside the first checkpoint write after step 0's),
    ``epoch`` (mid-epoch, after step 30), ``evaluate`` (the report's evaluation begins).
    """
    spec = os.environ.get("STACKLSTM_TEST_HOOK", "")
    name, _, action = spec.partition("=")
    if name != point or not action:
        return
    action, _, delay = action.partition("@")
    action, _, times = action.partition("*")
    signum = getattr(signal, action)
    count = int(times or 1)

    def send() -> None:
        for _ in range(count):
            os.kill(os.getpid(), signum)

    if delay:
        threading.Timer(float(delay), send).start()
    else:
        send()
