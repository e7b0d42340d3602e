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

Layout of ``out_dir``::

    plan.json        the settings (checked by resume)
    fold_00/, ...    a normal run folder per trained fold (``stacklstm evaluate`` works on it)
    backtest.json    per fold and per horizon step, the mean and spread over folds
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

import io
import json
import logging
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from . import baselines
from .checks import DataError, SettingError, check_positive_int, is_int
from .config import DEFAULT_FOLDS, DataConfig, RunConfig
from .data import bundled_dataset_path, make_inference_windows, prepare_series, read_table
from .data.season import resolve_data_config
from .data.splits import split_rows
from .metrics import forecast_metrics, seasonal_scale
from .train import loop
from .train.files import (
    BACKTEST_FILE,
    BACKTEST_PLOT,
    CONFIG_FILE,
    PLAN_FILE,
    REPORT_FILE,
    fold_dir_name,
)
from .train.inference import forecast, load_run
from .train.plots import COLORS
from .train.report import UNDEFINED, score_forecasts
from .train.rundir import atomic_write, atomic_write_text

log = logging.getLogger(__name__)

#: The metrics summarised over folds.
METRICS = ("mae", "rmse", "mape", "smape", "mase")


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
class _Plan:
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
        return {
            "folds": self.folds,
            "step": self.step,
            "refit": self.refit,
            "data_path": None if self.data_path is None else str(self.data_path),
            "config": self.cfg.to_dict(),
        }

    def origins(self, fold: int) -> np.ndarray:
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


def _prepare(
    cfg: RunConfig,
    out_dir: Path,
    folds: int | None,
    step: int | None,
    refit: str | int | None,
    data_path: str | Path | None,
    resume: bool,
) -> _Plan:
    """Check everything before anything is written."""
    if not isinstance(cfg, RunConfig):
        raise TypeError(f"cfg must be a RunConfig, got {type(cfg).__name__}")
    cfg.validate()
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
    baselines.require(cfg.train.baselines)
    saved = read_plan(out_dir) if resume else {}
    if resume and data_path is None and saved["data_path"] is not None:
        data_path = saved["data_path"]  # the backtest's own data, as fit's resume does
    folds = saved.get("folds", DEFAULT_FOLDS) if folds is None else folds
    refit = check_refit(saved.get("refit", "every") if refit is None else refit)
    step = saved.get("step", cfg.data.horizon) if step is None else step
    data_ref = None if data_path is None else Path(data_path).absolute()
    source = bundled_dataset_path() if data_path is None else Path(data_path)
    series = prepare_series(read_table(source), cfg.data)
    data = resolve_data_config(cfg.data, series.freq)  # "auto" season and window
    cfg = RunConfig(data=data, model=cfg.model, train=cfg.train)
    n_rows = len(series)
    cutoffs = fold_cutoffs(n_rows, data.horizon, folds, step)
    uses = model_folds(folds, refit)
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
    plan = _Plan(cfg, out_dir, data_ref, series, folds, step, refit, cutoffs, uses)
    if resume:
        differences = [
            f"{key}: {plan.settings[key]!r} != {saved.get(key)!r}"
            for key in ("folds", "step", "refit", "data_path")
            if plan.settings[key] != saved.get(key)
        ] + cfg.diff(saved["config"])
        if differences:
            raise ValueError(
                f"cannot resume {out_dir}: the settings differ from the saved backtest's "
                f"({'; '.join(differences)}); resume with the same settings or start anew"
            )
    elif out_dir.exists() and (not out_dir.is_dir() or any(out_dir.iterdir())):
        what = "already holds a backtest" if (out_dir / PLAN_FILE).exists() else "is not empty"
        raise ValueError(
            f"output folder {out_dir} {what}; pass `resume=True` to continue it or choose "
            "another `out_dir`"
        )
    return plan


def _train_folds(plan: _Plan, quiet: bool, callbacks: Sequence[Any]) -> None:
    """Train each refitted fold's run folder, or resume it; a finished one is kept."""
    n_rows = len(plan.series)
    for fold in sorted(set(plan.uses)):
        run_dir = plan.out_dir / fold_dir_name(fold)
        if (run_dir / REPORT_FILE).exists():  # written last, once training has finished
            continue
        resume = (run_dir / CONFIG_FILE).exists()
        if run_dir.exists() and not resume:  # killed while being created: nothing to keep
            shutil.rmtree(run_dir)
        log.info("fold %d: training on rows 0-%d", fold, plan.cutoffs[fold])
        fold_cfg = fold_config(plan.cfg, n_rows, plan.cutoffs[fold])
        loop.fit(fold_cfg, run_dir, resume=resume, quiet=quiet, data_path=plan.data_path,
            callbacks=callbacks)  # fmt: skip


def _per_step(y_true: np.ndarray, values: np.ndarray, scale: np.ndarray) -> list[dict]:
    return [
        forecast_metrics(y_true[:, s : s + 1], values[:, s : s + 1], scale)
        for s in range(y_true.shape[1])
    ]


def _spread(per_fold: list[dict[str, Any] | None]) -> dict[str, Any] | None:
    """``{"mean": {metric: ...}, "std": {...}}`` over folds (None if a fold has none)."""
    if any(m is None for m in per_fold):
        return None
    out: dict[str, Any] = {"mean": {}, "std": {}}
    for key in METRICS:
        values = [m[key] for m in per_fold]
        if any(v is None for v in values):
            out["mean"][key] = out["std"][key] = None
            continue
        out["mean"][key] = float(np.mean(values))
        out["std"][key] = float(np.std(values))
    return out


def _score(plan: _Plan) -> dict[str, Any]:
    """Every fold's forecasts of the model and the baselines, scored on the same targets."""

    data, series, kind = plan.cfg.data, plan.series, plan.cfg.train.baselines
    nt, season = len(data.target), data.season
    origins = np.concatenate([plan.origins(k) for k in range(plan.folds)])
    refits = sorted(set(plan.uses))
    statistical = {}
    if kind == "all":  # one pass over all origins, refitted where the model is
        history = series.values[:, :nt]
        refit_at = [plan.cutoffs[k] for k in refits]
        statistical = baselines.statistical_forecasts(
            history, origins, data.horizon, season, refit_at
        )
    runs = {k: load_run(plan.out_dir / fold_dir_name(k)) for k in refits}
    folds = []
    for k in range(plan.folds):
        run = runs[plan.uses[k]]
        windows = make_inference_windows(series, run.info.config.data, run.info.scaler)
        windows = windows.take(np.isin(windows.origin, plan.origins(k)))
        rows = slice(k * plan.step, (k + 1) * plan.step)
        forecasts = {
            "model": forecast(run, windows),
            "last_value": windows.last_value,
            "seasonal_naive": windows.seasonal_naive(season),
            **{
                name: None if values is None else values[rows]
                for name, values in statistical.items()
            },
        }
        scale = seasonal_scale(series.values[: plan.cutoffs[k] + 1, :nt], season)
        scores = score_forecasts(windows.y_true, forecasts, scale)
        by_step = {
            name: None if scores[name] is None else _per_step(windows.y_true, values, scale)
            for name, values in forecasts.items()
        }
        cutoff_time = None if series.times is None else str(series.times[plan.cutoffs[k]])
        folds.append(
            {
                "fold": k,
                "cutoff": plan.cutoffs[k],
                "cutoff_time": cutoff_time,
                "origins": [int(windows.origin[0]), int(windows.origin[-1])],
                "model_fold": plan.uses[k],
                "n_scored": int(windows.y_true[..., 0].size),
                "scores": scores,
                "by_step": by_step,
            }
        )
    names = list(folds[0]["scores"])
    summary = {}
    for name in names:
        overall = _spread([f["scores"][name] for f in folds])
        steps = None
        if all(f["by_step"][name] is not None for f in folds):
            steps = [_spread([f["by_step"][name][s] for f in folds]) for s in range(data.horizon)]
        summary[name] = {"overall": overall, "by_step": steps}
    return {
        "settings": plan.settings,
        "horizon": data.horizon,
        "season": season,
        "targets": list(data.target),
        "baselines": kind,
        "cutoffs": plan.cutoffs,
        "folds": folds,
        "summary": summary,
    }


def format_table(result: dict[str, Any]) -> str:
    """Mean (std) over folds of MAE, RMSE and MASE per forecaster; ``*`` marks the best mean."""
    summary = result["summary"]
    keys = ("mae", "rmse", "mase")
    best = {}
    for key in keys:
        scored = {
            name: s["overall"]["mean"][key]
            for name, s in summary.items()
            if s["overall"] is not None and s["overall"]["mean"][key] is not None
        }
        best[key] = min(scored, key=scored.get) if scored else None
    head = "".join(f"{k.upper() + ' mean (std)':>24}" for k in keys)
    lines = [f"{'forecaster':<16}{head}"]
    for name, s in summary.items():
        if s["overall"] is None:
            lines.append(f"{name:<16}{'n/a (no finite forecasts)':>36}")
            continue
        cells = []
        for key in keys:
            mean, std = s["overall"]["mean"][key], s["overall"]["std"][key]
            text = "n/a" if mean is None else f"{mean:.4f} ({std:.4f})"
            cells.append(f"{text + ('*' if best[key] == name else ' '):>24}")
        lines.append(f"{name:<16}{''.join(cells)}".rstrip())
    lines += _undefined_notes(summary, keys)
    settings = result["settings"]
    lines.append(
        f"{settings['folds']} folds of {settings['step']} origins, horizon {result['horizon']}, "
        f"refit {settings['refit']}; cut-offs at rows {result['cutoffs']}"
    )
    return "\n".join(lines)


def _undefined_notes(summary: dict[str, Any], keys: Sequence[str]) -> list[str]:
    """One note line per shown metric that a forecaster with forecasts has no mean of
    (``n/a``: undefined in some fold), saying why (:data:`stacklstm.train.report.UNDEFINED`)."""

    lines = []
    for key in keys:
        if key in UNDEFINED and any(
            s["overall"] is not None and s["overall"]["mean"][key] is None for s in summary.values()
        ):
            lines.append(f"{key.upper()} n/a: in some fold {UNDEFINED[key]}")
    return lines


def _plot(path: Path, result: dict[str, Any]) -> None:
    """MAE by fold (left) and mean MAE over folds by horizon step (right), per forecaster."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (by_fold, by_step) = plt.subplots(1, 2, figsize=(11, 4))
    for name, s in result["summary"].items():
        if s["overall"] is None:
            continue
        style = {"lw": 2} if name == "model" else {"lw": 1, "alpha": 0.7}
        style["color"] = COLORS[name]
        maes = [f["scores"][name]["mae"] for f in result["folds"]]
        by_fold.plot(range(len(maes)), maes, "o-", ms=3, label=name, **style)
        steps = [m["mean"]["mae"] for m in s["by_step"]]
        by_step.plot(range(1, len(steps) + 1), steps, "o-", ms=3, label=name, **style)
    by_fold.set(xlabel="fold", ylabel="MAE", title="error by fold")
    by_fold.set_xticks(range(len(result["folds"])))
    by_step.set_xticks(range(1, result["horizon"] + 1))
    by_step.set(xlabel="horizon step", ylabel="mean MAE over folds", title="error by step")
    by_fold.legend(fontsize=8)
    fig.tight_layout()
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    plt.close(fig)
    atomic_write(path, lambda handle: handle.write(buffer.getvalue()))


@dataclass(frozen=True)
class BacktestResult:
    """What :func:`backtest` did: ``data`` is what ``backtest.json`` holds."""

    out_dir: Path
    data: dict[str, Any]
    table: str


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
        cfg: Data, model and training settings, as for :func:`stacklstm.train.fit`
            (``test_fraction`` is not used: the folds are the test).
        out_dir: The backtest folder: absent or empty, or an earlier one with ``resume``.
        folds: Cut-offs (see the module's docstring); default :data:`DEFAULT_FOLDS`.
        step: Origins per fold, the steps between cut-offs (default: the horizon).
        refit: ``"every"`` (the default), ``"never"`` or train at every ``N``-th cut-off.
        data_path: CSV/Parquet table (None: the bundled CO2 data).
        resume: Continue the backtest in ``out_dir``; settings left as None take the saved
            values, and the others must equal them.
        quiet: No progress bars.
        callbacks: Epoch callbacks of every fold's :func:`~stacklstm.train.fit`.

    Returns:
        BacktestResult; ``backtest.json`` and ``backtest.png`` are written in ``out_dir``.

    Raises:
        ValueError: A bad setting or an impossible layout (too many folds, a step of 0, a
            first fold with too few rows for a window, a seed ensemble), found before
            anything is written.
    """
    out_dir = Path(out_dir)
    if isinstance(cfg, RunConfig) and cfg.train.ensemble > 1:
        raise SettingError(
            f"backtest trains one model per fold, but `ensemble` is {cfg.train.ensemble}; "
            "backtest with `ensemble=1`",
            "ensemble",
        )
    plan = _prepare(cfg, out_dir, folds, step, refit, data_path, resume)

    if not resume:
        out_dir.mkdir(parents=True, exist_ok=True)
        atomic_write_text(out_dir / PLAN_FILE, json.dumps(plan.settings, indent=2) + "\n")
    _train_folds(plan, quiet, callbacks)
    data = _score(plan)
    atomic_write_text(out_dir / BACKTEST_FILE, json.dumps(data, indent=2, allow_nan=False) + "\n")
    _plot(out_dir / BACKTEST_PLOT, data)
    return BacktestResult(out_dir, data, format_table(data))


__all__ = [
    "BacktestResult", "backtest", "check_refit", "fold_config", "fold_cutoffs", "model_folds",
]  # fmt: skip
