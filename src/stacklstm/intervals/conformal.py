"""Split-conformal calibration per horizon step and target (see :mod:`stacklstm.intervals`).

Example:
    >>> import numpy as np
    >>> conformal_quantile(np.array([3.0, 1.0, 2.0]), 0.5).item()  # ceil(4 * 0.5) = 2nd
    2.0
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from .heads import Forecast, check_quantiles, interval_pairs, level_key

log = logging.getLogger(__name__)


def conformal_quantile(scores: np.ndarray, level: float, *, warn: bool = True) -> np.ndarray:
    """The split-conformal offset of ``scores (n, ...)`` along axis 0: the
    ``ceil((n + 1) * level)``-th smallest score. With too few scores for that rank (``n <
    level / (1 - level)``, roughly), the largest score is used and a warning says so (unless
    ``warn`` is False: the report's baselines, whose intervals nobody asked the model for).

    Example:
        >>> conformal_quantile(np.arange(1.0, 11.0), 0.8).item()  # ceil(11 * 0.8) = 9th
        9.0
    """
    scores = np.sort(np.asarray(scores, np.float64), axis=0)
    n = scores.shape[0]
    if n == 0:
        raise ValueError("conformal calibration needs at least one validation window")
    rank = math.ceil((n + 1) * level - 1e-9)
    if rank > n:
        if warn:
            log.warning(
                "conformal: %d validation windows are too few for a %s interval's guarantee "
                "(it needs %d); using the largest score",
                n,
                level_key(level),
                math.ceil(level / (1 - level)),
            )
        rank = n
    return scores[rank - 1]


@dataclass(frozen=True)
class Calibration:
    """Conformal offsets: ``offsets[i, k, j]`` widens the interval at ``levels[i]`` of horizon
    step ``k`` and target ``j`` on both sides (negative: narrows it).

    Attributes:
        levels: ``(L,)`` interval levels.
        quantiles: The quantile levels of the forecasts it calibrates.
        offsets: ``(L, horizon, n_targets)``.
        n_windows: Validation windows it was computed from.
    """

    levels: tuple[float, ...]
    quantiles: tuple[float, ...]
    offsets: np.ndarray
    n_windows: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-able."""
        return {
            "levels": list(self.levels),
            "quantiles": list(self.quantiles),
            "offsets": self.offsets.tolist(),
            "n_windows": self.n_windows,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        """The inverse of :meth:`to_dict`."""
        offsets = np.asarray(data["offsets"], np.float64)
        return cls(tuple(data["levels"]), tuple(data["quantiles"]), offsets, int(data["n_windows"]))


def conformal_offsets(y: np.ndarray, forecast: Forecast, *, warn: bool = True) -> Calibration:
    """CQR offsets from validation targets ``y (n, horizon, n_targets)`` and their forecasts
    (quantiles at ``forecast.levels``), per interval level, horizon step and target.

    Example:
        >>> y = np.arange(10.0).reshape(10, 1, 1)
        >>> f = Forecast(np.full((10, 1, 1), 4.5)).with_levels((0.1, 0.5, 0.9))
        >>> cal = conformal_offsets(y, f)  # scores |y - 4.5|: 0.5 0.5 1.5 1.5 ... 4.5 4.5
        >>> cal.levels, cal.offsets.ravel().tolist()  # ceil(11 * 0.8) = 9th smallest
        ((0.8,), [4.5])
    """
    q = forecast.quantiles
    if q is None:
        raise ValueError("conformal_offsets needs quantiles; use Forecast.with_levels")
    y = check_quantiles(y, q)
    pairs = interval_pairs(forecast.levels)
    offsets = np.zeros((len(pairs), *y.shape[1:]))
    for i, (level, lo, hi) in enumerate(pairs):
        scores = np.maximum(q[..., lo] - y, y - q[..., hi])  # (n, horizon, n_targets)
        offsets[i] = conformal_quantile(scores, level, warn=warn)
    levels = tuple(level for level, _, _ in pairs)
    return Calibration(levels, tuple(forecast.levels), offsets, int(y.shape[0]))


def calibrate(forecast: Forecast, calibration: Calibration) -> Forecast:
    """``forecast``'s intervals widened (or narrowed) by ``calibration``, then sorted per
    entry so that they stay nested; the point forecast is unchanged."""
    forecast = forecast.with_levels(calibration.quantiles)
    q = forecast.quantiles.copy()
    pairs = interval_pairs(forecast.levels)
    if tuple(level for level, _, _ in pairs) != calibration.levels:
        raise ValueError(f"the calibration is for levels {calibration.levels}")
    for i, (_, lo, hi) in enumerate(pairs):
        q[..., lo] -= calibration.offsets[i]
        q[..., hi] += calibration.offsets[i]
    return Forecast(forecast.point, np.sort(q, axis=-1), forecast.levels)
