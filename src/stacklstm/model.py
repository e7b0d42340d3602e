"""``LSTMModel``: the stacked-LSTM regressor (LSTM stack -> aggregation -> Dense+ELU head)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp

from .checks import check_bool, check_fraction, check_positive_int, check_sizes
from .kernels.lstm import LSTMState, check_seq_lengths
from .layers import StackedLSTM, check_input, zero_state

Array = jax.Array
Dtype = Any


class MLPHead(nn.Module):
    """``Dense(size) + ELU`` for each size in ``hidden_sizes``, then ``Dense(output_size)``.

    Parameters: ``dense_{j}`` for each hidden layer and ``output``, as ``nn.Dense`` makes them.
    """

    hidden_sizes: Sequence[int]
    output_size: int
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, z: Array) -> Array:
        """``(batch, features) -> (batch, output_size)``."""
        for j, size in enumerate(self.hidden_sizes):
            z = nn.Dense(size, dtype=self.dtype, param_dtype=self.param_dtype, name=f"dense_{j}")(z)
            z = nn.elu(z)
        return nn.Dense(
            self.output_size, dtype=self.dtype, param_dtype=self.param_dtype, name="output"
        )(z)


def aggregate(outputs: Array, seq_lengths: Array | None, mean: bool) -> Array:
    """Reduces ``(batch, time, features)`` over time, ignoring padded steps.

    ``mean=True``: the mean over each row's valid steps. ``mean=False``: each row's last valid
    step. Returns ``(batch, features)``.
    """
    time = outputs.shape[1]
    if seq_lengths is None:
        return jnp.mean(outputs, axis=1) if mean else outputs[:, -1]
    if mean:
        valid = (jnp.arange(time)[None, :] < seq_lengths[:, None])[..., None]  # (batch, time, 1)
        total = jnp.sum(jnp.where(valid, outputs, 0), axis=1)
        return total / seq_lengths[:, None].astype(outputs.dtype)
    return jnp.take_along_axis(outputs, (seq_lengths - 1)[:, None, None], axis=1)[:, 0]


class StackSettings(nn.Module):
    """The settings ``LSTMModel`` and ``Forecaster`` share, their checks and their carry.

    A base of both, not a model: ``Forecaster`` is not an ``LSTMModel`` (``isinstance`` tells a
    model without covariates from one with them).
    """

    lstm_hidden_size: int = 64
    num_lstm_layers: int = 2
    linear_layer_sizes: Sequence[int] = (32, 16)
    mean_aggregation: bool = False
    output_size: int = 1
    bidirectional: bool = False
    dropout_rate: float = 0.0
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    remat: bool | int = False

    def __post_init__(self) -> None:
        check_model_args(
            self.lstm_hidden_size,
            self.num_lstm_layers,
            self.linear_layer_sizes,
            self.mean_aggregation,
            self.output_size,
            self.bidirectional,
            self.dropout_rate,
        )
        super().__post_init__()

    @property
    def num_states(self) -> int:
        """Number of ``LSTMState``s in a carry: layers times directions."""
        return self.num_lstm_layers * (2 if self.bidirectional else 1)

    def initialize_carry(self, batch_size: int, dtype: Dtype = jnp.float32):
        """The zero carry: ``num_lstm_layers * D`` ``LSTMState(h, c)``, ``(batch, hidden)`` each.

        Needs no RNG and creates no parameters; works on an unbound module.
        """
        return zero_state(batch_size, self.lstm_hidden_size, self.num_states, dtype)


class LSTMModel(StackSettings):
    """A stacked-LSTM regressor: ``StackedLSTM`` -> mean or last step -> Dense+ELU head.

    The model many forecasting tutorials build in PyTorch or Keras, working in Flax. Input
    ``(batch, time, features)``; a 2-D input ``(batch, time)`` means one feature. Output
    ``(batch, output_size)``.

    Parameters (public layout): ``lstm`` (the ``StackedLSTM`` tree: ``layer_{l}`` with
    ``kernel_ih``, ``kernel_hh``, ``bias``), ``head/dense_{j}`` for each size in
    ``linear_layer_sizes`` and ``head/output``, each with ``kernel`` and ``bias``. LSTM
    initialisation as in ``StackedLSTM``; the head uses ``nn.Dense``'s defaults.

    Attributes:
        lstm_hidden_size: hidden size of every LSTM layer.
        num_lstm_layers: number of stacked LSTM layers.
        linear_layer_sizes: sizes of the Dense+ELU layers of the head (may be empty).
        mean_aggregation: average over (valid) time steps; otherwise take the last valid step.
        output_size: features of the output (e.g. the forecast horizon).
        bidirectional: bidirectional LSTM layers (outputs concatenate forward, reverse).
        dropout_rate: dropout between LSTM layers when ``deterministic=False``.
        dtype: matmul dtype (``None``: from inputs and params); LSTM state math stays float32.
        param_dtype: dtype of the stored parameters.
        remat: recompute LSTM activations in chunks in the backward pass, for long sequences
            (see ``StackedLSTM``).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> model = LSTMModel(lstm_hidden_size=64, num_lstm_layers=2,
        ...                   linear_layer_sizes=(32, 16), mean_aggregation=False)
        >>> x = jnp.ones((32, 10, 1))                      # (batch, time, features)
        >>> carry = model.initialize_carry(32)
        >>> params = model.init(jax.random.key(0), x, carry)
        >>> model.apply(params, x, carry).shape
        (32, 1)
    """

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
        """Forecasts from a batch of sequences.

        Args:
            x: ``(batch, time, features)`` or ``(batch, time)`` (one feature).
            carry: initial state from ``initialize_carry`` or a previous call; ``None`` means
                zeros. Never modified.
            seq_lengths: optional ``(batch,)`` valid lengths (right padding).
            deterministic: when False, apply dropout (needs the ``"dropout"`` RNG).
            return_carry: also return the final state, to feed a long series chunk by chunk.

        Returns:
            ``y`` of shape ``(batch, output_size)``, or ``(y, new_carry)`` with
            ``return_carry=True``.
        """
        x, seq_lengths = check_model_input(x, seq_lengths)
        z, new_carry = encode(self, x, carry, seq_lengths, deterministic)  # (batch, D*hidden)
        y = head(self, z)
        return (y, new_carry) if return_carry else y


def encode(
    module: Any,
    x: Array,
    carry: Sequence[LSTMState] | None,
    seq_lengths: Array | None,
    deterministic: bool,
) -> tuple[Array, tuple[LSTMState, ...]]:
    """The encoder of ``LSTMModel`` and ``Forecaster``: the ``StackedLSTM`` named ``lstm``,
    then the mean or last step. Call it inside ``module``'s compact ``__call__``.

    Returns ``z`` ``(batch, D * hidden)`` and the new carry.
    """
    outputs, new_carry = StackedLSTM(
        hidden_size=module.lstm_hidden_size,
        num_layers=module.num_lstm_layers,
        bidirectional=module.bidirectional,
        dropout_rate=module.dropout_rate,
        dtype=module.dtype,
        param_dtype=module.param_dtype,
        remat=module.remat,
        name="lstm",
    )(x, carry, seq_lengths=seq_lengths, deterministic=deterministic)
    return aggregate(outputs, seq_lengths, module.mean_aggregation), new_carry


def head(module: Any, z: Array) -> Array:
    """The Dense+ELU head named ``head`` of ``LSTMModel`` and ``Forecaster``:
    ``(batch, features) -> (batch, output_size)``. Call it inside ``module``'s compact
    ``__call__``."""
    return MLPHead(
        tuple(module.linear_layer_sizes),
        module.output_size,
        dtype=module.dtype,
        param_dtype=module.param_dtype,
        name="head",
    )(z)


def check_model_args(
    lstm_hidden_size: Any,
    num_lstm_layers: Any,
    linear_layer_sizes: Any,
    mean_aggregation: Any,
    output_size: Any,
    bidirectional: Any,
    dropout_rate: Any,
) -> None:
    """The constructor checks of ``LSTMModel`` (linen and NNX alike)."""
    check_positive_int("lstm_hidden_size", lstm_hidden_size)
    check_positive_int("num_lstm_layers", num_lstm_layers)
    check_positive_int("output_size", output_size)
    check_sizes("linear_layer_sizes", linear_layer_sizes)
    check_bool("mean_aggregation", mean_aggregation)
    check_bool("bidirectional", bidirectional)
    check_fraction("dropout_rate", dropout_rate)


def check_model_input(x: Any, seq_lengths: Any) -> tuple[Array, Array | None]:
    """The call checks of ``LSTMModel`` (linen and NNX alike): ``x`` ``(batch, time,
    features)`` or ``(batch, time)`` (one feature, given the feature axis here) and
    ``seq_lengths``."""
    x = jnp.asarray(x)
    if x.ndim == 2:
        x = x[..., None]  # (batch, time) -> (batch, time, 1)
    x = check_input(x, "x (batch, time, features) or (batch, time)")
    if seq_lengths is not None:
        seq_lengths = check_seq_lengths(seq_lengths, x.shape[0], x.shape[1])
    return x, seq_lengths
