"""The function an exported file holds: raw inputs in original units -> forecasts in original
units, for every kind of single run (one series or a panel, with or without covariates, a
seasonal pattern, quantiles and conformal offsets).

Every fitted number is a constant of the program: the scalers (one row per series of a
panel, the series picked by the ``ids`` input), the seasonal patterns and the phase shift
of each series' phase 0 from the first series', the static scaler, the conformal offsets.
The affine steps run in float64 as :meth:`stacklstm.data.WindowSet.to_original` does; the
network in float32.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..config import DataConfig
from ..data import PanelScaler, Scaler
from ..data.season import _steps_between
from ..intervals import INTERVAL_LOSSES, Calibration, OutputHead, interval_pairs
from ..kernels.lstm import LSTMState
from ..transforms import applied
from .export_quantiles import model_quantiles

Array = jax.Array


@dataclass(frozen=True)
class ProgramSpec:
    """What a run's program takes and gives (besides the windows, always its first input).

    Attributes:
        n_columns: Columns of each window row (targets first).
        n_series: Series of the run (1 for a run on one series).
        panel: Whether the program takes each window's series index (``ids`` input).
        seasonal: Whether it takes each window's phase (``phase`` input).
        n_future: Known-future columns over the horizon (``future`` input; 0: none).
        n_static: Static columns (``static`` input; 0: none).
        levels: The quantile levels of the second output (``()``: point forecasts only).
    """

    n_columns: int
    n_series: int = 1
    panel: bool = False
    seasonal: bool = False
    n_future: int = 0
    n_static: int = 0
    levels: tuple[float, ...] = ()

    @property
    def inputs(self) -> list[str]:
        """The program's inputs in order: ``windows``, then those the run needs of
        ``phase``, ``ids``, ``future``, ``static``."""
        flags = (
            ("phase", self.seasonal),
            ("ids", self.panel),
            ("future", self.n_future > 0),
            ("static", self.n_static > 0),
        )
        return ["windows"] + [name for name, used in flags if used]

    def shapes(self, batch: Any, input_steps: int, horizon: int) -> list[jax.ShapeDtypeStruct]:
        """The ``jax.ShapeDtypeStruct`` of each input, in :attr:`inputs` order."""
        shape = {
            "windows": ((batch, input_steps, self.n_columns), jnp.float64),
            "phase": ((batch,), jnp.int32),
            "ids": ((batch,), jnp.int32),
            "future": ((batch, horizon, self.n_future), jnp.float64),
            "static": ((batch, self.n_static), jnp.float64),
        }
        return [jax.ShapeDtypeStruct(*shape[name]) for name in self.inputs]


def phase_shifts(scaler: Scaler | PanelScaler) -> np.ndarray:
    """``(n_series,)`` int64: each series' phase 0 in phases counted from the first series'
    phase 0 (zeros without a pattern, or with phases counted in rows of each series).

    Raises:
        ValueError: A series whose phase 0 is off the first series' time grid.
    """
    seasonal = scaler.seasonal
    n = len(scaler.ids) if isinstance(scaler, PanelScaler) else 1
    if seasonal is None or seasonal.reference[0] is None:
        return np.zeros(n, np.int64)
    first = seasonal.reference[0]
    try:
        steps = [_steps_between(first, ref, seasonal.freq) for ref in seasonal.reference]
    except Exception as err:  # DataError, or a stamp pandas cannot read
        raise ValueError(f"cannot count the series' phase origins from {first!r}: {err}") from err
    return np.asarray(steps, np.int64) % seasonal.season


def _per_series(scaler: Scaler | PanelScaler) -> tuple[np.ndarray, np.ndarray]:
    """``(center, scale)``, ``(n_series, n_columns)`` float64 each."""
    center = np.asarray(scaler.center, np.float64)
    scale = np.asarray(scaler.scale, np.float64)
    return center.reshape(-1, center.shape[-1]), scale.reshape(-1, scale.shape[-1])


def _calibration_delta(calibration: Calibration, levels: Sequence[float]) -> np.ndarray:
    """``(horizon, n_targets, Q)`` float64 added to the quantiles at ``levels`` before they
    are sorted: minus each interval's offset at its low quantile, plus at its high one."""
    pairs = interval_pairs(tuple(levels))
    if tuple(level for level, _, _ in pairs) != tuple(calibration.levels):
        raise ValueError(f"the calibration is for levels {calibration.levels}")
    offsets = np.asarray(calibration.offsets, np.float64)  # (L, horizon, n_targets)
    delta = np.zeros((*offsets.shape[1:], len(levels)))
    for i, (_, lo, hi) in enumerate(pairs):
        delta[..., lo] -= offsets[i]
        delta[..., hi] += offsets[i]
    return delta


@dataclass(frozen=True)
class _Constants:
    """What the program holds besides the network: the fitted numbers, as float64 arrays."""

    center: np.ndarray  # (n_series, n_columns)
    scale: np.ndarray
    pattern: np.ndarray | None  # (n_series, season, n_targets)
    shifts: np.ndarray  # (n_series,)
    static_center: np.ndarray | None  # (n_static,)
    static_scale: np.ndarray | None
    delta: np.ndarray | None  # (horizon, n_targets, Q): the conformal offsets
    logged: np.ndarray | None = None  # (n_series,) bool: on the log1p scale (per_series)


def _constants(
    cfg: DataConfig,
    scaler: Scaler | PanelScaler,
    spec: ProgramSpec,
    static_scaler: Scaler | None,
    calibration: Calibration | None,
) -> _Constants:
    """The program's fitted numbers of a run (checked against ``spec``)."""
    center, scale = _per_series(scaler)
    seasonal, nt = scaler.seasonal, len(cfg.target)
    if seasonal is not None and seasonal.pattern.shape != (center.shape[0], seasonal.season, nt):
        raise ValueError(
            f"expected the seasonal patterns of {center.shape[0]} series of {nt} targets, got "
            f"shape {seasonal.pattern.shape}"
        )
    if spec.n_static and static_scaler is None:
        raise ValueError("a program with static inputs needs the run's static scaler")
    static = static_scaler if spec.n_static else None
    return _Constants(
        center,
        scale,
        None if seasonal is None else np.asarray(seasonal.pattern, np.float64),
        phase_shifts(scaler),
        None if static is None else np.asarray(static.center, np.float64),
        None if static is None else np.asarray(static.scale, np.float64),
        None if calibration is None else _calibration_delta(calibration, spec.levels),
        _logged(cfg, scaler, center.shape[0]),
    )


def _logged(cfg: DataConfig, scaler: Scaler | PanelScaler, n_series: int) -> np.ndarray | None:
    """``(n_series,)`` bool: which series the model sees on the ``log1p`` scale (every one
    with ``log1p``, each its own with ``per_series``); None where none is."""
    if cfg.transform_kind not in ("per_series", "none"):  # every series
        return np.ones(n_series, dtype=bool)
    if cfg.transform_kind == "none":
        return None
    logged = getattr(scaler, "logged", None)
    if logged is None or np.shape(logged) != (n_series,):
        raise ValueError(
            "target_transform='per_series' needs the scaler's log1p flag of each "
            f"of its {n_series} series"
        )
    return np.asarray(logged, dtype=bool)


def _to_original(
    ys: Array, cfg: DataConfig, k: _Constants, model_x: Array, seasons: Array | None, anchor: Array
) -> Array:
    """Model-space forecasts ``ys (batch, horizon, n_targets, K)`` in original units, as
    :meth:`stacklstm.data.WindowSet.to_original` maps them (``K``: the point and quantiles).

    ``model_x`` holds the windows after ``log1p`` and the pattern's removal, ``seasons`` the
    pattern at every row's phase (window rows, then horizon rows); ``k`` holds each window's
    series' center and scale, ``(batch, 1, n_columns)``."""
    nt, input_steps = len(cfg.target), cfg.input_steps
    c, s = k.center, k.scale
    out = (ys + anchor[:, None, :, None]) * s[:, :, :nt, None] + c[:, :, :nt, None]
    if cfg.difference:  # from the level at the origin
        out = model_x[:, -1, :nt][:, None, :, None] + jnp.cumsum(out, axis=1)
    if seasons is not None:
        out = out + seasons[:, input_steps:, :, None]
    if k.logged is not None:  # (batch,): each window's series transformed or not
        logged = k.logged[:, None, None, None]
        out = jnp.where(logged, applied(cfg.transform_kind).inverse(out, jnp), out)
    return out


def forecast_function(
    model: Any,
    params: Any,
    cfg: DataConfig,
    scaler: Scaler | PanelScaler,
    head: OutputHead | None = None,
    *,
    spec: ProgramSpec | None = None,
    static_scaler: Scaler | None = None,
    calibration: Calibration | None = None,
) -> Callable[..., Any]:
    """The function the artifact holds: raw inputs -> forecasts, both in original units.

    Args:
        model: The run's ``LSTMModel`` (or, with covariates, its ``Forecaster``).
        params: Its parameters (the ``params`` collection), baked in as constants.
        cfg: The run's data settings (window, horizon, targets, normalize, difference).
        scaler: The run's fitted scaler (a :class:`~stacklstm.data.PanelScaler` for a panel).
        head: The run's output head (None: a point loss).
        spec: The inputs and outputs (None: windows, and phases for a seasonal pattern, in;
            point forecasts out).
        static_scaler: The run's scaler of the static features (with ``spec.n_static``).
        calibration: Conformal offsets applied to the quantiles (``spec.levels`` must be
            their quantiles).

    Returns:
        ``f(x, *rest)`` over :attr:`ProgramSpec.inputs`: ``x`` ``(batch, window + difference,
        n_columns)`` float64; ``phase`` ``(batch,)`` int32 the phase of each window's last
        row (counted from the first series' phase 0); ``ids`` ``(batch,)`` int32 series
        indexes; ``future`` ``(batch, horizon, n_future)`` float64 raw known-future values of
        the horizon's rows; ``static`` ``(batch, n_static)`` float64 raw. It returns
        ``(batch, horizon, n_targets)`` float64 forecasts, and with ``spec.levels`` also
        ``(batch, horizon, n_targets, Q)`` quantiles. Trace it with x64 enabled.
    """
    nt, horizon = len(cfg.target), cfg.horizon
    head = OutputHead("mse") if head is None else head
    spec = spec or ProgramSpec(len(scaler.columns), seasonal=scaler.seasonal is not None)
    input_steps = cfg.input_steps
    const = _constants(cfg, scaler, spec, static_scaler, calibration)
    params = jax.tree.map(np.asarray, jax.device_get(params))
    # the rows' offsets from the window's last row: the window's rows, then the horizon's
    offsets = np.arange(-(input_steps - 1), horizon + 1)
    known = slice(spec.n_columns - spec.n_future, spec.n_columns)

    def f(x: Array, *rest: Array) -> Any:
        given = dict(zip(spec.inputs[1:], rest, strict=True))
        batch = x.shape[0]  # symbolic when exported
        sid = given.get("ids", jnp.zeros((batch,), jnp.int32))
        k = dataclasses.replace(  # each window's series' center and scale (batch, 1, n_columns)
            const,
            center=jnp.asarray(const.center)[sid][:, None],
            scale=jnp.asarray(const.scale)[sid][:, None],
            logged=None if const.logged is None else jnp.asarray(const.logged)[sid],
        )
        raw_known = x[:, -1:, known]  # the known-future columns at the origin
        if k.logged is not None:  # the model works on the (transformed series') transform
            targets, forward = x[:, :, :nt], applied(cfg.transform_kind).forward
            logged = jnp.where(k.logged[:, None, None], forward(targets, jnp), targets)
            x = jnp.concatenate([logged, x[:, :, nt:]], axis=2)
        seasons = None
        if const.pattern is not None:  # (batch, input_steps + horizon, n_targets)
            phase = given["phase"].astype(jnp.int64) - jnp.asarray(const.shifts)[sid]
            rows = (phase[:, None] + offsets) % const.pattern.shape[1]
            seasons = jnp.asarray(const.pattern)[sid[:, None], rows]
            x = jnp.concatenate([x[:, :, :nt] - seasons[:, :input_steps], x[:, :, nt:]], axis=2)
        steps = x[:, 1:] - x[:, :-1] if cfg.difference else x  # (batch, window, n_columns)
        scaled = (steps - k.center) / k.scale
        if cfg.padded:  # a short series' window: its missing rows come as NaN
            scaled = repeat_first_row(scaled)
        if cfg.normalize == "window":
            anchor = scaled[:, -1, :nt]  # (batch, n_targets): the target at the origin
        else:
            anchor = jnp.zeros((batch, nt), scaled.dtype)
        past = jnp.concatenate([scaled[:, :, :nt] - anchor[:, None, :], scaled[:, :, nt:]], 2)
        covariates = _covariates(given, cfg, k, raw_known, known)
        # An explicit zero carry: the model's default one wants a concrete batch size.
        zeros = jnp.zeros((batch, model.lstm_hidden_size), jnp.float32)
        carry = tuple(LSTMState(zeros, zeros) for _ in range(model.num_states))
        raw = model.apply({"params": params}, past.astype(jnp.float32), *covariates, carry)
        point = head.point(raw, horizon, nt).astype(jnp.float64)[..., None]  # horizon-major
        if spec.levels and head.loss in INTERVAL_LOSSES:
            quantiles = model_quantiles(head, raw, horizon, nt, spec.levels)
            point = jnp.concatenate([point, quantiles], axis=-1)  # (batch, h, nt, 1 + Q)
        out = _to_original(point, cfg, k, x, seasons, anchor)
        if not spec.levels:
            return out[..., 0]
        # a point loss: the degenerate intervals that the conformal offsets widen
        q = out[..., 1:] if out.shape[-1] > 1 else jnp.repeat(out, len(spec.levels), axis=-1)
        if const.delta is not None:
            q = jnp.sort(q + jnp.asarray(const.delta), axis=-1)
        return out[..., 0], q

    return f


def repeat_first_row(scaled: Array) -> Array:
    """``(batch, steps, n_columns)`` with each window's leading rows that hold a NaN replaced
    by its first row without one: the padding of :meth:`stacklstm.data.WindowSet.gather`
    (``start_padding``) for windows whose rows before their series' first row are NaN. A
    NaN after the first complete row stays (NaN in gives NaN out), as does a window of
    NaN rows only."""
    complete = ~jnp.isnan(scaled).any(axis=2)  # (batch, steps)
    start = jnp.argmax(complete, axis=1)  # the first complete row (0 when there is none)
    rows = jnp.maximum(jnp.arange(scaled.shape[1]), start[:, None])
    return jnp.take_along_axis(scaled, rows[:, :, None], axis=1)


def _covariates(
    given: dict[str, Array], cfg: DataConfig, k: _Constants, raw_known: Array, known: slice
) -> list[Array | None]:
    """The model's ``[future, static]`` float32 inputs (``[]`` without covariates): the raw
    known-future values over the horizon differenced from the origin's (with
    ``difference``) and scaled as their columns of the window's series, the static values
    scaled by the static scaler."""
    if "future" not in given and "static" not in given:
        return []
    future = static = None
    if "future" in given:
        ahead = given["future"]  # (batch, horizon, n_future)
        if cfg.difference:
            ahead = jnp.diff(jnp.concatenate([raw_known, ahead], axis=1), axis=1)
        future = ((ahead - k.center[:, :, known]) / k.scale[:, :, known]).astype(jnp.float32)
    if "static" in given:
        assert k.static_center is not None and k.static_scale is not None
        static = ((given["static"] - k.static_center) / k.static_scale).astype(jnp.float32)
    return [future, static]
