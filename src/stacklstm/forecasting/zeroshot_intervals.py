"""The shipped models' intervals, fitted once at training time.

A pretrained model forecasts series it never saw, often too short to calibrate on their own
windows. Its intervals are calibrated on the series it was trained on instead: for each
validation window of its run's selection (the model chosen on those windows, which did not
train on them), the absolute error of each horizon step over the seasonal naive MAE of the
series' rows up to the window's origin (the scale of MASE). The half-width of a level at a
step is the split-conformal quantile of those scaled errors (the ``ceil((n + 1) level) / n``
empirical quantile); a forecast's interval is its point plus and minus that half-width
times the series' own scale (:func:`stacklstm.forecasting.zeroshot.series_scales`).

Example:
    >>> errors = np.array([[1.0], [2.0], [3.0], [4.0]])  # 4 windows, 1 step
    >>> scaled_halfwidths(errors, [50])["50"].tolist()
    [3.0]
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from .prediction import level_name


def scaled_halfwidths(errors: np.ndarray, levels: Sequence[float]) -> dict[str, np.ndarray]:
    """``{level name: (horizon,) half-widths}``: per step, the split-conformal quantile at
    ``level`` percent of ``errors`` ``(n_windows, horizon)`` (scaled absolute errors; NaN
    rows are left out)."""
    out = {}
    for value in levels:
        column_values = []
        for k in range(errors.shape[1]):
            kept = np.sort(errors[np.isfinite(errors[:, k]), k])
            n = len(kept)
            if n == 0:
                raise ValueError("no finite validation error to calibrate the intervals on")
            rank = min(n, int(np.ceil((n + 1) * float(value) / 100)))
            column_values.append(kept[rank - 1])
        out[level_name(value)] = np.asarray(column_values)
    return out


def validation_errors(run_dir: str | Path) -> np.ndarray:
    """``(n_windows, horizon)`` scaled absolute errors of the validation windows of the run
    in ``run_dir`` (its selection's, for a retrained run), as the module describes."""
    from ..rundir.info import read_run_info
    from .calibration import validation_windows
    from .inference import load_run, load_selection, load_series
    from .zeroshot import series_scales

    info = read_run_info(run_dir)
    retrained = info.config.train.retrain in ("all", "on")
    scorer = load_selection(run_dir) if retrained else load_run(run_dir)
    windows = validation_windows(scorer)
    point = scorer.forecast_quantiles(windows).point[..., 0]  # (n, horizon)
    _, series = load_series(scorer.info, None)  # original units
    values, bounds = series.values[:, 0], series.bounds
    position = {name: i for i, name in enumerate(series.ids or ("",))}
    season = int(info.config.data.season)
    scales = np.empty(len(windows))
    for w, (s, origin) in enumerate(zip(windows.series, windows.local_origin, strict=True)):
        start = bounds[position[windows.ids[s]] if windows.ids else 0]
        rows = values[start : start + origin + 1]
        scales[w] = series_scales(rows, np.array([0, len(rows)]), season)[0]
    errors = np.abs(windows.y_true[..., 0] - point)
    with np.errstate(divide="ignore", invalid="ignore"):
        scaled = errors / scales[:, None]
    scaled[~np.isfinite(scaled)] = np.nan  # a flat history: no scale
    return scaled
