"""stacklstm: stacked LSTMs for JAX, with the same numbers as ``torch.nn.LSTM``.

The public API is re-exported here; everything else is private to the package.
"""

from .kernels.lstm import LSTMLayerParams as LSTMLayerParams
from .kernels.lstm import LSTMState as LSTMState
from .kernels.lstm import lstm_layer as lstm_layer
from .layers import LSTMLayer as LSTMLayer
from .layers import StackedLSTM as StackedLSTM
from .layers import lstm_bias_init as lstm_bias_init
from .model import LSTMModel as LSTMModel
from .model import MLPHead as MLPHead

__version__ = "0.1.0"
