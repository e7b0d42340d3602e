"""Interval scores: coverage, mean width, weighted quantile loss (see
:mod:`stacklstm.intervals`).

Example:
    >>> import numpy as np
    >>> pinball(np.array([3.0]), np.array([2.0]), 0.9).tolist()
    [0.9]
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .heads import Forecast, check_quantiles, interval_pairs, level_key


def pinball(y: np.ndarray, pred: np.ndarray, level: float) -> np.ndarray:
    """Elementwise pinball loss of the ``level`` quantile ``pred`` against ``y`` (numpy).

    Example:
        >>> pinball(np.array([1.0, 3.0]), np.array([2.0, 2.0]), 0.9).tolist()
        [0.09999999999999998, 0.9]
    """
    u = np.asarray(y, np.float64) - np.asarray(pred, np.float64)
    return np.maximum(level * u, (level - 1) * u)


def interval_scores(y: np.ndarray, forecast: Forecast) -> dict[str, Any]:
    """The interval scores of ``forecast`` (quantiles at its levels) against ``y (n, horizon,
    n_targets)``, over all entries.

    Returns:
        ``{"coverage": {level: share of targets inside [lo, hi]}, "width": {level: mean hi -
        lo}, "wql": mean over the quantile levels of 2 * sum(pinball) / sum(|y|)}`` (the
        weighted quantile loss, an estimate of the CRPS relative to the targets' size; None
        when every target is 0). Levels are :func:`level_key` strings.

    Example:
        >>> y = np.array([1.0, 2.0, 5.0]).reshape(3, 1, 1)
        >>> q = np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]).reshape(3, 1, 1, 3)
        >>> s = interval_scores(y, Forecast(q[..., 1], q, (0.1, 0.5, 0.9)))
        >>> s["coverage"], s["width"]
        ({'0.8': 0.6666666666666666}, {'0.8': 2.0})
    """
    q = forecast.quantiles
    if q is None:
        raise ValueError("interval_scores needs a forecast with quantiles")
    y = check_quantiles(y, q)
    coverage, width = {}, {}
    for level, lo, hi in interval_pairs(forecast.levels):
        inside = (q[..., lo] <= y) & (y <= q[..., hi])
        coverage[level_key(level)] = float(np.mean(inside))
        width[level_key(level)] = float(np.mean(q[..., hi] - q[..., lo]))
    total = float(np.sum(np.abs(y)))
    wql = None
    if total > 0:
        per_level = [
            2 * float(np.sum(pinball(y, q[..., i], level))) / total
            for i, level in enumerate(forecast.levels)
        ]
        wql = float(np.mean(per_level))
    return {"coverage": coverage, "width": width, "wql": wql}
