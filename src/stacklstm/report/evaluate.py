"""The test report: the model scored next to the baselines on the same targets.

``evaluate_run`` restores the best checkpoint, forecasts from every validation and test
origin, maps the forecasts to original units and scores them next to the baselines of
:mod:`stacklstm.baselines` on exactly the same targets: last value and seasonal naive, and
with ``baselines="all"`` statsforecast's AutoETS, AutoARIMA and AutoTheta (fitted on the
training rows, forecasting from every validation and test origin without refitting), and
their combination (:mod:`stacklstm.forecasting.combination`). It writes ``report.json``,
``forecast.png`` and ``loss.png``.

Example:
    >>> report = evaluate_run("runs/co2")  # doctest: +SKIP
    >>> test = report.data["test"]  # doctest: +SKIP
    >>> test["model"]["mase"] < test["auto_ets"]["mase"]  # doctest: +SKIP
    True
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from .. import baselines, combine
from ..data import WindowSet, make_splits
from ..distributed import is_primary
from ..forecasting.baseline_forecasts import (
    add_interval_scores,
    baseline_forecasts,
    series_slices,
    statistical_splits,
)
from ..forecasting.calibration import fit_calibration
from ..forecasting.combination import combined, fit_weights, interval_forecast
from ..forecasting.ensemble import (
    load_run,
)
from ..forecasting.fallback import NAME as FALLBACK
from ..forecasting.fallback import fallback_ids
from ..forecasting.future import future_forecast
from ..forecasting.inference import load_selection, load_series
from ..intervals import (
    Forecast,
    calibrate,
    report_quantiles,
)
from ..metrics import forecast_metrics, seasonal_scale
from ..rundir.files import (
    BASELINES_FILE,
)
from ..signals import test_hook
from ..train.step import make_predict_step
from .contents import Scores, report_settings, write_report
from .table import COLUMNS as COLUMNS
from .table import FORECASTERS as FORECASTERS
from .table import UNDEFINED as UNDEFINED
from .table import format_table as format_table

log = logging.getLogger(__name__)


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


def _panel_scores(
    windows: WindowSet,
    forecasts: dict[str, np.ndarray | None],
    seen: np.ndarray,
    season: int,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """Scores of a panel's split: over all series together (MASE: the mean over series of
    each series' MASE, scaled by its own in-sample seasonal naive MAE) and per series.

    ``seen``: ``(n_series,)`` rows of each series before the split (its in-sample rows).
    """
    y_true, ids, offsets = windows.y_true, windows.ids, windows.held.offsets
    assert ids is not None
    per_series: dict[str, dict[str, Any]] = {}
    for i, rows in series_slices(windows):
        history = windows.history[offsets[i] : offsets[i] + seen[i]]
        scale = seasonal_scale(history, season)
        parts = {name: None if f is None else f[rows] for name, f in forecasts.items()}
        per_series[ids[i]] = score_forecasts(y_true[rows], parts, scale)
    overall = score_forecasts(y_true, forecasts, None)
    for name, metrics in overall.items():
        if metrics is None:
            continue
        values = [s[name]["mase"] for s in per_series.values() if s[name] is not None]
        finite = [v for v in values if v is not None and np.isfinite(v)]
        metrics["mase"] = float(np.mean(finite)) if finite else None
    return overall, per_series


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
        test_forecasts: ``{name: (n_test, horizon, n_targets) or None}``: the test forecasts
            of every forecaster scored (the model, the baselines, the combination).
    """

    data: dict[str, Any]
    table: str
    test_origin: np.ndarray
    test_forecast: np.ndarray
    test_intervals: Forecast | None = None
    test_forecasts: dict[str, np.ndarray | None] = field(default_factory=dict)


def evaluate_run(run_dir: str | Path, data_path: str | Path | None = None) -> Report:
    """Score the run's best checkpoint on the validation and test windows; write the report.

    The windows are those of :func:`stacklstm.data.make_splits` on the table (the run's own
    table by default), cut with the run's saved scaler. Writes ``report.json``,
    ``forecast.png`` and ``loss.png`` into ``run_dir`` (replacing earlier ones).

    The test forecasts start at every test origin (step 1); ``n_test`` counts the scored
    (origin, horizon step) targets. MASE is scaled by the in-sample seasonal naive MAE of
    the rows before the split. A panel's splits are scored over all its series together,
    with MASE the mean over series of each series' MASE (scaled by that series' own
    in-sample seasonal naive MAE; series whose scale is 0 are left out of the mean), and
    ``per_series`` holds the same metrics for each series. The statistical baselines
    (``baselines="all"``) are scored on the test only; the validation split has the model and
    the naive baselines (:mod:`stacklstm.forecasting.baseline_forecasts`: with several processes,
    only the one that writes the report computes them; the others' reports leave them None).

    The test scores hold ``"combination"`` too, point forecasts weighed by validation MAE
    (:mod:`stacklstm.forecasting.combination`; its weights in ``data["combination"]``).

    A run retrained on every row (``retrain="all"``, the default, :mod:`stacklstm.run.retrain`)
    scores both splits (and fits the combination's weights and the conformal offsets on the
    validation one) with its selection run's model, which trained on neither, the windows
    cut with that run's scaler. One retrained on the training and validation rows
    (``retrain="on"``) scores its test split with its own model and its validation split with
    its selection's. ``report.data["retrain"]`` names the epochs chosen and the rows the
    saved model trained on (``"rows"``: ``"all"`` or ``"train+val"``).

    For a seed ensemble (:mod:`stacklstm.forecasting.ensemble`) the model is the median of the
    members' forecasts, and ``report.data["ensemble"]`` lists every member's point metrics
    (scored as in its own report) with the best and worst member by test MASE.

    Returns:
        Report; ``report.data`` has ``{"test": {"model": {"mae", "rmse", "mape", "smape",
        "mase"}, "last_value": ..., "seasonal_naive": ..., "auto_ets": ..., "auto_arima":
        ..., "auto_theta": ..., "combination": ...}, "val": ..., "n_test", "n_val",
        "baselines", ..., "combination": {...}}``; for a panel also ``"n_series"`` and
        ``"per_series": {id: {"test": ..., "val": ...}}``, and ``"fallback": {id:
        "seasonal_naive"}`` for the table's series the model was not trained on (too short
        for their splits), which ``predict`` forecasts with the fallback
        (:mod:`stacklstm.forecasting.fallback`).

    Raises:
        SettingError: ``baselines="all"`` without statsforecast installed.
    """
    test_hook("evaluate")
    run = load_run(run_dir)
    cfg = run.info.config
    baselines.require(cfg.train.baselines)
    source, series = load_series(run.info, data_path)
    held = None  # a retrained run: the validation windows as its selection's model reads them
    # the model whose forecasts are scored: a run trained on every row is scored by its
    # selection, on both splits, which it did not train on
    scorer = load_selection(run_dir) if cfg.train.retrain == "all" else run
    # the windows of each split, with the scorer's saved scaler(s)
    splits, _ = make_splits(
        series, cfg.data, scaler=scorer.info.scaler, static_scaler=scorer.info.static_scaler
    )
    if cfg.train.retrain == "on":
        chosen = load_selection(run_dir)
        held = (chosen, _held_out(series, cfg, chosen.info, splits))
    scores = _score_splits(scorer, splits, held, cfg=cfg, run_dir=Path(run_dir))
    data = {**scores.data, **report_settings(run, scores, source)}
    data = {"test": data.pop("test"), "val": data.pop("val"), **data}
    data[combine.NAME] = scores.combination
    if series.ids is not None:  # the series the model was not trained on: predict's fallback
        left = fallback_ids(series, run.info.scaler.ids, cfg.data.min_input_rows)
        if left:
            data["fallback"] = dict.fromkeys(left, FALLBACK)
    if splits.test.ids is not None:  # a panel: the same metrics series by series
        data["n_series"] = len(splits.test.ids)
        by_series = scores.per_series
        data["per_series"] = {
            name: {split: by_series.get(name, {}).get(split, {}) for split in ("test", "val")}
            for name in splits.test.ids
        }
    test_part, test_model = scores.scored["test"]
    report = Report(
        data,
        format_table(data),
        test_part.origin,
        test_model.point,
        test_model,
        dict(scores.test_forecasts),
    )
    # every process forecasts together (the future of the plot too); process 0 writes
    future = future_forecast(run, splits.series, scores.calibration) if len(test_part) else None
    if is_primary():
        write_report(Path(run_dir), run, data, scores, splits, future)
    return report


def _held_out(series: Any, cfg: Any, info: Any, splits: Any) -> WindowSet:
    """The validation windows of ``splits`` cut with the scaler of the selection run whose
    ``config.json`` is ``info`` (fitted on the training rows only, as it trained)."""
    val = make_splits(series, cfg.data, scaler=info.scaler, static_scaler=info.static_scaler)[0].val

    def where(windows: WindowSet) -> tuple[list, list]:
        names = (
            [None] * len(windows)
            if windows.ids is None
            else np.asarray(windows.ids)[windows.series]
        )
        return list(names), windows.local_origin.tolist()

    same = where(val) == where(splits.val)
    if not same:  # the two runs' splits are the same rows: a changed table would show here
        raise ValueError(
            "the validation windows of the retrained run and of its selection differ; the "
            "table changed since they were trained: train again"
        )
    return val


def _score_splits(
    run: Any,
    splits: Any,
    held: tuple[Any, WindowSet] | None = None,
    *,
    cfg: Any = None,
    run_dir: Path | None = None,
) -> Scores:
    """Forecast the validation then the test windows (the model, calibrated on the validation
    windows, and the baselines) and score them; a seed ensemble's members are scored too.
    ``held``: a retrained run's selection and its validation windows, which score the
    validation split (its model did not train on it; the same module, other weights).
    ``cfg`` and ``run_dir``: the report's settings and folder, where ``run`` is not the run
    itself (``retrain="all"``: its selection; default: ``run``'s own)."""
    cfg = run.info.config if cfg is None else cfg
    kind, season, nt = cfg.train.baselines, cfg.data.season, len(cfg.data.target)
    predict_step = make_predict_step(run.model)
    rows = splits.rows  # (n_series, 3): each series' training, validation and test rows
    # in-sample rows of each split: what was seen before its first target
    seen_rows = {"val": rows[:, 0], "test": rows[:, 0] + rows[:, 1]}
    out = Scores()
    # the statistical baselines of the test, and of the validation (the combination's
    # weights, the intervals' residuals)
    statistical = {"test": {}, "val": {}}
    if kind == "all":
        store = Path(run.run_dir if run_dir is None else run_dir) / BASELINES_FILE
        statistical = statistical_splits(splits, season, with_val=True, store=store)
    for split in ("val", "test"):
        part = getattr(splits, split)
        if split == "val" and held is not None:
            part = held[1]
            model_forecast, member_forecasts = held[0].forecasts(part, predict_step)
        else:
            model_forecast, member_forecasts = run.forecasts(part, predict_step)
        if split == "val":  # the conformal offsets come from the validation windows
            out.calibration = fit_calibration(cfg.train, part.y_true, model_forecast)
        elif out.calibration is not None:
            model_forecast = calibrate(model_forecast, out.calibration)
        out.scored[split] = (part, model_forecast)
        if split == "val":  # each forecaster's validation error weighs it in the combination
            weighed = {"model": model_forecast.point, **statistical["val"]}
            out.combination = fit_weights(
                part, weighed, kind, season, cfg.train.combination, cfg.train.interval_levels
            )
        if not len(part):
            out.data[split] = {}
            out.members[split] = [None] * len(run.members)
            continue
        # the validation split is scored with the naive baselines only
        forecasts = {
            "model": model_forecast.point,
            **baseline_forecasts(part, season, statistical["test"] if split == "test" else None),
        }
        if split == "test":  # the combination: point forecasts, weighed as validated
            forecasts[combine.NAME] = combined(part, forecasts, out.combination)
        out.data[split], by_series = _split_scores(part, forecasts, seen_rows[split], season, nt)
        for name, scores in by_series.items():
            out.per_series.setdefault(name, {})[split] = scores
        # each member of a seed ensemble scored as its own report scores it
        points = {f"member {k}": f.point for k, f in enumerate(member_forecasts)}
        member_scores = _split_scores(part, points, seen_rows[split], season, nt)[0]
        out.members[split] = [member_scores[name] for name in points]
        if split == "test":
            out.test_forecasts = forecasts
            out.bands = add_interval_scores(
                out.data[split],
                cfg,
                part,
                forecasts,
                model_forecast,
                out.scored,
                statistical["val"],
                interval_forecast(
                    out.combination,
                    part,
                    forecasts[combine.NAME],
                    season,
                    report_quantiles(cfg.train),
                ),
            )
    return out


def _split_scores(
    part: WindowSet,
    forecasts: dict[str, np.ndarray | None],
    seen: np.ndarray,
    season: int,
    n_targets: int,
) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """``(scores, per series)`` of the forecasts of one split (per series: {} but for a
    panel); ``seen``: ``(n_series,)`` in-sample rows of each series before the split."""
    if part.ids is None:
        scale = seasonal_scale(part.history[: seen[0], :n_targets], season)
        return score_forecasts(part.y_true, forecasts, scale), {}
    return _panel_scores(part, forecasts, seen, season)
