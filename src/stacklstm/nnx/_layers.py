"""NNX ``LSTMLayer`` and ``StackedLSTM``: the linen layers' twins, same parameter tree."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import nnx

from ..checks import check_positive_int
from ..kernels import cudnn
from ..kernels.dispatch import stack_path
from ..kernels.lstm import LSTMState, lstm_layer
from ..layers import (
    check_layer_input,
    check_stack_args,
    check_stack_call,
    lstm_bias_init,
    zero_state,
)

Array = jax.Array
Dtype = Any
Initializer = Callable[..., Array]

# The linen modules' default initialisers.
_KERNEL_INIT = nn.initializers.lecun_normal()
_RECURRENT_KERNEL_INIT = nn.initializers.orthogonal()
_BIAS_INIT = lstm_bias_init(1.0)


class LSTMLayer(nnx.Module):
    """One LSTM layer in one direction; the NNX twin of ``stacklstm.LSTMLayer``.

    Holds ``kernel_ih (in_features, 4*hidden)``, ``kernel_hh (hidden, 4*hidden)``, ``bias
    (4*hidden,)`` and, when ``proj_size > 0``, ``kernel_hr (hidden, proj_size)`` (then
    ``kernel_hh`` is ``(proj_size, 4*hidden)``). ``name`` only labels error messages.
    """

    def __init__(
        self,
        in_features: int,
        hidden_size: int,
        *,
        reverse: bool = False,
        dtype: Dtype | None = None,
        param_dtype: Dtype = jnp.float32,
        kernel_init: Initializer = _KERNEL_INIT,
        recurrent_kernel_init: Initializer = _RECURRENT_KERNEL_INIT,
        bias_init: Initializer = _BIAS_INIT,
        remat: bool | int = False,
        time_major: bool = False,
        proj_size: int = 0,
        projection_kernel_init: Initializer = _KERNEL_INIT,
        name: str = "layer",
        rngs: nnx.Rngs,
    ) -> None:
        h4 = 4 * hidden_size
        h_size = proj_size or hidden_size
        self.kernel_ih = nnx.Param(kernel_init(rngs.params(), (in_features, h4), param_dtype))
        self.kernel_hh = nnx.Param(recurrent_kernel_init(rngs.params(), (h_size, h4), param_dtype))
        self.bias = nnx.Param(bias_init(rngs.params(), (h4,), param_dtype))
        if proj_size:
            self.kernel_hr = nnx.Param(
                projection_kernel_init(rngs.params(), (hidden_size, proj_size), param_dtype)
            )
        self.hidden_size = hidden_size
        self.proj_size = proj_size
        self.reverse = reverse
        self.dtype = dtype
        self.remat = remat
        self.time_major = time_major
        self.name = name

    def __call__(
        self, x: Array, state: LSTMState, seq_lengths: Array | None = None
    ) -> tuple[Array, LSTMState]:
        """``x (batch, time, features)``, ``state`` of ``(batch, hidden)`` arrays (``h``
        ``(batch, proj_size)`` with a projection) -> ``(outputs (batch, time, hidden or
        proj_size), final LSTMState)``; time first for both when ``time_major``."""
        check_layer_input(self.name, self.kernel_ih.shape, jnp.shape(x), self.hidden_size)
        params = {"kernel_ih": self.kernel_ih[...], "kernel_hh": self.kernel_hh[...]}
        params["bias"] = self.bias[...]
        if self.proj_size:
            params["kernel_hr"] = self.kernel_hr[...]
        return lstm_layer(
            params,
            x,
            state,
            seq_lengths,
            self.reverse,
            dtype=self.dtype,
            remat=self.remat,
            time_major=self.time_major,
        )


class StackedLSTM(nnx.Module):
    """A multi-layer (optionally bidirectional) LSTM as an NNX module: the twin of
    ``stacklstm.StackedLSTM`` (linen) and of ``torch.nn.LSTM(batch_first=True)``.

    Same arguments as the linen module, plus ``in_features`` and ``rngs``; same parameter
    tree: ``layer_{l}`` (and ``layer_{l}_reverse``) with ``kernel_ih (in_features,
    4*hidden)``, ``kernel_hh (hidden, 4*hidden)``, ``bias (4*hidden,)`` and with
    ``proj_size > 0`` ``kernel_hr (hidden, proj_size)`` (``kernel_hh`` then ``(proj_size,
    4*hidden)``). See ``stacklstm.StackedLSTM`` for the meaning of each argument.

    Dropout (``dropout_rate > 0``, between layers, as in PyTorch) is on after construction
    and after ``model.train()``, off after ``model.eval()``; ``__call__(...,
    deterministic=...)`` overrides that for one call.

    Example:
        >>> import jax.numpy as jnp
        >>> from flax import nnx
        >>> lstm = StackedLSTM(3, 16, num_layers=2, rngs=nnx.Rngs(0))
        >>> y, state = lstm(jnp.ones((4, 10, 3)))            # (batch, time, features)
        >>> y.shape, len(state), state[0].h.shape
        ((4, 10, 16), 2, (4, 16))
        >>> lstmp = StackedLSTM(3, 16, proj_size=4, rngs=nnx.Rngs(0))
        >>> y, state = lstmp(jnp.ones((4, 10, 3)))
        >>> y.shape, state[0].h.shape, state[0].c.shape
        ((4, 10, 4), (4, 4), (4, 16))
    """

    def __init__(
        self,
        in_features: int,
        hidden_size: int,
        num_layers: int = 1,
        bidirectional: bool = False,
        dropout_rate: float = 0.0,
        dtype: Dtype | None = None,
        param_dtype: Dtype = jnp.float32,
        kernel_init: Initializer = _KERNEL_INIT,
        recurrent_kernel_init: Initializer = _RECURRENT_KERNEL_INIT,
        bias_init: Initializer = _BIAS_INIT,
        remat: bool | int = False,
        proj_size: int = 0,
        projection_kernel_init: Initializer = _KERNEL_INIT,
        *,
        rngs: nnx.Rngs,
    ) -> None:
        check_positive_int("in_features", in_features)
        check_stack_args(hidden_size, num_layers, bidirectional, dropout_rate, proj_size)
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.bidirectional = bidirectional
        self.dropout_rate = dropout_rate
        self.proj_size = proj_size
        self.dtype, self.param_dtype, self.remat = dtype, param_dtype, remat
        features = in_features
        for layer in range(num_layers):
            for rev in (False, True)[: self.num_directions]:
                name = f"layer_{layer}" + ("_reverse" if rev else "")
                cell = LSTMLayer(
                    features,
                    hidden_size,
                    reverse=rev,
                    dtype=dtype,
                    param_dtype=param_dtype,
                    kernel_init=kernel_init,
                    recurrent_kernel_init=recurrent_kernel_init,
                    bias_init=bias_init,
                    remat=remat,
                    time_major=True,
                    proj_size=proj_size,
                    projection_kernel_init=projection_kernel_init,
                    name=name,
                    rngs=rngs,
                )
                setattr(self, name, cell)
            features = self.num_directions * (proj_size or hidden_size)
        self.dropout = (
            nnx.Dropout(dropout_rate, rngs=rngs) if dropout_rate > 0 and num_layers > 1 else None
        )

    @property
    def num_directions(self) -> int:
        return 2 if self.bidirectional else 1

    def initialize_carry(self, batch_size: int, dtype: Dtype = jnp.float32):
        """Zero state: a tuple of ``num_layers * D`` ``LSTMState``s, ``(batch, hidden)`` each
        (``h`` ``(batch, proj_size)`` with a projection)."""
        return zero_state(
            batch_size,
            self.hidden_size,
            self.num_layers * self.num_directions,
            dtype,
            self.proj_size,
        )

    def __call__(
        self,
        x: Array,
        initial_state: Sequence[LSTMState] | None = None,
        *,
        seq_lengths: Array | None = None,
        deterministic: bool | None = None,
    ) -> tuple[Array, tuple[LSTMState, ...]]:
        """Runs the stack.

        Args:
            x: ``(batch, time, features)`` floating-point inputs.
            initial_state: ``num_layers * D`` ``LSTMState``s in PyTorch's order (layer 0
                forward, layer 0 reverse, layer 1 forward, ...); ``None`` means zeros.
            seq_lengths: optional ``(batch,)`` valid lengths (right padding).
            deterministic: ``True``/``False`` turns dropout off/on for this call; ``None``
                follows ``model.train()``/``model.eval()``.

        Returns:
            ``(outputs, final_state)``: ``(batch, time, D*hidden)`` (``D*proj_size`` with a
            projection; zeros at padded steps) and a tuple of ``LSTMState``s in the order of
            ``initial_state``, each taken at the row's own last valid step.
        """
        x, initial_state, seq_lengths = check_stack_call(
            x,
            initial_state,
            seq_lengths,
            self.hidden_size,
            self.num_layers * self.num_directions,
            self.proj_size,
        )
        training = self.dropout is not None and not (
            self.dropout.deterministic if deterministic is None else deterministic
        )
        path = stack_path(
            dtype=self.dtype,
            param_dtype=self.param_dtype,
            x_dtype=x.dtype,
            remat=self.remat,
            proj_size=self.proj_size,
            dropout_in_training=training,
        )
        if path == "cudnn":  # one cuDNN call over the same parameter tree
            return cudnn.run_stack(
                nnx.to_pure_dict(nnx.state(self, nnx.Param)),
                x,
                initial_state,
                seq_lengths,
                hidden_size=self.hidden_size,
                num_layers=self.num_layers,
                bidirectional=self.bidirectional,
            )
        finals = []
        x = jnp.swapaxes(x, 0, 1)  # time-major inside the stack, as in the linen module
        for layer in range(self.num_layers):
            outs = []
            for rev in (False, True)[: self.num_directions]:
                cell = getattr(self, f"layer_{layer}" + ("_reverse" if rev else ""))
                out, final = cell(x, initial_state[len(finals)], seq_lengths)
                outs.append(out)
                finals.append(final)
            x = outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=-1)
            if self.dropout is not None and layer < self.num_layers - 1:
                x = self.dropout(x, deterministic=deterministic)
        return jnp.swapaxes(x, 0, 1), tuple(finals)
