"""Reading one column of a table: numbers, time stamps, series names, and the text of
row numbers, stamps and steps in messages (row 1 is the first row below the header)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..checks import DataError

_MAX_ROWS_LISTED = 5


def file_rows(raw: pd.Series | pd.DataFrame, positions: Sequence[int] | np.ndarray) -> np.ndarray:
    """``(n,)`` int64 row numbers in the table (row 1 is the first row below the header) of
    the cells at ``positions`` of ``raw``: its index labels, the table's row positions that
    :func:`prepare_series` gives every row (kept when rows are set apart), plus one."""
    return raw.index.to_numpy(dtype=np.int64)[np.asarray(positions, dtype=np.int64)] + 1


def rows_text(rows: Sequence[int] | np.ndarray) -> str:
    rows = [int(r) for r in rows]
    text = ", ".join(str(r) for r in rows[:_MAX_ROWS_LISTED])
    if len(rows) > _MAX_ROWS_LISTED:
        text += f" and {len(rows) - _MAX_ROWS_LISTED} more"
    return text


def stamp_text(stamp: np.datetime64 | np.integer) -> str:
    """``2001-12-29`` for midnight, else ``2001-12-29 06:00:00``; ``1701`` for a number."""
    if isinstance(stamp, np.integer | int):
        return str(int(stamp))
    stamp = pd.Timestamp(stamp)
    return stamp.date().isoformat() if stamp == stamp.normalize() else str(stamp)


def as_written(value: object) -> str:
    """A cell as the file wrote it: ``'abc'`` for text, ``0`` (not ``np.int64(0)``) for numbers."""
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value) if isinstance(value, str) else str(value)


def _python_float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        return np.nan


def numeric_column(raw: pd.Series, name: str, role: str) -> np.ndarray:
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
            f"{role} column {name!r} must be numeric; row {file_rows(raw, [row])[0]} holds "
            f"{as_written(raw.iloc[row])}"
        )
    return numeric.to_numpy(dtype=np.float64, na_value=np.nan)


def parse_times(raw: pd.Series, name: str) -> np.ndarray:
    """``(rows,)`` datetime64 of the time column: stamps with a time zone or UTC offset
    (mixed offsets included, as across a daylight-saving change) are converted to UTC and the
    zone dropped; stamps without one are kept as written. A column of whole numbers (years,
    say) is returned as ``int64`` time stamps."""
    if pd.api.types.is_integer_dtype(raw) and not pd.api.types.is_bool_dtype(raw):
        missing = np.flatnonzero(raw.isna().to_numpy())
        if missing.size:
            raise DataError(
                f"time column {name!r} has no time stamp in row {file_rows(raw, missing)[0]}"
            )
        return raw.to_numpy(dtype=np.int64)  # years, say: whole numbers with a step
    if pd.api.types.is_numeric_dtype(raw) and not pd.api.types.is_bool_dtype(raw):
        raise DataError(
            f"time column {name!r} holds numbers that are not all whole (row 1: "
            f"{as_written(raw.iloc[0])}); expected dates such as 2001-12-29, whole numbers "
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
        retry = parsed.isna() & raw.map(_has_digit).astype(bool)
        if retry.any():  # written in another format than the first stamp: parse each alone
            parsed[retry] = pd.to_datetime(raw[retry], format="mixed", errors="coerce", utc=True)
        if getattr(parsed.dt, "tz", None) is not None:
            parsed = parsed.dt.tz_convert("UTC").dt.tz_localize(None)
    except (ValueError, TypeError, OverflowError) as err:
        raise DataError(f"cannot parse time column {name!r} as dates: {err}") from err
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if bad.size:
        row = int(bad[0])
        value = raw.iloc[row]
        number = file_rows(raw, [row])[0]
        if pd.isna(value):
            raise DataError(f"time column {name!r} has no time stamp in row {number}")
        raise DataError(
            f"time column {name!r}: cannot parse {as_written(value)} in row {number} as a date "
            "(expected e.g. 2001-12-29)"
        )
    return parsed.to_numpy()


def _has_digit(value: object) -> bool:
    """A text cell with a digit: a stamp worth parsing alone (not ``today`` or ``now``)."""
    return isinstance(value, str) and any(c.isdigit() for c in value)


def count_text(n: int, noun: str) -> str:
    """``1 row``, ``3 rows``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def step_text(step: np.timedelta64 | np.integer) -> str:
    """``1 day``, ``7 days``, ``0 days 06:00:00``; a whole number as it is."""
    # np.timedelta64 is a subclass of np.integer: a step of time is not a whole number
    if isinstance(step, np.integer | int) and not isinstance(step, np.timedelta64):
        return str(int(step))
    step = pd.Timedelta(step)
    if step % pd.Timedelta(days=1) == pd.Timedelta(0):
        return f"{step.days} day" + ("s" if step.days != 1 else "")
    return str(step)


def series_ids(raw: pd.Series, name: str) -> np.ndarray:
    """``(rows,)`` object array of each row's series name: text as it is, other values as
    ``str`` writes them. DataError for an empty cell (missing, or blank text)."""
    blank = raw.map(lambda v: isinstance(v, str) and not v.strip()).to_numpy(dtype=bool)
    missing = np.flatnonzero(raw.isna().to_numpy() | blank)
    if missing.size:
        raise DataError(
            f"id column {name!r} has no series name in row {file_rows(raw, missing)[0]}; "
            "every row needs the name of its series"
        )
    return raw.map(lambda v: v if isinstance(v, str) else str(v)).to_numpy(dtype=object)
