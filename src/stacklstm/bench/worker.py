"""One benchmark peer in its own long-lived process, driven over stdin/stdout.

Run as ``python -m stacklstm.bench.worker``. It reads one JSON command per line on stdin and
answers one JSON line on stdout; it does nothing between commands (it waits on stdin), so the
harness can keep one worker per peer alive and run exactly one at a time.

Commands and replies:
    ``{"cmd": "setup", "peer": "torch", "workload": "S", "seed": 0}``
        -> ``{"ok": true, "measures": [...], "compile": bool, "first_calls": {...}, "notes": str,
        "info": {...}}`` (``first_calls``: seconds of the first call of each measure), or
        ``{"skipped": reason}`` when the peer cannot run here.
    ``{"cmd": "train", "n": 5, "warmup": 1}`` (any name in ``measures``)
        -> ``{"times": [seconds, ...]}``: ``warmup`` untimed calls, then ``n`` timed ones.
    ``{"cmd": "compile", "n": 1}`` -> ``{"times": [...]}``: ``.lower(...).compile()`` seconds.
    ``{"cmd": "memory"}`` -> ``{"rss_peak_growth_bytes": int, "device_peak_bytes": int|None}``.
    ``{"cmd": "quit"}`` -> ``{"ok": true}``, then exit.
Any failure is answered with ``{"error": str, "traceback": str}``; the worker keeps serving.

Library output that would go to stdout is sent to stderr, so stdout carries only the protocol.
"""

from __future__ import annotations

import gc
import json
import os
import resource
import sys
import time
import traceback
from collections.abc import Callable
from typing import Any, TextIO

from .peers import PEERS, Built, PeerUnavailable, bench_threads
from .workloads import WORKLOADS


def _max_rss_bytes() -> int:
    """Peak resident set size of this process so far (``ru_maxrss`` is KiB on Linux)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def time_calls(fn: Callable[[], None], n: int, warmup: int) -> list[float]:
    """``warmup`` untimed calls, then the seconds of each of ``n`` calls (GC paused, as timeit)."""
    for _ in range(warmup):
        fn()
    gc.collect()
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        times = []
        for _ in range(n):
            t0 = time.perf_counter()
            fn()
            times.append(time.perf_counter() - t0)
    finally:
        if gc_was_enabled:
            gc.enable()
    return times


class Worker:
    """Holds one built peer and answers commands (see the module docstring)."""

    def __init__(self) -> None:
        self.built: Built | None = None
        self.baseline_rss = _max_rss_bytes()

    def handle(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Answers one command."""
        cmd = msg.get("cmd")
        if cmd == "setup":
            return self._setup(msg["peer"], msg["workload"], int(msg.get("seed", 0)))
        if cmd == "quit":
            return {"ok": True}
        if cmd == "memory":
            return self._memory()
        if self.built is None:
            raise RuntimeError(f"command {cmd!r} before a successful setup")
        n, warmup = int(msg.get("n", 1)), int(msg.get("warmup", 0))
        if cmd == "compile":
            if self.built.compile is None:
                raise ValueError("this peer has no compile step to time")
            return {"times": [self.built.compile() for _ in range(n)]}
        if cmd in self.built.measures:
            return {"times": time_calls(self.built.measures[cmd], n, warmup)}
        raise ValueError(
            f"unknown command {cmd!r}; expected setup, quit, memory, compile or one of "
            f"{sorted(self.built.measures)}"
        )

    def _setup(self, peer: str, workload: str, seed: int) -> dict[str, Any]:
        if peer not in PEERS:
            raise ValueError(f"unknown peer {peer!r}; expected one of {sorted(PEERS)}")
        if workload not in WORKLOADS:
            raise ValueError(f"unknown workload {workload!r}; expected one of {sorted(WORKLOADS)}")
        spec = PEERS[peer]
        try:
            info = spec.prepare()
        except (ImportError, PeerUnavailable) as err:
            return {"skipped": f"{type(err).__name__}: {err}"}
        self.baseline_rss = _max_rss_bytes()  # post-import baseline: the model's memory on top
        try:
            self.built = spec.build(WORKLOADS[workload], seed)
        except (ImportError, PeerUnavailable) as err:
            return {"skipped": f"{type(err).__name__}: {err}"}
        # The first call of each measure: what a user waits for (trace + compile + one run for
        # JAX and Keras); it also leaves every later timed call warm.
        measures = self.built.measures
        first_calls = {f"first_{m}_call": time_calls(fn, 1, 0)[0] for m, fn in measures.items()}
        return {
            "ok": True,
            "measures": sorted(self.built.measures),
            "compile": self.built.compile is not None,
            "first_calls": first_calls,
            "notes": self.built.notes,
            "info": info,
        }

    def _memory(self) -> dict[str, Any]:
        device_peak = None
        if "jax" in sys.modules:
            import jax

            stats = jax.devices()[0].memory_stats()  # None on CPU
            if stats:
                device_peak = stats.get("peak_bytes_in_use")
        return {
            "rss_peak_growth_bytes": _max_rss_bytes() - self.baseline_rss,
            "device_peak_bytes": device_peak,
        }


def serve(stdin: TextIO, out: TextIO) -> None:
    """The command loop: one JSON line in, one JSON line out, until ``quit`` or end of input."""
    worker = Worker()
    while True:
        line = stdin.readline()
        if not line:
            return
        try:
            msg = json.loads(line)
            reply = worker.handle(msg)
        except Exception as err:  # reported to the harness, which decides; the worker lives on
            msg = {}
            reply = {"error": f"{type(err).__name__}: {err}", "traceback": traceback.format_exc()}
        out.write(json.dumps(reply) + "\n")
        out.flush()
        if msg.get("cmd") == "quit":
            return


def pin_threads() -> None:
    """Restricts this process to ``bench_threads()`` cores, before any backend starts.

    XLA sizes its CPU thread pool by the cores it may run on, so the affinity mask is the one
    thread setting that JAX, torch and Keras all obey; torch is also given the same count.
    """
    threads = bench_threads()
    if hasattr(os, "sched_setaffinity"):
        cores = sorted(os.sched_getaffinity(0))
        if threads < len(cores):
            os.sched_setaffinity(0, cores[:threads])


def main() -> None:
    """Entry point of ``python -m stacklstm.bench.worker``."""
    pin_threads()
    protocol = os.fdopen(os.dup(sys.stdout.fileno()), "w", buffering=1)
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # stray prints (C or Python) -> stderr
    sys.stdout = sys.stderr
    serve(sys.stdin, protocol)


if __name__ == "__main__":
    main()
