"""LSTMP (``proj_size``): the kernel against the per-step oracle, gradients, remat, the CPU
kernel stepping aside, the parameter tree and the argument checks. (Parity with
``torch.nn.LSTM(proj_size=...)`` is in test_torch_parity.py.)"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stacklstm import LSTMState, StackedLSTM, lstm_layer
from stacklstm.kernels.reference import lstm_layer_reference, stacked_lstm_reference


def _params(rng, features, hidden, proj, scale=0.5):
    return {
        "kernel_ih": rng.normal(0, scale, (features, 4 * hidden)).astype(np.float32),
        "kernel_hh": rng.normal(0, scale, (proj, 4 * hidden)).astype(np.float32),
        "bias": rng.normal(0, scale, (4 * hidden,)).astype(np.float32),
        "kernel_hr": rng.normal(0, scale, (hidden, proj)).astype(np.float32),
    }


# (features, hidden, proj): 4 * features > hidden projects the inputs before the scan, else the
# input matmul is fused into each step; both must give the oracle's numbers.
@pytest.mark.parametrize(
    "features, hidden, proj, reverse, masked",
    [
        (3, 5, 2, False, False),
        (3, 5, 2, True, True),
        (2, 16, 5, False, True),
        (2, 16, 5, True, False),
    ],
)
def test_lstm_layer_with_projection_matches_reference(features, hidden, proj, reverse, masked):
    rng = np.random.default_rng(features + 2 * reverse + masked)
    batch, time = 4, 9
    p = _params(rng, features, hidden, proj)
    x = rng.normal(size=(batch, time, features)).astype(np.float32)
    h0 = rng.normal(size=(batch, proj)).astype(np.float32)
    c0 = rng.normal(size=(batch, hidden)).astype(np.float32)
    lengths = np.array([9, 4, 1, 6]) if masked else None
    y, s = lstm_layer(p, x, LSTMState(h0, c0), lengths, reverse)
    y_ref, h_ref, c_ref = lstm_layer_reference(p, x, h0, c0, lengths, reverse)
    assert y.shape == (batch, time, proj) and s.h.shape == (batch, proj)
    assert s.c.shape == (batch, hidden)
    np.testing.assert_allclose(y, y_ref, atol=1e-5, rtol=0)
    np.testing.assert_allclose(s.h, h_ref, atol=1e-5, rtol=0)
    np.testing.assert_allclose(s.c, c_ref, atol=1e-5, rtol=0)
    if masked:  # padded outputs are exactly zero
        for b, n in enumerate(lengths):
            assert np.all(np.asarray(y)[b, n:] == 0)


def test_lstm_layer_with_projection_grads_check():
    from jax.test_util import check_grads

    rng = np.random.default_rng(1)
    p = _params(rng, 2, 3, 2)
    x = rng.normal(size=(2, 4, 2))
    s0 = (rng.normal(size=(2, 2)), rng.normal(size=(2, 3)))
    with jax.enable_x64(True):
        p = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), p)
        x = jnp.asarray(x, jnp.float64)
        s0 = LSTMState(*(jnp.asarray(a, jnp.float64) for a in s0))

        def f(p, x, s0):
            y, s = lstm_layer(p, x, s0, jnp.array([4, 2]), True)
            return jnp.sum(y**2) + jnp.sum(s.c) + jnp.sum(jnp.sin(s.h))

        check_grads(jax.jit(f), (p, x, s0), order=1, modes=["rev"], atol=1e-5, rtol=1e-5)


def test_lstm_layer_with_projection_remat_gives_same_values_and_grads():
    rng = np.random.default_rng(4)
    p = _params(rng, 3, 6, 2, scale=0.3)
    x = rng.normal(size=(3, 23, 3)).astype(np.float32)  # 23 steps: chunks of 4 do not divide
    s0 = LSTMState(jnp.asarray(rng.normal(size=(3, 2)), jnp.float32), jnp.zeros((3, 6)))
    lengths = np.array([23, 9, 1])

    def loss(p, x, remat):
        y, s = lstm_layer(p, x, s0, lengths, True, remat=remat)
        return jnp.sum(jnp.sin(y)) + jnp.sum(s.h) * jnp.sum(s.c), (y, s)

    grad = jax.jit(jax.grad(loss, argnums=(0, 1), has_aux=True), static_argnums=2)
    (gp, gx), (y, s) = grad(p, x, False)
    (gp_r, gx_r), (y_r, s_r) = grad(p, x, 4)
    np.testing.assert_allclose(y_r, y, atol=1e-6)
    np.testing.assert_allclose(s_r.h, s.h, atol=1e-6)
    np.testing.assert_allclose(gx_r, gx, atol=1e-5)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5), gp_r, gp)


def test_native_kernel_steps_aside_for_a_projection(monkeypatch):
    """Asked for the CPU kernel (``STACKLSTM_KERNEL=native``), a projection still runs the
    scan: the custom call is never traced, and the numbers are the oracle's."""
    from stacklstm.kernels import lstm as lstm_module
    from stacklstm.kernels import native

    def refuse(*args, **kwargs):
        raise AssertionError("the CPU kernel was called with a projection")

    monkeypatch.setenv("STACKLSTM_KERNEL", "native")
    monkeypatch.setattr(native, "recurrence", refuse)
    jax.clear_caches()
    rng = np.random.default_rng(5)
    p = _params(rng, 2, 8, 3)
    x = rng.normal(size=(3, 4, 2)).astype(np.float32)
    s0 = LSTMState(jnp.zeros((3, 3)), jnp.zeros((3, 8)))
    text = jax.jit(lambda p, x: lstm_layer(p, x, s0)[0]).lower(p, x).as_text()
    assert "stacklstm_lstm_forward" not in text
    jax.grad(lambda p: jnp.sum(lstm_layer(p, x, s0)[0]))(p)  # the backward pass too
    y_ref, _, _ = lstm_layer_reference(p, x, np.zeros((3, 3)), np.zeros((3, 8)))
    np.testing.assert_allclose(lstm_layer(p, x, s0)[0], y_ref, atol=1e-5)
    assert "projection" in lstm_module.NATIVE_DECLINES_PROJECTION
    jax.clear_caches()


def test_stacked_lstm_with_projection_param_tree_and_reference():
    model = StackedLSTM(6, 2, bidirectional=True, proj_size=4)
    rng = np.random.default_rng(6)
    x = rng.normal(size=(3, 5, 2)).astype(np.float32)
    params = jax.jit(model.init)(jax.random.key(0), x)["params"]
    layer = {"kernel_ih": (2, 24), "kernel_hh": (4, 24), "bias": (24,), "kernel_hr": (6, 4)}
    upper = {**layer, "kernel_ih": (8, 24)}  # D * proj_size = 8 input features
    assert jax.tree.map(jnp.shape, params) == {
        "layer_0": layer,
        "layer_0_reverse": layer,
        "layer_1": upper,
        "layer_1_reverse": upper,
    }
    carry = model.initialize_carry(3)
    assert [(s.h.shape, s.c.shape) for s in carry] == [((3, 4), (3, 6))] * 4
    lengths = np.array([5, 2, 3])
    y, finals = jax.jit(model.apply)({"params": params}, x, seq_lengths=lengths)
    y_ref, finals_ref = stacked_lstm_reference(params, x, None, lengths, 2, True)
    assert y.shape == (3, 5, 8)
    np.testing.assert_allclose(y, y_ref, atol=1e-5, rtol=0)
    for s, (h, c) in zip(finals, finals_ref, strict=True):
        np.testing.assert_allclose(s.h, h, atol=1e-5, rtol=0)
        np.testing.assert_allclose(s.c, c, atol=1e-5, rtol=0)


def test_projection_argument_and_state_errors():
    for bad in (-1, 6, 7, True, 2.0):
        message = r"proj_size must be an integer in \[0, hidden_size=6\)"
        with pytest.raises(ValueError, match=message):
            StackedLSTM(6, proj_size=bad)
    model = StackedLSTM(6, proj_size=2)
    x = np.ones((3, 5, 2), np.float32)
    params = model.init(jax.random.key(0), x)
    wrong_h = (LSTMState(jnp.zeros((3, 6)), jnp.zeros((3, 6))),)
    with pytest.raises(ValueError, match=r"initial_state\[0\]\.h must be \(batch, proj_size\)"):
        model.apply(params, x, wrong_h)
    p = dict(params["params"]["layer_0"])
    with pytest.raises(ValueError, match=r"state\.h must be \(batch, proj_size\) = \(3, 2\)"):
        lstm_layer(p, x, LSTMState(jnp.zeros((3, 6)), jnp.zeros((3, 6))))
    p["kernel_hh"] = jnp.zeros((6, 24))
    with pytest.raises(ValueError, match=r"kernel_hh must be \(proj_size, 4\*hidden\) = \(2, 24\)"):
        lstm_layer(p, x, LSTMState(jnp.zeros((3, 2)), jnp.zeros((3, 6))))
    p["kernel_hr"] = jnp.zeros((6,))
    with pytest.raises(ValueError, match=r"kernel_hr must be \(hidden, proj_size\)"):
        lstm_layer(p, x, LSTMState(jnp.zeros((3, 2)), jnp.zeros((3, 6))))
