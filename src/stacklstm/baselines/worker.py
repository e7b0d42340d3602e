"""Worker processes for the statistical baselines' fits, and the jobs they run.

statsforecast fits in native code that may run for minutes on a long series without
returning to Python (and without releasing the GIL), and Python runs a signal handler only
between two of its own steps: in this process a SIGINT or SIGTERM would wait for the fit to
end. So the fits run in worker processes of their own, started on first use and kept for
the next calls, while this process only waits for their answers, and takes a signal at once:
it then kills the workers. A worker is in a session of its own (a Ctrl-C at the terminal
reaches this process only) and, on Linux, dies with this process. Independent jobs (one
model on one series from one fit) run on up to one worker per CPU at once (a CPU fewer
while the caller has work of its own, the model's training, until it waits for them). The
numbers are those of the same calls made here.

A job is ``(name, y, origins, horizon, season, n_fit)``: model ``name`` of
:func:`stacklstm.baselines.statistical_models` fitted on ``y[: origins[0] + 1]`` forecasts
``horizon`` steps from every origin (:func:`stacklstm.baselines.rolling.rolling_means`).
While it runs, its worker reports ``(stage, origins done)``; its answer is ``("ok",
(n, horizon) values)`` or ``("fail", reason)`` when statsforecast could not fit or forecast.
"""

from __future__ import annotations

import contextlib
import os
import pickle
import selectors
import signal
import struct
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: ``(job index, stage, origins done)``: a job's progress as its worker reports it; stage is
#: ``"fitting"``, ``"forecasting"``, ``"done"`` or ``"failed"``.
OnProgress = Callable[[int, str, int], None]

MAX_WORKERS = 4
_HEADER = struct.Struct("<Q")  # the byte length of the pickle that follows
_TICK_SECONDS = 0.2  # the least time between two progress messages of a job
_POOL: dict[int, subprocess.Popen] = {}
_POOL_LOCK = threading.Lock()
_COST = {"auto_arima": 10, "auto_ets": 2}  # a rough weight per row, for the jobs' order
_SERVE = "from stacklstm.baselines.worker import serve; serve()"
_WAITED_FOR = threading.Event()  # set while a caller waits for jobs run with spare CPUs


@contextlib.contextmanager
def waited_for() -> Iterator[None]:
    """While inside, jobs started with ``spare`` CPUs may use every CPU: their caller's
    other work is over and it waits for them (more workers start for the jobs left)."""
    _WAITED_FOR.set()
    try:
        yield
    finally:
        _WAITED_FOR.clear()


def worker_count(n_jobs: int, spare: int = 0) -> int:
    """Workers for ``n_jobs`` jobs: one per job, at most one per usable CPU (less ``spare``
    CPUs left to other work) and MAX_WORKERS; at least one."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        cpus = os.cpu_count() or 1
    return max(1, min(n_jobs, cpus - spare, MAX_WORKERS))


def run_jobs(
    jobs: Sequence[tuple], on_progress: OnProgress | None = None, spare: int = 0
) -> list[tuple]:
    """Every job's answer, in the order of ``jobs``, run on :func:`worker_count` workers
    (``spare`` CPUs left to other work, until a caller waits for them:
    :func:`waited_for`; the longest series first).

    Raises:
        RuntimeError: A worker ended unexpectedly (no half-read answer is kept).
    """
    answers: list[Any] = [None] * len(jobs)
    if not jobs:
        return answers
    waiting = sorted(range(len(jobs)), key=lambda k: -_COST.get(jobs[k][0], 1) * len(jobs[k][1]))
    with _POOL_LOCK:
        slots = list(range(worker_count(len(jobs), spare)))
        try:
            for slot in slots:
                if _POOL.get(slot) is None or _POOL[slot].poll() is not None:
                    _POOL[slot] = _start_worker()
            _dispatch(jobs, waiting, slots, answers, on_progress, spare)
        except BaseException as err:  # a signal (or a dead worker): the workers are killed
            dead = {slot: _POOL.pop(slot) for slot in slots if slot in _POOL}
            for worker in dead.values():
                with contextlib.suppress(OSError):
                    worker.kill()
                worker.wait()
            if isinstance(err, (OSError, EOFError, pickle.UnpicklingError)):
                codes = sorted({w.returncode for w in dead.values()}, key=str)
                raise RuntimeError(
                    f"a worker process of the statistical baselines ended unexpectedly "
                    f"(exit status {', '.join(map(str, codes))})"
                ) from err
            raise
    for answer in answers:
        if answer[0] == "error":
            raise answer[1]
    return answers


def _dispatch(
    jobs: Sequence[tuple],
    waiting: list[int],
    slots: list[int],
    answers: list[Any],
    on_progress: OnProgress | None,
    spare: int,
) -> None:
    """Hand the waiting jobs to the workers of ``slots`` as they become free; read every
    message until each job has its answer. With ``spare`` CPUs left to other work, more
    workers join (added to ``slots``) once a caller waits (:func:`waited_for`)."""
    running: dict[int, int] = {}  # slot -> job
    with selectors.DefaultSelector() as selector:
        for slot in slots:
            selector.register(_POOL[slot].stdout.fileno(), selectors.EVENT_READ, slot)

        def grow() -> None:
            while waiting and len(slots) < worker_count(len(jobs)):
                slot = max(slots) + 1
                if _POOL.get(slot) is None or _POOL[slot].poll() is not None:
                    _POOL[slot] = _start_worker()
                slots.append(slot)
                selector.register(_POOL[slot].stdout.fileno(), selectors.EVENT_READ, slot)
                start(slot)

        def start(slot: int) -> None:
            job = waiting.pop(0)
            data = memoryview(pickle.dumps(jobs[job], protocol=pickle.HIGHEST_PROTOCOL))
            fd = _POOL[slot].stdin.fileno()
            while data:  # the worker is idle, reading: a large job goes through in parts
                data = data[os.write(fd, data) :]
            running[slot] = job

        for slot in slots:
            if waiting:
                start(slot)
        while running:
            if spare and _WAITED_FOR.is_set():
                grow()
            for key, _ in selector.select(_TICK_SECONDS if spare else None):
                slot = key.data
                if slot not in running:  # an idle worker's pipe: only its end can be read
                    selector.unregister(key.fileobj)
                    continue
                message = _read_frame(key.fd)
                job = running[slot]
                if message[0] == "progress":
                    if on_progress is not None:
                        on_progress(job, *message[1:])
                    continue
                answers[job] = message
                del running[slot]
                if waiting:
                    start(slot)


def _read_frame(fd: int) -> Any:
    """One message of a worker: its length, then its pickle (read unbuffered, so that a
    message never waits in a buffer that the selector does not see)."""
    (size,) = _HEADER.unpack(_read_exactly(fd, _HEADER.size))
    return pickle.loads(_read_exactly(fd, size))


def _read_exactly(fd: int, size: int) -> bytes:
    parts, left = [], size
    while left:
        chunk = os.read(fd, left)
        if not chunk:
            raise EOFError("the worker's answers ended")
        parts.append(chunk)
        left -= len(chunk)
    return b"".join(parts)


def _start_worker() -> subprocess.Popen:
    root = str(Path(__file__).resolve().parents[2])  # where this package is imported from
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": root if not path else os.pathsep.join([root, path])}
    return subprocess.Popen(
        [sys.executable, "-c", _SERVE, str(os.getpid())],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
        bufsize=0,
    )


def serve() -> None:
    """The worker process: run each pickled job read on standard input, answering with
    length-prefixed pickles on standard output (progress messages, then the answer), until
    standard input closes."""
    _die_with_parent(int(sys.argv[1]))
    requests, answers = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything a library prints stays off the answers

    def send(message: tuple) -> None:
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        answers.write(_HEADER.pack(len(data)) + data)
        answers.flush()

    while True:
        try:
            job = pickle.load(requests)
        except EOFError:
            return
        try:
            answer = run_job(*job, send=send)
        except Exception as err:
            answer = ("error", err)
        send(answer)


def run_job(
    name: str,
    y: np.ndarray,
    origins: np.ndarray,
    horizon: int,
    season: int,
    n_fit: int,
    send: Callable[[tuple], None] = lambda message: None,
) -> tuple:
    """One job (see the module's docstring): ``("ok", (n, horizon) values)`` or ``("fail",
    reason)``; ``send`` gets its progress messages.

    The one-pass path of :mod:`stacklstm.baselines.rolling` gives the numbers of ``forward``
    at every origin; should it raise, ``forward`` runs at every origin instead, and its
    error is the job's failure.
    """
    from .registry import statistical_models
    from .rolling import forward_means, rolling_means

    clock = {"last": 0.0, "done": 0}

    def tick(done: int) -> None:
        clock["done"] += done
        now = time.monotonic()
        if now - clock["last"] >= _TICK_SECONDS:
            clock["last"] = now
            send(("progress", "forecasting", clock["done"]))

    send(("progress", "fitting", 0))
    with warnings.catch_warnings():  # convergence notes, one per search step
        warnings.simplefilter("ignore")
        try:
            model = statistical_models(season, n_fit)[name]
            model.fit(y=y[: int(origins[0]) + 1])
            try:
                values = rolling_means(name, model, y, origins, horizon, tick)
            except Exception:
                clock["done"] = 0
                values = forward_means(model, y, origins, horizon, tick)
        except Exception as err:  # statsforecast's errors share no base class of their own
            send(("progress", "failed", clock["done"]))
            return ("fail", str(err) or type(err).__name__)
    send(("progress", "done", origins.size))
    return ("ok", values)


def _die_with_parent(parent: int) -> None:
    """On Linux, have the kernel kill this process when ``parent`` ends."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it ended before that took effect
        os._exit(0)
