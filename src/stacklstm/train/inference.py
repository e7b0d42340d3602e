"""Inference from a run folder: restore the parameters, read its table, forecast windows.

:func:`stacklstm.train.prediction.predict` (the ``stacklstm predict`` command) builds on it.

Example:
    >>> run = load_run("runs/co2")  # doctest: +SKIP
    >>> windows = ...  # e.g. stacklstm.data.make_inference_windows(series, cfg, scaler)
    >>> forecast(run, windows).shape  # doctest: +SKIP
    (343, 1, 1)
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..data import (
    Series,
    WindowSet,
    bundled_dataset_path,
    covariate_sizes,
    prepare_series,
    read_table,
)
from ..distributed import gather, make_mesh, replicated, shard_batch
from ..forecaster import build_model
from ..intervals import Forecast, OutputHead, to_forecast
from .checkpoint import RunCheckpoints, abstract_target
from .memory import check_series_fit, memory_errors_as_data_errors
from .rundir import RunInfo, check_config_unchanged, read_run_info
from .step import (
    Batch,
    abstract_state,
    example_inputs,
    make_optimizer,
    make_predict_step,
    padded_batches,
)

if TYPE_CHECKING:
    from .ensemble import EnsembleRun

log = logging.getLogger(__name__)

#: Bytes of gathered batches that may wait on the device (dispatched, not yet run) before
#: the host waits for them: JAX dispatches ahead, and each waiting batch holds its inputs.
QUEUE_BYTES = 32 * 2**20


def sync_every(windows: WindowSet, batch_size: int) -> int:
    """Batches to dispatch between two host syncs: as many as :data:`QUEUE_BYTES` of inputs
    hold (1 to 256), so waiting batches stay bounded whatever the window."""
    batch_bytes = 4 * batch_size * windows.window * windows.n_columns  # float32 inputs
    return max(1, min(256, QUEUE_BYTES // max(batch_bytes, 1)))


def window_batches(
    windows: WindowSet, batch_size: int, *, targets: bool = True
) -> Iterator[tuple[Batch, int]]:
    """In-order batches of exactly ``batch_size`` windows, each gathered when it is reached
    (:meth:`~stacklstm.data.WindowSet.gather`), the last padded with zero weight.

    The same batches as :func:`~stacklstm.train.step.padded_batches` over ``windows.x`` and
    ``windows.y``, without ever holding every window. ``targets=False``: ``y`` is zeros.

    Yields:
        ``(batch, n_real)``: the batch and how many of its rows are real windows.
    """
    for rows in windows.chunks(batch_size):
        x, y = windows.gather(rows, targets=targets)
        yield from padded_batches(x, y, batch_size)


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


def load_run(run_dir: str | Path) -> TrainedRun:
    """Restore the best parameters of a run (the latest if no best checkpoint exists yet).

    Raises:
        ValueError: Not a run folder, another layout version, no checkpoint, or a seed
            ensemble's folder (see :func:`stacklstm.train.ensemble.load_model`).
    """
    run_dir = Path(run_dir)
    info = read_run_info(run_dir)
    cfg = info.config
    if cfg.train.ensemble > 1:
        raise ValueError(
            f"{run_dir} is a seed ensemble of {cfg.train.ensemble} models (forecasting with "
            "their median), not one model: load it with stacklstm.train.load_model, or one "
            f"member with load_run({str(run_dir / 'members' / '0')!r})"
        )
    h, n_columns = cfg.data.horizon, len(info.scaler.columns)
    n_future, n_static = covariate_sizes(cfg.data, info.scaler.columns)
    output_size = OutputHead.of(cfg.train).output_size(h, len(cfg.data.target))
    model = build_model(cfg.model, output_size, h, n_future, n_static)
    optimizer = make_optimizer(cfg.train, total_steps=1)  # the state's structure only
    inputs = example_inputs(n_columns, h, n_future, n_static) if n_future or n_static else None
    abstract = abstract_state(model, optimizer, n_columns if inputs is None else inputs)
    mesh = make_mesh()
    target = abstract_target(abstract, replicated(mesh))
    with RunCheckpoints(run_dir, read_only=True) as ckpts:
        kind = "best" if ckpts.latest_step("best") is not None else "latest"
        if ckpts.latest_step(kind) is None:
            raise ValueError(f"{run_dir} holds no checkpoint")
        # the newest complete one now, even while a `train` of this run writes newer ones
        step, state, _, _ = ckpts.restore_newest(kind, target)
        if kind == "latest":  # no epoch has ended yet
            log.warning(
                "%s has no best checkpoint yet (no epoch has ended); forecasting with the "
                "latest one, step %d%s", run_dir, step,
                " (the untrained initial model)" if step == 0 else "",
            )  # fmt: skip
        kept = ckpts.saved_config(kind, step)
        check_config_unchanged(run_dir, info, kept, step)
    freq = kept.get("freq") if isinstance(kept, dict) else None
    return TrainedRun(run_dir, info, model, state.params, {"kind": kind, "step": step}, mesh, freq)


def forecast(run: TrainedRun | EnsembleRun, windows: WindowSet, predict_step=None) -> np.ndarray:
    """Point forecasts ``(n, horizon, n_targets)`` of ``windows`` in original units (float64)."""
    return forecast_quantiles(run, windows, predict_step).point


def forecast_quantiles(
    run: TrainedRun | EnsembleRun, windows: WindowSet, predict_step=None
) -> Forecast:
    """Point forecasts and, for a quantile or distribution loss, uncalibrated quantiles of
    ``windows`` in original units (see :func:`stacklstm.intervals.to_forecast`); for a seed
    ensemble (:class:`~stacklstm.train.ensemble.EnsembleRun`), the median of its members'.
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
    check_series_fit(len(frame), n_columns, len(cfg.data.target),
                     cfg.data.window, cfg.train.batch_size)  # fmt: skip
    with memory_errors_as_data_errors(len(frame), n_columns):
        return source, prepare_series(frame, cfg.data, forecast_only=forecast_only)
