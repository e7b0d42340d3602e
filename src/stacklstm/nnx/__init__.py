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

from ._convert import from_linen as from_linen
from ._convert import load_linen_params as load_linen_params
from ._convert import to_linen_params as to_linen_params
from ._layers import LSTMLayer as LSTMLayer
from ._layers import StackedLSTM as StackedLSTM
from ._model import LSTMModel as LSTMModel
from ._model import MLPHead as MLPHead

__all__ = [
    "LSTMLayer",
    "LSTMModel",
    "MLPHead",
    "StackedLSTM",
    "from_linen",
    "load_linen_params",
    "to_linen_params",
]
