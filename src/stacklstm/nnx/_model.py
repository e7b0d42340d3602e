"""NNX ``MLPHead`` and ``LSTMModel``: the linen regressor's twins, same parameter tree."""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from typing import Any

import jax
import jax.numpy as jnp
from flax import nnx

from ..kernels.lstm import LSTMState
from ..layers import zero_state
from ..model import aggregate, check_model_args, check_model_input
from ._layers import StackedLSTM

Array = jax.Array
Dtype = Any


class MLPHead(nnx.Module):
    """``Linear(size) + ELU`` for each size in ``hidden_sizes``, then ``Linear(output_size)``.

    Parameters: ``dense_{j}`` for each hidden layer and ``output``, each with ``kernel`` and
    ``bias``, as linen's ``MLPHead`` (``nnx.Linear`` has ``nn.Dense``'s defaults).
    """

    def __init__(
        self,
        in_features: int,
        hidden_sizes: Sequence[int],
        output_size: int,
        dtype: Dtype | None = None,
        param_dtype: Dtype = jnp.float32,
        *,
        rngs: nnx.Rngs,
    ) -> None:
        sizes = (in_features, *hidden_sizes)
        for j, (a, b) in enumerate(itertools.pairwise(sizes)):
            dense = nnx.Linear(a, b, dtype=dtype, param_dtype=param_dtype, rngs=rngs)
            setattr(self, f"dense_{j}", dense)
        self.output = nnx.Linear(
            sizes[-1], output_size, dtype=dtype, param_dtype=param_dtype, rngs=rngs
        )
        self.num_hidden = len(hidden_sizes)

    def __call__(self, z: Array) -> Array:
        """``(batch, features) -> (batch, output_size)``."""
        for j in range(self.num_hidden):
            z = nnx.elu(getattr(self, f"dense_{j}")(z))
        return self.output(z)


class LSTMModel(nnx.Module):
    """The stacked-LSTM regressor as an NNX module: ``StackedLSTM`` -> mean or last step ->
    Linear+ELU head; the twin of ``stacklstm.LSTMModel`` (linen).

    The linen module's fields as constructor arguments, after ``in_features`` (the input
    features; a 2-D input ``(batch, time)`` is one feature) and before ``rngs``. Same parameter
    tree: ``lstm`` (the ``StackedLSTM`` tree), ``head/dense_{j}``, ``head/output``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from flax import nnx
        >>> model = LSTMModel(1, lstm_hidden_size=64, num_lstm_layers=2,
        ...                   linear_layer_sizes=(32, 16), mean_aggregation=False,
        ...                   rngs=nnx.Rngs(0))
        >>> x = jnp.ones((32, 10, 1))                      # (batch, time, features)
        >>> carry = model.initialize_carry(32)
        >>> model(x, carry).shape
        (32, 1)
    """

    def __init__(
        self,
        in_features: int,
        lstm_hidden_size: int = 64,
        num_lstm_layers: int = 2,
        linear_layer_sizes: Sequence[int] = (32, 16),
        mean_aggregation: bool = False,
        output_size: int = 1,
        bidirectional: bool = False,
        dropout_rate: float = 0.0,
        dtype: Dtype | None = None,
        param_dtype: Dtype = jnp.float32,
        remat: bool | int = False,
        *,
        rngs: nnx.Rngs,
    ) -> None:
        check_model_args(
            lstm_hidden_size,
            num_lstm_layers,
            linear_layer_sizes,
            mean_aggregation,
            output_size,
            bidirectional,
            dropout_rate,
        )
        self.lstm_hidden_size = lstm_hidden_size
        self.num_lstm_layers = num_lstm_layers
        self.linear_layer_sizes = tuple(linear_layer_sizes)
        self.mean_aggregation = mean_aggregation
        self.output_size = output_size
        self.bidirectional = bidirectional
        self.lstm = StackedLSTM(
            in_features,
            lstm_hidden_size,
            num_layers=num_lstm_layers,
            bidirectional=bidirectional,
            dropout_rate=dropout_rate,
            dtype=dtype,
            param_dtype=param_dtype,
            remat=remat,
            rngs=rngs,
        )
        self.head = MLPHead(
            self.lstm.num_directions * lstm_hidden_size,
            self.linear_layer_sizes,
            output_size,
            dtype=dtype,
            param_dtype=param_dtype,
            rngs=rngs,
        )

    @property
    def num_states(self) -> int:
        """Number of ``LSTMState``s in a carry: layers times directions."""
        return self.num_lstm_layers * (2 if self.bidirectional else 1)

    def initialize_carry(self, batch_size: int, dtype: Dtype = jnp.float32):
        """The zero carry: ``num_lstm_layers * D`` ``LSTMState(h, c)``, ``(batch, hidden)``
        each."""
        return zero_state(batch_size, self.lstm_hidden_size, self.num_states, dtype)

    def __call__(
        self,
        x: Array,
        carry: Sequence[LSTMState] | None = None,
        *,
        seq_lengths: Array | None = None,
        deterministic: bool | None = None,
        return_carry: bool = False,
    ) -> Array | tuple[Array, tuple[LSTMState, ...]]:
        """Forecasts from a batch of sequences.

        Args:
            x: ``(batch, time, features)`` or ``(batch, time)`` (one feature).
            carry: initial state from ``initialize_carry`` or a previous call; ``None`` means
                zeros. Never modified.
            seq_lengths: optional ``(batch,)`` valid lengths (right padding).
            deterministic: ``True``/``False`` turns dropout off/on for this call; ``None``
                follows ``model.train()``/``model.eval()``.
            return_carry: also return the final state, to feed a long series chunk by chunk.

        Returns:
            ``y`` of shape ``(batch, output_size)``, or ``(y, new_carry)`` with
            ``return_carry=True``.
        """
        x, seq_lengths = check_model_input(x, seq_lengths)
        outputs, new_carry = self.lstm(
            x, carry, seq_lengths=seq_lengths, deterministic=deterministic
        )
        z = aggregate(outputs, seq_lengths, self.mean_aggregation)  # (batch, D*hidden)
        y = self.head(z)
        return (y, new_carry) if return_carry else y
