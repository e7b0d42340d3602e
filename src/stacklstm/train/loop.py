"""``fit``: the one training loop. The CLI, the examples and the tests all call it.

It reads as a list of phases: prepare (check everything, before writing anything), open the
run (a new run folder, or the one to resume), the step loop (shuffled batches, NaN guard,
log lines, checkpoints), the end of each epoch (evaluation, early stopping, callbacks), and
finish (the report).

Example:
    >>> import tempfile
    >>> from stacklstm.config import DataConfig, ModelConfig, RunConfig, TrainConfig
    >>> cfg = RunConfig(DataConfig(window=8), ModelConfig(lstm_hidden_size=8, num_lstm_layers=1),
    ...                 TrainConfig(epochs=1))
    >>> result = fit(cfg, tempfile.mkdtemp() + "/run", quiet=True)  # doctest: +SKIP
    >>> print(result.report.table)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import copy
import json
import logging
import math
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

import jax
import jax.numpy as jnp
import numpy as np

from .. import kernels
from ..config import RunConfig
from ..data import (
    WindowSet,
    iterate_batches,
    process_slice,
)
from ..distributed import (
    host_values,
    is_primary,
    replicate,
    replicated,
    shard_batch,
    sync,
)
from ..signals import check as check_signals
from ..signals import test_hook
from .checkpoint import RunCheckpoints, abstract_target
from .ensemble_fit import fit_ensemble
from .inference import sync_every, window_batches
from .lock import RunLock
from .plan import RunPlan, make_plan
from .progress import Progress
from .report import Report, evaluate_run
from .results import FitResult
from .rundir import (
    METRICS_FILE,
    atomic_write_text,
    check_config_unchanged,
    creating_run_dir,
    read_metrics,
    read_run_info,
    run_copy,
    write_run_info,
)
from .step import (
    Batch,
    StepMetrics,
    TrainState,
    init_state,
    make_eval_step,
    make_schedule,
    make_train_step,
)

log = logging.getLogger(__name__)


class NonFiniteError(RuntimeError):
    """The training loss or gradients became NaN/Inf (and ``skip_nonfinite`` is off)."""


@dataclass(frozen=True)
class EpochEnd:
    """What an epoch callback is told at the end of each epoch.

    Attributes:
        epoch: 1-based epoch that just ended.
        step: Updates done in total.
        train_loss: Mean training loss of the epoch (None if every update was skipped).
        val_loss: Validation loss (None without validation windows).
        best_val_loss: Best validation loss so far, this epoch included.
        improved: Whether this epoch gave the best validation loss so far.
    """

    epoch: int
    step: int
    train_loss: float | None
    val_loss: float | None
    best_val_loss: float | None
    improved: bool


#: ``callback(EpochEnd) -> bool | None``: True stops training after this epoch (the run is
#: then finished, with ``stop_reason="callback"``, and gets its report).
EpochCallback = Callable[[EpochEnd], bool | None]


def evaluate_loss(eval_step, params: Any, windows: WindowSet, batch_size: int, mesh) -> float:
    """Mean loss over all ``windows`` (padding masked out), gathered a batch at a time.

    Every process passes all ``windows``; the result is the same on every process. The
    host syncs every few batches (:func:`~stacklstm.train.inference.sync_every`, so that
    the batches waiting on the device stay bounded), and sums on the host at the end.
    """
    host, sums = [], []
    every = sync_every(windows, batch_size)
    for batch, _ in window_batches(windows, batch_size):
        sums.append(eval_step(params, shard_batch(mesh, batch, whole=True)))
        if len(sums) == every:
            host.extend(host_values(sums))
            sums = []
    host.extend(host_values(sums))
    return math.fsum(float(s) for s, _ in host) / math.fsum(float(w) for _, w in host)


# --------------------------------------------------------------------------- 1. prepare


# --------------------------------------------------------------------------- 2. open the run


@dataclass
class _Opened:
    ckpts: RunCheckpoints
    state: TrainState
    dropout_key: jax.Array
    progress: Progress
    lock: RunLock | None = None  # held until `fit` returns (process 0 only)


def _open_new(plan: RunPlan) -> _Opened:
    """Create the run folder: config first, then a step-0 checkpoint (so resume always works).

    If any of it fails (a full disk?), no folder is left behind.
    """
    init_key, dropout_key = jax.random.split(jax.random.key(plan.cfg.train.seed))
    with creating_run_dir(plan.out_dir, writer=is_primary()) as lock:
        if is_primary():  # the only writer of everything but checkpoints
            write_run_info(plan.out_dir, plan.info)
            (plan.out_dir / METRICS_FILE).touch()
        sync("stacklstm: run folder created")
        # all processes: Orbax saves collectively; each checkpoint keeps config.json's content
        ckpts = RunCheckpoints(plan.out_dir, config=run_copy(plan.info, plan.freq))
        # parameter shapes depend on the features (and the covariates' sizes) only
        example_x = plan.example
        if example_x is None:
            example_x = plan.train.gather(np.arange(1), targets=False)[0][:, :1]
        state = init_state(plan.model, plan.optimizer, init_key, example_x)
        opened = _Opened(
            ckpts, replicate(state, plan.mesh), replicate(dropout_key, plan.mesh), Progress()
        )
        ckpts.save("latest", 0, opened.state, opened.dropout_key, opened.progress)
    opened.lock = lock
    ids = plan.train.ids
    log.info(
        "run folder %s: %d training windows%s, %d steps per epoch, %d validation windows",
        plan.out_dir, len(plan.train), "" if ids is None else f" of {len(ids)} series",
        plan.per_epoch, len(plan.val),
    )  # fmt: skip
    return opened


def _open_resumed(plan: RunPlan) -> _Opened:
    """Lock the run, restore the newest intact checkpoint, drop the metrics lines after it."""
    lock = RunLock.acquire(plan.out_dir) if is_primary() else None
    try:
        return _restore(plan, lock)
    except BaseException:
        if lock is not None:
            lock.release()
        raise


def _restore(plan: RunPlan, lock: RunLock | None) -> _Opened:
    saved = read_run_info(plan.out_dir)  # config.json as it is now (checked against the flags)
    ckpts = RunCheckpoints(plan.out_dir, config=run_copy(plan.info, plan.freq))
    target = abstract_target(plan.abstract, replicated(plan.mesh))
    # the newest checkpoint that reads back intact (a garbled newer one is named, dropped)
    state, dropout_key, progress = ckpts.restore_intact("latest", target)
    step = int(state.step)
    check_config_unchanged(plan.out_dir, saved, ckpts.saved_config("latest", step), step)
    metrics_path = plan.out_dir / METRICS_FILE
    kept_lines = read_metrics(metrics_path, int(state.step))
    if is_primary():
        atomic_write_text(metrics_path, "".join(line + "\n" for line in kept_lines))
    if progress.finished:  # all epochs done: only the report is written again
        log.info("resumed %s at step %d: training finished after epoch %d; writing the report",
                 plan.out_dir, int(state.step), progress.epoch)  # fmt: skip
    else:
        log.info("resumed %s at step %d (epoch %d, step %d of it)", plan.out_dir,
                 int(state.step), progress.epoch + 1, progress.step_in_epoch)  # fmt: skip
    return _Opened(ckpts, state, replicate(dropout_key, plan.mesh), progress, lock)


# --------------------------------------------------------------------------- 3-4. the loop


class _Trainer:
    """The step loop and the end of each epoch, over one opened run.

    Device values are read on the host only when a line is logged or a checkpoint written
    (``_drain``); the best state is kept as a device copy until the next checkpoint write.
    """

    def __init__(
        self,
        plan: RunPlan,
        opened: _Opened,
        metrics: TextIO,
        bar: Any,
        stop_after_steps: int | None,
        callbacks: Sequence[EpochCallback],
    ) -> None:
        tcfg = plan.cfg.train
        self.plan, self.tcfg, self.metrics, self.bar = plan, tcfg, metrics, bar
        self.ckpts, self.state = opened.ckpts, opened.state
        self.dropout_key, self.progress = opened.dropout_key, opened.progress
        self.stop_after_steps, self.callbacks = stop_after_steps, tuple(callbacks)
        self.train_step = make_train_step(plan.model, plan.optimizer, tcfg, mesh=plan.mesh)
        self.eval_step = make_eval_step(plan.model, tcfg)
        self.schedule = make_schedule(tcfg, plan.total_steps)
        self.ones = np.ones(tcfg.batch_size, np.float32)
        self.step = int(self.state.step)
        self.first_step = self.step
        self.last_good = self.ckpts.latest_step("latest")
        self.pending: list[StepMetrics] = []  # device values not yet read on the host
        self.best: tuple[int, TrainState, Progress] | None = None  # not yet on disk
        self.clocks = {kind: [time.perf_counter(), 0] for kind in ("train", "epoch")}
        self.epoch = self.progress.epoch
        # steps dispatched ahead hold their batches: wait for the device every so many
        self.wait_every, self.unwaited = sync_every(plan.train, tcfg.batch_size), 0

    def run(self) -> str:
        """Train until finished or ``stop_after_steps``; returns the stop reason."""
        progress = self.progress
        while not progress.finished and self.epoch < self.tcfg.epochs:
            self._run_epoch()
            if self.stop_after_steps is not None and self.step >= self.stop_after_steps:
                break
            self.epoch = progress.epoch
        return progress.stop_reason if progress.finished else "stop_after_steps"

    def _run_epoch(self) -> None:
        plan, tcfg, progress = self.plan, self.tcfg, self.progress
        batches = iterate_batches(
            len(plan.train), tcfg.batch_size, seed=tcfg.seed, epoch=self.epoch,
            start_step=progress.step_in_epoch,
        )  # fmt: skip
        for i, indices in enumerate(batches, start=progress.step_in_epoch):
            if self.step == self.first_step:
                test_hook("compile")
            check_signals()  # a Ctrl-C that Python dropped (in a gc callback) stops here
            self._train_step(indices)
            if self.step == 30:
                test_hook("epoch")
            end_of_epoch = i + 1 == plan.per_epoch
            log_now = (i + 1) % tcfg.log_every == 0 or end_of_epoch
            stop_now = self.step == self.stop_after_steps
            every = tcfg.checkpoint_every
            save_now = stop_now or (every > 0 and self.step % every == 0)
            if log_now or save_now:
                self._drain()  # raises NonFiniteError before anything non-finite is saved
            if log_now:
                loss = progress.interval.mean
                self._write_line("train", loss, None, progress.interval.skipped)
                if loss is not None:
                    self.bar.set_postfix(loss=f"{loss:.4g}", refresh=False)
                progress.interval.reset()
            progress.epoch, progress.step_in_epoch = self.epoch, i + 1
            if end_of_epoch:
                self._end_epoch()
                save_now = True  # every epoch end, besides each `checkpoint_every` steps
            if save_now:
                self._save()
            if stop_now or progress.finished:
                break

    def _train_step(self, indices: np.ndarray) -> None:
        train = self.plan.train
        rows = process_slice(indices, jax.process_index(), jax.process_count())
        x, y = train.gather(rows)  # this batch's windows, built from the held series
        batch = Batch(x, y, self.ones[: len(rows)])
        self.state, step_metrics = self.train_step(
            self.state, shard_batch(self.plan.mesh, batch), self.dropout_key
        )
        self.pending.append(step_metrics)
        self.unwaited += 1
        if self.unwaited >= self.wait_every:  # no read, no change of numbers: a wait
            jax.block_until_ready(step_metrics.loss)
            self.unwaited = 0
        self.step += 1
        for clock in self.clocks.values():
            clock[1] += 1
        self.bar.update(1)

    def _drain(self) -> None:
        """Read the pending step metrics on the host (the only per-interval sync)."""
        progress, step = self.progress, self.step
        first = step - len(self.pending) + 1
        for offset, m in enumerate(host_values(self.pending)):  # the same on every process
            if bool(m.finite):
                loss: float | None = float(m.loss)
            elif self.tcfg.skip_nonfinite:
                loss = None
                progress.total_skipped += 1
            else:
                raise NonFiniteError(
                    f"the loss or gradients became NaN/Inf at step {first + offset} (steps "
                    f"{first}-{step} checked together); the last good checkpoint is step "
                    f"{self.last_good} in {self.ckpts.directory('latest')}; start again with "
                    "a lower `lr` or with `skip_nonfinite=True`"
                )
            progress.interval.add(loss)
            progress.this_epoch.add(loss)
        self.pending.clear()

    def _write_line(
        self, kind: str, train_loss: float | None, val_loss: float | None, skipped: int
    ) -> None:
        """One line of ``metrics.jsonl``, with the throughput since the last of its kind."""
        now = time.perf_counter()
        start, steps = self.clocks[kind]
        line = {
            "kind": kind,
            "step": self.step,
            "epoch": self.epoch + 1,
            "train_loss": train_loss,
            "val_loss": val_loss,
            "lr": float(self.schedule(max(self.step - 1, 0))),  # the rate of the last update
            "skipped": skipped,
            "steps_per_s": round(steps / max(now - start, 1e-9), 3),
        }
        try:
            self.metrics.write(json.dumps(line) + "\n")
            self.metrics.flush()
        except OSError as err:  # a full disk: say what is safe (a torn line is skipped)
            with contextlib.suppress(OSError):
                self.metrics.close()  # now, so that closing it again cannot hide this error
            raise OSError(
                err.errno,
                f"cannot write {self.plan.out_dir / METRICS_FILE} at step {self.step}: "
                f"{err.strerror or err}; the newest complete checkpoint is step "
                f"{self.last_good}: fix the cause (a full disk?) and continue from it with "
                "`resume=True`",
            ) from err
        self.clocks[kind] = [now, 0]

    def _end_epoch(self) -> None:
        """Evaluate, update the best-so-far, early stopping and callbacks; reset the epoch."""
        plan, tcfg, progress, epoch = self.plan, self.tcfg, self.progress, self.epoch
        val_loss = None
        if len(plan.val):
            val_loss = evaluate_loss(
                self.eval_step, self.state.params, plan.val, tcfg.batch_size, plan.mesh
            )
        train_loss = progress.this_epoch.mean
        improved = val_loss is None or (
            math.isfinite(val_loss)
            and (progress.best_val_loss is None or val_loss < progress.best_val_loss)
        )
        if improved:
            progress.best_val_loss, progress.best_step = val_loss, self.step
            progress.best_epoch, progress.bad_epochs = epoch + 1, 0
        else:
            progress.bad_epochs += 1
        self._write_line("epoch", train_loss, val_loss, progress.this_epoch.skipped)
        log.info(
            "epoch %d/%d step %d: train loss %s, val loss %s%s",
            epoch + 1, tcfg.epochs, self.step,
            "n/a" if train_loss is None else f"{train_loss:.5g}",
            "n/a" if val_loss is None else f"{val_loss:.5g}",
            " (best)" if improved else "",
        )  # fmt: skip
        progress.epoch, progress.step_in_epoch = epoch + 1, 0
        progress.this_epoch.reset()
        report = EpochEnd(epoch + 1, self.step, train_loss, val_loss, progress.best_val_loss,
                          improved)  # fmt: skip
        asked_stop = any([bool(callback(report)) for callback in self.callbacks])
        if tcfg.patience and progress.bad_epochs >= tcfg.patience:
            progress.finished, progress.stop_reason = True, "early_stopping"
            log.info("early stopping: no better validation loss for %d epochs", tcfg.patience)
        elif epoch + 1 == tcfg.epochs:
            progress.finished, progress.stop_reason = True, "epochs"
        elif asked_stop:
            progress.finished, progress.stop_reason = True, "callback"
            log.info("stopped by a callback after epoch %d", epoch + 1)
        if improved:  # a device copy (the next step donates `state`), no sync
            self.best = (self.step, jax.tree.map(jnp.copy, self.state), copy.deepcopy(progress))

    def _save(self) -> None:
        """The best checkpoint is written together with the latest one, so the best on disk
        always matches the bookkeeping of the latest checkpoint."""
        if self.best is not None:
            step, state, progress = self.best
            self.ckpts.save("best", step, state, self.dropout_key, progress)
            self.best = None
        self.ckpts.save("latest", self.step, self.state, self.dropout_key, self.progress)
        self.last_good = self.step


# --------------------------------------------------------------------------- 5. finish


def _final_report(out_dir: Path, data_path: str | Path | None, trainer: _Trainer) -> Report:
    """The report of a finished run; if writing it fails, say that training itself is safe."""
    try:
        return evaluate_run(out_dir, data_path)
    except OSError as err:
        detail = err.strerror or str(err)
        where = f" ({err.filename})" if err.filename else ""
        raise OSError(
            err.errno,
            f"training finished ({trainer.step} steps; its checkpoints in {out_dir} are "
            f"complete) but writing the report failed: {detail}{where}; fix the cause (a full "
            f"disk?) and write the report with: stacklstm evaluate {out_dir}",
        ) from err


# --------------------------------------------------------------------------- fit


def fit(
    run_cfg: RunConfig,
    out_dir: str | Path,
    *,
    resume: bool = False,
    quiet: bool = False,
    data_path: str | Path | None = None,
    stop_after_steps: int | None = None,
    callbacks: Sequence[EpochCallback] = (),
) -> FitResult:
    """Train a model as ``run_cfg`` says and write the run folder ``out_dir``.

    The run folder holds ``config.json``, ``checkpoints/`` (latest), ``checkpoints_best/``,
    ``metrics.jsonl`` (one JSON line per log interval and per epoch) and, once training has
    finished, ``report.json``, ``forecast.png`` and ``loss.png``. With ``ensemble=N > 1`` it
    is a seed ensemble's folder: N such runs under ``members/``, trained one after another
    (:mod:`stacklstm.train.ensemble_fit`), and the report of their median forecast; the
    result is then an :class:`~stacklstm.train.ensemble_fit.EnsembleResult`.

    Args:
        run_cfg: Data, model and training settings.
        out_dir: The run folder: absent or empty for a new run, an existing run with
            ``resume=True``.
        resume: Continue the run in ``out_dir`` from its latest checkpoint. The result is
            bit-identical to an uninterrupted run. ``run_cfg`` (and ``data_path``, if given)
            must match the saved ones.
        quiet: No progress bar (it is also off when stderr is not a terminal).
        data_path: CSV/Parquet table; None means the bundled CO2 data (or, with ``resume``,
            the run's own data).
        stop_after_steps: Stop (with a checkpoint) once this many updates are done in total,
            as if interrupted; continue later with ``resume=True``.
        callbacks: Called at the end of every epoch with an :class:`EpochEnd`; one that
            returns True ends training there (hyperparameter pruning, say).

    Returns:
        FitResult, with the test report when training finished.

    Raises:
        ValueError: A bad setting, data problem (``DataError``) or run folder problem, found
            before anything is written; or ``RunInUseError``: another ``fit`` holds the run
            folder's lock (:mod:`stacklstm.train.lock`), which this one holds until it returns.
        NonFiniteError: The loss or gradients became NaN/Inf; the message names the steps
            and the last good checkpoint.
        OSError: Writing the run folder failed (e.g. a full disk): while creating it, nothing
            is left behind; later, the message names the step and the newest complete
            checkpoint, from which ``resume=True`` continues.
    """
    out_dir = Path(out_dir)
    if stop_after_steps is not None and (
        not isinstance(stop_after_steps, int) or stop_after_steps < 1
    ):
        raise ValueError(f"stop_after_steps must be an integer >= 1, got {stop_after_steps!r}")
    if isinstance(run_cfg, RunConfig) and run_cfg.train.ensemble > 1:
        if callbacks:
            raise ValueError(
                f"callbacks follow one model's epochs, but `ensemble` is "
                f"{run_cfg.train.ensemble} (several models, one after another); train with "
                "`ensemble=1` to use callbacks"
            )
        return fit_ensemble(run_cfg, out_dir, fit, resume=resume, quiet=quiet,
                            data_path=data_path, stop_after_steps=stop_after_steps)  # fmt: skip
    if is_primary() and out_dir.is_dir():
        RunLock.check_free(out_dir)  # at once: another train of this folder is running
    plan = make_plan(run_cfg, out_dir, resume, data_path)
    sync("stacklstm: settings checked")  # every process checked the folder before one writes
    opened = _open_resumed(plan) if resume else _open_new(plan)
    try:
        kernel = kernels.info()
        log.info("LSTM recurrence: the %s path (%s)", kernel.path, kernel.reason)
        return _train_and_report(plan, opened, quiet, data_path, stop_after_steps, callbacks)
    finally:
        if opened.lock is not None:
            opened.lock.release()


def _train_and_report(
    plan: RunPlan,
    opened: _Opened,
    quiet: bool,
    data_path: str | Path | None,
    stop_after_steps: int | None,
    callbacks: Sequence[EpochCallback],
) -> FitResult:
    """Phases 3-5: the step loop over the opened run, then the report once finished."""
    out_dir = plan.out_dir

    from tqdm.auto import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    show_bar = not quiet and sys.stderr.isatty() and is_primary()
    bar = tqdm(
        total=plan.total_steps, initial=int(opened.state.step), disable=not show_bar,
        unit="step", dynamic_ncols=True,
    )  # fmt: skip
    redirect = logging_redirect_tqdm() if show_bar else contextlib.nullcontext()
    metrics_path = out_dir / METRICS_FILE if is_primary() else Path(os.devnull)
    with opened.ckpts, bar, redirect, metrics_path.open("a", encoding="utf-8") as metrics:
        trainer = _Trainer(plan, opened, metrics, bar, stop_after_steps, callbacks)
        stop_reason = trainer.run()

    # ---- 5. finish: the report, once training has ended
    progress = trainer.progress
    report = _final_report(out_dir, data_path, trainer) if progress.finished else None
    return FitResult(
        out_dir=out_dir,
        step=trainer.step,
        epochs=progress.epoch,
        best_val_loss=progress.best_val_loss,
        best_step=progress.best_step,
        stop_reason=stop_reason,
        skipped=progress.total_skipped,
        report=report,
    )


__all__ = ["EpochCallback", "EpochEnd", "FitResult", "NonFiniteError", "evaluate_loss", "fit"]
