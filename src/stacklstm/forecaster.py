"""``Forecaster``: ``LSTMModel``'s pieces, plus known-future and static covariates.

The encoder reads the past window; what is known about the forecast horizon (a promotion
plan, a price list, the calendar) and what never changes (a store's size) join the encoder's
summary before the head::

    x       (batch, window, features)      targets, past features, future features' past
       -> StackedLSTM "lstm"               (batch, window, D * hidden)
       -> aggregate (last or mean step)    (batch, D * hidden)                 = z
    future  (batch, horizon, n_future)     future features over the horizon
       -> reshape, horizon-major           (batch, horizon * n_future)
    static  (batch, n_static)              per-series constants
    concat [z, future, static]             (batch, D * hidden + horizon * n_future + n_static)
       -> MLPHead "head" (Dense + ELU ...) (batch, output_size)

The parameter tree is ``LSTMModel``'s (``lstm``, ``head/dense_{j}``, ``head/output``); only
the first head layer's kernel has more rows: its first ``D * hidden`` rows read ``z`` (they
are ``LSTMModel``'s kernel), the next ``horizon * n_future`` read the future values (step 1's
features, then step 2's, ...), the last ``n_static`` the static ones. With ``n_future =
n_static = 0`` a ``Forecaster`` is an ``LSTMModel``: the same parameter tree, shapes,
initial values (for the same RNG) and outputs, bit for bit.

Example:
    >>> import jax, jax.numpy as jnp
    >>> model = Forecaster(lstm_hidden_size=8, linear_layer_sizes=(4,), output_size=3,
    ...                    future_steps=3, n_future=2, n_static=1)
    >>> x = jnp.ones((5, 10, 4))          # (batch, window, features)
    >>> future = jnp.ones((5, 3, 2))      # (batch, horizon, n_future)
    >>> static = jnp.ones((5, 1))         # (batch, n_static)
    >>> params = model.init(jax.random.key(0), x, future, static)
    >>> params["params"]["head"]["dense_0"]["kernel"].shape   # 8 + 3 * 2 + 1 rows
    (15, 4)
    >>> model.apply(params, x, future, static).shape
    (5, 3)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from .checks import check_int
from .config import ModelConfig
from .hybrid import ESHybrid
from .inputs import ForecastInputs as ForecastInputs
from .kernels.lstm import LSTMState
from .model import LSTMModel, StackSettings, check_model_input, encode, head

Array = jax.Array
Dtype = Any


class Forecaster(StackSettings):
    """A stacked-LSTM forecaster with known-future and static covariates (see the module).

    ``lstm_hidden_size``, ``num_lstm_layers``, ``linear_layer_sizes``, ``mean_aggregation``,
    ``output_size``, ``bidirectional``, ``dropout_rate``, ``dtype``, ``param_dtype`` and
    ``remat`` are as in ``LSTMModel``, with the same defaults.

    Attributes:
        future_steps: Horizon steps of the future covariates (``future``'s time axis).
        n_future: Known-future covariates per step (0: ``future`` is not given).
        n_static: Static covariates per series (0: ``static`` is not given).
    """

    future_steps: int = 0
    n_future: int = 0
    n_static: int = 0

    def __post_init__(self) -> None:
        check_int("n_future", self.n_future, 0)
        check_int("n_static", self.n_static, 0)
        check_int("future_steps", self.future_steps, 1 if self.n_future else 0)
        super().__post_init__()  # the shared settings' checks

    @property
    def n_covariates(self) -> int:
        """Columns the covariates add to the head's input: ``future_steps * n_future +
        n_static``."""
        return self.future_steps * self.n_future + self.n_static

    @nn.compact
    def __call__(
        self,
        x: Array,
        future: Array | None = None,
        static: Array | None = None,
        carry: Sequence[LSTMState] | None = None,
        *,
        seq_lengths: Array | None = None,
        deterministic: bool = True,
        return_carry: bool = False,
    ) -> Array | tuple[Array, tuple[LSTMState, ...]]:
        """Forecasts from a batch of past windows and their covariates.

        Args:
            x: ``(batch, window, features)`` or ``(batch, window)`` (one feature); or a
                :class:`ForecastInputs` holding all three inputs.
            future: ``(batch, future_steps, n_future)`` values over the horizon; None when
                ``n_future == 0``.
            static: ``(batch, n_static)``; None when ``n_static == 0``.
            carry, seq_lengths, deterministic, return_carry: as in ``LSTMModel``.

        Returns:
            ``y`` ``(batch, output_size)``, or ``(y, new_carry)`` with ``return_carry=True``.

        Raises:
            ValueError: ``future`` or ``static`` missing, given when the model has none, or of
                another shape than ``(batch, future_steps, n_future)`` / ``(batch, n_static)``.
        """
        if isinstance(x, ForecastInputs):
            if future is not None or static is not None:
                raise ValueError(
                    "pass future and static inside ForecastInputs or separately, not both"
                )
            x, future, static = x
        x, seq_lengths = check_model_input(x, seq_lengths)
        batch = x.shape[0]
        future = self._covariate(
            "future", future, (batch, self.future_steps, self.n_future), self.n_future
        )
        static = self._covariate("static", static, (batch, self.n_static), self.n_static)
        z, new_carry = encode(self, x, carry, seq_lengths, deterministic)  # (batch, D*hidden)
        parts = [z]
        if future is not None:  # (batch, future_steps, n_future) -> horizon-major rows
            parts.append(future.reshape(batch, -1).astype(z.dtype))
        if static is not None:
            parts.append(static.astype(z.dtype))
        z = jnp.concatenate(parts, axis=1) if len(parts) > 1 else z  # (batch, D*hidden + cov)
        y = head(self, z)
        return (y, new_carry) if return_carry else y

    @staticmethod
    def _covariate(name: str, value: Any, shape: tuple[int, ...], count: int) -> Array | None:
        """``value`` checked against ``shape``; None when the model has no such covariate."""
        if value is None:
            if count:
                raise ValueError(f"the model takes {name} covariates of shape {shape}; got None")
            return None
        value = jnp.asarray(value)
        if not count:
            if value.size == 0:
                return None  # an empty array means none, as None does
            raise ValueError(
                f"the model takes no {name} covariates (n_{name}=0); got shape {value.shape}: "
                f"build it with n_{name} for them"
            )
        if not jnp.issubdtype(value.dtype, jnp.floating):
            raise TypeError(
                f"{name} must be a real floating-point array (e.g. float32); got {value.dtype}"
            )
        if value.shape != shape:
            raise ValueError(f"{name} must be {shape} (batch, ...); got shape {value.shape}")
        return value


def build_model(
    cfg: ModelConfig,
    output_size: int,
    future_steps: int = 0,
    n_future: int = 0,
    n_static: int = 0,
    *,
    season: int = 1,
    n_targets: int = 1,
) -> LSTMModel | Forecaster | ESHybrid:
    """The model of ``cfg`` with ``output_size`` outputs: an ``LSTMModel``, or with covariates
    (``n_future`` over ``future_steps`` horizon steps, ``n_static``) a :class:`Forecaster`
    built of the same pieces; with ``cfg.hybrid`` an :class:`~stacklstm.hybrid.ESHybrid`
    smoothing ``n_targets`` targets with period ``season``.

    Example:
        >>> build_model(ModelConfig(lstm_hidden_size=8), output_size=3).output_size
        3
        >>> type(build_model(ModelConfig(hybrid=True), output_size=3, season=12)).__name__
        'ESHybrid'
    """
    settings = dataclasses.asdict(cfg)
    if settings.pop("hybrid"):
        if n_future or n_static:
            raise ValueError(
                f"the hybrid model takes no covariates; got n_future={n_future}, "
                f"n_static={n_static}"
            )
        return ESHybrid(**settings, output_size=output_size, season=season, n_targets=n_targets)
    if n_future or n_static:
        return Forecaster(
            **settings,
            output_size=output_size,
            future_steps=future_steps if n_future else 0,
            n_future=n_future,
            n_static=n_static,
        )
    return LSTMModel(**settings, output_size=output_size)
