"""The report's baselines: last value and seasonal naive on every split, and with
``baselines="all"`` statsforecast's AutoETS, AutoARIMA and AutoTheta.

The statistical models are fitted on the training rows (the rows before the first
validation origin) and forecast the validation and then the test windows without refitting,
as the model trained on the same rows forecasts them: one fit per model and series, and one
pass over its origins, computed in :func:`statistical_splits` (in parallel worker processes,
one bar per model on a terminal). ``fit`` starts them in the background while the model
trains (:func:`prefetch_splits`), and the run folder keeps them (``baselines.npz``) for
``evaluate``. Only the process that writes the report computes them (with several
processes, the others' reports leave them empty).

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
from pathlib import Path
from typing import Any

import numpy as np

from .. import baselines, combine
from ..config import RunConfig
from ..data import WindowSet
from ..distributed import is_primary
from ..intervals import Forecast, interval_scores, report_quantiles
from ..rundir.folder import atomic_write

log = logging.getLogger(__name__)

Statistical = dict[str, np.ndarray | None]


def baseline_forecasts(
    windows: WindowSet, season: int, statistical: Statistical | None = None
) -> dict[str, np.ndarray | None]:
    """``{name: (n, horizon, n_targets)}`` of the naive baselines from the origins of
    ``windows``, and the ``statistical`` ones (of :func:`statistical_splits`) if given."""
    out: dict[str, np.ndarray | None] = {**baselines.naive_forecasts(windows, season)}
    if statistical is not None:
        out.update(statistical)
    return out


def series_slices(windows: WindowSet) -> list[tuple[int, slice]]:
    """``(series, slice of its windows)`` of every held series with windows (the windows of
    a split come in series order)."""
    n_series = len(windows.held.offsets) - 1
    edges = np.searchsorted(windows.series, np.arange(n_series + 1))
    return [(i, slice(edges[i], edges[i + 1])) for i in range(n_series) if edges[i + 1] > edges[i]]


def statistical_splits(
    splits: Any, season: int, with_val: bool, store: Path | None = None
) -> dict[str, Statistical]:
    """``{"test": ..., "val": ...}``: each split's statistical baselines (``{name: (n,
    horizon, n_targets) or None}``). With ``with_val``, one fit at the first validation
    origin forecasts the validation and then the test windows without refitting (as the
    model, trained on the training rows, forecasts both); without it (or without validation
    windows, ``"val"`` then ``{}``), the fit is at the first test origin. For a panel, each
    series is fitted at its own first origin. ``store``: a file of the run folder that keeps
    the results for a later report (:func:`statistical_of`). In a process other than the one
    that writes the report, every model is None (not computed).
    """
    named = _named(splits.val, splits.test, with_val)
    out: dict[str, Statistical] = {"test": {}, "val": {}}
    return {**out, **statistical_of(named, season, one_fit=True, store=store)}


def prefetch_splits(val: WindowSet, test: WindowSet, season: int) -> bool:
    """Start :func:`statistical_splits` of the splits ``val`` and ``test`` in the
    background (nothing in a process that does not write the report), so that the fits run
    while the model trains; the report's call then waits for them
    (:func:`stacklstm.baselines.prefetch`). Returns whether anything started."""
    if not is_primary():
        return False
    parts, _ = _parts(_named(val, test, True), one_fit=True)
    if not parts:
        return False
    return baselines.prefetch(parts, test.horizon, season)


def _named(val: WindowSet, test: WindowSet, with_val: bool) -> dict[str, WindowSet]:
    return {"val": val, "test": test} if with_val and len(val) else {"test": test}


def statistical_of(
    named: dict[str, WindowSet],
    season: int,
    *,
    one_fit: bool = False,
    store: Path | None = None,
) -> dict[str, Statistical]:
    """``{key: {name: (n, horizon, n_targets) or None}}``: the statistical baselines from the
    origins of each of ``named``'s windows (``{}`` for one without windows), all computed at
    once (:func:`stacklstm.baselines.forecast_parts`): each fitted at its first origin, for
    a panel on each series at that series' own first origin (NaN where a model failed on a
    series). With ``one_fit``, the windows of one series are forecast by one fit, at the
    first origin of the first of ``named`` (in order) that has windows of it.

    ``store``: an ``.npz`` file that keeps the results by the key of their call
    (:func:`stacklstm.baselines.part_keys`); those found there are not computed again, and
    the new ones are added (the file is replaced atomically). In a process other than the
    one that writes the report, every model is None.
    """
    out: dict[str, Statistical] = {key: {} for key in named}
    if not is_primary():
        for split, windows in named.items():
            out[split] = dict.fromkeys(baselines.STATISTICAL) if len(windows) else {}
        return out
    parts, places = _parts(named, one_fit)
    if not parts:
        return out
    horizon = next(w.horizon for w in named.values() if len(w))
    keys = baselines.part_keys(parts, horizon, season)
    stored = _read_store(store, keys)
    with _bars() as progress:
        results = baselines.forecast_parts(parts, horizon, season, progress, keys=keys)
    if store is not None and any(k not in stored for k in keys):
        _write_store(store, dict(zip(keys, results, strict=True)))
    for split, windows in named.items():
        if len(windows) and windows.ids is not None:  # NaN where a model failed on a series
            out[split] = {
                name: np.full((len(windows), windows.horizon, windows.n_targets), np.nan)
                for name in baselines.STATISTICAL
            }
    for place, result in zip(places, results, strict=True):
        start = 0
        for split, rows, count in place:
            for name, values in result.items():
                piece = None if values is None else values[start : start + count]
                if rows == slice(None):
                    out[split][name] = piece
                elif piece is not None:
                    out[split][name][rows] = piece  # type: ignore[index]
            start += count
    return out


def _parts(
    named: dict[str, WindowSet], one_fit: bool
) -> tuple[list[tuple[np.ndarray, np.ndarray]], list[list[tuple[str, slice, int]]]]:
    """The ``(history, origins)`` parts of ``named``'s windows (one per split and series;
    with ``one_fit``, one per series), and for each part where its forecasts go: ``(split,
    rows of the split's windows, how many)`` in the order of its origins."""
    groups: dict[Any, list[tuple[str, slice, np.ndarray, np.ndarray]]] = {}
    for split, windows in named.items():
        if not len(windows):
            continue
        if windows.ids is None:
            pieces = [(0, slice(None), windows.history, windows.origin)]
        else:
            offsets = windows.held.offsets
            pieces = [
                (i, rows, windows.history[offsets[i] : offsets[i + 1]], windows.local_origin[rows])
                for i, rows in series_slices(windows)
            ]
        for series, rows, history, origins in pieces:
            group = series if one_fit else (split, series)
            groups.setdefault(group, []).append((split, rows, history, origins))
    parts, places = [], []
    for group in groups.values():
        parts.append((group[0][2], np.concatenate([origins for *_, origins in group])))
        places.append([(split, rows, origins.size) for split, rows, _, origins in group])
    return parts, places


def _read_store(store: Path | None, keys: list[str]) -> dict[str, Statistical]:
    """The results of ``keys`` that ``store`` holds, each also handed to the baselines'
    cache so that they are not computed again (an unreadable store holds nothing)."""
    if store is None or not store.is_file():
        return {}
    found: dict[str, Statistical] = {}
    try:
        with np.load(store, allow_pickle=False) as saved:
            names = set(saved.files)
            for key in keys:
                if all(f"{key}-{name}" in names for name in baselines.STATISTICAL):
                    found[key] = {name: saved[f"{key}-{name}"] for name in baselines.STATISTICAL}
    except (OSError, ValueError) as err:
        log.warning("%s could not be read (%s); the baselines are computed again", store, err)
        return {}
    for key, result in found.items():
        baselines.cache.remember(key, result)
    return found


def _write_store(store: Path, results: dict[str, Statistical]) -> None:
    """Keep ``results`` (those where every model gave forecasts) in ``store``."""
    arrays = {
        f"{key}-{name}": values
        for key, result in results.items()
        if all(v is not None for v in result.values())
        for name, values in result.items()
    }
    if arrays:
        atomic_write(store, lambda handle: np.savez(handle, **arrays))


def add_interval_scores(
    scores: dict[str, Any],
    cfg: RunConfig,
    test: WindowSet,
    forecasts: dict[str, np.ndarray | None],
    model: Forecast,
    scored: dict[str, tuple[WindowSet, Forecast]],
    val_statistical: dict[str, np.ndarray | None],
    combination: Forecast | None = None,
) -> Forecast | None:
    """Add ``coverage``, ``width`` and ``wql`` to each forecaster's test ``scores`` (None where
    it has no intervals); returns the model's forecast if it has intervals (for the fan).

    The model's intervals are its own (calibrated with ``conformal``); a baseline's come from
    its residuals on the validation windows (:func:`stacklstm.baselines.residual_intervals`;
    ``val_statistical``: the statistical baselines' validation forecasts); the combination's
    are ``combination``'s (:func:`stacklstm.forecasting.combination.interval_forecast`).
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
        if name not in ("model", combine.NAME)
    }
    out[combine.NAME] = combination
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
            bars[name] = tqdm(
                total=total,
                desc=f"{name:<10}",
                unit="origin",
                leave=True,
                dynamic_ncols=True,
                position=len(bars),
            )
        bar = bars[name]
        bar.set_postfix_str(stage, refresh=False)
        bar.update(done - bar.n)

    try:
        yield progress
    finally:
        for bar in bars.values():
            bar.close()
