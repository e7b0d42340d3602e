"""Flax cell weight conversion: wrong keys and projected layers refused."""

import jax
import numpy as np
import pytest

from stacklstm import StackedLSTM
from stacklstm.interop import from_flax_cell, to_flax_cell


def test_from_flax_cell_rejects_wrong_keys():
    with pytest.raises(ValueError, match="expected keys"):
        from_flax_cell({"i": {"kernel": np.zeros((2, 8))}})


def test_to_flax_cell_refuses_a_projected_layer():
    params = StackedLSTM(6, proj_size=2).init(jax.random.key(0), np.ones((1, 3, 2)))["params"]
    with pytest.raises(ValueError, match=r"kernel_hr.*flax's LSTM cells have no projection"):
        to_flax_cell(params["layer_0"])
