"""Keep the dependencies' asynchronous noise off the command line's terminal.

When Orbax gives up on a checkpoint read (a damaged file, a checkpoint deleted meanwhile,
an interruption), TensorStore still completes the abandoned reads later, from its own
threads, into an asyncio event loop that Orbax has closed: each prints "Exception ignored
... RuntimeError: Event loop is closed" through :data:`sys.unraisablehook`, after the
command's own error line, or at exit. Those errors say nothing about the run (the
command has already reported what failed), so :func:`dropping_dependency_noise` drops them,
and asyncio's "Task exception was never retrieved" log records, and passes everything else
on unchanged.
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from types import TracebackType

_NOISY_MODULES = ("asyncio", "orbax", "tensorstore", "concurrent/futures", "concurrent\\futures")


def _from_dependencies(tb: TracebackType | None) -> bool:
    while tb is not None:
        filename = tb.tb_frame.f_code.co_filename
        if any(name in filename for name in _NOISY_MODULES):
            return True
        tb = tb.tb_next
    return False


def is_noise(exc: BaseException | None) -> bool:
    """Whether an unraisable exception is the dependencies' late noise (see module doc)."""
    if exc is None:
        return False
    if isinstance(exc, RuntimeError) and "Event loop is closed" in str(exc):
        return True
    return _from_dependencies(exc.__traceback__)


class _AsyncioNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        message = record.getMessage()
        return not (
            "never retrieved" in message or "Event loop is closed" in message or is_noise(exc)
        )


@contextlib.contextmanager
def dropping_dependency_noise(*, permanent: bool = False) -> Iterator[None]:
    """Within the block (for the rest of the process with ``permanent``), drop the
    dependencies' late asynchronous errors; other unraisable errors are shown as before."""
    previous = sys.unraisablehook

    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        if not is_noise(unraisable.exc_value):
            previous(unraisable)

    noise = _AsyncioNoise()
    asyncio_log = logging.getLogger("asyncio")
    sys.unraisablehook = hook
    asyncio_log.addFilter(noise)
    try:
        yield
    finally:
        if not permanent:
            sys.unraisablehook = previous
            asyncio_log.removeFilter(noise)
