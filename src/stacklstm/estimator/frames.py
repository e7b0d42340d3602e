"""The estimator's frames: the user's long frame checked and cut to the run's columns, the
static frame merged in, the future rows appended, and the cut-offs of a cross-validation.

numpy and pandas only.

Example:
    >>> df = pd.DataFrame({"unique_id": ["a"] * 5, "ds": range(5), "y": range(5)})
    >>> cutoff_positions(df, "unique_id", horizon=2, n_windows=2, step_size=1)["cutoff_pos"]
    0    1
    1    2
    Name: cutoff_pos, dtype: int64
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from ..config import DataConfig


def check_name(name: str, value: object) -> str:
    """``value``, a column name given as the argument ``name``.

    Raises:
        TypeError: ``value`` is no text or empty.
    """
    if not isinstance(value, str) or not value:
        raise TypeError(f"{name} must be a non-empty column name, got {value!r}")
    return value


def is_polars(df: object) -> bool:
    """Whether ``df`` is a polars DataFrame (told by its module: polars is not imported)."""
    return type(df).__module__.split(".")[0] == "polars" and hasattr(df, "to_pandas")


def as_pandas(df: object, what: str) -> object:
    """``df`` as a pandas DataFrame where it is a polars one (through pyarrow, dtypes kept:
    a polars ``Categorical`` or ``Enum`` becomes a pandas ``category``); anything else as it
    is, for :func:`check_frame` to judge."""
    if not is_polars(df):
        return df
    try:
        return df.to_pandas()
    except Exception as err:  # polars without pyarrow, or a type pandas has no twin for
        raise TypeError(f"{what}: cannot convert the polars frame to pandas: {err}") from err


def to_polars(df: pd.DataFrame) -> object:
    """``df`` as a polars DataFrame (the output of a polars input)."""
    import polars

    return polars.from_pandas(df)


def check_frame(df: object, what: str, needs: Sequence[str] = ()) -> pd.DataFrame:
    """``df`` if it is a non-empty DataFrame with the columns ``needs``.

    Raises:
        TypeError: ``df`` is not a DataFrame.
        ValueError: It has no rows, or lacks a column of ``needs`` (all its columns named).
    """
    if not isinstance(df, pd.DataFrame):
        raise TypeError(
            f"{what} must be a pandas or polars DataFrame, got {type(df).__module__}."
            f"{type(df).__name__}"
        )
    if len(df) == 0:
        raise ValueError(f"{what} has no rows; expected one row per series and time stamp")
    missing = [name for name in needs if name not in df.columns]
    if missing:
        raise ValueError(
            f"{what} lacks the column(s) {', '.join(map(repr, missing))}; it has "
            f"{', '.join(map(repr, map(str, df.columns)))}"
        )
    return df


def merge_statics(
    df: pd.DataFrame, static_df: pd.DataFrame | None, id_col: str | None
) -> tuple[pd.DataFrame, tuple[str, ...]]:
    """``(df with the static columns, their names)``: each row gets its series' row of
    ``static_df`` (one row per id; without an id column, one row for the one series).

    Raises:
        TypeError: ``static_df`` is not a DataFrame.
        ValueError: ``static_df`` lacks the id column, names an id twice, lacks an id of
            ``df``, or has a column ``df`` also has.
    """
    if static_df is None:
        return df, ()
    needs = () if id_col is None else (id_col,)
    static_df = check_frame(static_df, "static_df", needs)
    columns = tuple(str(c) for c in static_df.columns if c != id_col)
    shared = [name for name in columns if name in df.columns]
    if shared:
        raise ValueError(
            f"static_df and df both have the column(s) {', '.join(map(repr, shared))}; give "
            "each static column in one of them"
        )
    if id_col is None:
        if len(static_df) != 1:
            raise ValueError(
                f"df is one series (no id column) so static_df needs one row, got {len(static_df)}"
            )
        return df.assign(**{name: static_df[name].iloc[0] for name in columns}), columns
    twice = static_df[id_col][static_df[id_col].duplicated()].unique()
    if len(twice):
        raise ValueError(f"static_df has more than one row for the id(s) {list(twice)[:5]}")
    lacking = sorted(set(df[id_col]) - set(static_df[id_col]), key=str)
    if lacking:
        raise ValueError(f"static_df has no row for the id(s) {lacking[:5]} of df")
    merged = df.merge(static_df, on=id_col, how="left", sort=False)
    merged.index = df.index
    return merged, columns


def run_columns(cfg: DataConfig) -> list[str]:
    """The columns of the run's table, in the order id, time, targets, features, future
    features, static features."""
    front = [name for name in (cfg.id_column, cfg.time_column) if name is not None]
    return [*front, *(name for names in cfg.roles.values() for name in names)]


def sort_series(df: pd.DataFrame, id_col: str | None, time_col: str | None) -> pd.DataFrame:
    """``df`` ordered by series (as they first appear) then time, rows of equal keys kept in
    order; without a time column the rows keep their order within each series."""
    keys = pd.DataFrame(index=df.index)
    if id_col is not None:
        keys["series"] = pd.factorize(df[id_col])[0]
    if time_col is not None:
        keys["time"] = df[time_col]
    if keys.shape[1] == 0:
        return df
    order = keys.sort_values(list(keys.columns), kind="stable").index
    return df.loc[order]


def cutoff_positions(
    df: pd.DataFrame, id_col: str | None, horizon: int, n_windows: int, step_size: int
) -> pd.DataFrame:
    """The cut-offs of statsforecast's ``cross_validation``: per series (rows in order, see
    :func:`sort_series`), the last ``n_windows`` rows spaced ``step_size``, the last one
    ``horizon`` rows before the end.

    Returns:
        ``(n_series * n_windows)`` rows: ``series`` (the id, or None), ``window`` (0 =
        earliest) and ``cutoff_pos`` (the row's position in its series, 0-based).

    Raises:
        ValueError: A series with no row before its earliest cut-off.
    """
    test_size = horizon + step_size * (n_windows - 1)
    groups = (
        [(None, len(df))]
        if id_col is None
        else list(df.groupby(id_col, sort=False, observed=True).size().items())
    )
    rows = []
    for name, length in groups:
        first = length - test_size - 1
        if first < 0:
            where = "the series" if name is None else f"series {name!r}"
            raise ValueError(
                f"{where} has {length} rows but {n_windows} window(s) of horizon {horizon} "
                f"spaced {step_size} need more than {test_size}"
            )
        for window in range(n_windows):
            rows.append((name, window, first + window * step_size))
    return pd.DataFrame(rows, columns=["series", "window", "cutoff_pos"])


def positions(df: pd.DataFrame, id_col: str | None) -> np.ndarray:
    """``(rows,)`` each row's position in its series (0-based, in the frame's order)."""
    if id_col is None:
        return np.arange(len(df))
    return df.groupby(id_col, sort=False, observed=True).cumcount().to_numpy()


def with_future_rows(
    df: pd.DataFrame, futr_df: pd.DataFrame, cfg: DataConfig, statics: pd.DataFrame | None
) -> pd.DataFrame:
    """``df`` followed by the known-future rows ``futr_df`` (their targets empty), with the
    static columns of their series from ``statics`` (one row per id) when ``futr_df`` lacks
    them.

    Raises:
        ValueError: ``futr_df`` lacks the time, id or a future-feature column.
    """
    if not cfg.future_features and cfg.calendar == "none":
        raise ValueError(
            "futr_df holds known-future covariates, but the model was trained without "
            "`future_features` (or a calendar): it forecasts from df alone; leave futr_df out"
        )
    front = [name for name in (cfg.id_column, cfg.time_column) if name is not None]
    futr_df = check_frame(futr_df, "futr_df", [*front, *cfg.future_features])
    future = futr_df[[c for c in futr_df.columns if c in df.columns]].copy()
    for name in cfg.target:
        future[name] = np.nan
    missing = [name for name in cfg.static_features if name not in future.columns]
    if missing and statics is not None:
        if cfg.id_column is None:
            future = future.assign(**{name: statics[name].iloc[0] for name in missing})
        else:
            future = future.merge(statics[[cfg.id_column, *missing]], on=cfg.id_column, how="left")
    return pd.concat([df, future], ignore_index=True)


def statics_of(df: pd.DataFrame, cfg: DataConfig) -> pd.DataFrame | None:
    """One row per series of ``df``: its id (with an id column) and its static columns."""
    if not cfg.static_features:
        return None
    names = [*([cfg.id_column] if cfg.id_column else []), *cfg.static_features]
    present = df[names].dropna(subset=list(cfg.static_features), how="all")
    if cfg.id_column is None:
        return present.head(1).reset_index(drop=True)
    return present.drop_duplicates(cfg.id_column).reset_index(drop=True)


def write_table(frame: pd.DataFrame, path: Path) -> None:
    """Write ``frame`` as the Parquet table ``path`` (without its index).

    Raises:
        TypeError: A column of mixed types (``1`` and ``"1"``), which Parquet cannot hold.
        ImportError: No Parquet engine (pyarrow or fastparquet) is installed.
    """
    for name in frame.columns:  # pyarrow's own error names no column
        kinds = (
            {type(v).__name__ for v in frame[name].dropna()} if frame[name].dtype == object else ()
        )
        if len(kinds) > 1:
            raise TypeError(
                f"column {name!r} mixes values of the types {', '.join(sorted(kinds))} (say 1 "
                f"and '1'); give it one type, e.g. df[{name!r}].astype(str)"
            )
    try:
        frame.to_parquet(path, index=False)
    except ImportError as err:
        raise ImportError(
            "LSTMForecaster hands its frames to the run as Parquet tables, which needs "
            f"pyarrow: pip install pyarrow ({err})"
        ) from err
