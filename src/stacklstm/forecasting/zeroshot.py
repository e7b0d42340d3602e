"""Zero-shot forecasts: the shipped model of the data's frequency family forecasts series it
never saw, without training.

Each series is scaled, transformed and deseasonalised on its own rows as a panel run does its
series on their training rows (:func:`~stacklstm.data.fitting.with_own_scalers`); a series
shorter than the model's window is padded at its start as the model was trained
(``start_padding="repeat"``). The intervals are symmetric around the forecast: per horizon
step and level, a quantile of the model's absolute errors over the series' seasonal naive
scale, fitted on the validation windows of the thousands of series it was trained on
(:mod:`stacklstm.forecasting.zeroshot_intervals`), times the series' own scale.

Example:
    >>> import pandas as pd
    >>> df = pd.DataFrame({"ds": pd.date_range("2000", periods=40, freq="QS"),
    ...                    "y": [10.0 + (i % 4) + 0.1 * i for i in range(40)]})
    >>> out = forecast(df, h=4)  # doctest: +SKIP
    >>> out.columns.tolist()  # doctest: +SKIP
    ['unique_id', 'ds', 'stacklstm', 'stacklstm-lo-80', 'stacklstm-hi-80', ...]
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..checks import DataError, SettingError
from ..config import RunConfig
from ..data import PanelScaler, make_inference_windows, prepare_series, scaler_from_dict
from ..data.fitting import with_own_scalers
from ..pretrained.store import FAMILIES, family_of, infer_freq, read_weights, weights_dir
from ..rundir.info import RunInfo
from .future import horizon_stamps, last_windows
from .inference import TrainedRun
from .prediction import level_name

__all__ = ["Pretrained", "forecast", "load", "series_scales"]

#: The columns the shipped models read (their training tables').
ID, TIME, TARGET = "unique_id", "ds", "y"


@dataclass(frozen=True)
class Pretrained:
    """A family's shipped model, loaded: the run it forecasts with, its settings, its interval
    quantiles ``{level in percent: (horizon,) scaled half-widths}``, its metadata, and its
    jitted predict step (compiled at the first forecast, kept for the next ones)."""

    family: str
    run: TrainedRun
    intervals: dict[str, np.ndarray]
    meta: dict[str, Any]
    predict_step: Any

    @property
    def horizon(self) -> int:
        return int(self.run.info.config.data.horizon)

    @property
    def season(self) -> int:
        return int(self.run.info.config.data.season)


def load(family: str, weights: str | Path | None = None) -> Pretrained:
    """The shipped model of ``family`` (a key of :data:`~stacklstm.pretrained.FAMILIES`),
    or the one in the folder ``weights`` (written by ``benchmarks/pretrain.py``), loaded
    once per process and ready to forecast (its predict step compiled).

    Raises:
        ValueError: An unknown family, or its weights missing or damaged.
    """
    folder = weights_dir() if weights is None else Path(weights)
    return _load(family, str(folder.resolve()))


@functools.cache
def _load(family: str, weights: str) -> Pretrained:
    import jax

    from .. import compile_cache
    from ..distributed import make_mesh, replicated
    from ..train.plan import run_model
    from ..train.step import make_predict_step

    if family not in FAMILIES:
        raise ValueError(f"family must be one of {', '.join(FAMILIES)}, got {family!r}")
    compile_cache.enable()  # the predict step compiled by an earlier process is reused
    meta, params = read_weights(family, weights)
    config = RunConfig.from_dict(meta["config"], saved=True)
    template = scaler_from_dict(meta["scaler"])
    if not isinstance(template, PanelScaler):
        raise ValueError(f"the {family} weights hold no per-series scaler")
    info = RunInfo(config, None, template.select([]))
    model, _ = run_model(config, template.columns)
    mesh = make_mesh()
    params = jax.device_put(params, replicated(mesh))
    run = TrainedRun(
        Path(weights),
        info,
        model,
        params,
        {"kind": "pretrained", "family": family},
        mesh,
        meta["freq"],
    )
    intervals = {k: np.asarray(v, np.float64) for k, v in meta["intervals"]["halfwidths"].items()}
    step = make_predict_step(model)
    # ready to forecast: the step compiled (or read from the compile cache) for the padded
    # batch every forecast sends, and the transform's optimizer imported
    x = np.zeros((run.batch_size, config.data.window, len(template.columns)), np.float32)
    jax.block_until_ready(step(params, x))
    import scipy.optimize  # noqa: F401  (the Box-Cox choice of each series' transform)

    return Pretrained(family, run, intervals, meta, step)


def series_scales(values: np.ndarray, bounds: np.ndarray, season: int) -> np.ndarray:
    """``(n_series,)`` each series' in-sample seasonal naive MAE (lag ``season``; lag 1 for
    a series of ``season`` rows or fewer; NaN for one row: no scale), the scale of MASE.

    Example:
        >>> series_scales(np.array([1.0, 2, 4, 7, 5]), np.array([0, 4, 5]), 2).tolist()
        [4.0, nan]
    """
    out = np.full(len(bounds) - 1, np.nan)
    for i, (start, stop) in enumerate(itertools.pairwise(bounds)):
        rows = values[start:stop]
        lag = season if len(rows) > season else 1
        if len(rows) > lag:
            out[i] = float(np.mean(np.abs(rows[lag:] - rows[:-lag])))
    return out


def _check_frame(
    df: Any, target: str, time_column: str, id_column: str | None
) -> tuple[pd.DataFrame, bool]:
    """``df`` as the models' ``unique_id, ds, y`` and whether it has an id column."""
    if not isinstance(df, pd.DataFrame):
        raise TypeError(f"df must be a pandas DataFrame, got {type(df).__name__}")
    missing = [c for c in (time_column, target) if c not in df.columns]
    if missing:
        raise ValueError(
            f"the table has no column {missing[0]!r}; it has {', '.join(map(str, df.columns))} "
            "(name the target and time columns)"
        )
    if pd.api.types.is_numeric_dtype(df[time_column]):
        raise ValueError(
            f"the time column {time_column!r} holds numbers; the pretrained models choose "
            "their family by the dates' time step: give dates (2024-01-31, ...)"
        )
    panel = id_column is not None and id_column in df.columns
    ids = df[id_column].astype(str) if panel else np.full(len(df), target, dtype=object)
    frame = pd.DataFrame({ID: ids, TIME: df[time_column].to_numpy(), TARGET: df[target]})
    if not pd.api.types.is_numeric_dtype(frame[TARGET]):
        raise ValueError(f"the target column {target!r} must hold numbers, got {df[target].dtype}")
    if len(frame) == 0:
        raise ValueError("df has no rows")
    return frame, panel


def forecast(
    df: pd.DataFrame,
    h: int | None = None,
    *,
    target: str = "y",
    time_column: str = "ds",
    id_column: str | None = "unique_id",
    freq: str | None = None,
    level: Sequence[float] = (80, 95),
    alias: str = "stacklstm",
    weights: str | Path | None = None,
) -> pd.DataFrame:
    """Forecast the next ``h`` steps after each series' last row with the shipped model of
    the data's frequency family, without training.

    Args:
        df: ``(rows, columns)``: ``[id_column,] time_column, target``: one series, or a
            panel of series named by ``id_column``; the rows of a series in any order.
        h: Steps to forecast, ``1 <= h <=`` the family's horizon (None: the horizon:
            yearly 6, quarterly 8, monthly 18, weekly 13, daily 14, hourly 48).
        target: The column to forecast.
        time_column: The column of time stamps (the family is chosen from their step).
        id_column: The column naming the series (absent from ``df``: one series, named
            ``target`` in the output).
        freq: The time step as a pandas alias (None: inferred from the stamps).
        level: Interval levels in percent, each among those the model was calibrated at
            (80 and 95); ``()`` for none.
        alias: The name of the forecast column.
        weights: A folder of weights written by ``benchmarks/pretrain.py`` (None: the
            shipped ones).

    Returns:
        ``(n_series * h)`` rows: ``unique_id`` (``id_column``'s values, or ``target``),
        ``ds`` (the stamps of the steps), ``<alias>``, per level ``<alias>-lo-<level>`` and
        ``<alias>-hi-<level>``; the series in the order ``df`` first names them. A
        series of one row has no scale: its intervals are NaN.

    Raises:
        TypeError: ``df`` is no pandas DataFrame.
        ValueError: A missing column; a time step no family covers, or one pandas cannot
            tell (give ``freq``); ``h`` outside ``1..horizon``; a level the model has no
            interval at; the data problems of :func:`stacklstm.data.prepare_series`
            (duplicate stamps, say).
    """
    frame, panel = _check_frame(df, target, time_column, id_column)
    order = list(dict.fromkeys(frame[ID]))
    if freq is None:
        freq = infer_freq(frame[TIME], frame[ID])
        if freq is None:
            raise ValueError(
                "cannot tell the time step of the stamps (every series has fewer than three "
                "rows, or irregular stamps); give it as freq ('MS', 'W', 'D', ...)"
            )
    model = load(family_of(freq), weights)
    steps = model.horizon if h is None else h
    whole = isinstance(steps, (int, np.integer)) and not isinstance(steps, bool)
    if not whole or not 1 <= steps <= model.horizon:
        raise SettingError(
            f"h must be a whole number of steps in 1..{model.horizon} (the most the "
            f"{model.family} model forecasts), got {h!r}; train a model with a longer horizon "
            "to forecast further",
            "h",
        )
    names = [level_name(v) for v in level]
    unknown = [n for n in names if n not in model.intervals]
    if unknown:
        raise ValueError(
            f"no interval at level {unknown[0]}: the pretrained model is calibrated at "
            f"{', '.join(model.intervals)}"
        )
    data = model.run.info.config.data
    try:
        series = prepare_series(frame, data, forecast_only=True)
    except DataError as err:
        raise DataError(str(err).replace(f"{ID!r}", f"{id_column!r}")) from err
    if series.freq is None:
        raise ValueError("the time stamps are irregular; give a table with a regular time step")
    empty = model.run.info.scaler
    if empty.seasonal is not None:  # the phases count the table's own time step
        empty = dataclasses.replace(
            empty, seasonal=dataclasses.replace(empty.seasonal, freq=series.freq)
        )
    scaler = with_own_scalers(series, data, empty, data.min_input_rows)
    windows = last_windows(make_inference_windows(series, data, scaler))
    point = model.run.forecast_quantiles(windows, model.predict_step).point[:, :steps, 0]  # (n, h)
    origin = windows.origin_time
    stamps = horizon_stamps(origin, series.freq, steps)
    scales = series_scales(series.values[:, 0], series.bounds, model.season)[windows.series]
    ids = np.asarray(windows.ids, dtype=object)[windows.series]
    columns: dict[str, Any] = {ID: np.repeat(ids, steps), TIME: stamps.reshape(-1)}
    columns[alias] = point.reshape(-1)
    for name in names:
        half = scales[:, None] * model.intervals[name][None, :steps]
        columns[f"{alias}-lo-{name}"] = (point - half).reshape(-1)
        columns[f"{alias}-hi-{name}"] = (point + half).reshape(-1)
    out = pd.DataFrame(columns)
    rank = {name: i for i, name in enumerate(order)}
    out = out.iloc[np.argsort(out[ID].map(rank).to_numpy(), kind="stable")]
    if panel:  # the ids as df gave them
        originals = dict(zip(frame[ID], df[id_column], strict=True))
        out[ID] = out[ID].map(originals)
    return out.reset_index(drop=True)
