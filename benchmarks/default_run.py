"""How long `stacklstm train` with no arguments takes, and the statistical baselines' share.

The default run (`stacklstm train`, every baseline) and the same run with `--baselines naive`
(the model's training and report alone) are timed alternately, `--repeats` times each, each
in a fresh run folder, as a newcomer would run them. The baselines' share is what they add to
the median wall time: ``(default - naive) / default``. The load average before each run is
printed beside it, since a shared 2-core machine changes every figure.

    python benchmarks/default_run.py --repeats 3

Before and after a change, in one run: ``--baseline SRC`` names the ``src`` folder of an older
checkout (``git worktree add /tmp/before <commit>``, its compiled kernel copied in from this
install); each case then runs with it too, alternated, as ``CASE@baseline``.

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


#: Runs the command line of the package in the folder ``sys.argv[1]`` (an older checkout's
#: ``src``), ahead of this environment's (an editable install's import hook included).
BASELINE = """import sys
src = sys.argv.pop(1)
sys.meta_path = [f for f in sys.meta_path if "editable" not in type(f).__module__.lower()]
sys.path.insert(0, src)
from stacklstm.cli import main
sys.exit(main())
"""


def time_run(extra: list[str], folder: Path, baseline: str | None = None) -> float:
    """Wall seconds of one `stacklstm train --out folder [extra]` (which must succeed), of
    this install or of the checkout whose ``src`` is ``baseline``."""
    start = ["-m", "stacklstm"] if baseline is None else ["-c", BASELINE, baseline]
    command = [sys.executable, *start, "train", "--out", str(folder), *extra]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(command)} failed:\n{done.stderr[-2000:]}")
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="runs of each case (default 3)")
    parser.add_argument("--baseline", help="the src folder of an older checkout, run alongside")
    parser.add_argument("--cases", default=",".join(CASES), help="default,--baselines naive")
    args = parser.parse_args()
    versions = [None] if args.baseline is None else [None, args.baseline]
    cases = [c for c in args.cases.split(",") if c]
    walls: dict[str, list[float]] = {}
    from stacklstm.bench.summary import machine_line

    print(f"Machine: {machine_line()}")
    with tempfile.TemporaryDirectory() as scratch:
        for k in range(args.repeats):
            for case in cases:
                for version in versions:
                    name = case if version is None else f"{case}@baseline"
                    folder = Path(scratch) / f"run-{k}-{len(walls.get(name, []))}-{abs(hash(name))}"
                    load = os.getloadavg()[0]
                    wall = time_run(CASES[case], folder, version)
                    walls.setdefault(name, []).append(wall)
                    print(f"{name:<27} run {k + 1}: {wall:6.1f} s  (load before: {load:.2f})")
                    shutil.rmtree(folder, ignore_errors=True)
    print("\n| run | median wall (s) | runs |\n|---|---|---|")
    for name, values in walls.items():
        runs = ", ".join(f"{w:.1f}" for w in values)
        print(
            f"| `stacklstm train {'' if name.startswith('default') else name}` "
            f"{'' if '@' not in name else '(baseline)'}| {statistics.median(values):.1f} | "
            f"{runs} |"
        )
    if {"default", "--baselines naive"} <= walls.keys():
        default, naive = (statistics.median(walls[c]) for c in ("default", "--baselines naive"))
        print(
            f"\nthe statistical baselines' share of the default run: "
            f"{(default - naive) / default:.0%}"
        )


if __name__ == "__main__":
    main()
