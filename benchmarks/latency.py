"""Latency of ONE forecast (batch 1, one window): the exported artifact against the model.

    python benchmarks/latency.py                      # the default model, 2000 calls per path
    python benchmarks/latency.py --calls 500 --hidden 128 --window 52

Three paths, the same weights, measured in one process, round-robin in ``--rounds`` rounds so a
burst of load on a shared machine hits them alike; each call is timed on its own and the table
shows the median and the 90th percentile over all calls, and each median's ratio to the
artifact's:

- ``artifact``: ``stacklstm.serving.load(FILE).predict(window)``: numpy in (raw window, original
  units), numpy out (forecast, original units); the scaling and window normalisation run
  inside the exported program (float64), the network on the portable pure-JAX path.
- ``LSTMModel.apply (jit)``: ``jax.jit(model.apply)`` on the already normalised float32 window,
  on the default kernel path (``stacklstm.kernels.info()``), numpy in and out.
- ``torch eager``: ``torch.nn.LSTM`` loaded with ``stacklstm.interop.to_torch`` plus the same
  Dense+ELU head in ``torch.nn.Linear``, under ``torch.inference_mode()``, numpy in and out.

The parameters are the model's random initialisation (the speed does not depend on training);
the scaler is fitted on a random walk. Before timing, the three outputs are checked to agree.
Goal on a 2-core CPU: under 1 ms for the artifact.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import jax
import numpy as np


def _percentile(samples: list[float], q: float) -> float:
    return float(np.percentile(np.asarray(samples), q))


def build(args: argparse.Namespace):
    """The three callables and the window they take: ``{name: (fn, input)}``."""
    import torch

    from stacklstm import kernels, serving
    from stacklstm.config import DataConfig, ModelConfig
    from stacklstm.data import Scaler
    from stacklstm.forecaster import build_model
    from stacklstm.forecasting.export import artifact_metadata, export_forecast
    from stacklstm.interop import to_torch

    cfg = DataConfig(window=args.window)
    model_cfg = ModelConfig(
        lstm_hidden_size=args.hidden, num_lstm_layers=args.layers, linear_layer_sizes=(32, 16)
    )
    model = build_model(model_cfg, output_size=1)
    rng = np.random.default_rng(0)
    series = 330 + np.cumsum(rng.normal(0, 0.5, (2000, 1)), axis=0)  # (time, 1) in "ppm"
    scaler = Scaler.fit(series, "standard", ("co2",), 1)
    raw = series[-args.window :][None]  # (1, window, 1): one raw window
    scaled = scaler.transform(raw)
    x = (scaled - scaled[:, -1:, :]).astype(np.float32)  # window-normalised, as in training
    params = model.init(jax.random.key(0), x)["params"]

    # the artifact, through the file format and the loader
    exported = export_forecast(model, params, cfg, scaler)
    blob = serving.pack(artifact_metadata(exported, cfg, scaler), bytes(exported.serialize()))
    forecaster = serving.from_bytes(blob)

    apply = jax.jit(model.apply)

    def jax_apply(window):
        return np.asarray(apply({"params": params}, window))

    torch.set_num_threads(args.torch_threads)
    lstm = torch.nn.LSTM(1, args.hidden, args.layers, batch_first=True)
    lstm.load_state_dict(to_torch(params["lstm"]))
    layers = []
    head = params["head"]
    for name in [*(f"dense_{j}" for j in range(len(model_cfg.linear_layer_sizes))), "output"]:
        kernel = np.asarray(head[name]["kernel"])  # (in, out)
        linear = torch.nn.Linear(*kernel.shape)
        with torch.no_grad():
            linear.weight.copy_(torch.from_numpy(kernel.T.copy()))
            linear.bias.copy_(torch.from_numpy(np.array(head[name]["bias"])))
        layers += [linear, torch.nn.ELU()] if name != "output" else [linear]
    torch_head = torch.nn.Sequential(*layers).eval()

    def torch_eager(window):
        with torch.inference_mode():
            out, _ = lstm(torch.from_numpy(window))
            return torch_head(out[:, -1]).numpy()

    # the three agree: the artifact in ppm, the other two in normalised units
    in_ppm = forecaster.predict(raw)[:, :, 0]
    for name, out in (("LSTMModel.apply", jax_apply(x)), ("torch", torch_eager(x))):
        back = (out + scaled[:, -1]) * scaler.scale[0] + scaler.center[0]
        if not np.allclose(back, in_ppm, rtol=0, atol=1e-4):
            raise SystemExit(f"{name} gives {back} but the artifact {in_ppm}")
    paths = {
        "artifact (serving.load().predict)": (forecaster.predict, raw),
        f"LSTMModel.apply (jit, {kernels.info().path} path)": (jax_apply, x),
        f"torch eager ({args.torch_threads} thread(s))": (torch_eager, x),
    }
    return paths, torch.__version__


def measure(paths, calls: int, rounds: int, warmup: int) -> dict[str, list[float]]:
    """Per-call wall times in microseconds, round-robin over the paths."""
    samples: dict[str, list[float]] = {name: [] for name in paths}
    for fn, window in paths.values():
        for _ in range(warmup):
            fn(window)
    per_round = max(1, calls // rounds)
    for _ in range(rounds):
        for name, (fn, window) in paths.items():
            times = samples[name]
            for _ in range(per_round):
                start = time.perf_counter()
                fn(window)
                times.append((time.perf_counter() - start) * 1e6)
    return samples


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--calls", type=int, default=2000, help="timed calls per path")
    parser.add_argument("--rounds", type=int, default=5, help="round-robin rounds")
    parser.add_argument("--warmup", type=int, default=50, help="untimed calls per path first")
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--torch-threads", type=int, default=1)
    args = parser.parse_args(argv)

    paths, torch_version = build(args)
    samples = measure(paths, args.calls, args.rounds, args.warmup)
    base = statistics.median(next(iter(samples.values())))
    print(
        f"one forecast, batch 1: window {args.window}, {args.layers} LSTM layers of {args.hidden}, "
        f"head 32,16; {len(next(iter(samples.values())))} calls per path; jax {jax.__version__}, "
        f"torch {torch_version}, python {sys.version.split()[0]}"
    )
    from stacklstm.bench.summary import machine_line

    print(f"Machine: {machine_line()}")
    print()
    print("| path | median µs | p90 µs | median / artifact's |")
    print("|---|---:|---:|---:|")
    for name, times in samples.items():
        median = statistics.median(times)
        print(f"| {name} | {median:.1f} | {_percentile(times, 90):.1f} | {median / base:.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
