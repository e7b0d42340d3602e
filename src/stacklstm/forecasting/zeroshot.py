"""Zero-shot forecasts: the shipped model of the data's frequency family forecasts series it
never saw, without training.

Each series is scaled, transformed and deseasonalised on its own rows as a panel run does
its series on their training rows (:func:`~stacklstm.data.fitting.with_own_scalers`); a
series shorter than the model's window is padded at its start as the model was trained
(``start_padding="repeat"``). Where the table has enough own last windows, the forecast is
the model's blended with the seasonal naive forecast (or that with drift) as they choose
(:mod:`stacklstm.forecasting.zeroshot_blend`). The intervals are symmetric around the
forecast: per horizon step and level, a quantile of the forecast's absolute errors over the
series' seasonal naive scale, times the series' own scale. The errors are those of the
table's own last windows where it has enough of them (:data:`MIN_OWN_WINDOWS`: each series
forecast from its rows before its last ``h``, and from a few origins before that for a small
table, scored on the rows held back), else those of the validation windows of the thousands
of series the model was trained on (:mod:`stacklstm.forecasting.zeroshot_intervals`).

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

from ..checks import DataError, SettingError, check_choice, is_real
from ..config import RunConfig
from ..data import PanelScaler, make_inference_windows, prepare_series, scaler_from_dict
from ..data.fitting import with_own_scalers
from ..pretrained.store import (
    FAMILIES,
    family_of,
    infer_freq,
    read_members,
    read_weights,
    weights_dir,
)
from ..rundir.info import RunInfo
from .future import horizon_stamps, last_windows
from .inference import EnsembleRun, TrainedRun
from .prediction import level_name
from .zeroshot_blend import (
    BENCHMARKS,
    MODEL_ALONE,
    Blend,
    OwnWindows,
    benchmark_forecasts,
    choose_blend,
)
from .zeroshot_intervals import scaled_halfwidths

__all__ = [
    "MIN_OWN_WINDOWS",
    "Pretrained",
    "forecast",
    "load",
    "own_errors",
    "own_window_count",
    "own_windows",
    "series_scales",
]

#: The columns the shipped models read (their training tables').
ID, TIME, TARGET = "unique_id", "ds", "y"
#: ``calibrate="auto"`` fits the intervals on the table's own last windows where they number
#: at least this many (pooled over its series), else on the model's training-time windows.
MIN_OWN_WINDOWS = 50
#: The fewest rows a series keeps before a held-back window for it to be scored on it.
MIN_CALIBRATION_ROWS = 3
#: The ways ``forecast`` fits its intervals.
CALIBRATIONS = ("auto", "own", "weights")
#: The ways ``forecast`` blends the model's forecast with the benchmarks.
BLENDS = ("auto", "none")


@dataclass(frozen=True)
class Pretrained:
    """A family's shipped model, loaded: the run it forecasts with (a seed ensemble's: an
    :class:`~stacklstm.forecasting.inference.EnsembleRun` of its members), its settings, its
    interval quantiles ``{level in percent: (horizon,) scaled half-widths}``, its metadata, and its
    jitted predict step (compiled at the first forecast, kept for the next ones)."""

    family: str
    run: TrainedRun | EnsembleRun
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
    others = read_members(family, weights)
    config = RunConfig.from_dict(meta["config"], saved=True)
    template = scaler_from_dict(meta["scaler"])
    if not isinstance(template, PanelScaler):
        raise ValueError(f"the {family} weights hold no per-series scaler")
    info = RunInfo(config, None, template.select([]))
    model, _ = run_model(config, template.columns)
    mesh = make_mesh()
    runs = tuple(
        TrainedRun(
            Path(weights),
            info,
            model,
            jax.device_put(member, replicated(mesh)),
            {"kind": "pretrained", "family": family, "member": k},
            mesh,
            meta["freq"],
        )
        for k, member in enumerate([params, *others])
    )
    # a seed ensemble forecasts the median of its members', as a run trained with ensemble=N
    run = runs[0] if len(runs) == 1 else EnsembleRun(Path(weights), info, runs)
    params = runs[0].params
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


def _forecast_last(
    model: Pretrained, frame: pd.DataFrame, steps: int
) -> tuple[np.ndarray, Any, Any, np.ndarray]:
    """The model's forecast ``(n_series, steps)`` from each series' last row of ``frame``
    (``unique_id, ds, y``), its windows and series, and each series' scale ``(n_series,)``
    (:func:`series_scales` of its rows), in the order of the windows."""
    data = model.run.info.config.data
    series = prepare_series(frame, data, forecast_only=True)
    if series.freq is None:
        raise ValueError("the time stamps are irregular; give a table with a regular time step")
    empty = model.run.info.scaler
    if empty.seasonal is not None:  # the phases count the table's own time step
        empty = dataclasses.replace(
            empty, seasonal=dataclasses.replace(empty.seasonal, freq=series.freq)
        )
    scaler = with_own_scalers(series, data, empty, data.min_input_rows)
    windows = last_windows(make_inference_windows(series, data, scaler))
    point = model.run.forecast_quantiles(windows, model.predict_step).point[:, :steps, 0]
    scales = series_scales(series.values[:, 0], series.bounds, model.season)[windows.series]
    return point, windows, series, scales


def _lengths(frame: pd.DataFrame) -> np.ndarray:
    """Each series' number of rows in ``frame``."""
    return frame.groupby(ID, sort=False).size().to_numpy()


def _own_rounds(lengths: np.ndarray, steps: int) -> int:
    """How many origins per series :func:`own_errors` forecasts from, given each series'
    number of rows: one, or more while the series with rows to hold back give fewer than
    :data:`MIN_OWN_WINDOWS` windows each round (at most ``steps``)."""
    usable = int((lengths >= MIN_CALIBRATION_ROWS + steps).sum())
    return 1 if usable == 0 else min(steps, -(-MIN_OWN_WINDOWS // usable))


def own_window_count(frame: pd.DataFrame, steps: int) -> int:
    """How many windows :func:`own_errors` scores on the table ``frame`` (before those of a
    flat history are left out), without forecasting."""
    lengths = _lengths(frame)
    rounds = _own_rounds(lengths, steps)
    return int(
        sum((lengths - steps - back >= MIN_CALIBRATION_ROWS).sum() for back in range(rounds))
    )


def own_windows(model: Pretrained, frame: pd.DataFrame, steps: int) -> OwnWindows:
    """The table ``frame``'s (``unique_id, ds, y``) own last windows: each series with at
    least ``MIN_CALIBRATION_ROWS + steps`` rows forecast from the row ``steps`` before its
    last (and, while the table has fewer than :data:`MIN_OWN_WINDOWS` windows, from up to
    ``steps - 1`` rows before that, one origin more per round), on its rows up to there
    alone (its scaling, transform and seasonal pattern fitted on them), by the model and by
    the benchmarks of :func:`~stacklstm.forecasting.zeroshot_blend.benchmark_forecasts`,
    beside the values held back and the scale of the rows before them
    (:func:`series_scales`), as the training-time errors are scaled."""
    frame = frame.sort_values([ID, TIME], kind="stable")
    position = frame.groupby(ID, sort=False).cumcount().to_numpy()
    lengths = _lengths(frame)
    length = np.repeat(lengths, lengths)  # each row's series length (its rows are together)
    parts: list[tuple[np.ndarray, dict[str, np.ndarray], np.ndarray, np.ndarray]] = []
    for back in range(_own_rounds(lengths, steps)):  # origin: steps + back rows from the end
        cut = length - steps - back
        keep = (cut >= MIN_CALIBRATION_ROWS) & (position < cut)
        if not keep.any():
            break
        point, windows, series, scales = _forecast_last(model, frame[keep], steps)
        held = frame[(cut >= MIN_CALIBRATION_ROWS) & (position >= cut) & (position < cut + steps)]
        truth = held.groupby(ID, sort=False)[TARGET].apply(np.asarray)
        ids = np.asarray(windows.ids, dtype=object)[windows.series]
        actual = np.stack([np.asarray(truth[i], np.float64) for i in ids])
        bench = benchmark_forecasts(series.values[:, 0], series.bounds, model.season, steps)
        parts.append((point, {k: v[windows.series] for k, v in bench.items()}, actual, scales))
    if not parts:
        empty = np.zeros((0, steps))
        return OwnWindows(empty, dict.fromkeys(BENCHMARKS, empty), empty, np.zeros(0))
    return OwnWindows(
        np.concatenate([p[0] for p in parts]),
        {k: np.concatenate([p[1][k] for p in parts]) for k in BENCHMARKS},
        np.concatenate([p[2] for p in parts]),
        np.concatenate([p[3] for p in parts]),
    )


def own_errors(
    model: Pretrained, frame: pd.DataFrame, steps: int, blend: Blend = MODEL_ALONE
) -> np.ndarray:
    """``(n_windows, steps)`` the scaled absolute errors of ``blend`` (the model's forecast
    by default) on the last windows of the table ``frame`` (:func:`own_windows`; those of a
    flat history, which has no scale, left out)."""
    return own_windows(model, frame, steps).errors(blend)


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
    calibrate: str = "auto",
    blend: str = "auto",
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
        level: Interval levels in percent; ``()`` for none. Where the intervals come from
            the model's training-time windows (``calibrate``), each must be among those it
            was calibrated at (80 and 95).
        alias: The name of the forecast column.
        weights: A folder of weights written by ``benchmarks/pretrain.py`` (None: the
            shipped ones).
        calibrate: Where the intervals' scaled errors come from: ``"own"``, the table's own
            last windows (:func:`own_errors`); ``"weights"``, the model's training-time
            validation windows; ``"auto"``, the table's own where it has at least
            :data:`MIN_OWN_WINDOWS` of them, else the model's.
        blend: ``"auto"``: where the table has at least :data:`MIN_OWN_WINDOWS` own last
            windows, the forecast is the blend of the model's with the seasonal naive
            forecast or the seasonal naive with drift that did best on them
            (:mod:`stacklstm.forecasting.zeroshot_blend`; the model alone where no blend
            did better), and the intervals fitted on the table's own windows are the
            blend's; else the model's forecast. ``"none"``: the model's forecast.

    Returns:
        ``(n_series * h)`` rows: ``unique_id`` (``id_column``'s values, or ``target``),
        ``ds`` (the stamps of the steps), ``<alias>``, per level ``<alias>-lo-<level>`` and
        ``<alias>-hi-<level>``; the series in the order ``df`` first names them. A
        series of one row has no scale: its intervals are NaN. ``attrs["blend"]``: the
        blend forecast, in words (:meth:`~stacklstm.forecasting.zeroshot_blend.Blend.describe`).

    Raises:
        TypeError: ``df`` is no pandas DataFrame.
        ValueError: A missing column; a time step no family covers, or one pandas cannot
            tell (give ``freq``); ``h`` outside ``1..horizon``; a level the model has no
            interval at; ``blend`` not one of ``auto``, ``none``; ``calibrate`` not one of
            ``auto``, ``own``, ``weights``, or
            ``"own"`` where no series has more than ``h`` rows to hold back; the data
            problems of :func:`stacklstm.data.prepare_series` (duplicate stamps, say).
    """
    check_choice("calibrate", calibrate, CALIBRATIONS)
    check_choice("blend", blend, BLENDS)
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
    bad = [v for v in level if not (is_real(v) and 0 < v < 100)]
    if bad:
        raise ValueError(f"an interval level is a percentage in (0, 100), got {bad[0]!r}")
    names = [level_name(v) for v in level]
    try:
        point, windows, series, scales = _forecast_last(model, frame, steps)
    except DataError as err:
        raise DataError(str(err).replace(f"{ID!r}", f"{id_column!r}")) from err
    halfwidths, chosen = model.intervals, MODEL_ALONE
    enough = MIN_OWN_WINDOWS if calibrate == "auto" else 1
    calibrating = bool(names) and calibrate != "weights"
    count = own_window_count(frame, steps) if calibrating or blend == "auto" else 0
    if (calibrating and count >= enough) or (blend == "auto" and count >= MIN_OWN_WINDOWS):
        own = own_windows(model, frame, steps)
        errors = own.errors()
        if blend == "auto" and len(errors) >= MIN_OWN_WINDOWS:
            chosen = choose_blend(own)
            errors = own.errors(chosen)
        if calibrating and len(errors) >= enough:
            halfwidths = scaled_halfwidths(errors, level)
    if chosen is not MODEL_ALONE:
        bench = benchmark_forecasts(series.values[:, 0], series.bounds, model.season, steps)
        point = chosen.apply(point, {k: v[windows.series] for k, v in bench.items()})
    if names and calibrate == "own" and halfwidths is model.intervals:
        raise ValueError(
            "calibrate='own' needs a series with a scale and at least "
            f"{MIN_CALIBRATION_ROWS + steps} rows (its last {steps} held back); "
            "use calibrate='auto' or 'weights'"
        )
    unknown = [n for n in names if n not in halfwidths]
    if unknown:
        raise ValueError(
            f"no interval at level {unknown[0]}: the pretrained model is calibrated at "
            f"{', '.join(model.intervals)} (calibrate='own' fits any level on the table's "
            "own windows)"
        )
    origin = windows.origin_time
    stamps = horizon_stamps(origin, series.freq, steps)
    ids = np.asarray(windows.ids, dtype=object)[windows.series]
    columns: dict[str, Any] = {ID: np.repeat(ids, steps), TIME: stamps.reshape(-1)}
    columns[alias] = point.reshape(-1)
    for name in names:
        half = scales[:, None] * halfwidths[name][None, :steps]
        columns[f"{alias}-lo-{name}"] = (point - half).reshape(-1)
        columns[f"{alias}-hi-{name}"] = (point + half).reshape(-1)
    out = pd.DataFrame(columns)
    rank = {name: i for i, name in enumerate(order)}
    out = out.iloc[np.argsort(out[ID].map(rank).to_numpy(), kind="stable")]
    if panel:  # the ids as df gave them
        originals = dict(zip(frame[ID], df[id_column], strict=True))
        out[ID] = out[ID].map(originals)
    out = out.reset_index(drop=True)
    out.attrs["blend"] = chosen.describe()
    return out
