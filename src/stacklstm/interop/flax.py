"""flax ``LSTMCell`` / ``OptimizedLSTMCell`` params <-> one ``StackedLSTM`` layer.

Both flax cells store ``ii, if, ig, io`` (input kernels, no bias) and ``hi, hf, hg, ho``
(recurrent kernels with bias). Note that flax's carry is ``(c, h)`` while ``LSTMState`` is
``(h, c)``: swap explicitly when passing states between them.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

_GATES = ("i", "f", "g", "o")


def from_flax_cell(cell_params: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """Converts one flax ``LSTMCell``/``OptimizedLSTMCell`` param tree to a ``layer_{l}`` entry.

    Args:
        cell_params: the cell's params (``{"ii": {"kernel"}, ..., "hi": {"kernel", "bias"},
            ...}``); an outer ``{"params": ...}`` is accepted too.

    Returns:
        ``{"kernel_ih" (in, 4H), "kernel_hh" (H, 4H), "bias" (4H,)}``.
    """
    if "params" in cell_params and len(cell_params) == 1:
        cell_params = cell_params["params"]
    expected = {f"i{g}" for g in _GATES} | {f"h{g}" for g in _GATES}
    if set(cell_params) != expected:
        raise ValueError(
            f"from_flax_cell: expected keys {sorted(expected)}; got {sorted(cell_params)}"
        )
    for g in _GATES:
        if set(cell_params[f"i{g}"]) != {"kernel"} or set(cell_params[f"h{g}"]) != {
            "kernel",
            "bias",
        }:
            raise ValueError(
                f"from_flax_cell: i{g} must hold 'kernel' and h{g} 'kernel' and 'bias'; got "
                f"{sorted(cell_params[f'i{g}'])} and {sorted(cell_params[f'h{g}'])}"
            )
    kernel_ih = np.concatenate([np.asarray(cell_params[f"i{g}"]["kernel"]) for g in _GATES], -1)
    kernel_hh = np.concatenate([np.asarray(cell_params[f"h{g}"]["kernel"]) for g in _GATES], -1)
    bias = np.concatenate([np.asarray(cell_params[f"h{g}"]["bias"]) for g in _GATES], -1)
    hidden = kernel_hh.shape[0]
    if kernel_hh.shape != (hidden, 4 * hidden) or kernel_ih.shape[-1] != 4 * hidden:
        raise ValueError(
            f"from_flax_cell: inconsistent shapes kernel_ih {kernel_ih.shape}, "
            f"kernel_hh {kernel_hh.shape}"
        )
    return {"kernel_ih": kernel_ih, "kernel_hh": kernel_hh, "bias": bias}


def to_flax_cell(layer_params: Mapping[str, Any]) -> dict[str, dict[str, np.ndarray]]:
    """The inverse of :func:`from_flax_cell`: one ``layer_{l}`` entry -> flax cell params.

    Raises:
        ValueError: The layer has keys other than ``kernel_ih``, ``kernel_hh`` and ``bias``
            (a projected layer's ``kernel_hr``: flax's cells have no projection).
    """
    expected = {"kernel_ih", "kernel_hh", "bias"}
    if set(layer_params) != expected:
        extra = sorted(set(layer_params) - expected)
        hint = " (flax's LSTM cells have no projection: proj_size must be 0)" if extra else ""
        raise ValueError(
            f"to_flax_cell: expected keys {sorted(expected)}; got {sorted(layer_params)}{hint}"
        )
    kernel_ih = np.asarray(layer_params["kernel_ih"])
    kernel_hh = np.asarray(layer_params["kernel_hh"])
    bias = np.asarray(layer_params["bias"])
    ki, kh, b = (np.split(a, 4, axis=-1) for a in (kernel_ih, kernel_hh, bias))
    out: dict[str, dict[str, np.ndarray]] = {}
    for n, g in enumerate(_GATES):
        out[f"i{g}"] = {"kernel": ki[n]}
        out[f"h{g}"] = {"kernel": kh[n], "bias": b[n]}
    return out
