"""The test report: the model scored next to the baselines on the same targets.

``evaluate_run`` restores the best checkpoint, forecasts from every validation and test
origin, maps the forecasts to original units and scores them next to the baselines of
:mod:`stacklstm.baselines` on exactly the same targets: last value and seasonal naive, and
with ``baselines="all"`` statsforecast's AutoETS, AutoARIMA and AutoTheta (fitted on the
training and validation rows, forecasting from every test origin without refitting). It
writes ``report.json``, ``forecast.png`` and ``loss.png``.

Example:
    >>> report = evaluate_run("runs/co2")  # doctest: +SKIP
    >>> test = report.data["test"]  # doctest: +SKIP
    >>> test["model"]["mase"] < test["auto_ets"]["mase"]  # doctest: +SKIP
    True
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import baselines
from ..config import RunConfig
from ..data import DataError, WindowSet, make_inference_windows, make_splits
from ..distributed import is_primary
from ..intervals import (
    Forecast,
    calibrate,
    interval_pairs,
    interval_scores,
    level_key,
    report_quantiles,
)
from ..metrics import forecast_metrics, seasonal_scale
from ..signals import test_hook
from .calibration import fit_calibration, write_calibration
from .inference import forecast_quantiles, load_run, load_series
from .plots import plot_forecast, plot_loss
from .rundir import METRICS_FILE, atomic_write
from .step import make_predict_step

log = logging.getLogger(__name__)

REPORT_FILE = "report.json"
FORECAST_PLOT = "forecast.png"
LOSS_PLOT = "loss.png"
#: Every forecaster a report can hold, in the table's order.
FORECASTERS = ("model", *baselines.NAIVE, *baselines.STATISTICAL)
#: The table's columns: ``(report key, heading)``.
COLUMNS = (("mae", "MAE"), ("rmse", "RMSE"), ("mape", "MAPE %"), ("mase", "MASE"))


def score_forecasts(
    y_true: np.ndarray, forecasts: dict[str, np.ndarray | None], scale: np.ndarray
) -> dict[str, Any]:
    """``{name: metrics}`` of each forecast of ``y_true`` (all ``(n, horizon, n_targets)``);
    None for a forecaster without forecasts or with NaN/Inf ones (a diverged model)."""
    scores: dict[str, Any] = {}
    for name, values in forecasts.items():
        if values is not None and not np.isfinite(values).all():
            log.warning("the forecasts of %s hold NaN/Inf; its metrics are left empty", name)
            values = None
        scores[name] = None if values is None else forecast_metrics(y_true, values, scale)
    return scores


def baseline_forecasts(
    windows: WindowSet, season: int, kind: str, refit_at=()
) -> dict[str, np.ndarray | None]:
    """``{name: (n, horizon, n_targets)}`` of the baselines of ``kind`` from the origins of
    ``windows`` (the statistical ones fitted at the first origin, and at ``refit_at``)."""
    out: dict[str, np.ndarray | None] = {
        "last_value": windows.last_value,
        "seasonal_naive": windows.seasonal_naive(season),
    }
    if kind == "all" and len(windows):
        out.update(
            baselines.statistical_forecasts(
                windows.history, windows.origin, windows.horizon, season, refit_at
            )
        )
    return out


def _best(scores: dict[str, Any], key: str) -> str | None:
    scored = [
        name
        for name, m in scores.items()
        if m is not None and m.get(key) is not None and np.isfinite(m[key])
    ]
    return min(scored, key=lambda name: scores[name][key]) if scored else None


def format_table(data: dict[str, Any]) -> str:
    """The report's metrics as a small text table; ``*`` marks each split's best (lowest)
    value of every metric."""
    head = "".join(f"{title:>12}" for _, title in COLUMNS)
    lines = [f"{'split':<6}{'forecaster':<16}{head}"]
    for split in ("test", "val"):
        scores = data.get(split) or {}
        if not scores:
            lines.append(f"{split:<6}(no windows)")
            continue
        best = {key: _best(scores, key) for key, _ in COLUMNS}
        for name in FORECASTERS:
            if name not in scores:
                continue
            m = scores[name]
            if m is None:
                lines.append(f"{split:<6}{name:<16}{'n/a (no finite forecasts)':>36}")
                continue
            cells = []
            for key, _ in COLUMNS:
                value = m.get(key)
                text = "n/a" if value is None else f"{value:.4f}"
                cells.append(f"{text + ('*' if best[key] == name else ' '):>12}")
            lines.append(f"{split:<6}{name:<16}{''.join(cells)}".rstrip())
    lines += _interval_table(data)
    lines.append(
        f"n_test={data['n_test']} n_val={data['n_val']} scored targets (every origin, "
        f"horizon {data['horizon']}); season={data['season']}"
    )
    return "\n".join(lines)


def _interval_table(data: dict[str, Any]) -> list[str]:
    """The test intervals' lines: coverage and mean width per nominal level, and the weighted
    quantile loss (``*``: the lowest)."""
    levels = data.get("interval_levels")
    scores = data.get("test") or {}
    if not levels or not scores:
        return []
    titles = [f"cover {k}" for k in levels] + [f"width {k}" for k in levels] + ["wQL"]
    lines = [f"{'test intervals':<22}" + "".join(f"{t:>12}" for t in titles)]
    best = _best(scores, "wql")
    if data.get("conformal"):
        how = "the model's intervals are calibrated on the validation windows"
    elif (scores.get("model") or {}).get("coverage") is None:
        how = "the model gives point forecasts (an interval loss or conformal gives intervals)"
    else:
        how = "the model's intervals are its own (uncalibrated)"
    for name in FORECASTERS:
        m = scores.get(name)
        if name not in scores or m is None:
            continue
        if m.get("coverage") is None:
            lines.append(f"{'':<6}{name:<16}{'n/a (point forecasts only)':>36}")
            continue
        cells = [f"{m['coverage'][k]:.3f}" for k in levels]
        cells += [f"{m['width'][k]:.4g}" for k in levels]
        wql = "n/a" if m["wql"] is None else f"{m['wql']:.4g}"
        cells.append(wql + ("*" if best == name else " "))
        lines.append(f"{'':<6}{name:<16}" + "".join(f"{c:>12}" for c in cells).rstrip())
    lines.append(f"{how}; the baselines' come from their validation residuals")
    return lines


@dataclass(frozen=True)
class Report:
    """The outcome of :func:`evaluate_run`.

    Attributes:
        data: What ``report.json`` holds.
        table: :func:`format_table` of ``data``.
        test_origin: ``(n_test,)`` series rows of the test forecast origins.
        test_forecast: ``(n_test, horizon, n_targets)`` model forecasts in original units.
        test_intervals: The model's test forecasts with their quantiles (calibrated with
            ``conformal``), or None where the report has none.
    """

    data: dict[str, Any]
    table: str
    test_origin: np.ndarray
    test_forecast: np.ndarray
    test_intervals: Forecast | None = None


def evaluate_run(run_dir: str | Path, data_path: str | Path | None = None) -> Report:
    """Score the run's best checkpoint on the validation and test windows; write the report.

    The windows are those of :func:`stacklstm.data.make_splits` on the table (the run's own
    table by default), cut with the run's saved scaler. Writes ``report.json``,
    ``forecast.png`` and ``loss.png`` into ``run_dir`` (replacing earlier ones).

    The test forecasts start at every test origin (step 1); ``n_test`` counts the scored
    (origin, horizon step) targets. MASE is scaled by the in-sample seasonal naive MAE of
    the rows before the split. The statistical baselines (``baselines="all"``) are scored on
    the test only; the validation split has the model and the naive baselines.

    Returns:
        Report; ``report.data`` has ``{"test": {"model": {"mae", "rmse", "mape", "smape",
        "mase"}, "last_value": ..., "seasonal_naive": ..., "auto_ets": ..., "auto_arima":
        ..., "auto_theta": ...}, "val": ..., "n_test", "n_val", "baselines", ...}``.

    Raises:
        SettingError: ``baselines="all"`` without statsforecast installed.
    """
    test_hook("evaluate")
    run = load_run(run_dir)
    cfg = run.info.config
    kind = cfg.train.baselines
    baselines.require(kind)
    source, series = load_series(run.info, data_path)
    splits, _ = make_splits(series, cfg.data)  # which origins are val and test
    windows = make_inference_windows(series, cfg.data, run.info.scaler)  # the saved scaler
    predict_step = make_predict_step(run.model)
    season, nt = cfg.data.season, len(cfg.data.target)
    # in-sample rows of each split: what was seen before its first target
    seen_rows = {"val": splits.n_train, "test": splits.n_train + splits.n_val}
    scored, data, calibration, bands = {}, {}, None, None
    for split in ("val", "test"):
        origins = getattr(splits, split).origin
        part = windows.take(np.isin(windows.origin, origins))
        if not np.array_equal(part.origin, origins):
            raise DataError(f"could not cut the {split} windows of {source} again")
        model_forecast = forecast_quantiles(run, part, predict_step)
        if split == "val":  # the conformal offsets come from the validation windows
            calibration = fit_calibration(cfg.train, part.y_true, model_forecast)
        elif calibration is not None:
            model_forecast = calibrate(model_forecast, calibration)
        scored[split] = (part, model_forecast)
        if not len(part):
            data[split] = {}
            continue
        # the statistical models are fitted on the rows before the test only
        forecasts = {
            "model": model_forecast.point,
            **baseline_forecasts(part, season, kind if split == "test" else "naive"),
        }
        scale = seasonal_scale(series.values[: seen_rows[split], :nt], season)
        data[split] = score_forecasts(part.y_true, forecasts, scale)
        if split == "test":
            test_forecasts = forecasts
            bands = _interval_scores(data[split], cfg, part, forecasts, model_forecast, scored)
    levels = report_quantiles(cfg.train)
    data.update(
        n_test=len(scored["test"][0]) * cfg.data.horizon,
        n_val=len(scored["val"][0]) * cfg.data.horizon,
        season=season,
        horizon=cfg.data.horizon,
        targets=list(cfg.data.target),
        baselines=kind,
        checkpoint=run.checkpoint,
        data_path=str(source),
    )
    if levels:
        data.update(
            quantiles=list(levels),
            interval_levels=[level_key(level) for level, _, _ in interval_pairs(levels)],
            conformal=cfg.train.conformal,
        )
    data = {"test": data.pop("test"), "val": data.pop("val"), **data}
    test_part, test_model = scored["test"]
    report = Report(data, format_table(data), test_part.origin, test_model.point, test_model)
    if not is_primary():  # every process forecast together; process 0 writes
        return report
    run_dir = Path(run_dir)
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    atomic_write(run_dir / REPORT_FILE, lambda handle: handle.write(text.encode()))
    if calibration is not None:
        write_calibration(run_dir, calibration, run.checkpoint)
    if len(test_part):
        plot_forecast(
            run_dir / FORECAST_PLOT, series, test_part, test_forecasts, cfg.data.target, bands
        )
    plot_loss(run_dir / LOSS_PLOT, run_dir / METRICS_FILE)
    return report


def _interval_scores(
    scores: dict[str, Any],
    cfg: RunConfig,
    test: WindowSet,
    forecasts: dict[str, np.ndarray | None],
    model: Forecast,
    scored: dict[str, tuple[WindowSet, Forecast]],
) -> Forecast | None:
    """Add ``coverage``, ``width`` and ``wql`` to each forecaster's test ``scores`` (None where
    it has no intervals); returns the model's forecast if it has intervals (for the fan).

    The model's intervals are its own (calibrated with ``conformal``); a baseline's come from
    its residuals on the validation windows (:func:`stacklstm.baselines.residual_intervals`).
    """
    levels = report_quantiles(cfg.train)
    if not levels:
        return None
    val, _ = scored["val"]
    val_points: dict[str, np.ndarray | None] = {}
    if len(val):
        val_points = baseline_forecasts(val, cfg.data.season, cfg.train.baselines)
    out: dict[str, Forecast | None] = {
        name: baselines.residual_intervals(val.y_true, val_points.get(name), values, levels)
        for name, values in forecasts.items()
        if name != "model"
    }
    out["model"] = model if model.quantiles is not None else None
    for name, intervals in out.items():
        metrics = scores.get(name)
        if metrics is None:
            continue
        empty = {"coverage": None, "width": None, "wql": None}
        if intervals is not None and np.isfinite(intervals.quantiles).all():
            metrics.update(interval_scores(test.y_true, intervals))
        else:
            metrics.update(empty)
    return out["model"]
