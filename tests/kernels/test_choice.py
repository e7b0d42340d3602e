"""kernels.use: the choice of path, part of the jit cache key; unknown choices refused."""

import jax
import numpy as np
import pytest

from helpers import TARGET, _case, needs_kernel
from stacklstm import kernels
from stacklstm.kernels.lstm import lstm_layer


@needs_kernel
def test_use_is_part_of_the_jit_cache_key(monkeypatch):
    """Switching with use() re-traces a function already traced, without clearing caches."""
    monkeypatch.delenv("STACKLSTM_KERNEL", raising=False)
    p, x, s0 = _case(0, 2, 3, 2, 4)
    f = jax.jit(lambda p, x: lstm_layer(p, x, s0)[0])
    assert TARGET in f.lower(p, x).as_text()
    with kernels.use("xla"):
        assert TARGET not in f.lower(p, x).as_text()
        y_xla = f(p, x)
    y_native = f(p, x)
    np.testing.assert_allclose(y_native, y_xla, atol=1e-6)
    assert TARGET in f.lower(p, x).as_text()


def test_use_rejects_unknown_choice():
    with pytest.raises(ValueError, match="'auto', 'native' or 'xla'; got 'XLA'"):
        kernels.use("XLA")
