"""How fast the pretrained models answer: loading, one zero-shot forecast, a panel, a
fine-tune.

In one fresh process (run it twice: the second finds the predict step in JAX's compile
cache, as a user's second session does):

* ``load``: reading the monthly weights and compiling (or reading from the compile cache)
  their predict step, after ``import stacklstm`` (timed apart);
* ``first`` and ``median``: ``stacklstm.pretrained.forecast`` of one 120-row monthly series,
  the first call and the median of ``--repeats`` more;
* ``panel``: one call on ``--panel`` monthly series of 120 rows;
* ``fine-tune``: ``LSTMForecaster(horizon=12, init="pretrained").fit`` on the same 120-row
  series (the defaults: early stopping on its validation tail, then retraining on every
  row), beside ``init="random"``, alternately, medians of ``--fits``.

Usage::

    python benchmarks/pretrained_speed.py
    python benchmarks/pretrained_speed.py --repeats 200 --panel 1000 --fits 3
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import numpy as np
import pandas as pd


def monthly(n_series: int, rows: int = 120, seed: int = 0) -> pd.DataFrame:
    """``n_series`` monthly series (trend, season, noise) of ``rows`` rows."""
    rng = np.random.default_rng(seed)
    t = np.arange(rows)
    frames = []
    for i in range(n_series):
        level, amp = rng.uniform(50, 500), rng.uniform(0.05, 0.3)
        y = level * (1 + 0.003 * t) * (1 + amp * np.sin(2 * np.pi * t / 12)) + rng.normal(
            0, 2, rows
        )
        frames.append(
            pd.DataFrame(
                {"unique_id": f"s{i}", "ds": pd.date_range("2000", periods=rows, freq="MS"), "y": y}
            )
        )
    return pd.concat(frames, ignore_index=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=100)
    parser.add_argument("--panel", type=int, default=1000)
    parser.add_argument("--fits", type=int, default=3)
    args = parser.parse_args()
    start = time.perf_counter()
    import stacklstm  # noqa: F401
    from stacklstm import LSTMForecaster
    from stacklstm.pretrained import forecast, load

    imported = time.perf_counter() - start
    start = time.perf_counter()
    load("monthly")
    loaded = time.perf_counter() - start
    one = monthly(1).drop(columns="unique_id")
    start = time.perf_counter()
    forecast(one, target="y", time_column="ds")
    first = time.perf_counter() - start
    times = []
    for _ in range(args.repeats):
        start = time.perf_counter()
        forecast(one, target="y", time_column="ds")
        times.append(time.perf_counter() - start)
    panel = monthly(args.panel)
    start = time.perf_counter()
    forecast(panel)
    panel_s = time.perf_counter() - start
    fits: dict[str, list[float]] = {"pretrained": [], "random": []}
    for _ in range(args.fits):
        for init in fits:
            start = time.perf_counter()
            LSTMForecaster(horizon=12, init=init).fit(one)
            fits[init].append(time.perf_counter() - start)
    info = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
    names = [line.split(":", 1)[1].strip() for line in info.splitlines() if "model name" in line]
    cpu = names[0] if names else platform.processor()
    print(f"CPU: {cpu}, {os.cpu_count()} cores; load average {os.getloadavg()[0]:.1f}")
    print(f"import stacklstm: {imported:.2f} s; load the monthly weights: {loaded:.2f} s")
    print(
        f"one series, 120 rows: first forecast {1e3 * first:.1f} ms, median of "
        f"{args.repeats} {1e3 * np.median(times):.1f} ms (p90 {1e3 * np.quantile(times, 0.9):.1f})"
    )
    print(f"{args.panel} series of 120 rows, one call: {panel_s:.2f} s")
    for init, values in fits.items():
        print(
            f"fit, 120 rows, horizon 12, init={init}: median {np.median(values):.1f} s "
            f"({', '.join(f'{v:.1f}' for v in values)})"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
