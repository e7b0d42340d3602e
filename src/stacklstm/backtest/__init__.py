"""Rolling-origin backtests: train at several cut-offs, forecast every origin up to the next.

With ``T`` rows, horizon ``h``, ``folds=K`` and ``step=S``, fold ``k`` (``0 .. K-1``) has the
cut-off ``c_k = T - h - S * (K - k)``: its model is trained on rows ``0 .. c_k`` (the last
``val_fraction`` of them for validation and early stopping; ``test_fraction`` is not used)
and forecasts from every origin ``c_k .. c_k + S - 1``. The folds' origins are contiguous,
the last one's last target is the last row, and every forecast's targets are inside the data.

``refit="every"`` trains a model at every cut-off, ``"never"`` only at the first (later folds
reuse it with the values observed up to their origins), an integer ``N`` at folds ``0, N,
2N, ...``. The statistical baselines are fitted on the same schedule (statsforecast's
``cross_validation(h, n_windows=K*S, step_size=1, refit=False | S*N)``); every forecaster is
scored on the same targets.

A panel (``id_column``) is cut series by series at the same cut-offs: the same rows counted
back from each series' end (with time stamps every series must end at the same stamp, so
these are the same stamps). Each fold trains one run on every series' rows up to its
cut-off; its scores pool the series (MASE: the mean of each series' MASE, each scaled by its
own rows up to the cut-off, as a run's report scores a panel), and ``per_series`` holds each
series' scores; the statistical baselines are fitted on each series alone. A fold has the
same number of validation rows in every series: ``val_size``, else the ``val_fraction`` of
the shortest series' rows up to the cut-off.

Covariates (``features``, ``future_features``, ``static_features``, ``calendar="auto"``)
are taken from the table: a fold's forecasts read the known-future values of the rows after
its cut-off, which are in the table (every forecast's targets are inside the data).

With ``ensemble=N`` every trained fold is a seed ensemble's folder (as ``fit`` writes it):
the fold's model forecast is the median of its members'.

Layout of ``out_dir``::

    plan.json        the settings (checked by resume)
    fold_00/, ...    a normal run folder per trained fold (``stacklstm evaluate`` works on it)
    backtest.json    per fold and per horizon step, the mean and spread over folds
                     (a panel's also per series)
    backtest.png     error by fold and by horizon step

A killed backtest continues with ``resume=True``: finished folds are kept, an interrupted
fold resumes from its checkpoint, and the numbers are those of an uninterrupted backtest.

Example:
    >>> fold_cutoffs(n_rows=20, horizon=2, folds=3, step=4)
    [6, 10, 14]
    >>> model_folds(5, "never"), model_folds(5, 2), model_folds(3, "every")
    ([0, 0, 0, 0, 0], [0, 0, 2, 2, 4], [0, 1, 2])
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checks import SettingError
from ..config import RunConfig
from ..run import loop
from ..rundir.files import (
    BACKTEST_FILE,
    BACKTEST_PLOT,
    CONFIG_FILE,
    PLAN_FILE,
    REPORT_FILE,
    fold_dir_name,
)
from ..rundir.folder import atomic_write_text
from .folds import (
    BacktestPlan,
    check_refit,
    fold_config,
    fold_cutoffs,
    fold_val_rows,
    model_folds,
    prepare_backtest,
    read_plan,
)
from .scoring import METRICS, fold_forecasts, format_table, plot_backtest, score_folds

log = logging.getLogger(__name__)


def _train_folds(plan: BacktestPlan, quiet: bool, callbacks: Sequence[Any]) -> None:
    """Train each refitted fold's run folder, or resume it; a finished one is kept."""
    for fold in sorted(set(plan.uses)):
        run_dir = plan.out_dir / fold_dir_name(fold)
        if (run_dir / REPORT_FILE).exists():  # written last, once training has finished
            continue
        resume = (run_dir / CONFIG_FILE).exists()
        if run_dir.exists() and not resume:  # killed while being created: nothing to keep
            shutil.rmtree(run_dir)
        log.info("fold %d: training on rows 0-%d", fold, plan.cutoffs[fold])
        loop.fit(
            plan.fold_config(fold),
            run_dir,
            resume=resume,
            quiet=quiet,
            data_path=plan.data_path,
            callbacks=callbacks,
        )


@dataclass(frozen=True)
class BacktestResult:
    """What :func:`backtest` did: ``data`` is what ``backtest.json`` holds; ``forecasts``
    has each fold's forecasts (:func:`~.scoring.fold_forecasts`): ``"origin"`` ``(n,)``
    rows of the series, ``"series"`` ``(n,)`` the series' positions, ``"y_true"`` and every
    forecaster's ``(n, horizon, n_targets)`` (None where it has none)."""

    out_dir: Path
    data: dict[str, Any]
    table: str
    forecasts: tuple[dict[str, Any], ...] = ()


def backtest(
    cfg: RunConfig,
    out_dir: str | Path,
    *,
    folds: int | None = None,
    step: int | None = None,
    refit: str | int | None = None,
    data_path: str | Path | None = None,
    resume: bool = False,
    quiet: bool = False,
    callbacks: Sequence[Any] = (),
) -> BacktestResult:
    """Rolling-origin backtest of the model ``cfg`` describes, next to the baselines.

    Args:
        cfg: Data, model and training settings, as for :func:`stacklstm.run.fit`
            (``test_fraction`` is not used: the folds are the test).
        out_dir: The backtest folder: absent or empty, or an earlier one with ``resume``.
        folds: Cut-offs (see the module's docstring); default :data:`DEFAULT_FOLDS`.
        step: Origins per fold, the steps between cut-offs (default: the horizon).
        refit: ``"every"`` (the default), ``"never"`` or train at every ``N``-th cut-off.
        data_path: CSV/Parquet table (None: the bundled CO2 data).
        resume: Continue the backtest in ``out_dir``; settings left as None take the saved
            values, and the others must equal them.
        quiet: No progress bars.
        callbacks: Epoch callbacks of every fold's :func:`~stacklstm.run.fit`.

    Returns:
        BacktestResult; ``backtest.json`` and ``backtest.png`` are written in ``out_dir``.

    Raises:
        ValueError: A bad setting or an impossible layout (too many folds, a step of 0, a
            first fold with too few rows for a window, a panel whose series end at other
            time stamps, callbacks with a seed ensemble), found before anything is written.
    """
    out_dir = Path(out_dir)
    if isinstance(cfg, RunConfig) and cfg.train.ensemble > 1 and callbacks:
        raise SettingError(
            f"callbacks follow one model's epochs, but `ensemble` is {cfg.train.ensemble} "
            "(several models per fold, one after another); backtest with `ensemble=1` to "
            "use callbacks",
            "ensemble",
        )
    plan = prepare_backtest(cfg, out_dir, folds, step, refit, data_path, resume)

    if not resume:
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out_dir / PLAN_FILE, json.dumps(plan.settings, indent=2) + "\n")
    _train_folds(plan, quiet, callbacks)
    data, forecasts = fold_forecasts(plan)
    atomic_write_text(out_dir / BACKTEST_FILE, json.dumps(data, indent=2, allow_nan=False) + "\n")
    plot_backtest(out_dir / BACKTEST_PLOT, data)
    return BacktestResult(out_dir, data, format_table(data), tuple(forecasts))


__all__ = [
    "METRICS",
    "BacktestPlan",
    "BacktestResult",
    "backtest",
    "check_refit",
    "fold_config",
    "fold_cutoffs",
    "fold_forecasts",
    "fold_val_rows",
    "format_table",
    "model_folds",
    "prepare_backtest",
    "read_plan",
    "score_folds",
]
