"""Refuse data that cannot fit before anything is allocated or trained: windows too large
for the memory available, values too large for float32 training.

All windows of a table are cut up front (:func:`stacklstm.data.make_splits`,
:func:`stacklstm.data.make_inference_windows`): for ``rows`` rows, an int64 index of
``rows x window``, a float64 copy of ``rows x window x columns`` and the float32 copy that is
kept. :func:`check_windows_fit` compares that estimate with the memory available now, so a
table that cannot fit ends in one line instead of an ``_ArrayMemoryError`` traceback or the
kernel's out-of-memory killer.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from ..checks import DataError

#: Bytes per (row, window step): the int64 index, plus per column float64 and float32.
_INDEX_BYTES, _COLUMN_BYTES = 8, 8 + 4


def available_memory() -> int | None:
    """Bytes of memory available now (``MemAvailable`` of ``/proc/meminfo``), or None where
    that cannot be read (not Linux)."""
    with contextlib.suppress(OSError, ValueError), open("/proc/meminfo", encoding="ascii") as f:
        for line in f:
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    return None


def windows_bytes(rows: int, window: int, n_columns: int) -> int:
    """Estimated peak bytes of cutting every window of ``rows`` rows."""
    return rows * window * (_INDEX_BYTES + _COLUMN_BYTES * n_columns)


def check_windows_fit(rows: int, window: int, n_columns: int, available: int | None = None) -> None:
    """Raise DataError if the windows of ``rows`` rows need more memory than is available.

    Example:
        >>> check_windows_fit(1000, 32, 1, available=10**9)
        >>> check_windows_fit(10**6, 16384, 1, available=10**9)  # doctest: +ELLIPSIS
        Traceback (most recent call last):
        ...
        stacklstm.checks.DataError: the windows of 1000000 rows x `window` 16384 x 1 columns ...
    """
    available = available_memory() if available is None else available
    need = windows_bytes(rows, window, n_columns)
    if available is not None and need > available:
        raise DataError(
            f"the windows of {rows} rows x `window` {window} x {n_columns} columns need about "
            f"{need / 2**30:.1f} GiB but {available / 2**30:.1f} GiB of memory is available; "
            "lower `window` or use fewer rows"
        )


@contextlib.contextmanager
def memory_errors_as_data_errors(rows: int, window: int, n_columns: int) -> Iterator[None]:
    """Within the block, a ``MemoryError`` (the estimate was too low) becomes a DataError."""
    try:
        yield
    except MemoryError as err:
        raise DataError(
            f"not enough memory for the windows of {rows} rows x `window` {window} x "
            f"{n_columns} columns; lower `window` or use fewer rows"
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
    stats = ~np.isfinite(scaler.center) | ~np.isfinite(scaler.scale)  # (n_columns,)
    largest = np.zeros(len(scaler.columns))
    for split in (splits.train, splits.val):
        if len(split):
            with np.errstate(invalid="ignore"):
                largest = np.fmax(largest, np.abs(split.x).max(axis=(0, 1)))
                ys = np.abs(split.y).max(axis=(0, 1))
            largest[: split.n_targets] = np.fmax(largest[: split.n_targets], ys)
            stats |= ~np.isfinite(split.x).all(axis=(0, 1))
            stats[: split.n_targets] |= ~np.isfinite(split.y).all(axis=(0, 1))
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
