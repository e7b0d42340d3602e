"""The rows of one series or a panel, cleaned: columns checked, time parsed and sorted, missing
stamps inserted, gaps filled (or rejected); the :class:`Series` the windows are cut from.

The time grid is :mod:`.grid`'s; a panel's rows are prepared series by series in :mod:`.panel`."""

from __future__ import annotations

import logging

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
    stamp_text,
)
from .grid import check_missing, fill_gaps, on_grid, regular_grid
from .panel import prepare_panel
from .season import require_resolved
from .series import Series
from .splits import fewest_rows, input_text, window_text

log = logging.getLogger(__name__)


def prepare_rows(frame: pd.DataFrame, cfg: DataConfig, *, forecast_only: bool) -> Series:
    """:func:`prepare_series` without covariates, on ``frame`` whose index labels are the
    row positions of the table (rows set apart keep theirs: messages name them)."""
    frame, values, columns = _checked_values(frame, cfg)
    if cfg.id_column is not None:
        return prepare_panel(frame, values, columns, cfg)
    times, freq = None, None
    if cfg.time_column is not None:
        values, times, freq = _sorted_on_grid(frame, values, cfg)
    n_filled = int(np.isnan(values).any(axis=1).sum())
    if n_filled:
        values = fill_gaps(values, times)
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
    regular = regular_grid(times)
    if regular is None:
        log.info("time stamps are irregular; no missing stamps inserted")
        return values, times, None
    grid, freq = regular
    first_gap = check_missing(times, grid, freq, cfg)
    if first_gap is not None:
        n_inserted = grid.size - times.size
        values, times = on_grid(values, times, grid), grid
        log.info("inserted %d missing time stamps, the first %s", n_inserted, first_gap)
    return values, times, freq


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
