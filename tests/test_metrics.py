"""Metrics against hand-computed numbers."""

import doctest
import json
import math

import numpy as np
import pytest

from stacklstm import metrics
from stacklstm.metrics import forecast_metrics, mae, mape, rmse, smape

# errors pred - true = [1, 0, -2]
Y_TRUE = np.array([1.0, 2.0, 4.0])
Y_PRED = np.array([2.0, 2.0, 2.0])


def test_metrics_hand_computed():
    assert mae(Y_TRUE, Y_PRED) == pytest.approx(1.0, rel=1e-15)  # (1 + 0 + 2) / 3
    assert rmse(Y_TRUE, Y_PRED) == pytest.approx(math.sqrt(5.0 / 3.0), rel=1e-15)
    assert mape(Y_TRUE, Y_PRED) == pytest.approx(100.0 * (1.0 + 0.0 + 0.5) / 3.0, rel=1e-15)
    # 2|e| / (|t| + |p|): 2/3, 0, 4/6
    assert smape(Y_TRUE, Y_PRED) == pytest.approx(100.0 * (2 / 3 + 0 + 4 / 6) / 3.0, rel=1e-15)


def test_metrics_on_forecast_shaped_arrays():
    true = np.arange(12.0).reshape(2, 3, 2) + 1.0
    pred = true + np.array([1.0, -3.0])  # target 0 off by +1, target 1 off by -3
    assert mae(true, pred) == pytest.approx(2.0, rel=1e-15)
    assert rmse(true, pred) == pytest.approx(math.sqrt(5.0), rel=1e-15)


def test_mape_skips_zero_targets():
    assert mape([0.0, 2.0], [1.0, 1.0]) == pytest.approx(50.0, rel=1e-15)
    assert math.isnan(mape([0.0, 0.0], [1.0, 1.0]))


def test_smape_counts_zero_over_zero_as_perfect():
    assert smape([0.0, 2.0], [0.0, 2.0]) == 0.0
    assert smape([0.0, 1.0], [0.0, 3.0]) == pytest.approx(50.0, rel=1e-15)  # (0 + 1) / 2
    assert smape([0.0], [5.0]) == pytest.approx(200.0, rel=1e-15)


@pytest.mark.parametrize("fn", [mae, rmse, mape, smape, forecast_metrics])
def test_metrics_refuse_broadcasting(fn):
    with pytest.raises(ValueError, match=r"same shape, got \(3, 1\) and \(3,\)"):
        fn(Y_TRUE[:, None], Y_PRED)


@pytest.mark.parametrize("fn", [mae, rmse, mape, smape])
def test_metrics_refuse_nan_and_empty(fn):
    with pytest.raises(ValueError, match="y_pred holds 1 NaN/Inf"):
        fn(Y_TRUE, np.array([1.0, np.nan, 2.0]))
    with pytest.raises(ValueError, match="empty"):
        fn(np.zeros(0), np.zeros(0))


def test_forecast_metrics_is_json_able_dict():
    out = forecast_metrics(Y_TRUE, Y_PRED)
    assert list(out) == ["mae", "rmse", "mape", "smape"]
    assert all(type(v) is float for v in out.values())
    assert json.loads(json.dumps(out)) == out
    assert out["mae"] == mae(Y_TRUE, Y_PRED)


def test_metrics_docstring_examples():
    result = doctest.testmod(metrics)
    assert result.attempted > 0
    assert result.failed == 0


def test_mase_hand_computed():
    # in-sample [1, 2, 4, 7, 11], season 2: |4-1|, |7-2|, |11-4| -> scale 5
    scale = metrics.seasonal_scale([[1.0], [2.0], [4.0], [7.0], [11.0]], 2)
    assert scale.tolist() == [5.0]
    # errors 1, 0, -2 -> MAE 1 -> MASE 1 / 5
    assert metrics.mase(Y_TRUE[:, None], Y_PRED[:, None], scale) == pytest.approx(0.2, rel=1e-15)
    # two targets, each scaled by its own scale, then averaged: (1 / 0.5 + 3 / 6) / 2
    true = np.zeros((2, 3, 2))
    pred = true + np.array([1.0, -3.0])
    assert metrics.mase(true, pred, [0.5, 6.0]) == pytest.approx(1.25, rel=1e-15)
    # a history no longer than the season falls back to lag 1: |2-1|, |4-2|
    assert metrics.seasonal_scale([[1.0], [2.0], [4.0]], 3).tolist() == [1.5]
    out = forecast_metrics(Y_TRUE[:, None], Y_PRED[:, None], scale)
    assert list(out) == ["mae", "rmse", "mape", "smape", "mase"] and out["mase"] == 0.2


def test_mase_refuses_a_scale_of_another_shape_and_is_none_for_a_constant_history():
    with pytest.raises(ValueError, match=r"one entry per target, shape \(1,\), got \(2,\)"):
        metrics.mase(Y_TRUE[:, None], Y_PRED[:, None], [1.0, 2.0])
    assert metrics.mase(Y_TRUE[:, None], Y_PRED[:, None], [0.0]) is None
