"""The plan of a training run: every setting checked and resolved, the data read and split,
the model built and its state's shapes known, before anything is written or allocated.

:func:`make_plan` is phase 1 of :func:`~stacklstm.run.fit`; a seed ensemble
(:mod:`stacklstm.run.ensemble_fit`) makes one plan for all its members.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jax
import numpy as np

from .. import baselines
from ..config import RunConfig
from ..data import (
    DataError,
    WindowSet,
    bundled_dataset_path,
    covariate_sizes,
    make_splits,
    read_table,
    steps_per_epoch,
)
from ..distributed import check_batch_size, make_mesh
from ..forecaster import build_model
from ..intervals import OutputHead
from ..rundir.folder import (
    check_new_run_dir,
)
from ..rundir.info import (
    RunInfo,
    check_config_unchanged,
    newest_saved_config,
    read_run_info,
    run_data_path,
)
from .memory import check_fits_float32, check_series_fit, memory_errors_as_data_errors
from .resolve import (
    planned_batch,
    planned_window,
    prepare_resolved,
    resolve_splits,
    saved_init,
)
from .step import TrainState, abstract_state, check_state_fits, example_inputs, make_optimizer

log = logging.getLogger(__name__)

__all__ = [
    "RETRAINED",
    "RunPlan",
    "check_settings",
    "make_plan",
    "refuse_resume",
    "retrained_data",
    "run_model",
]


@dataclass(frozen=True)
class RunPlan:
    """Everything checked before anything is written: data, model, optimizer, mesh.

    Attributes:
        cfg: The settings with every ``"auto"`` resolved (as ``config.json`` holds them).
        out_dir: The run folder.
        data_path: The table, absolute (None: the bundled data); ``config.json`` stores it
            relative to the run folder when it lies inside it
            (:func:`~stacklstm.rundir.info.run_data_path`).
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
        train_weight: ``(len(train),)`` float32 loss weight of each training window
            (``loss_weight="mase"``), or None: every window weighs 1.
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
    test: WindowSet | None = None  # the test windows (the report's)
    # a retrained run (:mod:`stacklstm.run.retrain`): the epochs it trains on the training
    # and validation windows together, with no validation (``cfg`` says so; ``info.config``
    # is as saved)
    retrain_epochs: int | None = None
    train_weight: np.ndarray | None = None


def make_plan(
    cfg: RunConfig,
    out_dir: Path,
    resume: bool,
    data_path: str | Path | None,
    *,
    retrain_epochs: int | None = None,
    keep: tuple[str, ...] = (),
) -> RunPlan:
    """Check the settings, the run folder and the data; build the model; allocate nothing.

    A training run resolves its ``"auto"`` settings here, through :mod:`.resolve` (the
    season and window from the time step, the budget from the training windows, ``retrain``
    from the splits), and checks them with the data, so a mistake is one error before
    anything is written. With ``resume`` the resolved settings and the data must match the
    saved run's.

    With ``retrain_epochs`` (the second run of ``retrain="all"`` or ``"on"``,
    :mod:`stacklstm.run.retrain`) the plan trains that many epochs on the windows of every
    row (``"all"``) or of the training and validation rows (``"on"``), scaled and
    deseasonalised on those rows, with no early stopping; ``plan.cfg`` says so, ``plan.info``
    keeps the settings as given (and that scaler).
    ``keep``: entries a new run folder may already hold (the retrained run's
    ``selection/``).
    """
    check_settings(cfg, "run_cfg")
    saved, data_path, differences = _check_folder(out_dir, resume, data_path, keep)
    cfg = saved_init(cfg, None if saved is None else saved.config)
    source = bundled_dataset_path() if data_path is None else Path(data_path)
    series, cfg, splits, scaler = _read_and_split(cfg, source)
    mesh = make_mesh()
    given, cfg = cfg, resolve_splits(cfg, splits, int(mesh.devices.size), source)
    if saved is not None:  # compared once "auto" is resolved, as config.json holds it
        refuse_resume(out_dir, cfg.diff(saved.config) + differences, "run")
    info_cfg, train, static_scaler = cfg, splits.train, splits.static_scaler
    if cfg.train.retrain in RETRAINED:  # scaled on every row it trains on: all of them, or
        # every row before the test; the data section alone (a run-level check, of
        # conformal, wants validation rows)
        merged = retrained_data(cfg)
        # the series it leaves out, the split left out too, and named
        n_columns = len(cfg.data.target) + len(cfg.data.features) + len(cfg.data.future_features)
        with memory_errors_as_data_errors(len(series), n_columns), _quiet("stacklstm.data"):
            every, scaler = make_splits(series, merged)
        static_scaler = every.static_scaler
        if retrain_epochs is not None:  # and trained on them
            train = every.train
            # 0: a fine-tune whose pretrained weights validated best keeps them (the
            # settings stay valid with one epoch, which the run then never starts)
            cfg = cfg.replace({"train": {"epochs": max(retrain_epochs, 1), "patience": 0}})
    tcfg = cfg.train
    per_epoch = _steps_per_epoch(tcfg, len(train))
    check_fits_float32(splits, scaler, source, series)  # before NaN at step 1 could say so
    if saved is not None:
        _check_same_scalers(saved, scaler, static_scaler, out_dir, source)
    total_steps = _total_steps(tcfg, per_epoch, mesh)
    if tcfg.conformal and len(splits.val) == 0:
        raise DataError(
            f"conformal calibrates on the validation windows but {source} gives none; raise "
            "`val_fraction` or use more data"
        )
    model, example = run_model(cfg, scaler.columns)
    power = 2.0 if tcfg.loss == "mse" else 1.0  # the loss in MASE's units: squared or not
    weight = train.mase_weights(int(cfg.data.season), power) if tcfg.loss_weight == "mase" else None
    optimizer = make_optimizer(tcfg, total_steps)
    abstract = abstract_state(model, optimizer, train.n_columns if example is None else example)
    local = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
    check_state_fits(abstract, local[0])  # before allocating (or swapping, or hanging)
    # stored relative to the run folder when the table lies inside it (a movable folder)
    data_ref, relative = run_data_path(out_dir, data_path)
    derived = [line.replace(" != 'auto'", "") for line in info_cfg.diff(given)]
    if derived:  # once everything is checked
        log.info("settings derived from the data: %s", "; ".join(derived))
    info = RunInfo(info_cfg, data_ref, scaler, static_scaler, relative)
    return RunPlan(
        cfg=cfg,
        out_dir=out_dir,
        data_path=data_ref,
        train=train,
        val=splits.val,
        info=info,
        per_epoch=per_epoch,
        total_steps=total_steps,
        model=model,
        optimizer=optimizer,
        mesh=mesh,
        abstract=abstract,
        freq=series.freq,
        example=example,
        test=splits.test,
        retrain_epochs=retrain_epochs,
        train_weight=weight,
    )


def _check_folder(
    out_dir: Path, resume: bool, data_path: str | Path | None, keep: tuple[str, ...]
) -> tuple[RunInfo | None, str | Path | None, list[str]]:
    """``(saved run info or None, the table, differences from the saved run)``: a resumed
    run's folder must hold what its checkpoints were trained with, and its table defaults to
    the saved one; a new run's folder must be free (or hold just its own table)."""
    if not resume:
        check_new_run_dir(out_dir, data_path, keep=keep)
        return None, data_path, []
    saved = read_run_info(out_dir)
    differences: list[str] = []
    newest = newest_saved_config(out_dir)
    if newest is not None:  # config.json must be what the checkpoints were trained with
        check_config_unchanged(out_dir, saved, newest[1], newest[0])
    if data_path is None:
        data_path = saved.data_path
    elif (
        saved.data_path is None
        or run_data_path(out_dir, data_path)[0] != run_data_path(out_dir, saved.data_path)[0]
    ):
        differences.append(f"data: {str(data_path)!r} != {str(saved.data_path)!r}")
    return saved, data_path, differences


def _read_and_split(cfg: RunConfig, source: Path) -> tuple[Any, RunConfig, Any, Any]:
    """``(series, cfg with its data settings resolved, splits, scaler)`` of the table
    ``source``, its size checked against memory before the series are allocated."""
    frame = read_table(source)
    n_columns = len(cfg.data.target) + len(cfg.data.features) + len(cfg.data.future_features)
    # before the series are allocated (rows may double where missing stamps are inserted);
    # the run's window and batch, or the largest "auto" ones can become
    window, exact = planned_window(cfg.data)
    batch = planned_batch(cfg.train)
    check_series_fit(len(frame), n_columns, len(cfg.data.target), window, batch, exact=exact)
    with memory_errors_as_data_errors(len(frame), n_columns):
        series, cfg = prepare_resolved(frame, cfg)
        del frame
        try:
            splits, scaler = make_splits(series, cfg.data)
        except DataError as err:
            if cfg.train.init != "pretrained":
                raise
            raise DataError(
                f"{err}; the pretrained weights forecast it without fine-tuning: "
                "`stacklstm forecast` or LSTMForecaster.pretrained()"
            ) from None
    return series, cfg, splits, scaler


def _steps_per_epoch(tcfg: Any, n_train: int) -> int:
    """Optimiser steps per epoch over ``n_train`` training windows.

    Raises:
        DataError: The batch is larger than the training windows.
    """
    per_epoch = steps_per_epoch(n_train, tcfg.batch_size)
    if per_epoch == 0:
        raise DataError(
            f"`batch_size` ({tcfg.batch_size}) is larger than the {n_train} training "
            "windows; lower it or use more data"
        )
    return per_epoch


def _total_steps(tcfg: Any, per_epoch: int, mesh: Any) -> int:
    """The run's optimiser steps, ``epochs * per_epoch``.

    Raises:
        ValueError: The batch does not split over the devices of ``mesh``, or the run has
            more steps than the step counter holds.
    """
    check_batch_size(tcfg.batch_size, mesh)
    total_steps = tcfg.epochs * per_epoch
    if total_steps > np.iinfo(np.int32).max:  # TrainState.step is an int32
        raise ValueError(
            f"`epochs` ({tcfg.epochs}) x {per_epoch} steps per epoch = {total_steps} updates, "
            f"more than the step counter holds ({np.iinfo(np.int32).max}); lower `epochs`"
        )
    return total_steps


def _check_same_scalers(
    saved: RunInfo, scaler: Any, static_scaler: Any, out_dir: Path, source: Path
) -> None:
    """Refuse to resume when the training rows give other scalers than the saved run's."""
    if (
        saved.scaler.to_dict() != scaler.to_dict()
        or (saved.static_scaler is None) != (static_scaler is None)
        or (static_scaler is not None and saved.static_scaler.to_dict() != static_scaler.to_dict())
    ):
        raise ValueError(
            f"cannot resume {out_dir}: the data in {source} changed since the run started "
            "(its training rows give another scaler); start a new run"
        )


@contextlib.contextmanager
def _quiet(name: str) -> Iterator[None]:
    """The logger ``name`` (and those below it) says only errors within the block."""
    logger = logging.getLogger(name)
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        yield
    finally:
        logger.setLevel(level)


#: The ``retrain`` settings that train a second run after the selection
#: (:mod:`stacklstm.run.retrain`).
RETRAINED = ("all", "on")


def retrained_data(cfg: RunConfig) -> Any:
    """The data settings of the second run of ``retrain="all"`` (no validation and no test
    rows: it trains on every row) or ``"on"`` (no validation rows: the test rows stay out)."""
    rows: dict[str, Any] = {"val_fraction": 0.0, "val_size": None}
    if cfg.train.retrain == "all":
        rows.update(test_fraction=0.0, test_size=None)
    return dataclasses.replace(cfg.data, **rows)


def run_model(cfg: RunConfig, columns: tuple[str, ...]) -> tuple[Any, Any]:
    """``(model, example)``: the module a run on ``cfg`` trains, reading the scaler's
    ``columns`` (targets first), and zero model inputs of it where it takes covariates (None:
    its input is ``x`` alone, ``len(columns)`` features). With known-future or static
    covariates a ``Forecaster``, with ``model.hybrid`` an ``ESHybrid``, else ``LSTMModel``
    as it always was. ``fit`` builds it here, and ``load_run`` to restore it."""
    data, n_targets = cfg.data, len(cfg.data.target)
    n_future, n_static = covariate_sizes(data, columns)
    output_size = OutputHead.of(cfg.train).output_size(data.horizon, n_targets)
    model = build_model(
        cfg.model,
        output_size,
        data.horizon,
        n_future,
        n_static,
        season=int(data.season),
        n_targets=n_targets,
    )
    if not (n_future or n_static):
        return model, None
    return model, example_inputs(len(columns), data.horizon, n_future, n_static)


def check_settings(cfg: RunConfig, name: str, *, require_baselines: bool = True) -> None:
    """The checks every plan starts with: ``cfg`` (the argument ``name``) is a valid
    RunConfig, and the baselines its report scores are installed (``require_baselines``).

    Raises:
        TypeError: ``cfg`` is not a RunConfig.
        SettingError: A bad setting, or ``baselines="all"`` without statsforecast.
    """
    if not isinstance(cfg, RunConfig):
        raise TypeError(f"{name} must be a RunConfig, got {type(cfg).__name__}")
    cfg.validate()
    if require_baselines:  # the report needs them: refuse before training
        baselines.require(cfg.train.baselines)


def refuse_resume(out_dir: Path, differences: list[str], what: str) -> None:
    """Refuse to resume the ``what`` (``"run"``, ``"backtest"``) in ``out_dir`` when the
    settings differ from its saved ones (``differences``: one ``"key: given != saved"``
    each; none: nothing to refuse).

    Raises:
        ValueError: ``differences`` is not empty.
    """
    if differences:
        raise ValueError(
            f"cannot resume {out_dir}: the settings differ from the saved {what}'s "
            f"({'; '.join(differences)}); resume with the same settings or start a new {what}"
        )
