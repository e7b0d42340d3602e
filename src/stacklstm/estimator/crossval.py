"""Cross-validation of an :class:`~stacklstm.estimator.LSTMForecaster` with the cut-offs of
statsforecast's ``StatsForecast.cross_validation``, so the two frames merge on
``unique_id, ds, cutoff`` row for row.

The forecasts come from :func:`stacklstm.forecasting.predict` over the frame cut at each series'
last cut-off (with known-future covariates, the ``horizon`` rows after it stay as its future
rows, their targets emptied), so the forecast from a cut-off reads only the rows up to it.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any, Protocol

import numpy as np
import pandas as pd

from ..checks import check_positive_int
from ..data.grid import regular_grid
from .frames import cutoff_positions, positions, sort_series


class Estimator(Protocol):
    """What cross-validation uses of an :class:`~stacklstm.estimator.LSTMForecaster` (named
    here, so this module needs nothing from the estimator's)."""

    target_col: str
    report_: Any
    _info: Any
    _out_dir: Path | None
    _cleanup: Any

    def _run_frame(self, df: Any, static_df: Any, report: bool = False) -> tuple[Any, Any]: ...
    def _fit_run(self, frame: pd.DataFrame, cfg: Any) -> Any: ...
    def _release(self) -> None: ...
    def _forecast(
        self,
        table: Any,
        every_origin: bool = False,
        combine: bool = False,
        unseen: str = "fallback",
    ) -> Any: ...
    def _user_frame(self, long: pd.DataFrame, level: Any) -> pd.DataFrame: ...


def cross_validate(
    model: Estimator,
    df: pd.DataFrame,
    n_windows: int,
    step_size: int,
    refit: bool,
    static_df: pd.DataFrame | None,
) -> pd.DataFrame:
    """:meth:`LSTMForecaster.cross_validation` (see there)."""
    check_positive_int("n_windows", n_windows)
    check_positive_int("step_size", step_size)
    if not isinstance(refit, bool):
        raise TypeError(f"refit must be True or False, got {refit!r}")
    model = _scratch_copy(model)  # the estimator's own fitted model is left as it was
    frame, cfg = model._run_frame(df, static_df)
    data = cfg.data
    _refuse_duplicates(frame, data.id_column, data.time_column)  # rows named as the user's
    frame = sort_series(frame, data.id_column, data.time_column).reset_index(drop=True)
    _refuse_gaps(frame, data.id_column, data.time_column)
    cuts = cutoff_positions(frame, data.id_column, data.horizon, n_windows, step_size)
    cuts["unique_id"] = [data.target[0] if v is None else str(v) for v in cuts["series"]]
    key = _series_key(frame, data.id_column, data.target[0])
    pos = positions(frame, data.id_column)
    end = key.map(cuts.groupby("unique_id")["cutoff_pos"].max()).to_numpy()  # last cut-off
    # the table forecast from: each series up to its last cut-off, and with known-future
    # covariates the horizon after it as its future rows (targets emptied)
    future = bool(data.future_features) or data.calendar != "none"
    kept = pos <= end + (data.horizon if future else 0)
    table = frame[kept].copy()
    table.loc[(pos > end)[kept], list(data.target)] = np.nan  # no row without `future`
    rounds = [cuts] if not refit else [cuts[cuts["window"] == w] for w in range(n_windows)]
    pieces = []
    for chosen in rounds:  # train on the rows up to the round's first cut-off
        limit = key.map(chosen.groupby("unique_id")["cutoff_pos"].min()).to_numpy()
        model._fit_run(frame[pos <= limit].reset_index(drop=True), cfg)
        pieces.append(_round_forecasts(model, table, frame, key, pos, chosen))
    return pd.concat(pieces, ignore_index=True)


def _refuse_duplicates(frame: pd.DataFrame, id_col: str | None, time_col: str | None) -> None:
    """Raise ValueError if two rows of a series share a time stamp, naming them by their
    position in the caller's frame (before it is sorted)."""
    if time_col is None:
        return
    keys = [c for c in (id_col, time_col) if c is not None]
    twice = frame.duplicated(keys, keep=False).to_numpy()
    if twice.any():
        rows = np.flatnonzero(twice)[:4].tolist()
        first = frame.iloc[rows[0]][keys].to_dict()
        raise ValueError(
            f"df has {int(twice.sum())} rows whose series and time stamp repeat, the first at "
            f"rows {rows} of df ({first}); give each series one row per time stamp"
        )


def _refuse_gaps(frame: pd.DataFrame, id_col: str | None, time_col: str | None) -> None:
    """Raise ValueError if a series' time stamps miss steps of its regular grid: cut-offs
    are counted in rows (as statsforecast does) and the horizon in time steps, which agree
    only without gaps."""
    if time_col is None:
        return
    groups = [(None, frame)] if id_col is None else frame.groupby(id_col, sort=False, observed=True)
    for name, part in groups:
        times = part[time_col].to_numpy()
        if times.dtype.kind in "Miu":  # date-times or whole numbers (else: row order)
            grid = regular_grid(times)
            if grid is not None and len(grid[0]) != len(times):
                missing = np.setdiff1d(grid[0], times)[0]
                missing = pd.Timestamp(missing) if times.dtype.kind == "M" else missing
                where = "the series" if name is None else f"series {name!r}"
                raise ValueError(
                    f"{where} misses {len(grid[0]) - len(times)} time step(s) of its grid "
                    f"(step {grid[1]}), the first {missing}; "
                    "cross_validation counts cut-offs in rows, so fill the gaps first (e.g. "
                    "utilsforecast.preprocessing.fill_gaps, with the targets interpolated)"
                )


def _scratch_copy(model: Estimator) -> Estimator:
    """An unfitted estimator with ``model``'s settings whose runs live in temporary folders
    (never in ``model``'s ``run_dir``)."""
    scratch = copy.copy(model)
    scratch._out_dir = scratch._cleanup = None
    scratch._release()
    scratch.report_ = None
    return scratch


def _series_key(frame: pd.DataFrame, id_col: str | None, target: str) -> pd.Series:
    """``(rows,)`` each row's series as the long frames name it: the id as text (the name
    of the target for a frame of one series)."""
    if id_col is None:
        return pd.Series(np.full(len(frame), target, dtype=object), index=frame.index)
    return frame[id_col].map(str).astype(object)


def _round_forecasts(
    model: Estimator,
    table: pd.DataFrame,
    frame: pd.DataFrame,
    key: pd.Series,
    pos: np.ndarray,
    chosen: pd.DataFrame,
) -> pd.DataFrame:
    """The forecasts of the fitted ``model`` from the cut-offs ``chosen``, with the actual
    values, under the estimator's column names (``id, ds, cutoff, y, alias``)."""
    data = model._info.config.data
    long = model._forecast(table.reset_index(drop=True), every_origin=True)
    stamp = pos if data.time_column is None else frame[data.time_column].to_numpy()
    rows = pd.DataFrame({"unique_id": key.to_numpy(), "pos": pos, "stamp": stamp})
    wanted = chosen[["unique_id", "cutoff_pos"]].rename(columns={"cutoff_pos": "pos"})
    wanted = wanted.merge(rows, on=["unique_id", "pos"], how="left")
    wanted = wanted.rename(columns={"stamp": "cutoff"})[["unique_id", "cutoff"]]
    if data.time_column is not None:
        long["cutoff"] = long["cutoff"].astype(frame[data.time_column].dtype)
        long["ds"] = long["ds"].astype(frame[data.time_column].dtype)
    got = long.merge(wanted, on=["unique_id", "cutoff"], how="inner")
    expected = len(wanted) * data.horizon
    if len(got) != expected:
        short = wanted.merge(
            got[["unique_id", "cutoff"]].drop_duplicates(), how="left", indicator=True
        )
        lacking = short[short["_merge"] == "left_only"][["unique_id", "cutoff"]]
        lacking = lacking.head(3).to_dict("records")
        raise ValueError(
            f"no forecast from the cut-off(s) {lacking}: a cut-off needs a full input window "
            f"of {data.window} rows (+1 with difference) up to it; lower n_windows or "
            "step_size, or use longer series"
        )
    actual = rows.rename(columns={"stamp": "ds"})[["unique_id", "ds"]]
    actual["y"] = frame[data.target[0]].to_numpy(dtype=np.float64)
    if data.time_column is None:
        actual["ds"] = pos
    got = got.merge(actual, on=["unique_id", "ds"], how="left")
    got = got.sort_values(["unique_id", "cutoff", "ds"], kind="stable")
    out = model._user_frame(got, None)
    out.insert(3, model.target_col, got["y"].to_numpy())
    return out
