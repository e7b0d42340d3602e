"""The run folder's ``loss.png``: the training and validation loss by epoch, the epoch chosen
on validation, and a retrained run's curve (:func:`loss_figure`, written by
:func:`plot_loss`; built without pyplot, as :mod:`.forecast`' figures are)."""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .style import legend_below, plain_log_axis, save_figure

log = logging.getLogger(__name__)


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
            log.warning("skipping line %d of %s: not a whole metrics record", number, metrics_path)
            continue
        records.append(record)
    return records


def _epoch_ends(records: Sequence[Mapping[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """``(epochs, steps)``: each epoch that ended and the step it ended at, ascending (a
    record without ``epoch`` counts as the next epoch; a repeated epoch: its last record)."""
    ends: dict[int, int] = {}
    for r in records:
        if r["kind"] == "epoch":
            ends[int(r.get("epoch", len(ends) + 1))] = int(r["step"])
    epochs = np.array(sorted(ends), dtype=np.int64)
    return epochs, np.array([ends[e] for e in epochs], dtype=np.int64)


def _step_to_epoch(records: Sequence[Mapping[str, Any]]) -> Callable[[np.ndarray], np.ndarray]:
    """Steps to (fractional) epochs: linear within each epoch, past the last at its pace;
    without an epoch that ended, the steps themselves."""
    epochs, ends = _epoch_ends(records)
    if not len(epochs):
        return lambda steps: np.asarray(steps, dtype=np.float64)
    xp, fp = np.concatenate([[0], ends]), np.concatenate([[0], epochs]).astype(np.float64)
    pace = (xp[-1] - xp[-2]) / (fp[-1] - fp[-2])  # steps per epoch, last epoch

    def to_epoch(steps: np.ndarray) -> np.ndarray:
        steps = np.asarray(steps, dtype=np.float64)
        return np.where(steps > xp[-1], fp[-1] + (steps - xp[-1]) / pace, np.interp(steps, xp, fp))

    return to_epoch


def _positive_points(
    records: Sequence[Mapping[str, Any]], kind: str, key: str
) -> tuple[np.ndarray, ...]:
    """``(steps, values)`` of the positive finite ``key`` of the ``kind`` records (a log
    scale shows no other)."""
    points = [
        (r["step"], r[key])
        for r in records
        if r["kind"] == kind
        and isinstance(r.get(key), int | float)
        and math.isfinite(r[key])
        and r[key] > 0
    ]
    steps, values = zip(*points, strict=True) if points else ((), ())
    return np.asarray(steps, dtype=np.float64), np.asarray(values, dtype=np.float64)


def chosen_epoch(records: Sequence[Mapping[str, Any]]) -> tuple[int, float | None] | None:
    """``(epoch, validation loss)`` the run keeps, as the trainer chooses it: the first epoch
    with the lowest finite validation loss; without validation losses, the last epoch (loss
    None). None when no epoch ended.

    Example:
        >>> chosen_epoch([{"kind": "epoch", "step": s, "epoch": s // 10, "val_loss": v}
        ...               for s, v in ((10, 0.5), (20, 0.3), (30, 0.3), (40, 0.4))])
        (2, 0.3)
    """
    epochs = [r for r in records if r["kind"] == "epoch"]
    scored = [
        r
        for r in epochs
        if isinstance(r.get("val_loss"), int | float) and math.isfinite(r["val_loss"])
    ]
    if scored:
        best = min(scored, key=lambda r: r["val_loss"])  # the first of equal losses
        return int(best.get("epoch", epochs.index(best) + 1)), float(best["val_loss"])
    return (int(epochs[-1].get("epoch", len(epochs))), None) if epochs else None


def _retrained_curve(retrained: Path | Sequence[float]) -> tuple[np.ndarray, np.ndarray]:
    """``(epochs, losses)`` of the retrained run: its metrics file's train losses on its own
    epochs, or a list of its losses, one per epoch (epochs ``1..E``)."""
    if isinstance(retrained, str | Path):
        records = read_metric_records(Path(retrained))
        steps, values = _positive_points(records, "train", "train_loss")
        return _step_to_epoch(records)(steps), values
    values = np.asarray(retrained, dtype=np.float64)
    x = np.arange(1, len(values) + 1, dtype=np.float64)
    keep = np.isfinite(values) & (values > 0)
    return x[keep], values[keep]


def _mark_chosen(ax: Axes, epoch: int, loss: float | None) -> None:
    """A vertical line at the end of the chosen ``epoch``, labelled with its loss."""
    text = f"last epoch {epoch} (kept: no validation loss)"
    if loss is not None:
        text = f"chosen epoch {epoch} (validation loss {loss:.4g})"
    ax.axvline(epoch, color="black", ls=":", lw=1.2, label=text)


def loss_figure(metrics_path: Path, *, retrained: Path | Sequence[float] | None = None) -> Figure:
    """loss.png: the train loss per log interval and the validation loss per epoch, on
    epochs (log scale), the chosen epoch marked; with ``retrained``, the loss of the run
    retrained on all rows for the chosen epochs, on its own epochs.

    Args:
        metrics_path: The run's ``metrics.jsonl`` (for a retrained run, its selection's,
            which holds the validation losses the epochs were chosen on).
        retrained: The retrained run's ``metrics.jsonl``, or its losses, one per epoch.

    Returns:
        The figure, not yet saved. Losses of 0 (a constant series fits exactly) cannot be
        shown on a log scale: without any other, its title says so.
    """
    records = read_metric_records(metrics_path)
    to_epoch = _step_to_epoch(records)
    fig = Figure(figsize=(8, 4.6), layout="constrained")
    ax = fig.subplots()
    curves = [
        ("train", "-", "tab:blue", *_positive_points(records, "train", "train_loss")),
        ("validation", "o-", "tab:orange", *_positive_points(records, "epoch", "val_loss")),
    ]
    for label, style, color, steps, values in curves:
        if len(steps):
            ax.plot(to_epoch(steps), values, style, color=color, ms=3, lw=1, label=label)
    if retrained is not None:
        epochs, losses = _retrained_curve(retrained)
        if len(epochs):  # (a likelihood loss may be negative: nothing on a log scale)
            ax.plot(
                epochs, losses, "-", color="tab:green", lw=1.2, label="train, retrained on all rows"
            )
    chosen = chosen_epoch(records)
    if chosen is not None:
        _mark_chosen(ax, *chosen)
    _finish_loss_axes(fig, ax, has_epochs=len(_epoch_ends(records)[0]) > 0)
    return fig


def _finish_loss_axes(fig: Figure, ax: Axes, has_epochs: bool) -> None:
    """Scales, labels, the title and the legend (none, and a title saying why, without a
    positive loss)."""
    unit = "epoch" if has_epochs else "step"
    ax.set_xlabel(unit)
    ax.set_ylabel("loss (scaled units)")
    if not any(line.get_label() in ("train", "validation") for line in ax.get_lines()):
        ax.set_title("no positive finite loss to show on a log scale")
        return
    plain_log_axis(ax)
    ax.set_title(f"Training loss by {unit}")
    legend_below(fig, [ax])


def plot_loss(
    path: Path, metrics_path: Path, *, retrained: Path | Sequence[float] | None = None
) -> None:
    """Write loss.png to ``path``: :func:`loss_figure`."""
    save_figure(loss_figure(metrics_path, retrained=retrained), path)
