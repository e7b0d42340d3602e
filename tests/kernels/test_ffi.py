"""The kernel's portable derivatives: second derivatives equal the pure-JAX path's."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import _both_paths, _case, needs_kernel
from stacklstm.kernels.lstm import lstm_layer


@needs_kernel
@pytest.mark.parametrize("order", ["hessian", "grad_of_grad"])
def test_second_derivatives_match_portable_path(order, monkeypatch):
    """``jax.hessian`` (forward over reverse, no padding) and the gradient of a gradient's norm
    (reverse over reverse, padded and reversed) on the default path equal the pure-JAX path's."""
    monkeypatch.delenv("STACKLSTM_KERNEL", raising=False)
    masked = order == "grad_of_grad"
    p, x, s0 = _case(4, 2, 4, 1, 3)
    lengths = np.array([4, 2]) if masked else None

    def loss(p, x):
        y, s = lstm_layer(p, x, s0, lengths, reverse=masked)
        return jnp.sum(jnp.sin(2 * y)) + jnp.sum(s.h * s.c)

    def derivative():
        if order == "hessian":
            return jax.jit(jax.hessian(loss, argnums=1))(p, x)
        grad_norm = lambda p, x: sum(jnp.sum(g**2) for g in jax.tree.leaves(jax.grad(loss)(p, x)))  # noqa: E731
        return jax.jit(jax.grad(grad_norm, argnums=(0, 1)))(p, x)

    assert "stacklstm_lstm_backward" in jax.jit(jax.grad(loss)).lower(p, x).as_text()
    out = _both_paths(derivative)
    assert max(float(jnp.max(jnp.abs(a))) for a in jax.tree.leaves(out["xla"])) > 0.1
    jax.tree.map(  # float32 rounding relative to sizes up to ~300
        lambda a, b: np.testing.assert_allclose(a, b, atol=2e-5, rtol=1e-5),
        out["native"],
        out["xla"],
    )
