"""Scoring a backtest: every fold's forecasts of the model and the baselines on the same
targets, the mean and spread over folds, the table and the plot."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .. import baselines
from ..data import make_inference_windows
from ..forecasting.inference import forecast, load_run
from ..metrics import forecast_metrics, seasonal_scale
from ..plots.style import (
    color_of,
    legend_below,
    plain_log_axis,
    save_figure,
)
from ..report.evaluate import UNDEFINED, score_forecasts
from ..rundir.files import fold_dir_name
from .folds import BacktestPlan

#: The metrics summarised over folds.
METRICS = ("mae", "rmse", "mape", "smape", "mase")


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


def _statistical(plan: BacktestPlan) -> list[dict[str, np.ndarray | None]]:
    """Each series' statistical forecasts (``baselines="all"``; else ``{}`` each) from every
    origin of every fold, in one pass per series refitted where the model is:
    ``{name: (folds * step, horizon, n_targets)}`` per series."""
    data, series = plan.cfg.data, plan.series
    if plan.cfg.train.baselines != "all":
        return [{} for _ in range(series.n_series)]
    refits = sorted(set(plan.uses))
    out = []
    for i, start in enumerate(series.bounds[:-1]):
        cutoffs = [int(plan.series_cutoffs(k)[i]) for k in range(plan.folds)]
        history = series.values[start : series.bounds[i + 1], : len(data.target)]
        origins = np.concatenate([np.arange(c, c + plan.step) for c in cutoffs])
        refit_at = [cutoffs[k] for k in refits]
        out.append(
            baselines.statistical_forecasts(history, origins, data.horizon, data.season, refit_at)
        )
    return out


def _pooled(
    y_true: np.ndarray,
    values: np.ndarray,
    parts: list[tuple[np.ndarray, np.ndarray]],
) -> dict[str, Any]:
    """The metrics of a panel's forecasts over all its series; MASE the mean of each series'
    finite MASE (``parts``: each series' ``(rows, scale)``), as a run's report pools it."""
    out = forecast_metrics(y_true, values, None)
    each = [forecast_metrics(y_true[rows], values[rows], scale)["mase"] for rows, scale in parts]
    finite = [v for v in each if v is not None and np.isfinite(v)]
    out["mase"] = float(np.mean(finite)) if finite else None
    return out


def _fold_scores(
    y_true: np.ndarray, forecasts: dict[str, np.ndarray | None], parts: list[tuple[Any, Any]]
) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
    """``(scores, by_step, per series scores)`` of one fold's forecasts (``parts``: each
    series' ``(rows, scale)``; one part for one series)."""
    per_series = [
        score_forecasts(
            y_true[rows], {n: None if f is None else f[rows] for n, f in forecasts.items()}, scale
        )
        for rows, scale in parts
    ]
    scores = per_series[0]
    if len(parts) > 1:  # a panel: its series pooled (None where some forecast is not finite)
        scores = {
            name: None
            if values is None or not np.isfinite(values).all()
            else _pooled(y_true, values, parts)
            for name, values in forecasts.items()
        }
    by_step: dict[str, Any] = {}
    for name, values in forecasts.items():
        if scores[name] is None:
            by_step[name] = None
            continue
        steps = []
        for s in range(y_true.shape[1]):
            one = (y_true[:, s : s + 1], values[:, s : s + 1])
            if len(parts) == 1:
                steps.append(forecast_metrics(*one, parts[0][1]))
            else:
                steps.append(_pooled(*one, parts))
        by_step[name] = steps
    return scores, by_step, per_series


def fold_forecasts(plan: BacktestPlan) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """``(what backtest.json holds, each fold's forecasts)``: every fold's forecasts of the
    model and the baselines, scored on the same targets.

    Each fold's forecasts: ``"origin"`` ``(n,)`` rows of ``plan.series``, ``"series"``
    ``(n,)`` each window's series position, ``"y_true"`` and each forecaster's forecasts
    ``(n, horizon, n_targets)`` (None where it has none), ``n = n_series * step``.
    """
    data, series = plan.cfg.data, plan.series
    nt, season, ids = len(data.target), data.season, series.ids
    statistical = _statistical(plan)
    runs = {k: load_run(plan.out_dir / fold_dir_name(k)) for k in sorted(set(plan.uses))}
    folds, kept = [], []
    for k in range(plan.folds):
        run = runs[plan.uses[k]]
        windows = make_inference_windows(
            series, run.info.config.data, run.info.scaler, run.info.static_scaler
        )
        windows = windows.take(np.isin(windows.origin, plan.origins(k)))
        if not np.array_equal(windows.origin, plan.origins(k)):  # pragma: no cover
            raise RuntimeError(f"fold {k}'s run does not forecast every series of the panel")
        rows = slice(k * plan.step, (k + 1) * plan.step)
        names = statistical[0].keys()
        forecasts = {
            "model": forecast(run, windows),
            **baselines.naive_forecasts(windows, season),
            **{
                name: None
                if any(s[name] is None for s in statistical)
                else np.concatenate([s[name][rows] for s in statistical])
                for name in names
            },
        }
        cuts = plan.series_cutoffs(k)
        parts = []
        for i, start in enumerate(series.bounds[:-1]):
            history = series.values[start : start + int(cuts[i]) + 1, :nt]
            parts.append(
                (slice(i * plan.step, (i + 1) * plan.step), seasonal_scale(history, season))
            )
        scores, by_step, per_series = _fold_scores(windows.y_true, forecasts, parts)
        cutoff_time = None if series.times is None else str(series.times[windows.origin[0]])
        fold = {
            "fold": k,
            "cutoff": plan.cutoffs[k],
            "cutoff_time": cutoff_time,
            "origins": [int(windows.origin[0]), int(windows.origin[-1])],
            "model_fold": plan.uses[k],
            "n_scored": int(windows.y_true[..., 0].size),
            "scores": scores,
            "by_step": by_step,
        }
        if ids is not None:
            start = series.bounds[:-1]
            fold["per_series"] = {
                name: {
                    "cutoff": int(cuts[i]),
                    "cutoff_time": None
                    if series.times is None
                    else str(series.times[start[i] + cuts[i]]),
                    "origins": [int(cuts[i]), int(cuts[i]) + plan.step - 1],
                    "scores": per_series[i],
                }
                for i, name in enumerate(ids)
            }
        folds.append(fold)
        kept.append(
            {
                "origin": windows.origin,
                "series": windows.series,
                "y_true": windows.y_true,
                **forecasts,
            }
        )
    return _result(plan, folds), kept


def score_folds(plan: BacktestPlan) -> dict[str, Any]:
    """Every fold's forecasts of the model and the baselines, scored on the same targets
    (what ``backtest.json`` holds; see :func:`fold_forecasts`)."""
    return fold_forecasts(plan)[0]


def _result(plan: BacktestPlan, folds: list[dict[str, Any]]) -> dict[str, Any]:
    """``backtest.json``: the settings, the folds and the summary over folds (per series
    too, for a panel)."""
    data, ids = plan.cfg.data, plan.series.ids
    summary = {}
    for name in folds[0]["scores"]:
        overall = _spread([f["scores"][name] for f in folds])
        steps = None
        if all(f["by_step"][name] is not None for f in folds):
            steps = [_spread([f["by_step"][name][s] for f in folds]) for s in range(data.horizon)]
        summary[name] = {"overall": overall, "by_step": steps}
    out = {
        "settings": plan.settings,
        "horizon": data.horizon,
        "season": data.season,
        "targets": list(data.target),
        "baselines": plan.cfg.train.baselines,
        "cutoffs": plan.cutoffs,
        "folds": folds,
        "summary": summary,
    }
    if ids is not None:
        out["n_series"] = len(ids)
        out["per_series"] = {
            sid: {
                name: _spread([f["per_series"][sid]["scores"][name] for f in folds])
                for name in folds[0]["scores"]
            }
            for sid in ids
        }
    return out


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
    if "n_series" in result:
        lines.append(
            f"{result['n_series']} series scored together (cut-offs: rows of the longest, the "
            "same rows from each series' end); MASE is the mean of each series' MASE; "
            "per_series in backtest.json"
        )
    return "\n".join(lines)


def _undefined_notes(summary: dict[str, Any], keys: Sequence[str]) -> list[str]:
    """One note line per shown metric that a forecaster with forecasts has no mean of
    (``n/a``: undefined in some fold), saying why (:data:`stacklstm.report.evaluate.UNDEFINED`)."""

    lines = []
    for key in keys:
        if key in UNDEFINED and any(
            s["overall"] is not None and s["overall"]["mean"][key] is None for s in summary.values()
        ):
            lines.append(f"{key.upper()} n/a: in some fold {UNDEFINED[key]}")
    return lines


def _cutoff_label(fold: dict[str, Any]) -> str:
    """A fold's cut-off as a tick label: its date (and time of day, if any), else its row."""
    if fold.get("cutoff_time") is None:
        return f"row {fold['cutoff']}"
    stamp = pd.Timestamp(fold["cutoff_time"])
    return stamp.strftime("%Y-%m-%d" if stamp == stamp.normalize() else "%Y-%m-%d %H:%M")


def _mase(score: dict[str, Any] | None) -> float:
    """A score's MASE, NaN where undefined (a constant history) or without forecasts."""
    value = None if score is None else score.get("mase")
    return np.nan if value is None else float(value)


def mase_by_fold(result: dict[str, Any], name: str) -> np.ndarray:
    """``(folds,)`` MASE of forecaster ``name`` in each fold of a backtest (NaN: undefined)."""
    return np.array([_mase(fold["scores"][name]) for fold in result["folds"]])


def mase_by_step(result: dict[str, Any], name: str) -> np.ndarray:
    """``(horizon,)`` mean over the folds of forecaster ``name``'s MASE at each horizon step
    (NaN where a fold's is undefined)."""
    steps = [fold["by_step"][name] or [None] * result["horizon"] for fold in result["folds"]]
    return np.array([[_mase(step) for step in fold] for fold in steps]).mean(axis=0)


def backtest_figure(result: dict[str, Any]) -> Figure:
    """backtest.png: each forecaster's MASE by fold (left, the folds named by their
    cut-offs) and its mean MASE over folds by horizon step (right), on a log scale with a
    line at 1 (the in-sample seasonal naive forecast's error), so that forecasters whose
    errors differ tenfold all stay readable. Forecasters without finite forecasts are left
    out. Returns the figure, not yet saved."""
    fig = Figure(figsize=(11, 4.6), layout="constrained")
    by_fold, by_step = fig.subplots(1, 2)
    folds, horizon = result["folds"], result["horizon"]
    names = [n for n in folds[0]["scores"] if any(f["scores"][n] is not None for f in folds)]
    for name in sorted(names, key=lambda n: n == "model"):  # the model drawn last, on top
        style = {
            "color": color_of(name),
            "lw": 2.0 if name == "model" else 1.0,
            "alpha": 1.0 if name == "model" else 0.8,
            "ms": 4,
            "label": name,
        }
        by_fold.plot(range(len(folds)), mase_by_fold(result, name), "o-", **style)
        by_step.plot(range(1, horizon + 1), mase_by_step(result, name), "o-", **style)
    slanted = len(folds) > 4  # dates side by side would collide
    labels = [_cutoff_label(fold) for fold in folds]
    by_fold.set_xticks(
        range(len(folds)),
        labels,
        rotation=30 if slanted else 0,
        ha="right" if slanted else "center",
    )
    by_step.set_xticks(range(1, horizon + 1))
    first = " (first series)" if "n_series" in result else ""
    by_fold.set(xlabel=f"fold cut-off{first}", ylabel="MASE", title="MASE by fold")
    by_step.set(xlabel="horizon step", ylabel="mean MASE over folds", title="MASE by step")
    for ax in (by_fold, by_step):
        _log_mase_axis(ax)
    legend_below(fig, [by_fold])
    return fig


def _log_mase_axis(ax: Axes) -> None:
    """A log y axis in plain numbers, with a line at MASE 1."""
    ax.axhline(1.0, color="black", lw=0.8, ls=":", label="MASE 1: in-sample seasonal naive")
    plain_log_axis(ax)


def plot_backtest(path: Path, result: dict[str, Any]) -> None:
    """Write backtest.png to ``path``: :func:`backtest_figure`."""
    save_figure(backtest_figure(result), path)


__all__ = [
    "METRICS",
    "backtest_figure",
    "fold_forecasts",
    "format_table",
    "mase_by_fold",
    "mase_by_step",
    "plot_backtest",
    "score_folds",
]
