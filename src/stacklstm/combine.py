"""Combining forecasters: the model's forecast and the statistical baselines', weighed by how
well each did on the validation rows.

A combination of forecasts is, on average, more accurate than the forecasters it combines
(Bates and Granger, 1969; the M competitions' combinations of exponential smoothing, ARIMA and
Theta): each forecaster's weight is the inverse of its mean absolute error on the validation
windows, normalised to sum to one, so a forecaster that did badly there counts little and one
that did well counts most. Forecasters without a finite error or forecast are left out.
:func:`median` is the other combination the M competitions report: the median of the
forecasts, value by value, with no weights to fit. :func:`median_and_weighted` is the mean of
the two: the weighted mean shrunk halfway to the median, robust to a forecaster that did well
on the validation windows by chance and still led by the one that did best.
:func:`stacked_weights` fits one set of weights instead (stacking, or "optimal" combination
weights): those whose weighted mean has the lowest mean scaled absolute error on the
validation windows, of every series of a panel at once.

Example:
    >>> import numpy as np
    >>> forecasts = {"lstm": np.array([10.0, 12.0]), "auto_ets": np.array([14.0, 16.0])}
    >>> weights({"lstm": 1.0, "auto_ets": 3.0})
    {'lstm': 0.75, 'auto_ets': 0.25}
    >>> combine(forecasts, {"lstm": 1.0, "auto_ets": 3.0}).tolist()
    [11.0, 13.0]
    >>> weighted_mean(forecasts, {"lstm": 0.75, "auto_ets": 0.25}).tolist()
    [11.0, 13.0]
    >>> median({**forecasts, "auto_theta": np.array([11.0, np.nan])}).tolist()
    [11.0, 14.0]
    >>> median_and_weighted(forecasts, {"lstm": 0.75, "auto_ets": 0.25}).tolist()
    [11.5, 13.5]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

import numpy as np

__all__ = [
    "NAME",
    "combine",
    "median",
    "median_and_weighted",
    "stacked_weights",
    "weighted_mean",
    "weights",
]

#: The report key and forecast column of the combination.
NAME = "combination"


def weights(errors: Mapping[str, float]) -> dict[str, float]:
    """``{name: weight}``: the inverse of each finite, non-negative validation error,
    normalised to sum to 1; names whose error is missing, negative or not finite are left
    out. Forecasters with an error of 0 share all the weight.

    Raises:
        ValueError: when no error is usable.
    """
    usable = {
        name: float(e)
        for name, e in errors.items()
        if e is not None and np.isfinite(e) and float(e) >= 0.0
    }
    if not usable:
        raise ValueError(
            f"no forecaster has a finite validation error to weigh it by, got {dict(errors)}"
        )
    perfect = [name for name, e in usable.items() if e == 0.0]
    if perfect:
        return {name: (1.0 / len(perfect) if name in perfect else 0.0) for name in usable}
    inverse = {name: 1.0 / e for name, e in usable.items()}
    total = sum(inverse.values())
    return {name: v / total for name, v in inverse.items()}


def combine(forecasts: Mapping[str, np.ndarray], errors: Mapping[str, float]) -> np.ndarray:
    """The weighted mean of ``forecasts`` (arrays of one shape), weighed by :func:`weights` of
    ``errors``; a forecaster with a non-finite value anywhere, or without an error, is left out.

    Args:
        forecasts: ``{name: array}``, every array of the same shape (e.g. ``(n, horizon,
            n_targets)``).
        errors: ``{name: validation error}`` (mean absolute error, any scale shared by all).

    Returns:
        An array of the forecasts' shape, float64.

    Raises:
        ValueError: arrays of different shapes, or no forecaster left to combine.
    """
    arrays = {name: np.asarray(f, dtype=np.float64) for name, f in forecasts.items()}
    usable = {
        name: errors[name]
        for name, a in arrays.items()
        if np.isfinite(a).all() and errors.get(name) is not None
    }
    w = weights(usable)
    # every array is given (a weight of 0 where unused), so all of them are shape-checked
    return weighted_mean(arrays, {name: w.get(name, 0.0) for name in arrays})


def weighted_mean(
    forecasts: Mapping[str, np.ndarray | None], weights: Mapping[str, float]
) -> np.ndarray:
    """The mean of ``forecasts`` weighed by given ``weights`` (of :func:`weights`), the
    weights of the forecasters used renormalised to sum to 1: a forecaster without a weight,
    without forecasts (None) or with a non-finite value anywhere is left out.

    Args:
        forecasts: ``{name: array or None}``, the arrays of one shape (e.g. ``(n, horizon,
            n_targets)``).
        weights: ``{name: weight >= 0}``.

    Returns:
        An array of the forecasts' shape, float64.

    Raises:
        ValueError: arrays of different shapes, a negative or non-finite weight, or no
            forecaster with a positive weight left to combine.
    """
    bad = {name: w for name, w in weights.items() if not (np.isfinite(w) and float(w) >= 0.0)}
    if bad:
        raise ValueError(f"weights must be finite and >= 0, got {bad}")
    arrays = {
        name: np.asarray(f, dtype=np.float64)
        for name, f in forecasts.items()
        if f is not None and name in weights
    }
    _check_one_shape(arrays.values())
    used = {name: float(weights[name]) for name, a in arrays.items() if np.isfinite(a).all()}
    total = sum(used.values())
    if total <= 0.0:
        raise ValueError(
            f"no forecaster with a positive weight is left to combine: weights for "
            f"{sorted(weights)}, finite forecasts of {sorted(used)}"
        )
    return sum((w / total) * arrays[name] for name, w in used.items() if w > 0.0)


def median(forecasts: Mapping[str, np.ndarray | None]) -> np.ndarray:
    """The median of ``forecasts``, value by value (with an even number of them, the mean of
    the middle two): a forecaster without forecasts (None) is left out, and so is a
    non-finite value of one (the median of the others there; NaN where none is finite).

    Args:
        forecasts: ``{name: array or None}``, the arrays of one shape.

    Returns:
        An array of the forecasts' shape, float64.

    Raises:
        ValueError: arrays of different shapes, or no forecasts at all.
    """
    arrays = [np.asarray(f, dtype=np.float64) for f in forecasts.values() if f is not None]
    if not arrays:
        raise ValueError("median needs at least one forecast, got none")
    _check_one_shape(arrays)
    stacked = np.stack(arrays)
    stacked[~np.isfinite(stacked)] = np.nan
    out = np.full(stacked.shape[1:], np.nan)
    seen = np.isfinite(stacked).any(axis=0)
    out[seen] = np.nanmedian(stacked[:, seen], axis=0)
    return out


def median_and_weighted(
    forecasts: Mapping[str, np.ndarray | None], weights: Mapping[str, float]
) -> np.ndarray:
    """The mean, value by value, of :func:`median` of the forecasters ``weights`` names and
    :func:`weighted_mean` of ``forecasts`` with ``weights``.

    Args:
        forecasts: ``{name: array or None}``, the arrays of one shape.
        weights: ``{name: weight >= 0}`` (of :func:`weights`).

    Returns:
        An array of the forecasts' shape, float64.

    Raises:
        ValueError: as :func:`weighted_mean` and :func:`median` raise.
    """
    named = {name: forecasts.get(name) for name in weights}
    return 0.5 * (median(named) + weighted_mean(forecasts, weights))


#: :func:`stacked_weights` fits on at most this many values (evenly spaced among them beyond)
MAX_STACKED_VALUES = 50_000


def stacked_weights(
    forecasts: Mapping[str, np.ndarray | None], y_true: np.ndarray, scales: np.ndarray
) -> dict[str, float]:
    """``{name: weight}``: the weights, each >= 0 and summing to 1, whose weighted mean of
    ``forecasts`` has the lowest mean absolute error over ``scales`` (MASE's, where
    ``scales`` are each series' in-sample seasonal naive MAE). One set of weights for every
    value given: fitted on the validation windows of a panel's every series, it is the
    stacked combination (``combination="stacked"``). A linear program (each error split
    into its positive and negative parts), solved by scipy's HiGHS (interior point, then
    crossover to a vertex: about 3 s for 50,000 values on one core); a value where
    ``y_true``, its scale or a forecast is not finite, or the scale not positive, is left
    out (beyond :data:`MAX_STACKED_VALUES` values, that many are fitted, evenly spaced among
    them), and so is a forecaster without forecasts (None).

    Args:
        forecasts: ``{name: array or None}``, the arrays of ``y_true``'s shape (e.g.
            ``(n, horizon, n_targets)``).
        y_true: The values forecast.
        scales: Each value's scale, broadcastable to ``y_true``'s shape (e.g. ``(n, 1,
            n_targets)``).

    Returns:
        The weights of the forecasters given, those left at 0 included.

    Raises:
        ValueError: arrays of different shapes, or no forecaster or no value to fit on.

    Example:
        >>> w = stacked_weights(
        ...     {"a": np.array([1.0, 1.0]), "b": np.array([3.0, 3.0])},
        ...     np.array([2.5, 2.5]), np.ones(2))
        >>> {name: round(v, 6) for name, v in w.items()}
        {'a': 0.25, 'b': 0.75}
    """
    arrays = {n: np.asarray(f, dtype=np.float64) for n, f in forecasts.items() if f is not None}
    if not arrays:
        raise ValueError("stacked_weights needs at least one forecast, got none")
    y = np.asarray(y_true, dtype=np.float64)
    _check_one_shape([y, *arrays.values()])
    scale = np.broadcast_to(np.asarray(scales, dtype=np.float64), y.shape)
    stack = np.stack([a.ravel() for a in arrays.values()], axis=1)  # (values, forecasters)
    with np.errstate(invalid="ignore"):
        keep = np.isfinite(y.ravel()) & np.isfinite(scale.ravel()) & (scale.ravel() > 0)
    keep &= np.isfinite(stack).all(axis=1)
    if not keep.any():
        raise ValueError(
            "stacked_weights found no value with a finite target, a positive finite scale and "
            f"every forecast finite (of {y.size} values, forecasters {sorted(arrays)})"
        )
    if len(arrays) == 1:
        return {next(iter(arrays)): 1.0}
    at = np.flatnonzero(keep)
    if at.size > MAX_STACKED_VALUES:
        at = at[np.linspace(0, at.size - 1, MAX_STACKED_VALUES).round().astype(np.int64)]
    f, target, cost = stack[at], y.ravel()[at], 1.0 / (at.size * scale.ravel()[at])
    from scipy import sparse
    from scipy.optimize import linprog

    m, k = f.shape
    eye = sparse.identity(m, format="csr")
    ones = sparse.csr_matrix(np.concatenate([np.ones(k), np.zeros(2 * m)])[None])
    result = linprog(  # min cost . (u + v)  with  f w + u - v = y,  sum w = 1,  w, u, v >= 0
        np.concatenate([np.zeros(k), cost, cost]),
        A_eq=sparse.vstack([sparse.hstack([sparse.csr_matrix(f), eye, -eye]), ones]),
        b_eq=np.concatenate([target, [1.0]]),
        bounds=(0, None),
        method="highs-ipm",  # with crossover: a vertex, as exact as the simplex, far faster
    )
    if not result.success:  # pragma: no cover - a feasible, bounded program
        raise ValueError(f"the stacked weights' linear program failed: {result.message}")
    w = np.clip(result.x[:k], 0.0, None)
    return {name: float(v) for name, v in zip(arrays, w / w.sum(), strict=True)}


def _check_one_shape(arrays: Iterable[np.ndarray]) -> None:
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise ValueError(f"forecasts must share one shape, got {sorted(map(str, shapes))}")
