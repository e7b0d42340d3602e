"""The exported program's quantiles in JAX: Student's t by bisection against scipy, and each
head's quantiles equal to OutputHead.quantiles_at."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import special, stats

from stacklstm.forecasting.export_quantiles import model_quantiles, student_t_ppf
from stacklstm.intervals import OutputHead


def test_student_t_ppf_equals_scipys_stdtrit():
    df = np.array([1.0, 2.0, 2.5, 7.0, 30.0, 300.0])[:, None]
    q = np.array([0.001, 0.025, 0.1, 0.5, 0.8, 0.975, 0.999])[None, :]
    with jax.enable_x64(True):
        got = np.asarray(student_t_ppf(jnp.asarray(df), jnp.asarray(q)))
    want = special.stdtrit(np.broadcast_to(df, (6, 7)), np.broadcast_to(q, (6, 7)))
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    # by hand: df = 1 is Cauchy, tan(pi (q - 1/2)); df = 2 is (2q - 1) sqrt(2 / (4q (1 - q)))
    assert got[0, 4] == pytest.approx(np.tan(np.pi * 0.3), rel=1e-10)
    assert got[1, 2] == pytest.approx(-0.8 * np.sqrt(2 / (4 * 0.1 * 0.9)), rel=1e-10)
    assert (got[:, 3] == 0).all()


@pytest.mark.parametrize("loss", ["normal", "student_t", "quantile"])
def test_model_quantiles_equal_the_heads_own(loss):
    head = OutputHead(loss, (0.1, 0.9)) if loss == "quantile" else OutputHead(loss)
    rng = np.random.default_rng(0)
    raw = rng.normal(size=(3, 2 * head.n_params)).astype(np.float32)  # horizon 2, 1 target
    levels = (0.1, 0.5, 0.9)
    with jax.enable_x64(True):
        got = np.asarray(model_quantiles(head, jnp.asarray(raw), 2, 1, levels))
    np.testing.assert_allclose(got, head.quantiles_at(raw, 2, 1, levels), rtol=1e-6, atol=1e-6)
    if loss == "normal":  # loc + scale * the standard normal's quantile
        p = np.asarray(head.params(raw, 2, 1), np.float64)
        want = p[..., :1] + p[..., 1:2] * stats.norm.ppf(levels)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def test_model_quantiles_refuse_a_point_loss_and_unlearnt_levels():
    with jax.enable_x64(True):
        with pytest.raises(ValueError, match="loss 'mse' gives point forecasts only; use"):
            model_quantiles(OutputHead("mse"), jnp.zeros((1, 1)), 1, 1, (0.5,))
        with pytest.raises(ValueError, match=r"the quantiles \(0.1, 0.5, 0.9\), not \[0.25\]"):
            model_quantiles(OutputHead("quantile", (0.1, 0.9)), jnp.zeros((1, 3)), 1, 1, (0.25,))
