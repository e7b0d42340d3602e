"""``forecast.png``: each series' recent history, its test forecasts and its future forecast.
``loss.png`` is :mod:`stacklstm.plots.loss`'s; what every plot shares (one colour per
forecaster, the legend below, dates and log axes) is :mod:`stacklstm.plots.style`'s.

Each plot is built by a function that returns the :class:`matplotlib.figure.Figure`
(:func:`forecast_figure`, :func:`~stacklstm.plots.loss.loss_figure`), so that tests can
read what is drawn, and
written by a ``plot_*`` function. Figures are made without pyplot (Agg renders them when
saved): no global figure state, nothing to close.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..data import Series, WindowSet
from ..intervals import Forecast, interval_pairs
from .style import color_of, format_time_axis, legend_below, save_figure

log = logging.getLogger(__name__)


#: Up to this many test windows of a series, each one's forecast path is drawn; more are
#: thinned to one every ``horizon`` windows back from the last, paths that tile the test rows.
MAX_PATHS = 4

#: The fewest rows of history forecast.png shows by default.
MIN_HISTORY = 20


# --- forecast.png


@dataclass(frozen=True)
class FutureForecast:
    """The forecast of the ``horizon`` steps after each series' last row, for forecast.png.

    Attributes:
        times: ``(n_series, horizon)`` time stamps of the steps: datetime64 like the
            series' time column, or whole numbers (the series' whole-number stamps or,
            without a time column, row numbers within the series: a series of ``T`` rows
            has rows ``0..T-1``, so its first future step is ``T``).
        point: ``(n_series, horizon, n_targets)`` point forecasts in original units.
        intervals: ``{level: (lo, hi)}``: per interval level in (0, 1) (0.8: the 80%
            interval) its lower and upper bounds, each ``(n_series, horizon, n_targets)``;
            ``{}``: none.
        ids: The series of the rows of ``times`` and ``point``, in order (a panel's ids);
            None: the plotted table's series in their order, one row each (one row for a
            table that is one series).

    Example:
        >>> lo, hi = np.array([[[0.5], [1.0]]]), np.array([[[1.5], [3.0]]])
        >>> f = FutureForecast(np.array([[5, 6]]), np.array([[[1.0], [2.0]]]), {0.8: (lo, hi)})
        >>> f.horizon, f.row_of(None, 0), f.row_of(None, 1)
        (2, 0, None)
    """

    times: np.ndarray
    point: np.ndarray
    intervals: Mapping[float, tuple[np.ndarray, np.ndarray]] = field(default_factory=dict)
    ids: Sequence[str] | None = None

    def __post_init__(self) -> None:
        times, point = np.asarray(self.times), np.asarray(self.point)
        if times.ndim != 2 or point.ndim != 3 or point.shape[:2] != times.shape:
            raise ValueError(
                "FutureForecast needs times (n_series, horizon) and point (n_series, horizon, "
                f"n_targets), got times {times.shape} and point {point.shape}; for one series "
                "add a leading axis of 1 (times[None], point[None])"
            )
        if self.ids is not None and len(self.ids) != len(times):
            raise ValueError(f"FutureForecast has {len(times)} rows but {len(self.ids)} ids")
        for level, bounds in self.intervals.items():
            shapes = [np.shape(bound) for bound in bounds]
            if not 0 < level < 1 or shapes != [point.shape, point.shape]:
                raise ValueError(
                    f"FutureForecast.intervals[{level!r}] must be a level in (0, 1) with (lo, "
                    f"hi) each of point's shape {point.shape}, got shapes {shapes}"
                )

    @property
    def horizon(self) -> int:
        return int(np.shape(self.times)[1])

    def row_of(self, name: str | None, position: int) -> int | None:
        """The row of the series ``name``, at ``position`` in the plotted table (None: none)."""
        if self.ids is None:
            return position if position < len(self.times) else None
        return list(self.ids).index(name) if name in self.ids else None


@dataclass(frozen=True)
class _Cell:
    """One subplot of forecast.png: target ``target`` of the series at ``position``."""

    position: int
    target: int
    title: str


def _cells(
    series: Series,
    test: WindowSet,
    future: FutureForecast | None,
    targets: Sequence[str],
    max_series: int,
) -> tuple[list[_Cell], int]:
    """The subplots (each target of the first series by order that have test windows or a
    future forecast) and how many series there are."""
    have = set(np.unique(test.series).tolist())
    if future is not None:
        names = series.ids or (None,)
        have |= {i for i, name in enumerate(names) if future.row_of(name, i) is not None}
    positions = sorted(have)[: max(1, max_series // len(targets))]
    cells = []
    for i in positions:
        for j, target in enumerate(targets):
            parts = [] if series.ids is None else [series.ids[i]]
            if len(targets) > 1 or series.ids is None:
                parts.append(target)
            cells.append(_Cell(i, j, " · ".join(parts)))
    return cells, max(len(have), series.n_series)


def _grid(n: int, n_targets: int) -> tuple[Figure, list[Axes]]:
    """A figure of ``n`` subplots: one wide, else a row per series of up to 4 targets, else
    in 2 or 3 columns."""
    cols = 1 if n == 1 else 2 if n in (2, 4) else 3
    if 1 < n_targets <= 4:
        cols = n_targets
    rows = math.ceil(n / cols)
    size = (10, 4.4) if n == 1 else (4.8 * cols, 2.8 * rows + 1.0)
    fig = Figure(figsize=size, layout="constrained")
    axes = list(fig.subplots(rows, cols, squeeze=False).ravel())
    for ax in axes[n:]:
        ax.remove()
    return fig, axes[:n]


def _interval_label(level: float) -> str:
    return f"{100 * level:g}% interval"


def _alpha(n: int, count: int) -> float:
    """The fill of band ``n`` of ``count`` drawn widest first: the widest palest."""
    return 0.12 + 0.16 * n / max(count - 1, 1)


@dataclass(frozen=True)
class _Panel:
    """What one subplot draws of its series: the rows of the series and of its history, its
    x values, and its test windows and those whose forecast paths are drawn."""

    series: Series
    target: int
    start: int
    stop: int
    first: int
    windows: np.ndarray
    drawn: np.ndarray

    def x(self, rows: np.ndarray) -> np.ndarray:
        """The x values of ``rows``: their stamps, else the rows within the series."""
        return rows - self.start if self.series.times is None else self.series.times[rows]

    def y(self, rows: np.ndarray) -> np.ndarray:
        return self.series.values[rows, self.target]


def _panel(series: Series, test: WindowSet, cell: _Cell, history: int) -> _Panel:
    """What one subplot shows of its series: ``history`` rows before its first test origin
    (before its end without test windows) to its end, at most its last ``2 * history`` rows;
    the test windows from origins in view, their paths all, or one every ``horizon`` back
    from the last beyond :data:`MAX_PATHS` (paths that tile the test rows)."""
    start, stop = (int(b) for b in series.bounds[cell.position : cell.position + 2])
    windows = np.flatnonzero(test.series == cell.position)
    anchor = int(test.origin[windows[0]]) if len(windows) else stop - 1
    first = max(start, anchor - history, stop - 2 * history)
    windows = windows[test.origin[windows] >= first]
    n = len(windows)
    drawn = np.arange(n) if n <= MAX_PATHS else np.arange(n - 1, -1, -test.horizon)[::-1]
    return _Panel(series, cell.target, start, stop, first, windows, windows[drawn])


def _lines(panel: _Panel, test: WindowSet, values: np.ndarray) -> list[tuple[np.ndarray, ...]]:
    """``(x, y)`` of each drawn test forecast path of ``values`` ``(n, horizon)``: from its
    origin (the actual value there) to its last step inside the series; with horizon 1,
    one line through the step-1 forecasts."""
    if test.horizon == 1:
        return [(panel.x(test.origin[panel.drawn] + 1), values[panel.drawn, 0])]
    out = []
    for w in panel.drawn:
        origin = int(test.origin[w])
        rows = origin + np.arange(test.horizon + 1)
        ys = np.concatenate([[panel.y(np.array([origin]))[0]], values[w]])
        inside = rows < panel.stop
        out.append((panel.x(rows[inside]), ys[inside]))
    return out


def _draw_test(
    ax: Axes,
    panel: _Panel,
    test: WindowSet,
    forecasts: Mapping[str, np.ndarray | None],
    intervals: Forecast | None,
) -> None:
    """The test rows in view shaded, the model's intervals, the baselines' forecast paths
    (dashed) and the model's, at every horizon step."""
    last = int(test.origin[panel.windows[-1]]) + test.horizon
    span = panel.x(np.array([int(test.origin[panel.windows[0]]), min(last, panel.stop - 1)]))
    ax.axvspan(span[0], span[1], color="0.93", lw=0, zorder=0, label="test period")
    if intervals is not None and intervals.quantiles is not None:
        _draw_test_bands(ax, panel, test, intervals)
    names = [name for name, v in forecasts.items() if v is not None and name != "model"]
    for name in [*names, "model"]:
        main = name == "model"
        for x, y in _lines(panel, test, forecasts[name][:, :, panel.target]):
            ax.plot(
                x,
                y,
                color=color_of(name),
                lw=1.5 if main else 0.9,
                alpha=1.0 if main else 0.7,
                ls="-" if main else "--",
                label=name,
            )


def _draw_test_bands(ax: Axes, panel: _Panel, test: WindowSet, intervals: Forecast) -> None:
    """The model's interval bands around its drawn test forecast paths, widest palest."""
    pairs = interval_pairs(intervals.levels)
    q = intervals.quantiles[:, :, panel.target]  # (n, horizon, Q)
    for n, (level, lo, hi) in enumerate(reversed(pairs)):  # widest first
        lows, highs = _lines(panel, test, q[..., lo]), _lines(panel, test, q[..., hi])
        for (x, low), (_, high) in zip(lows, highs, strict=True):
            ax.fill_between(
                x,
                low,
                high,
                color="tab:red",
                lw=0,
                alpha=_alpha(n, len(pairs)),
                label=_interval_label(level),
            )


def _draw_future(ax: Axes, panel: _Panel, future: FutureForecast, row: int) -> None:
    """The future forecast from the series' last row, with its interval fan."""
    last = np.array([panel.stop - 1])
    x = np.concatenate([panel.x(last), np.asarray(future.times)[row]])
    start = panel.y(last)
    levels = sorted(future.intervals, reverse=True)  # widest first
    for n, level in enumerate(levels):
        lo, hi = (np.asarray(b)[row, :, panel.target] for b in future.intervals[level])
        ax.fill_between(
            x,
            np.concatenate([start, lo]),
            np.concatenate([start, hi]),
            color="tab:red",
            lw=0,
            alpha=_alpha(n, len(levels)),
            label=_interval_label(level),
        )
    y = np.concatenate([start, np.asarray(future.point)[row, :, panel.target]])
    ax.plot(x, y, color="darkred", lw=2.0, marker="o", ms=2.5, label="future forecast")


def _ylabel(name: str, units: str | Mapping[str, str] | None) -> str:
    unit = units.get(name) if isinstance(units, Mapping) else units
    return f"{name} ({unit})" if unit else name


def _draw_cell(
    ax: Axes,
    panel: _Panel,
    cell: _Cell,
    test: WindowSet,
    forecasts: Mapping[str, Any],
    intervals: Forecast | None,
    future: FutureForecast | None,
    ylabel: str,
) -> None:
    """One subplot: the recent history, the test forecasts and the future forecast."""
    rows = np.arange(panel.first, panel.stop)
    ax.plot(panel.x(rows), panel.y(rows), color="black", lw=1.2, label="actual")
    if len(panel.windows):
        _draw_test(ax, panel, test, forecasts, intervals)
    name = None if panel.series.ids is None else panel.series.ids[cell.position]
    row = None if future is None else future.row_of(name, cell.position)
    shown = panel.x(rows)
    if row is not None:
        _draw_future(ax, panel, future, row)
        shown = np.concatenate([shown, np.asarray(future.times)[row]])
    format_time_axis(ax, shown)
    ax.set_title(cell.title, fontsize=10)
    ax.set_ylabel(ylabel)
    if panel.series.times is None:
        ax.set_xlabel("row")
    ax.grid(alpha=0.3, lw=0.5)


def forecast_figure(
    series: Series,
    test: WindowSet,
    forecasts: Mapping[str, np.ndarray | None],
    targets: Sequence[str],
    intervals: Forecast | None = None,
    *,
    future: FutureForecast | None = None,
    units: str | Mapping[str, str] | None = None,
    season: int | None = None,
    history: int | None = None,
    max_series: int = 6,
) -> Figure:
    """forecast.png: per series and target, its recent history, the test forecasts at every
    horizon step and the future forecast with its intervals.

    One subplot per target of each of the first ``max_series`` series by order (those with
    test windows in ``test`` or a row in ``future``; the title says how many of the table's
    series are shown), titled by the series' id. Each shows, in a light grey band, the test
    rows in view and the forecast paths from the test windows (all of up to
    :data:`MAX_PATHS`, else one every ``horizon`` windows back from the last: paths that
    tile the test rows; each starts at the actual value of its origin; with horizon 1, one
    line through the step-1 forecasts) of the baselines (dashed) and of the model (red) in
    its interval bands; then the future forecast from the series' last row in its fan. The
    view: the actual values from ``history`` rows before the series' first test origin to
    its end, at most its last ``2 * history`` rows. Dates on the x axis at the series' step
    (row numbers without time stamps), the target's name and units on the y axis, the
    legend below the subplots, outside the data.

    Example (``future`` for a table of one series, as a two-step forecast would fill it)::

        future = FutureForecast(
            times=np.array([["2024-04-01", "2024-04-02"]], dtype="datetime64[ns]"),  # (1, 2)
            point=np.array([[[10.2], [10.4]]]),  # (n_series=1, horizon=2, n_targets=1)
            intervals={0.8: (np.array([[[9.8], [9.7]]]), np.array([[[10.6], [11.1]]]))},
        )
        forecast_figure(splits.series, splits.test, forecasts, ("y",), future=future)

    Args:
        series: The table the windows index (``Splits.series``).
        test: The test windows, of one series or of several of a panel.
        forecasts: ``{forecaster: (n, horizon, n_targets)}`` forecasts of the ``n`` test
            windows in original units; ``"model"`` is required, None entries are skipped.
        targets: The target names (``DataConfig.target``).
        intervals: The model's test forecasts with quantiles ``(n, horizon, n_targets, Q)``:
            a band per symmetric pair of levels, the widest palest.
        future: The forecast after each series' end: :class:`FutureForecast`.
        units: The targets' units (``"ppm"``), or ``{target: units}``; shown on the y axis.
        season: The season length: the default view then holds two seasons or more.
        history: Rows of history before the first test origin (None: the most of two
            windows, two seasons, four horizons and :data:`MIN_HISTORY` rows).
        max_series: The most series shown (a grid of up to 6 suits a page; 9 still reads).

    Returns:
        The figure, not yet saved (:func:`save_figure`).
    """
    if "model" not in forecasts:
        raise ValueError(f"forecasts need the model's ('model'), got {sorted(forecasts)}")
    if history is None:
        history = max(2 * test.window, 2 * (season or 1), 4 * test.horizon, MIN_HISTORY)
    cells, n_series = _cells(series, test, future, targets, max_series)
    if not cells:
        raise ValueError("forecast.png needs test windows or a future forecast, got neither")
    fig, axes = _grid(len(cells), len(targets))
    for ax, cell in zip(axes, cells, strict=True):
        panel = _panel(series, test, cell, history)
        _draw_cell(
            ax,
            panel,
            cell,
            test,
            forecasts,
            intervals,
            future,
            _ylabel(targets[cell.target], units),
        )
    fig.suptitle(_forecast_title(test, future, len({c.position for c in cells}), n_series))
    legend_below(fig, axes)
    return fig


def _forecast_title(test: WindowSet, future: FutureForecast | None, shown: int, n: int) -> str:
    steps = "1 step" if test.horizon == 1 else f"1 to {test.horizon} steps"
    title = f"Test forecasts, {steps} ahead"
    if future is not None:
        ahead = "step" if future.horizon == 1 else f"{future.horizon} steps"
        title += f", and the forecast of the next {ahead}"
    if shown < n:
        title += f"\n{shown} of {n} series shown (the first by order)"
    return title


def plot_forecast(
    path: Path,
    series: Series,
    test: WindowSet,
    forecasts: Mapping[str, np.ndarray | None],
    targets: Sequence[str],
    intervals: Forecast | None = None,
    *,
    future: FutureForecast | None = None,
    units: str | Mapping[str, str] | None = None,
    season: int | None = None,
    history: int | None = None,
    max_series: int = 6,
) -> None:
    """Write forecast.png to ``path``: :func:`forecast_figure` of the same arguments."""
    fig = forecast_figure(
        series,
        test,
        forecasts,
        targets,
        intervals,
        future=future,
        units=units,
        season=season,
        history=history,
        max_series=max_series,
    )
    save_figure(fig, path)
