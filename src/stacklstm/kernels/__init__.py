"""LSTM kernels in JAX (no Flax): the pure-JAX scan, on the CPU the compiled kernel and on a
CUDA GPU the one-call cuDNN path.

``info()`` says which runs and why; ``use("xla")`` traces the portable path (for
``jax.export``, say).
"""

from .dispatch import info as info
from .lstm import LSTMLayerParams as LSTMLayerParams
from .lstm import LSTMState as LSTMState
from .lstm import lstm_layer as lstm_layer
from .lstm import reverse_padded as reverse_padded
from .native import KernelInfo as KernelInfo
from .native import use as use
