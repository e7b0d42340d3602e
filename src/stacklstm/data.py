"""Tables to forecasting windows: read, clean, split by time, scale, cut windows, batch.

numpy and pandas only; nothing here imports JAX. The steps, in order, and each inverted exactly
before metrics by :meth:`WindowSet.to_original`::

    read_table -> prepare_series  check columns and types, parse and sort time, insert missing
                                  time stamps, fill (or reject) gaps  -> Series (time, columns)
               -> make_splits     difference (optional) -> scale (fitted on train rows only)
                                  -> cut windows -> window-relative normalisation (optional)
                                                                      -> Splits of WindowSets

Row counts of the splits are taken on the rows of the prepared series (after gap filling, before
differencing): with ``T`` rows, ``n_test = round(test_fraction * T)``, ``n_val =
round(val_fraction * T)`` (Python's ``round``, half to even) and the first ``n_train = T - n_val -
n_test`` rows are the training rows. A window belongs to the split that holds all of its targets;
its inputs may reach back into earlier splits but never forward.

Example:
    >>> frame = pd.DataFrame({"date": pd.date_range("2000-01-01", periods=40, freq="W"),
    ...                       "co2": np.arange(40.0)})
    >>> cfg = DataConfig(window=4, horizon=2)
    >>> splits, scaler = make_splits(prepare_series(frame, cfg), cfg)
    >>> splits.train.x.shape, splits.train.y.shape, splits.test.origin.tolist()
    ((23, 4, 1), (23, 2, 1), [33, 35, 37])
"""

from __future__ import annotations

import dataclasses
import logging
import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np
import pandas as pd

log = logging.getLogger(__name__)

ScalerKind = Literal["standard", "minmax", "robust", "none"]
NormalizeKind = Literal["none", "window"]
GapPolicy = Literal["interpolate", "reject"]

_CSV_SEPARATORS = {".csv": ",", ".tsv": "\t"}
_PARQUET_SUFFIXES = (".parquet", ".pq")
_COMPRESSION_SUFFIXES = (".gz", ".bz2", ".zip", ".xz", ".zst")
_MAX_ROWS_LISTED = 5


class DataError(ValueError):
    """Bad data or data settings. The message is one line: what was expected, what was given.

    The CLI prints it and exits with status 2.
    """

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).splitlines()))


def bundled_dataset_path() -> Path:
    """Path of the bundled weekly Mauna Loa CO2 table (columns ``date,co2``; 2284 rows).

    Example:
        >>> read_table(bundled_dataset_path()).columns.tolist()
        ['date', 'co2']
    """
    return Path(str(resources.files("stacklstm.datasets").joinpath("co2_weekly.csv")))


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


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def reject_unknown_keys(
    cls: type, data: Mapping[str, Any], what: str, error: type[Exception]
) -> None:
    """Raises ``error`` naming the keys of ``data`` that are not fields of dataclass ``cls``,
    and the fields it has (``what`` names the settings in the message)."""
    known = [f.name for f in dataclasses.fields(cls)]
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise error(
            f"unknown {what} key(s) {', '.join(map(repr, unknown))}; "
            f"expected some of: {', '.join(known)}"
        )


@dataclass(frozen=True)
class DataConfig:
    """How a table becomes windows. The defaults here are the only defaults.

    Attributes:
        target: Columns to forecast (``n_targets`` of them); also model inputs.
        features: Extra input columns (past covariates), never forecast.
        time_column: Column of time stamps, or None to use the row order as is.
        window: Input steps per window.
        horizon: Target steps per window.
        stride: Step between training and validation windows (test windows step by
            ``horizon``); windows are aligned to the end of each split.
        val_fraction: Share of rows for validation, in [0, 1).
        test_fraction: Share of rows for test, in [0, 1); the two together below 1.
        scaler: Per-column scaling fitted on the training rows.
        normalize: ``"window"`` subtracts, per window, the last input value of each target from
            that target's inputs and targets (features are left alone); ``"none"`` does not.
        difference: Model first differences of every column instead of levels.
        gaps: ``"interpolate"`` fills missing values and time stamps linearly (ends: nearest
            value); ``"reject"`` raises a DataError naming the rows instead.

    Example:
        >>> DataConfig(window=24, horizon=4).to_dict()["window"]
        24
    """

    target: tuple[str, ...] = ("co2",)
    features: tuple[str, ...] = ()
    time_column: str | None = "date"
    window: int = 10
    horizon: int = 1
    stride: int = 1
    val_fraction: float = 0.15
    test_fraction: float = 0.15
    scaler: ScalerKind = "standard"
    normalize: NormalizeKind = "window"
    difference: bool = False
    gaps: GapPolicy = "interpolate"

    def __post_init__(self) -> None:
        for name in ("target", "features"):
            value = getattr(self, name)
            if isinstance(value, list):
                object.__setattr__(self, name, tuple(value))
        for field in dataclasses.fields(self):  # numpy scalars -> Python, so to_dict is JSON-able
            value = getattr(self, field.name)
            if isinstance(value, (np.integer, np.floating, np.bool_)):
                object.__setattr__(self, field.name, value.item())
        self.validate()

    def validate(self) -> None:
        """Raise DataError on the first bad setting; return None when all are valid."""
        for name in ("target", "features"):
            value = getattr(self, name)
            if isinstance(value, str):
                raise DataError(
                    f"{name} must be a tuple of column names, got the string {value!r}; "
                    f"write ({value!r},)"
                )
            if not isinstance(value, tuple) or not all(isinstance(v, str) and v for v in value):
                raise DataError(f"{name} must be a tuple of non-empty column names, got {value!r}")
            repeated = sorted({v for v in value if value.count(v) > 1})
            if repeated:
                raise DataError(f"{name} names column {repeated[0]!r} more than once: {value!r}")
        if not self.target:
            raise DataError("target must name at least one column, got ()")
        both = [name for name in self.features if name in self.target]
        if both:
            raise DataError(
                f"column {both[0]!r} is in both target and features; a target is already an input"
            )
        if self.time_column is not None:
            if not isinstance(self.time_column, str) or not self.time_column:
                raise DataError(
                    f"time_column must be a column name or None, got {self.time_column!r}"
                )
            if self.time_column in self.target + self.features:
                raise DataError(
                    f"time_column {self.time_column!r} is also listed as a target or feature"
                )
        for name in ("window", "horizon", "stride"):
            value = getattr(self, name)
            if not _is_int(value) or value < 1:
                raise DataError(f"{name} must be an integer >= 1, got {value!r}")
        for name in ("val_fraction", "test_fraction"):
            value = getattr(self, name)
            if not _is_real(value) or not 0.0 <= value < 1.0:
                raise DataError(f"{name} must be a number in [0, 1), got {value!r}")
        if self.val_fraction + self.test_fraction >= 1.0:
            raise DataError(
                "val_fraction + test_fraction must be below 1 so that rows remain for training, "
                f"got {self.val_fraction} + {self.test_fraction}"
            )
        for name, kinds in (
            ("scaler", ScalerKind),
            ("normalize", NormalizeKind),
            ("gaps", GapPolicy),
        ):
            value = getattr(self, name)
            if value not in get_args(kinds):
                allowed = ", ".join(repr(k) for k in get_args(kinds))
                raise DataError(f"{name} must be one of {allowed}, got {value!r}")
        if not isinstance(self.difference, bool):
            raise DataError(f"difference must be true or false, got {self.difference!r}")

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict of every setting (tuples become lists)."""
        out = dataclasses.asdict(self)
        out["target"] = list(self.target)
        out["features"] = list(self.features)
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> DataConfig:
        """Build from :meth:`to_dict` output; missing keys take the defaults.

        Raises:
            DataError: ``data`` is not a mapping, has unknown keys, or holds a bad value.
        """
        if not isinstance(data, Mapping):
            raise DataError(f"expected a mapping of DataConfig settings, got {type(data).__name__}")
        reject_unknown_keys(cls, data, "DataConfig", DataError)
        kwargs = dict(data)
        for name in ("target", "features"):
            if isinstance(kwargs.get(name), list):
                kwargs[name] = tuple(kwargs[name])
        return cls(**kwargs)


@dataclass(frozen=True, eq=False)
class Series:
    """A cleaned, time-ordered table: every value finite, target columns first.

    Attributes:
        values: ``(time, n_columns)`` float64; ``columns[:n_targets]`` are the targets.
        times: ``(time,)`` datetime64 time stamps, or None when there is no time column.
        columns: Column names of ``values``.
        n_targets: Number of target columns.
        n_filled: Rows that held at least one filled value (missing in the file or
            inserted as a missing time stamp).
        freq: The regular step as a pandas offset alias (e.g. ``"7D"``, ``"MS"``), or None
            when the time stamps are absent or irregular.
    """

    values: np.ndarray
    times: np.ndarray | None
    columns: tuple[str, ...]
    n_targets: int
    n_filled: int = 0
    freq: str | None = None

    def __len__(self) -> int:
        return int(self.values.shape[0])


def _rows_text(rows: Sequence[int] | np.ndarray) -> str:
    rows = [int(r) for r in rows]
    text = ", ".join(str(r) for r in rows[:_MAX_ROWS_LISTED])
    if len(rows) > _MAX_ROWS_LISTED:
        text += f" and {len(rows) - _MAX_ROWS_LISTED} more"
    return text


def _stamp_text(stamp: np.datetime64) -> str:
    """``2001-12-29`` for midnight, else ``2001-12-29 06:00:00``."""
    stamp = pd.Timestamp(stamp)
    return stamp.date().isoformat() if stamp == stamp.normalize() else str(stamp)


def _numeric_column(raw: pd.Series, name: str, role: str) -> np.ndarray:
    """``(rows,)`` float64 of one column; NaN where the cell is empty."""
    if pd.api.types.is_bool_dtype(raw):
        raw = raw.astype(np.float64)
    if pd.api.types.is_datetime64_any_dtype(raw) or isinstance(raw.dtype, pd.PeriodDtype):
        raise DataError(f"{role} column {name!r} must be numeric, got time stamps ({raw.dtype})")
    if pd.api.types.is_numeric_dtype(raw):
        return raw.to_numpy(dtype=np.float64, na_value=np.nan)
    numeric = pd.to_numeric(raw, errors="coerce")
    blank = raw.isna() | raw.map(lambda v: isinstance(v, str) and not v.strip()).astype(bool)
    bad = np.flatnonzero((numeric.isna() & ~blank).to_numpy())
    if bad.size:
        row = int(bad[0])
        raise DataError(
            f"{role} column {name!r} must be numeric; row {row + 1} holds {raw.iloc[row]!r}"
        )
    return numeric.to_numpy(dtype=np.float64, na_value=np.nan)


def _parse_times(raw: pd.Series, name: str) -> np.ndarray:
    """``(rows,)`` datetime64 of the time column (time zones converted to UTC, then dropped)."""
    if pd.api.types.is_numeric_dtype(raw) and not pd.api.types.is_bool_dtype(raw):
        raise DataError(
            f"time column {name!r} holds numbers (row 1: {raw.iloc[0]!r}); expected dates such "
            "as 2001-12-29, or time_column=None to use the row order"
        )
    try:
        parsed = (
            raw
            if pd.api.types.is_datetime64_any_dtype(raw)
            else pd.to_datetime(raw, errors="coerce")
        )
        if getattr(parsed.dt, "tz", None) is not None:
            parsed = parsed.dt.tz_convert("UTC").dt.tz_localize(None)
    except (ValueError, TypeError, OverflowError) as err:
        raise DataError(f"cannot parse time column {name!r} as dates: {err}") from err
    bad = np.flatnonzero(parsed.isna().to_numpy())
    if bad.size:
        row = int(bad[0])
        value = raw.iloc[row]
        if pd.isna(value):
            raise DataError(f"time column {name!r} has no time stamp in row {row + 1}")
        raise DataError(
            f"time column {name!r}: cannot parse {value!r} in row {row + 1} as a date "
            "(expected e.g. 2001-12-29)"
        )
    return parsed.to_numpy()


def _calendar_grid(times: np.ndarray, median_days: float) -> tuple[np.ndarray, str] | None:
    """Calendar frequency (months, quarters, years) whose grid holds every time stamp."""
    candidates: tuple[str, ...] = ()
    if 28 <= median_days <= 31:
        candidates = ("MS", "ME")
    elif 89 <= median_days <= 92:
        candidates = ("QS", "QE")
    elif 365 <= median_days <= 366:
        candidates = ("YS", "YE")
    for freq in candidates:
        grid = pd.date_range(times[0], times[-1], freq=freq).to_numpy().astype(times.dtype)
        if grid.size and grid[0] == times[0] and np.isin(times, grid).all():
            return grid, freq
    return None


def _step_alias(step: pd.Timedelta) -> str:
    """Pandas offset alias of a fixed step: ``"D"``, ``"7D"``, ``"h"``, ``"15min"``."""
    if step % pd.Timedelta(days=1) == pd.Timedelta(0):
        return "D" if step.days == 1 else f"{step.days}D"
    return pd.tseries.frequencies.to_offset(step).freqstr


def _regular_grid(times: np.ndarray) -> tuple[np.ndarray, str] | None:
    """The regular time grid from first to last stamp, or None if the stamps are irregular.

    Regular means: every step is a whole multiple of the median step (weekly, hourly, ...),
    business days (1-day median step, no weekend stamps), or a calendar month/quarter/year.
    """
    if times.size < 3:
        return None
    steps = np.diff(times)
    median = np.sort(steps)[steps.size // 2]
    one_day = np.timedelta64(1, "D")
    weekday = (times.astype("datetime64[D]").astype(np.int64) + 3) % 7  # 0 = Monday
    if median == one_day and (weekday < 5).all() and (steps > one_day).any():
        is_day = (times == times.astype("datetime64[D]")).all()
        if is_day:
            grid = pd.bdate_range(times[0], times[-1]).to_numpy().astype(times.dtype)
            return grid, "B"
    if (steps % median == np.timedelta64(0)).all():
        grid = np.arange(times[0], times[-1] + median, median)
        return grid, _step_alias(pd.Timedelta(median))
    return _calendar_grid(times, median / one_day)


def _fill_gaps(values: np.ndarray, times: np.ndarray | None) -> np.ndarray:
    """Linear interpolation over time (row order without times); ends take the nearest value."""
    position = (
        np.arange(values.shape[0], dtype=np.float64)
        if times is None
        else (times - times[0]) / np.timedelta64(1, "s")
    )
    filled = values.copy()
    for j in range(values.shape[1]):
        missing = np.isnan(values[:, j])
        if missing.any():
            filled[missing, j] = np.interp(
                position[missing], position[~missing], values[~missing, j]
            )
    return filled


def prepare_series(frame: pd.DataFrame, cfg: DataConfig) -> Series:
    """Check, order and clean the table's target and feature columns.

    Steps: columns exist and are numeric (not all empty, no Inf); time stamps parse, are
    sorted and unique; where they are regular (see below) missing stamps are inserted as
    empty rows; empty cells are linearly interpolated (``gaps="interpolate"``, leading and
    trailing ones take the nearest value) or rejected (``gaps="reject"``).

    Regular time stamps: every step a whole multiple of the median step, business days, or
    calendar months/quarters/years. Irregular stamps are kept as they are.

    Args:
        frame: The table, e.g. from :func:`read_table`; row 1 is its first row.
        cfg: Which columns to use and how to treat gaps.

    Returns:
        Series with ``values`` of shape ``(time, len(target) + len(features))``.

    Raises:
        DataError: Unknown column (the message lists those available), non-numeric value
            (names the row), all-empty column, Inf (names rows), unparseable or repeated
            time stamp, gaps with ``gaps="reject"`` (names rows), or fewer rows than
            ``window + horizon`` (+1 with ``difference``).

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
    if len(frame) == 0:
        raise DataError("the table has no data rows; expected a header row and data rows")
    columns = cfg.target + cfg.features
    wanted = columns + ((cfg.time_column,) if cfg.time_column is not None else ())
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
        values[:, j] = _numeric_column(frame[name], name, role)
        if np.isnan(values[:, j]).all():
            raise DataError(
                f"{role} column {name!r} has no values: all {len(frame)} rows are empty"
            )
        infinite = np.flatnonzero(np.isinf(values[:, j]))
        if infinite.size:
            raise DataError(
                f"{role} column {name!r} holds infinite values in rows {_rows_text(infinite + 1)};"
                " expected finite numbers"
            )
    if cfg.gaps == "reject":
        empty = np.flatnonzero(np.isnan(values).any(axis=1))
        if empty.size:
            raise DataError(
                f"gaps='reject' but rows {_rows_text(empty + 1)} hold empty values; "
                "fill them or use gaps='interpolate'"
            )

    times: np.ndarray | None = None
    freq: str | None = None
    n_inserted = 0
    if cfg.time_column is not None:
        times = _parse_times(frame[cfg.time_column], cfg.time_column)
        order = np.argsort(times, kind="stable")
        times, values = times[order], values[order]
        repeated = np.flatnonzero(times[1:] == times[:-1])
        if repeated.size:
            i = int(repeated[0])
            rows = f"rows {order[i] + 1} and {order[i + 1] + 1}"
            raise DataError(
                f"time column {cfg.time_column!r} repeats {_stamp_text(times[i])} ({rows}); "
                "expected one row per time stamp"
            )
        regular = _regular_grid(times)
        if regular is not None:
            grid, freq = regular
            n_inserted = grid.size - times.size
            if n_inserted:
                first_gap = _stamp_text(grid[~np.isin(grid, times)][0])
                if n_inserted > times.size:
                    raise DataError(
                        f"time column {cfg.time_column!r} has {times.size} stamps but "
                        f"{n_inserted} missing steps of {freq} between them; check the dates "
                        "or use time_column=None"
                    )
                if cfg.gaps == "reject":
                    raise DataError(
                        f"gaps='reject' but {n_inserted} time stamps of step {freq} are missing, "
                        f"the first {first_gap}; add them or use gaps='interpolate'"
                    )
                full = np.full((grid.size, values.shape[1]), np.nan)
                full[np.searchsorted(grid, times)] = values
                values, times = full, grid
                log.info("inserted %d missing time stamps, the first %s", n_inserted, first_gap)
        else:
            log.info("time stamps are irregular; no missing stamps inserted")

    empty_rows = np.isnan(values).any(axis=1)
    n_filled = int(empty_rows.sum())
    if n_filled:
        values = _fill_gaps(values, times)
        log.info("filled %d rows with missing values by linear interpolation", n_filled)
    needed = cfg.window + cfg.horizon + int(cfg.difference)
    if values.shape[0] < needed:
        extra = " + 1 (difference)" if cfg.difference else ""
        raise DataError(
            f"the series has {values.shape[0]} rows but window ({cfg.window}) + horizon "
            f"({cfg.horizon}){extra} = {needed} are needed"
        )
    return Series(
        values=values,
        times=times,
        columns=columns,
        n_targets=len(cfg.target),
        n_filled=n_filled,
        freq=freq,
    )


@dataclass(frozen=True, eq=False)
class Scaler:
    """Per-column affine scaling ``(value - center) / scale``, fitted on training rows.

    ``standard``: mean and standard deviation; ``minmax``: minimum and range (maps the
    training rows to [0, 1]); ``robust``: median and interquartile range; ``none``: 0 and 1.
    A column with zero spread gets scale 1.

    Attributes:
        kind: Which statistic pair.
        columns: Column names; the first ``n_targets`` are the targets.
        n_targets: Number of target columns.
        center: ``(n_columns,)`` float64.
        scale: ``(n_columns,)`` float64, all > 0.

    Example:
        >>> s = Scaler.fit(np.array([[0.0], [10.0]]), "minmax", ("co2",), 1)
        >>> s.transform(np.array([[5.0]])).tolist(), s.inverse_transform(np.array([[1.0]])).tolist()
        ([[0.5]], [[10.0]])
    """

    kind: ScalerKind
    columns: tuple[str, ...]
    n_targets: int
    center: np.ndarray
    scale: np.ndarray

    @classmethod
    def fit(
        cls, values: np.ndarray, kind: ScalerKind, columns: Sequence[str], n_targets: int
    ) -> Scaler:
        """Fit on ``values`` of shape ``(rows, n_columns)`` (the training rows only)."""
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 2 or values.shape[1] != len(columns):
            raise ValueError(f"expected values of shape (rows, {len(columns)}), got {values.shape}")
        if values.shape[0] == 0:
            raise DataError("cannot fit the scaler on zero training rows")
        if kind == "standard":
            center, spread = values.mean(axis=0), values.std(axis=0)
        elif kind == "minmax":
            center = values.min(axis=0)
            spread = values.max(axis=0) - center
        elif kind == "robust":
            q25, center, q75 = np.percentile(values, [25.0, 50.0, 75.0], axis=0)
            spread = q75 - q25
        elif kind == "none":
            center, spread = np.zeros(values.shape[1]), np.ones(values.shape[1])
        else:
            allowed = ", ".join(repr(k) for k in get_args(ScalerKind))
            raise DataError(f"scaler must be one of {allowed}, got {kind!r}")
        scale = np.where((spread > 0) & np.isfinite(spread), spread, 1.0)
        return cls(kind, tuple(columns), int(n_targets), center.astype(np.float64), scale)

    def _check(self, values: np.ndarray, width: int, what: str) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        if values.ndim < 1 or values.shape[-1] != width:
            raise ValueError(
                f"expected the last axis to hold the {width} {what} columns, got shape "
                f"{values.shape}"
            )
        return values

    def transform(self, values: np.ndarray) -> np.ndarray:
        """Scale ``(..., n_columns)`` values; returns float64 of the same shape."""
        values = self._check(values, len(self.columns), "scaler")
        return (values - self.center) / self.scale

    def inverse_transform(self, values: np.ndarray, *, targets_only: bool = False) -> np.ndarray:
        """Undo :meth:`transform` on ``(..., n_columns)``, or ``(..., n_targets)`` values."""
        width = self.n_targets if targets_only else len(self.columns)
        values = self._check(values, width, "target" if targets_only else "scaler")
        return values * self.scale[:width] + self.center[:width]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict; floats round-trip exactly through JSON."""
        return {
            "kind": self.kind,
            "columns": list(self.columns),
            "n_targets": self.n_targets,
            "center": [float(v) for v in self.center],
            "scale": [float(v) for v in self.scale],
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scaler:
        """Inverse of :meth:`to_dict`; raises DataError on missing keys or bad values."""
        keys = ("kind", "columns", "n_targets", "center", "scale")
        if not isinstance(data, Mapping) or sorted(data) != sorted(keys):
            got = sorted(data) if isinstance(data, Mapping) else type(data).__name__
            raise DataError(f"expected scaler keys {list(keys)}, got {got}")
        try:  # a hand-edited or damaged config.json may hold anything
            center = np.asarray(data["center"], dtype=np.float64)
            scale = np.asarray(data["scale"], dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise DataError(f"scaler centers and scales must be lists of numbers: {err}") from err
        columns, n_targets = data["columns"], data["n_targets"]
        if not isinstance(columns, (list, tuple)) or not all(isinstance(c, str) for c in columns):
            raise DataError(f"scaler columns must be a list of column names, got {columns!r}")
        columns = tuple(columns)
        n = len(columns)
        if data["kind"] not in get_args(ScalerKind):
            raise DataError(f"unknown scaler kind {data['kind']!r}")
        if center.shape != (n,) or scale.shape != (n,) or not _is_int(n_targets):
            n_targets = None  # reported as not an integer in 1..n below
        if n_targets is None or not 1 <= n_targets <= n:
            raise DataError(
                f"scaler for {n} columns needs {n} centers and scales and 1..{n} targets, got "
                f"centers of shape {center.shape}, scales of shape {scale.shape} and "
                f"{data['n_targets']!r} targets"
            )
        if not (np.isfinite(center).all() and np.isfinite(scale).all() and (scale > 0).all()):
            raise DataError("scaler centers must be finite and scales finite and positive")
        return cls(data["kind"], columns, int(data["n_targets"]), center, scale)


@dataclass(frozen=True, eq=False)
class WindowSet:
    """Windows cut from one series: model inputs and targets, plus what undoes the transforms.

    Attributes:
        x: ``(n, window, n_columns)`` float32 model inputs (targets first, then features).
        y: ``(n, horizon, n_targets)`` float32 model-space targets (NaN beyond the data).
        y_true: ``(n, horizon, n_targets)`` float64 targets in original units (NaN beyond).
        origin: ``(n,)`` int64 index of each window's last input row in the series.
        origin_time: ``(n,)`` datetime64 time stamp of that row, or None.
        anchor: ``(n, n_targets)`` float64 model-space value subtracted by window
            normalisation (zeros with ``normalize="none"``).
        level: ``(n, n_targets)`` float64 original-unit target value at the origin.
        target_center: ``(n_targets,)`` scaler centers of the targets.
        target_scale: ``(n_targets,)`` scaler scales of the targets.
        difference: Whether the model works on first differences.
        history: ``(time, n_targets)`` float64 original-unit targets of the whole series
            (shared, not copied), used by :meth:`seasonal_naive`.
    """

    x: np.ndarray
    y: np.ndarray
    y_true: np.ndarray
    origin: np.ndarray
    origin_time: np.ndarray | None
    anchor: np.ndarray
    level: np.ndarray
    target_center: np.ndarray
    target_scale: np.ndarray
    difference: bool
    history: np.ndarray

    def __len__(self) -> int:
        return int(self.x.shape[0])

    @property
    def horizon(self) -> int:
        return int(self.y.shape[1])

    @property
    def n_targets(self) -> int:
        return int(self.y.shape[2])

    @property
    def target_index(self) -> np.ndarray:
        """``(n, horizon)`` int64 series row of each target (may be past the data's end)."""
        return self.origin[:, None] + np.arange(1, self.horizon + 1)

    @property
    def last_value(self) -> np.ndarray:
        """``(n, horizon, n_targets)`` naive forecast: the target value at the origin, repeated."""
        return np.repeat(self.level[:, None, :], self.horizon, axis=1)

    def take(self, rows: np.ndarray) -> WindowSet:
        """The windows at ``rows`` (an index array or boolean mask over ``n``), same series."""
        per_window = {
            name: getattr(self, name)[rows]
            for name in ("x", "y", "y_true", "origin", "anchor", "level")
        }
        origin_time = None if self.origin_time is None else self.origin_time[rows]
        return dataclasses.replace(self, **per_window, origin_time=origin_time)

    def seasonal_naive(self, season: int) -> np.ndarray:
        """``(n, horizon, n_targets)`` seasonal naive forecast in original units.

        Step ``k`` (1-based) of a window with origin ``o`` takes the value at row
        ``o + k - season * ceil(k / season)``: ``season`` steps before the target for
        ``k <= season``, and the last observed value of the same phase beyond, so no value
        after the origin is used. Entries whose row would fall before the start of the
        series take the last value (the value at the origin) instead.
        """
        if not _is_int(season) or season < 1:
            raise ValueError(f"season must be an integer >= 1, got {season!r}")
        k = np.arange(1, self.horizon + 1)
        source = self.origin[:, None] + k - season * ((k + season - 1) // season)  # (n, horizon)
        out = self.history[np.maximum(source, 0)]  # (n, horizon, n_targets)
        return np.where((source < 0)[:, :, None], self.last_value, out)

    def to_original(self, y_model: np.ndarray) -> np.ndarray:
        """Map model-space forecasts ``(n, horizon, n_targets)`` to original units (float64).

        Uses only what is known at each origin: adds back the window anchor, undoes the
        scaling and, with differencing, adds the cumulative sum over the horizon to the level
        at the origin. ``to_original(self.y)`` reproduces ``self.y_true`` up to float32
        rounding of ``y``.
        """
        y_model = np.asarray(y_model, dtype=np.float64)
        expected = (len(self), self.horizon, self.n_targets)
        if y_model.shape != expected:
            raise ValueError(
                f"expected forecasts of shape (n, horizon, n_targets) = {expected}, got "
                f"{y_model.shape}"
            )
        steps = (y_model + self.anchor[:, None, :]) * self.target_scale + self.target_center
        if self.difference:
            return self.level[:, None, :] + np.cumsum(steps, axis=1)
        return steps


@dataclass(frozen=True, eq=False)
class Splits:
    """Train, validation and test windows, and the row counts of each split.

    ``n_train + n_val + n_test`` is the length of the series; see :func:`split_rows`.
    """

    train: WindowSet
    val: WindowSet
    test: WindowSet
    n_train: int
    n_val: int
    n_test: int


def split_rows(n_rows: int, cfg: DataConfig) -> tuple[int, int, int]:
    """Rows ``(n_train, n_val, n_test)`` of a series of ``n_rows`` rows, in time order.

    Example:
        >>> split_rows(20, DataConfig(val_fraction=0.2, test_fraction=0.2))
        (12, 4, 4)
    """
    n_test = round(cfg.test_fraction * n_rows)
    n_val = round(cfg.val_fraction * n_rows)
    return n_rows - n_val - n_test, n_val, n_test


def _check_series(series: Series, cfg: DataConfig) -> None:
    cfg.validate()
    expected = cfg.target + cfg.features
    if series.columns != expected or series.n_targets != len(cfg.target):
        raise DataError(
            f"the series has columns {list(series.columns)} ({series.n_targets} targets) but the "
            f"config expects {list(expected)}; prepare it with the same DataConfig"
        )


def _model_space(series: Series, cfg: DataConfig) -> np.ndarray:
    """``(time, n_columns)`` float64 differenced (row 0 NaN) or level values, before scaling."""
    if not cfg.difference:
        return series.values
    steps = np.full_like(series.values, np.nan)
    steps[1:] = np.diff(series.values, axis=0)
    return steps


def _cut(
    model: np.ndarray, series: Series, origins: np.ndarray, cfg: DataConfig, scaler: Scaler
) -> WindowSet:
    """Windows ending at ``origins``; ``model`` is the scaled model-space series."""
    w, h, nt = cfg.window, cfg.horizon, series.n_targets
    origins = np.asarray(origins, dtype=np.int64)
    pad = np.full((h, model.shape[1]), np.nan)  # targets past the end of the data
    model_padded = np.concatenate([model, pad])
    original_padded = np.concatenate([series.values[:, :nt], pad[:, :nt]])
    inputs = origins[:, None] + np.arange(1 - w, 1)  # (n, window)
    targets = origins[:, None] + np.arange(1, h + 1)  # (n, horizon)
    x = model_padded[inputs]  # (n, window, n_columns)
    # (n, n_targets): the model-space target value at the origin, or nothing to subtract
    anchor = model[origins, :nt] if cfg.normalize == "window" else np.zeros((origins.size, nt))
    x[:, :, :nt] -= anchor[:, None, :]
    y = model_padded[targets, :nt] - anchor[:, None, :]  # (n, horizon, n_targets)
    return WindowSet(
        x=x.astype(np.float32),
        y=y.astype(np.float32),
        y_true=original_padded[targets],
        origin=origins,
        origin_time=None if series.times is None else series.times[origins],
        anchor=anchor,
        level=series.values[origins, :nt],
        target_center=scaler.center[:nt].copy(),
        target_scale=scaler.scale[:nt].copy(),
        difference=bool(cfg.difference),
        history=series.values[:, :nt],
    )


def _aligned_origins(last: int, lowest: int, step: int) -> np.ndarray:
    """Ascending ``(n,)`` origins ``last, last - step, ...`` down to ``lowest`` (inclusive)."""
    if last < lowest:
        return np.zeros(0, dtype=np.int64)
    return np.arange(last, lowest - 1, -step, dtype=np.int64)[::-1].copy()


def make_splits(series: Series, cfg: DataConfig) -> tuple[Splits, Scaler]:
    """Split by time, fit the scaler on the training rows, and cut the windows of each split.

    Rows ``[0, n_train)`` train, ``[n_train, n_train + n_val)`` validation, the rest test
    (:func:`split_rows`). A window belongs to the split holding all its targets (windows
    whose targets straddle a boundary are dropped); its inputs may reach back into earlier
    splits, never forward, so no training window touches a validation or test row.

    Every split's windows are aligned to its end: the split's last row is the last target of
    its last window, and origins step back from there (so the most recent rows are always
    used). Training and validation windows step by ``cfg.stride``; test windows step by
    ``horizon``, so every test row is scored at most once, and exactly once when ``n_test``
    is a multiple of ``horizon`` (otherwise the first ``n_test % horizon`` test rows are not
    scored).

    Args:
        series: From :func:`prepare_series` with the same ``cfg``.
        cfg: Window, split and scaling settings.

    Returns:
        ``(splits, scaler)``; the scaler is fitted on the (differenced) training rows.

    Raises:
        DataError: Too few training rows for one window, or a validation/test fraction above
            0 that leaves fewer rows than ``horizon``.
    """
    _check_series(series, cfg)
    n_rows = len(series)
    w, h, first = cfg.window, cfg.horizon, int(cfg.difference)
    n_train, n_val, n_test = split_rows(n_rows, cfg)
    needed = w + h + first
    if n_train < needed:
        extra = " + 1 (difference)" if first else ""
        raise DataError(
            f"the training split has {n_train} of {n_rows} rows (val_fraction="
            f"{cfg.val_fraction}, test_fraction={cfg.test_fraction}) but window ({w}) + "
            f"horizon ({h}){extra} = {needed} rows are needed"
        )
    for name, count in (("validation", n_val), ("test", n_test)):
        if 0 < count < h:
            raise DataError(
                f"the {name} split has {count} rows, fewer than horizon ({h}); raise its "
                "fraction or set it to 0"
            )
    steps = _model_space(series, cfg)
    scaler = Scaler.fit(steps[first:n_train], cfg.scaler, series.columns, series.n_targets)
    model = scaler.transform(steps)
    lowest = w - 1 + first  # earliest origin with a full input window
    n_seen = n_train + n_val
    # origins, stepping back from the one whose last target is the split's last row
    train = _aligned_origins(n_train - 1 - h, lowest, cfg.stride)
    val = _aligned_origins(n_seen - 1 - h, max(lowest, n_train - 1), cfg.stride)
    test = _aligned_origins(n_rows - 1 - h, max(lowest, n_seen - 1), h)
    splits = Splits(
        train=_cut(model, series, train, cfg, scaler),
        val=_cut(model, series, val, cfg, scaler),
        test=_cut(model, series, test, cfg, scaler),
        n_train=n_train,
        n_val=n_val,
        n_test=n_test,
    )
    return splits, scaler


def make_inference_windows(series: Series, cfg: DataConfig, scaler: Scaler) -> WindowSet:
    """Windows at every origin with a full input window, stride 1, up to the last row.

    For an origin shared with :func:`make_splits` (same series, config and scaler), ``x``
    and :meth:`WindowSet.to_original` are identical to the evaluation windows'. ``y`` and
    ``y_true`` are NaN where targets lie past the end of the data.

    Args:
        series: From :func:`prepare_series` with the same ``cfg``.
        cfg: The training run's config.
        scaler: The training run's scaler (from :func:`make_splits` or a checkpoint).

    Returns:
        WindowSet with origins ``window - 1 (+1 with difference) .. len(series) - 1``.
    """
    _check_series(series, cfg)
    if scaler.columns != series.columns or scaler.n_targets != series.n_targets:
        raise DataError(
            f"the scaler was fitted on columns {list(scaler.columns)} but the series has "
            f"{list(series.columns)}"
        )
    if scaler.kind != cfg.scaler:
        raise DataError(f"the config asks for scaler {cfg.scaler!r} but got a {scaler.kind!r} one")
    lowest = cfg.window - 1 + int(cfg.difference)
    if len(series) <= lowest:
        raise DataError(
            f"the series has {len(series)} rows but one input window needs {lowest + 1}"
        )
    model = scaler.transform(_model_space(series, cfg))
    return _cut(model, series, np.arange(lowest, len(series)), cfg, scaler)


def steps_per_epoch(n: int, batch_size: int, drop_last: bool = True) -> int:
    """Batches in one epoch over ``n`` examples.

    Example:
        >>> steps_per_epoch(10, 4), steps_per_epoch(10, 4, drop_last=False)
        (2, 3)
    """
    if not _is_int(n) or n < 0:
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    if not _is_int(batch_size) or batch_size < 1:
        raise DataError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    return n // batch_size if drop_last else -(-n // batch_size)


def iterate_batches(
    n: int,
    batch_size: int,
    *,
    seed: int,
    epoch: int,
    start_step: int = 0,
    drop_last: bool = True,
) -> Iterator[np.ndarray]:
    """Yield index arrays ``(batch_size,)`` over a shuffled epoch, resumable at any step.

    The order is ``np.random.default_rng([seed, epoch]).permutation(n)``, so a run resumed
    at cursor ``(epoch, start_step)`` yields exactly the batches the uninterrupted run
    would have yielded from that step on.

    Raises:
        DataError: ``drop_last`` and fewer than ``batch_size`` examples (no batch at all).

    Example:
        >>> [b.tolist() for b in iterate_batches(5, 2, seed=0, epoch=0, drop_last=False)]
        [[2, 4], [3, 0], [1]]
    """
    steps = steps_per_epoch(n, batch_size, drop_last)
    for name, value in (("seed", seed), ("epoch", epoch)):
        if not _is_int(value) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    if not _is_int(start_step) or not 0 <= start_step <= steps:
        raise ValueError(f"start_step must be an integer in [0, {steps}], got {start_step!r}")
    if n > 0 and steps == 0:
        raise DataError(
            f"batch_size ({batch_size}) is larger than the {n} training windows; lower it or "
            "use more data"
        )
    order = np.random.default_rng([seed, epoch]).permutation(n)
    for step in range(start_step, steps):
        yield order[step * batch_size : (step + 1) * batch_size]


def process_slice(indices: np.ndarray, process_index: int, process_count: int) -> np.ndarray:
    """The contiguous part of a global batch of ``indices`` that one process feeds.

    Example:
        >>> process_slice(np.arange(6), 1, 3).tolist()
        [2, 3]
    """
    if not _is_int(process_count) or process_count < 1:
        raise ValueError(f"process_count must be an integer >= 1, got {process_count!r}")
    if not _is_int(process_index) or not 0 <= process_index < process_count:
        raise ValueError(f"process_index must be in [0, {process_count}), got {process_index!r}")
    indices = np.asarray(indices)
    if indices.shape[0] % process_count:
        raise DataError(
            f"the global batch of {indices.shape[0]} must divide evenly over {process_count} "
            "processes; choose a batch size that is a multiple of the process count"
        )
    size = indices.shape[0] // process_count
    return indices[process_index * size : (process_index + 1) * size]
