"""How long `stacklstm train` with no arguments takes, and the statistical baselines' share.

The default run (`stacklstm train`, every baseline) and the same run with `--baselines naive`
(the model's training and report alone) are timed alternately, `--repeats` times each, each
in a fresh run folder, as a newcomer would run them. The baselines' share is what they add to
the median wall time: ``(default - naive) / default``. The load average before each run is
printed beside it, since a shared 2-core machine changes every figure.

    python benchmarks/default_run.py --repeats 3

Output: one line per run, then the medians, as a markdown table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

CASES = {"default": [], "--baselines naive": ["--baselines", "naive"]}


def time_run(extra: list[str], folder: Path) -> float:
    """Wall seconds of one `stacklstm train --out folder [extra]` (which must succeed)."""
    command = [sys.executable, "-m", "stacklstm", "train", "--out", str(folder), *extra]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each case (default 3)")
    args = parser.parse_args()
    walls: dict[str, list[float]] = {case: [] for case in CASES}
    with tempfile.TemporaryDirectory() as scratch:
        for k in range(args.repeats):
            for case, extra in CASES.items():
                folder = Path(scratch) / f"run-{k}-{len(walls[case])}-{case.strip('-')}"
                load = os.getloadavg()[0]
                wall = time_run(extra, folder)
                walls[case].append(wall)
                print(f"{case:<18} run {k + 1}: {wall:6.1f} s  (load before: {load:.2f})")
                shutil.rmtree(folder, ignore_errors=True)
    default, naive = (statistics.median(walls[case]) for case in CASES)
    print("\n| run | median wall (s) | runs |\n|---|---|---|")
    for case in CASES:
        runs = ", ".join(f"{w:.1f}" for w in walls[case])
        print(f"| `stacklstm train {'' if case == 'default' else case}` | "
              f"{statistics.median(walls[case]):.1f} | {runs} |")  # fmt: skip
    print(
        f"\nthe statistical baselines' share of the default run: {(default - naive) / default:.0%}"
    )


if __name__ == "__main__":
    main()
