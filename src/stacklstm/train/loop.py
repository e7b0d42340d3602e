"""``fit``: the one training loop. The CLI, the examples and the tests all call it.

It reads top to bottom: validate everything, create the run folder, train epoch by epoch
(shuffled batches, evaluation, early stopping, checkpoints, NaN guard), then write the report.

Example:
    >>> import tempfile
    >>> from stacklstm.data import DataConfig
    >>> from stacklstm.train.config import ModelConfig, RunConfig, TrainConfig
    >>> cfg = RunConfig(DataConfig(window=8), ModelConfig(hidden_size=8, num_layers=1),
    ...                 TrainConfig(epochs=1))
    >>> result = fit(cfg, tempfile.mkdtemp() + "/run", quiet=True)  # doctest: +SKIP
    >>> print(result.report.table)  # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..data import (
    DataError,
    WindowSet,
    bundled_dataset_path,
    iterate_batches,
    make_splits,
    prepare_series,
    process_slice,
    read_table,
    steps_per_epoch,
)
from ..distributed import (
    check_batch_size,
    host_values,
    is_primary,
    make_mesh,
    replicate,
    replicated,
    shard_batch,
    sync,
)
from .checkpoint import (
    CONFIG_FILE,
    METRICS_FILE,
    Progress,
    RunCheckpoints,
    RunInfo,
    atomic_write_text,
    check_new_run_dir,
    creating_run_dir,
    read_run_info,
    write_run_info,
)
from .config import RunConfig
from .report import Report, evaluate_run
from .step import (
    Batch,
    StepMetrics,
    TrainState,
    check_state_fits,
    init_state,
    make_eval_step,
    make_optimizer,
    make_schedule,
    make_train_step,
    padded_batches,
)

log = logging.getLogger(__name__)


class NonFiniteError(RuntimeError):
    """The training loss or gradients became NaN/Inf (and ``skip_nonfinite`` is off)."""


@dataclass(frozen=True)
class FitResult:
    """What :func:`fit` did.

    Attributes:
        out_dir: The run folder.
        step: Updates done in total.
        epochs: Epochs completed.
        best_val_loss: Best validation loss (None without validation windows).
        best_step: Step of the best checkpoint.
        stop_reason: ``"epochs"``, ``"early_stopping"`` or ``"stop_after_steps"``.
        skipped: Updates skipped because their loss or gradients were not finite.
        report: The test report, written when training finished (None otherwise).
    """

    out_dir: Path
    step: int
    epochs: int
    best_val_loss: float | None
    best_step: int | None
    stop_reason: str
    skipped: int
    report: Report | None


def _mean(total: float, count: int) -> float | None:
    return total / count if count else None


def _read_metrics(path: Path, through_step: int) -> list[str]:
    """Lines of ``metrics.jsonl`` written at or before ``through_step`` (the restored step)."""
    if not path.exists():
        return []
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            step = json.loads(line)["step"]
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # a line torn by a crash mid-write, or an empty one
        if step <= through_step:
            kept.append(line)
    return kept


def evaluate_loss(eval_step, params: Any, windows: WindowSet, batch_size: int, mesh) -> float:
    """Mean loss over all ``windows`` (padding masked out); one host sync at the end.

    Every process passes all ``windows``; the result is the same on every process.
    """
    sums = [
        eval_step(params, shard_batch(mesh, batch, whole=True))
        for batch, _ in padded_batches(windows.x, windows.y, batch_size)
    ]
    host = host_values(sums)  # the only host sync of the evaluation
    return math.fsum(float(s) for s, _ in host) / math.fsum(float(w) for _, w in host)


def fit(
    run_cfg: RunConfig,
    out_dir: str | Path,
    *,
    resume: bool = False,
    quiet: bool = False,
    data_path: str | Path | None = None,
    stop_after_steps: int | None = None,
) -> FitResult:
    """Train a model as ``run_cfg`` says and write the run folder ``out_dir``.

    The run folder holds ``config.json``, ``checkpoints/`` (latest), ``checkpoints_best/``,
    ``metrics.jsonl`` (one JSON line per log interval and per epoch) and, once training has
    finished, ``report.json``, ``forecast.png`` and ``loss.png``.

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

    Returns:
        FitResult, with the test report when training finished.

    Raises:
        ValueError: A bad setting, data problem (``DataError``) or run folder problem, found
            before anything is written.
        NonFiniteError: The loss or gradients became NaN/Inf; the message names the steps
            and the last good checkpoint.
        OSError: Writing the run folder failed (e.g. a full disk): while creating it, nothing
            is left behind; later, the message names the step and the newest complete
            checkpoint, from which ``resume=True`` continues.
    """
    # ---- 1. Validate everything before writing anything --------------------------------
    if not isinstance(run_cfg, RunConfig):
        raise TypeError(f"run_cfg must be a RunConfig, got {type(run_cfg).__name__}")
    run_cfg.validate()
    cfg, tcfg = run_cfg.data, run_cfg.train
    out_dir = Path(out_dir)
    if stop_after_steps is not None and (
        not isinstance(stop_after_steps, int) or stop_after_steps < 1
    ):
        raise ValueError(f"stop_after_steps must be an integer >= 1, got {stop_after_steps!r}")
    saved: RunInfo | None = None
    if resume:
        saved = read_run_info(out_dir)
        differences = run_cfg.diff(saved.config)
        if data_path is None:
            data_path = saved.data_path
        elif saved.data_path is None or Path(data_path).absolute() != saved.data_path:
            differences.append(f"data: {str(data_path)!r} != {str(saved.data_path)!r}")
        if differences:
            raise ValueError(
                f"cannot resume {out_dir}: the settings differ from the saved run's "
                f"({'; '.join(differences)}); resume with the same settings or start a new run"
            )
    else:
        check_new_run_dir(out_dir)
    source = bundled_dataset_path() if data_path is None else Path(data_path)
    series = prepare_series(read_table(source), cfg)
    splits, scaler = make_splits(series, cfg)
    train, val = splits.train, splits.val
    per_epoch = steps_per_epoch(len(train), tcfg.batch_size)
    if per_epoch == 0:
        raise DataError(
            f"batch_size ({tcfg.batch_size}) is larger than the {len(train)} training windows; "
            "lower --batch-size or use more data"
        )
    if saved is not None and saved.scaler.to_dict() != scaler.to_dict():
        raise ValueError(
            f"cannot resume {out_dir}: the data in {source} changed since the run started "
            "(its training rows give another scaler); start a new run"
        )
    mesh = make_mesh()
    check_batch_size(tcfg.batch_size, mesh)
    sync("stacklstm: settings checked")  # every process checked the folder before one writes

    # ---- 2. Model, optimizer, state ----------------------------------------------------
    model = run_cfg.model.build(output_size=train.horizon * train.n_targets)
    total_steps = tcfg.epochs * per_epoch
    if total_steps > np.iinfo(np.int32).max:  # TrainState.step is an int32
        raise ValueError(
            f"epochs ({tcfg.epochs}) x {per_epoch} steps per epoch = {total_steps} updates, more "
            f"than the step counter holds ({np.iinfo(np.int32).max}); lower --epochs"
        )
    optimizer = make_optimizer(tcfg, total_steps)
    schedule = make_schedule(tcfg, total_steps)
    init_key, dropout_key = jax.random.split(jax.random.key(tcfg.seed))
    example_x = train.x[:1, :1]  # parameter shapes depend on the features only
    abstract = jax.eval_shape(lambda: init_state(model, optimizer, init_key, example_x))
    local = [d for d in mesh.devices.flat if d.process_index == jax.process_index()]
    check_state_fits(abstract, local[0])  # before allocating (or swapping, or hanging)

    # ---- 3. The run folder: config first, then a step-0 checkpoint (so resume always works)
    if resume:
        ckpts = RunCheckpoints(out_dir)
        target = jax.tree.map(
            lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=replicated(mesh)), abstract
        )
        # the newest checkpoint that reads back intact (a garbled newer one is named, dropped)
        state, dropout_key, progress = ckpts.restore_intact("latest", target)
        dropout_key = replicate(dropout_key, mesh)
        kept_lines = _read_metrics(out_dir / METRICS_FILE, int(state.step))
        if is_primary():
            atomic_write_text(out_dir / METRICS_FILE, "".join(line + "\n" for line in kept_lines))
        log.info("resumed %s at step %d (epoch %d)", out_dir, int(state.step), progress.epoch + 1)
    else:
        with creating_run_dir(out_dir):  # if any of this fails (a full disk?), no folder is left
            if is_primary():  # the only writer of everything but checkpoints
                out_dir.mkdir(parents=True, exist_ok=True)
                data_ref = None if data_path is None else Path(data_path).absolute()
                write_run_info(out_dir, RunInfo(run_cfg, data_ref, scaler))
                (out_dir / METRICS_FILE).touch()
            sync("stacklstm: run folder created")
            ckpts = RunCheckpoints(out_dir)  # all processes: Orbax saves collectively
            state = replicate(init_state(model, optimizer, init_key, example_x), mesh)
            dropout_key = replicate(dropout_key, mesh)
            progress = Progress()
            ckpts.save("latest", 0, state, dropout_key, progress)
        log.info(
            "run folder %s: %d training windows, %d steps per epoch, %d validation windows",
            out_dir,
            len(train),
            per_epoch,
            len(val),
        )

    train_step = make_train_step(model, optimizer, tcfg, mesh=mesh)
    eval_step = make_eval_step(model, tcfg)
    ones = np.ones(tcfg.batch_size, np.float32)
    step = int(state.step)
    last_good = ckpts.latest_step("latest")

    # ---- 4. Train -------------------------------------------------------------------------
    from tqdm.auto import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    show_bar = not quiet and sys.stderr.isatty() and is_primary()
    bar = tqdm(
        total=total_steps, initial=step, disable=not show_bar, unit="step", dynamic_ncols=True
    )
    pending: list[StepMetrics] = []  # device values not yet read on the host
    best: tuple[int, TrainState, Progress] | None = None  # not yet written to checkpoints_best
    clocks = {kind: [time.perf_counter(), 0] for kind in ("train", "epoch")}  # [start, steps]
    stop_reason = progress.stop_reason
    redirect = logging_redirect_tqdm() if show_bar else contextlib.nullcontext()
    metrics_path = out_dir / METRICS_FILE if is_primary() else Path(os.devnull)
    with ckpts, bar, redirect, metrics_path.open("a", encoding="utf-8") as metrics:

        def write_line(kind: str, train_loss: float | None, val_loss: float | None, skipped: int):
            now = time.perf_counter()
            start, steps = clocks[kind]  # throughput since the last line of this kind
            line = {
                "kind": kind,
                "step": step,
                "epoch": epoch + 1,
                "train_loss": train_loss,
                "val_loss": val_loss,
                "lr": float(schedule(max(step - 1, 0))),  # the rate of the last update
                "skipped": skipped,
                "steps_per_s": round(steps / max(now - start, 1e-9), 3),
            }
            try:
                metrics.write(json.dumps(line) + "\n")
                metrics.flush()
            except OSError as err:  # a full disk: say what is safe (a torn line is skipped)
                with contextlib.suppress(OSError):
                    metrics.close()  # now, so that closing it again cannot hide this error
                raise OSError(
                    err.errno,
                    f"cannot write {out_dir / METRICS_FILE} at step {step}: "
                    f"{err.strerror or err}; the newest complete checkpoint is step "
                    f"{last_good}: fix the cause (a full disk?) and continue from it with --resume",
                ) from err
            clocks[kind] = [now, 0]

        def drain() -> None:
            """Read the pending step metrics on the host (the only per-interval sync)."""
            first = step - len(pending) + 1
            for offset, m in enumerate(host_values(pending)):  # the same on every process
                if bool(m.finite):
                    progress.interval_loss_sum += float(m.loss)
                    progress.epoch_loss_sum += float(m.loss)
                elif tcfg.skip_nonfinite:
                    progress.interval_skipped += 1
                    progress.epoch_skipped += 1
                    progress.total_skipped += 1
                else:
                    raise NonFiniteError(
                        f"the loss or gradients became NaN/Inf at step {first + offset} (steps "
                        f"{first}-{step} checked together); the last good checkpoint is step "
                        f"{last_good} in {ckpts.directory('latest')}; start again with a lower "
                        "--lr or with --skip-nonfinite"
                    )
            pending.clear()

        epoch = progress.epoch
        while not progress.finished and epoch < tcfg.epochs:
            batches = iterate_batches(
                len(train), tcfg.batch_size, seed=tcfg.seed, epoch=epoch,
                start_step=progress.step_in_epoch,
            )  # fmt: skip
            for i, indices in enumerate(batches, start=progress.step_in_epoch):
                rows = process_slice(indices, jax.process_index(), jax.process_count())
                batch = shard_batch(mesh, Batch(train.x[rows], train.y[rows], ones[: len(rows)]))
                state, step_metrics = train_step(state, batch, dropout_key)
                pending.append(step_metrics)
                step += 1
                clocks["train"][1] += 1
                clocks["epoch"][1] += 1
                progress.interval_steps += 1
                progress.epoch_steps += 1
                bar.update(1)
                end_of_epoch = i + 1 == per_epoch
                log_now = (i + 1) % tcfg.log_every == 0 or end_of_epoch
                stop_now = step == stop_after_steps
                every = tcfg.checkpoint_every
                save_now = stop_now or (every > 0 and step % every == 0)
                if log_now or save_now:
                    drain()  # raises NonFiniteError before anything non-finite is saved
                if log_now:
                    loss = _mean(progress.interval_loss_sum, progress.interval_steps)
                    write_line("train", loss, None, progress.interval_skipped)
                    if loss is not None:
                        bar.set_postfix(loss=f"{loss:.4g}", refresh=False)
                    progress.interval_loss_sum = 0.0
                    progress.interval_steps = progress.interval_skipped = 0
                progress.epoch, progress.step_in_epoch = epoch, i + 1
                if end_of_epoch:
                    val_loss = None
                    if len(val):
                        val_loss = evaluate_loss(
                            eval_step, state.params, val, tcfg.batch_size, mesh
                        )
                    train_loss = _mean(progress.epoch_loss_sum, progress.epoch_steps)
                    improved = val_loss is None or (
                        math.isfinite(val_loss)
                        and (progress.best_val_loss is None or val_loss < progress.best_val_loss)
                    )
                    if improved:
                        progress.best_val_loss, progress.best_step = val_loss, step
                        progress.best_epoch, progress.bad_epochs = epoch + 1, 0
                    else:
                        progress.bad_epochs += 1
                    write_line("epoch", train_loss, val_loss, progress.epoch_skipped)
                    log.info(
                        "epoch %d/%d step %d: train loss %s, val loss %s%s",
                        epoch + 1,
                        tcfg.epochs,
                        step,
                        "n/a" if train_loss is None else f"{train_loss:.5g}",
                        "n/a" if val_loss is None else f"{val_loss:.5g}",
                        " (best)" if improved else "",
                    )
                    progress.epoch, progress.step_in_epoch = epoch + 1, 0
                    progress.epoch_loss_sum = 0.0
                    progress.epoch_steps = progress.epoch_skipped = 0
                    if tcfg.patience and progress.bad_epochs >= tcfg.patience:
                        progress.finished, progress.stop_reason = True, "early_stopping"
                        log.info(
                            "early stopping: no better validation loss for %d epochs",
                            tcfg.patience,
                        )
                    elif epoch + 1 == tcfg.epochs:
                        progress.finished, progress.stop_reason = True, "epochs"
                    if improved:  # a device copy (the next step donates `state`), no sync
                        best = (step, jax.tree.map(jnp.copy, state), replace(progress))
                    save_now = save_now or progress.finished
                if save_now:
                    # The best checkpoint is written together with the latest one, so the
                    # best on disk always matches the bookkeeping of the latest checkpoint.
                    if best is not None:
                        ckpts.save("best", best[0], best[1], dropout_key, best[2])
                        best = None
                    ckpts.save("latest", step, state, dropout_key, progress)
                    last_good = step
                if stop_now or progress.finished:
                    break
            if stop_after_steps is not None and step >= stop_after_steps:
                stop_reason = "stop_after_steps"
                break
            epoch = progress.epoch
        if progress.finished:
            stop_reason = progress.stop_reason

    # ---- 5. Report ---------------------------------------------------------------------------
    report = None
    if progress.finished:
        report = evaluate_run(out_dir, data_path)
    return FitResult(
        out_dir=out_dir,
        step=step,
        epochs=progress.epoch,
        best_val_loss=progress.best_val_loss,
        best_step=progress.best_step,
        stop_reason=stop_reason or "stop_after_steps",
        skipped=progress.total_skipped,
        report=report,
    )


__all__ = ["CONFIG_FILE", "FitResult", "NonFiniteError", "evaluate_loss", "fit"]
