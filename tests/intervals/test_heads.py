"""The output heads: interval levels and quantiles, their losses against hand-computed
values and scipy, and quantile averaging."""

import math

import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from stacklstm.config import TrainConfig
from stacklstm.intervals import (
    Forecast,
    OutputHead,
    average_quantiles,
    interval_pairs,
    levels_to_quantiles,
    non_crossing,
    normal_nll,
    pinball,
    pinball_loss,
    report_quantiles,
    student_t_nll,
)
from stacklstm.train.step import forecast_loss


def softplus(x):
    return math.log1p(math.exp(x))


def test_interval_levels_map_to_symmetric_quantiles_and_back():
    assert levels_to_quantiles((0.8, 0.95)) == (0.025, 0.1, 0.5, 0.9, 0.975)
    assert levels_to_quantiles(()) == (0.5,)
    assert interval_pairs((0.025, 0.1, 0.5, 0.9, 0.975)) == ((0.8, 1, 3), (0.95, 0, 4))
    assert interval_pairs((0.3, 0.5, 0.9)) == ()  # no symmetric partner: no interval
    # the quantile loss learns its own quantiles, with 0.5 added; the others use the levels
    assert report_quantiles(TrainConfig(loss="quantile", quantiles=(0.1, 0.9))) == (0.1, 0.5, 0.9)
    assert report_quantiles(TrainConfig(loss="quantile")) == (0.025, 0.1, 0.5, 0.9, 0.975)
    assert report_quantiles(TrainConfig(loss="normal", interval_levels=(0.5,))) == (
        0.25,
        0.5,
        0.75,
    )
    assert report_quantiles(TrainConfig(interval_levels=())) == ()


def test_pinball_loss_matches_hand_computed_values():
    y = jnp.array([1.0, 3.0])
    pred = jnp.array([[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]])  # (2, Q)
    # y=1: u=-1 -> 0.9*1, 0.5*1, 0.1*1; y=3: u=1 -> 0.1, 0.5, 0.9
    expected = [(0.9 + 0.5 + 0.1) / 3, (0.1 + 0.5 + 0.9) / 3]
    got = pinball_loss(pred, y, (0.1, 0.5, 0.9))
    np.testing.assert_allclose(np.asarray(got), expected, rtol=1e-6)
    np.testing.assert_allclose(pinball(np.array([1.0, 3.0]), np.array([2.0, 2.0]), 0.9), [0.1, 0.9])
    with pytest.raises(ValueError, match="pred must be y's shape"):
        pinball_loss(jnp.zeros((2,)), jnp.zeros((2,)), (0.5,))  # (2,) vs (2,): no Q axis


def test_quantiles_cannot_cross_and_match_hand_computed_values():
    raw = jnp.array([[-1.0, 0.5, 2.0, 0.0]])  # levels (0.1, 0.5, 0.7, 0.9): median index 1
    q = np.asarray(non_crossing(raw, 1))[0]
    expected = [0.5 - softplus(-1.0), 0.5, 0.5 + softplus(2.0), 0.5 + softplus(2.0) + softplus(0)]
    np.testing.assert_allclose(q, expected, rtol=1e-6)
    wild = jnp.asarray(np.random.default_rng(0).normal(scale=30.0, size=(500, 7)), jnp.float32)
    assert (np.diff(np.asarray(non_crossing(wild, 3)), axis=-1) >= 0).all()


def test_nlls_match_scipy_log_densities():
    rng = np.random.default_rng(1)
    y, mu = rng.normal(size=50), rng.normal(size=50)
    sigma, df = rng.uniform(0.1, 3.0, size=50), rng.uniform(2.0, 30.0, size=50)
    f32 = {"dtype": jnp.float32}
    got = normal_nll(jnp.asarray(y, **f32), jnp.asarray(mu, **f32), jnp.asarray(sigma, **f32))
    np.testing.assert_allclose(got, -stats.norm.logpdf(y, mu, sigma), rtol=1e-5, atol=1e-5)
    args = [jnp.asarray(a, **f32) for a in (y, mu, sigma, df)]
    expected = -stats.t.logpdf(y, df, mu, sigma)
    np.testing.assert_allclose(student_t_nll(*args), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("loss", ["normal", "student_t"])
def test_distribution_heads_map_raw_outputs_to_scipy_losses_and_quantiles(loss):
    head = OutputHead(loss)
    rng = np.random.default_rng(2)
    raw = rng.normal(size=(4, 2 * head.n_params)).astype(np.float32)  # horizon 2, 1 target
    y = rng.normal(size=(4, 2, 1)).astype(np.float32)
    p = raw.reshape(4, 2, 1, head.n_params).astype(np.float64)
    loc = p[..., 0]
    scale = np.vectorize(softplus)(p[..., 1]) + 1e-4
    if loss == "normal":
        dist = stats.norm(loc, scale)
    else:
        dist = stats.t(np.vectorize(softplus)(p[..., 2]) + 2.0, loc, scale)
    per_window = -dist.logpdf(y).reshape(4, 2).mean(axis=1)
    got = forecast_loss(head, jnp.asarray(raw), jnp.asarray(y))
    np.testing.assert_allclose(got, per_window, rtol=1e-5, atol=1e-5)
    levels = (0.05, 0.5, 0.8)
    quantiles = head.quantiles_at(raw, 2, 1, levels)  # (4, 2, 1, 3)
    expected = np.stack([dist.ppf(q) for q in levels], axis=-1)
    np.testing.assert_allclose(quantiles, expected, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(head.point(raw, 2, 1), raw.reshape(4, 2, 1, -1)[..., 0])


def test_quantile_head_loss_is_the_pinball_loss_of_its_non_crossing_quantiles():
    head = OutputHead("quantile", (0.1, 0.9))  # 0.5 added
    assert head.quantiles == (0.1, 0.5, 0.9) and head.point_index == 1
    raw = np.array([[0.0, 1.0, 0.0]], np.float32)  # horizon 1, 1 target
    q = [1.0 - softplus(0.0), 1.0, 1.0 + softplus(0.0)]
    y = np.array([[[3.0]]], np.float32)
    expected = np.mean([0.1 * (3 - q[0]), 0.5 * (3 - q[1]), 0.9 * (3 - q[2])])
    got = forecast_loss(head, jnp.asarray(raw), jnp.asarray(y))
    np.testing.assert_allclose(got, [expected], rtol=1e-6)
    with pytest.raises(ValueError, match=r"\(batch, horizon \* n_targets \* 3\) = \(batch, 3\)"):
        forecast_loss(head, jnp.zeros((1, 1)), jnp.asarray(y))  # a point model's output


def test_ensembles_average_their_members_quantiles():
    a = Forecast(np.zeros((1, 1, 1)), np.array([[[[-1.0, 0.0, 1.0]]]]), (0.1, 0.5, 0.9))
    b = Forecast(np.ones((1, 1, 1)), np.array([[[[-3.0, 1.0, 2.0]]]]), (0.1, 0.5, 0.9))
    out = average_quantiles([a, b])
    np.testing.assert_array_equal(out.quantiles.ravel(), [-2.0, 0.5, 1.5])
    np.testing.assert_array_equal(out.point.ravel(), [0.5])
