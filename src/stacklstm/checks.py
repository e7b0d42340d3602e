"""The one set of field checks, used by the modules (``LSTMModel``, ``StackedLSTM``) and the
configs alike, so that each kind of mistake has one message and one exception type.

- A value of the wrong type (a string for an int, a float for a bool) is a
  :class:`SettingTypeError`, which is both a ``TypeError`` and a ``ValueError``.
- A value of the right type outside its range is a :class:`SettingError` (a ``ValueError``).

Messages name the Python field (``batch_size``), say what was expected and what was given;
the command line translates field names into its flags (``--batch-size``) in one place.

Example:
    >>> check_int("epochs", 3, low=1)
    3
    >>> check_int("epochs", 0, low=1)
    Traceback (most recent call last):
    ...
    stacklstm.checks.SettingError: epochs must be an integer >= 1, got 0
"""

from __future__ import annotations

import dataclasses
import itertools
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np


class SettingError(ValueError):
    """A setting (a config field or a module argument) holds a bad value.

    Attributes:
        field: The Python name of the setting, or None when the message names several.
    """

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(" ".join(str(message).split()))
        self.field = field


class SettingTypeError(SettingError, TypeError):
    """A setting holds a value of the wrong type (a ``TypeError`` and a ``ValueError``)."""


class DataError(ValueError):
    """Bad data: a table, a column or a series that cannot be used as asked.

    The message is one line: what was expected, what was given. The CLI prints it and exits
    with status 2.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))


def is_int(value: object) -> bool:
    """An integer (Python or numpy), not a bool."""
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def is_real(value: object) -> bool:
    """A real number (Python or numpy int or float), not a bool."""
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def check_int(name: str, value: object, low: int, high: int | None = None) -> int:
    """``value`` as an int in ``[low, high]``; raises SettingTypeError or SettingError."""
    bound = f">= {low}" if high is None else f"in [{low}, {high}]"
    if not is_int(value):
        raise SettingTypeError(f"{name} must be an integer {bound}, got {value!r}", name)
    if value < low or (high is not None and value > high):
        raise SettingError(f"{name} must be an integer {bound}, got {value!r}", name)
    return int(value)


def check_positive_int(name: str, value: object, high: int | None = None) -> int:
    """``value`` as an int ``>= 1`` (and ``<= high``)."""
    return check_int(name, value, 1, high)


def check_real(
    name: str, value: object, low: float, high: float = np.inf, *, open_low: bool = False
) -> float:
    """``value`` as a finite float in ``[low, high)`` (``(low, high)`` with ``open_low``)."""
    bracket = "(" if open_low else "["
    upper = "inf)" if high == np.inf else f"{high})"
    message = f"{name} must be a number in {bracket}{low}, {upper}, got {value!r}"
    if not is_real(value):
        raise SettingTypeError(message, name)
    inside = np.isfinite(value) and value < high and (value > low if open_low else value >= low)
    if not inside:
        raise SettingError(message, name)
    return float(value)


def check_fraction(name: str, value: object) -> float:
    """``value`` as a float in ``[0, 1)`` (a share of rows, a dropout rate)."""
    return check_real(name, value, 0.0, 1.0)


def check_bool(name: str, value: object) -> bool:
    """``value`` if it is True or False (numpy bools too)."""
    if not isinstance(value, (bool, np.bool_)):
        raise SettingTypeError(f"{name} must be true or false, got {value!r}", name)
    return bool(value)


def check_choice(name: str, value: object, allowed: Iterable[object]) -> Any:
    """``value`` if it is one of ``allowed``."""
    allowed = tuple(allowed)
    if value not in allowed:
        listed = ", ".join(repr(a) for a in allowed)
        raise SettingError(f"{name} must be one of {listed}, got {value!r}", name)
    return value


def check_sizes(name: str, value: object, max_len: int | None = None) -> tuple[int, ...]:
    """``value`` as a tuple of ints ``>= 1`` (a list of layer sizes; may be empty)."""
    example = "e.g. (32, 16) or ()"
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise SettingTypeError(
            f"{name} must be a sequence of integers >= 1 ({example}), got {value!r}", name
        )
    if not all(is_int(v) for v in value):
        raise SettingTypeError(
            f"{name} must hold integers >= 1 ({example}), got {list(value)!r}", name
        )
    if not all(v >= 1 for v in value):
        raise SettingError(f"{name} must hold integers >= 1 ({example}), got {list(value)!r}", name)
    if max_len is not None and len(value) > max_len:
        raise SettingError(f"{name} may list at most {max_len} sizes, got {len(value)}", name)
    return tuple(int(v) for v in value)


def check_levels(name: str, value: object) -> tuple[float, ...]:
    """``value`` as an ascending tuple of distinct floats in ``(0, 1)`` (quantile or
    coverage levels; may be empty).

    Example:
        >>> check_levels("quantiles", [0.1, 0.9])
        (0.1, 0.9)
        >>> check_levels("quantiles", (0.9, 0.1))
        Traceback (most recent call last):
        ...
        stacklstm.checks.SettingError: quantiles must be ascending without repeats, got (0.9, 0.1)
    """
    example = "e.g. (0.1, 0.5, 0.9) or ()"
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise SettingTypeError(
            f"{name} must be a sequence of numbers ({example}), got {value!r}", name
        )
    value = tuple(value)
    if not all(is_real(v) for v in value):
        raise SettingTypeError(
            f"{name} must hold numbers in (0, 1) ({example}), got {value!r}", name
        )
    levels = tuple(float(v) for v in value)
    outside = [v for v in levels if not (0.0 < v < 1.0)]
    if outside:
        raise SettingError(f"{name} must lie strictly between 0 and 1, got {outside[0]!r}", name)
    if any(b <= a for a, b in itertools.pairwise(levels)):
        raise SettingError(f"{name} must be ascending without repeats, got {levels!r}", name)
    return levels


def check_names(name: str, value: object, *, allow_empty: bool) -> tuple[str, ...]:
    """``value`` as a tuple of distinct, non-empty column names."""
    if isinstance(value, str):
        raise SettingTypeError(
            f"{name} must be a tuple of column names, got the string {value!r}; write ({value!r},)",
            name,
        )
    if isinstance(value, list):
        value = tuple(value)
    if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
        raise SettingTypeError(
            f"{name} must be a tuple of non-empty column names, got {value!r}", name
        )
    repeated = sorted({v for v in value if value.count(v) > 1})
    if repeated:
        raise SettingError(f"{name} names column {repeated[0]!r} more than once: {value!r}", name)
    if not value and not allow_empty:
        raise SettingError(f"{name} must name at least one column, got ()", name)
    return value


def reject_unknown_keys(known: Sequence[str] | type, data: Mapping[str, Any], what: str) -> None:
    """Raise SettingError naming the keys of ``data`` not in ``known`` (names or a dataclass),
    and the keys that are known (``what`` names the settings in the message)."""
    if isinstance(known, type):
        known = [f.name for f in dataclasses.fields(known)]
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise SettingError(
            f"unknown {what} key(s) {', '.join(map(repr, unknown))}; "
            f"expected some of: {', '.join(known)}"
        )


#: The table suffixes :func:`stacklstm.data.read_table` reads: CSV/TSV (optionally
#: compressed) and Parquet.
TABLE_SUFFIXES = (".csv", ".tsv", ".parquet", ".pq")
COMPRESSION_SUFFIXES = (".gz", ".bz2", ".zip", ".xz", ".zst")


def check_table_path(path: str | os.PathLike[str]) -> str:
    """The table suffix of ``path`` (``".csv"``, ``".tsv"``, ``".parquet"``, ``".pq"``),
    once the file is there and named as a table: the checks of
    :func:`stacklstm.data.read_table` that need no pandas (the command line answers them
    before anything heavy is imported).

    Raises:
        DataError: The file is missing, is a folder, or has an unknown suffix.

    Example:
        >>> check_table_path("missing.csv")
        Traceback (most recent call last):
        ...
        stacklstm.checks.DataError: data file not found: missing.csv
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"data file not found: {path}")
    if path.is_dir():
        raise DataError(f"expected a CSV or Parquet file, got a folder: {path}")
    suffixes = [s.lower() for s in path.suffixes]
    if len(suffixes) >= 2 and suffixes[-1] in COMPRESSION_SUFFIXES:
        suffixes.pop()
    suffix = suffixes[-1] if suffixes else ""
    if suffix not in TABLE_SUFFIXES:
        raise DataError(
            f"expected a file ending in .csv, .tsv or .parquet, got {path.name!r}; "
            "convert the table to CSV or rename it"
        )
    return suffix
