"""The scan's hand-written VJP: reverse-mode gradients checked by finite differences in float64."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import _params
from stacklstm.kernels.lstm import LSTMState, lstm_layer


@pytest.mark.parametrize("features, hidden", [(2, 3), (1, 4)])
def test_lstm_layer_grads_check(features, hidden):
    from jax.test_util import check_grads

    rng = np.random.default_rng(1)
    p = _params(rng, features, hidden)
    x = rng.normal(size=(2, 4, features))
    s0 = (rng.normal(size=(2, hidden)), rng.normal(size=(2, hidden)))
    with jax.enable_x64(True):
        p = jax.tree.map(lambda a: jnp.asarray(a, jnp.float64), p)
        x = jnp.asarray(x, jnp.float64)
        s0 = LSTMState(*(jnp.asarray(a, jnp.float64) for a in s0))

        def f(p, x, s0):
            y, s = lstm_layer(p, x, s0, jnp.array([4, 2]), True)
            return jnp.sum(y**2) + jnp.sum(s.c)

        check_grads(f, (p, x, s0), order=1, modes=["rev"], atol=1e-5, rtol=1e-5)
