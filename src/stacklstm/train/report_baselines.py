"""The report's baselines: last value and seasonal naive on every split, and with
``baselines="all"`` statsforecast's AutoETS, AutoARIMA and AutoTheta.

The statistical models forecast the test windows fitted on the rows before the first test
origin (training and validation), and, where the report scores intervals, the validation
windows fitted on the rows before the first validation origin (their residuals give the
baselines' intervals): two fits, and one pass over the origins of each, all computed at once
in :func:`statistical_splits` (in parallel worker processes, one bar per model on a
terminal). Only the process that writes the report computes them (with several processes,
the others' reports leave them empty).

Example:
    >>> out = statistical_splits(splits, 52, with_val=True)  # doctest: +SKIP
    >>> out["test"]["auto_arima"].shape  # doctest: +SKIP
    (343, 1, 1)
"""

from __future__ import annotations

import contextlib
import logging
import sys
from collections.abc import Iterator
from typing import Any

import numpy as np

from .. import baselines
from ..config import RunConfig
from ..data import WindowSet
from ..distributed import is_primary
from ..intervals import Forecast, interval_scores, report_quantiles

log = logging.getLogger(__name__)

Statistical = dict[str, np.ndarray | None]


def baseline_forecasts(
    windows: WindowSet, season: int, statistical: Statistical | None = None
) -> dict[str, np.ndarray | None]:
    """``{name: (n, horizon, n_targets)}`` of the naive baselines from the origins of
    ``windows``, and the ``statistical`` ones (of :func:`statistical_splits`) if given."""
    out: dict[str, np.ndarray | None] = {
        "last_value": windows.last_value,
        "seasonal_naive": windows.seasonal_naive(season),
    }
    if statistical is not None:
        out.update(statistical)
    return out


def series_slices(windows: WindowSet) -> list[tuple[int, slice]]:
    """``(series, slice of its windows)`` of every held series with windows (the windows of
    a split come in series order)."""
    n_series = len(windows.held.offsets) - 1
    edges = np.searchsorted(windows.series, np.arange(n_series + 1))
    return [(i, slice(edges[i], edges[i + 1])) for i in range(n_series) if edges[i + 1] > edges[i]]


def statistical_splits(splits: Any, season: int, with_val: bool) -> dict[str, Statistical]:
    """``{"test": ..., "val": ...}``: each split's statistical baselines (``{name: (n,
    horizon, n_targets) or None}``), the test's fitted at its first origin, the validation's
    (``with_val``; else ``{}``) at its own: for a panel, on each series at its own first
    origin of the split. In a process other than the one that writes the report, every model
    is None (not computed).
    """
    named = {"test": splits.test, "val": splits.val} if with_val else {"test": splits.test}
    out: dict[str, Statistical] = {"test": {}, "val": {}}
    return {**out, **statistical_of(named, season)}


def statistical_of(named: dict[str, WindowSet], season: int) -> dict[str, Statistical]:
    """``{key: {name: (n, horizon, n_targets) or None}}``: the statistical baselines from the
    origins of each of ``named``'s windows (``{}`` for one without windows), all computed at
    once (:func:`stacklstm.baselines.forecast_parts`): each fitted at its first origin, for
    a panel on each series at that series' own first origin (NaN where a model failed on a
    series). In a process other than the one that writes the report, every model is None.
    """
    out: dict[str, Statistical] = {key: {} for key in named}
    if not is_primary():
        for split, windows in named.items():
            out[split] = dict.fromkeys(baselines.STATISTICAL) if len(windows) else {}
        return out
    parts, keys = [], []  # (history, origins) of each (split, series), and where it goes
    for split, windows in named.items():
        if not len(windows):
            continue
        if windows.ids is None:
            parts.append((windows.history, windows.origin))
            keys.append((split, slice(None)))
            continue
        offsets = windows.held.offsets
        for i, rows in series_slices(windows):
            parts.append((windows.history[offsets[i] : offsets[i + 1]], windows.local_origin[rows]))
            keys.append((split, rows))
    if not parts:
        return out
    horizon = next(w.horizon for w in named.values() if len(w))
    with _bars() as progress:
        results = baselines.forecast_parts(parts, horizon, season, progress)
    for split, windows in named.items():
        if len(windows) and windows.ids is not None:  # NaN where a model failed on a series
            out[split] = {name: np.full((len(windows), windows.horizon, windows.n_targets),
                                        np.nan) for name in baselines.STATISTICAL}  # fmt: skip
    for (split, rows), result in zip(keys, results, strict=True):
        if rows == slice(None):
            out[split] = result
            continue
        for name, values in result.items():
            if values is not None:
                out[split][name][rows] = values  # type: ignore[index]
    return out


def add_interval_scores(
    scores: dict[str, Any],
    cfg: RunConfig,
    test: WindowSet,
    forecasts: dict[str, np.ndarray | None],
    model: Forecast,
    scored: dict[str, tuple[WindowSet, Forecast]],
    val_statistical: dict[str, np.ndarray | None],
) -> Forecast | None:
    """Add ``coverage``, ``width`` and ``wql`` to each forecaster's test ``scores`` (None where
    it has no intervals); returns the model's forecast if it has intervals (for the fan).

    The model's intervals are its own (calibrated with ``conformal``); a baseline's come from
    its residuals on the validation windows (:func:`stacklstm.baselines.residual_intervals`;
    ``val_statistical``: the statistical baselines' validation forecasts).
    """
    levels = report_quantiles(cfg.train)
    if not levels:
        return None
    val, _ = scored["val"]
    val_points: dict[str, np.ndarray | None] = {}
    if len(val):
        val_points = baseline_forecasts(val, cfg.data.season, val_statistical or None)
    out: dict[str, Forecast | None] = {
        name: baselines.residual_intervals(val.y_true, val_points.get(name), values, levels)
        for name, values in forecasts.items()
        if name != "model"
    }
    out["model"] = model if model.quantiles is not None else None
    for name, intervals in out.items():
        metrics = scores.get(name)
        if metrics is None:
            continue
        empty = {"coverage": None, "width": None, "wql": None}
        if intervals is not None and np.isfinite(intervals.quantiles).all():
            metrics.update(interval_scores(test.y_true, intervals))
        else:
            metrics.update(empty)
    return out["model"]


@contextlib.contextmanager
def _bars() -> Iterator[baselines.Progress | None]:
    """A progress bar per statistical model on a terminal (as the training's bar: on
    standard error when it is a terminal and info logs are on), else None."""
    if not (sys.stderr.isatty() and logging.getLogger("stacklstm").isEnabledFor(logging.INFO)):
        yield None
        return
    from tqdm.auto import tqdm

    bars: dict[str, Any] = {}

    def progress(name: str, done: int, total: int, stage: str) -> None:
        if name not in bars:
            bars[name] = tqdm(total=total, desc=f"{name:<10}", unit="origin", leave=True,
                              dynamic_ncols=True, position=len(bars))  # fmt: skip
        bar = bars[name]
        bar.set_postfix_str(stage, refresh=False)
        bar.update(done - bar.n)

    try:
        yield progress
    finally:
        for bar in bars.values():
            bar.close()
