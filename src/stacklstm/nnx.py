"""The Flax NNX front-end: ``StackedLSTM`` and ``LSTMModel`` as ``flax.nnx.Module``s.

Import it explicitly (``import stacklstm.nnx``; ``import stacklstm`` does not load
``flax.nnx``). The modules take the linen modules' constructor arguments, plus ``in_features``
(NNX creates parameters eagerly) and ``rngs``, and hold the **same parameter tree**:
``nnx.to_pure_dict(nnx.state(model, nnx.Param))`` equals the linen ``params`` key for key (names,
shapes, gate order i, f, g, o), so one checkpoint or one ``interop.from_torch`` result serves
both. The math is the same function, ``stacklstm.kernels.lstm.lstm_layer``, and the argument
and input checks are the linen modules' own, so numbers and error messages agree.

Conversions, one call each way:

- :func:`from_linen` ``(module, params, rngs=...)`` -> an NNX module with those params;
- :func:`to_linen_params` ``(model)`` -> the linen ``params`` tree;
- :func:`load_linen_params` ``(model, params)`` loads a linen tree (or a ``from_torch`` result)
  into an existing NNX module, every key and shape checked.

Dropout follows NNX's switch: ``model.train()`` (the default after construction) applies it,
``model.eval()`` turns it off; the RNG stream is ``"dropout"`` (or the default stream) of the
``rngs`` given at construction.

Example:
    >>> import jax.numpy as jnp
    >>> from flax import nnx
    >>> import stacklstm.nnx as snnx
    >>> model = snnx.LSTMModel(1, lstm_hidden_size=64, num_lstm_layers=2,
    ...                        linear_layer_sizes=(32, 16), rngs=nnx.Rngs(0))
    >>> model(jnp.ones((32, 10, 1))).shape               # (batch, time, features)
    (32, 1)
    >>> sorted(snnx.to_linen_params(model))
    ['head', 'lstm']
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import flax.linen as nn
import jax
import jax.numpy as jnp
from flax import nnx

from . import layers as _linen_layers
from . import model as _linen_model
from .checks import check_positive_int
from .kernels import cudnn
from .kernels.dispatch import stack_path
from .kernels.lstm import LSTMState, lstm_layer
from .layers import (
    check_layer_input,
    check_stack_args,
    check_stack_call,
    lstm_bias_init,
    zero_state,
)
from .model import aggregate, check_model_args, check_model_input

Array = jax.Array
Dtype = Any
Initializer = Callable[..., Array]

# The linen modules' default initialisers.
_KERNEL_INIT = nn.initializers.lecun_normal()
_RECURRENT_KERNEL_INIT = nn.initializers.orthogonal()
_BIAS_INIT = lstm_bias_init(1.0)

__all__ = [
    "LSTMLayer",
    "LSTMModel",
    "MLPHead",
    "StackedLSTM",
    "from_linen",
    "load_linen_params",
    "to_linen_params",
]


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
            x, initial_state, seq_lengths, self.hidden_size, self.num_layers * self.num_directions,
            self.proj_size,
        )  # fmt: skip
        training = self.dropout is not None and not (
            self.dropout.deterministic if deterministic is None else deterministic
        )
        path = stack_path(
            dtype=self.dtype, param_dtype=self.param_dtype, x_dtype=x.dtype, remat=self.remat,
            proj_size=self.proj_size, dropout_in_training=training,
        )  # fmt: skip
        if path == "cudnn":  # one cuDNN call over the same parameter tree
            return cudnn.run_stack(
                nnx.to_pure_dict(nnx.state(self, nnx.Param)), x, initial_state, seq_lengths,
                hidden_size=self.hidden_size, num_layers=self.num_layers,
                bidirectional=self.bidirectional,
            )  # fmt: skip
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
            lstm_hidden_size, num_lstm_layers, linear_layer_sizes, mean_aggregation, output_size,
            bidirectional, dropout_rate,
        )  # fmt: skip
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


# The linen fields each NNX constructor takes (the rest of a linen module is name/parent).
_STACK_FIELDS = (
    "hidden_size", "num_layers", "bidirectional", "dropout_rate", "dtype", "param_dtype",
    "kernel_init", "recurrent_kernel_init", "bias_init", "remat", "proj_size",
    "projection_kernel_init",
)  # fmt: skip
_MODEL_FIELDS = (
    "lstm_hidden_size", "num_lstm_layers", "linear_layer_sizes", "mean_aggregation",
    "output_size", "bidirectional", "dropout_rate", "dtype", "param_dtype", "remat",
)  # fmt: skip


def _unwrap(params: Mapping[str, Any]) -> Mapping[str, Any]:
    if not isinstance(params, Mapping):
        raise TypeError(f"params must be a mapping (a linen params tree); got {type(params)}")
    if "params" in params and len(params) == 1:
        return params["params"]
    return params


def _flat(tree: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    out = {}
    for key, value in tree.items():
        path = f"{prefix}{key}"
        out.update(_flat(value, path + "/") if isinstance(value, Mapping) else {path: value})
    return out


def to_linen_params(model: nnx.Module) -> dict[str, Any]:
    """The model's parameters as the linen ``params`` tree: a plain nested ``dict`` of arrays.

    ``{"params": to_linen_params(m)}`` runs the linen twin (``apply``) with the same numbers;
    the tree also goes to ``interop.to_torch`` or a checkpoint.

    Example:
        >>> from flax import nnx
        >>> p = to_linen_params(StackedLSTM(3, 8, rngs=nnx.Rngs(0)))
        >>> {k: v.shape for k, v in p["layer_0"].items()}
        {'bias': (32,), 'kernel_hh': (8, 32), 'kernel_ih': (3, 32)}
    """
    return nnx.to_pure_dict(nnx.state(model, nnx.Param))


def load_linen_params(model: nnx.Module, params: Mapping[str, Any]) -> None:
    """Loads a linen ``params`` tree (or a ``from_torch`` result) into ``model`` in place.

    The key sets must be equal and every shape must agree, else a ``ValueError`` names the
    first difference; nothing is changed then. Arrays keep their dtype. An outer
    ``{"params": ...}`` is accepted.

    Example:
        >>> import torch
        >>> from flax import nnx
        >>> from stacklstm.interop import from_torch
        >>> lstm = StackedLSTM(3, 8, proj_size=2, rngs=nnx.Rngs(0))
        >>> load_linen_params(lstm, from_torch(torch.nn.LSTM(3, 8, proj_size=2)))
    """
    state = nnx.state(model, nnx.Param)
    have = {k: jnp.shape(v) for k, v in _flat(nnx.to_pure_dict(state)).items()}
    given = _flat(_unwrap(params))
    if set(given) != set(have):
        missing, extra = sorted(set(have) - set(given)), sorted(set(given) - set(have))
        raise ValueError(
            f"load_linen_params: the params do not fit this {type(model).__name__}: missing "
            f"{missing}, unexpected {extra}"
        )
    for key, shape in have.items():
        if jnp.shape(given[key]) != shape:
            raise ValueError(
                f"load_linen_params: {key} must have shape {shape}; got {jnp.shape(given[key])}"
            )
    nnx.replace_by_pure_dict(state, jax.tree.map(jnp.asarray, dict(_unwrap(params))))
    nnx.update(model, state)


def from_linen(
    module: _linen_layers.StackedLSTM | _linen_model.LSTMModel,
    params: Mapping[str, Any],
    *,
    rngs: nnx.Rngs | None = None,
) -> StackedLSTM | LSTMModel:
    """The NNX twin of a linen ``StackedLSTM`` or ``LSTMModel`` holding ``params``.

    ``in_features`` is read from the params; every other argument from ``module``'s fields.

    Args:
        module: the linen module (bound or not).
        params: its ``params`` tree (an outer ``{"params": ...}`` is accepted).
        rngs: the NNX RNGs (dropout draws from its ``"dropout"`` or default stream);
            ``nnx.Rngs(0)`` when ``None``.

    Returns:
        A ``stacklstm.nnx.StackedLSTM`` or ``LSTMModel`` with the same numbers.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> import stacklstm
        >>> linen = stacklstm.StackedLSTM(8, num_layers=2)
        >>> x = jnp.ones((4, 5, 3))
        >>> params = linen.init(jax.random.key(0), x)["params"]
        >>> model = from_linen(linen, params)
        >>> bool(jnp.allclose(model(x)[0], linen.apply({"params": params}, x)[0]))
        True
    """
    rngs = nnx.Rngs(0) if rngs is None else rngs
    tree = _unwrap(params)
    if isinstance(module, _linen_layers.StackedLSTM):
        fields, cls, stack = _STACK_FIELDS, StackedLSTM, tree
    elif isinstance(module, _linen_model.LSTMModel):
        fields, cls, stack = _MODEL_FIELDS, LSTMModel, tree.get("lstm")
    else:
        raise TypeError(
            f"from_linen expects a stacklstm.StackedLSTM or stacklstm.LSTMModel; got "
            f"{type(module).__name__}"
        )
    layer_0 = stack.get("layer_0") if isinstance(stack, Mapping) else None
    if not isinstance(layer_0, Mapping) or jnp.ndim(layer_0.get("kernel_ih")) != 2:
        raise ValueError(
            "from_linen: the params hold no layer_0/kernel_ih (in_features, 4*hidden) of a "
            f"{type(module).__name__}; got keys {sorted(tree)}"
        )
    in_features = jnp.shape(layer_0["kernel_ih"])[0]
    model = cls(in_features, **{f: getattr(module, f) for f in fields}, rngs=rngs)
    load_linen_params(model, tree)
    return model
