"""``target_transform="auto"``: log or no transform, chosen from the training rows.

A series whose swings grow with its level (multiplicative seasons, noise proportional to
the level) is modelled better on the log scale; one whose swings do not, on its own. The
choice follows Guerrero's method for the Box-Cox parameter (as R's ``forecast::BoxCox.lambda``
and statsforecast do): cut the series into periods (its season, at least 2 rows), and find
the ``lambda`` that makes ``sd / mean ** (1 - lambda)`` of the periods most nearly constant;
``lambda`` near 0 is the log, near 1 no transform. A run takes ``log1p`` when every training
value is positive and the median ``lambda`` of its series (and targets) is below 0.5;
``"per_series"`` (what ``"auto"`` becomes for a panel) makes that choice for each series of
a panel on its own (:func:`logged_series`).

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

from collections.abc import Sequence

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

    found = minimize_scalar(
        variation, bounds=(LOWER, UPPER), method="bounded", options={"xatol": 1e-6}
    )
    return float(found.x)


def _lambdas(rows: np.ndarray, season: int) -> tuple[list[float], bool]:
    """Each target's :func:`guerrero_lambda` of one series' training rows ``(n, n_targets)``,
    and whether every one of them is positive."""
    lambdas = [guerrero_lambda(rows[:, j], season) for j in range(rows.shape[1])]
    return lambdas, bool(np.all(rows > 0))


def _training_rows(series: Series, cfg: DataConfig, i: int) -> np.ndarray:
    """Series ``i``'s training rows of its targets (:func:`~stacklstm.data.splits.split_rows`)."""
    start, end = int(series.bounds[i]), int(series.bounds[i + 1])
    n_train = split_rows(end - start, cfg)[0]
    return series.values[start : start + max(n_train, 0), : series.n_targets]


def choose_target_transform(
    series: Series, cfg: DataConfig, every_row: bool = False
) -> tuple[str, float]:
    """``("log1p" or "none", median lambda)`` for ``series`` under ``cfg`` (its season
    resolved): :func:`guerrero_lambda` of each series' and target's training rows
    (:func:`~stacklstm.data.splits.split_rows`; ``every_row``: all of its rows, as the
    zero-shot forecast chooses); ``"none"`` where such a value is not positive or no series
    is long enough for a lambda (the median is then NaN)."""
    lambdas, positive = [], True
    for i in range(series.n_series):
        if every_row:
            rows = series.values[series.bounds[i] : series.bounds[i + 1], : series.n_targets]
        else:
            rows = _training_rows(series, cfg, i)
        if rows.size == 0:
            continue
        found, all_positive = _lambdas(rows, int(cfg.season))
        lambdas += found
        positive = positive and all_positive
    found = np.asarray([v for v in lambdas if np.isfinite(v)])
    median = float(np.median(found)) if found.size else float("nan")
    chosen = "log1p" if positive and found.size and median < LOG_BELOW else "none"
    return chosen, median


def logged_series(series: Series, cfg: DataConfig, n_train: Sequence[int]) -> np.ndarray:
    """``target_transform="per_series"``: ``(n_series,)`` bool, the series of a panel
    modelled on the ``log1p`` scale. Series ``i`` is when its first ``n_train[i]`` rows'
    targets are all positive and the median of their :func:`guerrero_lambda` is below
    :data:`LOG_BELOW` (the rule of ``"auto"``, each series on its own).

    Example:
        >>> import pandas as pd
        >>> from stacklstm.config import DataConfig
        >>> from stacklstm.data import prepare_series
        >>> t = np.arange(48)
        >>> growing = 10 * 1.05 ** t * (1 + 0.3 * np.sin(2 * np.pi * t / 4))
        >>> steady = 50 + 0.5 * t + 3 * np.sin(2 * np.pi * t / 4)
        >>> frame = pd.DataFrame({"id": ["g"] * 48 + ["s"] * 48, "t": np.tile(t, 2),
        ...                       "y": np.concatenate([growing, steady])})
        >>> cfg = DataConfig(target=("y",), id_column="id", time_column="t", season=4)
        >>> logged_series(prepare_series(frame, cfg), cfg, [40, 40]).tolist()
        [True, False]
    """
    out = np.zeros(series.n_series, dtype=bool)
    for i, n in enumerate(n_train):
        start = int(series.bounds[i])
        rows = series.values[start : start + max(int(n), 0), : series.n_targets]
        if rows.size == 0:
            continue
        lambdas, positive = _lambdas(rows, int(cfg.season))
        found = [v for v in lambdas if np.isfinite(v)]
        out[i] = positive and bool(found) and float(np.median(found)) < LOG_BELOW
    return out
