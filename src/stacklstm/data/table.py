"""Reading tables: CSV/TSV (optionally compressed) and Parquet, and the bundled tables."""

from __future__ import annotations

import os
from importlib import resources
from pathlib import Path

import pandas as pd

from ..checks import DataError

_CSV_SEPARATORS = {".csv": ",", ".tsv": "\t"}
_PARQUET_SUFFIXES = (".parquet", ".pq")
_COMPRESSION_SUFFIXES = (".gz", ".bz2", ".zip", ".xz", ".zst")


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
        the header). No column is parsed or checked yet: :func:`prepare_series` does that.

    Raises:
        DataError: The file is missing, is a folder, has an unknown suffix, cannot be parsed,
            or holds no data rows.
    """
    path = Path(path)
    if not path.exists():
        raise DataError(f"data file not found: {path}")
    if path.is_dir():
        raise DataError(f"expected a CSV or Parquet file, got a folder: {path}")
    suffixes = [s.lower() for s in path.suffixes]
    if len(suffixes) >= 2 and suffixes[-1] in _COMPRESSION_SUFFIXES:
        suffixes.pop()
    suffix = suffixes[-1] if suffixes else ""
    if suffix not in _CSV_SEPARATORS and suffix not in _PARQUET_SUFFIXES:
        raise DataError(
            f"expected a file ending in .csv, .tsv or .parquet, got {path.name!r}; "
            "convert the table to CSV or rename it"
        )
    kind = "Parquet" if suffix in _PARQUET_SUFFIXES else "CSV"
    try:
        if kind == "Parquet":
            frame = pd.read_parquet(path)
        else:
            frame = pd.read_csv(path, sep=_CSV_SEPARATORS[suffix])
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
    if len(frame) == 0:
        raise DataError(f"{path} has no data rows; expected a header row and data rows")
    return frame
