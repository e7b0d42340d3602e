"""The folds of a backtest: cut-offs, which fold's model forecasts each, each fold's run
settings, and the plan every check is made on before anything is written.

Example:
    >>> fold_cutoffs(n_rows=20, horizon=2, folds=3, step=4)
    [6, 10, 14]
    >>> model_folds(5, 2)
    [0, 0, 2, 2, 4]
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import baselines
from ..checks import DataError, SettingError, check_positive_int, is_int
from ..config import DEFAULT_FOLDS, DataConfig, RunConfig
from ..config.auto import fold_retrain_of
from ..data import bundled_dataset_path, read_table
from ..data.splits import split_rows
from ..rundir.files import PLAN_FILE
from ..train.plan import check_settings, refuse_resume
from ..train.resolve import prepare_resolved, saved_init


def check_refit(refit: object) -> str | int:
    """``refit`` if it is ``"every"``, ``"never"`` or an integer >= 1."""
    if refit in ("every", "never"):
        return str(refit)
    if is_int(refit) and refit >= 1:
        return int(refit)
    raise SettingError(f"refit must be 'every', 'never' or an integer >= 1, got {refit!r}", "refit")


def fold_cutoffs(n_rows: int, horizon: int, folds: int, step: int) -> list[int]:
    """The cut-off of each fold: the last row its model (and its first forecast) sees.

    Raises:
        SettingError: ``folds`` or ``step`` below 1, or more folds than the rows allow.
    """
    check_positive_int("folds", folds)
    check_positive_int("step", step)
    first = n_rows - horizon - step * folds
    if first < 0:
        raise SettingError(
            f"{folds} folds of {step} origins with horizon {horizon} need at least "
            f"{step * folds + horizon} rows, but the data has {n_rows}; lower `folds` or `step`"
        )
    return [first + step * k for k in range(folds)]


def model_folds(folds: int, refit: str | int) -> list[int]:
    """For each fold, the fold whose model forecasts it (the last refit at or before it)."""
    refit = check_refit(refit)
    every = {"every": 1, "never": folds}.get(refit, refit)  # type: ignore[arg-type]
    return [k - k % every for k in range(folds)]


def fold_val_rows(data: Any, n_fit: int) -> int:
    """Validation rows of a fold whose model sees ``n_fit`` rows: ``val_size``, else the
    ``val_fraction`` of them, at least ``horizon`` unless the fraction is 0 (as
    :func:`~stacklstm.data.splits.split_rows` gives a fraction's rows)."""
    if data.val_size is not None:
        return data.val_size
    rows = round(data.val_fraction * n_fit)
    return max(rows, data.horizon) if data.val_fraction > 0 else rows


def fold_config(cfg: RunConfig, n_rows: int, cutoff: int, n_val: int | None = None) -> RunConfig:
    """The run settings of a fold: rows ``0 .. cutoff`` for training and validation (the
    last ``val_fraction`` of them, or ``val_size``), the rest as the run's test, naive
    baselines in its own report (the backtest scores the statistical ones itself).

    ``n_val`` given (a panel's fold): exactly ``n_val`` validation rows and the ``n_rows - 1
    - cutoff`` rows after the cut-off as test rows of every series, as sizes (every series
    of the panel ends ``n_rows - 1 - cutoff`` rows after its cut-off)."""
    n_fit = cutoff + 1
    n_test = n_rows - n_fit
    if n_val is None:
        n_val = fold_val_rows(cfg.data, n_fit)
        sizes = cfg.data.val_size is not None or cfg.data.test_size is not None
    else:
        sizes = True
    if not sizes:
        rows = {"val_fraction": n_val / n_rows, "test_fraction": n_test / n_rows}
    else:  # sizes: the fold's rows exactly (the fractions left at their defaults, unused)
        default = DataConfig()
        rows = {
            "val_size": n_val,
            "test_size": n_test,
            "val_fraction": default.val_fraction,
            "test_fraction": default.test_fraction,
        }
    fold = cfg.replace(
        {
            "data": rows,
            "train": {
                "baselines": "naive",
                "retrain": fold_retrain_of(
                    cfg.train.retrain, cfg.data.id_column is not None, n_val
                ),
            },
        }
    )
    if split_rows(n_rows, fold.data) != (n_fit - n_val, n_val, n_test):  # pragma: no cover
        raise RuntimeError(f"the fractions of the fold at {cutoff} do not give its rows back")
    return fold


@dataclass(frozen=True)
class BacktestPlan:
    """Everything a backtest checked before writing: its settings (``"auto"`` resolved for
    the data), the series, and the folds (cut-offs, and the fold whose model each uses).

    ``cutoffs`` are rows of the longest series (of the one series); a panel's series are
    cut at the same rows counted from each series' end (with time stamps, every series
    ends at the same stamp, so they are cut at the same stamps): see :meth:`series_cutoffs`.
    """

    cfg: RunConfig
    out_dir: Path
    data_path: Path | None
    series: Any
    folds: int
    step: int
    refit: str | int
    cutoffs: list[int]
    uses: list[int]

    @property
    def settings(self) -> dict[str, Any]:
        """What ``plan.json`` holds (and ``resume`` compares)."""
        return {
            "folds": self.folds,
            "step": self.step,
            "refit": self.refit,
            "data_path": None if self.data_path is None else str(self.data_path),
            "config": self.cfg.to_dict(),
        }

    @property
    def lengths(self) -> np.ndarray:
        """``(n_series,)`` int64: the rows of each series."""
        return np.diff(self.series.bounds)

    @property
    def n_rows(self) -> int:
        """Rows of the longest series (of the one series)."""
        return int(self.lengths.max())

    def series_cutoffs(self, fold: int) -> np.ndarray:
        """``(n_series,)`` int64: fold ``fold``'s cut-off in each series' own rows."""
        return self.cutoffs[fold] - (self.n_rows - self.lengths)

    def fold_config(self, fold: int) -> RunConfig:
        """The run settings of fold ``fold`` (:func:`fold_config`)."""
        if self.series.ids is None:
            return fold_config(self.cfg, self.n_rows, self.cutoffs[fold])
        n_val = fold_val_rows(self.cfg.data, int(self.series_cutoffs(fold).min()) + 1)
        return fold_config(self.cfg, self.n_rows, self.cutoffs[fold], n_val)

    def origins(self, fold: int) -> np.ndarray:
        """``(n_series * step,)`` int64: the origins fold ``fold`` forecasts from, as rows of
        ``series`` (series after series; for one series its own rows)."""
        starts = self.series.bounds[:-1] + self.series_cutoffs(fold)
        return (starts[:, None] + np.arange(self.step)).reshape(-1)


def read_plan(out_dir: str | Path) -> dict[str, Any]:
    """The settings saved in ``out_dir/plan.json`` (``config`` as a RunConfig)."""
    path = Path(out_dir) / PLAN_FILE
    if not path.is_file():
        raise ValueError(f"{out_dir} holds no backtest to resume: it has no {PLAN_FILE}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
        raw["config"] = RunConfig.from_dict(raw["config"], saved=True)
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
        raise ValueError(f"cannot read {path}: {err}") from err
    return raw


def prepare_backtest(
    cfg: RunConfig,
    out_dir: Path,
    folds: int | None,
    step: int | None,
    refit: str | int | None,
    data_path: str | Path | None,
    resume: bool,
) -> BacktestPlan:
    """Check everything before anything is written: the settings as a run's plan checks
    them (:func:`~stacklstm.train.plan.check_settings`), the data read and its ``"auto"``
    settings resolved (:func:`~stacklstm.train.resolve.prepare_resolved`), the folds' rows,
    and with ``resume`` the saved backtest's settings.

    Raises:
        TypeError: ``cfg`` is not a RunConfig.
        SettingError: A bad setting, or more folds than the (shortest series') rows allow.
        DataError: A trained fold with too few rows for a window (in some series of a
            panel), a validation tail shorter than the horizon, or a panel whose series end
            at other time stamps.
        ValueError: ``resume`` with other settings, or a new backtest in a used folder.
    """
    check_settings(cfg, "cfg", require_baselines=False)
    baselines.require(cfg.train.baselines)
    saved = read_plan(out_dir) if resume else {}
    if resume and data_path is None and saved["data_path"] is not None:
        data_path = saved["data_path"]  # the backtest's own data, as fit's resume does
    folds = saved.get("folds", DEFAULT_FOLDS) if folds is None else folds
    refit = check_refit(saved.get("refit", "every") if refit is None else refit)
    step = saved.get("step", cfg.data.horizon) if step is None else step
    data_ref = None if data_path is None else Path(data_path).absolute()
    source = bundled_dataset_path() if data_path is None else Path(data_path)
    cfg = saved_init(cfg, saved.get("config"))
    series, cfg = prepare_resolved(read_table(source), cfg)  # "auto" season and window
    lengths = np.diff(series.bounds)
    _check_common_end(series)
    # the shortest series sets how many folds fit; the cut-offs are the longest's rows
    try:
        shortest = fold_cutoffs(int(lengths.min()), cfg.data.horizon, folds, step)
    except SettingError as err:
        if series.ids is None:
            raise
        name = series.ids[int(np.argmin(lengths))]
        raise SettingError(f"{err} (the panel's shortest series, {name!r})") from err
    cutoffs = [c + int(lengths.max() - lengths.min()) for c in shortest]
    uses = model_folds(folds, refit)
    plan = BacktestPlan(cfg, out_dir, data_ref, series, folds, step, refit, cutoffs, uses)
    _check_fold_rows(plan)
    if resume:
        differences = [
            f"{key}: {plan.settings[key]!r} != {saved.get(key)!r}"
            for key in ("folds", "step", "refit", "data_path")
            if plan.settings[key] != saved.get(key)
        ] + cfg.diff(saved["config"])
        refuse_resume(out_dir, differences, "backtest")
    elif out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        what = "already holds a backtest" if (out_dir / PLAN_FILE).exists() else "is not empty"
        raise ValueError(
            f"output folder {out_dir} {what}; pass `resume=True` to continue it or choose "
            "another `out_dir`"
        )
    return plan


def _check_common_end(series: Any) -> None:
    """A panel with time stamps: every series ends at the same stamp, so that the cut-offs
    counted back from each series' end are the same stamps (DataError otherwise)."""
    if series.ids is None or series.times is None:
        return
    ends = series.times[series.bounds[1:] - 1]
    late = int(np.argmax(ends))
    early = int(np.argmin(ends))
    if ends[late] != ends[early]:
        raise DataError(
            f"backtest cuts every series of a panel at the same time stamps, counted back from "
            f"the end, but series {series.ids[early]!r} ends at {ends[early]} and "
            f"{series.ids[late]!r} at {ends[late]}; give series that end at the same stamp "
            "(drop the later rows or the series that end early)"
        )


def _check_fold_rows(plan: BacktestPlan) -> None:
    """Each fold that trains a model has, in every series, a training window and a
    validation tail of at least ``horizon`` rows (or none); ``plan.cfg`` resolved."""
    data = plan.cfg.data
    needed = data.window_rows
    ids = plan.series.ids
    for fold in sorted(set(plan.uses)):  # the folds that train a model
        panel_val = fold_val_rows(data, int(plan.series_cutoffs(fold).min()) + 1)
        for i, cutoff in enumerate(plan.series_cutoffs(fold)):
            n_fit = int(cutoff) + 1
            n_val = fold_val_rows(data, n_fit) if ids is None else panel_val
            which = f"fold {fold}'s cut-off" + ("" if ids is None else f" in series {ids[i]!r}")
            if n_fit - n_val < needed:
                how = (
                    f"val_fraction={data.val_fraction}"
                    if data.val_size is None
                    else f"val_size={data.val_size}"
                )
                raise DataError(
                    f"{which} leaves {n_fit} rows, {n_fit - n_val} for training "
                    f"after the validation tail ({how}), but window + "
                    f"horizon need {needed}; lower `folds` or `step`"
                )
            if 0 < n_val < data.horizon:
                raise DataError(
                    f"fold {fold}'s validation tail has {n_val} rows, fewer than horizon "
                    f"({data.horizon}); raise `val_size` or set it to 0"
                )


__all__ = [
    "BacktestPlan",
    "check_refit",
    "fold_config",
    "fold_cutoffs",
    "fold_val_rows",
    "model_folds",
    "prepare_backtest",
    "read_plan",
]
