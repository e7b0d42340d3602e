"""The rows of one series or a panel, cleaned: columns checked, time parsed and sorted, missing
stamps inserted, gaps filled (or rejected); the :class:`Series` the windows are cut from."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ..checks import DataError
from ..config import AUTO, DataConfig
from .columns import (
    count_text,
    file_rows,
    numeric_column,
    parse_times,
    rows_text,
    series_ids,
    stamp_text,
    step_text,
)
from .season import require_resolved
from .splits import fewest_rows, input_text, window_text

log = logging.getLogger(__name__)


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
        >>> from stacklstm.data import prepare_series
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


def prepare_rows(frame: pd.DataFrame, cfg: DataConfig, *, forecast_only: bool) -> Series:
    """:func:`prepare_series` without covariates, on ``frame`` whose index labels are the
    row positions of the table (rows set apart keep theirs: messages name them)."""
    frame, values, columns = _checked_values(frame, cfg)
    if cfg.id_column is not None:
        return _prepare_panel(frame, values, columns, cfg)
    times, freq = None, None
    if cfg.time_column is not None:
        values, times, freq = _sorted_on_grid(frame, values, cfg)
    n_filled = int(np.isnan(values).any(axis=1).sum())
    if n_filled:
        values = _fill_gaps(values, times)
        log.info("filled %d rows with missing values by linear interpolation", n_filled)
    if cfg.window != AUTO:  # else the run checks it once the window is known (train.resolve)
        check_length(values.shape[0], cfg, forecast_only)
    return Series(
        values=values,
        times=times,
        columns=columns,
        n_targets=len(cfg.target),
        n_filled=n_filled,
        freq=freq,
    )


def _checked_values(
    frame: pd.DataFrame, cfg: DataConfig
) -> tuple[pd.DataFrame, np.ndarray, tuple[str, ...]]:
    """``(frame, values (rows, n_columns) float64, columns)``: the target and feature columns
    found once each, numeric, finite or empty (NaN), and not all empty."""
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
        values[:, j] = numeric_column(frame[name], name, role)
        if np.isnan(values[:, j]).all():
            raise DataError(
                f"{role} column {name!r} has no values: all {len(frame)} rows are empty"
            )
        infinite = np.flatnonzero(np.isinf(values[:, j]))
        if infinite.size:
            raise DataError(
                f"{role} column {name!r} holds infinite values in rows "
                f"{rows_text(file_rows(frame, infinite))}; expected finite numbers"
            )
    if cfg.gaps == "reject":
        empty = np.flatnonzero(np.isnan(values).any(axis=1))
        if empty.size:
            raise DataError(
                f"gaps='reject' but rows {rows_text(file_rows(frame, empty))} hold empty values; "
                "fill them or use gaps='interpolate'"
            )
    return frame, values, columns


def _on_grid(values: np.ndarray, stamps: np.ndarray, grid: np.ndarray) -> np.ndarray:
    """``values`` (one row per stamp) on ``grid`` (which holds every stamp): NaN rows where
    a stamp was missing."""
    full = np.full((grid.size, values.shape[1]), np.nan)
    full[np.searchsorted(grid, stamps)] = values
    return full


def _id_hint(frame: pd.DataFrame, cfg: DataConfig) -> str:
    """For a table of one series whose time stamps repeat: where another column could
    name several series (text, category or whole numbers, repeating), a hint to name it
    with ``id_column``; else ``""``."""
    if cfg.id_column is not None:
        return ""
    used = {cfg.time_column, *cfg.target, *cfg.features, *cfg.future_features}
    for column in frame.columns:
        values = frame[column]
        kind = values.dtype.kind in "OUSib" or isinstance(values.dtype, pd.CategoricalDtype)
        if column not in used and kind and values.nunique() < len(values):
            return (
                f"; if the table holds several series, name the column that tells them apart "
                f"with `id_column` ({column!r}?)"
            )
    return ""


def _sorted_on_grid(
    frame: pd.DataFrame, values: np.ndarray, cfg: DataConfig
) -> tuple[np.ndarray, np.ndarray, str | None]:
    """``(values, times, freq)`` of one series sorted by time, with the missing stamps of a
    regular step inserted (NaN rows; ``freq`` None for irregular stamps)."""
    name = cfg.time_column
    times = parse_times(frame[name], name)
    order = np.argsort(times, kind="stable")
    times, values = times[order], values[order]
    repeated = np.flatnonzero(times[1:] == times[:-1])
    if repeated.size:
        i = int(repeated[0])
        first, second = file_rows(frame, order[i : i + 2])
        raise DataError(
            f"time column {name!r} repeats {stamp_text(times[i])} (rows {first} and {second}); "
            f"expected one row per time stamp{_id_hint(frame, cfg)}"
        )
    regular = _regular_grid(times)
    if regular is None:
        log.info("time stamps are irregular; no missing stamps inserted")
        return values, times, None
    grid, freq = regular
    first_gap = _check_missing(times, grid, freq, cfg)
    if first_gap is not None:
        n_inserted = grid.size - times.size
        values, times = _on_grid(values, times, grid), grid
        log.info("inserted %d missing time stamps, the first %s", n_inserted, first_gap)
    return values, times, freq


def _check_missing(
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


def check_length(n_rows: int, cfg: DataConfig, forecast_only: bool) -> None:
    """One series of ``n_rows`` rows is long enough for one input window (``forecast_only``)
    or one training window; ``cfg.window`` resolved (ValueError if ``"auto"``).

    Raises:
        DataError: Too few rows (the message says how many are needed).
    """
    require_resolved(cfg, "check_length", ("window",))
    extra = " + 1 (difference)" if cfg.difference else ""
    if forecast_only:
        needed = cfg.min_input_rows
        if n_rows < needed:
            raise DataError(
                f"the series has {count_text(n_rows, 'row')} but one input window needs "
                f"{input_text(cfg)}{extra} = {needed}"
            )
        return
    needed = cfg.window_rows
    if n_rows < needed:
        fewest = fewest_rows(cfg)
        rest = (
            f"; with the validation and test rows the run needs at least {fewest}"
            if fewest > needed
            else ""
        )
        raise DataError(
            f"the series has {count_text(n_rows, 'row')} but {window_text(cfg)} = {needed} "
            f"are needed for one training window{rest}"
        )


def _prepare_panel(
    frame: pd.DataFrame, values: np.ndarray, columns: tuple[str, ...], cfg: DataConfig
) -> Series:
    """The panel branch of :func:`prepare_series`: ``values`` ``(rows, n_columns)`` float64
    are the checked columns in file order (NaN where empty)."""
    name = cfg.id_column
    codes, uniques = pd.factorize(series_ids(frame[name], name), sort=True)
    ids = tuple(str(u) for u in uniques)
    times: np.ndarray | None = None
    if cfg.time_column is not None:
        times = parse_times(frame[cfg.time_column], cfg.time_column)
        order = np.lexsort((times.view(np.int64), codes))  # by series, then time
    else:
        order = np.argsort(codes, kind="stable")  # by series, then file order
    codes, values = codes[order], values[order]
    if times is not None:
        times = times[order]
        repeated = np.flatnonzero((codes[1:] == codes[:-1]) & (times[1:] == times[:-1]))
        if repeated.size:
            i = int(repeated[0])
            first, second = file_rows(frame, order[i : i + 2])
            raise DataError(
                f"series {ids[codes[i]]!r} (id column {name!r}) repeats "
                f"{stamp_text(times[i])} in rows {first} and {second}; "
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
            grid, step = _series_grid(series_id, stamps, cfg)
            if freq is None:
                freq, freq_of = step, series_id
            elif step != freq:
                raise DataError(
                    f"series {series_id!r} (id column {name!r}) has a time step of {step} but "
                    f"series {freq_of!r} has {freq}; every series of a panel needs the same step"
                )
            if grid.size > stamps.size:
                n_inserted += grid.size - stamps.size
                part, stamps = _on_grid(part, stamps, grid), grid
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


def _series_grid(series_id: str, stamps: np.ndarray, cfg: DataConfig) -> tuple[np.ndarray, str]:
    """``(grid, step)``: the regular grid of one panel series' sorted ``stamps`` (at least 3),
    checked: a regular step, and its missing stamps (:func:`_check_missing`)."""
    regular = _regular_grid(stamps)
    if regular is None:
        steps = np.unique(np.diff(stamps))
        raise DataError(
            f"series {series_id!r} (id column {cfg.id_column!r}) has irregular time stamps "
            f"(steps of {step_text(steps[0])} and {step_text(steps[-1])}); every "
            "series of a panel needs one regular time step"
        )
    grid, step = regular
    _check_missing(stamps, grid, step, cfg, series_id)
    return grid, step
