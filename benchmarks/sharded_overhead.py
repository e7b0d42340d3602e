"""What the data-parallel path costs: the fit loop's train step, unsharded vs sharded.

    python benchmarks/sharded_overhead.py                 # batch 64, 5 repeats of 50 steps
    python benchmarks/sharded_overhead.py --steps 20 --repeats 3 --hidden 8

Four rows, each measured in its own subprocess (the device count is fixed when JAX starts):
``unsharded`` is ``make_train_step(model, optimizer, cfg)`` fed numpy batches on one device;
``sharded`` is what ``fit`` runs, ``make_train_step(..., mesh=mesh)`` fed
``shard_batch(mesh, batch)``, on 1, 2 and 4 virtual CPU devices
(``XLA_FLAGS=--xla_force_host_platform_device_count=N``). Each repeat times ``--steps`` steps
(batch placement included, blocked on the new state at the end); the table shows the median
steps/s over ``--repeats`` and its ratio to the unsharded row.

Virtual CPU devices share the machine's cores, so more of them is not faster: the rows show
the overhead of splitting the batch and all-reducing the gradients, not a scaling curve.
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


def worker(args: argparse.Namespace) -> None:
    """One row: time the train step in this process and print the samples as JSON."""
    import jax
    import numpy as np

    from stacklstm.config import ModelConfig, TrainConfig
    from stacklstm.distributed import make_mesh, replicate, shard_batch
    from stacklstm.train.step import Batch, init_state, make_optimizer, make_train_step

    if jax.device_count() != args.devices:
        raise SystemExit(f"expected {args.devices} devices, got {jax.device_count()}")
    rng = np.random.default_rng(0)
    x = rng.normal(size=(args.batch, args.window, 1)).astype(np.float32)  # (batch, time, feat)
    y = rng.normal(size=(args.batch, 1, 1)).astype(np.float32)  # (batch, horizon, targets)
    batch = Batch(x, y, np.ones(args.batch, np.float32))
    cfg = TrainConfig(batch_size=args.batch)
    model = ModelConfig(lstm_hidden_size=args.hidden, num_lstm_layers=args.layers).build(
        output_size=1
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
    print(json.dumps({"mode": args.mode, "devices": args.devices, "steps_per_s": samples}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=64, help="global batch (multiple of 4)")
    parser.add_argument("--window", type=int, default=10, help="time steps per window")
    parser.add_argument("--hidden", type=int, default=64, help="LSTM hidden size")
    parser.add_argument("--layers", type=int, default=2, help="LSTM layers")
    parser.add_argument("--steps", type=int, default=50, help="timed steps per repeat")
    parser.add_argument("--repeats", type=int, default=5, help="repeats (the median is shown)")
    parser.add_argument("--worker", nargs=2, metavar=("MODE", "DEVICES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.batch % 4:
        parser.error(f"--batch must be a multiple of 4 (the most devices), got {args.batch}")
    if args.worker:
        args.mode, args.devices = args.worker[0], int(args.worker[1])
        worker(args)
        return

    settings = [f"--{name}={getattr(args, name)}" for name in
                ("batch", "window", "hidden", "layers", "steps", "repeats")]  # fmt: skip
    results = []
    for mode, devices in ROWS:
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
        f"{args.layers} layers; median of {args.repeats} x {args.steps} steps\n"
    )
    print("| path | CPU devices | steps/s (median) | vs unsharded |")
    print("|---|---:|---:|---:|")
    for row in results:
        median = statistics.median(row["steps_per_s"])
        print(f"| {row['mode']} | {row['devices']} | {median:.1f} | {median / base:.2f}x |")


if __name__ == "__main__":
    main()
