"""Seasons: deseasonalising the targets, and the target transform's scale.

* :class:`SeasonalPattern`: with ``deseasonalize``, each series' additive seasonal pattern
  (a classical decomposition of its training rows) is subtracted from its targets before
  scaling and added back to the forecasts (:meth:`WindowSet.to_original
  <stacklstm.data.WindowSet.to_original>`), exactly. With ``target_transform="log1p"`` the
  pattern is fitted and removed on the ``log1p`` scale (a multiplicative season). With
  ``season_test`` only the series whose season is significant (:func:`is_seasonal`) get one.

What ``season="auto"`` and ``window="auto"`` become is :mod:`stacklstm.config.auto`'s; a
run resolves them once (:mod:`stacklstm.train.resolve`) and the code here receives them
resolved (:func:`require_resolved`).

The phase of a row counts time steps from the first row of its series in the table the
pattern was fitted on, so a later table of the same series (longer, or starting elsewhere on
the same time grid) gets the same phases. Without regular time stamps it counts rows from the
first row of the table.

Example:
    >>> t = np.arange(24.0)
    >>> classical_pattern(0.5 * t + np.tile([1.0, -1.0, 3.0, -3.0], 6), 4)
    array([ 1., -1.,  3., -3.])
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from ..checks import DataError
from ..config import AUTO, DataConfig
from ..transforms import PER_SERIES, TRANSFORMS, applied

log = logging.getLogger(__name__)


def require_resolved(
    cfg: DataConfig, where: str, names: Sequence[str] = ("season", "window", "target_transform")
) -> None:
    """Refuse ``cfg`` if a setting of ``names`` is still ``"auto"``: the code named
    ``where`` works on resolved settings (a run resolves them once, in
    :mod:`stacklstm.train.resolve`; a run folder's ``config.json`` holds them resolved).

    Raises:
        ValueError: A setting of ``names`` is ``"auto"``.

    Example:
        >>> require_resolved(DataConfig(season=12, window=24), "make_splits")
        >>> require_resolved(DataConfig(season=12), "make_splits")
        Traceback (most recent call last):
        ...
        ValueError: make_splits needs resolved settings, got window='auto'; resolve them ...
    """
    unresolved = [f"{name}='auto'" for name in names if getattr(cfg, name) == AUTO]
    if unresolved:
        raise ValueError(
            f"{where} needs resolved settings, got {', '.join(unresolved)}; resolve them first "
            "(stacklstm.train.resolve.prepare_resolved(frame, cfg); resolve_data(cfg, "
            "series.freq) for the season and window) or give values"
        )


# --------------------------------------------------------------------------- the pattern


def classical_pattern(values: np.ndarray, season: int) -> np.ndarray:
    """``(season,)`` additive seasonal indices of ``values`` ``(time,)``, phase 0 at row 0.

    The classical decomposition (statsmodels' ``seasonal_decompose``, additive): the trend is
    the centred moving average of one season (a 2 x season average for an even season), the
    index of a phase is the mean of the detrended values of that phase where the trend
    exists, and the indices are centred to sum to 0.

    Raises:
        ValueError: ``values`` is not 1-D with at least 2 seasons of rows, or ``season < 2``.
    """
    values = np.asarray(values, dtype=np.float64)
    if values.ndim != 1 or season < 2 or len(values) < 2 * season:
        raise ValueError(
            f"need a 1-D series of at least 2 seasons ({2 * season} rows) and season >= 2; "
            f"got shape {values.shape}, season {season}"
        )
    if season % 2:
        weights = np.full(season, 1.0 / season)
    else:
        weights = np.r_[0.5, np.ones(season - 1), 0.5] / season
    trend = np.convolve(values, weights, mode="valid")  # rows half .. n - half - 1
    half = len(weights) // 2
    rows = np.arange(half, half + len(trend))
    detrended = values[rows] - trend
    phase = rows % season
    pattern = np.array([detrended[phase == p].mean() for p in range(season)])
    return pattern - pattern.mean()


#: :func:`is_seasonal`'s one-sided 90 % critical value of the standard normal.
SEASON_TEST_CRITICAL = 1.645


def is_seasonal(values: np.ndarray, season: int) -> bool:
    """Whether ``values`` ``(time,)`` has a significant season: the test of the Theta method
    and of the M4 competition's statistical benchmarks.

    The autocorrelation at lag ``season`` must exceed, in absolute value, 1.645 times its
    standard error under a moving average of order ``season - 1`` (Bartlett's formula,
    ``sqrt((1 + 2 * sum(r_k ** 2 for k < season)) / n)``), a one-sided 90 % test. A series
    of fewer than 3 seasons, or a constant one, is not seasonal, as in those benchmarks. The
    test reads the values as they are, so a steep trend over few seasons can hide a season.

    Example:
        >>> t = np.arange(48.0)
        >>> season = 5 * np.sin(2 * np.pi * t / 12)
        >>> is_seasonal(0.1 * t + season, 12), is_seasonal(t + season, 12), is_seasonal(t, 12)
        (True, False, False)
    """
    values = np.asarray(values, dtype=np.float64)
    n = len(values)
    if season < 2 or n < 3 * season:
        return False
    centred = values - values.mean()
    total = float(centred @ centred)
    if total <= 0.0:
        return False
    r = np.array([centred[k:] @ centred[:-k] for k in range(1, season + 1)]) / total
    limit = SEASON_TEST_CRITICAL * np.sqrt((1.0 + 2.0 * float(r[:-1] @ r[:-1])) / n)
    return bool(abs(r[-1]) > limit)


@dataclass(frozen=True, eq=False)
class SeasonalPattern:
    """Each series' additive seasonal pattern of its targets, fitted on its training rows.

    Attributes:
        season: Period in time steps (>= 2).
        pattern: ``(n_series, season, n_targets)`` float64; ``pattern[i, p]`` is added to
            series ``i``'s (transformed) targets at phase ``p``; all zeros for a series with
            fewer than 2 seasons of training rows.
        reference: Per series, the time stamp of its phase 0 (ISO text for dates, an int for
            whole-number stamps), or None for phases counted in rows from the table's first
            row (no regular time stamps).
        freq: The time step the phases count (``Series.freq``), or None.

    Example:
        >>> p = SeasonalPattern(2, np.array([[[1.0], [-1.0]]]), (None,), None)
        >>> SeasonalPattern.from_dict(p.to_dict()).pattern[0, :, 0].tolist()
        [1.0, -1.0]
    """

    season: int
    pattern: np.ndarray
    reference: tuple[str | int | None, ...]
    freq: str | None

    def select(self, rows: Sequence[int] | np.ndarray) -> SeasonalPattern:
        """The patterns of the series at positions ``rows``."""
        rows = np.asarray(rows, dtype=np.int64)
        return SeasonalPattern(
            self.season, self.pattern[rows], tuple(self.reference[i] for i in rows), self.freq
        )

    def phase0(self, series: Any) -> np.ndarray:
        """``(n_series,)`` int64 phase of the first row of each series of ``series`` (a
        :class:`~stacklstm.data.clean.Series` laid out as the fitted one).

        Raises:
            DataError: The stamps are not on the time grid the pattern was fitted on.
        """
        starts = series.bounds[:-1]
        out = np.zeros(len(starts), dtype=np.int64)
        for i, (start, ref) in enumerate(zip(starts, self.reference, strict=True)):
            if ref is None:
                continue
            steps = _steps_between(ref, series.times[start], self.freq)
            out[i] = steps % self.season
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict (floats round-trip exactly)."""
        return {
            "season": self.season,
            "pattern": self.pattern.tolist(),
            "reference": list(self.reference),
            "freq": self.freq,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SeasonalPattern:
        """Inverse of :meth:`to_dict`; DataError on missing keys or bad values."""
        keys = ("season", "pattern", "reference", "freq")
        if not isinstance(data, Mapping) or sorted(data) != sorted(keys):
            got = sorted(data) if isinstance(data, Mapping) else type(data).__name__
            raise DataError(f"expected seasonal pattern keys {list(keys)}, got {got}")
        try:
            pattern = np.asarray(data["pattern"], dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise DataError(f"the seasonal pattern must be nested lists of numbers: {err}") from err
        season, reference = data["season"], data["reference"]
        if (
            not isinstance(season, int)
            or season < 2
            or pattern.ndim != 3
            or pattern.shape[1] != season
            or not isinstance(reference, list)
            or len(reference) != pattern.shape[0]
            or not np.isfinite(pattern).all()
        ):
            raise DataError(
                f"a seasonal pattern needs season >= 2, finite values of shape (n_series, "
                f"season, n_targets) and one reference per series; got season {season!r}, "
                f"shape {pattern.shape}"
            )
        return cls(season, pattern, tuple(reference), data["freq"])


def _steps_between(reference: str | int, stamp: Any, freq: str | None) -> int:
    """Time steps of ``freq`` from ``reference`` to ``stamp`` (negative when earlier)."""
    if isinstance(reference, int):
        step = int(freq) if freq is not None and freq.lstrip("-").isdigit() else 1
        diff = int(stamp) - reference
        if diff % step:
            raise DataError(
                f"time stamp {int(stamp)} is not on the grid of step {step} from {reference} "
                "that the seasonal pattern was fitted on"
            )
        return diff // step
    ref, t = pd.Timestamp(reference), pd.Timestamp(stamp)
    if t == ref:
        return 0
    lo, hi = (ref, t) if ref < t else (t, ref)
    grid = pd.date_range(lo, hi, freq=freq)
    if len(grid) == 0 or grid[0] != lo or grid[-1] != hi:
        raise DataError(
            f"time stamp {t} is not on the {freq} grid from {ref} that the seasonal pattern "
            "was fitted on"
        )
    return (len(grid) - 1) * (1 if ref < t else -1)


def _reference(series: Any, start: int) -> str | int | None:
    if series.times is None or series.freq is None:
        return None
    stamp = series.times[start]
    if np.issubdtype(series.times.dtype, np.integer):
        return int(stamp)
    return str(np.datetime64(stamp, "ns"))


def fit_seasonal(
    series: Any,
    values: np.ndarray,
    n_train: Sequence[int],
    season: int,
    test: bool = False,
    window: int | None = None,
) -> SeasonalPattern | None:
    """Fit each series' pattern on its first ``n_train[i]`` rows of ``values`` (the last
    ``window`` seasons of them, with ``window``).

    Args:
        series: The :class:`~stacklstm.data.clean.Series` (bounds, time stamps, step).
        values: ``(time, n_targets)`` float64 targets (after ``target_transform``).
        n_train: Training rows of each series.
        season: Period (>= 2).
        test: Fit a target's pattern only where its training rows pass :func:`is_seasonal`
            (``season_test``); the others keep a pattern of zeros.
        window: Seasons of rows, counted back from the last training row, the pattern (and
            the test) is fitted on (``season_window``); None: every training row.

    Returns:
        The patterns, or None when no series has 2 seasons of training rows (or
        ``season < 2``, or, with ``test``, none is seasonal): nothing to remove.
    """
    if season < 2:
        return None
    nt = values.shape[1]
    bounds = series.bounds
    pattern = np.zeros((len(n_train), season, nt))
    fitted = short = 0
    for i, n in enumerate(n_train):
        if n < 2 * season:
            short += 1
            continue
        # the first row fitted on; the pattern is rolled back to phase 0 at the series' row 0
        first = 0 if window is None else max(0, int(n) - window * season)
        start = int(bounds[i]) + first
        found = False
        for j in range(nt):
            rows = values[start : start + int(n) - first, j]
            if not test or is_seasonal(rows, season):
                pattern[i, :, j] = np.roll(classical_pattern(rows, season), first)
                found = True
        fitted += found
    if not fitted:
        log.info(
            "no series has 2 seasons (%d rows) of training rows%s: not deseasonalised",
            2 * season,
            " and a significant season" if test else "",
        )
        return None
    if fitted < len(n_train):
        log.info(
            "deseasonalised %d of %d series (%d have fewer than %d training rows, %d no "
            "significant season)",
            fitted,
            len(n_train),
            short,
            2 * season,
            len(n_train) - fitted - short,
        )
    references = tuple(_reference(series, int(bounds[i])) for i in range(len(n_train)))
    return SeasonalPattern(int(season), pattern, references, series.freq)


# --------------------------------------------------------------------------- the hooks


def _row_mask(covered: bool | np.ndarray, n: int) -> np.ndarray:
    """``(n,)`` bool: which rows (the first axis) ``covered`` marks, every row or none for a
    bool, else the ``(n,)`` mask itself (``target_transform="per_series"``)."""
    if isinstance(covered, (bool, np.bool_)):
        return np.full(n, bool(covered))
    mask = np.asarray(covered, dtype=bool)
    if mask.shape != (n,):
        raise ValueError(f"expected a transform mask of shape ({n},), got {mask.shape}")
    return mask


def forward_targets(
    values: np.ndarray, covered: bool | np.ndarray, transform: str = PER_SERIES
) -> np.ndarray:
    """``target_transform``: the transform named ``transform`` (:data:`stacklstm.transforms.
    TRANSFORMS`) of ``values``, or a copy; with a bool mask ``covered`` over the first axis
    of ``values``, of the rows it marks only.

    Raises:
        DataError: A value the transform does not take (a negative one for ``log1p``).
    """
    values = np.array(values, dtype=np.float64)
    mask = _row_mask(covered, len(values))
    if not mask.any():
        return values
    chosen, applied = values[mask], TRANSFORMS[transform]
    if not applied.valid(chosen):
        raise DataError(
            f"target_transform={applied.name!r} needs {applied.needs}, got values from "
            f"{chosen.min():.6g} to {chosen.max():.6g}; use target_transform='none'"
        )
    values[mask] = applied.forward(chosen, np)
    return values


def inverse_targets(
    values: np.ndarray, covered: bool | np.ndarray, transform: str = PER_SERIES
) -> np.ndarray:
    """Undo :func:`forward_targets`: the inverse of ``transform`` where ``covered`` (a bool,
    or a mask over the first axis)."""
    values = np.array(values, dtype=np.float64)
    mask = _row_mask(covered, len(values))
    values[mask] = TRANSFORMS[transform].inverse(values[mask], np)
    return values


def target_mask(
    cfg: DataConfig, logged: np.ndarray | None, bounds: np.ndarray
) -> bool | np.ndarray:
    """Which rows ``target_transform`` transforms: all or none (``log1p``, ``none``), or
    those of the ``logged`` series (``per_series``, which needs ``logged``)."""
    if cfg.transform_kind == "per_series":
        if logged is None:
            raise ValueError("target_transform='per_series' needs each series' log1p flag")
        return series_mask(logged, bounds)
    return applied(cfg.transform_kind).name != "none"


def series_mask(logged: np.ndarray | None, bounds: np.ndarray) -> bool | np.ndarray:
    """The rows' ``log1p`` mask ``(rows,)`` of series flags ``logged`` ``(n_series,)``
    (series ``i`` being rows ``bounds[i]:bounds[i + 1]``); False for None."""
    if logged is None:
        return False
    return np.repeat(np.asarray(logged, dtype=bool), np.diff(np.asarray(bounds)))


def model_values(
    series: Any,
    cfg: DataConfig,
    seasonal: SeasonalPattern | None,
    logged: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """The series' values with the targets as the model sees them, before differencing and
    scaling: ``target_transform`` applied, the seasonal pattern removed.

    ``logged`` ``(n_series,)`` bool: with ``target_transform="per_series"``, the series
    modelled on the ``log1p`` scale (:func:`stacklstm.data.transform.logged_series`).

    Returns:
        ``(values, pattern, phase0)``: ``(time, n_columns)`` float64 values; the pattern
        ``(n_series, season, n_targets)`` and each series' first-row phase ``(n_series,)``,
        or None twice without a pattern.
    """
    nt = series.n_targets
    values = np.array(series.values, dtype=np.float64)
    covered = target_mask(cfg, logged, series.bounds)
    name = applied(cfg.transform_kind).name
    values[:, :nt] = forward_targets(values[:, :nt], covered, name)
    if seasonal is None:
        return values, None, None
    if seasonal.pattern.shape[2] != nt or seasonal.pattern.shape[0] != series.n_series:
        raise DataError(
            f"the seasonal pattern is for {seasonal.pattern.shape[0]} series of "
            f"{seasonal.pattern.shape[2]} targets, the table has {series.n_series} of {nt}"
        )
    phase0 = seasonal.phase0(series)
    bounds = series.bounds
    for i in range(series.n_series):
        rows = np.arange(bounds[i], bounds[i + 1])
        values[rows, :nt] -= seasonal.pattern[i][(phase0[i] + rows - bounds[i]) % seasonal.season]
    return values, seasonal.pattern, phase0


__all__ = [
    "SeasonalPattern",
    "classical_pattern",
    "fit_seasonal",
    "forward_targets",
    "inverse_targets",
    "is_seasonal",
    "model_values",
    "require_resolved",
    "series_mask",
    "target_mask",
]
