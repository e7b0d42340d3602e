"""On a CUDA GPU: StackedLSTM's one-call cuDNN path against the portable path (skipped
elsewhere; benchmarks/gpu_check.sh runs it)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stacklstm import LSTMModel, StackedLSTM, kernels
from stacklstm.kernels import cudnn

pytestmark = pytest.mark.skipif(jax.default_backend() != "gpu", reason="needs a CUDA GPU (cuDNN)")


def test_the_real_cudnn_call_passes_its_self_check():
    verdict = cudnn.self_check()
    assert verdict.ok, verdict.reason
    info = kernels.info()
    assert info.path == "cudnn" and "passed its self-check" in info.reason, info


@pytest.mark.parametrize(("layers", "bidirectional", "padded"), [(1, False, False),
                                                                  (2, True, True),
                                                                  (3, False, True)])  # fmt: skip
def test_cudnn_path_equals_the_portable_path(layers, bidirectional, padded):
    assert kernels.info().path == "cudnn", kernels.info()
    lstm = StackedLSTM(32, layers, bidirectional=bidirectional)
    rng = np.random.default_rng(layers)
    x = jnp.asarray(rng.normal(size=(8, 20, 5)), jnp.float32)
    seq = jnp.asarray(rng.integers(1, 21, size=8)) if padded else None
    params = lstm.init(jax.random.key(0), x)

    def loss(p, x):
        y, state = lstm.apply(p, x, seq_lengths=seq)
        return jnp.sum(jnp.sin(y)) + sum(jnp.sum(s.h * s.c) for s in state)

    def run():
        y, state = jax.jit(lambda p, x: lstm.apply(p, x, seq_lengths=seq))(params, x)
        return y, state, jax.jit(jax.grad(loss, argnums=(0, 1)))(params, x)

    # Both paths at full float32 (by default both may use TF32 on the GPU, each its own way).
    with jax.default_matmul_precision("highest"):
        got = run()
        with kernels.use("xla"):
            want = run()
    np.testing.assert_allclose(got[0], want[0], atol=1e-5)
    jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, atol=1e-5), got[1], want[1])
    jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, atol=1e-4), got[2], want[2])


def test_model_trains_through_the_cudnn_path():
    model = LSTMModel(lstm_hidden_size=32, num_lstm_layers=2)
    x = jnp.ones((4, 10, 3))
    params = model.init(jax.random.key(0), x)
    grads = jax.jit(jax.grad(lambda p: jnp.sum(model.apply(p, x) ** 2)))(params)
    assert all(np.isfinite(g).all() for g in jax.tree.leaves(grads))
