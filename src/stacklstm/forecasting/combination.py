"""The combination forecaster of the report and of ``predict --combine``.

The combination (:mod:`stacklstm.combine`, named :data:`stacklstm.combine.NAME`) is the
weighted mean of the model's forecasts and the statistical baselines' (AutoETS, AutoARIMA,
AutoTheta with ``baselines="all"``; the seasonal naive forecast with ``baselines="naive"``),
each weighed by the inverse of its mean absolute error on the validation windows (original
units, every validation origin, horizon step and target), normalised to sum to 1 (with
``combination="median"``: their median, value by value, :func:`stacklstm.combine.median`,
the weights still fitted and saved, naming the forecasters it takes; with
``"median_and_weighted"``: the mean of the two, :func:`stacklstm.combine.median_and_weighted`;
with ``"stacked"``: the weighted mean with one set of weights for every series,
:func:`stacklstm.combine.stacked_weights`, those of the lowest mean MASE on the validation
windows, with the seasonal naive forecast among the forecasters, where a weight of 0 leaves
it out). For a panel the other weights are fitted series by series, on that series'
validation windows; a series without validation windows (or without any usable error) takes
the weights of all the validation windows together (``pooled``). A forecaster without
forecasts or without a finite validation error is left out, and where a forecaster has no
finite forecasts from some origins of a series, the others' weights are renormalised there.

Its intervals are split-conformal, fitted on the same validation windows
(:func:`fit_halfwidths`): each window's absolute error of the combination at each horizon
step over the MASE scale of its series' rows up to the window's origin (the in-sample
seasonal naive MAE, :func:`origin_scales`), pooled over every window of every series; the
half-width of a level at a step is the conformal quantile of those errors (the ``ceil((n + 1)
level) / n`` empirical quantile), and a forecast's interval is its point plus and minus that
half-width times its own series' scale at its origin (:func:`interval_bounds`). Pooling the
scaled errors calibrates a panel of series of any scale on all its windows together, as the
pretrained models' intervals are (:mod:`stacklstm.forecasting.zeroshot_intervals`).

``report.json``'s ``combination``: ``{"method": the run's combination, "forecasters":
[...], "val_mae": {name: MAE or None}, "weights": {name: weight} or None}`` (an entry without
``method``, of an older report, is weighted), for a panel ``"per_series": {id: {"val_mae":
..., "weights": ..., "pooled": bool}}``, and with ``interval_levels`` ``"halfwidths":
{level: [[half-width per target] per step]}`` (in units of the series' scale; absent in a
report written before them: no intervals).

Example:
    >>> entry = fit_weights(splits.val, {"model": val_model}, "naive", 52)  # doctest: +SKIP
    >>> entry["weights"]  # doctest: +SKIP
    {'model': 0.62, 'seasonal_naive': 0.38}
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import baselines, combine
from ..data import WindowSet
from ..intervals import Forecast
from ..rundir.files import REPORT_FILE
from .baseline_forecasts import series_slices, statistical_of

Forecasts = dict[str, np.ndarray | None]


def members(kind: str, method: str = "weighted") -> tuple[str, ...]:
    """The forecasters the combination weighs for ``baselines=kind``: the model and the
    statistical baselines (``"all"``), or the model and the seasonal naive (``"naive"``);
    the ``"stacked"`` method weighs the seasonal naive forecast with ``"all"`` too (a fitted
    weight of 0 leaves it out)."""
    if kind != "all":
        return ("model", "seasonal_naive")
    naive = ("seasonal_naive",) if method == "stacked" else ()
    return ("model", *baselines.STATISTICAL, *naive)


def _mae(y_true: np.ndarray, forecast: np.ndarray | None) -> float | None:
    """The mean absolute error over every entry; None without forecasts, entries or a
    finite error."""
    if forecast is None or not np.size(y_true):
        return None
    value = float(np.mean(np.abs(np.asarray(y_true) - np.asarray(forecast, dtype=np.float64))))
    return value if np.isfinite(value) else None


def _weights_of(errors: dict[str, float | None]) -> dict[str, float] | None:
    """:func:`stacklstm.combine.weights` of ``errors``, or None when no error is usable."""
    try:
        return combine.weights(errors)
    except ValueError:
        return None


def fit_weights(
    val: WindowSet,
    forecasts: Forecasts,
    kind: str,
    season: int,
    method: str = "weighted",
    levels: Sequence[float] = (),
) -> dict[str, Any]:
    """``report.json``'s ``combination``: each forecaster's validation MAE and the weights.

    Args:
        val: The validation windows.
        forecasts: ``{name: (n_val, horizon, n_targets) or None}`` the validation forecasts
            in original units of the model and (``kind="all"``) the statistical baselines;
            the seasonal naive ones come from ``val``.
        kind: The run's ``baselines``: which forecasters are weighed (:func:`members`).
        season: The data's season (of the seasonal naive forecast).
        method: The run's ``combination``: ``"weighted"``, ``"median"``,
            ``"median_and_weighted"`` or ``"stacked"`` (the weights of
            :func:`stacklstm.combine.stacked_weights` on every window, the seasonal naive
            forecast weighed too, and a panel's every series given them).
        levels: The intervals' nominal coverages in (0, 1) (``interval_levels``): their
            half-widths are fitted on the combination's validation errors
            (:func:`fit_halfwidths`).

    Returns:
        ``{"method", "forecasters", "val_mae", "weights"}`` (``weights`` None when no
        forecaster has a finite validation error), for a panel also ``per_series``, and with
        ``levels`` (and a finite scaled error at every step) ``halfwidths`` (see the module).
    """
    stacked = method == "stacked"
    weighed = members(kind, method)
    naive = {"seasonal_naive": val.seasonal_naive(season)} if "seasonal_naive" in weighed else {}
    forecasts = {name: {**forecasts, **naive}.get(name) for name in weighed}
    y_true = val.y_true
    errors = {name: _mae(y_true, f) for name, f in forecasts.items()}
    pooled = _stacked_of(val, y_true, forecasts, season) if stacked else _weights_of(errors)
    entry: dict[str, Any] = {
        "method": method,
        "forecasters": list(forecasts),
        "val_mae": errors,
        "weights": pooled,
    }
    if val.ids is None:
        return _with_halfwidths(entry, val, forecasts, season, levels)
    per_series: dict[str, Any] = {
        name: {"val_mae": dict.fromkeys(forecasts), "weights": pooled, "pooled": True}
        for name in val.ids
    }
    for i, rows in series_slices(val):
        mine = {
            name: _mae(y_true[rows], None if f is None else f[rows])
            for name, f in forecasts.items()
        }
        own = None if stacked else _weights_of(mine)
        per_series[val.ids[i]] = {
            "val_mae": mine,
            "weights": pooled if own is None else own,
            "pooled": own is None,
        }
    entry["per_series"] = per_series
    return _with_halfwidths(entry, val, forecasts, season, levels)


def _stacked_of(
    val: WindowSet, y_true: np.ndarray, forecasts: Forecasts, season: int
) -> dict[str, float] | None:
    """:func:`stacklstm.combine.stacked_weights` of ``forecasts`` of ``val``'s targets
    ``y_true`` (each window scaled by :func:`origin_scales`), or None when nothing is left
    to fit on."""
    if not len(val):
        return None
    try:
        return combine.stacked_weights(forecasts, y_true, origin_scales(val, season)[:, None, :])
    except ValueError:
        return None


def _with_halfwidths(
    entry: dict[str, Any],
    val: WindowSet,
    forecasts: Forecasts,
    season: int,
    levels: Sequence[float],
) -> dict[str, Any]:
    """``entry`` with the ``halfwidths`` of the combination's intervals at ``levels`` (none
    without weights, levels, or a finite scaled validation error at some step)."""
    mixed = combined(val, forecasts, entry) if levels and len(val) else None
    if mixed is None:
        return entry
    halfwidths = fit_halfwidths(val.y_true, mixed, origin_scales(val, season), levels)
    if halfwidths is not None:
        entry["halfwidths"] = {name: h.tolist() for name, h in halfwidths.items()}
    return entry


def origin_scales(windows: WindowSet, season: int) -> np.ndarray:
    """``(n, n_targets)`` the MASE scale of each window: the mean absolute seasonal
    difference (lag ``season``; lag 1 where the rows are ``season`` or fewer) of its series'
    original values up to and including its origin (MASE's scale, as
    :func:`stacklstm.metrics.seasonal_scale` computes it for the rows seen before a
    forecast); NaN with a single row."""
    values, offsets = windows.history, windows.held.offsets
    out = np.full((len(windows), windows.n_targets), np.nan)
    for s in np.unique(windows.series):
        rows = values[offsets[s] : offsets[s + 1]]
        at = np.flatnonzero(windows.series == s)
        count = windows.local_origin[at] + 1  # rows up to each origin
        for lag in {1, season}:
            # cumulative sums of |y[t] - y[t - lag]|: the sum over the rows up to an origin
            diffs = np.abs(rows[lag:] - rows[:-lag]) if len(rows) > lag else rows[:0]
            sums = np.concatenate([np.zeros((1, rows.shape[1])), np.cumsum(diffs, axis=0)])
            use = count > season if lag == season else (count > 1) & (count <= season)
            n = count[use] - lag  # differences up to the origin
            out[at[use]] = sums[n] / n[:, None]
    return out


def fit_halfwidths(
    y_true: np.ndarray, forecast: np.ndarray, scales: np.ndarray, levels: Sequence[float]
) -> dict[str, np.ndarray] | None:
    """``{level name: (horizon, n_targets) half-widths}`` of split-conformal intervals in
    units of each series' scale: per step and target, the ``ceil((n + 1) level) / n``
    empirical quantile of the ``n`` finite scaled errors ``|y_true - forecast| / scale``
    of every window; None where a step has no finite error.

    Args:
        y_true: ``(n, horizon, n_targets)`` the validation targets (NaN past a series' end).
        forecast: ``(n, horizon, n_targets)`` the forecasts of the same windows.
        scales: ``(n, n_targets)`` each window's scale (:func:`origin_scales`).
        levels: Nominal coverages in (0, 1).

    Example:
        >>> y = np.zeros((4, 1, 1)); f = np.array([1.0, 2, 3, 4])[:, None, None]
        >>> fit_halfwidths(y, f, np.full((4, 1), 2.0), [0.5])["50"].tolist()
        [[1.5]]
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = np.abs(np.asarray(y_true) - np.asarray(forecast)) / scales[:, None, :]
    scaled[~np.isfinite(scaled)] = np.nan  # past a series' end, or a flat series: no scale
    out = {}
    for level in levels:
        half = np.empty(scaled.shape[1:])
        for k, j in np.ndindex(*half.shape):
            kept = np.sort(scaled[:, k, j][np.isfinite(scaled[:, k, j])])
            if not kept.size:
                return None
            rank = min(kept.size, math.ceil(round((kept.size + 1) * float(level), 9)))
            half[k, j] = kept[rank - 1]
        out[f"{round(100 * float(level), 8):g}"] = half
    return out


def interval_forecast(
    entry: dict[str, Any],
    windows: WindowSet,
    point: np.ndarray | None,
    season: int,
    quantiles: Sequence[float],
) -> Forecast | None:
    """The combination's forecasts ``point`` with its quantiles at ``quantiles`` (ascending,
    symmetric pairs around 0.5, the point) from :func:`interval_bounds`, as the report scores
    them; None without forecasts or where ``entry`` lacks a level."""
    if point is None or not quantiles:
        return None
    bounds = {0.5: point, **by_quantile(interval_bounds(entry, windows, point, season))}
    wanted = [round(float(q), 10) for q in quantiles]
    if not all(q in bounds for q in wanted):
        return None
    return Forecast(point, np.stack([bounds[q] for q in wanted], axis=-1), tuple(quantiles))


def by_quantile(
    intervals: dict[str, tuple[np.ndarray, np.ndarray]],
) -> dict[float, np.ndarray]:
    """``{quantile: bound}`` of :func:`interval_bounds`' ``{level name: (lo, hi)}``: the
    level ``L`` percent gives the quantiles ``(1 -+ L/100) / 2`` (rounded to 10 digits),
    ascending.

    Example:
        >>> by_quantile({"80": (np.zeros(1), np.ones(1))})
        {0.1: array([0.]), 0.9: array([1.])}
    """
    out = {}
    for name, (low, high) in intervals.items():
        fraction = float(name) / 100
        out[round((1 - fraction) / 2, 10)] = low
        out[round((1 + fraction) / 2, 10)] = high
    return dict(sorted(out.items()))


def interval_bounds(
    entry: dict[str, Any], windows: WindowSet, point: np.ndarray, season: int
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """``{level name: (lo, hi)}``, each ``(n, horizon, n_targets)``: the combination's
    intervals around its forecasts ``point`` from the origins of ``windows``, with the
    half-widths of ``entry`` (:func:`fit_weights`) times each window's scale
    (:func:`origin_scales`); ``{}`` for an entry without half-widths."""
    scales = origin_scales(windows, season)[:, None, :]
    out = {}
    for name, half in (entry.get("halfwidths") or {}).items():
        width = np.asarray(half, dtype=np.float64)[None] * scales
        out[name] = (point - width, point + width)
    return out


def _mean(
    forecasts: Forecasts, weights: dict[str, float] | None, shape: tuple, method: str
) -> np.ndarray:
    """:func:`stacklstm.combine.weighted_mean` (with ``method="median"``
    :func:`stacklstm.combine.median` of the forecasters ``weights`` names, with
    ``"median_and_weighted"`` the mean of the two), or NaN of ``shape`` where nothing is
    left."""
    if weights is None:
        return np.full(shape, np.nan)
    try:
        if method == "median":
            return combine.median({name: forecasts.get(name) for name in weights})
        if method == "median_and_weighted":
            return combine.median_and_weighted(forecasts, weights)
        return combine.weighted_mean(forecasts, weights)
    except ValueError:  # no forecaster with a weight has finite forecasts here
        return np.full(shape, np.nan)


def combined(windows: WindowSet, forecasts: Forecasts, entry: dict[str, Any]) -> np.ndarray | None:
    """``(n, horizon, n_targets)`` the combination's forecasts from the origins of
    ``windows``: the weighted mean of ``forecasts`` (each ``(n, horizon, n_targets)`` or
    None) with ``entry``'s weights (of :func:`fit_weights`; with its ``method`` ``"median"``,
    the median of the forecasters the weights name; ``"median_and_weighted"``, the mean of
    the two), series by series for a panel (a series the weights do not name takes the
    pooled ones); NaN where no weighed forecaster has finite forecasts; None when ``entry``
    has no weights."""
    if not entry.get("weights"):
        return None
    shape = (len(windows), windows.horizon, windows.n_targets)
    method = entry.get("method", "weighted")
    if windows.ids is None:
        return _mean(forecasts, entry.get("weights"), shape, method)
    out = np.full(shape, np.nan)
    per_series = entry.get("per_series") or {}
    for i, rows in series_slices(windows):
        weights = (per_series.get(windows.ids[i]) or {}).get("weights", entry.get("weights"))
        part = {name: None if f is None else f[rows] for name, f in forecasts.items()}
        out[rows] = _mean(part, weights, out[rows].shape, method)
    return out


def saved_weights(run_dir: str | Path) -> dict[str, Any]:
    """The ``combination`` of the run's ``report.json``.

    Raises:
        ValueError: the run has no report, or its report has no combination weights (a
            run evaluated before the report had them, or without a usable validation
            error): evaluate it again with ``stacklstm evaluate``.
    """
    path = Path(run_dir) / REPORT_FILE
    again = f"evaluate the run again (`stacklstm evaluate {run_dir}`) to write them"
    try:
        report = json.loads(path.read_text())
    except FileNotFoundError:
        raise ValueError(
            f"the combination needs the weights of {path}, which is missing; {again}"
        ) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON ({err}); {again}") from None
    entry = report.get(combine.NAME) if isinstance(report, dict) else None
    if not isinstance(entry, dict) or not entry.get("weights"):
        raise ValueError(
            f"{path} holds no combination weights (the run was evaluated before the report "
            f"had them, or no forecaster had a finite validation error); {again}"
        )
    per_series = entry.get("per_series") or {}
    tables = {"weights": entry["weights"]} | {
        f"per_series[{k!r}].weights": s.get("weights")
        for k, s in (per_series.items() if isinstance(per_series, dict) else ())
        if isinstance(s, dict) and s.get("weights") is not None
    }
    for where, table in tables.items():
        if not _usable_weights(table):
            raise ValueError(
                f"{path}: the combination's {where} must map names to finite weights >= 0, "
                f"at least one of them positive, got {table!r} (edited?); {again}"
            )
    return entry


def _usable_weights(table: object) -> bool:
    """Whether ``table`` is ``{name: weight}`` with finite weights >= 0, one of them > 0."""
    if not isinstance(table, dict) or not table:
        return False
    values = list(table.values())
    if not all(isinstance(w, int | float) and not isinstance(w, bool) for w in values):
        return False
    return all(math.isfinite(w) and w >= 0 for w in values) and any(w > 0 for w in values)


def predict_combination(
    run_dir: str | Path, windows: WindowSet, model: np.ndarray, season: int
) -> tuple[np.ndarray, dict[str, tuple[np.ndarray, np.ndarray]]]:
    """``(point, intervals)``: ``point`` ``(n, horizon, n_targets)`` the combination's
    forecasts from every origin of ``windows``: the run's saved weights
    (:func:`saved_weights`) on the model's forecasts ``model`` and the baselines' from the
    same origins (the seasonal naive of ``windows``; the statistical ones fitted once on the
    rows up to each series' first origin, then forecasting from every origin without
    refitting, as :func:`stacklstm.baselines.statistical_forecasts`); ``intervals`` its
    :func:`interval_bounds` (``{}`` for a report without the half-widths).

    Raises:
        ValueError: the run has no weights, or its weights need the statistical baselines
            and statsforecast is not installed.
    """
    entry = saved_weights(run_dir)
    tables = [entry["weights"]] + [
        s.get("weights") for s in (entry.get("per_series") or {}).values()
    ]
    needed = {name for table in tables if table for name, w in table.items() if w > 0}
    model = np.asarray(model, dtype=np.float64)
    # padded windows (start_padding) start a series: the statistical models are fitted at
    # its first origin with a full window, as without padding, and the origins before it
    # by a fit of their own at its first row (one call fits both parts)
    full = windows.local_origin >= windows.window - 1 + int(windows.difference)
    rows = {key: np.flatnonzero(mask) for key, mask in (("padded", ~full), ("full", full))}
    parts = {key: windows.take(r) for key, r in rows.items() if r.size}
    statistical: dict[str, Forecasts] = {}
    if needed & set(baselines.STATISTICAL):
        if not baselines.statsforecast_available():
            names = ", ".join(sorted(needed & set(baselines.STATISTICAL)))
            raise ValueError(
                f"the run's combination weighs the statistical baselines ({names}); they "
                f"need statsforecast, which is not installed: {baselines.INSTALL} (or "
                "predict without `combine`)"
            )
        statistical = statistical_of(parts, season)
    naive = windows.seasonal_naive(season) if "seasonal_naive" in needed else None
    out = np.full(model.shape, np.nan)
    for key, part in parts.items():
        forecasts: Forecasts = {"model": model[rows[key]], **statistical.get(key, {})}
        if naive is not None:
            forecasts["seasonal_naive"] = naive[rows[key]]
        mixed = combined(part, forecasts, entry)
        assert mixed is not None  # saved_weights refuses an entry without weights
        out[rows[key]] = mixed
    return out, interval_bounds(entry, windows, out, season)
