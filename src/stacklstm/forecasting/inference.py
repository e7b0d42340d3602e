"""Inference from a run folder: load a single run or a seed ensemble, forecast windows.

:func:`load_run` loads either kind of folder: a single run as a :class:`TrainedRun`, a seed
ensemble (``ensemble=N``, see :mod:`stacklstm.forecasting.ensemble`) as an :class:`EnsembleRun`,
whose forecast is the median of its members'. Both offer ``forecast_quantiles``,
``forecasts`` and ``members``. :func:`stacklstm.forecasting.prediction.predict` (the ``stacklstm
predict`` command) builds on it.

Example:
    >>> run = load_run("runs/co2")  # doctest: +SKIP
    >>> windows = ...  # e.g. stacklstm.data.make_inference_windows(series, cfg, scaler)
    >>> forecast(run, windows).shape  # doctest: +SKIP
    (343, 1, 1)
    >>> a = Forecast(np.array([[[1.0]], [[5.0]]]))
    >>> b = Forecast(np.array([[[3.0]], [[4.0]]]))
    >>> median_forecast([a, b]).point[:, 0, 0]
    array([2. , 4.5])
"""

from __future__ import annotations

import dataclasses
import json
import logging
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import compile_cache
from ..config import RunConfig
from ..data import (
    Series,
    WindowSet,
    bundled_dataset_path,
    prepare_series,
    read_table,
)
from ..distributed import gather, make_mesh, replicated, shard_batch
from ..intervals import Forecast, to_forecast
from ..rundir.files import (
    BEST_DIR,
    CONFIG_FILE,
    MEMBERS_DIR,
    METRICS_FILE,
    SELECTION_DIR,
)
from ..rundir.info import (
    RunInfo,
    check_config_unchanged,
    read_metrics,
    read_run_info,
)
from ..train.checkpoint import RunCheckpoints, abstract_target
from ..train.memory import check_series_fit, memory_errors_as_data_errors
from ..train.plan import run_model
from ..train.step import (
    abstract_state,
    make_optimizer,
    make_predict_step,
    sync_every,
    window_batches,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TrainedRun:
    """A run folder loaded for inference.

    Attributes:
        run_dir: The run folder.
        info: Its ``config.json``.
        model: The ``LSTMModel``, or with covariates the ``Forecaster``.
        params: The restored parameters, replicated on ``mesh``.
        checkpoint: ``{"kind": "best" | "latest", "step": int}``: where ``params`` came from.
        mesh: The device mesh.
        freq: The time step of the data the run was trained on (``Series.freq``), or None
            (no regular time column, or a run from before checkpoints kept it).
    """

    run_dir: Path
    info: RunInfo
    model: Any
    params: Any
    checkpoint: dict[str, Any]
    mesh: Any
    freq: str | None = None  # the training data's time step (None: unknown or irregular)

    @property
    def batch_size(self) -> int:
        """The run's batch size rounded up to a multiple of the device count."""
        n = int(self.mesh.devices.size)
        return -(-self.info.config.train.batch_size // n) * n

    @property
    def members(self) -> tuple[()]:
        """A single run has no members (a seed ensemble's run has them)."""
        return ()

    def forecast_quantiles(self, windows: WindowSet, predict_step: Any = None) -> Forecast:
        """The forecasts of ``windows``: points and, for a quantile or distribution loss,
        uncalibrated quantiles, in original units (:func:`stacklstm.intervals.to_forecast`);
        the windows go in sharded batches and every process gets all rows."""
        if len(windows) == 0:
            raw = np.zeros((0, self.model.output_size), np.float32)
            return to_forecast(self.info.config.train, raw, windows)
        predict_step = predict_step or make_predict_step(self.model)
        outputs, counts, host = [], [], []
        every = sync_every(windows, self.batch_size)
        for batch, n_real in window_batches(windows, self.batch_size, targets=False):
            x = shard_batch(self.mesh, batch.x, whole=True)  # a ForecastInputs comes back as one
            outputs.append(predict_step(self.params, x if isinstance(batch.x, tuple) else x[0]))
            counts.append(n_real)
            if len(outputs) == every:  # every process gets all rows
                host.extend(gather(outputs))
                outputs = []
        host.extend(gather(outputs))
        raw = np.concatenate([out[:n] for out, n in zip(host, counts, strict=True)])
        return to_forecast(self.info.config.train, raw, windows)  # (n, output_size) -> Forecast

    def forecasts(
        self, windows: WindowSet, predict_step: Any = None
    ) -> tuple[Forecast, list[Forecast]]:
        """``(the run's forecast, each member's)``: for a single run, its forecast and ``[]``."""
        return self.forecast_quantiles(windows, predict_step), []


def member_dir(run_dir: str | Path, k: int) -> Path:
    """The run folder of member ``k`` of the ensemble in ``run_dir``."""
    return Path(run_dir) / MEMBERS_DIR / str(k)


def member_config(cfg: RunConfig, k: int) -> RunConfig:
    """The settings of member ``k``: ``cfg`` with ``seed + k``, ``ensemble=1`` and the naive
    baselines only (the ensemble's own report scores every baseline once).

    Example:
        >>> from stacklstm.config import TrainConfig
        >>> member_config(RunConfig(train=TrainConfig(seed=7, ensemble=3)), 2).train.seed
        9
    """
    train = dataclasses.replace(cfg.train, seed=cfg.train.seed + k, ensemble=1, baselines="naive")
    return dataclasses.replace(cfg, train=train)


def median_forecast(forecasts: Sequence[Forecast]) -> Forecast:
    """The median over members of the point forecasts and of the quantiles, level by level.

    Args:
        forecasts: The members' forecasts of the same windows: points ``(n, horizon,
            n_targets)``, quantiles ``(n, horizon, n_targets, Q)`` at the same levels.

    Returns:
        ``numpy.median`` over the member axis of each (for an even count, the mean of the two
        middle values).
    """
    if not forecasts:
        raise ValueError("an ensemble forecast needs at least one member's forecast")
    levels = forecasts[0].levels
    if any(f.levels != levels for f in forecasts):
        raise ValueError(f"the members' quantile levels differ: {[f.levels for f in forecasts]}")
    point = np.median(np.stack([f.point for f in forecasts]), axis=0)
    if forecasts[0].quantiles is None:
        return Forecast(point)
    quantiles = np.median(np.stack([f.quantiles for f in forecasts]), axis=0)
    return Forecast(point, quantiles, levels)


@dataclass(frozen=True)
class EnsembleRun:
    """A seed ensemble's run folder loaded for inference (see :func:`load_run`).

    Attributes:
        run_dir: The ensemble's folder.
        info: Its ``config.json`` (``info.config.train.ensemble`` members).
        members: The members, loaded as :class:`TrainedRun`.
    """

    run_dir: Path
    info: RunInfo
    members: tuple[TrainedRun, ...]

    @property
    def checkpoint(self) -> dict[str, Any]:
        """``{"members": [each member's checkpoint]}``."""
        return {"members": [m.checkpoint for m in self.members]}

    @property
    def freq(self) -> str | None:
        """The time step of the members' training data (see :attr:`TrainedRun.freq`)."""
        return self.members[0].freq

    @property
    def model(self) -> Any:
        """The members' module (the same for every member)."""
        return self.members[0].model

    @property
    def mesh(self) -> Any:
        """The device mesh."""
        return self.members[0].mesh

    @property
    def batch_size(self) -> int:
        """The members' batch size (see :attr:`TrainedRun.batch_size`)."""
        return self.members[0].batch_size

    def member_forecasts(self, windows: WindowSet, predict_step: Any = None) -> list[Forecast]:
        """Each member's forecasts of ``windows`` (uncalibrated, original units)."""
        return [m.forecast_quantiles(windows, predict_step) for m in self.members]

    def forecasts(
        self, windows: WindowSet, predict_step: Any = None
    ) -> tuple[Forecast, list[Forecast]]:
        """``(the median forecast, each member's)`` of ``windows``, the members forecast once."""
        members = self.member_forecasts(windows, predict_step)
        return median_forecast(members), members

    def forecast_quantiles(self, windows: WindowSet, predict_step: Any = None) -> Forecast:
        """The median of the members' forecasts of ``windows`` (:func:`median_forecast`)."""
        return median_forecast(self.member_forecasts(windows, predict_step))


def load_run(run_dir: str | Path) -> TrainedRun | EnsembleRun:
    """Load a run folder for inference: a single run as a :class:`TrainedRun`, a seed
    ensemble's folder as an :class:`EnsembleRun` with every member.

    Each model is restored from its best checkpoint (the latest if no best checkpoint exists
    yet, with a warning).

    Raises:
        ValueError: Not a run folder, another layout version, no checkpoint, or an ensemble
            member missing or not matching the ensemble's settings or scaler.
    """
    compile_cache.enable()  # a forecast in a new process loads its compiled steps
    run_dir = Path(run_dir)
    info = read_run_info(run_dir)
    n = info.config.train.ensemble
    if n == 1:
        return _restore(run_dir, info)
    members = []
    for k in range(n):
        folder = member_dir(run_dir, k)
        if not (folder / CONFIG_FILE).is_file():
            raise ValueError(
                f"{run_dir} is an ensemble of {n} members but member {k} ({folder}) has not "
                "been trained yet; continue the training with `resume=True`"
            )
        member_info = read_run_info(folder)
        differences = member_info.config.diff(member_config(info.config, k))
        if differences or member_info.scaler.to_dict() != info.scaler.to_dict():
            shown = "; ".join(differences) or "the fitted scaler"
            raise ValueError(
                f"member {k} ({folder}) does not belong to the ensemble in {run_dir}: {shown}"
            )
        members.append(_restore(folder, member_info))
    return EnsembleRun(run_dir, info, tuple(members))


def load_selection(run_dir: str | Path) -> TrainedRun | EnsembleRun:
    """The selection run(s) of the retrained run in ``run_dir`` (``retrain="on"``,
    :mod:`stacklstm.run.retrain`), which did not train on the validation rows: a single
    run's ``selection/``, or for a seed ensemble the median of its members' ``selection/``
    runs (an :class:`EnsembleRun` whose ``info`` is member 0's selection's: the scaler of the
    training rows).

    Raises:
        ValueError: A selection run missing or without a checkpoint.
    """
    run_dir = Path(run_dir)
    n = read_run_info(run_dir).config.train.ensemble
    if n == 1:
        return load_run(run_dir / SELECTION_DIR)
    members = tuple(load_run(member_dir(run_dir, k) / SELECTION_DIR) for k in range(n))
    return EnsembleRun(run_dir, members[0].info, members)


def _restore(run_dir: Path, info: RunInfo) -> TrainedRun:
    """The single run in ``run_dir`` (whose ``config.json`` is ``info``), its parameters
    restored from the best checkpoint, else the latest."""
    cfg = info.config
    model, example = run_model(cfg, info.scaler.columns)
    optimizer = make_optimizer(cfg.train, total_steps=1)  # the state's structure only
    n_columns = len(info.scaler.columns)
    abstract = abstract_state(model, optimizer, n_columns if example is None else example)
    mesh = make_mesh()
    target = abstract_target(abstract, replicated(mesh))
    with RunCheckpoints(run_dir, read_only=True) as ckpts:
        kind = "best" if ckpts.latest_step("best") is not None else "latest"
        newest = ckpts.latest_step(kind)
        if newest is None:
            raise ValueError(f"{run_dir} holds no checkpoint")
        # an edited config.json: said before restoring
        check_config_unchanged(run_dir, info, ckpts.saved_config(kind, newest), newest)
        # the newest complete one now, even while a `train` of this run writes newer ones
        step, state, _, progress = ckpts.restore_newest(kind, target)
        if kind == "latest":  # no epoch has ended yet, or the folder is incomplete
            _check_no_epoch_lost(run_dir, step, progress)
            log.warning(
                "%s has no best checkpoint yet (no epoch has ended); forecasting with the "
                "latest one, step %d%s",
                run_dir,
                step,
                _step_zero(info) if step == 0 else "",
            )
        kept = ckpts.saved_config(kind, step)
        check_config_unchanged(run_dir, info, kept, step)
    freq = kept.get("freq") if isinstance(kept, dict) else None
    return TrainedRun(run_dir, info, model, state.params, {"kind": kind, "step": step}, mesh, freq)


def _check_no_epoch_lost(run_dir: Path, step: int, progress: Any) -> None:
    """Refuse a run without a best checkpoint whose records say an epoch ended: its newest
    checkpoint names a best step, or ``metrics.jsonl`` an epoch ended after ``step`` (a
    partial copy of the folder, say); forecasting from ``step`` would be an older model."""
    records = [json.loads(line) for line in read_metrics(run_dir / METRICS_FILE, sys.maxsize)]
    ended = [r.get("step") for r in records if isinstance(r, dict) and r.get("kind") == "epoch"]
    best_step = getattr(progress, "best_step", None)
    if best_step is None and not any(isinstance(s, int) and s > step for s in ended):
        return
    raise ValueError(
        f"{run_dir} is incomplete: {METRICS_FILE} or its checkpoints record a finished epoch "
        f"(at step {best_step if best_step is not None else max(ended)}), but "
        f"{BEST_DIR}/ is missing and the newest checkpoint is step {step}; copy the whole "
        "run folder (or resume the run to train it again)"
    )


def forecast(run: TrainedRun | EnsembleRun, windows: WindowSet, predict_step=None) -> np.ndarray:
    """Point forecasts ``(n, horizon, n_targets)`` of ``windows`` in original units (float64)."""
    return forecast_quantiles(run, windows, predict_step).point


def forecast_quantiles(
    run: TrainedRun | EnsembleRun, windows: WindowSet, predict_step=None
) -> Forecast:
    """Point forecasts and, for a quantile or distribution loss, uncalibrated quantiles of
    ``windows`` in original units (see :func:`stacklstm.intervals.to_forecast`); for a seed
    ensemble (:class:`~stacklstm.forecasting.ensemble.EnsembleRun`), the median of its members'.
    The same as ``run.forecast_quantiles(windows, predict_step)``."""
    return run.forecast_quantiles(windows, predict_step)


def table_path(info: RunInfo, data_path: str | Path | None) -> Path:
    """The table :func:`load_series` reads: ``data_path``, else the run's own table, else the
    bundled CO2 data."""
    source = Path(data_path) if data_path is not None else info.data_path
    return bundled_dataset_path() if source is None else source


def load_series(
    info: RunInfo, data_path: str | Path | None, *, forecast_only: bool = False
) -> tuple[Path, Series]:
    """The run's table (or ``data_path``) prepared with the run's data settings;
    ``forecast_only``: one input window of rows is enough (see ``prepare_series``).

    Raises:
        DataError: Besides the table's own problems, series too large for the memory
            available (checked before they are allocated).
    """
    source = table_path(info, data_path)
    frame = read_table(source)
    cfg = info.config
    n_columns = len(info.scaler.columns)
    check_series_fit(
        len(frame), n_columns, len(cfg.data.target), cfg.data.window, cfg.train.batch_size
    )
    with memory_errors_as_data_errors(len(frame), n_columns):
        return source, prepare_series(frame, cfg.data, forecast_only=forecast_only)


def _step_zero(info: Any) -> str:
    """What a run's checkpoint of step 0 holds, for a message."""
    if info.config.train.init == "pretrained":
        return " (the pretrained weights, not fine-tuned yet)"
    return " (the untrained initial model)"
