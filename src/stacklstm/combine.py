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

__all__ = ["NAME", "combine", "median", "median_and_weighted", "weighted_mean", "weights"]

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


def _check_one_shape(arrays: Iterable[np.ndarray]) -> None:
    shapes = {a.shape for a in arrays}
    if len(shapes) > 1:
        raise ValueError(f"forecasts must share one shape, got {sorted(map(str, shapes))}")
