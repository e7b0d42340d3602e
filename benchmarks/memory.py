"""Memory benchmark: peak RSS and wall time of ``stacklstm train`` (one epoch, with its
report) and of ``stacklstm predict`` (every origin), each in a fresh process.

Cases (window 32 unless named; one target, a random walk with a weekly wave):

    rows-10k, rows-100k, rows-1m    10k, 100k, 1M rows of one series
    window-256, window-1024         100k rows, windows of 256 and 1024 steps
    panel-2m                        10,000 series x 200 daily steps (2M rows), 3 features,
                                    ``--id-column``; series scaled and split one by one

The table is written first (not measured); then each phase runs as
``python -m stacklstm train|predict ...`` in a child process, and the peak resident set size
is that child's own ``ru_maxrss`` (from ``os.wait4``). ``import-only`` is the floor: a
process that imports stacklstm's training loop and JAX and does nothing; ``one batch, no
data`` is a process that trains the same model for 3 steps on one random batch of the case's
window and forecasts it, with no table at all: what the model itself costs per batch.

Run: python benchmarks/memory.py [--cases rows-10k,window-1024] [--out DIR] [--python PY]
(``--python``: the interpreter of another checkout, to measure it with the same cases.)
Prints a markdown table and writes ``DIR/memory-<date>-<time>.json``.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd

CASES: dict[str, dict] = {
    "rows-10k": {"rows": 10_000, "window": 32},
    "rows-100k": {"rows": 100_000, "window": 32},
    "rows-1m": {"rows": 1_000_000, "window": 32},
    "window-256": {"rows": 100_000, "window": 256},
    "window-1024": {"rows": 100_000, "window": 1024},
    "panel-2m": {"series": 10_000, "steps": 200, "features": 3, "window": 32},
}

#: The model and training settings of every case: one epoch of a small model.
TRAIN_FLAGS = [
    "--horizon",
    "1",
    "--epochs",
    "1",
    "--patience",
    "0",
    "--batch-size",
    "256",
    "--hidden-size",
    "32",
    "--num-layers",
    "1",
    "--linear-layer-sizes",
    "16",
    "--baselines",
    "naive",
    "--log-every",
    "200",
    "--checkpoint-every",
    "0",
    "--quiet",
]


def write_table(case: dict, path: Path) -> list[str]:
    """Write the case's CSV; returns its data flags for ``train``."""
    rng = np.random.default_rng(0)
    if "series" in case:
        n, steps, k = case["series"], case["steps"], case["features"]
        t = np.tile(np.arange(steps), n)
        level = np.repeat(rng.uniform(10, 1000, n), steps)
        walk = rng.normal(size=(n, steps)).cumsum(axis=1).ravel()
        frame = pd.DataFrame(
            {
                "id": np.repeat([f"s{i:05d}" for i in range(n)], steps),
                "day": np.tile(
                    pd.date_range("2020-01-01", periods=steps, freq="D").strftime("%Y-%m-%d"), n
                ),
                "y": level + walk + 5 * np.sin(2 * np.pi * t / 7),
            }
        )
        features = [f"f{j}" for j in range(k)]
        for name in features:
            frame[name] = rng.normal(size=len(frame))
        frame.to_csv(path, index=False)
        return [
            "--id-column",
            "id",
            "--time-column",
            "day",
            "--target",
            "y",
            "--features",
            ",".join(features),
            "--season",
            "7",
        ]
    n = case["rows"]
    t = np.arange(n)
    y = 100 + rng.normal(size=n).cumsum() + 5 * np.sin(2 * np.pi * t / 7)
    pd.DataFrame({"y": y}).to_csv(path, index=False)
    return ["--time-column", "none", "--target", "y", "--season", "7"]


def run_child(python: str, argv: list[str], log: Path) -> dict:
    """Run ``python -m stacklstm ARGV`` alone; its wall time, own peak RSS (``wait4``'s
    ``ru_maxrss``) and exit status; stderr goes to ``log``."""
    start = time.perf_counter()
    with log.open("w") as err:
        child = subprocess.Popen(
            [python, "-m", "stacklstm", *argv], stdout=subprocess.DEVNULL, stderr=err
        )
        _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)
    return {
        "wall_s": round(time.perf_counter() - start, 1),
        "peak_rss_mb": round(usage.ru_maxrss * 1024 / 1e6),  # ru_maxrss is in KiB on Linux
        "returncode": child.returncode,
        "stderr_tail": log.read_text()[-400:],
    }


def import_floor(python: str) -> dict:
    code = (
        "import resource, jax, stacklstm.run.loop; jax.numpy.zeros(1).block_until_ready(); "
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)"
    )
    done = subprocess.run([python, "-c", code], capture_output=True, text=True, check=True)
    return {"peak_rss_mb": round(int(done.stdout.split()[-1]) * 1024 / 1e6)}


#: A child that trains 3 steps of the same model on one random batch, then forecasts it:
#: the peak RSS of the model's own work on one batch, with no data path at all.
_ONE_BATCH = """
import resource, sys
import jax, numpy as np
from stacklstm.config import ModelConfig, TrainConfig
from stacklstm.train.step import Batch, init_state, make_optimizer, make_predict_step
from stacklstm.train.step import make_train_step
window, columns, batch = map(int, sys.argv[1:4])
from stacklstm.forecaster import build_model
model_cfg = ModelConfig(lstm_hidden_size=32, num_lstm_layers=1, linear_layer_sizes=(16,))
model = build_model(model_cfg, 1)
cfg = TrainConfig(batch_size=batch, epochs=1, baselines="naive")
optimizer = make_optimizer(cfg, 10)
x = np.random.default_rng(0).normal(size=(batch, window, columns)).astype(np.float32)
state = init_state(model, optimizer, jax.random.key(0), x[:1, :1])
step = make_train_step(model, optimizer, cfg)
data = Batch(x, np.zeros((batch, 1, 1), np.float32), np.ones(batch, np.float32))
for _ in range(3):
    state, metrics = step(state, data, jax.random.key(1))
jax.block_until_ready(make_predict_step(model)(state.params, x))
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def one_batch(python: str, window: int, columns: int, batch: int = 256) -> dict:
    """Peak RSS of the model training and forecasting one batch, without any data path."""
    argv = [python, "-c", _ONE_BATCH, str(window), str(columns), str(batch)]
    done = subprocess.run(argv, capture_output=True, text=True, check=True)
    return {"peak_rss_mb": round(int(done.stdout.split()[-1]) * 1024 / 1e6)}


def measure(name: str, python: str, folder: Path) -> dict:
    case = CASES[name]
    data, run = folder / f"{name}.csv", folder / f"run-{name}"
    flags = write_table(case, data)
    window = ["--window", str(case["window"])]
    train = run_child(
        python,
        ["train", "--data", str(data), "--out", str(run), *flags, *window, *TRAIN_FLAGS],
        folder / f"{name}.train.log",
    )
    columns = 1 + case.get("features", 0)
    out = {
        "case": name,
        **case,
        "one_batch": one_batch(python, case["window"], columns),
        "train": train,
    }
    if train["returncode"] == 0:
        out["predict"] = run_child(
            python,
            ["predict", str(run), "--output", str(folder / f"{name}.pred.csv"), "--quiet"],
            folder / f"{name}.predict.log",
        )
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cases", default=",".join(CASES), help="comma-separated case names")
    parser.add_argument("--out", default="benchmarks/results", help="folder of the JSON file")
    parser.add_argument("--python", default=sys.executable, help="interpreter to measure")
    args = parser.parse_args(argv)
    names = [c.strip() for c in args.cases.split(",") if c.strip()]
    unknown = sorted(set(names) - set(CASES))
    if unknown:
        parser.error(f"unknown cases {unknown}; choose from {', '.join(CASES)}")
    results = {"import-only": import_floor(args.python)}
    with tempfile.TemporaryDirectory(prefix="stacklstm-memory-") as tmp:
        for name in names:
            results[name] = measure(name, args.python, Path(tmp))
            print(json.dumps(results[name]), file=sys.stderr)
    lines = [
        "| case | train: wall (s) | train: peak RSS (MB) | predict: wall (s) | "
        "predict: peak RSS (MB) | one batch, no data (MB) |",
        "|---|---|---|---|---|---|",
    ]
    lines.append(f"| import only | | {results['import-only']['peak_rss_mb']} | | | |")
    for name in names:
        r = results[name]
        p = r.get("predict", {})
        failed = "" if r["train"]["returncode"] == 0 else " (failed)"
        lines.append(
            f"| {name}{failed} | {r['train']['wall_s']} | {r['train']['peak_rss_mb']} | "
            f"{p.get('wall_s', '')} | {p.get('peak_rss_mb', '')} | "
            f"{r['one_batch']['peak_rss_mb']} |"
        )
    table = "\n".join(lines)
    print(table)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stamp = datetime.now().strftime("%Y%m%d-%H%M%S")
    meta = {
        "command": " ".join(sys.argv),
        "python": args.python,
        "machine": platform.platform(),
        "train_flags": TRAIN_FLAGS,
        "results": results,
        "table": table,
    }
    (out / f"memory-{stamp}.json").write_text(json.dumps(meta, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
