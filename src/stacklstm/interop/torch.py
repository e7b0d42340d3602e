"""``torch.nn.LSTM`` <-> ``StackedLSTM`` parameters. torch is imported inside the functions.

The mapping, per layer ``l`` and direction suffix ``s`` (``""`` or ``"_reverse"``)::

    weight_ih_l{l}{s}  (4H, in)  ->  layer_{l}{s}/kernel_ih  (in, 4H)   transposed
    weight_hh_l{l}{s}  (4H, H)   ->  layer_{l}{s}/kernel_hh  (H, 4H)    transposed
    bias_ih_l{l}{s} + bias_hh_l{l}{s}  ->  layer_{l}{s}/bias  (4H,)    folded
    weight_hr_l{l}{s}  (P, H)   ->  layer_{l}{s}/kernel_hr  (H, P)    transposed, with proj_size P

With ``proj_size`` P > 0, ``weight_hh`` is ``(4H, P)`` (``kernel_hh`` ``(P, 4H)``) and the
layers after the first take ``D*P`` input features. Both use the gate order i, f, g, o, so no
reordering is needed.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import numpy as np

_KEY = re.compile(r"^(weight_ih|weight_hh|bias_ih|bias_hh|weight_hr)_l(\d+)(_reverse)?$")


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):  # a torch tensor
        value = value.detach().cpu().numpy()
    return np.asarray(value)


def from_torch(module_or_state_dict: Any) -> dict[str, dict[str, np.ndarray]]:
    """Converts a ``torch.nn.LSTM`` (or its ``state_dict``) to ``StackedLSTM`` params.

    Layers, directions and sizes are read from the keys; every key must be understood and
    every shape must agree, otherwise a ``ValueError`` names the offending key. ``proj_size > 0``
    (``weight_hr_l{k}``) converts to ``kernel_hr``; ``bias=False`` modules convert to zero
    biases.

    Args:
        module_or_state_dict: an ``nn.LSTM`` (``batch_first`` does not matter for the
            weights) or a mapping of its parameter names to tensors/arrays.

    Returns:
        ``{"layer_0": {"kernel_ih", "kernel_hh", "bias"}, ...}`` (plus ``"kernel_hr"`` with a
        projection) of float numpy arrays; use it as ``{"params": tree}`` for
        ``StackedLSTM.apply`` (``proj_size`` as torch's), as ``params["lstm"]`` of an
        ``LSTMModel``, or load it into the NNX modules (``stacklstm.nnx.load_linen_params``).

    Example:
        >>> import torch
        >>> t = torch.nn.LSTM(3, 8, num_layers=2, batch_first=True)
        >>> params = from_torch(t)
        >>> sorted(params), params["layer_1"]["kernel_ih"].shape
        (['layer_0', 'layer_1'], (8, 32))
        >>> params = from_torch(torch.nn.LSTM(3, 8, proj_size=2, batch_first=True))
        >>> params["layer_0"]["kernel_hh"].shape, params["layer_0"]["kernel_hr"].shape
        ((2, 32), (8, 2))
    """
    if hasattr(module_or_state_dict, "state_dict"):
        state = module_or_state_dict.state_dict()
    elif isinstance(module_or_state_dict, Mapping):
        state = module_or_state_dict
    else:
        raise TypeError(
            "from_torch expects a torch.nn.LSTM or its state_dict; got "
            f"{type(module_or_state_dict).__name__}"
        )
    arrays = {}
    for key, value in state.items():
        m = _KEY.match(key)
        if m is None:
            raise ValueError(
                f"from_torch: unexpected key {key!r}; expected weight_ih_l{{k}}, weight_hh_l{{k}}, "
                "bias_ih_l{k}, bias_hh_l{k} (optionally with _reverse)"
            )
        arrays[key] = _to_numpy(value)
    if not arrays:
        raise ValueError("from_torch: the state_dict is empty")

    layers = sorted({int(_KEY.match(k).group(2)) for k in arrays})
    num_layers = layers[-1] + 1
    bidirectional = any(k.endswith("_reverse") for k in arrays)
    has_bias = any(k.startswith("bias") for k in arrays)
    has_proj = any(k.startswith("weight_hr") for k in arrays)
    suffixes = ("", "_reverse") if bidirectional else ("",)
    names = ("weight_ih", "weight_hh") + (("bias_ih", "bias_hh") if has_bias else ())
    names += ("weight_hr",) if has_proj else ()
    expected = {f"{n}_l{layer}{s}" for layer in range(num_layers) for s in suffixes for n in names}
    if set(arrays) != expected:
        missing, extra = sorted(expected - set(arrays)), sorted(set(arrays) - expected)
        raise ValueError(
            f"from_torch: keys do not form an nn.LSTM with {num_layers} layer(s), "
            f"bidirectional={bidirectional}: missing {missing}, unexpected {extra}"
        )

    if has_proj:  # weight_hr_l0 (P, H) gives both sizes
        w_hr0 = arrays["weight_hr_l0"]
        if w_hr0.ndim != 2 or min(w_hr0.shape) < 1:
            raise ValueError(
                f"from_torch: weight_hr_l0 must be (proj_size, hidden); got {w_hr0.shape}"
            )
        proj, hidden = w_hr0.shape
        h_size = proj
    else:
        hidden = h_size = arrays["weight_hh_l0"].shape[1]
    d = len(suffixes)
    params = {}
    for layer in range(num_layers):
        for s in suffixes:
            w_ih, w_hh = arrays[f"weight_ih_l{layer}{s}"], arrays[f"weight_hh_l{layer}{s}"]
            in_features = w_ih.shape[1] if w_ih.ndim == 2 else -1
            if layer > 0 and in_features != d * h_size:
                raise ValueError(
                    f"from_torch: weight_ih_l{layer}{s} must be ({4 * hidden}, {d * h_size}); "
                    f"got {w_ih.shape}"
                )
            shapes = {
                f"weight_ih_l{layer}{s}": (w_ih.shape, (4 * hidden, in_features)),
                f"weight_hh_l{layer}{s}": (w_hh.shape, (4 * hidden, h_size)),
            }
            if has_proj:
                w_hr = arrays[f"weight_hr_l{layer}{s}"]
                shapes[f"weight_hr_l{layer}{s}"] = (w_hr.shape, (h_size, hidden))
            if has_bias:
                b_ih, b_hh = arrays[f"bias_ih_l{layer}{s}"], arrays[f"bias_hh_l{layer}{s}"]
                shapes[f"bias_ih_l{layer}{s}"] = (b_ih.shape, (4 * hidden,))
                shapes[f"bias_hh_l{layer}{s}"] = (b_hh.shape, (4 * hidden,))
            for key, (got, want) in shapes.items():
                if got != want:
                    raise ValueError(f"from_torch: {key} must have shape {want}; got {got}")
            bias = b_ih + b_hh if has_bias else np.zeros(4 * hidden, w_hh.dtype)
            params[f"layer_{layer}{s}"] = {
                "kernel_ih": np.ascontiguousarray(w_ih.T),
                "kernel_hh": np.ascontiguousarray(w_hh.T),
                "bias": bias,
            }
            if has_proj:
                params[f"layer_{layer}{s}"]["kernel_hr"] = np.ascontiguousarray(w_hr.T)
    return params


def to_torch(params: Mapping[str, Any]) -> dict[str, Any]:
    """Converts ``StackedLSTM`` params to a ``state_dict`` for ``torch.nn.LSTM``.

    Load it with ``nn.LSTM(in, hidden, num_layers, batch_first=True, bidirectional=...,
    proj_size=...).load_state_dict(sd)``. The folded bias goes to ``bias_ih``; ``bias_hh`` is
    zero (the sum, which is all the LSTM uses, is the same).

    Args:
        params: the ``StackedLSTM`` tree (``layer_{l}[_reverse]`` -> ``kernel_ih``,
            ``kernel_hh``, ``bias``, and ``kernel_hr`` in every layer or in none); an outer
            ``{"params": ...}`` is accepted too.

    Returns:
        An ordered ``dict`` of name -> ``torch.Tensor`` in ``nn.LSTM``'s key order.
    """
    import torch

    if "params" in params and len(params) == 1:
        params = params["params"]
    layer_key = re.compile(r"^layer_(\d+)(_reverse)?$")
    for key in params:
        if layer_key.match(key) is None:
            raise ValueError(f"to_torch: unexpected key {key!r}; expected layer_{{l}}[_reverse]")
    num_layers = 1 + max(int(layer_key.match(k).group(1)) for k in params)
    suffixes = ("", "_reverse") if any(k.endswith("_reverse") for k in params) else ("",)
    expected = {f"layer_{layer}{s}" for layer in range(num_layers) for s in suffixes}
    if set(params) != expected:
        raise ValueError(f"to_torch: expected layers {sorted(expected)}; got {sorted(params)}")
    has_proj = "kernel_hr" in params["layer_0"]
    names = {"kernel_ih", "kernel_hh", "bias"} | ({"kernel_hr"} if has_proj else set())
    state = {}
    for layer in range(num_layers):
        for s in suffixes:
            p = params[f"layer_{layer}{s}"]
            if set(p) != names:
                raise ValueError(
                    f"to_torch: layer_{layer}{s} must hold {', '.join(sorted(names))} (as "
                    f"layer_0 does); got {sorted(p)}"
                )
            k_ih, k_hh, b = (np.array(p[k]) for k in ("kernel_ih", "kernel_hh", "bias"))
            hidden = b.shape[0] // 4 if b.ndim == 1 else -1
            h_size = hidden
            if has_proj:
                k_hr = np.array(p["kernel_hr"])
                if k_hr.ndim != 2 or k_hr.shape[0] != hidden:
                    raise ValueError(
                        f"to_torch: layer_{layer}{s}/kernel_hr must be (hidden, proj_size) = "
                        f"({hidden}, P); got {k_hr.shape}"
                    )
                h_size = k_hr.shape[1]
            if k_hh.shape != (h_size, 4 * hidden) or k_ih.ndim != 2 or k_ih.shape[1] != 4 * hidden:
                raise ValueError(
                    f"to_torch: layer_{layer}{s} must have kernel_ih (in, {4 * hidden}) and "
                    f"kernel_hh ({h_size}, {4 * hidden}) for bias {b.shape}; got {k_ih.shape} "
                    f"and {k_hh.shape}"
                )
            bias = torch.from_numpy(np.array(b, np.float32))
            state[f"weight_ih_l{layer}{s}"] = torch.from_numpy(k_ih.T.copy())
            state[f"weight_hh_l{layer}{s}"] = torch.from_numpy(k_hh.T.copy())
            state[f"bias_ih_l{layer}{s}"] = bias
            state[f"bias_hh_l{layer}{s}"] = torch.zeros_like(bias)
            if has_proj:
                state[f"weight_hr_l{layer}{s}"] = torch.from_numpy(k_hr.T.copy())
    return state
