"""Output heads: what the network's raw outputs mean for each loss, the losses themselves
(pinball, Gaussian and Student-t NLL) and the forecasts they give (see :mod:`stacklstm.intervals`).

Example:
    >>> OutputHead("quantile", (0.1, 0.9)).quantiles
    (0.1, 0.5, 0.9)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ..config import TrainConfig
from ..losses import INTERVAL_LOSSES, LOSSES, POINT_LOSSES

Array = jax.Array
#: Smallest scale of a distribution head, in scaled (model) units.
MIN_SCALE = 1e-4
#: Smallest degrees of freedom of the Student-t head (its variance exists above 2).
MIN_DF = 2.0
#: Outputs per step and target of the distribution heads (the quantile head's: its levels).
_PARAMS = {n: loss.n_params for n, loss in LOSSES.items() if not loss.point and loss.n_params}


def level_key(level: float) -> str:
    """The text of a level in report keys and column names: ``0.8 -> "0.8"``."""
    return repr(round(float(level), 10))


def levels_to_quantiles(interval_levels: Sequence[float]) -> tuple[float, ...]:
    """The quantile levels of symmetric intervals at ``interval_levels``, with 0.5, ascending.

    Example:
        >>> levels_to_quantiles((0.8, 0.95))
        (0.025, 0.1, 0.5, 0.9, 0.975)
    """
    out = {0.5}
    for level in interval_levels:
        out.update((round((1 - level) / 2, 10), round((1 + level) / 2, 10)))
    return tuple(sorted(out))


def with_median(quantiles: Sequence[float]) -> tuple[float, ...]:
    """``quantiles`` with 0.5 added if absent, ascending."""
    return tuple(sorted({round(float(q), 10) for q in quantiles} | {0.5}))


def interval_pairs(quantiles: Sequence[float]) -> tuple[tuple[float, int, int], ...]:
    """``(level, lo_index, hi_index)`` of each symmetric pair ``(q, 1 - q)``, ``q < 0.5``,
    among the ascending ``quantiles``; ascending by level.

    Example:
        >>> interval_pairs((0.025, 0.1, 0.3, 0.5, 0.9, 0.975))
        ((0.8, 1, 4), (0.95, 0, 5))
    """
    qs = [float(q) for q in quantiles]
    pairs = []
    for lo, q in enumerate(qs):
        if q >= 0.5:
            break
        hi = next((i for i, p in enumerate(qs) if math.isclose(p, 1 - q, abs_tol=1e-9)), None)
        if hi is not None:
            pairs.append((round(1 - 2 * q, 10), lo, hi))
    return tuple(sorted(pairs))


def report_quantiles(cfg: TrainConfig) -> tuple[float, ...]:
    """The quantile levels a run forecasts and scores (the model and the baselines alike).

    ``loss="quantile"``: its ``quantiles`` (or those of ``interval_levels``) with 0.5; any
    other loss: those of ``interval_levels`` with 0.5, or ``()`` without interval levels.
    """
    if cfg.loss == "quantile":
        return (
            with_median(cfg.quantiles)
            if cfg.quantiles
            else levels_to_quantiles(cfg.interval_levels)
        )
    return levels_to_quantiles(cfg.interval_levels) if cfg.interval_levels else ()


def model_has_intervals(cfg: TrainConfig) -> bool:
    """Whether the run's model forecasts quantiles (an interval loss, or ``conformal``)."""
    return bool(report_quantiles(cfg)) and (cfg.loss in INTERVAL_LOSSES or cfg.conformal)


# --------------------------------------------------------------------------- losses (jnp)


def pinball_loss(pred: Array, y: Array, levels: Sequence[float]) -> Array:
    """Pinball (quantile) loss ``(...)`` of ``pred (..., Q)`` at ``levels`` against ``y (...)``,
    averaged over the quantiles: ``rho_q(u) = max(q * u, (q - 1) * u)`` with ``u = y - pred``.

    Example:
        >>> round(float(pinball_loss(jnp.array([0.0, 1.0]), jnp.array(2.0), (0.1, 0.9))), 6)
        0.55
    """
    q = jnp.asarray(levels, jnp.float32)
    if pred.shape != (*y.shape, q.size):
        raise ValueError(f"pred must be y's shape {y.shape} + ({q.size},), got {pred.shape}")
    u = y[..., None] - pred
    return jnp.mean(jnp.maximum(q * u, (q - 1) * u), axis=-1)


def non_crossing(raw: Array, median_index: int) -> Array:
    """Ascending quantiles ``(..., Q)`` from raw outputs ``(..., Q)``: the one at
    ``median_index`` is its raw value; neighbours step away by ``softplus`` increments."""
    centre = raw[..., median_index : median_index + 1]
    up = jnp.cumsum(jax.nn.softplus(raw[..., median_index + 1 :]), axis=-1)
    down = jnp.cumsum(jax.nn.softplus(raw[..., :median_index][..., ::-1]), axis=-1)[..., ::-1]
    return jnp.concatenate([centre - down, centre, centre + up], axis=-1)


def normal_nll(y: Array, mu: Array, sigma: Array) -> Array:
    """Elementwise negative log-density of ``y`` under ``Normal(mu, sigma)``."""
    z = (y - mu) / sigma
    return 0.5 * jnp.log(2 * jnp.pi) + jnp.log(sigma) + 0.5 * jnp.square(z)


def student_t_nll(y: Array, loc: Array, scale: Array, df: Array) -> Array:
    """Elementwise negative log-density of ``y`` under ``StudentT(df, loc, scale)``."""
    from jax.scipy.special import gammaln

    z = (y - loc) / scale
    return (
        gammaln(df / 2)
        - gammaln((df + 1) / 2)
        + 0.5 * jnp.log(df * jnp.pi)
        + jnp.log(scale)
        + (df + 1) / 2 * jnp.log1p(jnp.square(z) / df)
    )


# --------------------------------------------------------------------------- the head


@dataclass(frozen=True)
class OutputHead:
    """What the raw outputs of the network mean for a loss, and how to read them.

    Attributes:
        loss: A ``TrainConfig.loss``.
        quantiles: ``loss="quantile"``: the levels learnt, ascending, with 0.5; else ``()``.

    Example:
        >>> OutputHead("normal").n_params, OutputHead("mse").n_params
        (2, 1)
    """

    loss: str
    quantiles: tuple[float, ...] = ()

    def __post_init__(self) -> None:
        if self.loss not in POINT_LOSSES + INTERVAL_LOSSES:
            raise ValueError(f"unknown loss {self.loss!r}")
        if self.loss == "quantile":
            object.__setattr__(self, "quantiles", with_median(self.quantiles))
        elif self.quantiles:
            raise ValueError(f"quantiles apply to loss='quantile', got loss={self.loss!r}")

    @classmethod
    def of(cls, cfg: TrainConfig) -> OutputHead:
        """The head of a run's training settings."""
        return cls(cfg.loss, report_quantiles(cfg) if cfg.loss == "quantile" else ())

    @property
    def n_params(self) -> int:
        """Raw outputs per (horizon step, target)."""
        if self.loss == "quantile":
            return len(self.quantiles)
        return _PARAMS.get(self.loss, 1)

    @property
    def point_index(self) -> int:
        """Which raw output is the point forecast (the 0.5 quantile, mu or the location)."""
        return self.quantiles.index(0.5) if self.loss == "quantile" else 0

    def output_size(self, horizon: int, n_targets: int) -> int:
        """The ``LSTMModel`` ``output_size``: ``horizon * n_targets * n_params``."""
        return horizon * n_targets * self.n_params

    def split(self, raw: Any, horizon: int, n_targets: int) -> Any:
        """``raw (batch, horizon * n_targets * P) -> (batch, horizon, n_targets, P)``."""
        expected = self.output_size(horizon, n_targets)
        if raw.ndim != 2 or raw.shape[1] != expected:
            raise ValueError(
                f"raw outputs must be (batch, horizon * n_targets * {self.n_params}) = "
                f"(batch, {expected}), got {raw.shape}; build the model with output_size="
                f"{expected}"
            )
        return raw.reshape(raw.shape[0], horizon, n_targets, self.n_params)

    def point(self, raw: Any, horizon: int, n_targets: int) -> Any:
        """``(batch, horizon, n_targets)`` point forecasts in model space (numpy or jnp)."""
        return self.split(raw, horizon, n_targets)[..., self.point_index]

    def params(self, raw: Array, horizon: int, n_targets: int) -> Array:
        """``(batch, horizon, n_targets, P)`` the head's parameters: the non-crossing
        quantiles, ``(mu, sigma)`` or ``(loc, scale, df)``; the point losses' forecast."""
        r = jnp.asarray(self.split(raw, horizon, n_targets), jnp.float32)
        if self.loss == "quantile":
            return non_crossing(r, self.point_index)
        if self.loss in _PARAMS:
            scale = jax.nn.softplus(r[..., 1:2]) + MIN_SCALE
            rest = [jax.nn.softplus(r[..., 2:3]) + MIN_DF] if self.loss == "student_t" else []
            return jnp.concatenate([r[..., :1], scale, *rest], axis=-1)
        return r

    def loss_per_window(self, raw: Array, y: Array) -> Array:
        """``(batch,)`` loss of the interval losses, averaged over horizon and targets.

        Args:
            raw: ``(batch, horizon * n_targets * P)`` raw outputs.
            y: ``(batch, horizon, n_targets)`` model-space targets.
        """
        if y.ndim != 3:
            raise ValueError(f"targets must be (batch, horizon, n_targets), got shape {y.shape}")
        if raw.shape[0] != y.shape[0]:
            raise ValueError(f"raw outputs have {raw.shape[0]} rows but targets {y.shape[0]}")
        p = self.params(raw, y.shape[1], y.shape[2])
        y = y.astype(jnp.float32)
        if self.loss == "quantile":
            per_entry = pinball_loss(p, y, self.quantiles)
        elif self.loss == "normal":
            per_entry = normal_nll(y, p[..., 0], p[..., 1])
        elif self.loss == "student_t":
            per_entry = student_t_nll(y, p[..., 0], p[..., 1], p[..., 2])
        else:
            raise ValueError(f"loss {self.loss!r} is a point loss (see step.forecast_loss)")
        return jnp.mean(per_entry.reshape(y.shape[0], -1), axis=-1)

    def quantiles_at(
        self, raw: np.ndarray, horizon: int, n_targets: int, levels: Sequence[float]
    ) -> np.ndarray:
        """``(n, horizon, n_targets, len(levels))`` model-space quantiles at ``levels``.

        Raises:
            ValueError: A point loss (no distribution), or ``levels`` that a quantile head did
                not learn.
        """
        params = np.asarray(self.params(jnp.asarray(raw), horizon, n_targets), np.float64)
        levels = tuple(float(q) for q in levels)
        if self.loss == "quantile":
            missing = [q for q in levels if q not in self.quantiles]
            if missing:
                raise ValueError(f"the head learnt the quantiles {self.quantiles}, not {missing}")
            return params[..., [self.quantiles.index(q) for q in levels]]
        from scipy import special

        q = np.asarray(levels)
        if self.loss == "normal":
            return params[..., :1] + params[..., 1:2] * special.ndtri(q)
        if self.loss == "student_t":
            z = special.stdtrit(params[..., 2:3], q)  # (n, h, nt, Q)
            return params[..., :1] + params[..., 1:2] * z
        raise ValueError(f"loss {self.loss!r} gives point forecasts only; use conformal")


# --------------------------------------------------------------------------- forecasts


@dataclass(frozen=True)
class Forecast:
    """Forecasts in original units.

    Attributes:
        point: ``(n, horizon, n_targets)`` point forecasts.
        quantiles: ``(n, horizon, n_targets, Q)`` quantiles at ``levels``, or None.
        levels: ``(Q,)`` ascending quantile levels (``()`` without quantiles).
    """

    point: np.ndarray
    quantiles: np.ndarray | None = None
    levels: tuple[float, ...] = ()

    def take(self, rows: Any) -> Forecast:
        """The forecasts of ``rows`` (an index array or boolean mask over ``n``)."""
        q = None if self.quantiles is None else self.quantiles[rows]
        return dataclasses.replace(self, point=self.point[rows], quantiles=q)

    def with_levels(self, levels: Sequence[float]) -> Forecast:
        """Quantiles at ``levels``; a forecast without quantiles gets ``point`` repeated (the
        degenerate intervals that conformal calibration widens)."""
        levels = tuple(levels)
        if self.quantiles is None:
            q = np.repeat(self.point[..., None], len(levels), axis=-1)
            return Forecast(self.point, q, levels)
        if levels != self.levels:
            raise ValueError(f"the forecast has quantiles at {self.levels}, not {levels}")
        return self


def to_forecast(cfg: TrainConfig, raw: np.ndarray, windows: Any) -> Forecast:
    """Raw network outputs ``(n, output_size)`` of ``windows`` -> :class:`Forecast` in original
    units (uncalibrated; see :func:`calibrate`).

    ``windows`` is the :class:`~stacklstm.data.WindowSet` the outputs belong to: its
    ``to_original`` maps each quantile level like the point forecast.
    """
    head = OutputHead.of(cfg)
    h, nt = windows.horizon, windows.n_targets
    raw = np.asarray(raw)
    point = windows.to_original(np.asarray(head.point(raw, h, nt), np.float64))
    if cfg.loss in POINT_LOSSES:
        return Forecast(point)
    levels = report_quantiles(cfg)
    if not levels:
        return Forecast(point)
    q_model = head.quantiles_at(raw, h, nt, levels)  # (n, h, nt, Q)
    q = np.stack([windows.to_original(q_model[..., i]) for i in range(len(levels))], axis=-1)
    return Forecast(point, q, levels)


def average_quantiles(members: Sequence[Forecast]) -> Forecast:
    """An ensemble's forecast: points and quantiles averaged level by level over
    ``members`` (all with the same levels). Averages of ascending quantiles stay ascending.

    Example:
        >>> a = Forecast(np.zeros((1, 1, 1)), np.array([[[[-1.0, 0.0, 1.0]]]]), (0.1, 0.5, 0.9))
        >>> b = Forecast(np.ones((1, 1, 1)), np.array([[[[0.0, 1.0, 4.0]]]]), (0.1, 0.5, 0.9))
        >>> average_quantiles([a, b]).quantiles.ravel().tolist()
        [-0.5, 0.5, 2.5]
    """
    if not members:
        raise ValueError("average_quantiles needs at least one member")
    levels = members[0].levels
    if any(m.levels != levels for m in members):
        raise ValueError("the members' quantile levels differ; average them at one set")
    point = np.mean([m.point for m in members], axis=0)
    if members[0].quantiles is None:
        return Forecast(point)
    return Forecast(point, np.mean([m.quantiles for m in members], axis=0), levels)


def check_quantiles(y: np.ndarray, q: np.ndarray) -> np.ndarray:
    """``y`` as float64, checked against ``q (*y.shape, Q)``; NaN/Inf are refused."""
    y = np.asarray(y, np.float64)
    if q.shape[:-1] != y.shape:
        raise ValueError(f"quantiles must be the targets' shape {y.shape} + (Q,), got {q.shape}")
    if not np.isfinite(y).all() or not np.isfinite(q).all():
        raise ValueError("targets and quantiles must be finite (NaN/Inf found)")
    return y
