"""The fast kernel against the slow per-step oracle, with masks and reverse."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import _params
from stacklstm.kernels.lstm import LSTMState, lstm_layer, reverse_padded
from stacklstm.kernels.reference import lstm_layer_reference

# (features, hidden): 4 * features > hidden projects all steps before the scan; otherwise the
# projection is fused into each step. Both paths must give the oracle's numbers.
SIZES = [(3, 5), (2, 16)]


@pytest.mark.parametrize("features, hidden", SIZES)
@pytest.mark.parametrize("reverse", [False, True])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("time", [1, 7, 40])
def test_lstm_layer_matches_reference(reverse, masked, time, features, hidden, kernel):
    rng = np.random.default_rng(time + 2 * reverse + masked)
    batch = 4
    p = _params(rng, features, hidden)
    x = rng.normal(size=(batch, time, features)).astype(np.float32)
    h0 = rng.normal(size=(batch, hidden)).astype(np.float32)
    c0 = rng.normal(size=(batch, hidden)).astype(np.float32)
    lengths = rng.integers(1, time + 1, size=batch) if masked else None
    if masked:
        lengths[0] = time
    y, s = lstm_layer(p, x, LSTMState(h0, c0), lengths, reverse)
    y_ref, h_ref, c_ref = lstm_layer_reference(p, x, h0, c0, lengths, reverse)
    np.testing.assert_allclose(y, y_ref, atol=1e-5)
    np.testing.assert_allclose(s.h, h_ref, atol=1e-5)
    np.testing.assert_allclose(s.c, c_ref, atol=1e-5)
    if masked:  # padded outputs are exactly zero
        for b, n in enumerate(lengths):
            assert np.all(np.asarray(y)[b, n:] == 0)


def test_reverse_padded_reverses_valid_part_only():
    x = jnp.arange(10).reshape(2, 5, 1)
    out = reverse_padded(x, jnp.array([3, 5]))
    np.testing.assert_array_equal(out[..., 0], [[2, 1, 0, 3, 4], [9, 8, 7, 6, 5]])
    np.testing.assert_array_equal(reverse_padded(out, jnp.array([3, 5])), x)


def test_lstm_layer_padding_never_changes_state(kernel):
    rng = np.random.default_rng(0)
    p = _params(rng, 2, 3)
    x = rng.normal(size=(2, 6, 2)).astype(np.float32)
    s0 = LSTMState(jnp.zeros((2, 3)), jnp.zeros((2, 3)))
    lengths = jnp.array([4, 4])
    y1, s1 = lstm_layer(p, x, s0, lengths)
    x2 = x.copy()
    x2[:, 4:] = 1e3  # garbage in padding
    y2, s2 = lstm_layer(p, x2, s0, lengths)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(s1.h, s2.h)
    # ... and equals running on the truncated sequence.
    y3, s3 = lstm_layer(p, x[:, :4], s0)
    np.testing.assert_allclose(s1.h, s3.h, atol=1e-6)
    np.testing.assert_allclose(y1[:, :4], y3, atol=1e-6)


def test_lstm_layer_vmap_matches_batched(kernel):
    rng = np.random.default_rng(2)
    p = _params(rng, 2, 3)
    x = rng.normal(size=(5, 4, 6, 2)).astype(np.float32)  # (groups, batch, time, features)
    s0 = LSTMState(jnp.zeros((4, 3)), jnp.zeros((4, 3)))
    ys, _ = jax.vmap(lambda xx: lstm_layer(p, xx, s0))(x)
    for k in range(5):
        np.testing.assert_allclose(ys[k], lstm_layer(p, x[k], s0)[0], atol=1e-6)


def test_lstm_layer_bfloat16_error_bounded():
    rng = np.random.default_rng(3)
    p = _params(rng, 8, 32, scale=0.2)
    x = rng.normal(size=(8, 50, 8)).astype(np.float32)
    s0 = LSTMState(jnp.zeros((8, 32)), jnp.zeros((8, 32)))
    y32, _ = lstm_layer(p, x, s0)
    y16, s16 = lstm_layer(p, x, s0, dtype=jnp.bfloat16)
    assert y16.dtype == jnp.bfloat16
    assert s16.c.dtype == jnp.float32  # the cell state stays float32
    err = float(jnp.max(jnp.abs(y16.astype(jnp.float32) - y32)))
    assert 0 < err < 0.05, err


@pytest.mark.parametrize(
    "masked, reverse, chunk, hidden",
    [(False, False, True, 5), (True, True, 4, 5), (True, False, 5, 12)],
)
def test_lstm_layer_remat_gives_same_values_and_grads(masked, reverse, chunk, hidden, kernel):
    rng = np.random.default_rng(4)
    p = _params(rng, 3, hidden, scale=0.3)
    x = rng.normal(size=(3, 23, 3)).astype(np.float32)  # 23 steps: chunks do not divide it
    s0 = LSTMState(jnp.asarray(rng.normal(size=(3, hidden)), jnp.float32), jnp.zeros((3, hidden)))
    lengths = np.array([23, 9, 1]) if masked else None

    def loss(p, x, remat):
        y, s = lstm_layer(p, x, s0, lengths, reverse, remat=remat)
        return jnp.sum(jnp.sin(y)) + jnp.sum(s.h * s.c), (y, s)

    grad = jax.jit(jax.grad(loss, argnums=(0, 1), has_aux=True), static_argnums=2)
    (gp, gx), (y, s) = grad(p, x, False)
    (gp_r, gx_r), (y_r, s_r) = grad(p, x, chunk)
    np.testing.assert_allclose(y_r, y, atol=1e-6)
    np.testing.assert_allclose(s_r.c, s.c, atol=1e-6)
    np.testing.assert_allclose(gx_r, gx, atol=1e-5)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5), gp_r, gp)


def _lowered_text(p, x, s0):
    return jax.jit(lambda p, x: lstm_layer(p, x, s0)[0]).lower(p, x).as_text()


def test_native_kernel_is_built_and_taken_for_float32_on_cpu(monkeypatch):
    """On x86-64 Linux the package's build makes the CPU kernel; float32 on the CPU uses it,
    ``STACKLSTM_KERNEL=xla``, bfloat16 and float64 use the scan."""
    import platform
    import sys

    from stacklstm.kernels import native

    if sys.platform != "linux" or platform.machine() != "x86_64":
        pytest.skip("the CPU kernel is built on x86-64 Linux only")
    assert native.available()
    rng = np.random.default_rng(5)
    p = _params(rng, 2, 8)
    x = rng.normal(size=(3, 4, 2)).astype(np.float32)
    s0 = LSTMState(jnp.zeros((3, 8)), jnp.zeros((3, 8)))
    monkeypatch.delenv("STACKLSTM_KERNEL", raising=False)
    assert "stacklstm_lstm_forward" in _lowered_text(p, x, s0)
    monkeypatch.setenv("STACKLSTM_KERNEL", "xla")
    assert "stacklstm_lstm_forward" not in _lowered_text(p, x, s0)
    monkeypatch.delenv("STACKLSTM_KERNEL")
    text = jax.jit(lambda p, x: lstm_layer(p, x, s0, dtype=jnp.bfloat16)[0]).lower(p, x).as_text()
    assert "stacklstm_lstm_forward" not in text


@pytest.mark.parametrize(
    "batch, time, features, hidden", [(1, 1, 1, 1), (2, 3, 0, 4), (5, 60, 40, 33)]
)
def test_native_kernel_matches_scan_values_and_grads(batch, time, features, hidden, monkeypatch):
    """Edge sizes (one unit, zero features, odd hidden, many steps) and a jitted train-style
    gradient: the CPU kernel and the scan give the same numbers."""
    from stacklstm.kernels import native

    if not native.available():
        pytest.skip("the compiled CPU kernel is not built on this platform")
    rng = np.random.default_rng(batch + time)
    p = _params(rng, features, hidden, scale=0.4)
    x = rng.normal(size=(batch, time, features)).astype(np.float32)
    s0 = LSTMState(*(jnp.asarray(rng.normal(size=(batch, hidden)), jnp.float32) for _ in "hc"))
    lengths = np.maximum(1, time - np.arange(batch)) if batch > 1 else None

    def loss(p, x, s0):
        y, s = lstm_layer(p, x, s0, lengths)
        return jnp.sum(jnp.sin(3 * y)) + jnp.sum(s.h * s.c), y

    results = {}
    for impl in ("native", "xla"):
        monkeypatch.setenv("STACKLSTM_KERNEL", impl)
        jax.clear_caches()
        results[impl] = jax.jit(jax.grad(loss, argnums=(0, 1, 2), has_aux=True))(p, x, s0)
    jax.clear_caches()
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-5),
        results["native"],
        results["xla"],
    )


def test_unknown_kernel_choice_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("STACKLSTM_KERNEL", "XLA")
    p = _params(np.random.default_rng(6), 2, 3)
    s0 = LSTMState(jnp.zeros((1, 3)), jnp.zeros((1, 3)))
    with pytest.raises(
        ValueError, match="STACKLSTM_KERNEL must be 'auto', 'native', 'cudnn' or 'xla'"
    ):
        lstm_layer(p, np.ones((1, 2, 2), np.float32), s0)
