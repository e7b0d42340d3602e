"""Reading tables: CSV/TSV (optionally compressed) and Parquet, and the bundled tables."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from ..checks import DataError, check_table_path

_CSV_SEPARATORS = {".csv": ",", ".tsv": "\t"}
_PARQUET_SUFFIXES = (".parquet", ".pq")
#: ``DataFrame.attrs`` key of a CSV table read by :func:`read_table`: where to read a column's
#: cells again exactly as written (:func:`written_text`).
_SOURCE = "stacklstm.source"


def bundled_dataset_path() -> Path:
    """Path of the bundled weekly Mauna Loa CO2 table (columns ``date,co2``; 2284 rows).

    Example:
        >>> read_table(bundled_dataset_path()).columns.tolist()
        ['date', 'co2']
    """
    return Path(str(resources.files("stacklstm.datasets").joinpath("co2_weekly.csv")))


def bundled_panel_path() -> Path:
    """Path of the bundled panel: five quarterly US macroeconomic series, 1959-2009 (columns
    ``series,date,value``; 1015 rows, 203 per series; see ``datasets/SOURCE.md``).

    Example:
        >>> frame = read_table(bundled_panel_path())
        >>> frame.columns.tolist(), frame["series"].nunique(), len(frame)
        (['series', 'date', 'value'], 5, 1015)
    """
    return Path(str(resources.files("stacklstm.datasets").joinpath("us_macro_quarterly.csv")))


def read_table(path: str | os.PathLike[str]) -> pd.DataFrame:
    """Read a CSV (``.csv``, ``.tsv``, optionally compressed) or Parquet (``.parquet``) table.

    Args:
        path: File to read; the suffix chooses the reader.

    Returns:
        The table as read, one row per data row of the file (row 1 is the first row below
        the header). No column is parsed or checked yet: :func:`prepare_series` does that;
        it reads the id column of a CSV table as text exactly as written (:func:`written_text`).

    Raises:
        DataError: The file is missing, is a folder, has an unknown suffix, cannot be parsed,
            names a column twice in its header, or holds no data rows.
    """
    path = Path(path)
    suffix = check_table_path(path)
    kind = "Parquet" if suffix in _PARQUET_SUFFIXES else "CSV"
    try:
        if kind == "Parquet":
            frame = pd.read_parquet(path)
            header = [str(c) for c in frame.columns]
        else:
            frame = pd.read_csv(path, sep=_CSV_SEPARATORS[suffix])
            header = _written_header(path, _CSV_SEPARATORS[suffix])
    except ImportError as err:
        raise DataError(
            f"reading Parquet needs pyarrow, which is not installed ({err}); "
            f"run `pip install pyarrow` or convert {path.name} to CSV"
        ) from err
    except pd.errors.EmptyDataError as err:
        raise DataError(f"{path} is empty; expected a header row and data rows") from err
    except (OSError, ValueError) as err:  # parser errors, bad encodings, corrupt Parquet
        first_line = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        raise DataError(f"cannot read {path} as {kind}: {first_line}") from err
    repeated = [name for name in dict.fromkeys(header) if name and header.count(name) > 1]
    if repeated:
        raise DataError(
            f"column {repeated[0]!r} appears {header.count(repeated[0])} times in the header of "
            f"{path}; expected each column name once: rename or drop the copies"
        )
    if len(frame) == 0:
        raise DataError(f"{path} has no data rows; expected a header row and data rows")
    if kind == "CSV":
        frame.attrs[_SOURCE] = {
            "path": str(path),
            "sep": _CSV_SEPARATORS[suffix],
            "rows": len(frame),
        }
    return frame


def _written_header(path: Path, sep: str) -> list[str]:
    """The column names of a CSV file's header as written (pandas renames a repeated name
    ``y`` to ``y.1``)."""
    first = pd.read_csv(
        path, sep=sep, header=None, nrows=1, dtype=str, keep_default_na=False, na_filter=False
    )
    return [str(name) for name in first.iloc[0]] if len(first) else []


def written_text(frame: pd.DataFrame, name: str) -> np.ndarray | None:
    """``(rows,)`` object array of column ``name``'s cells as the CSV file wrote them (``01``,
    ``NA`` and an empty cell ``""`` kept as text), or None where ``frame`` is not a CSV table
    as :func:`read_table` returned it (another frame, a Parquet table, rows dropped or
    reordered since, or cells of the column changed: text that does not read as the value
    the frame holds).

    Raises:
        DataError: The file no longer holds the rows it held when it was read.
    """
    source = frame.attrs.get(_SOURCE)
    if not isinstance(source, dict) or name not in frame.columns:
        return None
    rows = source.get("rows")
    if not (isinstance(frame.index, pd.RangeIndex) and frame.index.equals(pd.RangeIndex(rows))):
        return None
    position = frame.columns.get_loc(name)
    if not isinstance(position, int):  # the name twice: not the table as read
        return None
    path = Path(source["path"])
    try:
        column = pd.read_csv(
            path,
            sep=source["sep"],
            usecols=[position],
            dtype=str,
            keep_default_na=False,
            na_filter=False,
        )
    except (OSError, ValueError) as err:
        raise DataError(f"cannot read column {name!r} of {path} again: {err}") from err
    if len(column) != rows:
        raise DataError(
            f"{path} changed while it was read: it held {rows} data rows, now {len(column)}"
        )
    text = column.iloc[:, 0]
    return text.to_numpy(dtype=object) if _reads_as(text, frame[name]) else None


def _reads_as(text: pd.Series, values: pd.Series) -> bool:
    """Whether every cell of ``text`` (as written) reads as the cell of ``values`` (as read):
    the same text, number or truth value, or any text where ``values`` holds nothing."""
    text, values = text.reset_index(drop=True), values.reset_index(drop=True)
    empty = values.isna().to_numpy()
    if pd.api.types.is_bool_dtype(values):
        same = text.str.lower().to_numpy(dtype=object) == values.astype(str).str.lower()
    elif pd.api.types.is_numeric_dtype(values):
        same = pd.to_numeric(text, errors="coerce").to_numpy(np.float64) == values.to_numpy(
            np.float64, na_value=np.nan
        )
    elif values.dtype == object:
        same = (text == values).to_numpy(dtype=bool)
    else:  # pandas parses no other kind from a CSV file
        return False
    return bool(np.all(np.asarray(same, dtype=bool) | empty))
