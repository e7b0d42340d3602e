"""``ESHybrid``: exponential smoothing and the stacked LSTM in one model (the ES-RNN recipe).

Smyl's M4 winner normalises each window with a Holt-Winters level and seasonal pattern whose
smoothing coefficients are learnt with the network, lets an LSTM forecast the normalised
horizon, and multiplies the forecast back. ``ESHybrid`` does this per input window::

    x      (batch, window, features)     targets first (positive, divided by a scale only)
      -> multiplicative Holt-Winters, no trend, one lax.scan over the window, per target:
             l_t = a * y_t / s_t + (1 - a) * l_{t-1}
             s_{t+m} = g * y_t / l_t + (1 - g) * s_t
         started from the window's first season (l = its mean, s = its values over the mean)
      -> log(y_t / (l_T * s_t))           the window normalised by its last level and
                                          deseasonalised (the other features unchanged)
      -> StackedLSTM "lstm" -> last or mean step -> MLPHead "head"   (batch, horizon * n_targets)
      -> y_hat_k = l_T * s_{T+k} * exp(o_k)  multiplied back: the model's output is in the
                                          same units as its input targets

The coefficients ``a = sigmoid(level_logit)`` and ``g = sigmoid(season_logit)`` are
parameters (one per target), trained by gradient descent with the LSTM through the scan;
they start at ``a = sigmoid(2) = 0.88`` (the level follows the latest values closely, as
window normalisation by the last value does) and ``g = sigmoid(-1) = 0.27``.
One model has one pair: for a model of one series they are that series' coefficients; a
model trained across a panel shares them, while each window's level and seasonal factors
are its own. Targets must be positive (values below ``1e-6`` are taken as ``1e-6``).

Parameters: ``LSTMModel``'s tree (``lstm``, ``head/dense_{j}``, ``head/output``) plus
``level_logit`` and ``season_logit``, ``(n_targets,)`` each. With ``season=1`` there is no
seasonal pattern (``season_logit`` is kept, and unused).

Example:
    >>> import jax, jax.numpy as jnp
    >>> model = ESHybrid(lstm_hidden_size=8, linear_layer_sizes=(4,), output_size=3, season=4)
    >>> x = 1.0 + jnp.ones((5, 8, 1))        # (batch, window, features), positive targets
    >>> params = model.init(jax.random.key(0), x)
    >>> sorted(params["params"])
    ['head', 'level_logit', 'lstm', 'season_logit']
    >>> model.apply(params, x).shape
    (5, 3)
"""

from __future__ import annotations

from collections.abc import Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

from .checks import check_int
from .kernels.lstm import LSTMState
from .model import StackSettings, check_model_input, encode, head

Array = jax.Array

#: Targets below this are taken as it (the smoothing divides by them and takes logs).
FLOOR = 1e-6
#: The network's normalised outputs are clipped to +-this before ``exp`` (a factor of e^10).
MAX_LOG_RATIO = 10.0


def smooth(y: Array, alpha: Array, gamma: Array, season: int) -> tuple[Array, Array, Array]:
    """Multiplicative Holt-Winters without trend over each window (one ``lax.scan``).

    Args:
        y: ``(batch, time, n)`` positive values (with ``time < season`` the phases the
            window does not reach start with a factor of 1).
        alpha: ``(n,)`` level smoothing coefficients in (0, 1).
        gamma: ``(n,)`` seasonal smoothing coefficients in (0, 1).
        season: ``m >= 1`` (1: no seasonal pattern; ``gamma`` is unused).

    Returns:
        ``level`` ``(batch, n)`` at the last step, ``factors`` ``(batch, time, n)`` the
        seasonal factor each step was divided by, and ``ahead`` ``(batch, m, n)`` the factors
        of the ``m`` steps after the window (step ``T + k`` takes ``ahead[:, (k - 1) % m]``).

    Example:
        >>> y = jnp.tile(jnp.array([1.0, 2.0]), 4)[None, :, None]   # a pure season of 2
        >>> level, factors, ahead = smooth(y, jnp.array([0.5]), jnp.array([0.5]), 2)
        >>> round(float(level[0, 0]), 6), [round(float(v), 6) for v in ahead[0, :, 0]]
        (1.5, [0.666667, 1.333333])
    """
    m = season
    first = y[:, :m]  # (batch, min(time, m), n)
    level0 = jnp.mean(first, axis=1)  # (batch, n)
    ring0 = first / level0[:, None] if m > 1 else jnp.ones_like(first)
    if ring0.shape[1] < m:  # a window shorter than a season: the phases not seen start at 1
        missing = (y.shape[0], m - ring0.shape[1], y.shape[2])
        ring0 = jnp.concatenate([ring0, jnp.ones(missing, y.dtype)], axis=1)  # (batch, m, n)

    def step(state, y_t):
        level, ring = state  # (batch, n), (batch, m, n): ring[0] is this step's factor
        s_t = ring[:, 0]
        level = alpha * y_t / s_t + (1 - alpha) * level
        s_next = gamma * y_t / level + (1 - gamma) * s_t if m > 1 else s_t
        ring = jnp.concatenate([ring[:, 1:], s_next[:, None]], axis=1)
        return (level, ring), s_t

    (level, ahead), factors = jax.lax.scan(step, (level0, ring0), jnp.swapaxes(y, 0, 1))
    return level, jnp.swapaxes(factors, 0, 1), ahead


class ESHybrid(StackSettings):
    """Exponential smoothing normalising the stacked LSTM's windows (see the module).

    ``lstm_hidden_size``, ``num_lstm_layers``, ``linear_layer_sizes``, ``mean_aggregation``,
    ``output_size``, ``bidirectional``, ``dropout_rate``, ``dtype``, ``param_dtype`` and
    ``remat`` are as in ``LSTMModel``; ``output_size`` is ``horizon * n_targets``
    (horizon-major).

    Attributes:
        season: The seasonal period ``m`` of the smoothing (1: level only). A window
            should hold at least one season (it starts the seasonal factors).
        n_targets: The first ``n_targets`` input features are the targets.
    """

    season: int = 1
    n_targets: int = 1

    def __post_init__(self) -> None:
        check_int("season", self.season, 1)
        check_int("n_targets", self.n_targets, 1)
        super().__post_init__()
        if self.output_size % self.n_targets:
            raise ValueError(
                f"output_size must be horizon * n_targets, a multiple of n_targets="
                f"{self.n_targets}; got {self.output_size}"
            )

    @nn.compact
    def __call__(
        self,
        x: Array,
        carry: Sequence[LSTMState] | None = None,
        *,
        seq_lengths: Array | None = None,
        deterministic: bool = True,
        return_carry: bool = False,
    ) -> Array | tuple[Array, tuple[LSTMState, ...]]:
        """Forecasts from a batch of windows of positive targets.

        Args:
            x: ``(batch, window, features)`` (or ``(batch, window)``: one target), the
                targets first.
            carry, deterministic, return_carry: as in ``LSTMModel``.
            seq_lengths: not supported (the smoothing reads whole windows): must be None.

        Returns:
            ``y`` ``(batch, output_size)`` in the units of ``x``'s targets, or ``(y,
            new_carry)`` with ``return_carry=True``.
        """
        x, seq_lengths = check_model_input(x, seq_lengths)
        nt, m = self.n_targets, self.season
        if seq_lengths is not None:
            raise ValueError("ESHybrid smooths whole windows: seq_lengths must be None")
        if x.shape[2] < nt:
            raise ValueError(
                f"ESHybrid(n_targets={nt}) reads its targets from the first {nt} features; got "
                f"x of shape {x.shape}"
            )
        level_logit = self.param("level_logit", nn.initializers.constant(2.0), (nt,), jnp.float32)
        season_logit = self.param(
            "season_logit", nn.initializers.constant(-1.0), (nt,), jnp.float32
        )
        y = jnp.maximum(x[:, :, :nt].astype(jnp.float32), FLOOR)  # (batch, window, nt)
        level, factors, ahead = smooth(
            y, jax.nn.sigmoid(level_logit), jax.nn.sigmoid(season_logit), m
        )
        normal = jnp.log(y / (level[:, None] * factors))  # (batch, window, nt)
        inputs = jnp.concatenate([normal.astype(x.dtype), x[:, :, nt:]], axis=2)
        z, new_carry = encode(self, inputs, carry, None, deterministic)
        out = head(self, z)  # (batch, horizon * nt)
        horizon = self.output_size // nt
        ratio = jnp.clip(
            out.reshape(-1, horizon, nt).astype(jnp.float32), -MAX_LOG_RATIO, MAX_LOG_RATIO
        )
        steps = jnp.arange(horizon) % m
        y_hat = level[:, None] * ahead[:, steps] * jnp.exp(ratio)  # (batch, horizon, nt)
        y_hat = y_hat.reshape(-1, self.output_size).astype(out.dtype)
        return (y_hat, new_carry) if return_carry else y_hat
