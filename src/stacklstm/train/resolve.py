"""The resolve pass: the one place a run's settings given as ``"auto"`` become values.

The rules (what each ``"auto"`` becomes) are :mod:`stacklstm.config.auto`'s; this module
reads what they need from the data and applies them, in two steps, before anything is
trained or written:

* :func:`prepare_resolved` reads the series and resolves ``init`` (:func:`choose_init`:
  a fine-tune of the shipped weights for one yearly, quarterly or monthly series, which sets the
  weights' window and model) and the data settings: ``season``
  from the time step, ``window`` from the season (on a short series, from its length),
  ``start_padding``, ``scaler`` and ``target_transform`` (``"auto"``: Guerrero's lambda of
  the training rows, :mod:`stacklstm.data.transform`); with ``model.hybrid``, the data
  settings the hybrid needs (:data:`HYBRID_DATA`);
* :func:`resolve_splits` resolves the rest once the splits are counted: ``batch_size``,
  ``epochs`` and ``patience`` from the training windows, ``retrain`` from the validation
  windows, ``loss_weight`` from the number of series.

The plan of a run (:func:`stacklstm.train.plan.make_plan`), of a backtest and of a search
call them, and everything below (the windows, the memory checks, the folds, the training
loop) receives the settings resolved. A run folder's ``config.json`` holds them resolved,
so ``evaluate``, ``predict`` and ``export`` need nothing from here.

Example:
    >>> from stacklstm.config import DataConfig
    >>> cfg = resolve_run_config(RunConfig(), "7D", (57, 1))
    >>> cfg.data.season, cfg.data.window, cfg.train.batch_size, cfg.train.epochs
    (52, 52, 8, 143)
    >>> resolve_data(DataConfig(), "MS").window
    24
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np
import pandas as pd

from ..checks import DataError
from ..config import AUTO, DataConfig, RunConfig, TrainConfig
from ..config.auto import (
    BASE_BATCH_SIZE,
    MAX_AUTO_WINDOW,
    loss_weight_of,
    resolve_data_config,
    resolve_train_config,
    retrain_of,
)
from ..data import prepare_series
from ..data.rows import check_length
from ..data.splits import split_problem, split_rows
from ..data.transform import choose_target_transform
from ..pretrained.finetune import AUTO_FAMILIES, pretrained_config
from ..pretrained.store import family_of

log = logging.getLogger(__name__)

#: The data settings of a hybrid run (``model.hybrid``), whatever was given: positive
#: targets divided by their training mean, the windows as they are.
HYBRID_DATA = {
    "scaler": "mean",
    "normalize": "none",
    "deseasonalize": False,
    "target_transform": "none",
    "difference": False,
}

__all__ = [
    "HYBRID_DATA",
    "planned_batch",
    "planned_window",
    "prepare_resolved",
    "resolve_data",
    "resolve_run_config",
    "resolve_splits",
    "short_series_window",
]


def resolve_data(cfg: DataConfig, freq: str | None) -> DataConfig:
    """``cfg`` with ``season`` and ``window`` given as ``"auto"`` resolved for data whose
    time step is ``freq`` (``Series.freq``); ``cfg`` itself when nothing is ``"auto"``."""
    return resolve_data_config(cfg, freq)


def resolve_run_config(
    cfg: RunConfig, freq: str | None, windows: tuple[int, int] | None
) -> RunConfig:
    """``cfg`` with its ``"auto"`` settings resolved: the data ones from the time step
    ``freq``; with ``windows = (training windows, devices)``, the training budget too.

    Returns:
        ``cfg`` itself when nothing was ``"auto"``, else a new RunConfig.
    """
    data = resolve_data_config(cfg.data, freq)
    train = cfg.train if windows is None else resolve_train_config(cfg.train, *windows)
    if data is cfg.data and train is cfg.train:
        return cfg
    return RunConfig(data=data, model=cfg.model, train=train)


def resolve_splits(cfg: RunConfig, splits: Any, devices: int, source: Any) -> RunConfig:
    """``cfg`` (its data settings resolved) with the rest resolved for its ``splits``
    (:func:`~stacklstm.data.make_splits`): the budget for the training windows (an
    automatic batch a multiple of ``devices``), ``retrain`` for the validation windows,
    ``loss_weight`` for the number of series.

    Raises:
        DataError: ``retrain="all"`` or ``"on"`` and the splits give no validation windows
            (``source``, the table, named).
    """
    n_val = len(splits.val)
    retrain = retrain_of(cfg.train.retrain, n_val)
    if retrain in ("all", "on") and not n_val:
        raise DataError(
            f"retrain={retrain!r} chooses the epochs on the validation windows, but "
            f"{source} gives none; raise `val_fraction` (or `val_size`), or train with "
            "retrain='off'"
        )
    train = resolve_train_config(cfg.train, len(splits.train), devices)
    cfg = RunConfig(data=cfg.data, model=cfg.model, train=train)
    ids = splits.train.ids
    n_series = 0 if ids is None else len(ids)
    loss_weight = loss_weight_of(cfg.train, cfg.data, n_series)
    return cfg.replace({"train": {"retrain": retrain, "loss_weight": loss_weight}})


def prepare_resolved(frame: pd.DataFrame, cfg: RunConfig) -> tuple[Any, RunConfig]:
    """``(series, cfg)``: the table prepared (:func:`~stacklstm.data.prepare_series`) and
    ``cfg`` with its data settings resolved for the series' time step (the budget is left
    to :func:`resolve_run_config` once the windows are counted).

    The length of one series is checked for a training window here when its window was
    ``"auto"`` (``prepare_series`` checks it when the window is given), with the same
    message.

    Raises:
        DataError: As :func:`~stacklstm.data.prepare_series`.
    """
    if cfg.model.hybrid:
        changed = {k: v for k, v in HYBRID_DATA.items() if getattr(cfg.data, k) != v}
        if changed:
            log.info(
                "hybrid: %s (the smoothing deseasonalises and normalises each window)",
                ", ".join(f"{k}={v}" for k, v in changed.items()),
            )
            cfg = cfg.replace({"data": changed})
    series = prepare_series(frame, cfg.data)
    if cfg.model.hybrid:
        check_positive_targets(series)
    if cfg.train.init == AUTO:
        cfg = choose_init(cfg, series)
    if cfg.train.init == "pretrained":  # the windows and model the weights were trained on
        cfg = pretrained_config(cfg, series.freq, series.ids is not None)
    resolved = resolve_run_config(cfg, series.freq, None)
    transform = resolved.data.target_transform
    if transform == AUTO and series.ids is not None:  # each series of a panel on its own
        transform = "per_series"
        resolved = resolved.replace({"data": {"target_transform": transform}})
    if transform == "per_series" and cfg.data.target_transform != transform:  # auto, default
        log.info(
            "target_transform %r: per_series (log1p for each series whose Guerrero "
            "Box-Cox lambda of its training rows is below 0.5)",
            cfg.data.target_transform,
        )
    if transform == AUTO or (transform == "per_series" and series.ids is None):
        # a fine-tune chooses as the zero-shot forecast does, on every row: its "epoch 0"
        # (the weights unchanged) then forecasts what the zero-shot forecast does
        every_row = cfg.train.init == "pretrained"
        chosen, lam = choose_target_transform(series, resolved.data, every_row)
        log.info(
            "target_transform %r: %s (Guerrero's Box-Cox lambda of the %s: %.2f, the median "
            "over the targets)",
            transform,
            chosen,
            "rows" if every_row else "training rows",
            lam,
        )
        resolved = resolved.replace({"data": {"target_transform": chosen}})
    if cfg.data.window == AUTO and series.ids is None:
        window = short_series_window(len(series), resolved.data)
        if window != resolved.data.window:
            log.info(
                "window 'auto': %d input steps (not %d): the series' %d rows leave room for no "
                "more with its validation and test rows",
                window,
                resolved.data.window,
                len(series),
            )
            resolved = resolved.replace({"data": {"window": window}})
        check_length(len(series), resolved.data, forecast_only=False)
    return series, resolved


def choose_init(cfg: RunConfig, series: Any) -> RunConfig:
    """``init="auto"`` resolved: ``cfg`` with ``init="pretrained"`` where the data is one
    series of a time step whose weights ``"auto"`` fine-tunes
    (:data:`~stacklstm.pretrained.finetune.AUTO_FAMILIES`: yearly, quarterly, monthly) and a
    fine-tune can train on it as the run is set
    (:func:`~stacklstm.pretrained.finetune.pretrained_config` accepts it: one target, no
    covariates, a point loss, a horizon up to the weights', no window or model setting of
    its own; and the series holds the fine-tune's windows), else ``init="random"``. The
    choice and, for ``"random"``, its reason are logged.
    """
    family = _covered_family(series.freq)
    if series.n_series != 1:
        why = f"a panel of {series.n_series} series trains a global model"
    elif series.freq is None:
        why = "no regular time column to choose the weights by"
    elif family not in AUTO_FAMILIES:
        why = f"'auto' fine-tunes the {', '.join(AUTO_FAMILIES)} weights only" + (
            f"; init='pretrained' fine-tunes the {family} ones" if family else ""
        )
    else:
        pretrained = cfg.replace({"train": {"init": "pretrained"}})
        try:
            settings = pretrained_config(pretrained, series.freq, False)
            resolved = resolve_run_config(settings, series.freq, None).data
            why = split_problem(len(series), split_rows(len(series), resolved), resolved)
        except (ValueError, KeyError, OSError) as err:  # refused, or no weights to read
            why = str(err).removeprefix("init='pretrained': ")
    init = "random" if why else "pretrained"
    log.info("init 'auto': %s (%s)", init, why or f"the {family} weights, fine-tuned")
    return cfg.replace({"train": {"init": init}})


def saved_init(cfg: RunConfig, saved: RunConfig | None) -> RunConfig:
    """``cfg`` resuming a run saved as ``saved``: ``init="auto"`` takes the choice the run
    made (its folder's, ``"random"`` for a folder older than the setting), so a resume never
    switches a run between the weights and random parameters (other weights since, or a
    folder written when ``"auto"`` did not exist)."""
    if saved is None or cfg.train.init != AUTO:
        return cfg
    return cfg.replace({"train": {"init": saved.train.init}})


def _covered_family(freq: str | None) -> str | None:
    """The family of the shipped weights of the time step ``freq``, or None."""
    try:
        return None if freq is None else family_of(freq)
    except ValueError:
        return None


def check_positive_targets(series: Any) -> None:
    """The hybrid's smoothing divides by its targets: every target value must be > 0.

    Raises:
        DataError: A target value is zero or negative (the message names the first).
    """
    targets = series.values[:, : series.n_targets]
    bad = np.flatnonzero(~(targets > 0).all(axis=1))
    if bad.size:
        row = int(bad[0])
        raise DataError(
            f"the hybrid model needs positive targets (it smooths them multiplicatively); "
            f"row {row} of the prepared table holds {targets[row].tolist()}: use the LSTM "
            "(hybrid=false) or shift the targets"
        )


def short_series_window(n_rows: int, cfg: DataConfig) -> int:
    """``window="auto"`` on one series of ``n_rows`` rows: ``cfg.window`` (resolved from the
    season) where the training split holds a window of it; on a shorter series, half the
    room the training split leaves (``room = training rows - horizon``, minus 1 with
    ``difference``; at least 1 step), so that it holds about as many training windows as
    each has input steps. ``cfg.window`` where even one step does not fit (the length checks
    then say why).

    Example:
        >>> cfg = DataConfig(window=10, horizon=6, val_size=6, test_size=0)
        >>> [short_series_window(n, cfg) for n in (30, 20, 14, 8)]  # rooms 18, 8, 2, -4
        [10, 4, 1, 10]
    """
    room = split_rows(n_rows, cfg)[0] - cfg.horizon - int(cfg.difference)
    if room >= cfg.window or room < 1:
        return int(cfg.window)
    return max(1, (room + 1) // 2)


def planned_window(cfg: DataConfig) -> tuple[int, bool]:
    """``(window, exact)``: the input steps per window of a run on ``cfg``, before its data
    is read. ``exact`` is False where ``window="auto"`` follows a season that follows the
    time step (``season="auto"`` with a time column): then ``window`` is the largest it can
    become (:data:`~stacklstm.config.auto.MAX_AUTO_WINDOW`).

    Example:
        >>> planned_window(DataConfig(window=8))
        (8, True)
        >>> planned_window(DataConfig(season=4)), planned_window(DataConfig())
        ((8, True), (52, False))
    """
    if cfg.window != AUTO:
        return int(cfg.window), True
    if cfg.season != AUTO or cfg.time_column is None:  # the season, so the window, is known
        return int(resolve_data_config(cfg, None).window), True
    return MAX_AUTO_WINDOW, False


def planned_batch(tcfg: TrainConfig) -> int:
    """The windows per batch of a run on ``tcfg`` before its windows are counted: the given
    ``batch_size``, or the largest ``"auto"`` can become
    (:data:`~stacklstm.config.auto.BASE_BATCH_SIZE`).

    Example:
        >>> planned_batch(TrainConfig(batch_size=4)), planned_batch(TrainConfig())
        (4, 32)
    """
    return BASE_BATCH_SIZE if tcfg.batch_size == AUTO else int(tcfg.batch_size)
