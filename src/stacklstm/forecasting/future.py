"""The future: the forecast from each series' last row, the one ``predict`` gives by default
and ``forecast.png`` draws beside the test forecasts."""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from ..checks import DataError
from ..data import WindowSet, make_inference_windows, select_series
from ..intervals import interval_pairs
from ..plots.forecast import FutureForecast

log = logging.getLogger(__name__)

__all__ = ["future_forecast", "last_windows"]


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
    from .calibration import interval_forecast
    from .prediction import _horizon_stamps

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
        times = _horizon_stamps(origin, freq, cfg.horizon)
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
