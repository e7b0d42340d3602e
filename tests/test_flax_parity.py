"""StackedLSTM against flax's own nn.RNN(nn.LSTMCell / nn.OptimizedLSTMCell)."""

import flax.linen as nn
import jax
import numpy as np
import pytest

from stacklstm import LSTMState, StackedLSTM
from stacklstm.interop import from_flax_cell, to_flax_cell


@pytest.mark.parametrize("cell_type", [nn.LSTMCell, nn.OptimizedLSTMCell])
def test_stacked_lstm_matches_flax_rnn(cell_type):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(3, 8, 4)).astype(np.float32)
    lengths = np.array([8, 5, 2])
    rnn0, rnn1 = nn.RNN(cell_type(6)), nn.RNN(cell_type(6))
    p0 = rnn0.init(jax.random.key(0), x)["params"]
    p1 = rnn1.init(jax.random.key(1), np.zeros((3, 8, 6), np.float32))["params"]
    h0 = rng.normal(size=(3, 6)).astype(np.float32)
    c0 = rng.normal(size=(3, 6)).astype(np.float32)
    # flax's carry is (c, h); LSTMState is (h, c).
    (c_f, h_f), y0 = rnn0.apply(
        {"params": p0}, x, initial_carry=(c0, h0), seq_lengths=lengths, return_carry=True
    )
    y1 = rnn1.apply({"params": p1}, y0, seq_lengths=lengths)

    params = {"layer_0": from_flax_cell(p0["cell"]), "layer_1": from_flax_cell(p1["cell"])}
    zeros = np.zeros((3, 6), np.float32)
    y, state = StackedLSTM(6, 2).apply(
        {"params": params}, x, (LSTMState(h0, c0), LSTMState(zeros, zeros)), seq_lengths=lengths
    )
    for b, n in enumerate(lengths):  # flax leaves padded outputs unspecified; ours are 0
        np.testing.assert_allclose(y[b, :n], y1[b, :n], atol=1e-5)
        assert np.all(np.asarray(y)[b, n:] == 0)
    np.testing.assert_allclose(state[0].h, h_f, atol=1e-5)
    np.testing.assert_allclose(state[0].c, c_f, atol=1e-5)
    back = to_flax_cell(params["layer_0"])
    jax.tree.map(np.testing.assert_array_equal, back, jax.tree.map(np.asarray, dict(p0["cell"])))
