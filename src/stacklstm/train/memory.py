"""Refuse data that cannot fit before anything is allocated or trained: series too large
for the memory available, values too large for float32 training.

The series are held once (:class:`stacklstm.data.HeldSeries`): for ``rows`` rows of
``columns`` columns, the float64 values, the float64 scaled model-space copy and a working
copy while it is made, the time stamps, and a few numbers per window (one window per row at
most, per split). Each batch is gathered when it is needed (:meth:`stacklstm.data.WindowSet.
gather`): ``batch x window x columns`` values, as int64 indices, float64 and float32.
:func:`check_series_fit` compares that estimate with the memory available now, so a table
that cannot fit ends in one line instead of an ``_ArrayMemoryError`` traceback or the
kernel's out-of-memory killer.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..checks import DataError
from .resolve import planned_window as planned_window  # where the window is resolved

#: Bytes per held value: float64 values, float64 model-space copy, float64 working copy.
_VALUE_BYTES = 3 * 8
#: Bytes per row besides its values: the time stamp and the sort order (int64 each).
_ROW_BYTES = 2 * 8
#: Bytes per window per split: origin and series (int64), then per target anchor and level.
_WINDOW_BYTES, _WINDOW_TARGET_BYTES = 2 * 8, 2 * 8
#: Bytes per gathered value of a batch: the int64 index, the float64 gather, the float32 copy.
_BATCH_BYTES = 8 + 8 + 4
#: Bytes of gathered windows per chunk when a whole split is scanned (the float32 check).
CHUNK_BYTES = 16 * 2**20


def available_memory() -> int | None:
    """Bytes of memory available now: ``MemAvailable`` of ``/proc/meminfo`` (Linux), else
    the free physical pages (``os.sysconf``), or None where neither can be read."""
    with contextlib.suppress(OSError, ValueError), open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    with contextlib.suppress(OSError, ValueError, AttributeError):
        return int(os.sysconf("SC_AVPHYS_PAGES")) * int(os.sysconf("SC_PAGE_SIZE"))
    return None  # pragma: no cover - neither Linux nor a POSIX sysconf


def series_bytes(
    rows: int, n_columns: int, n_targets: int, window: int, batch_size: int
) -> tuple[int, int]:
    """Estimated peak bytes ``(held, batch)``: of holding ``rows`` rows (values, model-space
    copy, time stamps, the per-window numbers of three splits), and of one gathered batch.

    Example:
        >>> series_bytes(1000, 1, 1, 32, 64)
        (104000, 40960)
    """
    per_row = (
        n_columns * _VALUE_BYTES
        + _ROW_BYTES
        + 2 * (_WINDOW_BYTES + _WINDOW_TARGET_BYTES * n_targets)
    )
    return rows * per_row, batch_size * window * n_columns * _BATCH_BYTES


def check_series_fit(
    rows: int,
    n_columns: int,
    n_targets: int,
    window: int,
    batch_size: int,
    available: int | None = None,
    *,
    exact: bool = True,
) -> None:
    """Raise DataError if the series of ``rows`` rows and one batch need more memory than
    is available (see :func:`series_bytes`); passes where the available memory is unknown.
    ``window`` is the run's (``exact``) or the largest it can become (see
    :func:`stacklstm.train.resolve.planned_window`), and the message says which.

    Example:
        >>> check_series_fit(1000, 1, 1, 32, 64, available=10**9)
        >>> check_series_fit(10**9, 4, 1, 32, 64, available=10**9)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        stacklstm.checks.DataError: the series of 1000000000 rows x 4 columns need about ...
    """
    available = available_memory() if available is None else available
    held, batch = series_bytes(rows, n_columns, n_targets, window, batch_size)
    if available is not None and held + batch > available:
        steps = f"{window} steps" if exact else f"up to {window} steps (`window` is 'auto')"
        raise DataError(
            f"the series of {rows} rows x {n_columns} columns need about "
            f"{held / 2**30:.2f} GiB held in memory, and one batch of {batch_size} windows of "
            f"{steps} {batch / 2**30:.2f} GiB more, but {available / 2**30:.2f} GiB of "
            "memory is available; use fewer rows or columns, or lower `window` or `batch_size`"
        )


@contextlib.contextmanager
def memory_errors_as_data_errors(rows: int, n_columns: int) -> Iterator[None]:
    """Within the block, a ``MemoryError`` (the estimate was too low) becomes a DataError."""
    try:
        yield
    except MemoryError as err:
        raise DataError(
            f"not enough memory for the series of {rows} rows x {n_columns} columns; use fewer "
            "rows or columns"
        ) from err


#: Largest magnitude of a scaled input or target: its square (the loss) and sums of squares
#: stay finite in float32 (whose largest value is 3.4e38) with room to spare.
_LARGEST_SCALED = 1e16


#: Largest magnitude of a raw value: the report's squared errors stay finite in float64.
_LARGEST_RAW = 1e150


def check_fits_float32(splits: Any, scaler: Any, source: Path, series: Any) -> None:
    """Refuse data whose scaled windows are too large for float32 training (the model's
    dtype): the first step would only report NaN, and lowering `lr` would not help. Also
    refuse raw values whose squares overflow float64 (the report's RMSE)."""
    raw = np.abs(series.values).max(axis=0)  # (n_columns,)
    if (raw > _LARGEST_RAW).any():
        j = int(np.flatnonzero(raw > _LARGEST_RAW)[0])
        raise DataError(
            f"column {series.columns[j]!r} of {source} reaches {raw[j]:.3g}; values up to "
            f"{_LARGEST_RAW:.0e} keep the report's squared errors finite: rescale the column "
            "(e.g. divide it by a power of ten)"
        )
    center, scale = np.atleast_2d(scaler.center), np.atleast_2d(scaler.scale)  # per series
    stats = (~np.isfinite(center) | ~np.isfinite(scale)).any(axis=0)  # (n_columns,)
    largest = np.zeros(len(scaler.columns))
    for split in (splits.train, splits.val):
        if not len(split):
            continue
        nt = split.n_targets
        per_chunk = max(1, CHUNK_BYTES // (8 * split.window * split.n_columns))
        for rows in split.chunks(per_chunk):  # every window, a bounded chunk at a time
            x, y = split.gather(rows)
            x = x.past if isinstance(x, tuple) else x  # the covariates' columns are in it too
            with np.errstate(invalid="ignore"):
                largest = np.fmax(largest, np.abs(x).max(axis=(0, 1)))
                largest[:nt] = np.fmax(largest[:nt], np.abs(y).max(axis=(0, 1)))
            stats |= ~np.isfinite(x).all(axis=(0, 1))
            stats[:nt] |= ~np.isfinite(y).all(axis=(0, 1))
    bad = stats | (largest > _LARGEST_SCALED)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        reach = "overflows float32" if stats[j] else f"reaches {largest[j]:.3g}"
        raise DataError(
            f"column {scaler.columns[j]!r} of {source} is too large for float32 training: "
            f"scaled with `scaler={scaler.kind}` it {reach} (at most {_LARGEST_SCALED:.0e} "
            "keeps the squared errors finite); rescale the column (e.g. divide it by a "
            "power of ten) or choose another `scaler`"
        )
