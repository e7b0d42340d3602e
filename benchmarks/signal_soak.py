"""Randomised soak of Ctrl-C and SIGTERM on ``stacklstm train`` (not part of the test suite).

    python benchmarks/signal_soak.py                     # 30 tries, both kernels
    python benchmarks/signal_soak.py --tries 200 --kernels xla --max-delay 12

Each try starts ``python -m stacklstm train`` on a small run, waits a random time (0 to
``--max-delay`` seconds: imports, compile, the first checkpoint, training, the report), sends
SIGINT or SIGTERM (once, or twice 50 ms apart), and checks what a user would see: exit status
130/143, exactly one line on stderr, "--resume" suggested only when the folder holds a
resumable run, and then that the newest checkpoint reads back (``stacklstm predict``). Prints
one line per try and a summary; the exit status is 1 if any try was not clean.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FLAGS = [
    "--window",
    "6",
    "--hidden-size",
    "8",
    "--num-layers",
    "2",
    "--epochs",
    "2",
    "--batch-size",
    "16",
    "--log-every",
    "5",
    "--checkpoint-every",
    "10",
    "--quiet",
]


def one_try(workdir: Path, kernel: str, delay: float, signum: int, count: int) -> str | None:
    """Run one try; returns None if it was clean, else what went wrong."""
    run = workdir / "run"
    shutil.rmtree(run, ignore_errors=True)
    env = {**os.environ, "STACKLSTM_KERNEL": kernel}
    cmd = [sys.executable, "-m", "stacklstm", "train", "--out", str(run), *FLAGS]
    child = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    time.sleep(delay)
    for _ in range(count):
        if child.poll() is None:
            child.send_signal(signum)
        time.sleep(0.05)
    _, err = child.communicate(timeout=600)
    lines = err.decode(errors="replace").splitlines()
    if child.returncode == 0:
        return None  # finished before the signal: nothing to check
    if child.returncode != 128 + signum:
        return f"exit status {child.returncode}: {lines[-5:]}"
    if len(lines) != 1:
        return f"{len(lines)} lines on stderr: {lines[:3]} ... {lines[-3:]}"
    suggested = "--resume" in lines[0]
    resumable = (run / "config.json").is_file() and any(
        p.name.isdigit() for p in (run / "checkpoints").glob("*")
    )
    if suggested != resumable:
        return f"--resume suggested: {suggested}, resumable: {resumable}: {lines[0]}"
    if resumable:
        check = subprocess.run(
            [
                sys.executable,
                "-m",
                "stacklstm",
                "predict",
                str(run),
                "--output",
                str(workdir / "p.csv"),
                "--quiet",
            ],
            env=env,
            capture_output=True,
            text=True,
        )
        if check.returncode != 0:
            return f"predict after the interruption failed: {check.stderr.strip()[-300:]}"
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tries", type=int, default=30)
    parser.add_argument("--kernels", default="xla,native", help="comma-separated")
    parser.add_argument("--max-delay", type=float, default=10.0, help="seconds")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    rng = random.Random(args.seed)
    kernels = args.kernels.split(",")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.tries):
            kernel = kernels[n % len(kernels)]
            delay = rng.uniform(0, args.max_delay)
            signum = rng.choice([signal.SIGINT, signal.SIGTERM])
            count = rng.choice([1, 1, 2])
            problem = one_try(Path(tmp), kernel, delay, signum, count)
            failures += problem is not None
            name = signal.Signals(signum).name
            print(
                f"{n + 1:4d} {kernel:6s} {name}x{count} at {delay:5.2f}s: "
                f"{'clean' if problem is None else problem}",
                flush=True,
            )
    print(f"{args.tries - failures}/{args.tries} clean")
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
