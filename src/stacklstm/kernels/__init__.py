"""Pure-JAX LSTM kernels (no Flax)."""

from .lstm import LSTMLayerParams as LSTMLayerParams
from .lstm import LSTMState as LSTMState
from .lstm import lstm_layer as lstm_layer
from .lstm import reverse_padded as reverse_padded
