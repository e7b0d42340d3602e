"""The combination of forecasters: inverse-error weights, hand-computed."""

import numpy as np
import pytest

from stacklstm.combine import combine, weighted_mean, weights


def test_weights_are_inverse_errors_normalised():
    # 1/2 : 1/4 : 1/4 -> 0.5, 0.25, 0.25
    assert weights({"a": 2.0, "b": 4.0, "c": 4.0}) == pytest.approx(
        {"a": 0.5, "b": 0.25, "c": 0.25}
    )


def test_unusable_errors_are_left_out_and_zero_error_takes_all():
    assert weights({"a": 1.0, "b": float("nan"), "c": None, "d": -1.0}) == {"a": 1.0}
    assert weights({"a": 0.0, "b": 3.0, "c": 0.0}) == {"a": 0.5, "b": 0.0, "c": 0.5}
    with pytest.raises(ValueError, match="no forecaster has a finite validation error"):
        weights({"a": float("inf")})


def test_combine_weighs_each_step():
    forecasts = {"a": np.array([[1.0, 2.0]]), "b": np.array([[4.0, 8.0]])}
    # weights 1/1 : 1/2 -> 2/3, 1/3
    out = combine(forecasts, {"a": 1.0, "b": 2.0})
    np.testing.assert_allclose(out, [[2.0, 4.0]])


def test_combine_leaves_out_non_finite_forecasts_and_refuses_shapes():
    forecasts = {"a": np.array([1.0, np.nan]), "b": np.array([3.0, 5.0])}
    np.testing.assert_allclose(combine(forecasts, {"a": 1.0, "b": 1.0}), [3.0, 5.0])
    with pytest.raises(ValueError, match="share one shape"):
        combine({"a": np.zeros(2), "b": np.zeros(3)}, {"a": 1.0, "b": 1.0})


def test_weighted_mean_renormalises_over_the_finite_forecasts():
    forecasts = {"a": np.array([1.0, 2.0]), "b": np.array([4.0, 8.0]), "c": None}
    # weights 0.5 : 0.25 (c has none): 2/3 * a + 1/3 * b
    out = weighted_mean(forecasts, {"a": 0.5, "b": 0.25, "c": 0.25})
    np.testing.assert_allclose(out, [2.0, 4.0])
    # a forecaster with a NaN anywhere, or without a weight, is left out
    forecasts["b"] = np.array([4.0, np.nan])
    np.testing.assert_allclose(weighted_mean(forecasts, {"a": 0.5, "b": 0.25}), [1.0, 2.0])
    np.testing.assert_allclose(weighted_mean({"a": np.ones(2), "z": np.zeros(2)}, {"a": 1.0}), 1)


def test_weighted_mean_refuses_bad_weights_and_nothing_to_combine():
    with pytest.raises(ValueError, match="finite and >= 0"):
        weighted_mean({"a": np.ones(2)}, {"a": -0.5})
    with pytest.raises(ValueError, match="no forecaster with a positive weight"):
        weighted_mean({"a": np.array([np.nan])}, {"a": 1.0})
    with pytest.raises(ValueError, match="share one shape"):
        weighted_mean({"a": np.zeros(2), "b": np.zeros(3)}, {"a": 1.0, "b": 1.0})


def test_median_is_value_by_value_and_leaves_out_what_is_missing():
    from stacklstm.combine import median

    a, b, c = np.array([1.0, 5.0, 2.0]), np.array([3.0, 1.0, np.nan]), np.array([2.0, 9.0, 4.0])
    np.testing.assert_array_equal(median({"a": a, "b": b, "c": c}), [2.0, 5.0, 3.0])
    # four forecasts: the mean of the middle two; None is left out
    d = np.array([10.0, 0.0, np.inf])
    np.testing.assert_array_equal(
        median({"a": a, "b": b, "c": c, "d": d, "e": None}), [2.5, 3.0, 3.0]
    )
    # nothing finite at a value: NaN there
    assert np.isnan(median({"b": b})[2]) and median({"b": b})[0] == 3.0
    with pytest.raises(ValueError, match="at least one forecast"):
        median({"a": None})
    with pytest.raises(ValueError, match="share one shape"):
        median({"a": a, "b": np.zeros(2)})


def test_median_and_weighted_is_the_mean_of_the_two_by_hand():
    from stacklstm.combine import median_and_weighted

    a, b, c = np.array([1.0, 5.0]), np.array([3.0, 1.0]), np.array([8.0, 9.0])
    forecasts = {"a": a, "b": b, "c": c, "unweighed": np.array([100.0, 100.0])}
    weights = {"a": 0.5, "b": 0.3, "c": 0.2}
    # median of a, b, c: [3, 5]; weighted: [0.5 + 0.9 + 1.6, 2.5 + 0.3 + 1.8] = [3.0, 4.6]
    np.testing.assert_allclose(median_and_weighted(forecasts, weights), [3.0, 4.8], rtol=1e-12)
    # a forecaster with a non-finite value: left out of the weighted mean (its weight
    # renormalised over the others), out of the median at that value only
    c = np.array([8.0, np.nan])
    # median: [3, 3]; weighted over a and b alone: [(0.5 + 0.9) / 0.8, (2.5 + 0.3) / 0.8]
    np.testing.assert_allclose(
        median_and_weighted({"a": a, "b": b, "c": c}, weights), [2.375, 3.25], rtol=1e-12
    )


def test_stacked_weights_find_the_exact_mix_and_the_lowest_scaled_error():
    from stacklstm.combine import stacked_weights

    rng = np.random.default_rng(0)
    f = {k: rng.normal(size=(2, 5, 1)) for k in "abc"}
    exact = 0.3 * f["a"] + 0.7 * f["c"]
    w = stacked_weights(f, exact, np.array([1.0, 4.0])[:, None, None])
    assert list(w) == ["a", "b", "c"]
    np.testing.assert_allclose(list(w.values()), [0.3, 0.0, 0.7], atol=1e-7)
    # each series forecast exactly by one forecaster and missed by the other (by 1 on the
    # first, by 2 on the second): the series whose misses weigh more by its scale wins
    y = rng.normal(size=(2, 5))
    pair = {"a": np.stack([y[0], y[1] + 2]), "b": np.stack([y[0] + 1, y[1]])}
    assert stacked_weights(pair, y, np.ones((2, 1))) == pytest.approx({"a": 0, "b": 1}, abs=1e-7)
    assert stacked_weights(pair, y, np.array([[1.0], [100.0]])) == pytest.approx(
        {"a": 1, "b": 0}, abs=1e-7
    )
    # no mix is exact: the weights' mean scaled error is the lowest of a grid on the simplex
    y, scale = rng.normal(size=(2, 5, 1)), np.array([1.0, 3.0])[:, None, None]

    def error(w):
        return np.mean(np.abs(y - sum(w[k] * f[k] for k in f)) / np.broadcast_to(scale, y.shape))

    steps = np.linspace(0, 1, 41)
    grid = [
        dict(zip("abc", (p, q, 1 - p - q), strict=True))
        for p in steps
        for q in steps
        if p + q <= 1 + 1e-12
    ]
    w = stacked_weights(f, y, scale)
    assert min(w.values()) >= 0 and sum(w.values()) == pytest.approx(1.0)
    assert error(w) <= min(error(g) for g in grid) + 1e-9


def test_stacked_weights_leave_out_what_cannot_be_scored():
    from stacklstm.combine import stacked_weights

    y = np.array([1.0, 2.0, np.nan, 4.0, 5.0])
    a, b = y + 1.0, y.copy()
    b[3] = np.inf  # b is exact where it is finite; the value it misses is left out
    scale = np.array([1.0, 1.0, 1.0, 1.0, 0.0])  # a scale of 0: left out too
    w = stacked_weights({"a": a, "b": b, "none": None}, y, scale)
    assert w == pytest.approx({"a": 0.0, "b": 1.0}, abs=1e-7)
    assert stacked_weights({"a": a}, y, 1.0) == {"a": 1.0}
    with pytest.raises(ValueError, match="no value"):
        stacked_weights({"a": a}, np.full(5, np.nan), 1.0)
    with pytest.raises(ValueError, match="at least one forecast"):
        stacked_weights({"a": None}, y, 1.0)
    with pytest.raises(ValueError, match="share one shape"):
        stacked_weights({"a": np.zeros(3)}, y, 1.0)


def test_stacked_weights_fit_an_even_spread_of_a_large_table(monkeypatch):
    """Beyond MAX_STACKED_VALUES values, that many evenly spaced ones: an exact mix is found
    on any of them; a mix exact on the first half of the values only is not the one fitted
    on all of them, and the spread reaches the second half."""
    from stacklstm import combine

    rng = np.random.default_rng(1)
    f = {k: rng.normal(size=40) for k in "ab"}
    y = np.where(np.arange(40) < 20, 0.2 * f["a"] + 0.8 * f["b"], f["a"])
    monkeypatch.setattr(combine, "MAX_STACKED_VALUES", 10)
    w = combine.stacked_weights(f, y, 1.0)
    assert w["a"] > 0.2 + 1e-3 and 0.0 <= w["b"] < 0.8 - 1e-3
    exact = 0.2 * f["a"] + 0.8 * f["b"]
    assert combine.stacked_weights(f, exact, 1.0) == pytest.approx({"a": 0.2, "b": 0.8}, abs=1e-7)
