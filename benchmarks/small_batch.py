"""Small batches with a large hidden size: the compiled CPU kernel on one thread against its
split of each step by hidden units over the pool's threads.

    python benchmarks/small_batch.py                  # batch 1 and 4, hidden 256, time 100
    python benchmarks/small_batch.py --hidden 128 --batches 1,4,8 --rounds 9

Batches under 8 give the kernel too few rows to split them over threads, so with a large hidden
size it splits each step by hidden units instead (one barrier per step; ``csrc/lstm_cpu.cc``,
``plan_for``). This script measures both in ONE process on the same jitted programs: the split
is turned off and on for the whole process with the private ``_lstm_cpu.unit_split()`` (the
kernel reads the switch at every call, so nothing is traced or compiled again). The two
settings alternate within each round, so a burst of load on a shared machine hits both alike.

Calls (1 layer, features ``--features``, float32, ``LSTMModel`` with its default head):

- ``forward``: ``jax.jit(model.apply)`` (the kernel's inference call).
- ``train step``: ``jax.jit(jax.value_and_grad(mse))`` (the training forward and backward calls).

Each cell: the median over ``--rounds`` rounds of each round's median of ``--calls`` timed
calls, in milliseconds, and in brackets the fastest single call (on a loaded machine, what the
call takes when it happens to get its cores); ratio = one thread / split of the medians (above 1:
the split is faster). "backward on
one thread": the train step with the forward calls split and the backward call not.
"""

from __future__ import annotations

import argparse
import math
import os
import statistics
import time

import jax
import jax.numpy as jnp
import numpy as np


def build(batch: int, hidden: int, time_steps: int, features: int):
    """The two jitted calls and their arguments: ``{name: (fn, args)}``."""
    from stacklstm.model import LSTMModel

    model = LSTMModel(lstm_hidden_size=hidden, num_lstm_layers=1)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch, time_steps, features)).astype(np.float32)
    y = rng.normal(size=(batch, 1)).astype(np.float32)
    variables = model.init(jax.random.key(0), x)

    def mse(variables, x, y):
        return jnp.mean((model.apply(variables, x) - y) ** 2)

    return {
        "forward": (jax.jit(model.apply), (variables, x)),
        "train step": (jax.jit(jax.value_and_grad(mse)), (variables, x, y)),
    }


def timed_ms(fn, args, calls: int) -> list[float]:
    samples = []
    for _ in range(calls):
        start = time.perf_counter()
        jax.block_until_ready(fn(*args))
        samples.append(1e3 * (time.perf_counter() - start))
    return samples


def main(argv: list[str] | None = None) -> str:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", default="1,4", help="comma-separated batch sizes")
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--time", type=int, default=100)
    parser.add_argument("--features", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", type=int, default=20, help="timed calls per setting and round")
    args = parser.parse_args(argv)

    from stacklstm import kernels
    from stacklstm.kernels import _lstm_cpu

    if kernels.info().path != "native":
        raise SystemExit(f"the compiled kernel does not run here: {kernels.info().reason}")
    batches = [int(b) for b in args.batches.split(",")]
    cases = {b: build(b, args.hidden, args.time, args.features) for b in batches}
    # (forward calls split, backward call split); the backward one matters to training only.
    settings = {"one thread": (False, False), "split": (True, True), "forward only": (True, False)}
    samples: dict[tuple[int, str, str], list[list[float]]] = {}
    previous = _lstm_cpu.unit_split(True, True)
    try:
        for _ in range(args.rounds + 1):  # the first round compiles and warms up, untimed
            for b, fns in cases.items():
                for name, (fn, fn_args) in fns.items():
                    for setting, on in settings.items():
                        if name == "forward" and setting == "forward only":
                            continue
                        _lstm_cpu.unit_split(*on)
                        ms = timed_ms(fn, fn_args, args.calls)
                        samples.setdefault((b, name, setting), []).append(ms)
    finally:
        _lstm_cpu.unit_split(*previous)

    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    lines = [
        f"hidden {args.hidden}, time {args.time}, features {args.features}, 1 layer, float32; "
        f"{cores} cores; median of {args.rounds} rounds' medians of {args.calls} calls "
        "(fastest call in brackets)",
        "",
        "| batch | call | one thread ms | split ms | ratio | backward on one thread ms | "
        "split (rows, units) |",
        "|---|---|---|---|---|---|---|",
    ]

    def cell(key) -> tuple[float, str]:
        if key not in samples:
            return math.nan, "-"
        rounds = samples[key][1:]  # without the warm-up round
        median = statistics.median(statistics.median(r) for r in rounds)
        return median, f"{median:.2f} ({min(min(r) for r in rounds):.2f})"

    for b, fns in cases.items():
        plan = _lstm_cpu.plan(b, args.hidden, cores)
        for name in fns:
            (one, one_text), (split, split_text), (_, fwd_text) = (
                cell((b, name, s)) for s in settings
            )
            lines.append(
                f"| {b} | {name} | {one_text} | {split_text} | {one / split:.2f} | {fwd_text} "
                f"| {plan['rows']}, {plan['units']} |"
            )
    from stacklstm.bench.summary import machine_line

    table = "\n".join([f"Machine: {machine_line()}", "", *lines])
    print(table)
    return table


if __name__ == "__main__":
    main()
