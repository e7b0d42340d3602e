"""The one-pass rolling forecasts: equal to statsforecast's forward at every origin."""

import numpy as np
import pytest

from helpers import SEASON, seasonal_values


def _rolling_cases():
    """``(id, model, series)``: each rolling path of :mod:`stacklstm.baselines.rolling`."""
    from statsforecast.models import ARIMA, AutoARIMA, AutoETS

    y, n = seasonal_values(90), 90
    rng = np.random.default_rng(3)
    walk = 20 + np.cumsum(rng.normal(size=n))
    flat_start = np.r_[np.full(40, 5.0), 5 + np.cumsum(rng.normal(size=n - 40))]
    positive = 50 + 8 * np.sin(2 * np.pi * np.arange(n) / SEASON) + rng.normal(size=n)
    return [
        ("ets_auto", AutoETS(season_length=SEASON), y),
        ("ets_mam", AutoETS(season_length=SEASON, model="MAM"), positive),
        ("ets_damped", AutoETS(season_length=SEASON, model="AAN", damped=True), walk),
        ("ets_constant_prefix", AutoETS(season_length=SEASON), flat_start),
        ("arima_auto", AutoARIMA(season_length=SEASON), y),
        ("arima_drift", ARIMA(order=(1, 1, 1), include_drift=True, season_length=SEASON), walk),
        ("arima_mean", ARIMA(order=(2, 0, 1), include_mean=True, season_length=SEASON), positive),
        ("arima_seasonal_diff",
         ARIMA(order=(0, 1, 1), seasonal_order=(0, 1, 1), season_length=SEASON), y),
        ("arima_constant_prefix", ARIMA(order=(0, 1, 1), season_length=SEASON), flat_start),
    ]  # fmt: skip


@pytest.mark.parametrize("case", range(9))
def test_one_pass_rolling_equals_forward_at_every_origin(case):
    from stacklstm.baselines.rolling import rolling_means

    label, model, y = _rolling_cases()[case]
    fit_at = 30 if "constant" in label else 50  # the constant prefix: rows 0..39
    origins = np.arange(fit_at, len(y) - 3)
    model.fit(y=y[: fit_at + 1])
    if label == "arima_drift":
        assert "drift" in model.model_["coef"]
    if label == "arima_mean":
        assert "intercept" in model.model_["coef"]
    want = np.stack([model.forward(y=y[: o + 1], h=3)["mean"] for o in origins])
    ticks = []
    name = "auto_ets" if label.startswith("ets") else "auto_arima"
    got = rolling_means(name, model, y, origins, 3, ticks.append)
    np.testing.assert_array_equal(got, want)
    assert sum(ticks) == origins.size
    assert np.ptp(got[:, 0]) > 0  # the forecasts follow the data


def _theta_cases():
    """``(id, model, series)``: AutoTheta's four models and each branch of ``forward``'s
    decomposition (multiplicative, additive for a series with negative values, none)."""
    from statsforecast.models import AutoTheta

    n, t = 120, np.arange(120)
    rng = np.random.default_rng(5)
    growing = (20 + 0.3 * t) * (1 + 0.3 * np.sin(2 * np.pi * t / SEASON)) + rng.normal(size=n)
    negative = -5 + 0.05 * t + 3 * np.sin(2 * np.pi * t / SEASON) + rng.normal(size=n)
    walk = 20 + np.cumsum(rng.normal(size=n))
    noise = 10 + rng.normal(size=n)
    flat_start = np.r_[np.full(40, 5.0), 5 + np.cumsum(rng.normal(size=n - 40))]
    return [
        ("stm_multiplicative", AutoTheta(season_length=SEASON, model="STM"), growing),
        ("otm_multiplicative", AutoTheta(season_length=SEASON, model="OTM"), growing),
        ("dstm_additive", AutoTheta(season_length=SEASON, model="DSTM"), negative),
        ("dotm_additive", AutoTheta(season_length=SEASON, model="DOTM"), negative),
        ("auto_no_season", AutoTheta(season_length=1), walk),
        ("dotm_no_season", AutoTheta(season_length=SEASON, model="DOTM"), noise),
        ("auto_constant_prefix", AutoTheta(season_length=SEASON), flat_start),
    ]


@pytest.mark.parametrize("case", range(7))
def test_theta_rolling_equals_forward_at_every_origin(case):
    """The seasonal indices and the filter's state come from sums in another order than
    forward's: equal to rounding (relative 1e-12), where the per-origin forward costs a
    decomposition and a filter over the whole prefix."""
    from stacklstm.baselines.rolling import rolling_means

    label, model, y = _theta_cases()[case]
    fit_at = 30 if "constant" in label else 50
    origins = np.arange(fit_at, len(y) - 3)
    model.fit(y=y[: fit_at + 1])
    kind = label.split("_")[0].upper()
    assert kind == "AUTO" or model.model_["modeltype"] == kind
    want = np.stack([model.forward(y=y[: o + 1], h=3)["mean"] for o in origins])
    ticks = []
    got = rolling_means("auto_theta", model, y, origins, 3, ticks.append)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0)
    assert sum(ticks) == origins.size
    assert np.ptp(got[:, 0]) > 0
    from statsforecast.theta import forward_theta

    # the case takes the branch of forward's decomposition that its name says
    branch = forward_theta(model.model_, y[: origins[-1] + 1]).get("decomposition_type", "no")
    expected = label.split("_")[1]
    assert expected == "constant" or branch.startswith(expected[:2])
