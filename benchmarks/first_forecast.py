"""From a fresh process to the future forecast of a panel: stacklstm against neuralforecast's
LSTM and statsforecast's AutoETS, in one run, with a cold and a warm compilation cache.

What a newcomer times first: a new Python process reads a 20-series x 100-row daily panel,
fits with the defaults and writes the next ``--horizon`` days of every series. Each system
runs in a process of its own (imports, compilation and start-up included), alternated,
``--repeats`` times; the parent times each process's wall clock.

- ``stacklstm``: ``LSTMForecaster(horizon=h).fit(df).predict()`` (the defaults: the epochs
  chosen on a validation tail, then the model trained again on every row).
- ``neuralforecast``: ``NeuralForecast([LSTM(h=h, max_steps=S)], freq="D").fit(df)
  .predict()`` with ``S`` the updates stacklstm's run made in the same repetition
  (comparable steps; its own default is 1000), its other settings its defaults.
- ``statsforecast``: ``StatsForecast([AutoETS(season_length=7)], freq="D").forecast(df=df,
  h=h)``.

Cold: the compilation caches are empty (stacklstm's JAX cache, ``STACKLSTM_CACHE_DIR``, and
numba's, ``NUMBA_CACHE_DIR``, both in a temporary folder emptied first); warm: the same
command again in a second process, the caches filled by the first. torch compiles nothing
ahead, so neuralforecast's two figures differ by noise only.

    python benchmarks/first_forecast.py --repeats 3

Output: one line per process, then the medians and the ratios to stacklstm's, as markdown,
with the CPU model and the load average before the run.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SYSTEMS = ("stacklstm", "neuralforecast", "statsforecast")
N_SERIES, N_ROWS = 20, 100


def make_panel(path: Path, seed: int = 0) -> None:
    """A daily panel: ``N_SERIES`` series of ``N_ROWS`` rows, each a level, a trend, a weekly
    pattern and noise (``unique_id, ds, y``), written as Parquet."""
    import numpy as np
    import pandas as pd

    rng = np.random.default_rng(seed)
    t = np.arange(N_ROWS)
    frames = []
    for i in range(N_SERIES):
        level, trend, swing = rng.uniform(50, 150), rng.normal(0, 0.2), rng.uniform(2, 10)
        y = level + trend * t + swing * np.sin(2 * np.pi * (t + i) / 7) + rng.normal(0, 2, N_ROWS)
        frames.append(
            pd.DataFrame(
                {
                    "unique_id": f"s{i:02d}",
                    "ds": pd.date_range("2024-01-01", periods=N_ROWS, freq="D"),
                    "y": y,
                }
            )
        )
    pd.concat(frames, ignore_index=True).to_parquet(path)


# ----------------------------------------------------------------------- one process each


def run_stacklstm(df, horizon: int, steps: int | None):
    from stacklstm import LSTMForecaster

    model = LSTMForecaster(horizon=horizon).fit(df)
    steps_of = [
        json.loads((folder / "metrics.jsonl").read_text().splitlines()[-1])["step"]
        for folder in (model.run_dir / "selection", model.run_dir)
    ]
    return model.predict(), {"steps": sum(steps_of)}


def run_neuralforecast(df, horizon: int, steps: int | None):
    import logging

    logging.getLogger("pytorch_lightning").setLevel(logging.ERROR)
    from neuralforecast import NeuralForecast
    from neuralforecast.models import LSTM

    extra = {} if steps is None else {"max_steps": steps}
    model = LSTM(h=horizon, enable_progress_bar=False, logger=False, **extra)
    nf = NeuralForecast(models=[model], freq="D")
    nf.fit(df)
    return nf.predict(), {"steps": steps or 1000}


def run_statsforecast(df, horizon: int, steps: int | None):
    from statsforecast import StatsForecast
    from statsforecast.models import AutoETS

    sf = StatsForecast(models=[AutoETS(season_length=7)], freq="D")
    return sf.forecast(df=df, h=horizon), {}


def worker(system: str, data: Path, horizon: int, steps: int | None) -> None:
    """The child process: read, fit, forecast the future, print what it made as JSON."""
    import pandas as pd

    df = pd.read_parquet(data)
    forecast, info = globals()[f"run_{system}"](df, horizon, steps)
    forecast = forecast.reset_index() if "unique_id" not in forecast else forecast
    assert len(forecast) == N_SERIES * horizon, len(forecast)
    print(json.dumps({"rows": len(forecast), **info}))


# ----------------------------------------------------------------------- the parent


def time_process(system: str, data: Path, horizon: int, steps: int | None, env: dict) -> tuple:
    command = [
        sys.executable,
        __file__,
        "--worker",
        system,
        "--data",
        str(data),
        "--horizon",
        str(horizon),
    ]
    if steps is not None:
        command += ["--steps", str(steps)]
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{system} failed:\n{done.stderr[-3000:]}")
    return wall, json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--horizon", type=int, default=14)
    parser.add_argument("--systems", default=",".join(SYSTEMS))
    parser.add_argument("--worker", choices=SYSTEMS, help=argparse.SUPPRESS)
    parser.add_argument("--data", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--steps", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        return worker(args.worker, args.data, args.horizon, args.steps)
    systems = [s for s in args.systems.split(",") if s]
    walls: dict[tuple[str, str], list[float]] = {}
    from stacklstm.bench.summary import machine_line  # the parent only: workers start bare

    print(f"Machine: {machine_line()}; load before: {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "panel.parquet"
        make_panel(data)
        caches = Path(scratch) / "caches"
        env = {
            **os.environ,
            "STACKLSTM_CACHE_DIR": str(caches / "jax"),
            "NUMBA_CACHE_DIR": str(caches / "numba"),
        }
        for k in range(args.repeats):
            steps = None
            for system in systems:
                for state in ("cold", "warm"):
                    if state == "cold":
                        shutil.rmtree(caches, ignore_errors=True)
                    load = os.getloadavg()[0]
                    wall, info = time_process(system, data, args.horizon, steps, env)
                    if system == "stacklstm":
                        steps = info["steps"]  # neuralforecast trains as many updates
                    walls.setdefault((system, state), []).append(wall)
                    print(
                        f"{system:<15} {state} run {k + 1}: {wall:6.1f} s  {info}  "
                        f"(load before: {load:.2f})"
                    )
    base = statistics.median(walls[("stacklstm", "warm")]) if "stacklstm" in systems else None
    print("\n| system | cache | median wall (s) | / stacklstm warm | runs |\n|---|---|---|---|---|")
    for (system, state), values in walls.items():
        median = statistics.median(values)
        ratio = "" if base is None else f"{median / base:.2f}x"
        runs = ", ".join(f"{v:.1f}" for v in values)
        print(f"| {system} | {state} | {median:.1f} | {ratio} | {runs} |")


if __name__ == "__main__":
    main()
