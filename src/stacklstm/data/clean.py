"""Cleaning: check columns and types, parse and sort time, insert missing stamps, fill gaps."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..checks import DataError
from ..config import DataConfig

log = logging.getLogger(__name__)

_MAX_ROWS_LISTED = 5


@dataclass(frozen=True, eq=False)
class Series:
    """A cleaned, time-ordered table: every value finite, target columns first.

    Attributes:
        values: ``(time, n_columns)`` float64; ``columns[:n_targets]`` are the targets.
        times: ``(time,)`` datetime64 time stamps, ``int64`` ones for a time column of whole
            numbers (years, say), or None when there is no time column.
        columns: Column names of ``values``.
        n_targets: Number of target columns.
        n_filled: Rows that held at least one filled value (missing in the file or
            inserted as a missing time stamp).
        freq: The regular step as a pandas offset alias (e.g. ``"7D"``, ``"MS"``), the
            step of whole-number stamps (``"1"``), or None when the time stamps are absent or
            irregular.
    """

    values: np.ndarray
    times: np.ndarray | None
    columns: tuple[str, ...]
    n_targets: int
    n_filled: int = 0
    freq: str | None = None

    def __len__(self) -> int:
        return int(self.values.shape[0])


def _rows_text(rows: Sequence[int] | np.ndarray) -> str:
    rows = [int(r) for r in rows]
    text = ", ".join(str(r) for r in rows[:_MAX_ROWS_LISTED])
    if len(rows) > _MAX_ROWS_LISTED:
        text += f" and {len(rows) - _MAX_ROWS_LISTED} more"
    return text


def _stamp_text(stamp: np.datetime64 | np.integer) -> str:
    """``2001-12-29`` for midnight, else ``2001-12-29 06:00:00``; ``1701`` for a number."""
    if isinstance(stamp, np.integer | int):
        return str(int(stamp))
    stamp = pd.Timestamp(stamp)
    return stamp.date().isoformat() if stamp == stamp.normalize() else str(stamp)


def _as_written(value: object) -> str:
    """A cell as the file wrote it: ``'abc'`` for text, ``0`` (not ``np.int64(0)``) for numbers."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value) if isinstance(value, str) else str(value)


def _python_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return np.nan


def _numeric_column(raw: pd.Series, name: str, role: str) -> np.ndarray:
    """``(rows,)`` float64 of one column; NaN where the cell is empty."""
    if pd.api.types.is_bool_dtype(raw):
        raw = raw.astype(np.float64)
    if pd.api.types.is_datetime64_any_dtype(raw) or isinstance(raw.dtype, pd.PeriodDtype):
        raise DataError(f"{role} column {name!r} must be numeric, got time stamps ({raw.dtype})")
    if pd.api.types.is_numeric_dtype(raw):
        return raw.to_numpy(dtype=np.float64, na_value=np.nan)
    numeric = pd.to_numeric(raw, errors="coerce")
    # what pandas' parser leaves as text but Python reads as a number: "1e999" is inf
    retry = numeric.isna() & raw.map(lambda v: isinstance(v, str)).astype(bool)
    if retry.any():
        numeric = numeric.astype(np.float64)
        numeric[retry] = raw[retry].map(_python_float)
    blank = raw.isna() | raw.map(lambda v: isinstance(v, str) and not v.strip()).astype(bool)
    bad = np.flatnonzero((numeric.isna() & ~blank).to_numpy())
    if bad.size:
        row = int(bad[0])
        raise DataError(
            f"{role} column {name!r} must be numeric; row {row + 1} holds "
            f"{_as_written(raw.iloc[row])}"
        )
    return numeric.to_numpy(dtype=np.float64, na_value=np.nan)


def _parse_times(raw: pd.Series, name: str) -> np.ndarray:
    """``(rows,)`` datetime64 of the time column: stamps with a time zone or UTC offset
    (mixed offsets included, as across a daylight-saving change) are converted to UTC and the
    zone dropped; stamps without one are kept as written. A column of whole numbers (years,
    say) is returned as ``int64`` time stamps."""
    if pd.api.types.is_integer_dtype(raw) and not pd.api.types.is_bool_dtype(raw):
        missing = np.flatnonzero(raw.isna().to_numpy())
        if missing.size:
            raise DataError(f"time column {name!r} has no time stamp in row {missing[0] + 1}")
        return raw.to_numpy(dtype=np.int64)  # years, say: whole numbers with a step
    if pd.api.types.is_numeric_dtype(raw) and not pd.api.types.is_bool_dtype(raw):
        raise DataError(
            f"time column {name!r} holds numbers that are not all whole (row 1: "
            f"{_as_written(raw.iloc[0])}); expected dates such as 2001-12-29, whole numbers "
            "such as years, or time_column=None to use the row order"
        )
    try:
        # utc=True: stamps with offsets (a time zone across a daylight-saving change has
        # two) become UTC; stamps without one are read as they are written
        parsed = (
            raw
            if pd.api.types.is_datetime64_any_dtype(raw)
            else pd.to_datetime(raw, errors="coerce", utc=True)
        )
        if getattr(parsed.dt, "tz", None) is not None:
            parsed = parsed.dt.tz_convert("UTC").dt.tz_localize(None)
    except (ValueError, TypeError, OverflowError) as err:
        raise DataError(f"cannot parse time column {name!r} as dates: {err}") from err
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if bad.size:
        row = int(bad[0])
        value = raw.iloc[row]
        if pd.isna(value):
            raise DataError(f"time column {name!r} has no time stamp in row {row + 1}")
        raise DataError(
            f"time column {name!r}: cannot parse {_as_written(value)} in row {row + 1} as a date "
            "(expected e.g. 2001-12-29)"
        )
    return parsed.to_numpy()


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


def _regular_grid(times: np.ndarray) -> tuple[np.ndarray, str] | None:
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


def _fill_gaps(values: np.ndarray, times: np.ndarray | None) -> np.ndarray:
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


def prepare_series(frame: pd.DataFrame, cfg: DataConfig, *, forecast_only: bool = False) -> Series:
    """Check, order and clean the table's target and feature columns.

    Steps: columns exist and are numeric (not all empty, no Inf); time stamps parse, are
    sorted and unique; where they are regular (see below) missing stamps are inserted as
    empty rows; empty cells are linearly interpolated (``gaps="interpolate"``, leading and
    trailing ones take the nearest value) or rejected (``gaps="reject"``).

    Regular time stamps: every step a whole multiple of the median step, business days, or
    calendar months/quarters/years. Irregular stamps are kept as they are.

    Args:
        frame: The table, e.g. from :func:`read_table`; row 1 is its first row.
        cfg: Which columns to use and how to treat gaps.
        forecast_only: The series only feeds forecasts (``predict``): one input window is
            enough, ``window`` rows (+1 with ``difference``) instead of ``window + horizon``.

    Returns:
        Series with ``values`` of shape ``(time, len(target) + len(features))``.

    Raises:
        DataError: Unknown column (the message lists those available), non-numeric value
            (names the row), all-empty column, Inf (names rows), unparseable or repeated
            time stamp, gaps with ``gaps="reject"`` (names rows), or fewer rows than
            ``window + horizon`` (+1 with ``difference``).

    Example:
        >>> frame = pd.DataFrame({"date": ["2000-01-03", "2000-01-01", "2000-01-02"],
        ...                       "co2": [3.0, 1.0, None]})
        >>> s = prepare_series(frame, DataConfig(window=1, horizon=1))
        >>> s.values[:, 0].tolist(), s.n_filled, s.freq
        ([1.0, 2.0, 3.0], 1, 'D')
    """
    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"expected a pandas DataFrame, got {type(frame).__name__}")
    cfg.validate()
    if len(frame) == 0:
        raise DataError("the table has no data rows; expected a header row and data rows")
    columns = cfg.target + cfg.features
    wanted = columns + ((cfg.time_column,) if cfg.time_column is not None else ())
    header = [str(c) for c in frame.columns]
    for name in wanted:
        if header.count(name) == 0:
            raise DataError(
                f"column {name!r} not found; available columns: {', '.join(map(repr, header))}"
            )
        if header.count(name) > 1:
            raise DataError(f"column {name!r} appears {header.count(name)} times in the header")
    frame = frame.set_axis(header, axis=1)

    values = np.empty((len(frame), len(columns)), dtype=np.float64)  # (time, columns)
    for j, name in enumerate(columns):
        role = "target" if j < len(cfg.target) else "feature"
        values[:, j] = _numeric_column(frame[name], name, role)
        if np.isnan(values[:, j]).all():
            raise DataError(
                f"{role} column {name!r} has no values: all {len(frame)} rows are empty"
            )
        infinite = np.flatnonzero(np.isinf(values[:, j]))
        if infinite.size:
            raise DataError(
                f"{role} column {name!r} holds infinite values in rows {_rows_text(infinite + 1)};"
                " expected finite numbers"
            )
    if cfg.gaps == "reject":
        empty = np.flatnonzero(np.isnan(values).any(axis=1))
        if empty.size:
            raise DataError(
                f"gaps='reject' but rows {_rows_text(empty + 1)} hold empty values; "
                "fill them or use gaps='interpolate'"
            )

    times: np.ndarray | None = None
    freq: str | None = None
    n_inserted = 0
    if cfg.time_column is not None:
        times = _parse_times(frame[cfg.time_column], cfg.time_column)
        order = np.argsort(times, kind="stable")
        times, values = times[order], values[order]
        repeated = np.flatnonzero(times[1:] == times[:-1])
        if repeated.size:
            i = int(repeated[0])
            rows = f"rows {order[i] + 1} and {order[i + 1] + 1}"
            raise DataError(
                f"time column {cfg.time_column!r} repeats {_stamp_text(times[i])} ({rows}); "
                "expected one row per time stamp"
            )
        regular = _regular_grid(times)
        if regular is not None:
            grid, freq = regular
            n_inserted = grid.size - times.size
            if n_inserted:
                first_gap = _stamp_text(grid[~np.isin(grid, times)][0])
                if n_inserted > times.size:
                    raise DataError(
                        f"time column {cfg.time_column!r} has {times.size} stamps but "
                        f"{n_inserted} missing steps of {freq} between them; check the dates "
                        "or use time_column=None"
                    )
                if cfg.gaps == "reject":
                    raise DataError(
                        f"gaps='reject' but {n_inserted} time stamps of step {freq} are missing, "
                        f"the first {first_gap}; add them or use gaps='interpolate'"
                    )
                full = np.full((grid.size, values.shape[1]), np.nan)
                full[np.searchsorted(grid, times)] = values
                values, times = full, grid
                log.info("inserted %d missing time stamps, the first %s", n_inserted, first_gap)
        else:
            log.info("time stamps are irregular; no missing stamps inserted")

    empty_rows = np.isnan(values).any(axis=1)
    n_filled = int(empty_rows.sum())
    if n_filled:
        values = _fill_gaps(values, times)
        log.info("filled %d rows with missing values by linear interpolation", n_filled)
    extra = " + 1 (difference)" if cfg.difference else ""
    if forecast_only:
        needed = cfg.window + int(cfg.difference)
        if values.shape[0] < needed:
            raise DataError(
                f"the series has {values.shape[0]} rows but one input window needs window "
                f"({cfg.window}){extra} = {needed}"
            )
    else:
        needed = cfg.window + cfg.horizon + int(cfg.difference)
        if values.shape[0] < needed:
            raise DataError(
                f"the series has {values.shape[0]} rows but window ({cfg.window}) + horizon "
                f"({cfg.horizon}){extra} = {needed} are needed"
            )
    return Series(
        values=values,
        times=times,
        columns=columns,
        n_targets=len(cfg.target),
        n_filled=n_filled,
        freq=freq,
    )
