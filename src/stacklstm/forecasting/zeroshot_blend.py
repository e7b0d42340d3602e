"""The zero-shot forecast blended with the classical benchmarks, the blend chosen on the
table's own last windows.

A pretrained model forecasts series it never saw; where they differ from what it was trained
on (a steady yearly growth, the long drifting seasons of tourism arrivals), the two simplest
forecasts of the field can be better: the seasonal naive forecast (the last season repeated)
and the seasonal naive forecast with drift (plus the mean change per season, the line
through a yearly series' first and last values). :func:`choose_blend` picks, for a whole
table, the weight of the model's forecast against one of them (:data:`WEIGHTS`) with the
lowest mean scaled error on the table's own last windows (each series forecast from ``h``
rows before its end, on its rows up to there alone: the windows the intervals are fitted on,
:func:`stacklstm.forecasting.zeroshot.own_windows`). The model alone is one of the
candidates, and the first: where the blends do no better on the windows, the forecast is the
model's.

Example:
    >>> values, bounds = np.array([1.0, 2, 3, 4, 10, 20]), np.array([0, 4, 6])
    >>> benchmark_forecasts(values, bounds, 1, 2)["seasonal_drift"].tolist()
    [[5.0, 6.0], [30.0, 40.0]]
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

__all__ = [
    "BENCHMARKS",
    "MODEL_ALONE",
    "WEIGHTS",
    "Blend",
    "OwnWindows",
    "benchmark_forecasts",
    "choose_blend",
]

#: The forecasts the model's forecast is blended with (:func:`benchmark_forecasts`).
BENCHMARKS = ("seasonal_naive", "seasonal_drift")
#: The weights of the model's forecast in the blends :func:`choose_blend` weighs against
#: the model alone (0: the benchmark alone).
WEIGHTS = (0.75, 0.5, 0.25, 0.0)


@dataclass(frozen=True)
class Blend:
    """``weight`` times the model's forecast plus ``1 - weight`` times ``benchmark``'s."""

    weight: float
    benchmark: str

    def apply(self, point: np.ndarray, benchmarks: dict[str, np.ndarray]) -> np.ndarray:
        """The blend of ``point`` ``(n, steps)`` and ``benchmarks[self.benchmark]`` (same
        shape)."""
        if self.weight == 1.0:
            return point
        return self.weight * point + (1.0 - self.weight) * benchmarks[self.benchmark]

    def describe(self) -> str:
        """In words: ``"the model alone"`` or ``"0.25 x the model + 0.75 x seasonal_drift"``."""
        if self.weight == 1.0:
            return "the model alone"
        return f"{self.weight:g} x the model + {1 - self.weight:g} x {self.benchmark}"


#: The forecast where no blend is chosen.
MODEL_ALONE = Blend(1.0, BENCHMARKS[0])


def benchmark_forecasts(
    values: np.ndarray, bounds: np.ndarray, season: int, steps: int
) -> dict[str, np.ndarray]:
    """``{name: (n_series, steps)}`` the :data:`BENCHMARKS` from the end of each series:
    ``seasonal_naive``, its last ``season`` values repeated (its last value where it has
    ``season`` rows or fewer); ``seasonal_drift``, that plus, at step ``k``, ``ceil(k /
    season)`` times its mean change over a season (the change over one step where it has
    ``season`` rows or fewer; none for one row).

    Args:
        values: ``(rows,)`` the series' values, one after the other.
        bounds: ``(n_series + 1,)`` where each series starts in ``values``, then the end.
        season: The steps of a season (1: none).
        steps: How many steps to forecast.

    Example:
        >>> values, bounds = np.array([1.0, 5, 2, 6, 3, 7, 4]), np.array([0, 7])
        >>> out = benchmark_forecasts(values, bounds, 2, 3)
        >>> out["seasonal_naive"].tolist(), out["seasonal_drift"].tolist()
        ([[7.0, 4.0, 7.0]], [[8.0, 5.0, 9.0]])
    """
    naive = np.empty((len(bounds) - 1, steps))
    drift = np.empty_like(naive)
    k = np.arange(1, steps + 1)
    for i, (start, stop) in enumerate(itertools.pairwise(bounds)):
        rows = np.asarray(values[start:stop], np.float64)
        lag = season if len(rows) > season else 1
        naive[i] = np.resize(rows[-lag:], steps)
        change = np.mean(rows[lag:] - rows[:-lag]) if len(rows) > lag else 0.0
        drift[i] = naive[i] + change * np.ceil(k / lag)
    return {"seasonal_naive": naive, "seasonal_drift": drift}


@dataclass(frozen=True)
class OwnWindows:
    """A table's own last windows: the model's forecast ``point``, the benchmarks'
    ``benchmarks`` (:func:`benchmark_forecasts`) and the values held back ``actual``, each
    ``(n_windows, steps)``, and each window's scale ``scales`` ``(n_windows,)`` (the
    seasonal naive MAE of the rows before it; NaN where it has none)."""

    point: np.ndarray
    benchmarks: dict[str, np.ndarray]
    actual: np.ndarray
    scales: np.ndarray

    def errors(self, blend: Blend = MODEL_ALONE) -> np.ndarray:
        """``(n, steps)`` the absolute errors of ``blend`` over each window's scale, the
        windows with a scale (a flat history has none) alone."""
        forecast = blend.apply(self.point, self.benchmarks)
        with np.errstate(divide="ignore", invalid="ignore"):
            out = np.abs(self.actual - forecast) / self.scales[:, None]
        return out[np.isfinite(out).all(axis=1)]


def choose_blend(windows: OwnWindows) -> Blend:
    """Of the model alone and its blends with each of the :data:`BENCHMARKS` (weights
    :data:`WEIGHTS`), the one of the lowest mean scaled error on ``windows``: the first of
    them, the model alone, where none is lower (or where no window has a scale).

    Example:
        >>> actual = np.array([[2.0, 2.0]])
        >>> windows = OwnWindows(np.array([[4.0, 4.0]]), {"seasonal_naive": np.array([[1.0, 1.0]]),
        ...     "seasonal_drift": np.array([[1.0, 3.0]])}, actual, np.array([1.0]))
        >>> choose_blend(windows)
        Blend(weight=0.25, benchmark='seasonal_naive')
    """
    blends = (Blend(w, b) for w, b in itertools.product(WEIGHTS, BENCHMARKS))
    best, lowest = MODEL_ALONE, np.inf
    for blend in (MODEL_ALONE, *blends):
        errors = windows.errors(blend)
        if len(errors) and float(errors.mean()) < lowest:
            best, lowest = blend, float(errors.mean())
    return best
