"""Cleaning: check columns and types, parse and sort time, insert missing stamps, fill gaps.

:func:`prepare_series` is the way in: it reads the id column as written, gives every row
its position in the table and hands the rows to :mod:`.rows` (or, with covariates, to
:mod:`.covariates`, which sets the future rows and static values apart around the same
cleaning)."""

from __future__ import annotations

import pandas as pd

from ..config import DataConfig
from .covariates import prepare_with_covariates
from .rows import prepare_rows
from .series import Series
from .table import written_text

__all__ = ["Series", "prepare_series"]


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
        return prepare_with_covariates(frame, cfg, forecast_only=forecast_only)
    return prepare_rows(frame, cfg, forecast_only=forecast_only)


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
