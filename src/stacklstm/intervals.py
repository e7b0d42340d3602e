"""Prediction intervals: quantile and distribution heads, conformal calibration, scores.

The forecaster's network is the plain ``LSTMModel``; only its ``output_size`` grows. For each
(horizon step, target) it outputs ``P`` raw numbers, laid out horizon-major, then target, then
parameter: ``raw (batch, horizon * n_targets * P)`` reshapes to ``(batch, horizon, n_targets,
P)``. :class:`OutputHead` maps them, outside the module, to what each loss means:

- ``mse``, ``mae``, ``huber``: ``P = 1``, the point forecast itself (the layout of older runs).
- ``quantile``: ``P = Q`` quantiles at ``levels`` (0.5 always among them). They cannot cross:
  the 0.5 quantile is its raw output, each higher one adds ``softplus`` of its raw output to
  the one below, each lower one subtracts ``softplus`` from the one above. Trained with the
  pinball loss; the point forecast is the 0.5 quantile.
- ``normal``: ``P = 2``, mean ``mu`` and scale ``sigma = softplus(raw) + MIN_SCALE``; trained
  with the Gaussian negative log-likelihood; the point forecast is ``mu``.
- ``student_t``: ``P = 3``, location, scale as above and degrees of freedom ``df = MIN_DF +
  softplus(raw)``, learnt per output (``df > 2``: the variance always exists). The point
  forecast is the location, the median of the distribution; since ``df > 1`` it is also the
  mean (with few degrees of freedom the median is the robust choice, and here both agree).

Quantile levels come from interval levels symmetrically: a level ``l`` is the interval from
the ``(1 - l) / 2`` to the ``(1 + l) / 2`` quantile (0.8 -> 0.1 and 0.9). Distribution
quantiles are read off the distribution (``scipy.special``) in model space, then mapped to
original units by the windows' own inverse transform (monotone: scaling by a positive factor
and adding the window anchor). With ``difference=True`` the per-step quantiles are summed
along the horizon like the point forecast, which treats the steps as perfectly dependent (the
intervals of later steps are then too wide or too narrow): calibrate them with ``conformal``.

Conformal calibration (:func:`conformal_offsets`), split conformal on the validation windows,
per horizon step and target: for each interval ``[lo, hi]`` the conformity score of a target
``y`` is ``max(lo - y, y - hi)`` (conformalised quantile regression, CQR; for a point forecast
``lo = hi`` and the score is ``|y - point|``). With ``n`` scores, the offset is the
``ceil((n + 1) * l)``-th smallest (the finite-sample correction), and the calibrated interval
is ``[lo - offset, hi + offset]`` (an offset may be negative: the interval shrinks). After
adjusting, the quantiles are sorted again so that the intervals stay nested. Quantiles
without a symmetric partner are left as they are.

Ensembles combine members by averaging their quantiles level by level
(:func:`average_quantiles`, "Vincentisation"), which keeps them non-crossing.

Example:
    >>> import numpy as np
    >>> levels_to_quantiles((0.8,))
    (0.1, 0.5, 0.9)
    >>> head = OutputHead("quantile", (0.1, 0.5, 0.9))
    >>> head.output_size(horizon=2, n_targets=1)
    6
    >>> raw = np.array([[0.0, 1.0, 0.0, 0.0, 2.0, 0.0]])  # (batch, horizon * n_targets * P)
    >>> np.round(head.quantiles_at(raw, 2, 1, head.quantiles), 3).tolist()  # (batch, h, nt, Q)
    [[[[0.307, 1.0, 1.693]], [[1.307, 2.0, 2.693]]]]
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .config import POINT_LOSSES, TrainConfig

log = logging.getLogger(__name__)

Array = jax.Array
#: The losses whose model gives intervals by itself.
INTERVAL_LOSSES = ("quantile", "normal", "student_t")
#: Smallest scale of a distribution head, in scaled (model) units.
MIN_SCALE = 1e-4
#: Smallest degrees of freedom of the Student-t head (its variance exists above 2).
MIN_DF = 2.0
_PARAMS = {"normal": 2, "student_t": 3}


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


# --------------------------------------------------------------------------- conformal


def conformal_quantile(scores: np.ndarray, level: float) -> np.ndarray:
    """The split-conformal offset of ``scores (n, ...)`` along axis 0: the
    ``ceil((n + 1) * level)``-th smallest score. With too few scores for that rank (``n <
    level / (1 - level)``, roughly), the largest score is used and a warning says so.

    Example:
        >>> conformal_quantile(np.arange(1.0, 11.0), 0.8).item()  # ceil(11 * 0.8) = 9th
        9.0
    """
    scores = np.sort(np.asarray(scores, np.float64), axis=0)
    n = scores.shape[0]
    if n == 0:
        raise ValueError("conformal calibration needs at least one validation window")
    rank = math.ceil((n + 1) * level - 1e-9)
    if rank > n:
        log.warning(
            "conformal: %d validation windows are too few for a %s interval's guarantee (it "
            "needs %d); using the largest score", n, level_key(level),
            math.ceil(level / (1 - level)),
        )  # fmt: skip
        rank = n
    return scores[rank - 1]


@dataclass(frozen=True)
class Calibration:
    """Conformal offsets: ``offsets[i, k, j]`` widens the interval at ``levels[i]`` of horizon
    step ``k`` and target ``j`` on both sides (negative: narrows it).

    Attributes:
        levels: ``(L,)`` interval levels.
        quantiles: The quantile levels of the forecasts it calibrates.
        offsets: ``(L, horizon, n_targets)``.
        n_windows: Validation windows it was computed from.
    """

    levels: tuple[float, ...]
    quantiles: tuple[float, ...]
    offsets: np.ndarray
    n_windows: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-able."""
        return {
            "levels": list(self.levels),
            "quantiles": list(self.quantiles),
            "offsets": self.offsets.tolist(),
            "n_windows": self.n_windows,
        }

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Calibration:
        """The inverse of :meth:`to_dict`."""
        offsets = np.asarray(data["offsets"], np.float64)
        return cls(tuple(data["levels"]), tuple(data["quantiles"]), offsets, int(data["n_windows"]))


def _check_y(y: np.ndarray, q: np.ndarray) -> np.ndarray:
    y = np.asarray(y, np.float64)
    if q.shape[:-1] != y.shape:
        raise ValueError(f"quantiles must be the targets' shape {y.shape} + (Q,), got {q.shape}")
    if not np.isfinite(y).all() or not np.isfinite(q).all():
        raise ValueError("targets and quantiles must be finite (NaN/Inf found)")
    return y


def conformal_offsets(y: np.ndarray, forecast: Forecast) -> Calibration:
    """CQR offsets from validation targets ``y (n, horizon, n_targets)`` and their forecasts
    (quantiles at ``forecast.levels``), per interval level, horizon step and target.

    Example:
        >>> y = np.arange(10.0).reshape(10, 1, 1)
        >>> f = Forecast(np.full((10, 1, 1), 4.5)).with_levels((0.1, 0.5, 0.9))
        >>> cal = conformal_offsets(y, f)  # scores |y - 4.5|: 0.5 0.5 1.5 1.5 ... 4.5 4.5
        >>> cal.levels, cal.offsets.ravel().tolist()  # ceil(11 * 0.8) = 9th smallest
        ((0.8,), [4.5])
    """
    q = forecast.quantiles
    if q is None:
        raise ValueError("conformal_offsets needs quantiles; use Forecast.with_levels")
    y = _check_y(y, q)
    pairs = interval_pairs(forecast.levels)
    offsets = np.zeros((len(pairs), *y.shape[1:]))
    for i, (level, lo, hi) in enumerate(pairs):
        scores = np.maximum(q[..., lo] - y, y - q[..., hi])  # (n, horizon, n_targets)
        offsets[i] = conformal_quantile(scores, level)
    levels = tuple(level for level, _, _ in pairs)
    return Calibration(levels, tuple(forecast.levels), offsets, int(y.shape[0]))


def calibrate(forecast: Forecast, calibration: Calibration) -> Forecast:
    """``forecast``'s intervals widened (or narrowed) by ``calibration``, then sorted per
    entry so that they stay nested; the point forecast is unchanged."""
    forecast = forecast.with_levels(calibration.quantiles)
    q = forecast.quantiles.copy()
    pairs = interval_pairs(forecast.levels)
    if tuple(level for level, _, _ in pairs) != calibration.levels:
        raise ValueError(f"the calibration is for levels {calibration.levels}")
    for i, (_, lo, hi) in enumerate(pairs):
        q[..., lo] -= calibration.offsets[i]
        q[..., hi] += calibration.offsets[i]
    return Forecast(forecast.point, np.sort(q, axis=-1), forecast.levels)


# --------------------------------------------------------------------------- scores


def pinball(y: np.ndarray, pred: np.ndarray, level: float) -> np.ndarray:
    """Elementwise pinball loss of the ``level`` quantile ``pred`` against ``y`` (numpy).

    Example:
        >>> pinball(np.array([1.0, 3.0]), np.array([2.0, 2.0]), 0.9).tolist()
        [0.09999999999999998, 0.9]
    """
    u = np.asarray(y, np.float64) - np.asarray(pred, np.float64)
    return np.maximum(level * u, (level - 1) * u)


def interval_scores(y: np.ndarray, forecast: Forecast) -> dict[str, Any]:
    """The interval scores of ``forecast`` (quantiles at its levels) against ``y (n, horizon,
    n_targets)``, over all entries.

    Returns:
        ``{"coverage": {level: share of targets inside [lo, hi]}, "width": {level: mean hi -
        lo}, "wql": mean over the quantile levels of 2 * sum(pinball) / sum(|y|)}`` (the
        weighted quantile loss, an estimate of the CRPS relative to the targets' size; None
        when every target is 0). Levels are :func:`level_key` strings.

    Example:
        >>> y = np.array([1.0, 2.0, 5.0]).reshape(3, 1, 1)
        >>> q = np.array([[0.0, 1.0, 2.0], [0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]).reshape(3, 1, 1, 3)
        >>> s = interval_scores(y, Forecast(q[..., 1], q, (0.1, 0.5, 0.9)))
        >>> s["coverage"], s["width"]
        ({'0.8': 0.6666666666666666}, {'0.8': 2.0})
    """
    q = forecast.quantiles
    if q is None:
        raise ValueError("interval_scores needs a forecast with quantiles")
    y = _check_y(y, q)
    coverage, width = {}, {}
    for level, lo, hi in interval_pairs(forecast.levels):
        inside = (q[..., lo] <= y) & (y <= q[..., hi])
        coverage[level_key(level)] = float(np.mean(inside))
        width[level_key(level)] = float(np.mean(q[..., hi] - q[..., lo]))
    total = float(np.sum(np.abs(y)))
    wql = None
    if total > 0:
        per_level = [
            2 * float(np.sum(pinball(y, q[..., i], level))) / total
            for i, level in enumerate(forecast.levels)
        ]
        wql = float(np.mean(per_level))
    return {"coverage": coverage, "width": width, "wql": wql}


__all__ = [
    "INTERVAL_LOSSES",
    "Calibration",
    "Forecast",
    "OutputHead",
    "average_quantiles",
    "calibrate",
    "conformal_offsets",
    "conformal_quantile",
    "interval_pairs",
    "interval_scores",
    "level_key",
    "levels_to_quantiles",
    "model_has_intervals",
    "non_crossing",
    "normal_nll",
    "pinball",
    "pinball_loss",
    "report_quantiles",
    "student_t_nll",
    "to_forecast",
]
