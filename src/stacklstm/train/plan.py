"""The plan of a training run: every setting checked and resolved, the data read and split,
the model built and its state's shapes known, before anything is written or allocated.

:func:`make_plan` is phase 1 of :func:`~stacklstm.train.fit`; a seed ensemble
(:mod:`.ensemble_fit`) makes one plan for all its members.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

from .. import baselines
from ..config import AUTO, RunConfig
from ..data import (
    DataError,
    WindowSet,
    bundled_dataset_path,
    covariate_sizes,
    make_splits,
    prepare_series,
    read_table,
    steps_per_epoch,
)
from ..data.season import resolve_data_config
from ..distributed import check_batch_size, make_mesh
from ..forecaster import build_model
from ..intervals import OutputHead
from .budget import BASE_BATCH_SIZE, resolve_train_config
from .memory import (
    check_fits_float32,
    check_series_fit,
    memory_errors_as_data_errors,
    planned_window,
)
from .rundir import (
    RunInfo,
    check_config_unchanged,
    check_new_run_dir,
    newest_saved_config,
    read_run_info,
)
from .step import TrainState, abstract_state, check_state_fits, example_inputs, make_optimizer

log = logging.getLogger(__name__)

__all__ = ["RunPlan", "make_plan", "resolve_run_config"]


@dataclass(frozen=True)
class RunPlan:
    """Everything checked before anything is written: data, model, optimizer, mesh.

    Attributes:
        cfg: The settings with every ``"auto"`` resolved (as ``config.json`` holds them).
        out_dir: The run folder.
        data_path: The table, absolute (None: the bundled data).
        train: The training windows.
        val: The validation windows.
        info: What ``config.json`` holds (settings, data path, fitted scalers).
        per_epoch: Optimiser steps per epoch.
        total_steps: Steps of the whole run (``epochs * per_epoch``).
        model: The Flax module, built from ``cfg.model``.
        optimizer: The optax optimizer with its schedule.
        mesh: The device mesh the batch is sharded over.
        abstract: The train state's shapes (nothing allocated).
        freq: The data's time step (kept with each checkpoint).
        example: Zero model inputs of a Forecaster (None: an LSTMModel's x).
    """

    cfg: RunConfig
    out_dir: Path
    data_path: Path | None
    train: WindowSet
    val: WindowSet
    info: RunInfo
    per_epoch: int
    total_steps: int
    model: Any
    optimizer: Any
    mesh: Any
    abstract: TrainState
    freq: str | None = None  # the data's time step (kept with each checkpoint)
    example: Any = None  # zero model inputs of a Forecaster (None: an LSTMModel's x)


def make_plan(cfg: RunConfig, out_dir: Path, resume: bool, data_path: str | Path | None) -> RunPlan:
    """Check the settings, the run folder and the data; build the model; allocate nothing.

    The one place a training run resolves its ``"auto"`` settings (the season and window from
    the time step, the budget from the training windows) and checks them with the data, so
    a mistake is one error before anything is written. With ``resume`` the resolved settings
    and the data must match the saved run's.
    """
    if not isinstance(cfg, RunConfig):
        raise TypeError(f"run_cfg must be a RunConfig, got {type(cfg).__name__}")
    cfg.validate()
    baselines.require(cfg.train.baselines)  # the report needs them: refuse before training
    saved = read_run_info(out_dir) if resume else None
    differences: list[str] = []
    if saved is not None:
        newest = newest_saved_config(out_dir)
        if newest is not None:  # config.json must be what the checkpoints were trained with
            check_config_unchanged(out_dir, saved, newest[1], newest[0])
        if data_path is None:
            data_path = saved.data_path
        elif saved.data_path is None or Path(data_path).absolute() != saved.data_path:
            differences.append(f"data: {str(data_path)!r} != {str(saved.data_path)!r}")
    else:
        check_new_run_dir(out_dir)
    source = bundled_dataset_path() if data_path is None else Path(data_path)
    frame = read_table(source)
    n_columns = len(cfg.data.target) + len(cfg.data.features) + len(cfg.data.future_features)
    # before the series are allocated (rows may double where missing stamps are inserted);
    # the run's window, or the largest an "auto" one can become; an "auto" batch is at most 32
    window, exact = planned_window(cfg.data)
    batch = BASE_BATCH_SIZE if cfg.train.batch_size == AUTO else cfg.train.batch_size
    check_series_fit(len(frame), n_columns, len(cfg.data.target), window, batch, exact=exact)
    with memory_errors_as_data_errors(len(frame), n_columns):
        series = prepare_series(frame, cfg.data)
        del frame
        cfg = resolve_run_config(cfg, series.freq, None)
        splits, scaler = make_splits(series, cfg.data)
    mesh = make_mesh()
    windows = (len(splits.train), int(mesh.devices.size))
    given, cfg = cfg, resolve_run_config(cfg, series.freq, windows)
    tcfg = cfg.train
    if saved is not None:  # compared once "auto" is resolved, as config.json holds it
        differences = cfg.diff(saved.config) + differences
        if differences:
            raise ValueError(
                f"cannot resume {out_dir}: the settings differ from the saved run's "
                f"({'; '.join(differences)}); resume with the same settings or start a new run"
            )
    per_epoch = steps_per_epoch(len(splits.train), tcfg.batch_size)
    if per_epoch == 0:
        raise DataError(
            f"`batch_size` ({tcfg.batch_size}) is larger than the {len(splits.train)} training "
            "windows; lower it or use more data"
        )
    check_fits_float32(splits, scaler, source, series)  # before NaN at step 1 could say so
    static_scaler = splits.static_scaler
    if saved is not None and (
        saved.scaler.to_dict() != scaler.to_dict()
        or (saved.static_scaler is None) != (static_scaler is None)
        or (static_scaler is not None and saved.static_scaler.to_dict() != static_scaler.to_dict())
    ):
        raise ValueError(
            f"cannot resume {out_dir}: the data in {source} changed since the run started "
            "(its training rows give another scaler); start a new run"
        )
    check_batch_size(tcfg.batch_size, mesh)
    total_steps = tcfg.epochs * per_epoch
    if total_steps > np.iinfo(np.int32).max:  # TrainState.step is an int32
        raise ValueError(
            f"`epochs` ({tcfg.epochs}) x {per_epoch} steps per epoch = {total_steps} updates, "
            f"more than the step counter holds ({np.iinfo(np.int32).max}); lower `epochs`"
        )
    if tcfg.conformal and len(splits.val) == 0:
        raise DataError(
            f"conformal calibrates on the validation windows but {source} gives none; raise "
            "`val_fraction` or use more data"
        )
    train = splits.train
    # with known-future or static covariates a Forecaster, else LSTMModel as it always was
    n_future, n_static = covariate_sizes(cfg.data, scaler.columns)
    output_size = OutputHead.of(tcfg).output_size(train.horizon, train.n_targets)
    model = build_model(cfg.model, output_size, train.horizon, n_future, n_static)
    optimizer = make_optimizer(tcfg, total_steps)
    example = None
    if n_future or n_static:
        example = example_inputs(train.n_columns, train.horizon, n_future, n_static)
    abstract = abstract_state(model, optimizer, train.n_columns if example is None else example)
    local = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
    check_state_fits(abstract, local[0])  # before allocating (or swapping, or hanging)
    data_ref = None if data_path is None else Path(data_path).absolute()
    derived = [line.replace(" != 'auto'", "") for line in cfg.diff(given)]
    if derived:  # once everything is checked
        log.info("settings derived from the data: %s", "; ".join(derived))
    return RunPlan(
        cfg, out_dir, data_ref, train, splits.val, RunInfo(cfg, data_ref, scaler, static_scaler),
        per_epoch, total_steps, model, optimizer, mesh, abstract, series.freq, example,
    )  # fmt: skip


def resolve_run_config(
    cfg: RunConfig, freq: str | None, windows: tuple[int, int] | None
) -> RunConfig:
    """``cfg`` with its ``"auto"`` settings resolved: the data ones from the time step
    ``freq``; with ``windows = (training windows, devices)``, the training budget too."""
    data = resolve_data_config(cfg.data, freq)
    train = cfg.train if windows is None else resolve_train_config(cfg.train, *windows)
    if data is cfg.data and train is cfg.train:
        return cfg
    return RunConfig(data=data, model=cfg.model, train=train)
