"""Covariates: known-future columns, their values over the horizon, static columns, calendar.

:func:`~stacklstm.data.prepare_series` hands a config with covariates here. The table is
cleaned as before, with the future features read like features (checked, gaps filled by the
same policy); then:

- **Future rows.** The rows after a series' last observed target (every target empty) are
  its future rows: ``predict`` needs exactly ``horizon`` of them per series, with every
  future feature filled, their time stamps continuing the series' step (a missing or NaN
  value, too few or too many rows, or a stamp off the step is an error naming the column
  and the dates; nothing is filled). Training and ``evaluate`` leave them out (logged).
  With only the calendar known in advance, the rows may be absent: the stamps of the
  horizon then follow the series' step.
- **Calendar.** ``calendar="auto"`` appends the columns of
  :func:`~stacklstm.data.calendar.calendar_features`, computed from each stamp's local
  wall-clock time (:func:`~stacklstm.data.calendar.wall_clock`), after the future features:
  the last ``Series.n_future`` columns are the known-future ones.
- **Static features.** One value per series (a panel's ``id_column``; without it, the table
  is one series): every non-empty cell of a series must hold the same number.

numpy and pandas only.

Example:
    >>> frame = pd.DataFrame({"date": pd.date_range("2024-01-01", periods=5, freq="D"),
    ...                       "y": [1.0, 2.0, 3.0, None, None], "promo": [0, 1, 0, 1, 1],
    ...                       "size": 7.0})
    >>> cfg = DataConfig(target=("y",), future_features=("promo",), static_features=("size",),
    ...                  window=2, horizon=2)
    >>> from stacklstm.data import prepare_series
    >>> s = prepare_series(frame, cfg, forecast_only=True)
    >>> s.columns, s.n_future, s.values[:, 0].tolist(), s.static.tolist()
    (('y', 'promo'), 1, [1.0, 2.0, 3.0], [[7.0]])
    >>> s.tail.tolist(), str(s.tail_times[0, 0])[:10]
    ([[[1.0], [1.0]]], '2024-01-04')
"""

from __future__ import annotations

import dataclasses
import logging

import numpy as np
import pandas as pd

from ..checks import DataError
from ..config import CALENDAR_PREFIX, DataConfig
from .calendar import calendar_features, utc_offsets, wall_clock
from .columns import file_rows, numeric_column, parse_times, series_ids, stamp_text
from .rows import Series, prepare_rows

log = logging.getLogger(__name__)

_MAX_LISTED = 5


def expected_columns(cfg: DataConfig, columns: tuple[str, ...]) -> bool:
    """Whether ``columns`` (a series' or a scaler's) are what ``cfg`` makes: targets,
    features, future features, then (with ``calendar="auto"``) calendar columns."""
    base = cfg.target + cfg.features + cfg.future_features
    rest = columns[len(base) :]
    if columns[: len(base)] != base:
        return False
    if cfg.calendar == "none":
        return not rest
    return bool(rest) and all(name.startswith(CALENDAR_PREFIX) for name in rest)


def covariate_sizes(cfg: DataConfig, columns: tuple[str, ...]) -> tuple[int, int]:
    """``(n_future, n_static)`` of a run: future features plus calendar columns (counted in
    ``columns``, the scaler's), and static features."""
    n_calendar = sum(name.startswith(CALENDAR_PREFIX) for name in columns)
    n_calendar = n_calendar if cfg.calendar == "auto" else 0
    return len(cfg.future_features) + n_calendar, len(cfg.static_features)


def _core_config(cfg: DataConfig) -> DataConfig:
    """The config the cleaning itself runs with: future features read as features."""
    return dataclasses.replace(
        cfg,
        features=cfg.features + cfg.future_features,
        future_features=(),
        static_features=(),
        calendar="none",
    )


def _dates_text(stamps: np.ndarray) -> str:
    shown = ", ".join(stamp_text(s) for s in stamps[:_MAX_LISTED])
    return shown + (f" and {len(stamps) - _MAX_LISTED} more" if len(stamps) > _MAX_LISTED else "")


def _series_codes(frame: pd.DataFrame, cfg: DataConfig) -> tuple[np.ndarray, tuple[str, ...]]:
    """``(rows,)`` position of each row's series among the sorted names, and the names."""
    if cfg.id_column is None:
        return np.zeros(len(frame), dtype=np.int64), ("",)
    codes, uniques = pd.factorize(series_ids(frame[cfg.id_column], cfg.id_column), sort=True)
    return codes.astype(np.int64), tuple(str(u) for u in uniques)


def _is_empty(raw: pd.Series) -> np.ndarray:
    """``(rows,)`` bool: the cell is empty (missing, NaN, or blank text)."""
    blank = raw.map(lambda v: isinstance(v, str) and not v.strip()).to_numpy(dtype=bool)
    return raw.isna().to_numpy() | blank


def _row_times(frame: pd.DataFrame, cfg: DataConfig) -> np.ndarray:
    """``(rows,)`` the time stamps in file order (UTC), or the row numbers without a time
    column."""
    if cfg.time_column is None:
        return np.arange(len(frame), dtype=np.int64)
    return parse_times(frame[cfg.time_column], cfg.time_column)


def _future_rows(frame: pd.DataFrame, cfg: DataConfig, times: np.ndarray) -> np.ndarray:
    """``(rows,)`` bool: the rows after their series' last row with a target value."""
    codes, _ = _series_codes(frame, cfg)
    empty = np.all([_is_empty(frame[name]) for name in cfg.target], axis=0)
    order = np.lexsort((times.view(np.int64), codes))  # by series, then time
    future = np.zeros(len(frame), dtype=bool)
    sorted_codes = codes[order]
    starts = np.flatnonzero(np.r_[True, sorted_codes[1:] != sorted_codes[:-1]])
    for start, stop in zip(starts, np.r_[starts[1:], len(order)], strict=True):
        rows = order[start:stop]
        observed = np.flatnonzero(~empty[rows])
        last = observed[-1] if observed.size else -1
        future[rows[last + 1 :]] = True
    return future


def _check_columns(frame: pd.DataFrame, cfg: DataConfig) -> pd.DataFrame:
    header = [str(c) for c in frame.columns]
    for name in cfg.static_features:
        if header.count(name) == 0:
            raise DataError(
                f"column {name!r} not found; available columns: {', '.join(map(repr, header))}"
            )
        if header.count(name) > 1:
            raise DataError(f"column {name!r} appears {header.count(name)} times in the header")
    return frame.set_axis(header, axis=1)


def _static_values(frame: pd.DataFrame, cfg: DataConfig, ids: tuple[str, ...]) -> np.ndarray:
    """``(n_series, n_static)`` the value of each static column in each series."""
    codes, names = _series_codes(frame, cfg)
    position = {name: i for i, name in enumerate(names)}
    out = np.full((len(ids), len(cfg.static_features)), np.nan)
    for j, column in enumerate(cfg.static_features):
        values = numeric_column(frame[column], column, "static feature")
        for i, series_id in enumerate(ids):
            mine = values[codes == position[series_id]] if series_id in position else values[:0]
            distinct = np.unique(mine[~np.isnan(mine)])
            where = "the table" if cfg.id_column is None else f"series {series_id!r}"
            if distinct.size == 0:
                raise DataError(f"static feature column {column!r} has no value in {where}")
            if not np.isfinite(distinct).all():
                raise DataError(
                    f"static feature column {column!r} holds an infinite value in {where}"
                )
            if distinct.size > 1:
                raise DataError(
                    f"static feature column {column!r} holds {distinct.size} values in {where} "
                    f"({distinct[0]:g} and {distinct[1]:g}); a static feature has one value per "
                    "series"
                )
            out[i, j] = distinct[0]
    return out


def _next_stamps(last: np.datetime64 | np.integer, freq: str | None, count: int) -> np.ndarray:
    """The ``count`` stamps after ``last`` on the step ``freq``."""
    if freq is None:
        raise DataError(
            "the time stamps are irregular, so the horizon's stamps cannot be inferred; add "
            "the horizon's rows (time stamp, target empty) after the last observed target"
        )
    if isinstance(last, np.integer):
        return last + int(freq) * np.arange(1, count + 1)
    stamps = pd.date_range(pd.Timestamp(last), periods=count + 1, freq=freq)[1:]
    return stamps.to_numpy().astype(np.asarray(last).dtype)


def _listed(rows: np.ndarray) -> str:
    """``row 4``, ``rows 4, 5``: table rows (row 1 is the first row below the header)."""
    shown = ", ".join(str(int(r)) for r in rows[:_MAX_LISTED])
    more = f" and {len(rows) - _MAX_LISTED} more" if len(rows) > _MAX_LISTED else ""
    return ("row " if len(rows) == 1 else "rows ") + shown + more


def _check_on_step(
    stamps: np.ndarray, last: np.datetime64 | np.integer, freq: str, rows: np.ndarray, where: str
) -> None:
    """DataError naming the first of the future rows' ``stamps`` (in table rows ``rows``)
    that is not on the series' time step ``freq`` counted from its last stamp ``last``, with
    the steps just before and after it."""
    for stamp, row in zip(stamps, rows, strict=True):
        if isinstance(last, np.integer):
            step = int(freq)
            before = last + (int(stamp) - int(last)) // step * step
            after = before + step
        else:
            grid = pd.date_range(pd.Timestamp(last), end=pd.Timestamp(stamp), freq=freq)
            if not len(grid):  # before the last stamp: the message on the dates says so
                return
            before = grid[-1].to_datetime64().astype(np.asarray(last).dtype)
            following = pd.date_range(grid[-1], periods=2, freq=freq)[1]
            after = following.to_datetime64().astype(np.asarray(last).dtype)
        if before != stamp:
            raise DataError(
                f"the future row {row}{where} has the time stamp {stamp_text(stamp)}, which "
                f"parses but is not on the series' time step of {freq} from its last observed "
                f"target ({stamp_text(last)}): the nearest steps are {stamp_text(before)} and "
                f"{stamp_text(after)}"
            )


def _tail(
    future: pd.DataFrame,
    cfg: DataConfig,
    series: Series,
    written: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """``(tail (n_series, horizon, n_future_features), stamps (n_series, horizon))`` of the
    future rows, checked: ``horizon`` per series, every value there, stamps on the step."""
    h, names = cfg.horizon, cfg.future_features
    ids = series.ids if series.ids is not None else ("",)
    codes, code_names = _series_codes(future, cfg) if len(future) else (np.zeros(0, int), ())
    position = {name: i for i, name in enumerate(code_names)}
    values = np.column_stack(
        [numeric_column(future[name], name, "future feature") for name in names]
        or [np.zeros((len(future), 0))]
    ).reshape(len(future), len(names))
    tail = np.full((len(ids), h, len(names)), np.nan)
    stamps_out = None
    bounds = series.bounds
    for i, series_id in enumerate(ids):
        where = "" if series.ids is None else f" of series {series_id!r}"
        mine = np.flatnonzero(codes == position[series_id]) if series_id in position else []
        mine = np.asarray(mine, dtype=np.int64)
        last = series.times[bounds[i + 1] - 1] if series.times is not None else bounds[i + 1] - 1
        last_text = stamp_text(last) if series.times is not None else f"row {last + 1}"
        if len(mine) == 0 and not names:  # calendar only: the stamps follow the step
            stamps = _next_stamps(last, series.freq, h)
        else:
            if len(mine) != h:
                listed = f" ({', '.join(map(repr, names))} filled)" if names else ""
                raise DataError(
                    f"the table holds {len(mine)} rows after the last observed target{where} "
                    f"({last_text}) but forecasting needs horizon ({h}) rows there, one per "
                    f"step, with the target empty and the future features{listed}"
                )
            order = np.argsort(written[mine], kind="stable")
            mine = mine[order]
            stamps = written[mine]
            if series.times is not None:
                expected = _next_stamps(last, series.freq, h) if series.freq else None
                if expected is not None and not np.array_equal(stamps, expected):
                    _check_on_step(stamps, last, series.freq, file_rows(future, mine), where)
                    raise DataError(
                        f"the rows after the last observed target{where} ({last_text}) are "
                        f"{_dates_text(stamps)} but the horizon's steps of {series.freq} are "
                        f"{_dates_text(expected)}"
                    )
                if expected is None and not (stamps > last).all():
                    raise DataError(
                        f"the rows after the last observed target{where} ({last_text}) must "
                        f"come after it, got {_dates_text(stamps)}"
                    )
            part = values[mine]  # (horizon, n_future_features)
            rows = file_rows(future, mine)
            for j, name in enumerate(names):
                for bad, what, needs in (
                    (
                        np.isnan(part[:, j]),
                        "has no value",
                        "every future value (nothing is filled in)",
                    ),
                    (np.isinf(part[:, j]), "holds an infinite value", "finite future values"),
                ):
                    at = np.flatnonzero(bad)
                    if at.size:
                        dates = (
                            f"{_dates_text(stamps[at])} "
                            if series.times is not None
                            else f"steps {', '.join(str(k + 1) for k in at)} of the horizon "
                        )
                        raise DataError(
                            f"future feature {name!r}{where} {what} for {dates}"
                            f"({_listed(rows[at])}); forecasting needs {needs}"
                        )
            tail[i] = part
        if stamps_out is None:
            stamps_out = np.empty((len(ids), h), dtype=np.asarray(stamps).dtype)
        stamps_out[i] = stamps
    return tail, stamps_out


def _local(
    times: np.ndarray, raw: pd.Series | None, written: np.ndarray, rows: np.ndarray
) -> np.ndarray:
    """Wall-clock time of ``times`` from the written stamps ``written[rows]`` of the time
    column ``raw`` (UTC offsets read from the text)."""
    offsets = None if raw is None else utc_offsets(raw.iloc[rows])
    return wall_clock(times, written[rows], offsets)


def _add_calendar(
    series: Series,
    frame: pd.DataFrame,
    cfg: DataConfig,
    written: np.ndarray,
    tail_times: np.ndarray | None,
) -> tuple[Series, np.ndarray | None]:
    """The series with its calendar columns appended, and the calendar of the tail."""
    if not np.issubdtype(series.times.dtype, np.datetime64):
        calendar_features(series.times, series.freq)  # raises: whole numbers have no calendar
    codes, names = _series_codes(frame, cfg)
    position = {name: i for i, name in enumerate(names)}
    ids = series.ids if series.ids is not None else ("",)
    raw = frame[cfg.time_column]
    bounds = series.bounds
    blocks, tail_blocks, columns = [], [], None
    for i, series_id in enumerate(ids):
        rows = np.flatnonzero(codes == position[series_id])
        stamps = series.times[bounds[i] : bounds[i + 1]]
        if tail_times is not None:
            stamps = np.concatenate([stamps, tail_times[i]])
        local = _local(stamps, raw, written, rows)
        names_i, values = calendar_features(local, series.freq)
        if columns is not None and names_i != columns:  # pragma: no cover - one step for all
            raise DataError(f"series {series_id!r} gets calendar columns {names_i}, not {columns}")
        columns = names_i
        n = bounds[i + 1] - bounds[i]
        blocks.append(values[:n])
        tail_blocks.append(values[n:])
    assert columns is not None
    values = np.concatenate([series.values, np.concatenate(blocks)], axis=1)
    tail = np.stack(tail_blocks) if tail_times is not None else None
    series = dataclasses.replace(
        series,
        values=values,
        columns=series.columns + columns,
        n_future=series.n_future + len(columns),
    )
    return series, tail


def prepare_with_covariates(
    frame: pd.DataFrame, cfg: DataConfig, *, forecast_only: bool = False
) -> Series:
    """:func:`~stacklstm.data.prepare_series` for a config with covariates (see the module).

    Returns:
        The series with ``columns`` targets, features, future features, calendar columns;
        ``n_future`` the count of the last two kinds; ``static`` with ``cfg.static_features``;
        with ``forecast_only`` and known-future columns, ``tail`` and ``tail_times``.

    Raises:
        DataError: As ``prepare_series``; and a static feature without a value or with two
            values in a series; the future rows of ``predict`` (see the module); a calendar
            for stamps without one (whole numbers, yearly).
    """
    if len(frame) == 0:
        raise DataError("the table has no data rows; expected a header row and data rows")
    frame = _check_columns(frame, cfg)
    core = _core_config(cfg)
    known_future = bool(cfg.future_features) or cfg.calendar == "auto"
    header = [str(c) for c in frame.columns]
    missing = [name for name in (*cfg.target, cfg.time_column) if name and name not in header]
    future = frame.iloc[:0]
    if known_future and not missing:
        is_future = _future_rows(frame, cfg, _row_times(frame, cfg))
        if is_future.any():
            future, frame = frame[is_future], frame[~is_future]
            if not forecast_only:
                log.info(
                    "left out %d rows after the last observed target (the horizon's future "
                    "rows, read by predict)",
                    int(is_future.sum()),
                )
            if len(frame) == 0:
                raise DataError("every row of the table has an empty target")
    core.validate()
    series = prepare_rows(frame, core, forecast_only=forecast_only)
    n_future = len(cfg.future_features)
    series = dataclasses.replace(series, n_future=n_future)
    written = _row_times(frame, cfg) if cfg.time_column is not None else None
    tail = tail_times = None
    if forecast_only and known_future:
        future_written = _row_times(future, cfg) if len(future) else np.zeros(0, np.int64)
        tail, tail_times = _tail(future, cfg, series, future_written)
        if series.times is None:
            tail_times = None
    if cfg.calendar == "auto":
        all_frame = pd.concat([frame, future]) if tail_times is not None and len(future) else frame
        all_written = (
            np.concatenate([written, _row_times(future, cfg)])
            if all_frame is not frame
            else written
        )
        series, tail_calendar = _add_calendar(series, all_frame, cfg, all_written, tail_times)
        if tail is not None and tail_calendar is not None:
            tail = np.concatenate([tail, tail_calendar], axis=2)
    static = None
    if cfg.static_features:
        both = pd.concat([frame, future]) if len(future) else frame
        static = _static_values(both, cfg, series.ids or ("",))
    return dataclasses.replace(
        series,
        static=static,
        static_columns=cfg.static_features,
        tail=tail,
        tail_times=tail_times,
    )
