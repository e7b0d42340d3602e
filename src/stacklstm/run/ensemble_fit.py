"""Training a seed ensemble: its members one after another, each an ordinary run of ``fit``.

:func:`~stacklstm.run.fit` hands a config with ``ensemble=N > 1`` to :func:`fit_ensemble`.
It checks the settings and the data once (as ``fit`` does, before writing anything),
creates the ensemble's folder (``config.json`` and ``members/``; see
:mod:`stacklstm.forecasting.ensemble`), then trains member ``k`` into ``members/<k>`` with
``seed + k``: a complete run folder with its own checkpoints, lock, metrics and report. So
a crash or Ctrl-C loses at most what one single run would lose, and ``resume=True`` skips the
finished members, resumes the unfinished one (bit-identical to an uninterrupted run) and
starts the rest. Once every member has finished, the ensemble's report (the members' median
against the baselines and against each member) is written into the ensemble's folder.

With ``retrain="on"`` (a panel's default, :mod:`stacklstm.run.retrain`) each member is a
retrained run: its own selection run in ``members/<k>/selection/`` chooses its epochs, and
the member is trained again on the training and validation rows. The ensemble's report
scores the validation split with the median of the members' selection runs, which did not
train on it.

Example:
    >>> import tempfile
    >>> from stacklstm.config import RunConfig, TrainConfig
    >>> cfg = RunConfig(train=TrainConfig(epochs=2, ensemble=3, baselines="naive"))
    >>> result = fit(cfg, tempfile.mkdtemp() + "/ens", quiet=True)  # doctest: +SKIP
    >>> [m.step for m in result.members]  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from ..config import RunConfig
from ..distributed import is_primary, sync
from ..forecasting.ensemble import member_config, member_dir
from ..report.evaluate import evaluate_run
from ..rundir.files import CONFIG_FILE, MEMBERS_DIR
from ..rundir.folder import creating_run_dir
from ..rundir.info import write_run_info
from ..rundir.lock import RunLock
from ..train.plan import make_plan
from . import retrain
from .results import FitResult, finished_result

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EnsembleResult(FitResult):
    """What :func:`fit_ensemble` did.

    Attributes:
        members: Each member's :class:`~stacklstm.run.FitResult`, for the members trained
            or found finished so far (a member that had finished before this call has
            ``report=None``: its report is in its folder).
        step: Updates done in total, over all members.
        epochs: Epochs completed in total, over all members.
        best_val_loss: None (each member has its own).
        best_step: None (each member has its own).
        stop_reason: ``"stop_after_steps"`` while a member is unfinished, else the members'
            own reasons, sorted and comma separated (``"early_stopping, epochs"``).
        skipped: Skipped updates in total, over all members.
        report: The ensemble's report, once every member has finished.
    """

    members: tuple[FitResult, ...] = ()


def fit_ensemble(
    run_cfg: RunConfig,
    out_dir: str | Path,
    fit_member: Callable[..., FitResult],
    *,
    resume: bool = False,
    quiet: bool = False,
    data_path: str | Path | None = None,
    stop_after_steps: int | None = None,
) -> EnsembleResult:
    """Train the ``run_cfg.train.ensemble`` members of a seed ensemble into ``out_dir``.

    Called by :func:`~stacklstm.run.fit` (same arguments, same errors); see
    :mod:`stacklstm.forecasting.ensemble` for the folder's layout and how it forecasts.

    Args:
        run_cfg: The settings, with ``ensemble`` members (``seed``: member 0's seed).
        out_dir: The ensemble's folder: absent or empty, or with ``resume=True`` an
            ensemble's folder.
        fit_member: Trains one member into its folder: :func:`~stacklstm.run.fit` itself
            (passed in, so that this module stays below the loop that dispatches to it).
        resume: Skip the finished members, resume the unfinished one, train the rest.
        quiet: No progress bar.
        data_path: CSV/Parquet table (None: the bundled data, or with ``resume`` the
            ensemble's own).
        stop_after_steps: Stop once this many updates are done over all members (counted
            member after member), as if interrupted.

    Returns:
        EnsembleResult, with the ensemble's report once every member has finished.
    """
    out_dir = Path(out_dir)
    n = run_cfg.train.ensemble
    if is_primary() and out_dir.is_dir():
        RunLock.check_free(out_dir)  # at once: another train of this folder is running
    plan = make_plan(run_cfg, out_dir, resume, data_path)  # the data and settings, resolved
    sync("stacklstm: ensemble settings checked")
    if resume:
        lock = RunLock.acquire(out_dir) if is_primary() else None
    else:
        with creating_run_dir(out_dir, writer=is_primary()) as lock:
            if is_primary():  # resumable from here on: every member is still to train
                write_run_info(out_dir, plan.info)
                (out_dir / MEMBERS_DIR).mkdir()
        sync("stacklstm: ensemble folder created")
    try:
        members: list[FitResult] = []
        done = 0  # updates of the members before the current one
        for k in range(n):
            limit = None if stop_after_steps is None else stop_after_steps - done
            result = _member(fit_member, plan.cfg, out_dir, k, plan.data_path, quiet, limit)
            if result is None:  # the step budget ended before this member
                break
            members.append(result)
            done += result.step
            if result.stop_reason == "stop_after_steps":
                break
        finished = len(members) == n and all(m.stop_reason != "stop_after_steps" for m in members)
        report = evaluate_run(out_dir, plan.data_path) if finished else None
    finally:
        if lock is not None:
            lock.release()
    reasons = ", ".join(sorted({m.stop_reason for m in members}))
    if report is not None:
        log.info("ensemble %s: %d members finished; report written", out_dir, n)
    return EnsembleResult(
        out_dir=out_dir,
        step=done,
        epochs=sum(m.epochs for m in members),
        best_val_loss=None,
        best_step=None,
        stop_reason=reasons if finished else "stop_after_steps",
        skipped=sum(m.skipped for m in members),
        report=report,
        members=tuple(members),
    )


def _member(
    fit: Callable[..., FitResult],
    cfg: RunConfig,
    out_dir: Path,
    k: int,
    data_path: Path | None,
    quiet: bool,
    limit: int | None,
) -> FitResult | None:
    """Train, resume or skip member ``k`` (None: ``limit`` allows it no update). A retrained
    member (``retrain="on"``) may have begun in its ``selection/`` only; its updates count
    both runs', as :class:`~stacklstm.run.retrain.RetrainResult` counts them."""
    folder = member_dir(out_dir, k)
    started = (folder / CONFIG_FILE).is_file() or retrain.started(folder)
    current = retrain.steps_done(folder) if started else 0
    finished = finished_result(folder) if started else None
    if finished is not None:
        log.info("ensemble member %d (%s) finished earlier", k, folder)
        return dataclasses.replace(finished, step=current)
    if limit is not None and limit <= current:
        return None
    log.info("ensemble member %d of %d: seed %d", k + 1, cfg.train.ensemble, cfg.train.seed + k)
    return fit(
        member_config(cfg, k),
        folder,
        resume=started,
        quiet=quiet,
        data_path=data_path,
        stop_after_steps=limit,
    )


__all__ = ["EnsembleResult", "fit_ensemble"]
