"""Reading a finished run folder: test report with naive baselines, plots, and forecasts.

``evaluate_run`` restores the best checkpoint, forecasts the validation and test windows,
maps them to original units and scores them next to the last-value and seasonal-naive
forecasts of exactly the same targets; it writes ``report.json``, ``forecast.png`` and
``loss.png``. ``predict`` forecasts from every origin of a table and writes a CSV.

Example:
    >>> report = evaluate_run("runs/co2")  # doctest: +SKIP
    >>> test = report.data["test"]  # doctest: +SKIP
    >>> test["model"]["rmse"] < test["last_value"]["rmse"]  # doctest: +SKIP
    True
"""

from __future__ import annotations

import io
import json
import logging
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pandas as pd

from ..data import (
    DataError,
    Series,
    WindowSet,
    bundled_dataset_path,
    make_inference_windows,
    make_splits,
    prepare_series,
    read_table,
)
from ..distributed import gather, is_primary, make_mesh, replicated, shard_batch
from ..metrics import forecast_metrics
from .checkpoint import METRICS_FILE, RunCheckpoints, RunInfo, atomic_write, read_run_info
from .step import init_state, make_optimizer, make_predict_step, padded_batches

log = logging.getLogger(__name__)

REPORT_FILE = "report.json"
FORECAST_PLOT = "forecast.png"
LOSS_PLOT = "loss.png"
PREDICTIONS_FILE = "predictions.csv"
FORECASTERS = ("model", "last_value", "seasonal_naive")


@dataclass(frozen=True)
class TrainedRun:
    """A run folder loaded for inference.

    Attributes:
        run_dir: The run folder.
        info: Its ``config.json``.
        model: The ``LSTMModel``.
        params: The restored parameters, replicated on ``mesh``.
        checkpoint: ``{"kind": "best" | "latest", "step": int}``: where ``params`` came from.
        mesh: The device mesh.
    """

    run_dir: Path
    info: RunInfo
    model: Any
    params: Any
    checkpoint: dict[str, Any]
    mesh: Any

    @property
    def batch_size(self) -> int:
        """The run's batch size rounded up to a multiple of the device count."""
        n = int(self.mesh.devices.size)
        return -(-self.info.config.train.batch_size // n) * n


def load_run(run_dir: str | Path) -> TrainedRun:
    """Restore the best parameters of a run (the latest if no best checkpoint exists yet).

    Raises:
        ValueError: Not a run folder, another layout version, or no checkpoint.
    """
    run_dir = Path(run_dir)
    info = read_run_info(run_dir)
    cfg = info.config
    model = cfg.model.build(output_size=cfg.data.horizon * len(cfg.data.target))
    optimizer = make_optimizer(cfg.train, total_steps=1)  # the state's structure only
    example_x = np.zeros((1, 1, len(info.scaler.columns)), np.float32)  # (batch, time, features)
    abstract = jax.eval_shape(lambda: init_state(model, optimizer, jax.random.key(0), example_x))
    mesh = make_mesh()
    target = jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=replicated(mesh)), abstract
    )
    with RunCheckpoints(run_dir, read_only=True) as ckpts:
        kind = "best" if ckpts.latest_step("best") is not None else "latest"
        if kind == "latest":
            log.warning("%s has no best checkpoint yet; using the latest one", run_dir)
        step = ckpts.latest_step(kind)
        if step is None:
            raise ValueError(f"{run_dir} holds no checkpoint")
        state, _, _ = ckpts.restore(kind, target, step)
    return TrainedRun(run_dir, info, model, state.params, {"kind": kind, "step": step}, mesh)


def forecast(run: TrainedRun, windows: WindowSet, predict_step=None) -> np.ndarray:
    """Forecasts ``(n, horizon, n_targets)`` of ``windows`` in original units (float64)."""
    if len(windows) == 0:
        return np.zeros((0, windows.horizon, windows.n_targets))
    predict_step = predict_step or make_predict_step(run.model)
    outputs, counts = [], []
    for batch, n_real in padded_batches(windows.x, None, run.batch_size):
        outputs.append(predict_step(run.params, shard_batch(run.mesh, batch.x, whole=True)[0]))
        counts.append(n_real)
    host = gather(outputs)  # one host sync for all batches (every process gets all rows)
    y_model = np.concatenate([out[:n] for out, n in zip(host, counts, strict=True)])
    y_model = y_model.reshape(len(windows), windows.horizon, windows.n_targets)  # horizon-major
    return windows.to_original(y_model)


def _load_series(info: RunInfo, data_path: str | Path | None) -> tuple[Path, Series]:
    source = Path(data_path) if data_path is not None else info.data_path
    source = bundled_dataset_path() if source is None else source
    return source, prepare_series(read_table(source), info.config.data)


def _score(windows: WindowSet, model_forecast: np.ndarray, season: int) -> dict[str, Any]:
    """Metrics of the model and both baselines on the same targets; the model's are None when
    its forecasts are not finite (a diverged run)."""
    if len(windows) == 0:
        return {}
    finite = bool(np.isfinite(model_forecast).all())
    if not finite:
        log.warning("the model's forecasts hold NaN/Inf; its metrics are left empty")
    return {
        "model": forecast_metrics(windows.y_true, model_forecast) if finite else None,
        "last_value": forecast_metrics(windows.y_true, windows.last_value),
        "seasonal_naive": forecast_metrics(windows.y_true, windows.seasonal_naive(season)),
    }


def format_table(data: dict[str, Any]) -> str:
    """The report's metrics as a small text table; ``*`` marks each split's lowest RMSE."""
    lines = [f"{'split':<6}{'forecaster':<16}{'MAE':>12}{'RMSE':>12}{'MAPE %':>10}"]
    for split in ("test", "val"):
        scores = data.get(split) or {}
        if not scores:
            lines.append(f"{split:<6}(no windows)")
            continue
        scored = [name for name in FORECASTERS if scores[name] is not None]
        best = min(scored, key=lambda name: scores[name]["rmse"])
        for name in FORECASTERS:
            m = scores[name]
            if m is None:
                lines.append(f"{split:<6}{name:<16}{'n/a (forecasts not finite)':>34}")
                continue
            mark = " *" if name == best else ""
            lines.append(
                f"{split:<6}{name:<16}{m['mae']:>12.4f}{m['rmse']:>12.4f}{m['mape']:>10.4f}{mark}"
            )
    lines.append(f"n_test={data['n_test']} n_val={data['n_val']} windows; season={data['season']}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Report:
    """The outcome of :func:`evaluate_run`.

    Attributes:
        data: What ``report.json`` holds.
        table: :func:`format_table` of ``data``.
        test_origin: ``(n_test,)`` series rows of the test forecast origins.
        test_forecast: ``(n_test, horizon, n_targets)`` model forecasts in original units.
    """

    data: dict[str, Any]
    table: str
    test_origin: np.ndarray
    test_forecast: np.ndarray


def evaluate_run(run_dir: str | Path, data_path: str | Path | None = None) -> Report:
    """Score the run's best checkpoint on the validation and test windows; write the report.

    The windows are those of :func:`stacklstm.data.make_splits` on the table (the run's own
    table by default), cut with the run's saved scaler. Writes ``report.json``,
    ``forecast.png`` and ``loss.png`` into ``run_dir`` (replacing earlier ones).

    Returns:
        Report; ``report.data`` has ``{"test": {"model": {"mae", "rmse", "mape", "smape"},
        "last_value": ..., "seasonal_naive": ...}, "val": ..., "n_test", "n_val", ...}``.
    """
    run = load_run(run_dir)
    cfg = run.info.config
    source, series = _load_series(run.info, data_path)
    splits, _ = make_splits(series, cfg.data)  # which origins are val and test
    windows = make_inference_windows(series, cfg.data, run.info.scaler)  # the saved scaler
    predict_step = make_predict_step(run.model)
    scored = {}
    for split in ("val", "test"):
        origins = getattr(splits, split).origin
        part = windows.take(np.isin(windows.origin, origins))
        if not np.array_equal(part.origin, origins):
            raise DataError(f"could not cut the {split} windows of {source} again")
        scored[split] = (part, forecast(run, part, predict_step))
    season = cfg.train.season
    data = {
        "test": _score(*scored["test"], season),
        "val": _score(*scored["val"], season),
        "n_test": len(scored["test"][0]),
        "n_val": len(scored["val"][0]),
        "season": season,
        "horizon": cfg.data.horizon,
        "targets": list(cfg.data.target),
        "checkpoint": run.checkpoint,
        "data_path": str(source),
    }
    report = Report(data, format_table(data), scored["test"][0].origin, scored["test"][1])
    if not is_primary():  # every process forecast together; process 0 writes
        return report
    run_dir = Path(run_dir)
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    atomic_write(run_dir / REPORT_FILE, lambda handle: handle.write(text.encode()))
    test, test_forecast = scored["test"]
    if len(test):
        _plot_forecast(
            run_dir / FORECAST_PLOT, series, test, test_forecast, season, cfg.data.target
        )
    _plot_loss(run_dir / LOSS_PLOT, run_dir / METRICS_FILE)
    return report


def _save_figure(fig: Any, path: Path) -> None:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    atomic_write(path, lambda handle: handle.write(buffer.getvalue()))


def _plot_forecast(
    path: Path,
    series: Series,
    test: WindowSet,
    model_forecast: np.ndarray,
    season: int,
    targets: tuple[str, ...],
) -> None:
    """Test targets vs the model, baselines faint; one panel per target."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = test.target_index.reshape(-1)  # (n * horizon,) series rows, in time order
    x = rows if series.times is None else series.times[rows]
    fig, axes = plt.subplots(len(targets), 1, figsize=(10, 3.2 * len(targets)), squeeze=False)
    baselines = {
        "last value": test.last_value,
        f"seasonal naive ({season})": test.seasonal_naive(season),
    }
    for j, (ax, name) in enumerate(zip(axes[:, 0], targets, strict=True)):
        ax.plot(x, test.y_true[:, :, j].reshape(-1), color="black", lw=1.4, label="actual")
        for (label, values), color in zip(
            baselines.items(), ("tab:gray", "tab:olive"), strict=True
        ):
            ax.plot(x, values[:, :, j].reshape(-1), color=color, lw=0.8, alpha=0.5, label=label)
        ax.plot(x, model_forecast[:, :, j].reshape(-1), color="tab:red", lw=1.2, label="model")
        ax.set_ylabel(name)
        ax.legend(loc="best", fontsize=8)
    axes[0, 0].set_title(f"test forecasts ({len(test)} windows, horizon {test.horizon})")
    fig.tight_layout()
    _save_figure(fig, path)
    plt.close(fig)


def _plot_loss(path: Path, metrics_path: Path) -> None:
    """Train loss per log interval and validation loss per epoch, log scale."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = []
    if metrics_path.exists():
        lines = [json.loads(s) for s in metrics_path.read_text().splitlines() if s.strip()]
    train = [
        (r["step"], r["train_loss"]) for r in lines if r["kind"] == "train" and r["train_loss"]
    ]
    val = [(r["step"], r["val_loss"]) for r in lines if r["kind"] == "epoch" and r["val_loss"]]
    fig, ax = plt.subplots(figsize=(8, 4))
    for points, label, style in ((train, "train", "-"), (val, "validation", "o-")):
        points = [(s, v) for s, v in points if math.isfinite(v) and v > 0]
        if points:
            steps, values = zip(*points, strict=True)
            ax.plot(steps, values, style, ms=3, label=label)
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (scaled units)")
    ax.legend()
    fig.tight_layout()
    _save_figure(fig, path)
    plt.close(fig)


def predict(
    run_dir: str | Path, data_path: str | Path | None = None, output: str | Path | None = None
) -> pd.DataFrame:
    """Forecast from every origin of a table with a full input window; optionally write a CSV.

    Uses :func:`stacklstm.data.make_inference_windows` with the run's saved scaler, so the
    forecast from an origin that is also a test origin equals the report's.

    Args:
        run_dir: The run folder.
        data_path: The table (the run's own table by default); it needs the run's target,
            feature and time columns.
        output: CSV to write atomically (None: write nothing).

    Returns:
        One row per origin: ``origin`` (its time stamp, or its row number without a time
        column), then ``<target>_h<k>`` for every target and horizon step ``k = 1..horizon``.
    """
    if output is not None and not Path(output).parent.is_dir():
        raise ValueError(f"cannot write {output}: folder {Path(output).parent} does not exist")
    run = load_run(run_dir)
    cfg = run.info.config.data
    _, series = _load_series(run.info, data_path)
    windows = make_inference_windows(series, cfg, run.info.scaler)
    values = forecast(run, windows)  # (n, horizon, n_targets)
    origin = windows.origin if windows.origin_time is None else windows.origin_time
    columns: dict[str, Any] = {"origin": origin}
    for j, name in enumerate(cfg.target):
        for k in range(cfg.horizon):
            columns[f"{name}_h{k + 1}"] = values[:, k, j]
    frame = pd.DataFrame(columns)
    if output is not None:
        text = frame.to_csv(index=False)
        atomic_write(Path(output), lambda handle: handle.write(text.encode()))
    return frame
