"""cuDNN's weight layout: packing round trips, what it cannot hold, why the path declines."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import rnn

from helpers import _stack
from stacklstm import StackedLSTM
from stacklstm.kernels import cudnn


@pytest.mark.parametrize(("layers", "bidirectional"), [(1, False), (2, True), (3, False)])
def test_packing_is_cudnns_layout_and_round_trips(layers, bidirectional):
    hidden, features = 5, 3
    _, params = _stack(hidden, layers, bidirectional, features)
    flat = cudnn.pack_weights(params, features, hidden, layers, bidirectional)
    assert flat.shape == (rnn.get_num_params_in_lstm(features, hidden, layers, bidirectional),)
    w_ih, w_hh, b_ih, b_hh = rnn.unpack_lstm_weights(flat, features, hidden, layers, bidirectional)
    names = [
        f"layer_{n}{s}"
        for n in range(layers)
        for s in (("", "_reverse") if bidirectional else ("",))
    ]
    for k, name in enumerate(names):
        np.testing.assert_array_equal(w_ih[k], params[name]["kernel_ih"].T)
        np.testing.assert_array_equal(w_hh[k], params[name]["kernel_hh"].T)
        np.testing.assert_array_equal(b_ih[k], params[name]["bias"])
        np.testing.assert_array_equal(b_hh[k], np.zeros_like(b_hh[k]))
    back = cudnn.unpack_weights(flat, features, hidden, layers, bidirectional)
    jax.tree.map(np.testing.assert_array_equal, back, jax.tree.map(np.asarray, params))


def test_packing_refuses_what_cudnn_cannot_hold():
    lstm = StackedLSTM(6, proj_size=2)
    params = lstm.init(jax.random.key(0), jnp.ones((1, 3, 2)))["params"]
    with pytest.raises(ValueError, match="projection"):
        cudnn.pack_weights(params, 2, 6, 1)
    _, params = _stack(4, 1, False, 2)
    with pytest.raises(ValueError, match=r"layer_0/kernel_ih must be \(3, 16\)"):
        cudnn.pack_weights(params, 3, 4, 1)
    with pytest.raises(ValueError, match="no 'layer_1'"):
        cudnn.pack_weights(params, 2, 4, 2)


def test_why_not_names_each_reason():
    ok = dict(
        platform="cuda", dtype=jnp.float32, remat=False, proj_size=0, dropout_in_training=False
    )
    assert cudnn.why_not(**ok) is None
    for change, reason in (
        ({"platform": "cpu"}, "platform"),
        ({"dtype": jnp.bfloat16}, "dtype"),
        ({"remat": True}, "remat"),
        ({"proj_size": 2}, "proj_size"),
        ({"dropout_in_training": True}, "dropout"),
    ):
        assert cudnn.why_not(**{**ok, **change}) == cudnn.DECLINES[reason]
