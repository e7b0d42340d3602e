"""The one-call cuDNN path, held on the CPU to jax.experimental.rnn's own reference.

The packing is checked against ``unpack_lstm_weights``; the whole call (packing, state order,
padding, final states) against the layer-by-layer path, with ``lstm_ref`` standing in for
cuDNN: the same packed weights and the same signature as ``jax.experimental.rnn.lstm``.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.experimental import rnn

from stacklstm import LSTMState, StackedLSTM
from stacklstm.kernels import cudnn


def _stack(hidden, layers, bidirectional, features, seed=0):
    lstm = StackedLSTM(hidden, layers, bidirectional=bidirectional)
    params = lstm.init(jax.random.key(seed), jnp.ones((1, 3, features)))["params"]
    # a non-trivial bias, so that b_ih / b_hh cannot be mixed up unnoticed
    params = jax.tree.map(lambda a: a + 0.1 * jnp.arange(a.size).reshape(a.shape) / a.size, params)
    return lstm, params


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


CASES = [
    # layers, bidirectional, lengths (None: full rows), with an initial state
    (1, False, None, False),
    (1, True, [7, 3, 5], True),
    (2, False, [7, 1, 4], True),
    (2, True, None, True),
    (3, True, [2, 7, 6], False),
]


@pytest.mark.parametrize(("layers", "bidirectional", "lengths", "with_state"), CASES)
def test_one_call_equals_the_layer_by_layer_path(layers, bidirectional, lengths, with_state):
    hidden, features, batch, time = 6, 3, 3, 7
    lstm, params = _stack(hidden, layers, bidirectional, features, seed=layers)
    rng = np.random.default_rng(layers)
    x = jnp.asarray(rng.normal(size=(batch, time, features)), jnp.float32)
    seq = None if lengths is None else jnp.asarray(lengths)
    n_states = layers * (2 if bidirectional else 1)
    state = None
    if with_state:
        state = tuple(
            LSTMState(*(jnp.asarray(rng.normal(size=(batch, hidden)), jnp.float32) for _ in "hc"))
            for _ in range(n_states)
        )
    want_y, want_state = lstm.apply({"params": params}, x, state, seq_lengths=seq)
    start = state or lstm.initialize_carry(batch)
    got_y, got_state = jax.jit(
        lambda p, x, s, q: cudnn.run_stack(
            p, x, s, q, hidden_size=hidden, num_layers=layers, bidirectional=bidirectional,
            lstm=cudnn.reference_lstm,
        )
    )(params, x, start, seq)  # fmt: skip
    np.testing.assert_allclose(got_y, want_y, atol=1e-5)
    if lengths is not None:  # padded steps are exactly zero
        for row, n in enumerate(lengths):
            assert not np.asarray(got_y[row, n:]).any()
    assert len(got_state) == n_states
    for got, want in zip(got_state, want_state, strict=True):
        np.testing.assert_allclose(got.h, want.h, atol=1e-5)
        np.testing.assert_allclose(got.c, want.c, atol=1e-5)


def test_one_call_gradients_equal_the_layer_by_layer_path():
    hidden, features, layers = 5, 2, 2
    lstm, params = _stack(hidden, layers, True, features, seed=3)
    x = jnp.asarray(np.random.default_rng(3).normal(size=(3, 6, features)), jnp.float32)
    seq = jnp.asarray([6, 2, 4])

    def loss_default(p, x):
        y, state = lstm.apply({"params": p}, x, seq_lengths=seq)
        return jnp.sum(y**2) + sum(jnp.sum(s.c) for s in state)

    def loss_one_call(p, x):
        y, state = cudnn.run_stack(
            p, x, lstm.initialize_carry(3), seq, hidden_size=hidden, num_layers=layers,
            bidirectional=True, lstm=cudnn.reference_lstm,
        )  # fmt: skip
        return jnp.sum(y**2) + sum(jnp.sum(s.c) for s in state)

    want = jax.jit(jax.grad(loss_default, argnums=(0, 1)))(params, x)
    got = jax.jit(jax.grad(loss_one_call, argnums=(0, 1)))(params, x)
    jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, atol=1e-4), got, want)


def test_why_not_names_each_reason():
    ok = dict(platform="gpu", dtype=jnp.float32, remat=False, proj_size=0,
              dropout_in_training=False)  # fmt: skip
    assert cudnn.why_not(**ok) is None
    for change, reason in (
        ({"platform": "cpu"}, "platform"), ({"dtype": jnp.bfloat16}, "dtype"),
        ({"remat": True}, "remat"), ({"proj_size": 2}, "proj_size"),
        ({"dropout_in_training": True}, "dropout"),
    ):  # fmt: skip
        assert cudnn.why_not(**{**ok, **change}) == cudnn.DECLINES[reason]
