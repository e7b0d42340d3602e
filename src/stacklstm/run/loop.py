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
import dataclasses
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

import jax
import numpy as np

from .. import compile_cache, kernels
from ..config import RunConfig
from ..distributed import (
    is_primary,
    replicate,
    replicated,
    sync,
)
from ..forecasting.baseline_forecasts import prefetch_splits
from ..pretrained.finetune import pretrained_params
from ..report.evaluate import Report, evaluate_run
from ..rundir.files import (
    METRICS_FILE,
    SELECTION_DIR,
)
from ..rundir.folder import (
    atomic_write_text,
    creating_run_dir,
)
from ..rundir.info import (
    check_config_unchanged,
    read_metrics,
    read_run_info,
    run_copy,
    write_run_info,
)
from ..rundir.lock import RunLock
from ..train.checkpoint import RunCheckpoints, abstract_target
from ..train.plan import RETRAINED, RunPlan, make_plan
from ..train.progress import Progress
from ..train.step import (
    TrainState,
    init_state,
)
from ..train.trainer import (
    EpochCallback,
    EpochEnd,
    NonFiniteError,
    _Opened,
    _Trainer,
    evaluate_loss,
)
from .ensemble_fit import fit_ensemble
from .results import FitResult, finished_result
from .retrain import (
    RetrainResult,
    lines_said_once,
    selected_epochs,
    selecting,
    selection_config,
    started,
)

log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- 1. prepare


# --------------------------------------------------------------------------- 2. open the run


def _open_new(plan: RunPlan, keep: tuple[str, ...] = ()) -> _Opened:
    """Create the run folder: config first, then a step-0 checkpoint (so resume always works).

    If any of it fails (a full disk?), no folder is left behind (but the entries named in
    ``keep``: a retrained run's ``selection/``).
    """
    init_key, dropout_key = jax.random.split(jax.random.key(plan.cfg.train.seed))
    with creating_run_dir(plan.out_dir, writer=is_primary(), keep=keep) as lock:
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
        if plan.cfg.train.init == "pretrained":  # the shipped weights, fine-tuned from here
            params = pretrained_params(plan.freq, state.params, plan.cfg.data.horizon)
            state = TrainState(state.step, params, plan.optimizer.init(params))
        progress = Progress()
        if plan.retrain_epochs == 0:  # the selection kept the pretrained weights: no epoch
            progress = Progress(best_step=0, best_epoch=0, finished=True, stop_reason="epochs")
        opened = _Opened(
            ckpts, replicate(state, plan.mesh), replicate(dropout_key, plan.mesh), progress
        )
        ckpts.save("latest", 0, opened.state, opened.dropout_key, opened.progress)
        if progress.finished:
            ckpts.save("best", 0, opened.state, opened.dropout_key, opened.progress)
    opened.lock = lock
    ids = plan.train.ids
    log.info(
        "run folder %s: %d training windows%s, %d steps per epoch, %d validation windows",
        plan.out_dir,
        len(plan.train),
        "" if ids is None else f" of {len(ids)} series",
        plan.per_epoch,
        len(plan.val) if plan.retrain_epochs is None else 0,
    )
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
    newest = ckpts.latest_step("latest")  # an edited config.json: said before restoring
    if newest is not None:
        check_config_unchanged(plan.out_dir, saved, ckpts.saved_config("latest", newest), newest)
    # the newest checkpoint that reads back intact (a garbled newer one is named, dropped)
    state, dropout_key, progress = ckpts.restore_intact("latest", target)
    step = int(state.step)
    check_config_unchanged(plan.out_dir, saved, ckpts.saved_config("latest", step), step)
    metrics_path = plan.out_dir / METRICS_FILE
    kept_lines = read_metrics(metrics_path, int(state.step))
    if is_primary():
        atomic_write_text(metrics_path, "".join(line + "\n" for line in kept_lines))
    if progress.finished:  # all epochs done: only the report is written again
        log.info(
            "resumed %s at step %d: training finished after epoch %d; writing the report",
            plan.out_dir,
            int(state.step),
            progress.epoch,
        )
    else:
        log.info(
            "resumed %s at step %d (epoch %d, step %d of it)",
            plan.out_dir,
            int(state.step),
            progress.epoch + 1,
            progress.step_in_epoch,
        )
    return _Opened(ckpts, state, replicate(dropout_key, plan.mesh), progress, lock)


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


@dataclasses.dataclass(frozen=True)
class _Options:
    """How ``fit`` was asked to run, handed down its phases as one object."""

    resume: bool = False
    quiet: bool = False
    data_path: str | Path | None = None
    stop_after_steps: int | None = None
    callbacks: Sequence[EpochCallback] = ()


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
    (:mod:`stacklstm.run.ensemble_fit`), and the report of their median forecast; the
    result is then an :class:`~stacklstm.run.ensemble_fit.EnsembleResult`. With
    ``retrain="all"`` (the default where there are validation windows) the run chosen on
    validation is trained first into ``selection/`` (its model scores the report) and the
    model of ``out_dir``, the one that forecasts, is then trained on every row for its best
    epoch count (``"on"``: on the training and validation rows, the test rows held out;
    :mod:`stacklstm.run.retrain`); the result is then a
    :class:`~stacklstm.run.retrain.RetrainResult`.

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
            folder's lock (:mod:`stacklstm.rundir.lock`), which this one holds until it returns.
        NonFiniteError: The loss or gradients became NaN/Inf; the message names the steps
            and the last good checkpoint.
        OSError: Writing the run folder failed (e.g. a full disk): while creating it, nothing
            is left behind; later, the message names the step and the newest complete
            checkpoint, from which ``resume=True`` continues.
    """
    compile_cache.enable()  # a run of the same shapes in a new process compiles nothing
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
        return fit_ensemble(
            run_cfg,
            out_dir,
            fit,
            resume=resume,
            quiet=quiet,
            data_path=data_path,
            stop_after_steps=stop_after_steps,
        )
    if is_primary() and out_dir.is_dir():
        RunLock.check_free(out_dir)  # at once: another train of this folder is running
    # a retrained run whose selection has begun but whose own folder has not
    in_selection = resume and selecting(out_dir)
    keep = (SELECTION_DIR,) if in_selection else ()
    if in_selection and data_path is None:  # the run's own table, as its selection saved it
        data_path = read_run_info(out_dir / SELECTION_DIR).data_path
    opts = _Options(resume and not in_selection, quiet, data_path, stop_after_steps, callbacks)
    with lines_said_once():
        plan = make_plan(run_cfg, out_dir, opts.resume, data_path, keep=keep)
        if in_selection and plan.cfg.train.retrain not in RETRAINED:
            raise ValueError(
                f"cannot resume {out_dir}: it holds the selection run of a retrained run, but "
                f"the settings give retrain={plan.cfg.train.retrain!r}; resume with the same "
                "settings"
            )
        if plan.cfg.train.retrain in RETRAINED:
            return _fit_retrained(plan, run_cfg, opts)
    return _fit_planned(plan, dataclasses.replace(opts, resume=resume))


def _fit_planned(plan: RunPlan, opts: _Options, keep: tuple[str, ...] = ()) -> FitResult:
    """Phases 2-5 of one run, once planned: open it (new, or resumed), train, report."""
    sync("stacklstm: settings checked")  # every process checked the folder before one writes
    if (
        opts.stop_after_steps is None
        and plan.cfg.train.baselines == "all"
        and plan.test is not None
        and plan.retrain_epochs is None  # a retrained run's started with its selection
    ):
        # the report's statistical baselines depend on the data alone: they fit (in worker
        # processes) while this process builds the model and trains it, and the report
        # waits for what is left
        prefetch_splits(plan.val, plan.test, plan.cfg.data.season)
    opened = _open_resumed(plan) if opts.resume else _open_new(plan, keep)
    try:
        kernel = kernels.info()
        log.info("LSTM recurrence: the %s path (%s)", kernel.path, kernel.reason)
        return _train_and_report(plan, opened, opts)
    finally:
        if opened.lock is not None:
            opened.lock.release()


def _fit_retrained(plan: RunPlan, run_cfg: RunConfig, opts: _Options) -> RetrainResult:
    """``retrain="all"`` or ``"on"`` (:mod:`.retrain`): the selection run in ``selection/``
    (trained, resumed or found finished; the callbacks see its epochs), then the run itself,
    trained on the windows of every row (``"on"``: of the training and validation rows) for
    the selection's best epoch count."""
    out_dir = plan.out_dir
    folder = out_dir / SELECTION_DIR
    chosen = finished_result(folder)
    if opts.stop_after_steps is None and plan.cfg.train.baselines == "all":
        # the report's statistical baselines fit while both runs train
        prefetch_splits(plan.val, plan.test, plan.cfg.data.season)
    if chosen is None:
        if opts.resume:  # the run began after its selection had finished: it cannot be missing
            raise ValueError(f"cannot resume {out_dir}: its selection run {folder} is unfinished")
        chosen = fit(
            selection_config(plan.cfg),
            folder,
            resume=started(out_dir),
            quiet=opts.quiet,
            data_path=plan.data_path,
            stop_after_steps=opts.stop_after_steps,
            callbacks=opts.callbacks,
        )
        if chosen.stop_reason == "stop_after_steps":
            return RetrainResult.of(chosen, None)
    sync("stacklstm: selection finished")  # process 0 wrote what selected_epochs reads
    epochs = selected_epochs(folder)
    rows = "every row" if plan.cfg.train.retrain == "all" else "the training and validation rows"
    log.info(
        "retrain: %d epochs chosen on validation (%s); training again on %s", epochs, folder, rows
    )
    final = make_plan(
        run_cfg, out_dir, opts.resume, opts.data_path, retrain_epochs=epochs, keep=(SELECTION_DIR,)
    )
    limit = None if opts.stop_after_steps is None else opts.stop_after_steps - chosen.step
    if limit is not None and limit < 1:
        return RetrainResult.of(chosen, None)
    second = dataclasses.replace(opts, stop_after_steps=limit, callbacks=())
    return RetrainResult.of(chosen, _fit_planned(final, second, keep=(SELECTION_DIR,)))


def _train_and_report(plan: RunPlan, opened: _Opened, opts: _Options) -> FitResult:
    """Phases 3-5: the step loop over the opened run, then the report once finished."""
    out_dir = plan.out_dir

    from tqdm.auto import tqdm
    from tqdm.contrib.logging import logging_redirect_tqdm

    # a bar where someone watches (a terminal, a notebook); the log has a line per epoch
    watched = sys.stderr.isatty() or "ipykernel" in sys.modules
    show_bar = not opts.quiet and watched and is_primary()
    bar = tqdm(
        total=plan.total_steps,
        initial=int(opened.state.step),
        disable=not show_bar,
        unit="step",
        dynamic_ncols=True,
    )
    redirect = logging_redirect_tqdm() if show_bar else contextlib.nullcontext()
    metrics_path = out_dir / METRICS_FILE if is_primary() else Path(os.devnull)
    with opened.ckpts, bar, redirect, metrics_path.open("a", encoding="utf-8") as metrics:
        trainer = _Trainer(plan, opened, metrics, bar, opts.stop_after_steps, opts.callbacks)
        stop_reason = trainer.run()

    # ---- 5. finish: the report, once training has ended
    progress = trainer.progress
    report = _final_report(out_dir, opts.data_path, trainer) if progress.finished else None
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
