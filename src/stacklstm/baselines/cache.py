"""What the statistical baselines already computed in this process, and what they are
computing in the background.

A result (``{name: (n, horizon, n_targets) or None}``) is known by the key of its call
(:func:`key`: the values up to the last origin, the origins, the settings and statsforecast's
version). :func:`remember` keeps one (the newest, up to :data:`LIMIT_BYTES` in all: every
series of a large panel is one result); :func:`recall` gives a copy back. :func:`start`
computes parts in a background thread, so that the fits can run while the model trains; a
later call for the same parts waits for them (:func:`wait`) and sees their progress from
then on, instead of computing them again.

Example:
    >>> import numpy as np
    >>> k = key(np.zeros((5, 1)), np.array([3, 4]), 2, 4, 4)
    >>> remember(k, {"auto_ets": np.ones((2, 2, 1))})
    >>> recall(k)["auto_ets"].shape
    (2, 2, 1)
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import logging
import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import numpy as np

log = logging.getLogger(__name__)

Result = dict[str, np.ndarray | None]

#: How many bytes of results are kept (the oldest go first).
LIMIT_BYTES = 512 * 2**20
_LOCK = threading.Lock()
_RESULTS: dict[str, Result] = {}
_PENDING: dict[str, _Background] = {}  # key -> the background computation that will give it


@functools.cache
def _statsforecast_version() -> str:
    try:
        return importlib.metadata.version("statsforecast")
    except importlib.metadata.PackageNotFoundError:
        return "none"


def key(history: np.ndarray, origins: np.ndarray, *settings: Any) -> str:
    """The key of the forecasts of ``history`` (``(time, n_targets)``, up to the last
    origin) from ``origins`` with ``settings`` (and this statsforecast's version)."""
    history = np.ascontiguousarray(history, dtype=np.float64)
    digest = hashlib.sha256(history.tobytes())
    described = (history.shape, np.asarray(origins).tolist(), settings, _statsforecast_version())
    digest.update(repr(described).encode())
    return digest.hexdigest()


def remember(name: str, result: Result) -> None:
    """Keep ``result`` under key ``name`` (a copy; the oldest ones go while the results
    kept pass :data:`LIMIT_BYTES`)."""
    kept = _copy(result)
    with _LOCK:
        _RESULTS.pop(name, None)
        _RESULTS[name] = kept
        total = sum(_size(r) for r in _RESULTS.values())
        while total > LIMIT_BYTES and len(_RESULTS) > 1:
            total -= _size(_RESULTS.pop(next(iter(_RESULTS))))


def _size(result: Result) -> int:
    return sum(v.nbytes for v in result.values() if v is not None)


def recall(name: str) -> Result | None:
    """A copy of the result kept under ``name``, or None."""
    with _LOCK:
        result = _RESULTS.get(name)
    return None if result is None else _copy(result)


def clear() -> None:
    """Forget every kept result (a computation under way still finishes)."""
    with _LOCK:
        _RESULTS.clear()


def _copy(result: Result) -> Result:
    return {k: None if v is None else np.array(v, copy=True) for k, v in result.items()}


Progress = Callable[[str, int, int, str], None]


class _Background:
    """A computation in a background thread: its progress so far, relayed to whoever
    waits for it, and its end."""

    def __init__(self) -> None:
        self.future: Future = Future()
        self._states: dict[str, tuple[int, int, str]] = {}
        self._listener: Progress | None = None
        self._lock = threading.Lock()

    def progress(self, name: str, done: int, total: int, stage: str) -> None:
        with self._lock:
            self._states[name] = (done, total, stage)
            if self._listener is not None:
                self._listener(name, done, total, stage)

    def attach(self, listener: Progress | None) -> None:
        """Send the progress so far, and from now on, to ``listener``."""
        with self._lock:
            self._listener = listener
            if listener is not None:
                for name, state in self._states.items():
                    listener(name, *state)


def start(names: list[str], compute: Callable[[Progress], None]) -> bool:
    """Run ``compute(progress)`` in the background thread (after what it runs already); it
    is to :func:`remember` the results of the keys ``names``. Keys already known or under
    way are not started again.

    Returns:
        Whether a computation started (False: every key is known or under way).
    """
    with _LOCK:
        if all(n in _RESULTS or n in _PENDING for n in names):
            return False
        job = _Background()
        for n in names:
            _PENDING.setdefault(n, job)

    def run() -> None:
        try:
            compute(job.progress)
        except BaseException as err:  # a waiting call computes it again
            log.debug("the statistical baselines' background computation failed: %r", err)
        finally:
            with _LOCK:
                for n in [n for n, j in _PENDING.items() if j is job]:
                    del _PENDING[n]
            job.future.set_result(None)

    _background_queue().put(run)
    return True


_QUEUE: queue.SimpleQueue | None = None


def _background_queue() -> queue.SimpleQueue:
    """The queue of the one background thread, started on first use and kept for the
    process's life. One thread for all: the worker processes it starts are killed when the
    thread that started them ends (Linux's parent-death signal follows the thread), so it
    must outlive every use of them. A daemon, it does not hold the process at exit."""
    global _QUEUE
    with _LOCK:
        if _QUEUE is None:
            _QUEUE = queue.SimpleQueue()
            threading.Thread(
                target=_serve, args=(_QUEUE,), name="stacklstm-baselines", daemon=True
            ).start()
        return _QUEUE


def _serve(jobs: queue.SimpleQueue) -> None:
    while True:
        jobs.get()()


def wait(names: list[str], progress: Progress | None = None) -> bool:
    """Wait until no key of ``names`` is under way in the background, showing the progress
    of what it waits for with ``progress``.

    Returns:
        Whether it waited for anything.
    """
    with _LOCK:
        jobs = list({id(j): j for n, j in _PENDING.items() if n in names}.values())
    for job in jobs:
        job.attach(progress)
        try:
            job.future.result()
        finally:
            job.attach(None)
    return bool(jobs)
