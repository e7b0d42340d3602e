"""The run folder's plots: test forecasts against the baselines, and the loss curves."""

from __future__ import annotations

import io
import json
import logging
import math
from pathlib import Path
from typing import Any

import numpy as np

from ..data import Series, WindowSet
from ..intervals import Forecast, interval_pairs, level_key
from .rundir import atomic_write

log = logging.getLogger(__name__)

#: One colour per forecaster, the same in every plot; red is the model's alone.
COLORS = {
    "model": "tab:red",
    "last_value": "tab:gray",
    "seasonal_naive": "tab:olive",
    "auto_ets": "tab:blue",
    "auto_arima": "tab:green",
    "auto_theta": "tab:purple",
}


def save_figure(fig: Any, path: Path) -> None:
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    atomic_write(path, lambda handle: handle.write(buffer.getvalue()))


def plot_forecast(
    path: Path,
    series: Series,
    test: WindowSet,
    forecasts: dict[str, np.ndarray | None],
    targets: tuple[str, ...],
    intervals: Forecast | None = None,
) -> None:
    """Test targets vs the one-step-ahead forecasts (``forecasts[name][:, 0]``, one per test
    row) of the model (red) and the baselines (faint); one panel per target. With the model's
    ``intervals``, a fan around its forecast: one band per interval level, the widest
    palest."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = test.origin + 1  # (n,) the row forecast at step 1 from each origin
    x = rows if series.times is None else series.times[rows]
    fig, axes = plt.subplots(len(targets), 1, figsize=(10, 3.2 * len(targets)), squeeze=False)
    for j, (ax, name) in enumerate(zip(axes[:, 0], targets, strict=True)):
        if intervals is not None and intervals.quantiles is not None:
            pairs = interval_pairs(intervals.levels)
            for n, (level, lo, hi) in enumerate(reversed(pairs)):  # widest first
                band = intervals.quantiles[:, 0, j]  # (n, Q)
                alpha = 0.12 + 0.18 * n / max(len(pairs) - 1, 1)
                ax.fill_between(x, band[:, lo], band[:, hi], color="tab:red", alpha=alpha,
                                lw=0, label=f"model {level_key(level)} interval")  # fmt: skip
        ax.plot(x, test.y_true[:, 0, j], color="black", lw=1.4, label="actual")
        for label, values in forecasts.items():
            if values is None or label == "model":
                continue
            ax.plot(x, values[:, 0, j], color=COLORS[label], lw=0.8, alpha=0.6, label=label)
        ax.plot(x, forecasts["model"][:, 0, j], color="tab:red", lw=1.2, label="model")
        ax.set_ylabel(name)
        ax.legend(loc="best", fontsize=8)
    axes[0, 0].set_title(f"test forecasts, step 1 of {test.horizon} ({len(test)} origins)")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)


def read_metric_records(metrics_path: Path) -> list[dict[str, Any]]:
    """The records of ``metrics.jsonl``; a line that is not a whole record (torn by a crash
    or a full disk mid-write) is skipped with a warning naming the file and the line."""
    if not metrics_path.exists():
        return []
    records = []
    for number, text in enumerate(metrics_path.read_text(errors="replace").splitlines(), 1):
        if not text.strip():
            continue
        try:
            record = json.loads(text)
            if not isinstance(record, dict) or not {"kind", "step"} <= set(record):
                raise ValueError("not a metrics record")
        except ValueError:  # json.JSONDecodeError is one
            log.warning("skipping line %d of %s: not a whole metrics record", number,
                        metrics_path)  # fmt: skip
            continue
        records.append(record)
    return records


def plot_loss(path: Path, metrics_path: Path) -> None:
    """Train loss per log interval and validation loss per epoch, log scale (losses of 0,
    as a constant series may give, cannot be shown there: the plot then says so)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = read_metric_records(metrics_path)
    train = [
        (r["step"], r["train_loss"])
        for r in lines
        if r["kind"] == "train" and isinstance(r.get("train_loss"), int | float)
    ]
    val = [
        (r["step"], r["val_loss"])
        for r in lines
        if r["kind"] == "epoch" and isinstance(r.get("val_loss"), int | float)
    ]
    fig, ax = plt.subplots(figsize=(8, 4))
    plotted = False
    for points, label, style in ((train, "train", "-"), (val, "validation", "o-")):
        points = [(s, v) for s, v in points if math.isfinite(v) and v > 0]
        if points:
            steps, values = zip(*points, strict=True)
            ax.plot(steps, values, style, ms=3, label=label)
            plotted = True
    ax.set_yscale("log")
    ax.set_xlabel("step")
    ax.set_ylabel("loss (scaled units)")
    if plotted:  # no positive loss (a constant series fits exactly): an empty plot, no legend
        ax.legend()
    else:
        ax.set_title("no positive finite loss to show on a log scale")
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
