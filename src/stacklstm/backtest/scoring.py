"""Scoring a backtest: every fold's forecasts of the model and the baselines on the same
targets, the mean and spread over folds, the table and the plot."""

from __future__ import annotations

import io
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .. import baselines
from ..data import make_inference_windows
from ..metrics import forecast_metrics, seasonal_scale
from ..train.files import fold_dir_name
from ..train.inference import forecast, load_run
from ..train.plots import COLORS
from ..train.report import UNDEFINED, score_forecasts
from ..train.rundir import atomic_write
from .folds import BacktestPlan

#: The metrics summarised over folds.
METRICS = ("mae", "rmse", "mape", "smape", "mase")


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


def score_folds(plan: BacktestPlan) -> dict[str, Any]:
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


def plot_backtest(path: Path, result: dict[str, Any]) -> None:
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


__all__ = ["METRICS", "format_table", "plot_backtest", "score_folds"]
