"""Weight conversion between stacklstm and PyTorch / flax's own LSTM cells."""

from .flax import from_flax_cell as from_flax_cell
from .flax import to_flax_cell as to_flax_cell
from .torch import from_torch as from_torch
from .torch import to_torch as to_torch
