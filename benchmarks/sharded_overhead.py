"""What the data-parallel path costs: the fit loop's train step, unsharded vs sharded.

    python benchmarks/sharded_overhead.py                 # batch 64, 5 repeats of 50 steps
    python benchmarks/sharded_overhead.py --steps 20 --repeats 3 --hidden 8
    python benchmarks/sharded_overhead.py --processes     # 1 process vs 2, one core each

Four rows, each measured in its own subprocess (the device count is fixed when JAX starts):
``unsharded`` is ``make_train_step(model, optimizer, cfg)`` fed numpy batches on one device;
``sharded`` is what ``fit`` runs, ``make_train_step(..., mesh=mesh)`` fed
``shard_batch(mesh, batch)``, on 1, 2 and 4 virtual CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=N``). Each repeat times ``--steps`` steps
(batch placement included, blocked on the new state at the end); the table shows the median
steps/s over ``--repeats`` and its ratio to the unsharded row.

Virtual CPU devices share the machine's cores, so more of them is not faster: the rows show
the overhead of splitting the batch and all-reducing the gradients, not a scaling curve.

``--processes`` measures the scaling instead, at the same global batch: one process on one core
against two processes (``jax.distributed`` over gloo on 127.0.0.1), each pinned to its own core
with one thread of computation, each fed its own half of the batch. Each process runs the CPU
kernel on its own rows only (``kernels/native.py``, ``_PerShard``), so the ideal is 2x, less
one all-reduce of the gradients per step. On CPU that all-reduce costs milliseconds whatever
its size (gloo on loopback), so small steps do not scale; for example:

    python benchmarks/sharded_overhead.py --processes                         # ~7 ms steps
    python benchmarks/sharded_overhead.py --processes --window 50 --hidden 128 --steps 20
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROWS = (("unsharded", 1), ("sharded", 1), ("sharded", 2), ("sharded", 4))
# One thread of computation per process: XLA's Eigen pool off, oneMKL sequential; the
# kernel's row blocks use XLA's intra-op pool, one thread on a process pinned to one core.
ONE_THREAD = {"XLA_FLAGS": "--xla_cpu_multi_thread_eigen=false", "MKL_NUM_THREADS": "1"}


def worker(args: argparse.Namespace) -> None:
    """One row: time the train step in this process and print the samples as JSON."""
    import jax
    import numpy as np

    from stacklstm import distributed
    from stacklstm.config import ModelConfig, TrainConfig
    from stacklstm.distributed import make_mesh, replicate, shard_batch
    from stacklstm.forecaster import build_model
    from stacklstm.train.step import Batch, init_state, make_optimizer, make_train_step

    if args.mode == "process":  # one of several processes, settings from STACKLSTM_*
        distributed.initialize()
    if jax.device_count() != args.devices:
        raise SystemExit(f"expected {args.devices} devices, got {jax.device_count()}")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.batch, args.window, 1)).astype(np.float32)  # (batch, time, feat)
    y = rng.normal(size=(args.batch, 1, 1)).astype(np.float32)  # (batch, horizon, targets)
    batch = Batch(x, y, np.ones(args.batch, np.float32))
    if args.mode == "process":  # this process's own contiguous rows
        n, i = jax.process_count(), jax.process_index()
        rows = slice(args.batch * i // n, args.batch * (i + 1) // n)
        batch = Batch(*(a[rows] for a in batch))
    cfg = TrainConfig(batch_size=args.batch)
    model = build_model(
        ModelConfig(lstm_hidden_size=args.hidden, num_lstm_layers=args.layers), output_size=1
    )
    optimizer = make_optimizer(cfg, total_steps=10**6)
    state = init_state(model, optimizer, jax.random.key(0), x)
    key = jax.random.key(1)
    if args.mode == "unsharded":
        step = make_train_step(model, optimizer, cfg)

        def place(b: Batch) -> Batch:
            return b
    else:
        mesh = make_mesh()
        step = make_train_step(model, optimizer, cfg, mesh=mesh)
        state, key = replicate(state, mesh), replicate(key, mesh)

        def place(b: Batch) -> Batch:
            return shard_batch(mesh, b)

    for _ in range(3):  # compile and warm up
        state, metrics = step(state, place(batch), key)
    jax.block_until_ready(state)
    samples = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        for _ in range(args.steps):
            state, metrics = step(state, place(batch), key)
        jax.block_until_ready((state, metrics))
        samples.append(args.steps / (time.perf_counter() - start))
    if jax.process_index() == 0:
        print(json.dumps({"mode": args.mode, "devices": args.devices, "steps_per_s": samples}))


def _pinned(core: int) -> dict:
    """``subprocess`` arguments that pin the child to one core (where the OS allows)."""
    if not hasattr(os, "sched_setaffinity"):
        return {}
    cores = sorted(os.sched_getaffinity(0))
    return {"preexec_fn": lambda: os.sched_setaffinity(0, {cores[core % len(cores)]})}


def processes(args: argparse.Namespace, settings: list[str]) -> list[dict]:
    """One process on one core, then two processes on a core each, at the same global batch.

    The pair is measured ``--rounds`` times, one after the other, and the samples of all
    rounds pooled: on a shared machine the load changes between rounds, and alternating keeps
    both rows exposed to the same changes.
    """
    import socket

    base = {**os.environ, "JAX_PLATFORMS": "cpu", **ONE_THREAD}
    command = [sys.executable, __file__, *settings]

    def start(i: int, port: int) -> subprocess.Popen:
        env = {
            **base,
            "STACKLSTM_COORDINATOR": f"127.0.0.1:{port}",
            "STACKLSTM_NUM_PROCESSES": "2",
            "STACKLSTM_PROCESS_ID": str(i),
        }
        return subprocess.Popen(
            [*command, "--worker", "process", "2"],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **_pinned(i),
        )

    rows = [{"mode": "unsharded", "devices": 1, "steps_per_s": []},
            {"mode": "process", "devices": 2, "steps_per_s": []}]  # fmt: skip
    for _ in range(args.rounds):
        one = subprocess.run(
            [*command, "--worker", "unsharded", "1"],
            env=base,
            capture_output=True,
            text=True,
            check=False,
            **_pinned(0),
        )
        if one.returncode:
            raise SystemExit(f"one process failed:\n{one.stderr[-2000:]}")
        rows[0]["steps_per_s"] += json.loads(one.stdout.strip().splitlines()[-1])["steps_per_s"]
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        procs = [start(i, port) for i in range(2)]
        outputs = [p.communicate(timeout=1800) for p in procs]
        for p, (_, err) in zip(procs, outputs, strict=True):
            if p.returncode:
                raise SystemExit(f"two processes failed:\n{err[-2000:]}")
        line = [ln for ln in outputs[0][0].splitlines() if ln.startswith("{")][-1]
        rows[1]["steps_per_s"] += json.loads(line)["steps_per_s"]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=64, help="global batch (multiple of 4)")
    parser.add_argument("--window", type=int, default=10, help="time steps per window")
    parser.add_argument("--hidden", type=int, default=64, help="LSTM hidden size")
    parser.add_argument("--layers", type=int, default=2, help="LSTM layers")
    parser.add_argument("--steps", type=int, default=50, help="timed steps per repeat")
    parser.add_argument("--repeats", type=int, default=5, help="repeats (the median is shown)")
    parser.add_argument(
        "--processes", action="store_true", help="1 process vs 2 (gloo), one core each"
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="--processes: alternate the two rows this often"
    )
    parser.add_argument("--worker", nargs=2, metavar=("MODE", "DEVICES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.batch % 4:
        parser.error(f"--batch must be a multiple of 4 (the most devices), got {args.batch}")
    if args.worker:
        args.mode, args.devices = args.worker[0], int(args.worker[1])
        worker(args)
        return

    settings = [
        f"--{name}={getattr(args, name)}"
        for name in ("batch", "window", "hidden", "layers", "steps", "repeats")
    ]
    results = processes(args, settings) if args.processes else []
    for mode, devices in () if args.processes else ROWS:
        env = {**os.environ, "JAX_PLATFORMS": "cpu"}
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
        done = subprocess.run(
            [sys.executable, __file__, *settings, "--worker", mode, str(devices)],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode:
            raise SystemExit(f"{mode} on {devices} device(s) failed:\n{done.stderr[-2000:]}")
        results.append(json.loads(done.stdout.strip().splitlines()[-1]))

    base = statistics.median(results[0]["steps_per_s"])
    print(
        f"train step, batch {args.batch}, window {args.window}, hidden {args.hidden} x "
        f"{args.layers} layers; median of {args.repeats} x {args.steps} steps"
        + (f", {args.rounds} rounds\n" if args.processes else "\n")
    )
    if args.processes:
        print("one thread per process, each process pinned to its own core\n")
    print("| path | CPU devices | steps/s (median) | vs unsharded |")
    print("|---|---:|---:|---:|")
    for row in results:
        median = statistics.median(row["steps_per_s"])
        print(f"| {row['mode']} | {row['devices']} | {median:.1f} | {median / base:.2f}x |")


if __name__ == "__main__":
    main()
