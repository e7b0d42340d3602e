"""JAX's persistent compilation cache for the forecasting tool: a second run of the same
shapes (another ``stacklstm train``, ``predict``, or ``LSTMForecaster.fit`` in a new process)
loads its compiled steps from disk instead of compiling them again.

:func:`enable` is called by :func:`stacklstm.run.fit` and by the code that loads a run to
forecast from it; importing ``stacklstm`` (or using the layers alone) changes nothing. The
cache lives in ``$STACKLSTM_CACHE_DIR``, else ``$XDG_CACHE_HOME/stacklstm/jax``, else
``~/.cache/stacklstm/jax``. ``STACKLSTM_COMPILE_CACHE=0`` turns it off; a cache folder the
program set itself (``jax.config.update("jax_compilation_cache_dir", ...)`` or
``JAX_COMPILATION_CACHE_DIR``) is left as it is. The cache is JAX's own: its keys hold the
program, the jax and XLA versions and the device, so a stale entry is never loaded.

Example:
    >>> import os
    >>> from stacklstm import compile_cache
    >>> compile_cache.cache_dir({"STACKLSTM_CACHE_DIR": "/tmp/c"})
    PosixPath('/tmp/c')
    >>> compile_cache.cache_dir({"STACKLSTM_COMPILE_CACHE": "0"}) is None
    True
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

__all__ = ["cache_dir", "enable"]

#: Compilations shorter than this are not worth a file (JAX's default is 1 s; a train step
#: of the default model compiles in a few tenths of a second on 2 cores, many of them).
MIN_COMPILE_SECONDS = 0.1

_OFF = ("0", "false", "no", "off")


def cache_dir(environ: Mapping[str, str] | None = None) -> Path | None:
    """The folder of the compilation cache (None: turned off by ``STACKLSTM_COMPILE_CACHE``)."""
    env = os.environ if environ is None else environ
    if env.get("STACKLSTM_COMPILE_CACHE", "").strip().lower() in _OFF:
        return None
    if env.get("STACKLSTM_CACHE_DIR"):
        return Path(env["STACKLSTM_CACHE_DIR"])
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "stacklstm" / "jax"


def enable() -> Path | None:
    """Point JAX's persistent compilation cache at :func:`cache_dir` (once per process;
    nothing where it is off, or where the program chose a cache folder of its own). Returns
    the folder in use, or None."""
    import jax

    current = jax.config.jax_compilation_cache_dir
    if current:
        return Path(current)
    folder = cache_dir()
    if folder is None:
        return None
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:  # a read-only home: compile as before, and say why once
        log.info("compilation cache off: cannot create %s (%s)", folder, err.strerror or err)
        return None
    jax.config.update("jax_compilation_cache_dir", str(folder))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", MIN_COMPILE_SECONDS)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    return folder
