"""A panel's rows (an id column): sorted by series, then time; each series put on the panel's
one regular time step (missing stamps inserted) and its gaps filled."""

from __future__ import annotations

import logging

import numpy as np
import pandas as pd

from ..checks import DataError
from ..config import DataConfig
from .columns import file_rows, parse_times, series_ids, stamp_text, step_text
from .grid import check_missing, fill_gaps, on_grid, regular_grid
from .series import Series

# the logger of .rows, whose lines these are (a retrained run says each of them once:
# stacklstm.run.retrain)
log = logging.getLogger("stacklstm.data.rows")


def prepare_panel(
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
            if freq is not None and step != freq:  # a short series: 91D where others are QS?
                if _same_on(stamps, freq):
                    step = freq
                elif all(_same_on(p[1], step) for p in pieces if p[1] is not None):
                    freq = step  # the earlier series lie on this series' calendar step
            if freq is None:
                freq, freq_of = step, series_id
            elif step != freq:
                raise DataError(
                    f"series {series_id!r} (id column {name!r}) has a time step of {step} but "
                    f"series {freq_of!r} has {freq}; every series of a panel needs the same step"
                )
            if grid.size > stamps.size:
                n_inserted += grid.size - stamps.size
                part, stamps = on_grid(part, stamps, grid), grid
        empty_rows = np.isnan(part).any(axis=1)
        if empty_rows.any():
            empty = np.flatnonzero(np.isnan(part).all(axis=0))
            if empty.size:
                raise DataError(
                    f"series {series_id!r} (id column {name!r}) has no values in column "
                    f"{columns[empty[0]]!r}; fill it or drop the series"
                )
            n_filled += int(empty_rows.sum())
            part = fill_gaps(part, stamps)
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


def on_step(stamps: np.ndarray, step: str) -> np.ndarray | None:
    """The grid of the calendar ``step`` (a pandas alias of months, quarters or years:
    ``"QS"``, ``"MS"``, ...) from the first to the last of ``stamps`` when every stamp lies
    on it, else None (a fixed step such as ``"D"`` too): a series of a few rows whose fixed
    step (``"91D"``) is the panel's calendar one.

    Example:
        >>> stamps = pd.to_datetime(["2000-01-01", "2000-04-01", "2000-07-01"]).to_numpy()
        >>> len(on_step(stamps, "QS")), len(on_step(stamps, "MS"))
        (3, 7)
        >>> on_step(stamps, "YS") is None, on_step(stamps, "D") is None
        (True, True)
    """
    if np.issubdtype(stamps.dtype, np.integer):
        return None
    try:
        offset = pd.tseries.frequencies.to_offset(step)
        if isinstance(offset, pd.offsets.Tick):  # a fixed step: no calendar to fall on
            return None
        grid = pd.date_range(stamps[0], stamps[-1], freq=offset).to_numpy().astype(stamps.dtype)
    except (ValueError, TypeError):
        return None
    if grid.size == 0 or grid[0] != stamps[0] or not np.isin(stamps, grid).all():
        return None
    return grid


def _same_on(stamps: np.ndarray, step: str) -> bool:
    """Whether ``stamps`` are exactly the grid of ``step`` over their span."""
    grid = on_step(stamps, step)
    return grid is not None and grid.size == stamps.size


def _series_grid(series_id: str, stamps: np.ndarray, cfg: DataConfig) -> tuple[np.ndarray, str]:
    """``(grid, step)``: the regular grid of one panel series' sorted ``stamps`` (at least 3),
    checked: a regular step, and its missing stamps (:func:`check_missing`)."""
    regular = regular_grid(stamps)
    if regular is None:
        steps = np.unique(np.diff(stamps))
        raise DataError(
            f"series {series_id!r} (id column {cfg.id_column!r}) has irregular time stamps "
            f"(steps of {step_text(steps[0])} and {step_text(steps[-1])}); every "
            "series of a panel needs one regular time step"
        )
    grid, step = regular
    check_missing(stamps, grid, step, cfg, series_id)
    return grid, step
