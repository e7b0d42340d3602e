"""A run's prediction intervals: uncalibrated from the network, or conformally calibrated.

With ``conformal=True`` the intervals are calibrated on the validation windows of the run's
own table (:func:`stacklstm.intervals.conformal_offsets`). ``evaluate_run`` computes the
offsets while scoring and keeps them in ``calibration.json`` beside the checkpoint they
belong to, with the SHA-256 of its content; ``predict`` reads that file, or computes the
offsets again from the run's own table when the file is missing, belongs to another
checkpoint, or differs from its checksum (edited or damaged: a one-line warning says so,
and no edited offset ever moves an interval). Files written before checksums existed have
none and are read as they are.

Example:
    >>> CALIBRATION_FILE
    'calibration.json'
    >>> run = load_run("runs/co2")  # doctest: +SKIP
    >>> forecast = interval_forecast(run, windows, run_calibration(run))  # doctest: +SKIP
    >>> forecast.levels  # doctest: +SKIP
    (0.025, 0.1, 0.5, 0.9, 0.975)
"""

from __future__ import annotations

import hashlib
import json
import logging
from pathlib import Path
from typing import Any

import numpy as np

from ..config import TrainConfig
from ..data import WindowSet, make_splits
from ..intervals import Calibration, Forecast, calibrate, conformal_offsets, report_quantiles
from ..rundir.files import CALIBRATION_FILE
from ..rundir.folder import atomic_write
from .inference import TrainedRun, forecast_quantiles, load_series

log = logging.getLogger(__name__)


def fit_calibration(cfg: TrainConfig, y_val: np.ndarray, val: Forecast) -> Calibration | None:
    """The conformal offsets of a run (None without ``conformal`` or validation windows).

    Args:
        cfg: The run's training settings.
        y_val: ``(n, horizon, n_targets)`` validation targets in original units.
        val: The model's uncalibrated forecasts of those targets.
    """
    if not cfg.conformal or len(y_val) == 0:
        return None
    val = val.with_levels(report_quantiles(cfg))
    if not np.isfinite(val.quantiles).all():  # a diverged model: nothing to calibrate
        log.warning("the validation forecasts hold NaN/Inf; the intervals are not calibrated")
        return None
    return conformal_offsets(y_val, val)


def calibration_checksum(content: dict[str, Any]) -> str:
    """SHA-256 (hex) of ``content`` (``calibration.json`` without its ``sha256`` key) as
    JSON with sorted keys; floats round-trip exactly, so a re-read file gives it back.

    Example:
        >>> calibration_checksum({"offsets": [0.343]}) == calibration_checksum({"offsets": [5.343]})
        False
    """
    text = json.dumps(content, sort_keys=True, allow_nan=False)
    return hashlib.sha256(text.encode()).hexdigest()


def write_calibration(run_dir: Path, calibration: Calibration, checkpoint: dict[str, Any]) -> None:
    """Keep ``calibration`` in the run folder, with the checkpoint it was computed for and
    the :func:`calibration_checksum` of both."""
    content = {"checkpoint": checkpoint, **calibration.to_dict()}
    content["sha256"] = calibration_checksum(content)
    text = json.dumps(content, indent=2, allow_nan=False) + "\n"
    atomic_write(Path(run_dir) / CALIBRATION_FILE, lambda handle: handle.write(text.encode()))


def read_calibration(path: Path, checkpoint: dict[str, Any]) -> Calibration | None:
    """The offsets kept in ``path`` for ``checkpoint``; None when they belong to another one.

    Raises:
        ValueError: The file is not a calibration, or differs from the checksum written
            with it (an edited or damaged file). A file without a checksum (written before
            checksums existed) is read as it is.
        OSError: The file cannot be read.
    """
    saved = json.loads(path.read_text(encoding="utf-8"))
    if not isinstance(saved, dict):
        raise ValueError(f"expected a JSON object, got {type(saved).__name__}")
    if "sha256" in saved:
        content = {key: value for key, value in saved.items() if key != "sha256"}
        if calibration_checksum(content) != saved["sha256"]:
            raise ValueError(
                "its content differs from the checksum written with it: edited or damaged"
            )
    if saved.get("checkpoint") != checkpoint:
        return None
    return Calibration.from_dict(saved)


def validation_windows(run: TrainedRun) -> WindowSet:
    """The validation windows of the run's own table, cut with its saved scaler."""
    cfg = run.info.config.data
    _, series = load_series(run.info, None)
    splits, _ = make_splits(series, cfg, scaler=run.info.scaler)
    return splits.val


def run_calibration(run: TrainedRun, predict_step=None) -> Calibration | None:
    """The run's conformal offsets: from ``calibration.json`` when it belongs to the restored
    checkpoint and matches its checksum, else computed from the validation windows of the
    run's own table (with a one-line warning when the file is there but unusable), forecast
    by the run's model or, for a run retrained on those rows, by its selection's, as the
    report calibrated it."""
    cfg = run.info.config.train
    if not cfg.conformal:
        return None
    path = run.run_dir / CALIBRATION_FILE
    if path.is_file():
        try:
            kept = read_calibration(path, run.checkpoint)
            if kept is not None:
                return kept
        except (ValueError, KeyError, TypeError, OSError) as err:
            reason = " ".join(str(err).split()) or type(err).__name__
            log.warning(
                "cannot use %s (%s); calibrating again from the validation windows of the "
                "run's own table",
                path,
                reason,
            )
    scorer = run  # a retrained run trained on its validation rows: its selection did not
    if cfg.retrain in ("all", "on"):
        from .inference import load_selection

        scorer = load_selection(run.run_dir)
    val = validation_windows(scorer)
    return fit_calibration(cfg, val.y_true, forecast_quantiles(scorer, val, predict_step))


def interval_forecast(
    run: TrainedRun, windows: WindowSet, calibration: Calibration | None, predict_step=None
) -> Forecast:
    """The run's forecasts of ``windows``, calibrated when ``calibration`` is given."""
    out = forecast_quantiles(run, windows, predict_step)
    return out if calibration is None else calibrate(out, calibration)
