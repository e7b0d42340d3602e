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
from ..data import bundled_dataset_path, read_table
from ..data.splits import split_rows
from ..train.files import PLAN_FILE
from ..train.plan import check_settings, refuse_resume
from ..train.resolve import prepare_resolved


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
    ``val_fraction`` of them."""
    return data.val_size if data.val_size is not None else round(data.val_fraction * n_fit)


def fold_config(cfg: RunConfig, n_rows: int, cutoff: int) -> RunConfig:
    """The run settings of a fold: rows ``0 .. cutoff`` for training and validation (the
    last ``val_fraction`` of them, or ``val_size``), the rest as the run's test, naive
    baselines in its own report (the backtest scores the statistical ones itself)."""
    n_fit = cutoff + 1
    n_val = fold_val_rows(cfg.data, n_fit)
    n_test = n_rows - n_fit
    if cfg.data.val_size is None and cfg.data.test_size is None:
        rows = {"val_fraction": n_val / n_rows, "test_fraction": n_test / n_rows}
    else:  # sizes: the fold's rows exactly (the fractions left at their defaults, unused)
        default = DataConfig()
        rows = {"val_size": n_val, "test_size": n_test, "val_fraction": default.val_fraction,
                "test_fraction": default.test_fraction}  # fmt: skip
    fold = cfg.replace({"data": rows, "train": {"baselines": "naive"}})
    if split_rows(n_rows, fold.data) != (n_fit - n_val, n_val, n_test):  # pragma: no cover
        raise RuntimeError(f"the fractions of the fold at {cutoff} do not give its rows back")
    return fold


@dataclass(frozen=True)
class BacktestPlan:
    """Everything a backtest checked before writing: its settings (``"auto"`` resolved for
    the data), the series, and the folds (cut-offs, and the fold whose model each uses)."""

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

    def origins(self, fold: int) -> np.ndarray:
        """``(step,)`` int64: the origins fold ``fold`` forecasts from."""
        return np.arange(self.cutoffs[fold], self.cutoffs[fold] + self.step)


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
        SettingError: A bad setting, a panel, covariates, or more folds than the rows allow.
        DataError: A trained fold with too few rows for a window, or a validation tail
            shorter than the horizon.
        ValueError: ``resume`` with other settings, or a new backtest in a used folder.
    """
    check_settings(cfg, "cfg", require_baselines=False)
    _check_supported(cfg)
    baselines.require(cfg.train.baselines)
    saved = read_plan(out_dir) if resume else {}
    if resume and data_path is None and saved["data_path"] is not None:
        data_path = saved["data_path"]  # the backtest's own data, as fit's resume does
    folds = saved.get("folds", DEFAULT_FOLDS) if folds is None else folds
    refit = check_refit(saved.get("refit", "every") if refit is None else refit)
    step = saved.get("step", cfg.data.horizon) if step is None else step
    data_ref = None if data_path is None else Path(data_path).absolute()
    source = bundled_dataset_path() if data_path is None else Path(data_path)
    series, cfg = prepare_resolved(read_table(source), cfg)  # "auto" season and window
    cutoffs = fold_cutoffs(len(series), cfg.data.horizon, folds, step)
    uses = model_folds(folds, refit)
    _check_fold_rows(cfg.data, cutoffs, uses)
    plan = BacktestPlan(cfg, out_dir, data_ref, series, folds, step, refit, cutoffs, uses)
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


def _check_supported(cfg: RunConfig) -> None:
    """One series without covariates (SettingError otherwise)."""
    if cfg.data.id_column is not None:
        raise SettingError(
            "backtest runs on one series; a panel (`id_column`) is not supported yet: "
            "train it with stacklstm train, whose report scores every series",
            "id_column",
        )
    if cfg.data.has_covariates:
        raise SettingError(
            "backtest does not take covariates yet (future_features, static_features, "
            "calendar='auto'): train with them through stacklstm train, whose report scores "
            "the test origins",
            "future_features",
        )


def _check_fold_rows(data: DataConfig, cutoffs: list[int], uses: list[int]) -> None:
    """Each fold that trains a model has a training window and a validation tail of at
    least ``horizon`` rows (or none); ``data`` resolved."""
    needed = data.window + data.horizon + int(data.difference)
    for fold in sorted(set(uses)):  # the folds that train a model
        n_fit = cutoffs[fold] + 1
        n_val = fold_val_rows(data, n_fit)
        if n_fit - n_val < needed:
            raise DataError(
                f"fold {fold}'s cut-off leaves {n_fit} rows, {n_fit - n_val} for training "
                f"after the validation tail (val_fraction={data.val_fraction}), but window + "
                f"horizon need {needed}; lower `folds` or `step`"
            )
        if 0 < n_val < data.horizon:
            raise DataError(
                f"fold {fold}'s validation tail has {n_val} rows, fewer than horizon "
                f"({data.horizon}); raise `val_fraction` or set it to 0"
            )


__all__ = [
    "BacktestPlan", "check_refit", "fold_config", "fold_cutoffs", "fold_val_rows", "model_folds",
    "prepare_backtest", "read_plan",
]  # fmt: skip
