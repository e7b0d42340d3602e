"""``target_transform="auto"``: log or no transform, chosen from the training rows.

A series whose swings grow with its level (multiplicative seasons, noise proportional to
the level) is modelled better on the log scale; one whose swings do not, on its own. The
choice follows Guerrero's method for the Box-Cox parameter (as R's ``forecast::BoxCox.lambda``
and statsforecast do): cut the series into periods (its season, at least 2 rows), and find
the ``lambda`` that makes ``sd / mean ** (1 - lambda)`` of the periods most nearly constant;
``lambda`` near 0 is the log, near 1 no transform. A run takes ``log1p`` when every training
value is positive and the median ``lambda`` of its series (and targets) is below 0.5.

Example:
    >>> t = np.arange(120)
    >>> level = 10 * 1.03 ** t
    >>> growing = level * (1 + 0.2 * np.sin(2 * np.pi * t / 12))  # swings grow with the level
    >>> round(guerrero_lambda(growing, 12), 1)
    -0.0
    >>> steady = 10 + 0.5 * t + 2 * np.sin(2 * np.pi * t / 12)  # swings of a constant size
    >>> guerrero_lambda(steady, 12) > 0.9
    True
"""

from __future__ import annotations

import numpy as np

from ..config import DataConfig
from .rows import Series
from .splits import split_rows

#: The range searched for ``lambda`` (that of statsforecast's ``boxcox_lambda``).
LOWER, UPPER = -0.9, 2.0
#: ``lambda`` below this: the log (the midpoint between the log, 0, and no transform, 1).
LOG_BELOW = 0.5


def guerrero_lambda(x: np.ndarray, season: int) -> float:
    """Guerrero's Box-Cox ``lambda`` of ``x`` ``(time,)`` (positive values) with periods of
    ``max(season, 2)`` rows (the latest whole periods), in ``[LOWER, UPPER]``; NaN where
    ``x`` holds fewer than two periods or a period's mean is not positive."""
    from scipy.optimize import minimize_scalar

    period = max(int(season), 2)
    n_periods = len(x) // period
    if n_periods < 2:
        return float("nan")
    blocks = np.asarray(x, dtype=np.float64)[len(x) - n_periods * period :]
    blocks = blocks.reshape(n_periods, period)
    means, sds = blocks.mean(axis=1), blocks.std(axis=1, ddof=1)
    if np.any(means <= 0) or not np.all(np.isfinite(sds)):
        return float("nan")

    def variation(lam: float) -> float:
        ratio = sds / means ** (1 - lam)
        return float(np.std(ratio, ddof=1) / np.mean(ratio))

    found = minimize_scalar(variation, bounds=(LOWER, UPPER), method="bounded",
                            options={"xatol": 1e-6})  # fmt: skip
    return float(found.x)


def choose_target_transform(series: Series, cfg: DataConfig) -> tuple[str, float]:
    """``("log1p" or "none", median lambda)`` for ``series`` under ``cfg`` (its season
    resolved): :func:`guerrero_lambda` of each series' and target's training rows
    (:func:`~stacklstm.data.splits.split_rows`); ``"none"`` where a training value is not
    positive or no series is long enough for a lambda (the median is then NaN)."""
    bounds = series.bounds
    lambdas, positive = [], True
    for i in range(series.n_series):
        n_train = split_rows(int(bounds[i + 1] - bounds[i]), cfg)[0]
        rows = series.values[bounds[i] : bounds[i] + max(n_train, 0), : series.n_targets]
        if rows.size == 0:
            continue
        positive = positive and bool(np.all(rows > 0))
        lambdas += [guerrero_lambda(rows[:, j], int(cfg.season)) for j in range(rows.shape[1])]
    found = np.asarray([v for v in lambdas if np.isfinite(v)])
    median = float(np.median(found)) if found.size else float("nan")
    chosen = "log1p" if positive and found.size and median < LOG_BELOW else "none"
    return chosen, median
