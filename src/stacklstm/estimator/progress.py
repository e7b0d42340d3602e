"""``LSTMForecaster(verbose=True)``: the run's log lines on stderr, as the command line shows
them (one line per epoch; tqdm's bar as well where stderr is a terminal or a notebook)."""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator

__all__ = ["progress_logs"]


@contextlib.contextmanager
def progress_logs(verbose: bool) -> Iterator[None]:
    """Within the block, the ``stacklstm`` logger's info lines go to stderr (where the
    program has not given it a handler of its own); nothing without ``verbose``."""
    logger = logging.getLogger("stacklstm")
    if not verbose or logger.handlers:
        yield
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter("stacklstm: %(message)s"))
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    try:
        yield
    finally:
        logger.removeHandler(handler)
        logger.setLevel(level)
