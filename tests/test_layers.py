"""StackedLSTM's input checks: every malformed input is a ValueError or TypeError saying why."""

import jax
import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from helpers import BAD_CARRY, BAD_LENGTHS, BAD_X, PROPERTY, _raises_value_or_type_error
from stacklstm import StackedLSTM


@PROPERTY
@given(x=BAD_X, state=st.none() | BAD_CARRY, lengths=st.none() | BAD_LENGTHS)
def test_stacked_lstm_rejects_malformed_input(x, state, lengths):
    stack = StackedLSTM(4, num_layers=2)
    params = stack.init(jax.random.key(0), np.zeros((2, 5, 3), np.float32))
    _raises_value_or_type_error(lambda: stack.apply(params, x, state, seq_lengths=lengths))
    good = np.zeros((2, 5, 3), np.float32)
    if state is not None or lengths is not None:
        _raises_value_or_type_error(lambda: stack.apply(params, good, state, seq_lengths=lengths))
