"""The regular time grid of a series' sorted time stamps: the grid found (a fixed step,
business days, calendar months, quarters or years), the rows put on it, the stamps it misses
checked, and the empty values filled by linear interpolation."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..checks import DataError
from ..config import DataConfig
from .columns import stamp_text


def _calendar_grid(times: np.ndarray, median_days: float) -> tuple[np.ndarray, str] | None:
    """Calendar frequency (months, quarters, years) whose grid holds every time stamp."""
    candidates: tuple[str, ...] = ()
    if 28 <= median_days <= 31:
        candidates = ("MS", "ME")
    elif 89 <= median_days <= 92:
        candidates = ("QS", "QE")
    elif 365 <= median_days <= 366:
        candidates = ("YS", "YE")
    for freq in candidates:
        grid = pd.date_range(times[0], times[-1], freq=freq).to_numpy().astype(times.dtype)
        if grid.size and grid[0] == times[0] and np.isin(times, grid).all():
            return grid, freq
    return None


def _step_alias(step: pd.Timedelta) -> str:
    """Pandas offset alias of a fixed step: ``"D"``, ``"7D"``, ``"h"``, ``"15min"``."""
    if step % pd.Timedelta(days=1) == pd.Timedelta(0):
        return "D" if step.days == 1 else f"{step.days}D"
    return pd.tseries.frequencies.to_offset(step).freqstr


def regular_grid(times: np.ndarray) -> tuple[np.ndarray, str] | None:
    """The regular time grid from first to last stamp, or None if the stamps are irregular.

    Regular means: every step is a whole multiple of the median step (weekly, hourly, ...),
    business days (1-day median step, no weekend stamps), or a calendar month/quarter/year.
    """
    if times.size < 3:
        return None
    steps = np.diff(times)
    if np.issubdtype(times.dtype, np.integer):  # whole-number stamps: multiples of the median
        median = np.sort(steps)[steps.size // 2]
        if (steps % median == 0).all():
            return np.arange(times[0], times[-1] + median, median), str(int(median))
        return None
    median = np.sort(steps)[steps.size // 2]
    one_day = np.timedelta64(1, "D")
    weekday = (times.astype("datetime64[D]").astype(np.int64) + 3) % 7  # 0 = Monday
    if median == one_day and (weekday < 5).all() and (steps > one_day).any():
        is_day = (times == times.astype("datetime64[D]")).all()
        if is_day:
            grid = pd.bdate_range(times[0], times[-1]).to_numpy().astype(times.dtype)
            return grid, "B"
    if (steps % median == np.timedelta64(0)).all():
        grid = np.arange(times[0], times[-1] + median, median)
        return grid, _step_alias(pd.Timedelta(median))
    return _calendar_grid(times, median / one_day)


def fill_gaps(values: np.ndarray, times: np.ndarray | None) -> np.ndarray:
    """Linear interpolation over time (row order without times); ends take the nearest value."""
    if times is None:
        position = np.arange(values.shape[0], dtype=np.float64)
    elif np.issubdtype(times.dtype, np.integer):
        position = (times - times[0]).astype(np.float64)
    else:
        position = (times - times[0]) / np.timedelta64(1, "s")
    filled = values.copy()
    for j in range(values.shape[1]):
        missing = np.isnan(values[:, j])
        if missing.any():
            filled[missing, j] = np.interp(
                position[missing], position[~missing], values[~missing, j]
            )
    return filled


def on_grid(values: np.ndarray, stamps: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``values`` (one row per stamp) on ``grid`` (which holds every stamp): NaN rows where
    a stamp was missing."""
    full = np.full((grid.size, values.shape[1]), np.nan)
    full[np.searchsorted(grid, stamps)] = values
    return full


def check_missing(
    stamps: np.ndarray, grid: np.ndarray, step: str, cfg: DataConfig, series_id: str | None = None
) -> str | None:
    """The first of the stamps of ``grid`` that ``stamps`` lack (None: none), checked: not
    more of them than there are stamps, and none with ``gaps='reject'``; ``series_id``
    names a panel's series in the messages (None: the one series)."""
    missing = grid.size - stamps.size
    if not missing:
        return None
    first_gap = stamp_text(grid[~np.isin(grid, stamps)][0])
    if missing > stamps.size:
        if series_id is None:
            raise DataError(
                f"time column {cfg.time_column!r} has {stamps.size} stamps but {missing} missing "
                f"steps of {step} between them; check the dates or use time_column=None"
            )
        raise DataError(
            f"series {series_id!r} has {stamps.size} stamps but {missing} missing "
            f"steps of {step} between them; check its dates"
        )
    if cfg.gaps == "reject":
        what = f"{missing} time stamps of step {step} are missing"
        if series_id is not None:
            what = f"series {series_id!r} misses {missing} time stamps of step {step}"
        raise DataError(
            f"gaps='reject' but {what}, the first {first_gap}; add them or use gaps='interpolate'"
        )
    return first_gap
