"""What ``report.json`` holds besides the scores (the settings, the retrained run, a seed
ensemble's members) and writing it with the report's figures."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import combine
from ..data import WindowSet
from ..forecasting.calibration import write_calibration
from ..forecasting.ensemble import (
    EnsembleRun,
    member_dir,
    rank_members,
)
from ..intervals import (
    Forecast,
    interval_pairs,
    level_key,
    report_quantiles,
)
from ..plots.forecast import plot_forecast
from ..plots.loss import plot_loss
from ..rundir.files import (
    FORECAST_PLOT,
    LOSS_PLOT,
    MEMBERS_DIR,
    METRICS_FILE,
    REPORT_FILE,
    SELECTION_DIR,
)
from ..rundir.folder import atomic_write
from ..rundir.info import finished_progress
from .table import COLUMNS as COLUMNS
from .table import FORECASTERS as FORECASTERS
from .table import UNDEFINED as UNDEFINED
from .table import format_table as format_table


@dataclass
class Scores:
    """What :func:`_score_splits` found: the point scores by split (``data``), each split's
    windows and model forecast (``scored``), per series and per member scores, the conformal
    calibration, the test forecasts and bands for the plot, and the combination's weights."""

    data: dict[str, Any] = field(default_factory=dict)
    scored: dict[str, tuple[WindowSet, Forecast]] = field(default_factory=dict)
    per_series: dict[str, dict[str, Any]] = field(default_factory=dict)
    members: dict[str, list[Any]] = field(default_factory=dict)
    calibration: Any = None
    test_forecasts: dict[str, np.ndarray | None] = field(default_factory=dict)
    bands: Any = None
    combination: dict[str, Any] = field(default_factory=dict)


def report_settings(run: Any, scores: Scores, source: Path) -> dict[str, Any]:
    """The report's keys besides the scores: counts, settings, checkpoint, ensemble."""
    cfg = run.info.config
    data: dict[str, Any] = dict(
        n_test=len(scores.scored["test"][0]) * cfg.data.horizon,
        n_val=len(scores.scored["val"][0]) * cfg.data.horizon,
        season=cfg.data.season,
        horizon=cfg.data.horizon,
        targets=list(cfg.data.target),
        baselines=cfg.train.baselines,
        checkpoint=run.checkpoint,
        data_path=str(source),
    )
    levels = report_quantiles(cfg.train)
    if levels:
        data.update(
            quantiles=list(levels),
            interval_levels=[level_key(level) for level, _, _ in interval_pairs(levels)],
            conformal=cfg.train.conformal,
        )
    if run.members:
        data["ensemble"] = ensemble_data(run, scores.members)
    if cfg.train.retrain in ("all", "on"):
        data["retrain"] = retrain_data(Path(run.run_dir), cfg.train.ensemble)
        data["retrain"]["rows"] = "all" if cfg.train.retrain == "all" else "train+val"
    return data


def retrain_data(run_dir: Path, ensemble: int = 1) -> dict[str, Any]:
    """``report.json``'s ``retrain``: the selection's folder, the epochs it chose and the
    validation loss they scored there (:mod:`stacklstm.run.retrain`); for a seed ensemble,
    each member's, in lists (member ``k``'s selection is ``members/<k>/selection``)."""
    if ensemble == 1:
        progress = finished_progress(run_dir / SELECTION_DIR) or {}
        return {
            "selection": SELECTION_DIR,
            "epochs": progress.get("best_epoch"),
            "selection_epochs": progress.get("epoch"),
            "selection_val_loss": progress.get("best_val_loss"),
        }
    members = [retrain_data(member_dir(run_dir, k)) for k in range(ensemble)]
    data: dict[str, Any] = {"selection": f"{MEMBERS_DIR}/<k>/{SELECTION_DIR}"}
    for key in ("epochs", "selection_epochs", "selection_val_loss"):
        data[key] = [member[key] for member in members]
    return data


def write_report(
    run_dir: Path, run: Any, data: dict, scores: Scores, splits: Any, future: Any = None
) -> None:
    """``report.json``, ``calibration.json`` and the plots (a member has its own loss plot)."""
    cfg = run.info.config
    text = json.dumps(data, indent=2, allow_nan=False) + "\n"
    atomic_write(run_dir / REPORT_FILE, lambda handle: handle.write(text.encode()))
    if scores.calibration is not None:
        write_calibration(run_dir, scores.calibration, run.checkpoint)
    test, forecasts, bands = scores.scored["test"][0], scores.test_forecasts, scores.bands
    if len(test):  # the test forecasts of the first series (a grid), and the future
        forecasts = {k: v for k, v in forecasts.items() if k != combine.NAME}  # not plotted
        plot_forecast(
            run_dir / FORECAST_PLOT,
            splits.series,
            test,
            forecasts,
            cfg.data.target,
            bands,
            future=future,
            season=int(cfg.data.season),
        )
    if run.members:  # a member has its own loss plot
        return
    if cfg.train.retrain in ("all", "on"):  # the selection's epochs, then the retrained run's
        plot_loss(
            run_dir / LOSS_PLOT,
            run_dir / SELECTION_DIR / METRICS_FILE,
            retrained=run_dir / METRICS_FILE,
        )
    else:
        plot_loss(run_dir / LOSS_PLOT, run_dir / METRICS_FILE)


def ensemble_data(run: EnsembleRun, members: dict[str, list[Any]]) -> dict[str, Any]:
    """``report.json``'s ``ensemble``: the size, each member's metrics, the best and worst."""
    seed = run.info.config.train.seed
    return {
        "size": len(run.members),
        "combine": "median",
        **rank_members(members["test"]),
        "members": [
            {
                "member": k,
                "seed": seed + k,
                "run_dir": str(Path(member.run_dir).relative_to(run.run_dir)),
                "checkpoint": member.checkpoint,
                "test": members["test"][k],
                "val": members["val"][k],
            }
            for k, member in enumerate(run.members)
        ],
    }
