"""Windows and splits: split by time, scale, cut windows, window-relative normalisation."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from ..checks import DataError, is_int
from ..config import DataConfig
from .clean import Series
from .scale import Scaler


@dataclass(frozen=True, eq=False)
class WindowSet:
    """Windows cut from one series: model inputs and targets, plus what undoes the transforms.

    Attributes:
        x: ``(n, window, n_columns)`` float32 model inputs (targets first, then features).
        y: ``(n, horizon, n_targets)`` float32 model-space targets (NaN beyond the data).
        y_true: ``(n, horizon, n_targets)`` float64 targets in original units (NaN beyond).
        origin: ``(n,)`` int64 index of each window's last input row in the series.
        origin_time: ``(n,)`` datetime64 time stamp of that row, or None.
        anchor: ``(n, n_targets)`` float64 model-space value subtracted by window
            normalisation (zeros with ``normalize="none"``).
        level: ``(n, n_targets)`` float64 original-unit target value at the origin.
        target_center: ``(n_targets,)`` scaler centers of the targets.
        target_scale: ``(n_targets,)`` scaler scales of the targets.
        difference: Whether the model works on first differences.
        history: ``(time, n_targets)`` float64 original-unit targets of the whole series
            (shared, not copied), used by :meth:`seasonal_naive`.
    """

    x: np.ndarray
    y: np.ndarray
    y_true: np.ndarray
    origin: np.ndarray
    origin_time: np.ndarray | None
    anchor: np.ndarray
    level: np.ndarray
    target_center: np.ndarray
    target_scale: np.ndarray
    difference: bool
    history: np.ndarray

    def __len__(self) -> int:
        return int(self.x.shape[0])

    @property
    def horizon(self) -> int:
        return int(self.y.shape[1])

    @property
    def n_targets(self) -> int:
        return int(self.y.shape[2])

    @property
    def target_index(self) -> np.ndarray:
        """``(n, horizon)`` int64 series row of each target (may be past the data's end)."""
        return self.origin[:, None] + np.arange(1, self.horizon + 1)

    @property
    def last_value(self) -> np.ndarray:
        """``(n, horizon, n_targets)`` naive forecast: the target value at the origin, repeated."""
        return np.repeat(self.level[:, None, :], self.horizon, axis=1)

    def take(self, rows: np.ndarray) -> WindowSet:
        """The windows at ``rows`` (an index array or boolean mask over ``n``), same series."""
        per_window = {
            name: getattr(self, name)[rows]
            for name in ("x", "y", "y_true", "origin", "anchor", "level")
        }
        origin_time = None if self.origin_time is None else self.origin_time[rows]
        return dataclasses.replace(self, **per_window, origin_time=origin_time)

    def seasonal_naive(self, season: int) -> np.ndarray:
        """``(n, horizon, n_targets)`` seasonal naive forecast in original units.

        Step ``k`` (1-based) of a window with origin ``o`` takes the value at row
        ``o + k - season * ceil(k / season)``: ``season`` steps before the target for
        ``k <= season``, and the last observed value of the same phase beyond, so no value
        after the origin is used. Entries whose row would fall before the start of the
        series take the last value (the value at the origin) instead.
        """
        if not is_int(season) or season < 1:
            raise ValueError(f"season must be an integer >= 1, got {season!r}")
        k = np.arange(1, self.horizon + 1)
        source = self.origin[:, None] + k - season * ((k + season - 1) // season)  # (n, horizon)
        out = self.history[np.maximum(source, 0)]  # (n, horizon, n_targets)
        return np.where((source < 0)[:, :, None], self.last_value, out)

    def to_original(self, y_model: np.ndarray) -> np.ndarray:
        """Map model-space forecasts ``(n, horizon, n_targets)`` to original units (float64).

        Uses only what is known at each origin: adds back the window anchor, undoes the
        scaling and, with differencing, adds the cumulative sum over the horizon to the level
        at the origin. ``to_original(self.y)`` reproduces ``self.y_true`` up to float32
        rounding of ``y``.
        """
        y_model = np.asarray(y_model, dtype=np.float64)
        expected = (len(self), self.horizon, self.n_targets)
        if y_model.shape != expected:
            raise ValueError(
                f"expected forecasts of shape (n, horizon, n_targets) = {expected}, got "
                f"{y_model.shape}"
            )
        steps = (y_model + self.anchor[:, None, :]) * self.target_scale + self.target_center
        if self.difference:
            return self.level[:, None, :] + np.cumsum(steps, axis=1)
        return steps


@dataclass(frozen=True, eq=False)
class Splits:
    """Train, validation and test windows, and the row counts of each split.

    ``n_train + n_val + n_test`` is the length of the series; see :func:`split_rows`.
    """

    train: WindowSet
    val: WindowSet
    test: WindowSet
    n_train: int
    n_val: int
    n_test: int


def split_rows(n_rows: int, cfg: DataConfig) -> tuple[int, int, int]:
    """Rows ``(n_train, n_val, n_test)`` of a series of ``n_rows`` rows, in time order.

    Example:
        >>> split_rows(20, DataConfig(val_fraction=0.2, test_fraction=0.2))
        (12, 4, 4)
    """
    n_test = round(cfg.test_fraction * n_rows)
    n_val = round(cfg.val_fraction * n_rows)
    return n_rows - n_val - n_test, n_val, n_test


def _check_series(series: Series, cfg: DataConfig) -> None:
    cfg.validate()
    expected = cfg.target + cfg.features
    if series.columns != expected or series.n_targets != len(cfg.target):
        raise DataError(
            f"the series has columns {list(series.columns)} ({series.n_targets} targets) but the "
            f"config expects {list(expected)}; prepare it with the same DataConfig"
        )


def _model_space(series: Series, cfg: DataConfig) -> np.ndarray:
    """``(time, n_columns)`` float64 differenced (row 0 NaN) or level values, before scaling."""
    if not cfg.difference:
        return series.values
    steps = np.full_like(series.values, np.nan)
    steps[1:] = np.diff(series.values, axis=0)
    return steps


def _cut(
    model: np.ndarray, series: Series, origins: np.ndarray, cfg: DataConfig, scaler: Scaler
) -> WindowSet:
    """Windows ending at ``origins``; ``model`` is the scaled model-space series."""
    w, h, nt = cfg.window, cfg.horizon, series.n_targets
    origins = np.asarray(origins, dtype=np.int64)
    pad = np.full((h, model.shape[1]), np.nan)  # targets past the end of the data
    model_padded = np.concatenate([model, pad])
    original_padded = np.concatenate([series.values[:, :nt], pad[:, :nt]])
    inputs = origins[:, None] + np.arange(1 - w, 1)  # (n, window)
    targets = origins[:, None] + np.arange(1, h + 1)  # (n, horizon)
    x = model_padded[inputs]  # (n, window, n_columns)
    # (n, n_targets): the model-space target value at the origin, or nothing to subtract
    anchor = model[origins, :nt] if cfg.normalize == "window" else np.zeros((origins.size, nt))
    x[:, :, :nt] -= anchor[:, None, :]
    y = model_padded[targets, :nt] - anchor[:, None, :]  # (n, horizon, n_targets)
    return WindowSet(
        x=x.astype(np.float32),
        y=y.astype(np.float32),
        y_true=original_padded[targets],
        origin=origins,
        origin_time=None if series.times is None else series.times[origins],
        anchor=anchor,
        level=series.values[origins, :nt],
        target_center=scaler.center[:nt].copy(),
        target_scale=scaler.scale[:nt].copy(),
        difference=bool(cfg.difference),
        history=series.values[:, :nt],
    )


def _aligned_origins(last: int, lowest: int, step: int) -> np.ndarray:
    """Ascending ``(n,)`` origins ``last, last - step, ...`` down to ``lowest`` (inclusive)."""
    if last < lowest:
        return np.zeros(0, dtype=np.int64)
    return np.arange(last, lowest - 1, -step, dtype=np.int64)[::-1].copy()


def make_splits(series: Series, cfg: DataConfig) -> tuple[Splits, Scaler]:
    """Split by time, fit the scaler on the training rows, and cut the windows of each split.

    Rows ``[0, n_train)`` train, ``[n_train, n_train + n_val)`` validation, the rest test
    (:func:`split_rows`). A window belongs to the split holding all its targets (windows
    whose targets straddle a boundary are dropped); its inputs may reach back into earlier
    splits, never forward, so no training window touches a validation or test row.

    Every split's windows are aligned to its end: the split's last row is the last target of
    its last window, and origins step back from there (so the most recent rows are always
    used). Training and validation windows step by ``cfg.stride``; test windows start at
    every origin (step 1) from the last row before the test rows, so every test row is
    scored, as step 1 of the forecast made just before it and at every later step up to
    ``horizon`` where the data allows.

    Args:
        series: From :func:`prepare_series` with the same ``cfg``.
        cfg: Window, split and scaling settings.

    Returns:
        ``(splits, scaler)``; the scaler is fitted on the (differenced) training rows.

    Raises:
        DataError: Too few training rows for one window, or a validation/test fraction above
            0 that leaves fewer rows than ``horizon``.
    """
    _check_series(series, cfg)
    n_rows = len(series)
    w, h, first = cfg.window, cfg.horizon, int(cfg.difference)
    n_train, n_val, n_test = split_rows(n_rows, cfg)
    needed = w + h + first
    if n_train < needed:
        extra = " + 1 (difference)" if first else ""
        raise DataError(
            f"the training split has {n_train} of {n_rows} rows (val_fraction="
            f"{cfg.val_fraction}, test_fraction={cfg.test_fraction}) but window ({w}) + "
            f"horizon ({h}){extra} = {needed} rows are needed"
        )
    for name, count in (("validation", n_val), ("test", n_test)):
        if 0 < count < h:
            raise DataError(
                f"the {name} split has {count} rows, fewer than horizon ({h}); raise its "
                "fraction or set it to 0"
            )
    steps = _model_space(series, cfg)
    scaler = Scaler.fit(steps[first:n_train], cfg.scaler, series.columns, series.n_targets)
    model = scaler.transform(steps)
    lowest = w - 1 + first  # earliest origin with a full input window
    n_seen = n_train + n_val
    # origins, stepping back from the one whose last target is the split's last row
    train = _aligned_origins(n_train - 1 - h, lowest, cfg.stride)
    val = _aligned_origins(n_seen - 1 - h, max(lowest, n_train - 1), cfg.stride)
    test = _aligned_origins(n_rows - 1 - h, max(lowest, n_seen - 1), 1)
    splits = Splits(
        train=_cut(model, series, train, cfg, scaler),
        val=_cut(model, series, val, cfg, scaler),
        test=_cut(model, series, test, cfg, scaler),
        n_train=n_train,
        n_val=n_val,
        n_test=n_test,
    )
    return splits, scaler


def make_inference_windows(series: Series, cfg: DataConfig, scaler: Scaler) -> WindowSet:
    """Windows at every origin with a full input window, stride 1, up to the last row.

    For an origin shared with :func:`make_splits` (same series, config and scaler), ``x``
    and :meth:`WindowSet.to_original` are identical to the evaluation windows'. ``y`` and
    ``y_true`` are NaN where targets lie past the end of the data.

    Args:
        series: From :func:`prepare_series` with the same ``cfg``.
        cfg: The training run's config.
        scaler: The training run's scaler (from :func:`make_splits` or a checkpoint).

    Returns:
        WindowSet with origins ``window - 1 (+1 with difference) .. len(series) - 1``.
    """
    _check_series(series, cfg)
    if scaler.columns != series.columns or scaler.n_targets != series.n_targets:
        raise DataError(
            f"the scaler was fitted on columns {list(scaler.columns)} but the series has "
            f"{list(series.columns)}"
        )
    if scaler.kind != cfg.scaler:
        raise DataError(f"the config asks for scaler {cfg.scaler!r} but got a {scaler.kind!r} one")
    lowest = cfg.window - 1 + int(cfg.difference)
    if len(series) <= lowest:
        raise DataError(
            f"the series has {len(series)} rows but one input window needs {lowest + 1}"
        )
    model = scaler.transform(_model_space(series, cfg))
    return _cut(model, series, np.arange(lowest, len(series)), cfg, scaler)
