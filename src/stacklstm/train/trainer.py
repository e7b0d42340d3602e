"""Phases 3 and 4 of :func:`~stacklstm.run.fit`: the step loop over an opened run (shuffled
batches, the NaN guard, log lines, checkpoints) and the end of each epoch (evaluation, early
stopping, callbacks)."""

from __future__ import annotations

import contextlib
import contextvars
import copy
import json
import logging
import math
import os
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

import jax
import jax.numpy as jnp
import numpy as np

from ..data import (
    WindowSet,
    iterate_batches,
    process_slice,
)
from ..distributed import (
    host_values,
    shard_batch,
)
from ..rundir.files import (
    METRICS_FILE,
)
from ..rundir.lock import RunLock
from ..signals import check as check_signals
from ..signals import test_hook
from .checkpoint import RunCheckpoints
from .plan import RunPlan
from .progress import Progress
from .step import (
    Batch,
    StepMetrics,
    TrainState,
    make_eval_step,
    make_schedule,
    make_train_step,
    sync_every,
    window_batches,
)

# the loop's logger: its first line tells the command line that training has begun
log = logging.getLogger("stacklstm.run.loop")


@dataclass
class _Opened:
    """The run opened for training (phase 2 of ``fit``): its checkpoints, the state to
    continue from, and the lock that process 0 holds until ``fit`` returns."""

    ckpts: RunCheckpoints
    state: TrainState
    dropout_key: jax.Array
    progress: Progress
    lock: RunLock | None = None


#: An epoch end writes a checkpoint only when the last one is at least this old (seconds of
#: wall time): a small model's epoch takes a fraction of a second and each save about 0.1 s
#: (the default run on the bundled data spent a fifth of its time saving). A kill -9 loses at
#: most this much training, and a resume is bit-identical from any step; ``checkpoint_every``
#: steps, the run's end and ``stop_after_steps`` always save. The environment variable
#: ``STACKLSTM_CHECKPOINT_SECONDS`` sets it (0: every epoch end); a multi-process run saves
#: at every epoch end (the processes must agree on each save without a clock of their own).
CHECKPOINT_SECONDS = 10.0


def _clock() -> float:
    """Seconds on a monotonic clock (the age of the last checkpoint)."""
    return time.monotonic()


def checkpoint_seconds() -> float:
    """The least age of the last checkpoint for an epoch end to save (see
    :data:`CHECKPOINT_SECONDS`).

    Raises:
        ValueError: ``STACKLSTM_CHECKPOINT_SECONDS`` is not a number >= 0.
    """
    raw = os.environ.get("STACKLSTM_CHECKPOINT_SECONDS")
    if raw is None or raw.strip() == "":
        return CHECKPOINT_SECONDS
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (value >= 0 and math.isfinite(value)):
        raise ValueError(
            f"STACKLSTM_CHECKPOINT_SECONDS must be a number of seconds >= 0, got {raw!r}"
        )
    return value


_INTERMEDIATE: contextvars.ContextVar[bool] = contextvars.ContextVar(
    "stacklstm_intermediate_checkpoints", default=True
)


@contextlib.contextmanager
def intermediate_checkpoints(keep: bool) -> Iterator[None]:
    """Within the block, ``fit`` writes a checkpoint at every epoch end and every
    ``checkpoint_every`` steps (``keep``, the default everywhere else), or only at the end of
    training and where ``stop_after_steps`` stops it (not ``keep``: a run in a temporary
    folder, which no one can resume; each save of a small model costs more than its epoch).
    The numbers are the same either way."""
    token = _INTERMEDIATE.set(keep)
    try:
        yield
    finally:
        _INTERMEDIATE.reset(token)


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
    host syncs every few batches (:func:`~stacklstm.train.step.sync_every`, so that
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
        self.intermediate = _INTERMEDIATE.get()
        self.save_age = 0.0 if jax.process_count() > 1 else checkpoint_seconds()
        self.saved_at = _clock()  # the run's start counts as a save (step 0's)
        self.train_step = make_train_step(plan.model, plan.optimizer, tcfg, mesh=plan.mesh)
        self.eval_step = make_eval_step(plan.model, tcfg)
        self.schedule = make_schedule(tcfg, plan.total_steps)
        self.ones = np.ones(tcfg.batch_size, np.float32)
        self.weight = plan.train_weight  # (len(plan.train),) loss weights, or None: ones
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
        if self.step == 0 and progress.best_val_loss is None and self._starts_pretrained():
            self._score_start()
        while not progress.finished and self.epoch < self.tcfg.epochs:
            self._run_epoch()
            if self.stop_after_steps is not None and self.step >= self.stop_after_steps:
                break
            self.epoch = progress.epoch
        return progress.stop_reason if progress.finished else "stop_after_steps"

    def _starts_pretrained(self) -> bool:
        """A fine-tune (``init="pretrained"``) with validation windows to score its start on."""
        plan = self.plan
        return (
            plan.cfg.train.init == "pretrained"
            and len(plan.val) > 0
            and plan.retrain_epochs is None
        )

    def _score_start(self) -> None:
        """The weights a fine-tune starts from are its first candidate, "epoch 0": early
        stopping keeps them unless an epoch scores better on validation, so fine-tuning
        never forecasts with weights that validate worse than the pretrained ones."""
        plan, progress = self.plan, self.progress
        val_loss = evaluate_loss(
            self.eval_step, self.state.params, plan.val, self.tcfg.batch_size, plan.mesh
        )
        if not math.isfinite(val_loss):
            return
        progress.best_val_loss, progress.best_step, progress.best_epoch = val_loss, 0, 0
        log.info("epoch 0 (the pretrained weights): val loss %.5g", val_loss)
        self.best = (0, jax.tree.map(jnp.copy, self.state), copy.deepcopy(progress))

    def _run_epoch(self) -> None:
        plan, tcfg, progress = self.plan, self.tcfg, self.progress
        batches = iterate_batches(
            len(plan.train),
            tcfg.batch_size,
            seed=tcfg.seed,
            epoch=self.epoch,
            start_step=progress.step_in_epoch,
        )
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
            every = tcfg.checkpoint_every if self.intermediate else 0
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
                # an epoch end once the last save is CHECKPOINT_SECONDS old, besides each
                # `checkpoint_every` steps (a run nobody can resume,
                # intermediate_checkpoints(False): its end only)
                due = _clock() - self.saved_at >= self.save_age
                save_now = save_now or (self.intermediate and due) or progress.finished
            if save_now:
                self._save()
            if stop_now or progress.finished:
                break

    def _train_step(self, indices: np.ndarray) -> None:
        train = self.plan.train
        rows = process_slice(indices, jax.process_index(), jax.process_count())
        x, y = train.gather(rows)  # this batch's windows, built from the held series
        weight = self.ones[: len(rows)] if self.weight is None else self.weight[rows]
        batch = Batch(x, y, weight)
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
        if len(plan.val) and plan.retrain_epochs is None:  # a retrained run: no validation
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
            epoch + 1,
            tcfg.epochs,
            self.step,
            "n/a" if train_loss is None else f"{train_loss:.5g}",
            "n/a" if val_loss is None else f"{val_loss:.5g}",
            " (best)" if improved else "",
        )
        progress.epoch, progress.step_in_epoch = epoch + 1, 0
        progress.this_epoch.reset()
        report = EpochEnd(
            epoch + 1, self.step, train_loss, val_loss, progress.best_val_loss, improved
        )
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
        self.saved_at = _clock()
