"""Forecast error metrics in original units (numpy only).

Every metric takes ``y_true`` and ``y_pred`` of exactly the same shape, e.g. ``(n, horizon,
n_targets)`` from :meth:`stacklstm.data.WindowSet.to_original`, and averages over all entries.
Shapes are never broadcast: ``(batch, 1)`` against ``(batch,)`` would silently compare every
prediction with every target. NaN or Inf in either input is an error, not a NaN result.

Example:
    >>> forecast_metrics([1.0, 2.0, 4.0], [2.0, 2.0, 2.0])
    {'mae': 1.0, 'rmse': 1.2909944487358056, 'mape': 50.0, 'smape': 44.44444444444444}
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike


def _pair(y_true: ArrayLike, y_pred: ArrayLike) -> tuple[np.ndarray, np.ndarray]:
    """Both inputs as float64 arrays of one shape; raises ValueError otherwise."""
    true = np.asarray(y_true, dtype=np.float64)
    pred = np.asarray(y_pred, dtype=np.float64)
    if true.shape != pred.shape:
        raise ValueError(
            f"y_true and y_pred must have the same shape, got {true.shape} and {pred.shape}; "
            "reshape one explicitly (broadcasting is refused)"
        )
    if true.size == 0:
        raise ValueError("y_true and y_pred are empty; expected at least one forecast")
    for name, values in (("y_true", true), ("y_pred", pred)):
        bad = ~np.isfinite(values)
        if bad.any():
            raise ValueError(
                f"{name} holds {int(bad.sum())} NaN/Inf entries of {values.size}; expected "
                "finite values (drop forecasts whose targets lie past the data)"
            )
    return true, pred


def mae(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Mean absolute error.

    Example:
        >>> mae([1.0, 2.0], [2.0, 4.0])
        1.5
    """
    true, pred = _pair(y_true, y_pred)
    return float(np.mean(np.abs(pred - true)))


# Errors whose largest magnitude lies in this range square without underflow or overflow
# (their mean square stays inside float64's normal range for any count of entries).
_PLAIN_RMSE = (1e-140, 1e140)


def rmse(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Root mean squared error.

    Scale-safe: where the errors are so small (or large) that their squares would underflow
    to 0 (or overflow to Inf), they are divided by the largest absolute error before
    squaring, ``peak * sqrt(mean((e / peak)^2))``; otherwise it is the plain
    ``sqrt(mean(e^2))``. So errors of 1e-300 give an RMSE of that size, not 0.

    Example:
        >>> rmse([1.0, 1.0], [4.0, -2.0])
        3.0
        >>> round(rmse([0.0, 0.0], [3e-300, 4e-300]) / 1e-300, 6)
        3.535534
    """
    true, pred = _pair(y_true, y_pred)
    errors = np.abs(pred - true)
    peak = float(np.max(errors))
    if peak == 0.0 or not np.isfinite(peak):
        return peak
    if _PLAIN_RMSE[0] <= peak <= _PLAIN_RMSE[1]:
        return float(np.sqrt(np.mean(np.square(errors))))
    return peak * float(np.sqrt(np.mean(np.square(errors / peak))))


def mape(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Mean absolute percentage error, in percent: ``100 * mean(|pred - true| / |true|)``.

    Entries whose target is exactly 0 are skipped (their ratio is undefined); if every
    target is 0 the result is NaN. Use :func:`smape` or :func:`mae` for series near zero.

    Example:
        >>> mape([0.0, 2.0, 4.0], [5.0, 1.0, 5.0])
        37.5
    """
    true, pred = _pair(y_true, y_pred)
    scored = true != 0
    if not scored.any():
        return float("nan")
    return float(100.0 * np.mean(np.abs(pred[scored] - true[scored]) / np.abs(true[scored])))


def smape(y_true: ArrayLike, y_pred: ArrayLike) -> float:
    """Symmetric MAPE in percent, in [0, 200]: ``100 * mean(2|pred - true| / (|true| + |pred|))``.

    An entry where both target and prediction are 0 is a perfect forecast and counts as 0.

    Example:
        >>> smape([0.0, 1.0], [0.0, 3.0])
        50.0
    """
    true, pred = _pair(y_true, y_pred)
    denominator = np.abs(true) + np.abs(pred)
    ratio = np.divide(
        2.0 * np.abs(pred - true),
        denominator,
        out=np.zeros_like(denominator),
        where=denominator > 0,
    )
    return float(100.0 * np.mean(ratio))


def seasonal_scale(history: ArrayLike, season: int) -> np.ndarray:
    """``(n_targets,)`` in-sample MAE of the seasonal naive forecast: the scale of :func:`mase`.

    ``mean(|y[t] - y[t - season]|)`` over the rows of ``history`` (``(time, n_targets)``, the
    values seen before the forecasts). A history of ``season`` rows or fewer has no seasonal
    difference; the lag-1 (naive) differences are used instead.

    Example:
        >>> seasonal_scale([[1.0], [2.0], [4.0], [7.0]], 2).tolist()
        [4.0]
    """
    values = np.asarray(history, dtype=np.float64)
    if values.ndim != 2:
        raise ValueError(f"history must be (time, n_targets), got shape {values.shape}")
    if not isinstance(season, (int, np.integer)) or season < 1:
        raise ValueError(f"season must be an integer >= 1, got {season!r}")
    lag = season if len(values) > season else 1
    if len(values) <= lag:
        raise ValueError(f"history has {len(values)} rows; at least 2 are needed for a scale")
    return np.mean(np.abs(values[lag:] - values[:-lag]), axis=0)


def mase(y_true: ArrayLike, y_pred: ArrayLike, scale: ArrayLike) -> float | None:
    """Mean absolute scaled error: the MAE of each target divided by its ``scale``, averaged.

    ``scale`` has one entry per target (the last axis), e.g. from :func:`seasonal_scale`:
    below 1 beats the in-sample seasonal naive forecast. None when a scale is 0 (a constant
    history), where the ratio is undefined.

    Example:
        >>> mase([[1.0, 10.0], [3.0, 10.0]], [[2.0, 12.0], [3.0, 12.0]], [0.5, 4.0])
        0.75
    """
    true, pred = _pair(y_true, y_pred)
    scale = np.asarray(scale, dtype=np.float64)
    if true.ndim == 0 or scale.shape != true.shape[-1:]:
        raise ValueError(
            f"scale must have one entry per target, shape {true.shape[-1:]}, got {scale.shape}"
        )
    if not np.all(np.isfinite(scale)) or np.any(scale < 0):
        raise ValueError(f"scale must hold finite values >= 0, got {scale.tolist()}")
    if np.any(scale == 0):
        return None
    per_target = np.mean(np.abs(pred - true).reshape(-1, scale.size), axis=0)
    return float(np.mean(per_target / scale))


def forecast_metrics(
    y_true: ArrayLike, y_pred: ArrayLike, scale: ArrayLike | None = None
) -> dict[str, float | None]:
    """All metrics as a JSON-able dict with keys ``mae``, ``rmse``, ``mape``, ``smape`` and,
    given a ``scale`` (see :func:`mase`), ``mase``.

    An undefined metric is None, never NaN (which JSON cannot hold): ``mape`` when every
    target is 0, ``mase`` when a scale is 0.

    Example:
        >>> forecast_metrics([0.0, 0.0], [1.0, 0.0])["mape"] is None
        True
    """
    percentage = mape(y_true, y_pred)
    out: dict[str, float | None] = {
        "mae": mae(y_true, y_pred),
        "rmse": rmse(y_true, y_pred),
        "mape": None if np.isnan(percentage) else percentage,
        "smape": smape(y_true, y_pred),
    }
    if scale is not None:
        out["mase"] = mase(y_true, y_pred, scale)
    return out
