"""The test report: the model scored next to the naive baselines on the same targets.

``evaluate_run`` restores the best checkpoint, forecasts the validation and test windows,
maps them to original units and scores them next to the last-value and seasonal-naive
forecasts of exactly the same targets; it writes ``report.json``, ``forecast.png`` and
``loss.png``.

Example:
    >>> report = evaluate_run("runs/co2")  # doctest: +SKIP
    >>> test = report.data["test"]  # doctest: +SKIP
    >>> test["model"]["rmse"] < test["last_value"]["rmse"]  # doctest: +SKIP
    True
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..data import DataError, WindowSet, make_inference_windows, make_splits
from ..distributed import is_primary
from ..metrics import forecast_metrics
from ..signals import test_hook
from .inference import forecast, load_run, load_series
from .plots import plot_forecast, plot_loss
from .rundir import METRICS_FILE, atomic_write
from .step import make_predict_step

log = logging.getLogger(__name__)

REPORT_FILE = "report.json"
FORECAST_PLOT = "forecast.png"
LOSS_PLOT = "loss.png"
FORECASTERS = ("model", "last_value", "seasonal_naive")


def _score(windows: WindowSet, model_forecast: np.ndarray, season: int) -> dict[str, Any]:
    """Metrics of the model and both baselines on the same targets; the model's are None when
    its forecasts are not finite (a diverged run)."""
    if len(windows) == 0:
        return {}
    finite = bool(np.isfinite(model_forecast).all())
    if not finite:
        log.warning("the model's forecasts hold NaN/Inf; its metrics are left empty")
    return {
        "model": forecast_metrics(windows.y_true, model_forecast) if finite else None,
        "last_value": forecast_metrics(windows.y_true, windows.last_value),
        "seasonal_naive": forecast_metrics(windows.y_true, windows.seasonal_naive(season)),
    }


def format_table(data: dict[str, Any]) -> str:
    """The report's metrics as a small text table; ``*`` marks each split's lowest RMSE."""
    lines = [f"{'split':<6}{'forecaster':<16}{'MAE':>12}{'RMSE':>12}{'MAPE %':>10}"]
    for split in ("test", "val"):
        scores = data.get(split) or {}
        if not scores:
            lines.append(f"{split:<6}(no windows)")
            continue
        scored = [name for name in FORECASTERS if scores[name] is not None]
        best = min(scored, key=lambda name: scores[name]["rmse"])
        for name in FORECASTERS:
            m = scores[name]
            if m is None:
                lines.append(f"{split:<6}{name:<16}{'n/a (forecasts not finite)':>34}")
                continue
            mark = " *" if name == best else ""
            lines.append(
                f"{split:<6}{name:<16}{m['mae']:>12.4f}{m['rmse']:>12.4f}{m['mape']:>10.4f}{mark}"
            )
    lines.append(f"n_test={data['n_test']} n_val={data['n_val']} windows; season={data['season']}")
    return "\n".join(lines)


@dataclass(frozen=True)
class Report:
    """The outcome of :func:`evaluate_run`.

    Attributes:
        data: What ``report.json`` holds.
        table: :func:`format_table` of ``data``.
        test_origin: ``(n_test,)`` series rows of the test forecast origins.
        test_forecast: ``(n_test, horizon, n_targets)`` model forecasts in original units.
    """

    data: dict[str, Any]
    table: str
    test_origin: np.ndarray
    test_forecast: np.ndarray


def evaluate_run(run_dir: str | Path, data_path: str | Path | None = None) -> Report:
    """Score the run's best checkpoint on the validation and test windows; write the report.

    The windows are those of :func:`stacklstm.data.make_splits` on the table (the run's own
    table by default), cut with the run's saved scaler. Writes ``report.json``,
    ``forecast.png`` and ``loss.png`` into ``run_dir`` (replacing earlier ones).

    Returns:
        Report; ``report.data`` has ``{"test": {"model": {"mae", "rmse", "mape", "smape"},
        "last_value": ..., "seasonal_naive": ...}, "val": ..., "n_test", "n_val", ...}``.
    """
    test_hook("evaluate")
    run = load_run(run_dir)
    cfg = run.info.config
    source, series = load_series(run.info, data_path)
    splits, _ = make_splits(series, cfg.data)  # which origins are val and test
    windows = make_inference_windows(series, cfg.data, run.info.scaler)  # the saved scaler
    predict_step = make_predict_step(run.model)
    scored = {}
    for split in ("val", "test"):
        origins = getattr(splits, split).origin
        part = windows.take(np.isin(windows.origin, origins))
        if not np.array_equal(part.origin, origins):
            raise DataError(f"could not cut the {split} windows of {source} again")
        scored[split] = (part, forecast(run, part, predict_step))
    season = cfg.data.season
    data = {
        "test": _score(*scored["test"], season),
        "val": _score(*scored["val"], season),
        "n_test": len(scored["test"][0]),
        "n_val": len(scored["val"][0]),
        "season": season,
        "horizon": cfg.data.horizon,
        "targets": list(cfg.data.target),
        "checkpoint": run.checkpoint,
        "data_path": str(source),
    }
    report = Report(data, format_table(data), scored["test"][0].origin, scored["test"][1])
    if not is_primary():  # every process forecast together; process 0 writes
        return report
    run_dir = Path(run_dir)
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    atomic_write(run_dir / REPORT_FILE, lambda handle: handle.write(text.encode()))
    test, test_forecast = scored["test"]
    if len(test):
        plot_forecast(run_dir / FORECAST_PLOT, series, test, test_forecast, season, cfg.data.target)
    plot_loss(run_dir / LOSS_PLOT, run_dir / METRICS_FILE)
    return report
