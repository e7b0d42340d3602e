"""Cleaning: check columns and types, parse and sort time, insert missing stamps, fill gaps."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..checks import DataError
from ..config import DataConfig
from .season import resolve_data_config
from .table import written_text

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
        ids: The names of the series of a panel (``DataConfig.id_column``), sorted; None
            for a table that is one series.
        offsets: ``(n_series + 1,)`` int64: series ``i`` is rows ``offsets[i]:offsets[i+1]``
            of ``values`` (and ``times``); None for one series.
        n_future: The last ``n_future`` columns are known in advance (future features, then
            calendar columns); see :mod:`stacklstm.data.covariates`.
        static: ``(n_series, n_static)`` float64 static features of each series, or None.
        static_columns: Their names.
        tail: ``(n_series, horizon, n_future)`` float64 known-future values of the
            ``horizon`` steps after each series' last row (read by ``predict``), or None.
        tail_times: ``(n_series, horizon)`` time stamps of those steps, or None.

    Example:
        >>> frame = pd.DataFrame({"id": ["b", "a", "b", "a"], "t": [1, 1, 2, 2],
        ...                       "y": [10.0, 1.0, 20.0, 2.0]})
        >>> s = prepare_series(frame, DataConfig(target=("y",), time_column="t",
        ...                    id_column="id", window=1, horizon=1))
        >>> s.ids, s.bounds.tolist(), s.values[:, 0].tolist()
        (('a', 'b'), [0, 2, 4], [1.0, 2.0, 10.0, 20.0])
    """

    values: np.ndarray
    times: np.ndarray | None
    columns: tuple[str, ...]
    n_targets: int
    n_filled: int = 0
    freq: str | None = None
    ids: tuple[str, ...] | None = None
    offsets: np.ndarray | None = None
    n_future: int = 0
    static: np.ndarray | None = None
    static_columns: tuple[str, ...] = ()
    tail: np.ndarray | None = None
    tail_times: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.values.shape[0])

    @property
    def n_series(self) -> int:
        return 1 if self.ids is None else len(self.ids)

    @property
    def bounds(self) -> np.ndarray:
        """``(n_series + 1,)`` int64 row bounds of the series (``[0, len]`` for one series)."""
        if self.offsets is None:
            return np.array([0, len(self)], dtype=np.int64)
        return self.offsets

    def select(self, keep: Sequence[int] | np.ndarray) -> Series:
        """The panel's series at positions ``keep`` (ascending), rows copied; ``self`` when
        ``keep`` is every series."""
        keep = np.asarray(keep, dtype=np.int64)
        if self.ids is None or np.array_equal(keep, np.arange(self.n_series)):
            return self
        bounds = self.bounds
        rows = np.concatenate(
            [np.arange(bounds[i], bounds[i + 1]) for i in keep] or [np.zeros(0, np.int64)]
        )
        lengths = bounds[keep + 1] - bounds[keep]
        return dataclasses.replace(
            self,
            values=self.values[rows],
            times=None if self.times is None else self.times[rows],
            ids=tuple(self.ids[i] for i in keep),
            offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
            static=None if self.static is None else self.static[keep],
            tail=None if self.tail is None else self.tail[keep],
            tail_times=None if self.tail_times is None else self.tail_times[keep],
        )


def _file_rows(raw: pd.Series | pd.DataFrame, positions: Sequence[int] | np.ndarray) -> np.ndarray:
    """``(n,)`` int64 row numbers in the table (row 1 is the first row below the header) of
    the cells at ``positions`` of ``raw``: its index labels, the table's row positions that
    :func:`prepare_series` gives every row (kept when rows are set apart), plus one."""
    return raw.index.to_numpy(dtype=np.int64)[np.asarray(positions, dtype=np.int64)] + 1


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
            f"{role} column {name!r} must be numeric; row {_file_rows(raw, [row])[0]} holds "
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
            raise DataError(
                f"time column {name!r} has no time stamp in row {_file_rows(raw, missing)[0]}"
            )
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
        number = _file_rows(raw, [row])[0]
        if pd.isna(value):
            raise DataError(f"time column {name!r} has no time stamp in row {number}")
        raise DataError(
            f"time column {name!r}: cannot parse {_as_written(value)} in row {number} as a date "
            "(expected e.g. 2001-12-29)"
        )
    return parsed.to_numpy()


def _has_digit(value: object) -> bool:
    """A text cell with a digit: a stamp worth parsing alone (not ``today`` or ``now``)."""
    return isinstance(value, str) and any(c.isdigit() for c in value)


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

    A panel (``cfg.id_column`` set) holds many series, one row per series and time stamp:
    the rows are ordered by series name, then time; each series is cleaned on its own (gaps
    are filled within it, never across two); every series needs the same regular time step.
    Its series may differ in length and start; which are too short for a window is decided
    when the windows are cut (:func:`~stacklstm.data.make_splits`). The series' names are
    text: a CSV table's id cells exactly as written (``01`` and ``1`` are two series; ``NA``,
    ``None``, ``null`` and ``nan`` are names like any other), other cells as ``str`` writes
    their values (a Parquet column of integers: ``1``).

    Messages name rows by their number in the table: row 1 is its first row (the first row
    below a file's header, its line 2).

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
            ``window + horizon`` (+1 with ``difference``). For a panel also: an empty id (names
            the row), a
            series that repeats a time stamp, has irregular stamps, another time step than
            the others, or a column without any value.

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
    if cfg.id_column is not None and cfg.id_column in frame.columns:
        frame = _with_text_ids(frame, cfg.id_column)
    if not (
        isinstance(frame.index, pd.RangeIndex) and frame.index.equals(pd.RangeIndex(len(frame)))
    ):
        frame = frame.set_axis(pd.RangeIndex(len(frame)), axis=0)  # labels: the row positions
    if cfg.has_covariates:  # future, static and calendar columns around the same cleaning
        from .covariates import prepare_with_covariates

        return prepare_with_covariates(frame, cfg, forecast_only=forecast_only)
    return _prepare_rows(frame, cfg, forecast_only=forecast_only)


def _with_text_ids(frame: pd.DataFrame, name: str) -> pd.DataFrame:
    """``frame`` with its id column ``name`` as written in its CSV file (see
    :func:`~stacklstm.data.table.written_text`); ``frame`` itself where the column holds text
    already or the file is not known."""
    raw = frame[name]
    if not isinstance(raw, pd.Series):  # the name twice: refused by the column checks
        return frame
    if raw.dtype == object and raw.map(lambda v: isinstance(v, str)).all():
        return frame  # pandas keeps text cells as written
    text = written_text(frame, name)
    if text is None:
        return frame
    frame = frame.copy(deep=False)
    frame[name] = text
    return frame


def _prepare_rows(frame: pd.DataFrame, cfg: DataConfig, *, forecast_only: bool) -> Series:
    """:func:`prepare_series` without covariates, on ``frame`` whose index labels are the
    row positions of the table (rows set apart keep theirs: messages name them)."""
    if len(frame) == 0:
        raise DataError("the table has no data rows; expected a header row and data rows")
    columns = cfg.target + cfg.features
    wanted = columns + tuple(c for c in (cfg.time_column, cfg.id_column) if c is not None)
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
                f"{role} column {name!r} holds infinite values in rows "
                f"{_rows_text(_file_rows(frame, infinite))}; expected finite numbers"
            )
    if cfg.gaps == "reject":
        empty = np.flatnonzero(np.isnan(values).any(axis=1))
        if empty.size:
            raise DataError(
                f"gaps='reject' but rows {_rows_text(_file_rows(frame, empty))} hold empty values; "
                "fill them or use gaps='interpolate'"
            )

    if cfg.id_column is not None:
        return _prepare_panel(frame, values, columns, cfg)

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
            first, second = _file_rows(frame, order[i : i + 2])
            rows = f"rows {first} and {second}"
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
    cfg = resolve_data_config(cfg, freq)  # window="auto" follows the time step
    if forecast_only:
        needed = cfg.window + int(cfg.difference)
        if values.shape[0] < needed:
            raise DataError(
                f"the series has {_count(values.shape[0], 'row')} but one input window needs "
                f"window ({cfg.window}){extra} = {needed}"
            )
    else:
        needed = cfg.window + cfg.horizon + int(cfg.difference)
        if values.shape[0] < needed:
            from .windows import fewest_rows  # (it imports this module)

            fewest = fewest_rows(cfg)
            rest = (
                f"; with the validation and test rows the run needs at least {fewest}"
                if fewest > needed
                else ""
            )
            raise DataError(
                f"the series has {_count(values.shape[0], 'row')} but window ({cfg.window}) + "
                f"horizon ({cfg.horizon}){extra} = {needed} are needed for one training "
                f"window{rest}"
            )
    return Series(
        values=values,
        times=times,
        columns=columns,
        n_targets=len(cfg.target),
        n_filled=n_filled,
        freq=freq,
    )


def _count(n: int, noun: str) -> str:
    """``1 row``, ``3 rows``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _step_text(step: np.timedelta64 | np.integer) -> str:
    """``1 day``, ``7 days``, ``6:00:00``; a whole number as it is."""
    if isinstance(step, np.integer | int):
        return str(int(step))
    step = pd.Timedelta(step)
    if step % pd.Timedelta(days=1) == pd.Timedelta(0):
        return f"{step.days} day" + ("s" if step.days != 1 else "")
    return str(step)


def _series_ids(raw: pd.Series, name: str) -> np.ndarray:
    """``(rows,)`` object array of each row's series name: text as it is, other values as
    ``str`` writes them. DataError for an empty cell (missing, or blank text)."""
    blank = raw.map(lambda v: isinstance(v, str) and not v.strip()).to_numpy(dtype=bool)
    missing = np.flatnonzero(raw.isna().to_numpy() | blank)
    if missing.size:
        raise DataError(
            f"id column {name!r} has no series name in row {_file_rows(raw, missing)[0]}; "
            "every row needs the name of its series"
        )
    return raw.map(lambda v: v if isinstance(v, str) else str(v)).to_numpy(dtype=object)


def _prepare_panel(
    frame: pd.DataFrame, values: np.ndarray, columns: tuple[str, ...], cfg: DataConfig
) -> Series:
    """The panel branch of :func:`prepare_series`: ``values`` ``(rows, n_columns)`` float64
    are the checked columns in file order (NaN where empty)."""
    name = cfg.id_column
    codes, uniques = pd.factorize(_series_ids(frame[name], name), sort=True)
    ids = tuple(str(u) for u in uniques)
    times: np.ndarray | None = None
    if cfg.time_column is not None:
        times = _parse_times(frame[cfg.time_column], cfg.time_column)
        order = np.lexsort((times.view(np.int64), codes))  # by series, then time
    else:
        order = np.argsort(codes, kind="stable")  # by series, then file order
    codes, values = codes[order], values[order]
    if times is not None:
        times = times[order]
        repeated = np.flatnonzero((codes[1:] == codes[:-1]) & (times[1:] == times[:-1]))
        if repeated.size:
            i = int(repeated[0])
            first, second = _file_rows(frame, order[i : i + 2])
            raise DataError(
                f"series {ids[codes[i]]!r} (id column {name!r}) repeats "
                f"{_stamp_text(times[i])} in rows {first} and {second}; "
                "expected one row per series and time stamp"
            )
    bounds = np.concatenate([[0], np.flatnonzero(codes[1:] != codes[:-1]) + 1, [codes.size]])
    pieces: list[tuple[np.ndarray, np.ndarray | None]] = []
    freq: str | None = None
    freq_of: str | None = None  # the series that set `freq`
    n_inserted = n_filled = 0
    for i, series_id in enumerate(ids):
        part = values[bounds[i] : bounds[i + 1]]
        stamps = None if times is None else times[bounds[i] : bounds[i + 1]]
        if stamps is not None and stamps.size >= 3:
            regular = _regular_grid(stamps)
            if regular is None:
                steps = np.unique(np.diff(stamps))
                raise DataError(
                    f"series {series_id!r} (id column {name!r}) has irregular time stamps "
                    f"(steps of {_step_text(steps[0])} and {_step_text(steps[-1])}); every "
                    "series of a panel needs one regular time step"
                )
            grid, step = regular
            if freq is None:
                freq, freq_of = step, series_id
            elif step != freq:
                raise DataError(
                    f"series {series_id!r} (id column {name!r}) has a time step of {step} but "
                    f"series {freq_of!r} has {freq}; every series of a panel needs the same step"
                )
            if grid.size > stamps.size:
                missing = grid.size - stamps.size
                first_gap = _stamp_text(grid[~np.isin(grid, stamps)][0])
                if missing > stamps.size:
                    raise DataError(
                        f"series {series_id!r} has {stamps.size} stamps but {missing} missing "
                        f"steps of {step} between them; check its dates"
                    )
                if cfg.gaps == "reject":
                    raise DataError(
                        f"gaps='reject' but series {series_id!r} misses {missing} time stamps "
                        f"of step {step}, the first {first_gap}; add them or use "
                        "gaps='interpolate'"
                    )
                full = np.full((grid.size, part.shape[1]), np.nan)
                full[np.searchsorted(grid, stamps)] = part
                part, stamps = full, grid
                n_inserted += missing
        empty_rows = np.isnan(part).any(axis=1)
        if empty_rows.any():
            empty = np.flatnonzero(np.isnan(part).all(axis=0))
            if empty.size:
                raise DataError(
                    f"series {series_id!r} (id column {name!r}) has no values in column "
                    f"{columns[empty[0]]!r}; fill it or drop the series"
                )
            n_filled += int(empty_rows.sum())
            part = _fill_gaps(part, stamps)
        pieces.append((part, stamps))
    if n_inserted:
        log.info("inserted %d missing time stamps", n_inserted)
    if n_filled:
        log.info("filled %d rows with missing values by linear interpolation", n_filled)
    if n_inserted or n_filled:
        values = np.concatenate([part for part, _ in pieces])
        if times is not None:
            times = np.concatenate([stamps for _, stamps in pieces])  # type: ignore[misc]
    lengths = np.array([part.shape[0] for part, _ in pieces], dtype=np.int64)
    return Series(
        values=values,
        times=times,
        columns=columns,
        n_targets=len(cfg.target),
        n_filled=n_filled,
        freq=freq,
        ids=ids,
        offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
    )
