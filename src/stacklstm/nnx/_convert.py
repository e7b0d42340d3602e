"""Conversions between the NNX modules and linen ``params`` trees, one call each way."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from .. import layers as _linen_layers
from .. import model as _linen_model
from ._layers import StackedLSTM
from ._model import LSTMModel

# The linen fields each NNX constructor takes (the rest of a linen module is name/parent).
_STACK_FIELDS = (
    "hidden_size",
    "num_layers",
    "bidirectional",
    "dropout_rate",
    "dtype",
    "param_dtype",
    "kernel_init",
    "recurrent_kernel_init",
    "bias_init",
    "remat",
    "proj_size",
    "projection_kernel_init",
)
_MODEL_FIELDS = (
    "lstm_hidden_size",
    "num_lstm_layers",
    "linear_layer_sizes",
    "mean_aggregation",
    "output_size",
    "bidirectional",
    "dropout_rate",
    "dtype",
    "param_dtype",
    "remat",
)


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
    have = {k: np.shape(v) for k, v in _flat(nnx.to_pure_dict(state)).items()}
    given = _flat(_unwrap(params))
    if set(given) != set(have):
        missing, extra = sorted(set(have) - set(given)), sorted(set(given) - set(have))
        raise ValueError(
            f"load_linen_params: the params do not fit this {type(model).__name__}: missing "
            f"{missing}, unexpected {extra}"
        )
    for key, shape in have.items():
        if np.shape(given[key]) != shape:
            raise ValueError(
                f"load_linen_params: {key} must have shape {shape}; got {np.shape(given[key])}"
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
    in_features = np.shape(layer_0["kernel_ih"])[0]
    model = cls(in_features, **{f: getattr(module, f) for f in fields}, rngs=rngs)
    load_linen_params(model, tree)
    return model
