"""Calendar features: sin/cos of each time stamp's seasonal position, in the data's own zone.

A time stamp's position in a cycle (the hour in its day, the weekday in its week, the week,
day or month in its year) is a number ``p`` in ``[0, 1)``; each cycle becomes two columns,
``sin(2 pi p)`` and ``cos(2 pi p)``, so that the end of a cycle is next to its start.
Which cycles a series gets depends on its time step:

=======================  ==========================================================
step                     columns (each ``calendar_<cycle>_sin`` and ``_cos``)
=======================  ==========================================================
under a day (hourly)     ``hour_of_day``, ``day_of_week``
1 to 6 days (daily, B)   ``day_of_week``, ``day_of_year``
7 to 27 days (weekly)    ``week_of_year``
28 days to a quarter     ``month_of_year``
a year or more           none: there is no seasonal position (an error)
=======================  ==========================================================

Positions: ``hour_of_day = seconds since midnight / 86400``; ``day_of_week = weekday / 7``
(Monday 0); ``day_of_year = (day of year - 1) / days in that year`` (365 or 366);
``week_of_year = (ISO week - 1) / ISO weeks in that ISO year`` (52 or 53); ``month_of_year =
(month - 1) / 12``.

Wall-clock time. ``prepare_series`` orders stamps written with a UTC offset or a time zone
by their UTC instant (the only order that survives a daylight-saving change), but a calendar
computed from UTC would move the hours (and near midnight the days) of every stamp of a
Berlin table by one or two hours, and by one more hour each summer. The features are computed
from the local wall-clock time instead: :func:`utc_offsets` reads the offset each stamp was
written with, and :func:`wall_clock` applies it to the UTC stamps (a stamp inserted for a
missing step takes the offset of the latest written stamp before it).

numpy and pandas only.

Example:
    >>> times = np.array(["2024-01-01T00", "2024-01-01T06"], dtype="datetime64[s]")
    >>> names, values = calendar_features(times, "6h")
    >>> names[::2]
    ('calendar_hour_of_day_sin', 'calendar_day_of_week_sin')
    >>> values.round(6).tolist()
    [[0.0, 1.0, 0.0, 1.0], [1.0, 0.0, 0.0, 1.0]]
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..checks import DataError
from ..config import CALENDAR_PREFIX

#: Prefix of every calendar column name.
PREFIX = CALENDAR_PREFIX

_DAY = np.timedelta64(86_400, "s")

# A written time, then its zone designator: "Z", "+02:00", "+0200", "-05" (a bare date such as
# "2021-03-28" has no time before its "-28", so it never matches).
_OFFSET_TEXT = r"\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?\s*(?P<zone>Z|[+-]\d{2}(?::?\d{2})?)\s*$"


def utc_offsets(raw: pd.Series) -> np.ndarray | None:
    """``(rows,)`` ``timedelta64[s]`` UTC offset each stamp of a time column was written with.

    Reads offsets written in the text (``2021-03-28T03:00:00+02:00``, ``...Z``, ``+0200``),
    zone-aware time stamps (a Parquet column in ``Europe/Berlin``), and zone-aware
    ``datetime`` objects. A stamp without a zone gets 0.

    Args:
        raw: The time column as read from the table.

    Returns:
        The offsets (local time minus UTC), or None when no stamp carries a zone (the stamps
        are then already wall-clock times).

    Example:
        >>> raw = pd.Series(["2021-03-28T01:00+01:00", "2021-03-28T03:00+02:00"])
        >>> (utc_offsets(raw) // np.timedelta64(1, "h")).tolist()
        [1, 2]
        >>> utc_offsets(pd.Series(["2021-03-28", "2021-03-29"])) is None
        True
    """
    if isinstance(raw.dtype, pd.DatetimeTZDtype):
        local = raw.dt.tz_localize(None).to_numpy("datetime64[s]")
        utc = raw.dt.tz_convert("UTC").dt.tz_localize(None).to_numpy("datetime64[s]")
        return local - utc
    if pd.api.types.is_datetime64_dtype(raw) or pd.api.types.is_numeric_dtype(raw):
        return None
    offsets = np.zeros(len(raw), dtype="timedelta64[s]")
    found = False
    is_text = raw.map(lambda v: isinstance(v, str)).to_numpy(dtype=bool)
    if is_text.any():
        zone = raw[is_text].astype(str).str.extract(_OFFSET_TEXT)["zone"]
        written = zone.notna().to_numpy()
        if written.any():
            found = True
            text = zone[written].str.replace(":", "", regex=False)
            sign = np.where(text.str[0] == "-", -1, 1)
            digits = text.str[1:].replace("", "0")  # "Z" -> "0"
            hours = digits.str[:2].astype(int).to_numpy()
            minutes = digits.str[2:4].replace("", "0").astype(int).to_numpy()
            seconds = sign * (hours * 3600 + minutes * 60)
            rows = np.flatnonzero(is_text)[written]
            offsets[rows] = seconds.astype("timedelta64[s]")
    for row in np.flatnonzero(~is_text):  # datetime objects: each knows its own offset
        value = raw.iloc[row]
        offset = value.utcoffset() if hasattr(value, "utcoffset") and not pd.isna(value) else None
        if offset is not None:
            found = True
            offsets[row] = np.timedelta64(int(offset.total_seconds()), "s")
    return offsets if found else None


def wall_clock(
    times: np.ndarray, written: np.ndarray | None = None, offsets: np.ndarray | None = None
) -> np.ndarray:
    """Local wall-clock time of UTC time stamps: ``times`` plus each one's UTC offset.

    Args:
        times: ``(time,)`` sorted ``datetime64`` UTC stamps (a series' ``times``, with any
            inserted missing steps).
        written: ``(rows,)`` ``datetime64`` UTC stamps as written in the table (any order).
        offsets: ``(rows,)`` ``timedelta64`` offsets of ``written`` (:func:`utc_offsets`);
            None: the stamps carry no zone and ``times`` are returned unchanged.

    Returns:
        ``(time,)`` ``datetime64[s]``: each stamp plus the offset of the latest written stamp
        at or before it (the first written one for stamps before all of them).

    Example:
        >>> utc = np.array(["2021-03-28T00", "2021-03-28T01", "2021-03-28T02"], "datetime64[s]")
        >>> offsets = np.array([3600, 7200, 7200], "timedelta64[s]")
        >>> wall_clock(utc, utc, offsets).astype(str).tolist()
        ['2021-03-28T01:00:00', '2021-03-28T03:00:00', '2021-03-28T04:00:00']
    """
    times = np.asarray(times).astype("datetime64[s]")
    if offsets is None:
        return times
    if written is None or len(written) != len(offsets):
        raise ValueError("wall_clock needs the written stamps with their offsets, one each")
    written = np.asarray(written).astype("datetime64[s]")
    order = np.argsort(written, kind="stable")
    written, offsets = written[order], np.asarray(offsets, dtype="timedelta64[s]")[order]
    latest = np.clip(np.searchsorted(written, times, side="right") - 1, 0, None)
    return times + offsets[latest]


def _cycles(times: np.ndarray, freq: str | None) -> tuple[str, ...]:
    """The cycles (see the module docstring) of a series with this step."""
    offset = None
    if freq is not None:
        try:
            offset = pd.tseries.frequencies.to_offset(freq)
        except ValueError:
            offset = None
    if isinstance(offset, pd.offsets.MonthBegin | pd.offsets.MonthEnd):
        return ("month_of_year",)
    if isinstance(offset, pd.offsets.QuarterBegin | pd.offsets.QuarterEnd):
        return ("month_of_year",)
    if isinstance(offset, pd.offsets.YearBegin | pd.offsets.YearEnd):
        raise DataError(
            f"calendar='auto' finds no seasonal position in yearly time stamps ({freq}); "
            "use calendar='none'"
        )
    if isinstance(offset, pd.offsets.BusinessDay):
        step = _DAY
    elif isinstance(offset, pd.offsets.Tick):
        step = pd.Timedelta(offset).to_timedelta64().astype("timedelta64[s]")
    else:  # irregular (as in UTC: a daily table across a daylight-saving change) or unknown
        if times.size < 2:
            raise DataError("calendar='auto' needs at least two time stamps to find their step")
        step = np.sort(np.diff(times))[(times.size - 1) // 2]  # the median step
    if step <= np.timedelta64(0, "s"):
        raise DataError(f"calendar='auto' needs increasing time stamps, got a step of {step}")
    if step < _DAY:
        return ("hour_of_day", "day_of_week")
    if step < 7 * _DAY:
        return ("day_of_week", "day_of_year")
    if step < 28 * _DAY:
        return ("week_of_year",)
    if step < 365 * _DAY:
        return ("month_of_year",)
    raise DataError(
        f"calendar='auto' finds no seasonal position in time stamps a year or more apart (step "
        f"{pd.Timedelta(step)}); use calendar='none'"
    )


def _position(times: np.ndarray, cycle: str) -> np.ndarray:
    """``(time,)`` float64 position in ``[0, 1)`` of each (wall-clock) stamp in its cycle."""
    days = times.astype("datetime64[D]")
    if cycle == "hour_of_day":
        return (times - days) / _DAY
    if cycle == "day_of_week":
        return ((days.astype(np.int64) + 3) % 7) / 7.0  # 1970-01-01 was a Thursday
    stamps = pd.DatetimeIndex(times)
    if cycle == "day_of_year":
        length = np.where(stamps.is_leap_year, 366.0, 365.0)
        return (stamps.dayofyear.to_numpy() - 1) / length
    if cycle == "week_of_year":
        iso = stamps.isocalendar()
        # an ISO year has 53 weeks when its December 28 falls in week 53
        dec28 = pd.to_datetime(iso["year"].astype(str) + "-12-28")
        weeks = dec28.dt.isocalendar()["week"].to_numpy(dtype=np.float64)
        return (iso["week"].to_numpy(dtype=np.float64) - 1) / weeks
    if cycle == "month_of_year":
        return (stamps.month.to_numpy() - 1) / 12.0
    raise ValueError(f"unknown calendar cycle {cycle!r}")  # pragma: no cover


def calendar_features(
    times: np.ndarray, freq: str | None = None
) -> tuple[tuple[str, ...], np.ndarray]:
    """The calendar columns of a series: sin and cos of each cycle its step has.

    Args:
        times: ``(time,)`` ``datetime64`` wall-clock time stamps (:func:`wall_clock`), sorted.
        freq: The series' step as a pandas offset alias (``Series.freq``: ``"h"``, ``"D"``,
            ``"B"``, ``"7D"``, ``"MS"``, ...); None: the median step of ``times``.

    Returns:
        ``(names, values)``: ``names`` ``calendar_<cycle>_sin``, ``calendar_<cycle>_cos`` for
        each cycle, and ``values`` ``(time, len(names))`` float64 in ``[-1, 1]``.

    Raises:
        DataError: The stamps are whole numbers (years, say), a year or more apart, or too
            few to find a step.

    Example:
        >>> days = np.array(["2024-01-01", "2024-01-04"], dtype="datetime64[D]")  # Mon, Thu
        >>> names, values = calendar_features(days, "3D")
        >>> names[:2], values[:, :2].round(4).tolist()
        (('calendar_day_of_week_sin', 'calendar_day_of_week_cos'), [[0.0, 1.0], [0.4339, -0.901]])
    """
    times = np.asarray(times)
    if not np.issubdtype(times.dtype, np.datetime64):
        raise DataError(
            f"calendar='auto' needs dates in the time column, got {times.dtype} values (whole "
            "numbers such as years have no calendar); use calendar='none'"
        )
    times = times.astype("datetime64[s]")
    names: list[str] = []
    columns: list[np.ndarray] = []
    for cycle in _cycles(times, freq):
        angle = 2.0 * np.pi * _position(times, cycle)
        names += [f"{PREFIX}{cycle}_sin", f"{PREFIX}{cycle}_cos"]
        columns += [np.sin(angle), np.cos(angle)]
    return tuple(names), np.stack(columns, axis=1)
