"""The combination forecaster of the report and of ``predict --combine``.

The combination (:mod:`stacklstm.combine`, named :data:`stacklstm.combine.NAME`) is the
weighted mean of the model's forecasts and the statistical baselines' (AutoETS, AutoARIMA,
AutoTheta with ``baselines="all"``; the seasonal naive forecast with ``baselines="naive"``),
each weighed by the inverse of its mean absolute error on the validation windows (original
units, every validation origin, horizon step and target), normalised to sum to 1 (with
``combination="median"``: their median, value by value, :func:`stacklstm.combine.median`;
the weights are still fitted and saved, and name the forecasters it takes). For a
panel the weights are fitted series by series, on that series' validation windows; a series
without validation windows (or without any usable error) takes the weights of all the
validation windows together (``pooled``). A forecaster without forecasts or without a finite
validation error is left out, and where a forecaster has no finite forecasts from some
origins of a series, the others' weights are renormalised there. The combination gives
point forecasts only (no intervals).

``report.json``'s ``combination``: ``{"method": "weighted" or "median", "forecasters":
[...], "val_mae": {name: MAE or None}, "weights": {name: weight} or None}`` (an entry without
``method``, of an older report, is weighted), and for a panel ``"per_series": {id: {"val_mae":
..., "weights": ..., "pooled": bool}}``.

Example:
    >>> entry = fit_weights(splits.val, {"model": val_model}, "naive", 52)  # doctest: +SKIP
    >>> entry["weights"]  # doctest: +SKIP
    {'model': 0.62, 'seasonal_naive': 0.38}
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from .. import baselines, combine
from ..data import WindowSet
from ..rundir.files import REPORT_FILE
from .baseline_forecasts import series_slices, statistical_of

Forecasts = dict[str, np.ndarray | None]


def members(kind: str) -> tuple[str, ...]:
    """The forecasters the combination weighs for ``baselines=kind``: the model and the
    statistical baselines (``"all"``), or the model and the seasonal naive (``"naive"``)."""
    return ("model", *baselines.STATISTICAL) if kind == "all" else ("model", "seasonal_naive")


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
    val: WindowSet, forecasts: Forecasts, kind: str, season: int, method: str = "weighted"
) -> dict[str, Any]:
    """``report.json``'s ``combination``: each forecaster's validation MAE and the weights.

    Args:
        val: The validation windows.
        forecasts: ``{name: (n_val, horizon, n_targets) or None}`` the validation forecasts
            in original units of the model and (``kind="all"``) the statistical baselines;
            the seasonal naive ones come from ``val``.
        kind: The run's ``baselines``: which forecasters are weighed (:func:`members`).
        season: The data's season (of the seasonal naive forecast).
        method: The run's ``combination``: ``"weighted"`` or ``"median"``.

    Returns:
        ``{"method", "forecasters", "val_mae", "weights"}`` (``weights`` None when no
        forecaster has a finite validation error), for a panel also ``per_series`` (see the
        module).
    """
    naive = {"seasonal_naive": val.seasonal_naive(season)} if kind == "naive" else {}
    forecasts = {name: {**forecasts, **naive}.get(name) for name in members(kind)}
    y_true = val.y_true
    errors = {name: _mae(y_true, f) for name, f in forecasts.items()}
    pooled = _weights_of(errors)
    entry: dict[str, Any] = {
        "method": method,
        "forecasters": list(forecasts),
        "val_mae": errors,
        "weights": pooled,
    }
    if val.ids is None:
        return entry
    per_series: dict[str, Any] = {
        name: {"val_mae": dict.fromkeys(forecasts), "weights": pooled, "pooled": True}
        for name in val.ids
    }
    for i, rows in series_slices(val):
        mine = {
            name: _mae(y_true[rows], None if f is None else f[rows])
            for name, f in forecasts.items()
        }
        own = _weights_of(mine)
        per_series[val.ids[i]] = {
            "val_mae": mine,
            "weights": pooled if own is None else own,
            "pooled": own is None,
        }
    entry["per_series"] = per_series
    return entry


def _mean(
    forecasts: Forecasts, weights: dict[str, float] | None, shape: tuple, method: str
) -> np.ndarray:
    """:func:`stacklstm.combine.weighted_mean` (or with ``method="median"``
    :func:`stacklstm.combine.median` of the forecasters ``weights`` names), or NaN of
    ``shape`` where nothing is left."""
    if weights is None:
        return np.full(shape, np.nan)
    try:
        if method == "median":
            return combine.median({name: forecasts.get(name) for name in weights})
        return combine.weighted_mean(forecasts, weights)
    except ValueError:  # no forecaster with a weight has finite forecasts here
        return np.full(shape, np.nan)


def combined(windows: WindowSet, forecasts: Forecasts, entry: dict[str, Any]) -> np.ndarray | None:
    """``(n, horizon, n_targets)`` the combination's forecasts from the origins of
    ``windows``: the weighted mean of ``forecasts`` (each ``(n, horizon, n_targets)`` or
    None) with ``entry``'s weights (of :func:`fit_weights`; with its ``method`` ``"median"``,
    the median of the forecasters the weights name), series by series for a panel
    (a series the weights do not name takes the pooled ones); NaN where no weighed
    forecaster has finite forecasts; None when ``entry`` has no weights."""
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
) -> np.ndarray:
    """``(n, horizon, n_targets)`` the combination's forecasts from every origin of
    ``windows``: the run's saved weights (:func:`saved_weights`) on the model's forecasts
    ``model`` and the baselines' from the same origins (the seasonal naive of ``windows``;
    the statistical ones fitted once on the rows up to each series' first origin, then
    forecasting from every origin without refitting, as
    :func:`stacklstm.baselines.statistical_forecasts`).

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
    return out
