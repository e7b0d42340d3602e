"""Prediction intervals: pinball loss, the non-crossing quantiles, the NLLs against scipy,
conformal calibration and the interval scores against hand-computed numbers; the flags'
errors. (A whole run whose conformal 80 % intervals cover 80 % of the test targets is
tests/e2e/test_forecasts.py.)"""

import json
import logging
import math

import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from helpers import _main
from stacklstm.baselines import residual_intervals
from stacklstm.config import TrainConfig
from stacklstm.intervals import (
    Calibration,
    Forecast,
    OutputHead,
    average_quantiles,
    calibrate,
    conformal_offsets,
    conformal_quantile,
    interval_pairs,
    interval_scores,
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


# --------------------------------------------------------------------------- levels


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


# --------------------------------------------------------------------------- losses


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


# --------------------------------------------------------------------------- conformal, scores


def test_conformal_quantile_uses_the_finite_sample_rank(caplog):
    scores = np.array([5.0, 1.0, 4.0, 2.0, 3.0])
    assert conformal_quantile(scores, 0.5).item() == 3.0  # ceil(6 * 0.5) = 3rd smallest
    assert conformal_quantile(scores, 0.6).item() == 4.0  # ceil(6 * 0.6) = 4th
    with caplog.at_level(logging.WARNING, logger="stacklstm.intervals.conformal"):
        assert conformal_quantile(scores, 0.95).item() == 5.0  # rank 6 > 5: the largest
    assert "too few" in caplog.text


def test_cqr_offsets_widen_or_narrow_each_step_and_keep_quantiles_sorted():
    # horizon 2: step 1 intervals [0, 2] too narrow, step 2 [-10, 10] too wide
    y = np.array([[[1.0], [0.0]], [[3.0], [1.0]], [[-2.0], [2.0]], [[4.0], [0.5]]])
    q = np.zeros((4, 2, 1, 3))
    q[:, 0, 0] = [0.0, 1.0, 2.0]
    q[:, 1, 0] = [-10.0, 0.0, 10.0]
    f = Forecast(q[..., 1], q, (0.1, 0.5, 0.9))
    cal = conformal_offsets(y, f)
    # scores step 1: max(0 - y, y - 2) = -1, 1, 2, 2 -> rank ceil(5 * 0.8) = 4: 2
    # step 2: max(-10 - y, y - 10) = -10, -9, -8, -9.5 -> 4th smallest: -8
    np.testing.assert_array_equal(cal.offsets, [[[2.0], [-8.0]]])
    out = calibrate(f, cal)
    np.testing.assert_array_equal(out.quantiles[0, 0, 0], [-2.0, 1.0, 4.0])
    np.testing.assert_array_equal(out.quantiles[0, 1, 0], [-2.0, 0.0, 2.0])
    np.testing.assert_array_equal(out.point, f.point)
    # an offset that crosses the interval over: re-sorted, never crossing
    crossed = calibrate(f, Calibration((0.8,), (0.1, 0.5, 0.9), np.array([[[-3.0], [0.0]]]), 4))
    np.testing.assert_array_equal(crossed.quantiles[0, 0, 0], [-1.0, 1.0, 3.0])
    assert Calibration.from_dict(json.loads(json.dumps(cal.to_dict()))).offsets.tolist() == [
        [[2.0], [-8.0]]
    ]


def test_interval_scores_match_hand_computed_coverage_width_and_wql():
    y = np.array([1.0, 2.0, 5.0]).reshape(3, 1, 1)
    q = np.tile([0.0, 1.0, 2.0], (3, 1)).reshape(3, 1, 1, 3)
    scores = interval_scores(y, Forecast(q[..., 1], q, (0.1, 0.5, 0.9)))
    assert scores["coverage"] == {"0.8": pytest.approx(2 / 3)}
    assert scores["width"] == {"0.8": 2.0}
    # pinball sums: q0.1 -> 0.1 + 0.2 + 0.5 = 0.8; q0.5 -> 0 + 0.5 + 2 = 2.5;
    # q0.9 -> 0.1 + 0 + 2.7 = 2.8; each times 2 / sum|y| = 2 / 8, then averaged
    assert scores["wql"] == pytest.approx((0.8 + 2.5 + 2.8) * 2 / 8 / 3)
    zero = interval_scores(np.zeros((3, 1, 1)), Forecast(q[..., 1], q, (0.1, 0.5, 0.9)))
    assert zero["wql"] is None


def test_baseline_intervals_come_from_its_validation_residuals():
    y_val = np.array([1.0, -2.0, 3.0, 0.5]).reshape(4, 1, 1)
    # |residuals| of a zero forecast: 1, 2, 3, 0.5 -> rank ceil(5 * 0.5) = 3: 2.0
    out = residual_intervals(
        y_val, np.zeros((4, 1, 1)), np.full((2, 1, 1), 10.0), (0.25, 0.5, 0.75)
    )
    np.testing.assert_array_equal(out.quantiles[:, 0, 0], [[8.0, 10.0, 12.0]] * 2)
    assert residual_intervals(y_val, None, np.zeros((2, 1, 1)), (0.25, 0.5, 0.75)) is None


def test_ensembles_average_their_members_quantiles():
    a = Forecast(np.zeros((1, 1, 1)), np.array([[[[-1.0, 0.0, 1.0]]]]), (0.1, 0.5, 0.9))
    b = Forecast(np.ones((1, 1, 1)), np.array([[[[-3.0, 1.0, 2.0]]]]), (0.1, 0.5, 0.9))
    out = average_quantiles([a, b])
    np.testing.assert_array_equal(out.quantiles.ravel(), [-2.0, 0.5, 1.5])
    np.testing.assert_array_equal(out.point.ravel(), [0.5])


# --------------------------------------------------------------------------- flags


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--loss", "quantile", "--quantiles", "0.1,1.5"], "--quantiles must lie strictly"),
        (["--loss", "quantile", "--quantiles", "0.9,0.1"], "--quantiles must be ascending"),
        (["--loss", "quantile", "--quantiles", "0.1,0.1,0.9"], "without repeats"),
        (["--quantiles", "0.1,0.9"], "--quantiles apply to --loss quantile"),
        (["--conformal", "--val-fraction", "0"], "--val-fraction is 0"),
        (["--conformal", "--val-fraction", "0.0001"], "validation windows but"),  # 0 rows
        (["--loss", "quantile", "--quantiles", "a,b"], "expected comma-separated numbers"),
    ],
)
def test_bad_interval_flags_are_one_line_and_write_nothing(tmp_path, flags, message):
    out = tmp_path / "run"
    code, stdout, stderr = _main("train", "--out", out, "--baselines", "naive", *flags)
    assert code == 2 and not stdout
    assert len(stderr.strip().splitlines()) == 1 and message in stderr, stderr
    assert not out.exists()
