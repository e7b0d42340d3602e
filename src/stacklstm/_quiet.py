"""Keep the dependencies' asynchronous noise off the command line's terminal.

When Orbax gives up on a checkpoint read (a damaged file, a checkpoint deleted meanwhile,
an interruption), TensorStore still completes the abandoned reads later, from its own
threads, into an asyncio event loop that Orbax has closed: each prints "Exception ignored
... RuntimeError: Event loop is closed" through :data:`sys.unraisablehook`, after the
command's own error line, or at exit. Those errors say nothing about the run (the
command has already reported what failed), so :func:`dropping_dependency_noise` drops them,
and asyncio's "Task exception was never retrieved" log records, and passes everything else
on unchanged.

Orbax also logs, through absl, about the metadata file of each checkpoint step it lists:
"Metadata file does not exist" for a step that a training run is still writing (or has
just deleted) while a reader (``evaluate``, ``predict``, ``export``, ``backtest --resume``)
lists the folder, and "Failed to read / json parse Metadata file" for a damaged one. Orbax
carries on without that file in every case, and whatever matters surfaces as the restore's
own error (a damaged step is then named by its checksum), so those records are dropped too;
every other Orbax record passes.
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


#: The starts of Orbax's log records about a step's metadata file that it goes on without.
_ORBAX_METADATA_NOISE = (
    "Metadata file does not exist",
    "Failed to read Metadata file",
    "Failed to json parse Metadata file",
)


class _OrbaxMetadataNoise(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        if "orbax" not in record.pathname:
            return True
        message = record.msg if isinstance(record.msg, str) else ""
        return not message.startswith(_ORBAX_METADATA_NOISE)


@contextlib.contextmanager
def dropping_dependency_noise(*, permanent: bool = False) -> Iterator[None]:
    """Within the block (for the rest of the process with ``permanent``), drop the
    dependencies' late asynchronous errors and Orbax's metadata-file records (see the
    module's doc); other unraisable errors and log records are shown as before."""
    previous = sys.unraisablehook

    def hook(unraisable: sys.UnraisableHookArgs) -> None:
        if not is_noise(unraisable.exc_value):
            previous(unraisable)

    noise, metadata = _AsyncioNoise(), _OrbaxMetadataNoise()
    asyncio_log, absl_log = logging.getLogger("asyncio"), logging.getLogger("absl")
    sys.unraisablehook = hook
    asyncio_log.addFilter(noise)
    absl_log.addFilter(metadata)
    try:
        yield
    finally:
        if not permanent:
            sys.unraisablehook = previous
            asyncio_log.removeFilter(noise)
            absl_log.removeFilter(metadata)
