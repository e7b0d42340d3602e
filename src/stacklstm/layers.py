"""``StackedLSTM``: the Flax (linen) counterpart of ``torch.nn.LSTM(batch_first=True)``."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from .checks import (
    SettingError,
    SettingTypeError,
    check_bool,
    check_fraction,
    check_positive_int,
    is_int,
)
from .kernels import cudnn
from .kernels.dispatch import stack_path
from .kernels.lstm import LSTMState, check_seq_lengths, lstm_layer

Array = jax.Array
Dtype = Any
Initializer = Callable[..., Array]


def lstm_bias_init(forget_bias: float = 1.0) -> Initializer:
    """Bias initialiser: zeros, with the forget gate (second quarter) at ``forget_bias``.

    This is Keras' ``unit_forget_bias=True``; it helps a freshly initialised LSTM remember.
    """

    def init(key, shape, dtype=jnp.float32):
        del key
        if len(shape) != 1 or shape[0] % 4:
            raise ValueError(f"an LSTM bias must be (4*hidden,); got {shape}")
        hidden = shape[0] // 4
        return jnp.zeros(shape, dtype).at[hidden : 2 * hidden].set(forget_bias)

    return init


def check_input(x: Array, name: str = "x") -> Array:
    """Checks ``x`` is a real floating ``(batch, time, features)`` array with ``time >= 1``."""
    x = jnp.asarray(x)
    if not jnp.issubdtype(x.dtype, jnp.floating):
        raise TypeError(
            f"{name} must be a real floating-point array (e.g. float32); got dtype {x.dtype}. "
            f"Hint: x.astype(jnp.float32)"
        )
    if x.ndim != 3:
        raise ValueError(f"{name} must be (batch, time, features); got shape {x.shape}")
    if x.shape[1] < 1:
        raise ValueError(f"{name} must have at least one time step; got shape {x.shape}")
    if x.shape[2] < 1:
        raise ValueError(f"{name} must have at least one feature; got shape {x.shape}")
    return x


def check_layer_input(name: str, kernel_ih_shape: tuple, x_shape: tuple, hidden: int) -> None:
    """Checks that a layer's existing ``kernel_ih`` fits ``x``: the input features, then
    ``(features, 4*hidden)``. ``name`` prefixes the message (the layer's name)."""
    got = tuple(kernel_ih_shape)
    if len(got) == 2 and x_shape[-1] != got[0]:
        raise ValueError(
            f"{name}: the params expect inputs with {got[0]} features "
            f"(kernel_ih {got}); got x with {x_shape[-1]} features"
        )
    if got != (x_shape[-1], 4 * hidden):
        raise ValueError(
            f"{name}: kernel_ih in the params has shape {got}, but this layer "
            f"(hidden_size={hidden}) needs {(x_shape[-1], 4 * hidden)}: params of "
            "another model?"
        )


class LSTMLayer(nn.Module):
    """One LSTM layer in one direction; owns ``kernel_ih``, ``kernel_hh`` and ``bias`` (and
    ``kernel_hr`` ``(hidden, proj_size)`` when ``proj_size > 0``).

    Attributes:
        hidden_size: size of ``c`` (and of ``h`` without a projection).
        reverse: run each row from its last valid step to its first.
        dtype: matmul dtype (``None``: from inputs and params); state math stays >= float32.
        param_dtype: dtype of the stored parameters.
        kernel_init, recurrent_kernel_init, bias_init: initialisers (see ``StackedLSTM``).
        remat: recompute activations in chunks in the backward pass (see ``lstm_layer``).
        time_major: inputs and outputs are ``(time, batch, ...)``.
        proj_size: project ``h`` to this many features (PyTorch's ``proj_size``); 0: none.
        projection_kernel_init: initialiser of ``kernel_hr``.
    """

    hidden_size: int
    reverse: bool = False
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    kernel_init: Initializer = nn.initializers.lecun_normal()
    recurrent_kernel_init: Initializer = nn.initializers.orthogonal()
    bias_init: Initializer = lstm_bias_init(1.0)
    remat: bool | int = False
    time_major: bool = False
    proj_size: int = 0
    projection_kernel_init: Initializer = nn.initializers.lecun_normal()

    @nn.compact
    def __call__(
        self, x: Array, state: LSTMState, seq_lengths: Array | None = None
    ) -> tuple[Array, LSTMState]:
        """``x (batch, time, features)``, ``state`` of ``(batch, hidden)`` arrays (``h``
        ``(batch, proj_size)`` with a projection) -> ``(outputs (batch, time, hidden or
        proj_size), final LSTMState)``; time first for both when ``time_major``."""
        h4 = 4 * self.hidden_size
        if self.has_variable("params", "kernel_ih"):
            got = self.get_variable("params", "kernel_ih").shape
            check_layer_input(self.name, got, x.shape, self.hidden_size)
        h_size = self.proj_size or self.hidden_size
        params = {
            "kernel_ih": self.param(
                "kernel_ih", self.kernel_init, (x.shape[-1], h4), self.param_dtype
            ),
            "kernel_hh": self.param(
                "kernel_hh", self.recurrent_kernel_init, (h_size, h4), self.param_dtype
            ),
            "bias": self.param("bias", self.bias_init, (h4,), self.param_dtype),
        }
        if self.proj_size:
            params["kernel_hr"] = self.param(
                "kernel_hr",
                self.projection_kernel_init,
                (self.hidden_size, self.proj_size),
                self.param_dtype,
            )
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


def zero_state(
    batch_size: int,
    hidden_size: int,
    num_states: int,
    dtype: Dtype = jnp.float32,
    proj_size: int = 0,
) -> tuple[LSTMState, ...]:
    """``num_states`` zero ``LSTMState``s with ``h`` and ``c`` of shape ``(batch, hidden)``
    (``h`` ``(batch, proj_size)`` when ``proj_size > 0``).

    Every leaf is its own buffer, so the carry can be donated (``jax.jit(...,
    donate_argnums=...)``); one buffer shared by all leaves cannot be donated twice.
    """
    check_positive_int("batch_size", batch_size)

    def zeros(width: int) -> Array:
        return jnp.zeros((batch_size, width), dtype)

    return tuple(
        LSTMState(zeros(proj_size or hidden_size), zeros(hidden_size)) for _ in range(num_states)
    )


def check_state(
    state: Sequence[LSTMState],
    num_states: int,
    batch: int,
    hidden: int,
    what: str,
    proj_size: int = 0,
) -> tuple[LSTMState, ...]:
    """Checks a stack's state: ``num_states`` ``(h, c)`` pairs of ``(batch, hidden)`` arrays
    (``h`` ``(batch, proj_size)`` when ``proj_size > 0``)."""
    if not isinstance(state, (tuple, list)):
        raise TypeError(
            f"{what} must be a tuple of LSTMState(h, c), one per layer and direction; "
            f"got {type(state).__name__}"
        )
    if len(state) != num_states:
        raise ValueError(
            f"{what} must hold {num_states} LSTMState(h, c) (one per layer and direction); "
            f"got {len(state)}"
        )
    out = []
    for k, s in enumerate(state):
        if not isinstance(s, (tuple, list)) or len(s) != 2:
            raise TypeError(f"{what}[{k}] must be an LSTMState(h, c); got {type(s).__name__}")
        h, c = s
        h_dims = ("proj_size", proj_size) if proj_size else ("hidden", hidden)
        for name, a, (dim, size) in (("h", h, h_dims), ("c", c, ("hidden", hidden))):
            if np.shape(a) != (batch, size):
                raise ValueError(
                    f"{what}[{k}].{name} must be (batch, {dim}) = ({batch}, {size}); "
                    f"got {np.shape(a)}"
                )
        out.append(LSTMState(jnp.asarray(h), jnp.asarray(c)))
    return tuple(out)


class StackedLSTM(nn.Module):
    """A multi-layer (optionally bidirectional) LSTM, the JAX twin of ``torch.nn.LSTM``.

    Same numbers as ``torch.nn.LSTM(input_size, hidden_size, num_layers, batch_first=True,
    bidirectional=..., proj_size=...)`` once its weights are copied with
    ``stacklstm.interop.from_torch``.

    Parameters (public layout): ``layer_{l}`` (and ``layer_{l}_reverse`` when bidirectional),
    each holding ``kernel_ih (in_features, 4*hidden)``, ``kernel_hh (hidden, 4*hidden)`` and
    ``bias (4*hidden,)``, gates in PyTorch's order i, f, g, o along the last axis. With
    ``proj_size > 0`` also ``kernel_hr (hidden, proj_size)``, and ``kernel_hh`` is
    ``(proj_size, 4*hidden)``.

    Initialisation (override with the fields below): ``kernel_ih`` lecun-normal (flax's Dense
    default), ``kernel_hh`` orthogonal, ``bias`` zero with the forget gate at 1.0 (Keras'
    ``unit_forget_bias``), ``kernel_hr`` lecun-normal.

    Attributes:
        hidden_size: features of ``h`` and ``c``.
        num_layers: stacked layers (>= 1).
        bidirectional: add a reverse direction per layer; outputs concatenate (forward, reverse).
        dropout_rate: dropout on each layer's output except the last's, only when
            ``deterministic=False`` (RNG stream ``"dropout"``), as in PyTorch.
        dtype: matmul dtype (``None``: from inputs and params); state math stays >= float32.
        param_dtype: dtype of the stored parameters.
        remat: for long sequences: ``True`` keeps activations for one chunk of
            ``ceil(sqrt(time))`` steps at a time and recomputes the rest in the backward pass
            (memory about ``sqrt(time)``); an int sets the chunk length. Same numbers.
        proj_size: LSTMP as in PyTorch: ``h = (o * tanh(c)) @ kernel_hr``, so ``h`` and the
            outputs have ``proj_size`` features and ``c`` keeps ``hidden_size``. 0 (default):
            no projection. Must be smaller than ``hidden_size``.
        projection_kernel_init: initialiser of ``kernel_hr``.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> lstm = StackedLSTM(hidden_size=16, num_layers=2)
        >>> x = jnp.ones((4, 10, 3))                       # (batch, time, features)
        >>> params = lstm.init(jax.random.key(0), x)
        >>> y, state = lstm.apply(params, x)
        >>> y.shape, len(state), state[0].h.shape
        ((4, 10, 16), 2, (4, 16))
        >>> lstmp = StackedLSTM(hidden_size=16, proj_size=4)
        >>> y, state = lstmp.apply(lstmp.init(jax.random.key(0), x), x)
        >>> y.shape, state[0].h.shape, state[0].c.shape
        ((4, 10, 4), (4, 4), (4, 16))
    """

    hidden_size: int
    num_layers: int = 1
    bidirectional: bool = False
    dropout_rate: float = 0.0
    dtype: Dtype | None = None
    param_dtype: Dtype = jnp.float32
    kernel_init: Initializer = nn.initializers.lecun_normal()
    recurrent_kernel_init: Initializer = nn.initializers.orthogonal()
    bias_init: Initializer = lstm_bias_init(1.0)
    remat: bool | int = False
    proj_size: int = 0
    projection_kernel_init: Initializer = nn.initializers.lecun_normal()

    def __post_init__(self) -> None:
        check_stack_args(
            self.hidden_size,
            self.num_layers,
            self.bidirectional,
            self.dropout_rate,
            self.proj_size,
        )
        super().__post_init__()

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

    @nn.compact
    def __call__(
        self,
        x: Array,
        initial_state: Sequence[LSTMState] | None = None,
        *,
        seq_lengths: Array | None = None,
        deterministic: bool = True,
    ) -> tuple[Array, tuple[LSTMState, ...]]:
        """Runs the stack.

        Args:
            x: ``(batch, time, features)`` floating-point inputs.
            initial_state: ``num_layers * D`` ``LSTMState``s in PyTorch's order (layer 0
                forward, layer 0 reverse, layer 1 forward, ...); ``None`` means zeros.
            seq_lengths: optional ``(batch,)`` valid lengths (right padding).
            deterministic: when False, apply dropout between layers.

        Returns:
            ``(outputs, final_state)``: ``(batch, time, D*hidden)`` (``D*proj_size`` with a
            projection; zeros at padded steps) and
            a tuple of ``LSTMState``s in the same order as ``initial_state``, each taken at the
            row's own last valid step.
        """
        x, initial_state, seq_lengths = check_stack_call(
            x,
            initial_state,
            seq_lengths,
            self.hidden_size,
            self.num_layers * self.num_directions,
            self.proj_size,
        )
        path = stack_path(
            dtype=self.dtype,
            param_dtype=self.param_dtype,
            x_dtype=x.dtype,
            remat=self.remat,
            proj_size=self.proj_size,
            dropout_in_training=self.dropout_rate > 0 and self.num_layers > 1 and not deterministic,
        )
        if path == "cudnn" and not self.is_initializing():  # the params exist: one cuDNN call
            return cudnn.run_stack(
                self.variables["params"],
                x,
                initial_state,
                seq_lengths,
                hidden_size=self.hidden_size,
                num_layers=self.num_layers,
                bidirectional=self.bidirectional,
            )

        finals = []
        x = jnp.swapaxes(x, 0, 1)  # time-major inside the stack: no transposes between layers
        for layer in range(self.num_layers):
            outs = []
            for rev in (False, True)[: self.num_directions]:
                cell = LSTMLayer(
                    self.hidden_size,
                    reverse=rev,
                    dtype=self.dtype,
                    param_dtype=self.param_dtype,
                    kernel_init=self.kernel_init,
                    recurrent_kernel_init=self.recurrent_kernel_init,
                    bias_init=self.bias_init,
                    remat=self.remat,
                    time_major=True,
                    proj_size=self.proj_size,
                    projection_kernel_init=self.projection_kernel_init,
                    name=f"layer_{layer}" + ("_reverse" if rev else ""),
                )
                out, final = cell(x, initial_state[len(finals)], seq_lengths)
                outs.append(out)
                finals.append(final)
            x = outs[0] if len(outs) == 1 else jnp.concatenate(outs, axis=-1)
            if self.dropout_rate > 0 and layer < self.num_layers - 1:
                x = nn.Dropout(self.dropout_rate)(x, deterministic=deterministic)
        return jnp.swapaxes(x, 0, 1), tuple(finals)


def check_stack_args(
    hidden_size: Any, num_layers: Any, bidirectional: Any, dropout_rate: Any, proj_size: Any
) -> None:
    """The constructor checks of ``StackedLSTM`` (linen and NNX alike)."""
    check_positive_int("hidden_size", hidden_size)
    check_positive_int("num_layers", num_layers)
    check_bool("bidirectional", bidirectional)
    check_fraction("dropout_rate", dropout_rate)
    if not is_int(proj_size) or not 0 <= proj_size < hidden_size:
        error = SettingError if is_int(proj_size) else SettingTypeError
        raise error(
            f"proj_size must be an integer in [0, hidden_size={hidden_size}) (0: no "
            f"projection, as in torch.nn.LSTM), got {proj_size!r}",
            "proj_size",
        )


def check_stack_call(
    x: Any,
    initial_state: Sequence[LSTMState] | None,
    seq_lengths: Any,
    hidden_size: int,
    num_states: int,
    proj_size: int = 0,
) -> tuple[Array, tuple[LSTMState, ...], Array | None]:
    """The call checks of ``StackedLSTM`` (linen and NNX alike): ``x`` ``(batch, time,
    features)``, the initial state (zeros when ``None``) and ``seq_lengths``."""
    x = check_input(x)
    batch, time, _ = x.shape
    if initial_state is None:
        initial_state = zero_state(batch, hidden_size, num_states, jnp.float32, proj_size)
    else:
        initial_state = check_state(
            initial_state, num_states, batch, hidden_size, "initial_state", proj_size
        )
    if seq_lengths is not None:
        seq_lengths = check_seq_lengths(seq_lengths, batch, time)
    return x, initial_state, seq_lengths
