"""The side-by-side benchmark: every peer in its own worker, repetitions interleaved round-robin.

For each workload the harness starts one worker process per peer (``python -m
stacklstm.bench.worker``, all with the same environment and thread settings), then for each
repetition and each measure asks the peers in turn (the order rotates every repetition) for a
few timed calls. Exactly one worker runs at a time; the others wait on stdin. Medians, ratios to
``stacklstm`` and the share of the GEMM roofline go into a markdown table; every raw sample,
the machine and the command line go into a JSON file next to it.

Example:
    >>> from stacklstm.bench.harness import main
    >>> argv = ["--workloads", "tiny", "--peers", "stacklstm,torch", "--repeats", "2"]
    >>> main(argv)  # doctest: +SKIP
    0
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import logging
import os
import select
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from .peers import DEFAULT_PEERS, PEERS
from .summary import BASELINE, REFERENCE, machine_info, render_markdown, summarize
from .workloads import WORKLOADS, Workload

log = logging.getLogger(__name__)

MEASURES: tuple[str, ...] = ("compile", "train", "forward", "stream", "gemm_xla", "gemm_torch")
"""Order of the measures inside one repetition (compile first: it clears JAX's caches)."""
"""The ``stacklstm`` peer of another version (``--baseline DIR``), run next to this one's."""


class WorkerError(RuntimeError):
    """A worker failed, died or timed out."""


class WorkerProcess:
    """A running ``stacklstm.bench.worker``; :meth:`request` sends a command and waits."""

    def __init__(self, env: dict[str, str], timeout: float) -> None:
        self.timeout = timeout
        # A file, not a pipe, so that a chatty worker never blocks; closed in close().
        self.stderr = tempfile.TemporaryFile()  # noqa: SIM115
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "stacklstm.bench.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self.stderr,
            env=env,
        )

    def _stderr_tail(self, chars: int = 2000) -> str:
        self.stderr.seek(0)
        return self.stderr.read().decode(errors="replace")[-chars:]

    def request(self, msg: dict[str, Any]) -> dict[str, Any]:
        """Sends one command and returns the reply; raises ``WorkerError`` on any failure."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        try:
            self.proc.stdin.write((json.dumps(msg) + "\n").encode())
            self.proc.stdin.flush()
        except BrokenPipeError as err:
            raise WorkerError(f"worker is gone: {self._stderr_tail()}") from err
        ready, _, _ = select.select([self.proc.stdout], [], [], self.timeout)
        if not ready:
            self.kill()
            raise WorkerError(f"no reply to {msg} within {self.timeout:.0f} s")
        line = self.proc.stdout.readline()
        if not line:
            code = self.proc.wait()
            raise WorkerError(f"worker exited with code {code}: {self._stderr_tail()}")
        reply = json.loads(line)
        if "error" in reply:
            raise WorkerError(f"{reply['error']}\n{reply.get('traceback', '')}")
        return reply

    def kill(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def close(self) -> None:
        """Asks the worker to quit; kills it if it does not."""
        try:
            if self.proc.poll() is None:
                self.request({"cmd": "quit"})
                self.proc.wait(timeout=30)
        except (WorkerError, subprocess.TimeoutExpired, OSError):
            self.kill()
        finally:
            for stream in (self.proc.stdin, self.proc.stdout):
                if stream is not None:
                    stream.close()
            self.stderr.close()


def worker_env(threads: int, package_dir: Path | None = None) -> dict[str, str]:
    """The environment of every worker: the same thread settings for all of them.

    Workers import this ``stacklstm``, or the one in ``package_dir`` (a directory holding a
    ``stacklstm`` package, e.g. another version installed with ``pip install --target``).
    """
    import stacklstm

    threads_text = str(threads)
    src = str(package_dir or Path(stacklstm.__file__).resolve().parents[1])
    env = dict(os.environ)
    env.update(
        STACKLSTM_BENCH_THREADS=threads_text,
        OMP_NUM_THREADS=threads_text,
        MKL_NUM_THREADS=threads_text,
        OPENBLAS_NUM_THREADS=threads_text,
        KERAS_BACKEND="jax",
        TF_CPP_MIN_LOG_LEVEL="2",
        PYTHONPATH=os.pathsep.join(p for p in (src, env.get("PYTHONPATH")) if p),
    )
    return env


def select_peers(workload: Workload, requested: list[str] | None) -> list[str]:
    """Peers to run on ``workload``: the requested ones it allows, or its (or the) default list."""
    if requested is None:
        return list(workload.peers or DEFAULT_PEERS)
    return [p for p in requested if workload.peers is None or p in workload.peers]


def run_workload(
    workload: Workload,
    peers: list[str],
    args: argparse.Namespace,
    env: dict[str, str],
    baseline_env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Runs every peer on one workload, interleaved; returns raw samples and statuses.

    A peer named :data:`BASELINE` is the ``stacklstm`` peer in a worker with ``baseline_env``.
    """
    result: dict[str, Any] = {}
    workers: dict[str, WorkerProcess] = {}

    def fail(peer: str, err: Exception) -> None:
        log.warning("%s on %s failed: %s", peer, workload.name, err)
        result[peer].update(status="failed", reason=str(err))
        worker = workers.pop(peer)
        worker.kill()
        worker.close()

    try:
        for peer in peers:  # started one after the other: setup compiles, which uses every core
            log.info("%s: starting %s", workload.name, peer)
            result[peer] = {"status": "ok", "samples": {}}
            baseline = peer == BASELINE
            workers[peer] = WorkerProcess(baseline_env if baseline else env, args.timeout)
            setup = {
                "cmd": "setup",
                "peer": REFERENCE if baseline else peer,
                "workload": workload.name,
                "seed": args.seed,
            }
            try:
                reply = workers[peer].request(setup)
            except WorkerError as err:
                fail(peer, err)
                continue
            if "skipped" in reply:
                log.warning("%s on %s skipped: %s", peer, workload.name, reply["skipped"])
                result[peer].update(status="skipped", reason=reply["skipped"])
                workers.pop(peer).close()
                continue
            measures = list(reply["measures"]) + (["compile"] if reply["compile"] else [])
            result[peer].update(measures=measures, notes=reply["notes"], info=reply["info"])
            for name, seconds in reply["first_calls"].items():
                result[peer]["samples"][name] = [seconds]
        for rep in range(args.repeats):
            log.info("%s: repetition %d/%d", workload.name, rep + 1, args.repeats)
            order = peers[rep % len(peers) :] + peers[: rep % len(peers)]
            for measure in MEASURES:
                for peer in order:
                    if peer not in workers or measure not in result[peer]["measures"]:
                        continue
                    n = 1 if measure == "compile" else args.iters
                    warmup = 0 if measure == "compile" else args.warmup
                    cmd = {"cmd": measure, "n": n, "warmup": warmup}
                    try:
                        times = workers[peer].request(cmd)["times"]
                    except WorkerError as err:
                        fail(peer, err)
                        continue
                    result[peer]["samples"].setdefault(measure, []).extend(times)
        for peer in list(workers):
            try:
                result[peer]["memory"] = workers[peer].request({"cmd": "memory"})
            except WorkerError as err:
                fail(peer, err)
    finally:
        for worker in workers.values():
            worker.close()
    return result


def _names(text: str, known: dict[str, Any], what: str) -> list[str]:
    names = [n.strip() for n in text.split(",") if n.strip()]
    unknown = [n for n in names if n not in known]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown {what} {unknown or text!r}; choose from {', '.join(known)}"
        )
    return names


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="benchmarks/run.py",
        description="Side-by-side LSTM benchmark (see benchmarks/README.md).",
    )
    parser.add_argument(
        "--workloads",
        type=lambda t: _names(t, WORKLOADS, "workload"),
        default=["S", "M", "L"],
        help=f"comma-separated, from {', '.join(WORKLOADS)} (default: S,M,L)",
    )
    parser.add_argument(
        "--peers",
        type=lambda t: _names(t, PEERS, "peer"),
        default=None,
        help=f"comma-separated, from {', '.join(PEERS)} (default: {','.join(DEFAULT_PEERS)}; "
        "R: stacklstm,stacklstm_remat,gemm)",
    )
    parser.add_argument("--repeats", type=int, default=5, help="round-robin repetitions")
    parser.add_argument("--iters", type=int, default=10, help="timed calls per repetition")
    parser.add_argument("--warmup", type=int, default=1, help="untimed calls before each batch")
    parser.add_argument(
        "--threads",
        type=int,
        default=os.cpu_count() or 1,
        help="cores every worker may use (affinity mask, torch threads, OMP/MKL); default all",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        metavar="DIR",
        help="a directory with another version's stacklstm package (pip install --no-deps "
        "--target DIR <checkout>): its stacklstm peer runs next to this one's, interleaved",
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per worker reply")
    parser.add_argument("--out", type=Path, default=Path("benchmarks/results"))
    args = parser.parse_args(argv)
    for name in ("repeats", "iters", "threads"):
        if getattr(args, name) < 1:
            parser.error(f"--{name} must be >= 1; got {getattr(args, name)}")
    if args.warmup < 0:
        parser.error(f"--warmup must be >= 0; got {args.warmup}")
    if args.baseline is not None and not (args.baseline / "stacklstm" / "__init__.py").is_file():
        parser.error(
            f"--baseline must be a directory holding a stacklstm package; got {args.baseline}"
        )
    return args


def main(argv: list[str] | None = None) -> int:
    """Runs the benchmark, writes ``bench-<time>.{md,json}`` to ``--out``, prints the table."""
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    args = parse_args(argv)
    argv_list = sys.argv[1:] if argv is None else list(argv)
    env = worker_env(args.threads)
    baseline_env = None if args.baseline is None else worker_env(args.threads, args.baseline)
    run: dict[str, Any] = {
        "command": " ".join(shlex.quote(a) for a in ["benchmarks/run.py", *argv_list]),
        "argv": argv_list,
        "machine": machine_info(),
        "settings": {
            "repeats": args.repeats,
            "iters": args.iters,
            "warmup": args.warmup,
            "seed": args.seed,
            "threads": args.threads,
            "xla_flags": env.get("XLA_FLAGS"),
            "baseline": None if args.baseline is None else str(args.baseline),
        },
        "workloads": {},
    }
    for name in args.workloads:
        w = WORKLOADS[name]
        peers = select_peers(w, args.peers)
        if baseline_env is not None and REFERENCE in peers:
            peers.insert(peers.index(REFERENCE) + 1, BASELINE)
        peers_result = run_workload(w, peers, args, env, baseline_env) if peers else {}
        run["workloads"][name] = {"spec": dataclasses.asdict(w), "peers": peers_result}
    summary = summarize(run)
    run["summary"] = summary
    report = render_markdown(run, summary)
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.datetime.now().strftime("%Y%m%d-%H%M%S")
    (args.out / f"bench-{stamp}.json").write_text(json.dumps(run, indent=1))
    (args.out / f"bench-{stamp}.md").write_text(report)
    sys.stdout.write(report)
    log.info("wrote %s", args.out / f"bench-{stamp}.{{md,json}}")
    return 0
