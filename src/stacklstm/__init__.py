"""stacklstm: stacked LSTMs for JAX, with the same numbers as ``torch.nn.LSTM``.

The public API is re-exported here; everything else is private to the package. Importing
``stacklstm`` loads nothing heavy: jax and the Flax modules load on first use of a name
(PEP 562), and the subpackages (``stacklstm.train``, ``stacklstm.data``,
``stacklstm.interop``, ...) when they are imported, so ``stacklstm --help`` and a
command-line error answer before jax is imported, and a serving path pays for nothing it
does not use.

Example:
    >>> import stacklstm
    >>> stacklstm.LSTMModel(lstm_hidden_size=8).num_states
    2
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from . import _startup  # noqa: F401  (first: a Ctrl-C while jax loads is one line)

if TYPE_CHECKING:  # the names __getattr__ loads on first use
    from .estimator import LSTMForecaster as LSTMForecaster
    from .forecaster import Forecaster as Forecaster
    from .hybrid import ESHybrid as ESHybrid
    from .kernels.lstm import LSTMLayerParams as LSTMLayerParams
    from .kernels.lstm import LSTMState as LSTMState
    from .kernels.lstm import lstm_layer as lstm_layer
    from .layers import LSTMLayer as LSTMLayer
    from .layers import StackedLSTM as StackedLSTM
    from .layers import lstm_bias_init as lstm_bias_init
    from .model import LSTMModel as LSTMModel
    from .model import MLPHead as MLPHead

__version__ = "0.1.0"

_LAZY = {
    "LSTMLayerParams": "kernels.lstm",
    "LSTMState": "kernels.lstm",
    "lstm_layer": "kernels.lstm",
    "ESHybrid": "hybrid",
    "Forecaster": "forecaster",
    "LSTMForecaster": "estimator",
    "LSTMLayer": "layers",
    "StackedLSTM": "layers",
    "lstm_bias_init": "layers",
    "LSTMModel": "model",
    "MLPHead": "model",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        value = getattr(importlib.import_module(f".{_LAZY[name]}", __name__), name)
        globals()[name] = value  # once loaded, a plain attribute
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_LAZY])


__all__ = [
    "ESHybrid",
    "Forecaster",
    "LSTMForecaster",
    "LSTMLayer",
    "LSTMLayerParams",
    "LSTMModel",
    "LSTMState",
    "MLPHead",
    "StackedLSTM",
    "lstm_bias_init",
    "lstm_layer",
]
