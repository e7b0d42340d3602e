"""The held series and the windows cut from them, gathered per batch.

The series (one, or all of a panel's, one after another) are held once, scaled, in model
space: a :class:`HeldSeries`. A :class:`WindowSet` is an index over it, one origin per
window plus a few numbers per window (anchor, level); :meth:`WindowSet.gather` builds the
model inputs and targets of the windows asked for, so memory grows with the series and one
batch, never with ``windows x window``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np

from ..checks import is_int
from ..inputs import ForecastInputs
from ..metrics import seasonal_scale
from ..transforms import PER_SERIES
from . import season as seasons

#: The largest loss weight of a series before the normalisation (``s ** -power`` of
#: :meth:`WindowSet.mase_weights`): a series of values near 1e-300 would weigh inf.
MAX_WEIGHT = 1e30
#: The fields of a :class:`WindowSet` with one entry per window.
_PER_WINDOW = ("origin", "series", "anchor", "level")


@dataclass(frozen=True, eq=False)
class HeldSeries:
    """The series as the windows read them, held once and shared by every split's windows.

    Attributes:
        model: ``(rows, n_columns)`` float64 scaled model-space values (first differences
            with ``difference``, whose first row in each series is NaN); targets first.
        original: ``(rows, n_targets)`` float64 targets in original units.
        times: ``(rows,)`` time stamps, or None.
        offsets: ``(n_series + 1,)`` int64: series ``i`` is rows ``offsets[i]:offsets[i+1]``.
        ids: The series' names, or None for a table that is one series.
        center: ``(n_series, n_targets)`` float64 scaler centers of the targets.
        scale: ``(n_series, n_targets)`` float64 scaler scales of the targets.
        pattern: ``(n_series, season, n_targets)`` float64 seasonal pattern removed from the
            targets before scaling (``deseasonalize``), or None.
        phase0: ``(n_series,)`` int64 phase of each series' first row, or None.
        transformed: Whether the model space holds the targets' ``transform``: a bool, or
            with ``target_transform="per_series"`` an ``(n_series,)`` bool array, per series.
        transform: The target transform's name (:data:`stacklstm.transforms.TRANSFORMS`).
        n_future: The last ``n_future`` columns of ``model`` are known in advance.
        static: ``(n_series, n_static)`` float64 scaled static features, or None.
        tail: ``(n_series, horizon, n_future)`` float64 scaled model-space known-future
            values of the steps after each series' last row (``predict``), or None.
    """

    model: np.ndarray
    original: np.ndarray
    times: np.ndarray | None
    offsets: np.ndarray
    ids: tuple[str, ...] | None
    center: np.ndarray
    scale: np.ndarray
    pattern: np.ndarray | None = None
    phase0: np.ndarray | None = None
    transformed: bool | np.ndarray = False
    transform: str = PER_SERIES
    n_future: int = 0
    static: np.ndarray | None = None
    tail: np.ndarray | None = None

    @property
    def has_covariates(self) -> bool:
        """Whether windows carry covariates (then ``gather`` gives ``ForecastInputs``)."""
        return self.n_future > 0 or self.static is not None

    @property
    def nbytes(self) -> int:
        return int(self.model.nbytes + self.original.nbytes)


@dataclass(frozen=True, eq=False)
class WindowSet:
    """Windows over held series: an origin per window, inputs and targets gathered on demand.

    Window ``i`` reads rows ``origin[i] - window + 1 .. origin[i]`` (inputs) and
    ``origin[i] + 1 .. origin[i] + horizon`` (targets) of ``held``, all within one series;
    targets past the end of its series are NaN.

    Attributes:
        held: The series (shared, not copied).
        origin: ``(n,)`` int64 row of each window's last input in ``held`` (for one series,
            the row in the series).
        series: ``(n,)`` int64 position of each window's series in ``held``.
        anchor: ``(n, n_targets)`` float64 model-space value subtracted by window
            normalisation (zeros with ``normalize="none"``).
        level: ``(n, n_targets)`` float64 original-unit target value at the origin.
        window: Input steps per window.
        horizon: Target steps per window.
        difference: Whether the model works on first differences.
    """

    held: HeldSeries
    origin: np.ndarray
    series: np.ndarray
    anchor: np.ndarray
    level: np.ndarray
    window: int
    horizon: int
    difference: bool

    def __len__(self) -> int:
        return int(self.origin.shape[0])

    @property
    def n_targets(self) -> int:
        return int(self.anchor.shape[1])

    @property
    def n_columns(self) -> int:
        return int(self.held.model.shape[1])

    @property
    def ids(self) -> tuple[str, ...] | None:
        return self.held.ids

    @property
    def local_origin(self) -> np.ndarray:
        """``(n,)`` int64 row of each origin within its own series."""
        return self.origin - self.held.offsets[self.series]

    @property
    def origin_time(self) -> np.ndarray | None:
        """``(n,)`` time stamp of each origin, or None without a time column."""
        return None if self.held.times is None else self.held.times[self.origin]

    @property
    def target_center(self) -> np.ndarray:
        """``(n, n_targets)`` scaler centers of each window's series."""
        return self.held.center[self.series]

    @property
    def target_scale(self) -> np.ndarray:
        """``(n, n_targets)`` scaler scales of each window's series."""
        return self.held.scale[self.series]

    @property
    def history(self) -> np.ndarray:
        """``(rows, n_targets)`` original-unit targets of every held series (shared)."""
        return self.held.original

    @property
    def target_index(self) -> np.ndarray:
        """``(n, horizon)`` int64 held row of each target (may be past its series' end)."""
        return self.origin[:, None] + np.arange(1, self.horizon + 1)

    @property
    def _stop(self) -> np.ndarray:
        """``(n,)`` the row after the last row of each window's series."""
        return self.held.offsets[self.series + 1]

    @property
    def y_true(self) -> np.ndarray:
        """``(n, horizon, n_targets)`` float64 targets in original units (NaN past the end
        of the series)."""
        targets = self.target_index
        past = targets >= self._stop[:, None]
        out = self.held.original[np.minimum(targets, len(self.held.original) - 1)]
        out[past] = np.nan
        return out

    @property
    def last_value(self) -> np.ndarray:
        """``(n, horizon, n_targets)`` naive forecast: the target value at the origin, repeated."""
        return np.repeat(self.level[:, None, :], self.horizon, axis=1)

    def gather(
        self, rows: np.ndarray | slice | None = None, *, targets: bool = True
    ) -> tuple[np.ndarray | ForecastInputs, np.ndarray | None]:
        """Model inputs and targets of the windows at ``rows`` (all windows if None).

        The one place a window is built from the held series: rows ``origin - window + 1 ..
        origin`` of the model-space series, the anchor subtracted from the target columns,
        then rounded to float32. With covariates, also the known-future columns of rows
        ``origin + 1 .. origin + horizon`` (past the end of the series: ``held.tail``, or
        NaN) and the static features of the window's series; past-only columns are never
        read after the origin.

        Args:
            rows: Index array, boolean mask or slice over the ``n`` windows.
            targets: Also build ``y`` (else None is returned in its place).

        Returns:
            ``x``: ``(b, window, n_columns)`` float32 inputs (targets first, then features),
            or with covariates a :class:`~stacklstm.inputs.ForecastInputs` of it, ``future``
            ``(b, horizon, n_future)`` and ``static`` ``(b, n_static)``, float32;
            ``y``: ``(b, horizon, n_targets)`` float32 model-space targets (NaN past the end
            of the series), or None.
        """
        rows = slice(None) if rows is None else rows
        origin = self.origin[rows]
        anchor = self.anchor[rows]  # (b, n_targets)
        nt, model = self.n_targets, self.held.model
        inputs = origin[:, None] + np.arange(1 - self.window, 1)  # (b, window)
        # a padded window (start_padding) repeats its series' first row (after differencing)
        first = self.held.offsets[self.series[rows]] + int(self.difference)
        x = model[np.maximum(inputs, first[:, None])]  # (b, window, n_columns) float64
        x[:, :, :nt] -= anchor[:, None, :]
        target_rows = origin[:, None] + np.arange(1, self.horizon + 1)  # (b, horizon)
        past = target_rows >= self._stop[rows][:, None]
        inside = np.minimum(target_rows, len(model) - 1)
        x_out: np.ndarray | ForecastInputs = x.astype(np.float32)
        if self.held.has_covariates:
            x_out = ForecastInputs(x_out, *self._covariates(rows, target_rows, inside, past))
        if not targets:
            return x_out, None
        y = model[inside, :nt]  # (b, horizon, n_targets)
        y[past] = np.nan
        y -= anchor[:, None, :]
        return x_out, y.astype(np.float32)

    def _covariates(
        self,
        rows: np.ndarray | slice,
        target_rows: np.ndarray,
        inside: np.ndarray,
        past: np.ndarray,
    ) -> tuple[np.ndarray, np.ndarray]:
        """``future (b, horizon, n_future)`` and ``static (b, n_static)`` float32 of the
        windows at ``rows``; ``past`` marks the horizon steps after the series' end."""
        held, nf = self.held, self.held.n_future
        series = self.series[rows]
        future = held.model[inside, held.model.shape[1] - nf :]  # (b, horizon, n_future)
        if past.any():
            if held.tail is None:
                future[past] = np.nan
            else:
                step = target_rows - self._stop[rows][:, None]  # 0-based step past the end
                which = np.broadcast_to(series[:, None], past.shape)
                future[past] = held.tail[which[past], step[past]]
        static = (
            np.zeros((len(series), 0)) if held.static is None else held.static[series]
        )  # (b, n_static)
        return future.astype(np.float32), static.astype(np.float32)

    def chunks(self, size: int) -> Iterator[np.ndarray]:
        """Index arrays of consecutive windows, ``size`` at a time (the last may be shorter)."""
        for start in range(0, len(self), size):
            yield np.arange(start, min(start + size, len(self)))

    @property
    def x(self) -> np.ndarray:
        """``(n, window, n_columns)`` float32: every window's inputs, gathered at once.

        A convenience for small data; training, evaluation and prediction gather per batch.
        """
        return self.gather(targets=False)[0]

    @property
    def y(self) -> np.ndarray:
        """``(n, horizon, n_targets)`` float32: every window's model-space targets at once."""
        return self.gather()[1]  # type: ignore[return-value]

    def take(self, rows: np.ndarray) -> WindowSet:
        """The windows at ``rows`` (an index array or boolean mask over ``n``), same series."""
        per_window = {name: getattr(self, name)[rows] for name in _PER_WINDOW}
        return dataclasses.replace(self, **per_window)

    def seasonal_naive(self, season: int) -> np.ndarray:
        """``(n, horizon, n_targets)`` seasonal naive forecast in original units.

        Step ``k`` (1-based) of a window with origin ``o`` takes the value at row
        ``o + k - season * ceil(k / season)``: ``season`` steps before the target for
        ``k <= season``, and the last observed value of the same phase beyond, so no value
        after the origin is used. Entries whose row would fall before the start of the
        window's series take the last value (the value at the origin) instead.
        """
        if not is_int(season) or season < 1:
            raise ValueError(f"season must be an integer >= 1, got {season!r}")
        k = np.arange(1, self.horizon + 1)
        source = self.origin[:, None] + k - season * ((k + season - 1) // season)  # (n, horizon)
        start = self.held.offsets[self.series][:, None]  # (n, 1)
        out = self.held.original[np.maximum(source, start)]  # (n, horizon, n_targets)
        return np.where((source < start)[:, :, None], self.last_value, out)

    def mase_weights(self, season: int, power: float) -> np.ndarray:
        """``(n,)`` float32 loss weight of each window: ``s ** -power`` of its series, where
        ``s`` is the mean absolute change over ``season`` rows (one row when the series has
        ``season`` rows or fewer) of the series' model-space targets up to the last target
        of its windows here (its training rows, for the training windows), averaged over the
        targets; normalised to mean 1 over the windows.

        ``s`` is the scale of MASE in the units the model's loss is measured in (the seasonal
        pattern does not change a change over a whole season), so with ``power`` 2 and the
        squared error, each series' loss counts as the squared MASE of its errors would. A
        series whose ``s`` is 0 or not finite weighs 1 before the normalisation, and ``s **
        -power`` is capped at :data:`MAX_WEIGHT`.

        Example:
            >>> held = HeldSeries(
            ...     model=np.array([[0.0], [1.0], [2.0], [0.0], [4.0], [8.0]]),
            ...     original=np.zeros((6, 1)), times=None, offsets=np.array([0, 3, 6]),
            ...     ids=("a", "b"), center=np.zeros((2, 1)), scale=np.ones((2, 1)))
            >>> ws = WindowSet(held, origin=np.array([1, 4]), series=np.array([0, 1]),
            ...     anchor=np.zeros((2, 1)), level=np.zeros((2, 1)), window=1, horizon=1,
            ...     difference=False)
            >>> ws.mase_weights(season=1, power=2).tolist()  # s = 1 and 4: 1 and 1/16
            [1.8823529481887817, 0.11764705926179886]
        """
        if not is_int(season) or season < 1:
            raise ValueError(f"season must be an integer >= 1, got {season!r}")
        if len(self) == 0:
            return np.ones(0, np.float32)
        held, n_targets = self.held, self.n_targets
        n_series = len(held.offsets) - 1
        stop = np.full(n_series, -1, np.int64)  # the last row any window of the series reads
        np.maximum.at(stop, self.series, np.minimum(self.origin + self.horizon, self._stop - 1))
        per_series = np.ones(n_series)
        for i in np.flatnonzero(stop >= 0):
            rows = held.model[held.offsets[i] : stop[i] + 1, :n_targets]
            inverse = []
            for column in rows.T:
                values = column[np.isfinite(column)]
                if len(values) < 2:  # no change to measure
                    continue
                s = seasonal_scale(values[:, None], season)[0]  # MASE's, lag 1 if too short
                if np.isfinite(s) and s > 0:  # capped: a series of values near 1e-300
                    with np.errstate(over="ignore"):  # would weigh inf, and the mean NaN
                        inverse.append(min(np.float64(s) ** -power, MAX_WEIGHT))
            if inverse:
                per_series[i] = np.mean(inverse)
        weight = per_series[self.series]
        return (weight / weight.mean()).astype(np.float32)

    def to_original(self, y_model: np.ndarray) -> np.ndarray:
        """Map model-space forecasts ``(n, horizon, n_targets)`` to original units (float64).

        Uses only what is known at each origin: adds back the window anchor, undoes the
        scaling of the window's series and, with differencing, adds the cumulative sum over
        the horizon to the level at the origin; then adds back the seasonal pattern of each
        target's phase and undoes ``target_transform`` (:mod:`stacklstm.data.season`).
        ``to_original(self.y)`` reproduces ``self.y_true`` up to float32 rounding of ``y``.
        """
        y_model = np.asarray(y_model, dtype=np.float64)
        expected = (len(self), self.horizon, self.n_targets)
        if y_model.shape != expected:
            raise ValueError(
                f"expected forecasts of shape (n, horizon, n_targets) = {expected}, got "
                f"{y_model.shape}"
            )
        scale, center = self.target_scale[:, None, :], self.target_center[:, None, :]
        steps = (y_model + self.anchor[:, None, :]) * scale + center
        held = self.held
        # the windows transformed: all, none, or (per_series) their series'
        covered = held.transformed
        logged = covered if np.ndim(covered) == 0 else np.asarray(covered)[self.series]
        if held.pattern is None and not np.any(logged):  # the model space is the values'
            if self.difference:
                return self.level[:, None, :] + np.cumsum(steps, axis=1)
            return steps
        level = seasons.forward_targets(self.level, logged, held.transform)  # (n, n_targets)
        season = 0 if held.pattern is None else held.pattern.shape[1]
        if held.pattern is not None:
            assert held.phase0 is not None
            phase = held.phase0[self.series] + self.local_origin  # (n,) phase of the origin
            steps_ahead = phase[:, None] + np.arange(self.horizon + 1)  # origin, targets
            pattern = held.pattern[self.series[:, None], steps_ahead % season]
            level = level - pattern[:, 0]
        out = level[:, None, :] + np.cumsum(steps, axis=1) if self.difference else steps
        if held.pattern is not None:
            out = out + pattern[:, 1:]
        return seasons.inverse_targets(out, logged, held.transform)

    def of_series(self, i: int) -> WindowSet:
        """The windows of held series ``i``."""
        return self.take(self.series == i)
