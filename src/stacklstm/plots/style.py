"""What every plot shares: one colour per forecaster, the legend below the axes, dates and
plain numbers on log axes, and writing a figure atomically."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib.dates as mdates
import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, MaxNLocator

from ..baselines.registry import BASELINES
from ..rundir.folder import atomic_write

#: One colour per forecaster, the same in every plot; red is the model's alone.
COLORS = {"model": "tab:red", **{name: b.colour for name, b in BASELINES.items()}}


def color_of(name: str) -> str:
    """The colour of forecaster ``name`` in every plot (:data:`COLORS`; another: cyan)."""
    return COLORS.get(name, "tab:cyan")


def save_figure(fig: Any, path: Path) -> None:
    """Write ``fig`` to ``path`` as a PNG, atomically."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    atomic_write(path, lambda handle: handle.write(buffer.getvalue()))


def legend_below(fig: Figure, axes: Sequence[Axes]) -> None:
    """One legend for all ``axes`` (each label once) below them, outside the data (``fig``'s
    constrained layout makes room for it)."""
    seen: dict[str, Any] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels(), strict=True):
            seen.setdefault(label, handle)
    if seen:
        fig.legend(
            list(seen.values()),
            list(seen),
            loc="outside lower center",
            ncols=min(len(seen), 5),
            frameon=False,
            fontsize=8,
        )


def format_time_axis(ax: Axes, xs: np.ndarray) -> None:
    """Date ticks and labels at the step of the stamps ``xs`` (never finer than a day for
    daily or coarser data); whole-number ticks for whole numbers."""
    xs = np.asarray(xs)
    if not np.issubdtype(xs.dtype, np.datetime64):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        return
    days = np.diff(np.sort(xs)).astype("timedelta64[s]").astype(float) / 86400
    span = float(days.sum()) if len(days) else 0.0
    if len(days) and np.median(days) >= 1 and span < 8:
        locator: mdates.DateLocator = mdates.DayLocator()  # too few days for AutoDateLocator
    else:
        locator = mdates.AutoDateLocator(minticks=3, maxticks=8)
    ax.xaxis.set_major_locator(locator)
    ax.xaxis.set_major_formatter(mdates.ConciseDateFormatter(locator))


def plain_log_axis(ax: Axes) -> None:
    """A log y axis whose ticks read as plain numbers (0.2, 0.5, 1, 2), with a light grid;
    the minor ticks at 2 and 5 labelled while the axis spans two decades or less."""

    def minor(value: float, _: int) -> str:
        low, high = ax.get_ylim()
        mantissa = round(value / 10 ** math.floor(math.log10(value) + 1e-9))
        return f"{value:g}" if mantissa in (2, 5) and math.log10(high / low) <= 2 else ""

    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_formatter(FuncFormatter(minor))
    ax.grid(alpha=0.3, lw=0.5, which="both")
