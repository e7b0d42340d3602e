"""cuDNN's flat weight layout for the ``StackedLSTM`` params, and where the one-call cuDNN
path (:mod:`stacklstm.kernels.cudnn`) applies.

The params stay the ``StackedLSTM`` tree; they are packed into cuDNN's flat weight inside the
call (:func:`pack_weights`). cuDNN's layout, as ``jax.experimental.rnn.unpack_lstm_weights``
reads it: first, for each pseudo-layer ``l = layer * D + direction`` (PyTorch's order), ``W_ih``
``(4*hidden, in_features)`` then ``W_hh`` ``(4*hidden, hidden)``; then, for each pseudo-layer,
``b_ih`` then ``b_hh`` ``(4*hidden,)``. The gates are in PyTorch's order i, f, g, o on CUDA
(``swap_lstm_gates`` is for ROCm's MIOpen, not used here), so each kernel is only transposed;
our one bias is ``b_ih`` and ``b_hh`` is zero.

Example:
    >>> import jax, numpy as np
    >>> from stacklstm.layers import StackedLSTM
    >>> params = StackedLSTM(4, 2).init(jax.random.key(0), np.ones((1, 3, 2)))["params"]
    >>> flat = pack_weights(params, input_size=2, hidden_size=4, num_layers=2)
    >>> flat.shape, jax.tree.map(np.shape, unpack_weights(flat, 2, 4, 2)) == jax.tree.map(
    ...     np.shape, params)
    ((288,), True)
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

Array = jax.Array

# Why the cuDNN path steps aside, for whoever reports the path taken.
DECLINES = {
    "platform": "not a CUDA GPU",
    "dtype": "not float32 (cuDNN's path here is float32 only; bfloat16 uses the scan)",
    "remat": "remat asks for chunked recomputation, which the one-call kernel cannot do",
    "proj_size": "proj_size > 0: jax.experimental.rnn has no projection",
    "dropout": "inter-layer dropout in training: cuDNN's dropout masks cannot match ours",
}


def layer_names(num_layers: int, bidirectional: bool) -> list[str]:
    """``layer_{l}`` (and ``layer_{l}_reverse``) in PyTorch's pseudo-layer order."""
    suffixes = ("", "_reverse") if bidirectional else ("",)
    return [f"layer_{layer}{s}" for layer in range(num_layers) for s in suffixes]


def pack_weights(
    params: Mapping[str, Mapping[str, Array]],
    input_size: int,
    hidden_size: int,
    num_layers: int,
    bidirectional: bool = False,
) -> Array:
    """The ``StackedLSTM`` params as cuDNN's flat weight ``(num_params,)``.

    Raises:
        ValueError: A layer is missing or has the wrong shape, or holds a projection.
    """
    names = layer_names(num_layers, bidirectional)
    h4 = 4 * hidden_size
    weights, biases = [], []
    for k, name in enumerate(names):
        if name not in params:
            raise ValueError(f"pack_weights: params have no {name!r}; got {sorted(params)}")
        layer = params[name]
        if "kernel_hr" in layer:
            raise ValueError(
                f"pack_weights: {name} has a projection (kernel_hr): {DECLINES['proj_size']}"
            )
        in_features = (
            input_size
            if k < len(names) // num_layers
            else (hidden_size * (2 if bidirectional else 1))
        )
        expected = {"kernel_ih": (in_features, h4), "kernel_hh": (hidden_size, h4), "bias": (h4,)}
        for key, shape in expected.items():
            if np.shape(layer[key]) != shape:
                raise ValueError(
                    f"pack_weights: {name}/{key} must be {shape}; got {np.shape(layer[key])}"
                )
        weights += [
            jnp.ravel(jnp.transpose(layer["kernel_ih"])),
            jnp.ravel(jnp.transpose(layer["kernel_hh"])),
        ]
        biases += [jnp.ravel(layer["bias"]), jnp.zeros((h4,), jnp.result_type(layer["bias"]))]
    return jnp.concatenate(weights + biases)


def unpack_weights(
    flat: Array, input_size: int, hidden_size: int, num_layers: int, bidirectional: bool = False
) -> dict[str, dict[str, Array]]:
    """The inverse of :func:`pack_weights` (``b_ih + b_hh`` folded into ``bias``), through
    ``jax.experimental.rnn.unpack_lstm_weights``."""
    from jax.experimental import rnn

    w_ih, w_hh, b_ih, b_hh = rnn.unpack_lstm_weights(
        flat, input_size, hidden_size, num_layers, bidirectional
    )
    return {
        name: {"kernel_ih": w_ih[k].T, "kernel_hh": w_hh[k].T, "bias": b_ih[k] + b_hh[k]}
        for k, name in enumerate(layer_names(num_layers, bidirectional))
    }


def why_not(
    *,
    platform: str,
    dtype: Any,
    remat: bool | int,
    proj_size: int,
    dropout_in_training: bool,
) -> str | None:
    """Why the one-call cuDNN path cannot run this stack, or None when it can."""
    if platform != "cuda":
        return DECLINES["platform"]
    if jnp.dtype(dtype) != jnp.float32:
        return DECLINES["dtype"]
    if remat:
        return DECLINES["remat"]
    if proj_size:
        return DECLINES["proj_size"]
    if dropout_in_training:
        return DECLINES["dropout"]
    return None


def platform() -> str:
    """``"cuda"`` where the default backend is an NVIDIA GPU with jax's cuDNN RNN built, else
    the backend's name (``"cpu"``, ``"rocm"``, ...)."""
    backend = jax.default_backend()
    if backend != "gpu":
        return backend
    from jax.experimental import rnn

    version = getattr(jax.devices()[0].client, "platform_version", "").lower()
    if "rocm" in version or "hip" in version:
        return "rocm"
    return "cuda" if rnn.gpu_rnn is not None else "gpu without jax's cuDNN RNN"
