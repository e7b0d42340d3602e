"""The future: the forecast from each series' last row, the one ``predict`` gives by default
and ``forecast.png`` draws beside the test forecasts."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from ..checks import DataError
from ..data import WindowSet, make_inference_windows, select_series
from ..intervals import interval_pairs
from ..plots.forecast import FutureForecast
from .calibration import interval_forecast

log = logging.getLogger(__name__)

__all__ = ["future_forecast", "horizon_stamps", "last_windows"]


def last_windows(windows: WindowSet) -> WindowSet:
    """The window at each series' last origin (one per series, in the series' order).

    Example: of a series' windows at origins 5, 6, 7 the one at 7.
    """
    last = np.flatnonzero(np.r_[windows.series[1:] != windows.series[:-1], True])
    return windows.take(last)


def future_forecast(run: Any, series: Any, calibration: Any) -> FutureForecast | None:
    """The run's forecast of the ``horizon`` steps after each series' last row of
    ``series`` (the series it was trained on; None where none can be forecast, a run whose
    covariates' future the table does not hold, or irregular time stamps), with the
    intervals of its quantiles (calibrated by ``calibration``, if given)."""
    cfg = run.info.config.data
    if series.ids is not None:
        known = [name for name in series.ids if name in set(run.info.scaler.ids or ())]
        if not known:
            return None
        series = select_series(series, known)
    quiet = logging.getLogger("stacklstm.data")
    level, quiet.level = quiet.level, logging.ERROR  # the report names what is left out
    try:
        windows = last_windows(
            make_inference_windows(series, cfg, run.info.scaler, run.info.static_scaler)
        )
        out = interval_forecast(run, windows, calibration)
        origin = windows.local_origin if windows.origin_time is None else windows.origin_time
        freq = "1" if cfg.time_column is None else series.freq
        times = horizon_stamps(origin, freq, cfg.horizon)
    except (DataError, ValueError) as err:  # a table without the covariates' future rows
        log.debug("forecast.png without the future: %s", err)
        return None
    finally:
        quiet.level = level
    intervals = {
        level: (out.quantiles[..., lo], out.quantiles[..., hi])
        for level, lo, hi in interval_pairs(out.levels)
    }
    ids = None if windows.ids is None else [windows.ids[s] for s in windows.series]
    return FutureForecast(times, out.point, intervals, ids)


def horizon_stamps(origin: np.ndarray, freq: str | None, horizon: int) -> np.ndarray:
    """``(n, horizon)`` time stamps of the ``horizon`` steps after each of ``origin`` (n,):
    whole numbers (row numbers, or a time column of whole numbers) step by ``int(freq)``,
    time stamps by the pandas offset ``freq``."""
    if freq is None:
        raise ValueError(
            "the time stamps are irregular, so the stamps of the horizon cannot be inferred; "
            "give the table a regular time step (or use the wide format)"
        )
    steps = np.arange(1, horizon + 1)
    if np.issubdtype(np.asarray(origin).dtype, np.integer):
        return np.asarray(origin)[:, None] + int(freq) * steps[None, :]
    times = pd.DatetimeIndex(origin)
    offset = pd.tseries.frequencies.to_offset(freq)
    columns = [(times + int(k) * offset).to_numpy() for k in steps]
    return np.stack(columns, axis=1) if columns else np.empty((len(times), 0), times.dtype)
