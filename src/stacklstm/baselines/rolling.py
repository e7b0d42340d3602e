"""Rolling forecasts of a fitted statsforecast model from many origins, in one pass.

statsforecast's ``forward(y[: o + 1], h)`` reruns a fitted model's filter over the whole
prefix for every origin ``o``: rolling over ``n`` origins of a long series costs ``n`` full
passes. Where the filter's state after row ``o`` is all that the mean forecast from ``o``
needs, one pass over the series gives it for every origin:

* AutoETS: ``forward`` runs ``pegelsresid_C`` from the fitted initial state and parameters;
  row ``o + 1`` of the states of one run over ``y[: last + 1]`` is the last state of a run
  over ``y[: o + 1]`` (the recursion only looks back), and ``pegelsfcast_C`` forecasts from
  it. A constant prefix is fitted afresh by ``forward`` (another model): ``forward`` there.
* AutoARIMA: ``forward`` refits with every coefficient fixed, which runs the Kalman filter
  (``arima_like``) from the initial state of ``make_arima`` over the series less its
  regression part (intercept, drift); the filter keeps its whole state in ``a``, ``P`` and
  ``Pn``, so it runs on in pieces, stopping at each origin for ``forecast_arima``'s mean
  from ``a`` (``T`` carries the state, differencing in ``Delta`` included, ``Z`` reads
  it; then the intercept and drift; a constant prefix forecasts its value). A piece's
  first step takes ``Pn`` as given (later steps predict it from ``P``), so each piece also
  runs one step further, on a missing value, for the ``Pn`` that the next piece starts
  from: three filter steps per origin, and two passes over the rows up to the first one.
* AutoTheta: ``forward`` reruns the seasonality test (an autocorrelation of the whole
  prefix) and, where it passes, a classical decomposition of the whole prefix, whose
  seasonal indices (means over every period of the prefix) change with each new row and
  rescale every earlier value, then runs the theta filter (``pegels_resid``, quadratic in
  the prefix's length in statsforecast 2.1) over the deseasonalised prefix. What carries
  from one origin to the next: the centred moving average at a row needs only the rows
  around it, so each origin adds one detrended value to its period's sum; and every part
  of the filter's last state (level, mean, linear fit) is affine in the deseasonalised
  values, so it is a sum over the periods of running sums kept for the values and for
  ones. The seasonality test stays a pass over the prefix.

The numbers are those of the per-origin ``forward`` calls (the same native code in the same
order; only the drift's regression values may differ by rounding), which the tests check;
AutoTheta's are the same sums in another order (equal to about 1e-15, relative).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

Tick = Callable[[int], None]


def rolling_means(
    name: str, model: Any, y: np.ndarray, origins: np.ndarray, horizon: int, tick: Tick
) -> np.ndarray:
    """Mean forecasts of the fitted ``model`` (report key ``name``) from every origin.

    Args:
        name: ``"auto_ets"``, ``"auto_arima"`` or ``"auto_theta"``.
        model: The statsforecast model, fitted (on the rows up to ``origins[0]`` or earlier).
        y: ``(time,)`` float64 values of one series.
        origins: ``(n,)`` ascending rows of the last value seen by each forecast.
        horizon: Steps forecast from each origin.
        tick: Called with the number of origins done since its last call.

    Returns:
        ``(n, horizon)`` float64: ``model.forward(y=y[: o + 1], h=horizon)["mean"]`` of
        every origin ``o``.
    """
    y = np.ascontiguousarray(y, dtype=np.float64)
    if y.ndim != 1:
        raise ValueError(f"y must be one series (time,), got shape {y.shape}")
    origins = np.asarray(origins, dtype=np.int64)
    if name == "auto_ets":
        return _ets_rolling(model, y, origins, horizon, tick)
    if name == "auto_arima":
        return _arima_rolling(model, y, origins, horizon, tick)
    if name == "auto_theta":
        return _theta_rolling(model, y, origins, horizon, tick)
    return forward_means(model, y, origins, horizon, tick)


def forward_means(
    model: Any, y: np.ndarray, origins: np.ndarray, horizon: int, tick: Tick
) -> np.ndarray:
    """``(n, horizon)`` ``model.forward(y=y[: o + 1], h=horizon)["mean"]`` of every origin
    ``o`` of ``origins``: a pass over each prefix (``tick(1)`` after each)."""
    out = np.empty((origins.size, horizon))
    for i, origin in enumerate(origins.tolist()):
        out[i] = model.forward(y=y[: origin + 1], h=horizon)["mean"]
        tick(1)
    return out


def _constant_rows(y: np.ndarray) -> int:
    """How many leading rows of ``y`` equal ``y[0]`` (statsforecast's ``is_constant`` of a
    prefix holds exactly for prefixes no longer than that; NaN is never constant)."""
    differs = np.flatnonzero(~(y == y[0]))
    return int(differs[0]) if differs.size else y.size


def _ets_rolling(
    model: Any, y: np.ndarray, origins: np.ndarray, horizon: int, tick: Tick
) -> np.ndarray:
    """AutoETS: one ``pegelsresid_C`` pass, then ``pegelsfcast_C`` from each origin's state."""
    from statsforecast.ets import pegelsfcast_C, pegelsresid_C

    fitted = model.model_
    components, par, m = fitted["components"], np.asarray(fitted["par"]), fitted["m"]
    alpha, beta, gamma, phi = par[:4]
    _, _, states, _ = pegelsresid_C(
        y=y[: int(origins[-1]) + 1],
        m=m,
        init_state=par[4:],
        errortype=components[0],
        trendtype=components[1],
        seasontype=components[2],
        damped=components[3] != "N",
        alpha=alpha,
        beta=beta,
        gamma=gamma,
        phi=phi,
        nmse=3,
    )
    constant = _constant_rows(y)
    out = np.empty((origins.size, horizon))
    for i, origin in enumerate(origins.tolist()):
        if origin < constant:  # forward fits a constant prefix afresh
            out[i] = model.forward(y=y[: origin + 1], h=horizon)["mean"]
        else:
            state = {
                "states": states[origin + 1 : origin + 2],
                "components": components,
                "par": par,
                "m": m,
            }
            out[i] = pegelsfcast_C(horizon, state)
        tick(1)
    return out


def _arima_regression(fitted: dict[str, Any], n: int) -> np.ndarray | None:
    """``(n, k)`` the regressors ``forward`` gives ``arima`` for ``n`` rows (intercept, then
    the drift predicted by its regression on the fitted rows' time), None without any."""
    coef = fitted["coef"]
    columns = []
    if "intercept" in coef:
        columns.append(np.ones(n))
    if "drift" in coef:
        import statsmodels.api as sm

        m = fitted["arma"][4]
        n_fit = len(fitted["x"])
        time = np.arange(0, (n_fit + 1) / m, 1 / m)[:n_fit].reshape(-1, 1)
        drift = sm.OLS(fitted["xreg"][:, 0], sm.add_constant(time)).fit()
        new_time = np.arange(0, (n + 1) / m, 1 / m)[:n].reshape(-1, 1)
        columns.append(drift.predict(sm.add_constant(new_time)))
    narma = sum(fitted["arma"][:4])
    extra = [k for k in list(coef)[narma:] if k not in ("intercept", "drift")]
    if extra:  # regressors of the user's own: not fitted here
        raise ValueError(f"AutoARIMA with the external regressors {extra} has no rolling path")
    return np.stack(columns, axis=1) if columns else None


def _arima_rolling(
    model: Any, y: np.ndarray, origins: np.ndarray, horizon: int, tick: Tick
) -> np.ndarray:
    """AutoARIMA: the Kalman filter of ``forward`` run once, forecasting at each origin."""
    from statsforecast.arima import arima_like, arima_transpar, make_arima

    fitted = model.model_
    arma = fitted["arma"]
    narma = sum(arma[:4])
    coefs = np.array(list(fitted["coef"].values()), dtype=np.float64)
    last = int(origins[-1]) + 1
    x = y[:last].copy()
    regression = _arima_regression(fitted, last)
    if regression is not None:
        x -= np.dot(regression, coefs[narma : narma + regression.shape[1]])
    phi, theta = arima_transpar(coefs, np.asarray(arma, dtype=np.int32), False)
    state = make_arima(phi, theta, fitted["model"]["delta"], 1e6)
    # the filter's state before the rows x[start:]: a, P and Pn, the covariance predicted
    # for row `start` (the filter's first step takes Pn as given; later steps predict it)
    start, carried = 0, {k: state[k] for k in ("a", "P", "Pn")}
    constant = _constant_rows(y)
    out = np.empty((origins.size, horizon))
    with np.errstate(invalid="ignore"):
        for i, origin in enumerate(origins.tolist()):
            rows = x[start : origin + 1]
            now = _filter(state, carried, rows, arima_like)  # the state after the origin
            # Pn for the next row: predicted from the origin's P by a step on a missing value
            ahead = _filter(state, carried, np.append(rows, np.nan), arima_like)
            carried = {"a": now["a"], "P": now["P"], "Pn": ahead["Pn"]}
            start = origin + 1
            if origin < constant:  # forecast_arima: a constant series forecasts its value
                out[i] = np.repeat(y[0], horizon)
            else:
                out[i] = _arima_mean(fitted, state, now["a"], start, horizon)
            tick(1)
    return out


def _arima_mean(
    fitted: dict[str, Any], model: dict[str, Any], a: np.ndarray, n: int, horizon: int
) -> np.ndarray:
    """``forecast_arima``'s mean from the filter's state ``a`` after ``n`` rows: the state
    carried ``horizon`` steps by ``T`` and read by ``Z`` (``kalman_forecast``, without its
    variances), plus the regression part (intercept, drift at rows ``n + 1 ...``), computed
    as ``predict_arima`` does."""
    a = a.copy()
    pred = np.empty(horizon)
    for step in range(horizon):
        a = model["T"] @ a
        pred[step] = a @ model["Z"]
    names, coefs = list(fitted["coef"]), list(fitted["coef"].values())
    narma = sum(fitted["arma"][:4])
    if len(coefs) > narma:
        columns = []
        if names[narma] == "intercept":
            columns.append(np.ones(horizon, dtype=np.float64).reshape(-1, 1))
        if "drift" in fitted["coef"]:
            drift = np.arange(1, horizon + 1, dtype=np.float64).reshape(-1, 1)
            drift += n
            columns.append(drift)
        regression = np.concatenate(columns, axis=1) if len(columns) > 1 else columns[0]
        xm = np.matmul(regression, coefs if narma == 0 else coefs[narma:])
        pred += xm.flatten()
    return pred


def _filter(
    model: dict[str, Any], carried: dict[str, np.ndarray], rows: np.ndarray, arima_like: Any
) -> dict[str, np.ndarray]:
    """statsforecast's ``arima_like`` over ``rows`` from copies of the ``carried`` state:
    the ``a``, ``P`` and ``Pn`` it leaves."""
    out = {k: v.copy() for k, v in carried.items()}
    arima_like(
        rows, model["phi"], model["theta"], model["delta"], out["a"], out["P"], out["Pn"], 0, False
    )
    return out


def _theta_rolling(
    model: Any, y: np.ndarray, origins: np.ndarray, horizon: int, tick: Tick
) -> np.ndarray:
    """AutoTheta: ``forward``'s seasonality test and decomposition at each origin, and the
    filter's last state from sums carried from one origin to the next."""
    from scipy.stats import norm
    from statsforecast.theta import switch_theta

    fitted = model.model_
    m, par = int(fitted["m"]), fitted["par"]
    dynamic = fitted["modeltype"] in ("DSTM", "DOTM")
    theta = 2.0 if fitted["modeltype"] in ("STM", "DSTM") else float(par["theta"])
    switch_theta(fitted["modeltype"])  # an unknown model type fails here, as in forward
    alpha, start = float(par["alpha"]), float(par["initial_smoothed"])
    last = int(origins[-1]) + 1
    x = y[:last]
    periods = _PeriodMeans(x, m)
    sums = _ThetaSums(x, max(m, 1), alpha)
    threshold, constant = norm.ppf(0.95), _constant_rows(y)
    low = np.minimum.accumulate(x)
    out = np.empty((origins.size, horizon))
    for i, origin in enumerate(origins.tolist()):
        if origin < constant or origin < 3:  # a constant or tiny prefix: forward there
            out[i] = model.forward(y=y[: origin + 1], h=horizon)["mean"]
            tick(1)
            continue
        n = origin + 1
        sums.advance(n)
        # the deseasonalised series is a_j * y + b_j at the rows of period j
        a, b, ahead, seasonal = np.ones(sums.m), np.zeros(sums.m), None, None
        if m >= 4 and n >= 2 * m and _seasonality(x[:n], m) > threshold:
            seasonal = "multiplicative" if low[origin] > 0 else "additive"
            means = periods.means(n, seasonal)
            if seasonal == "multiplicative" and np.any(means < 0.01):
                seasonal, means = "additive", periods.means(n, "additive")
            if seasonal == "multiplicative":
                a = 1 / means
            else:
                b = -means
            ahead = means[(n + np.arange(horizon)) % m]  # the indices' seasonal naive
        mean = _theta_forecast(sums.state(a, b, start, dynamic), n, horizon, alpha, theta, dynamic)
        if seasonal == "multiplicative":
            mean = mean * ahead
        elif seasonal == "additive":
            mean = mean + ahead
        out[i] = mean
        tick(1)
    return out


def _theta_forecast(
    state: tuple[float, float, float, float],
    n: int,
    horizon: int,
    alpha: float,
    theta: float,
    dynamic: bool,
) -> np.ndarray:
    """statsforecast's theta ``forecast`` from the state ``(level, mean, An, Bn)`` after
    ``n`` rows: each step's ``mu`` is the forecast and the next step's observation."""
    level, meany, an, bn = state
    out = np.empty(horizon)
    for j in range(horizon):
        i = n + j
        mu = level + (1 - 1 / theta) * (
            an * (1 - alpha) ** i + bn * (1 - (1 - alpha) ** (i + 1)) / alpha
        )
        out[j] = mu
        level, prev_mean = alpha * mu + (1 - alpha) * level, meany
        meany = (i * meany + mu) / (i + 1)
        if dynamic:
            bn = ((i - 1) * bn + 6 * (mu - prev_mean) / (i + 1)) / (i + 2)
            an = meany - bn * (i + 2) / 2
    return out


class _ThetaSums:
    """The theta filter's last state over ``z[:n]`` for any ``z = a_j * y + b_j`` (``j``:
    the row's period, ``t % m``), from per-period sums over the rows so far. Every
    quantity of the state is affine in ``z`` (the filter's parameters fixed): the level
    (weights ``alpha (1 - alpha) ** (n - 1 - t)``), the mean, the linear fit's weighted
    mean (weights ``t + 1``) and, for the dynamic models, ``Bn``'s linear recursion. Each is
    kept per period for ``y`` and for ones, so that one origin's state is a sum over the
    ``m`` periods whatever the decomposition, without a pass over the rows."""

    def __init__(self, x: np.ndarray, m: int, alpha: float) -> None:
        self.x, self.m, self.alpha = x, m, alpha
        self.n = 0
        # rows: y's sums, then ones'; columns: the periods
        self.level, self.total, self.timed, self.slope = (np.zeros((2, m)) for _ in range(4))

    def advance(self, n: int) -> None:
        """Add rows up to ``n`` (exclusive)."""
        for t in range(self.n, n):
            j, value = t % self.m, np.array([self.x[t], 1.0])
            self.level *= 1 - self.alpha
            self.level[:, j] += value
            if t >= 1:  # Bn's update at row t reads the mean of the rows before it
                step = -self.total / t
                step[:, j] += value
                self.slope = ((t - 1) * self.slope + 6 * step / (t + 1)) / (t + 2)
            self.total[:, j] += value
            self.timed[:, j] += (t + 1) * value
        self.n = max(self.n, n)

    def state(
        self, a: np.ndarray, b: np.ndarray, start: float, dynamic: bool
    ) -> tuple[float, float, float, float]:
        """``(level, mean, An, Bn)`` after the rows added, for ``z = a_j * y + b_j``."""
        n, alpha = self.n, self.alpha

        def of(sums: np.ndarray) -> float:
            return float(a @ sums[0] + b @ sums[1])

        level = (1 - alpha) ** n * start + alpha * of(self.level)
        meany = of(self.total) / n
        if dynamic:
            bn = of(self.slope)
        else:  # init_state's linear fit over the whole prefix
            bn = 6 * (2 * of(self.timed) / n - (n + 1) * meany) / (n * n - 1)
        return level, meany, meany - (n + 1) * bn / 2, bn


def _seasonality(prefix: np.ndarray, m: int) -> float:
    """auto_theta's seasonality statistic: |the lag-``m`` autocorrelation| over its
    standard error (statsmodels' ``acf(prefix, nlags=m, fft=False)``)."""
    centred = prefix - prefix.mean()
    n = centred.size
    acov = np.array([centred[: n - k] @ centred[k:] for k in range(m + 1)]) / n
    r = acov[1:] / acov[0]
    return float(np.abs(r[-1]) / np.sqrt((1 + 2 * np.sum(r[:-1] ** 2)) / n))


class _PeriodMeans:
    """The seasonal indices of statsmodels' ``seasonal_decompose(x[:n], period=m)`` for
    growing ``n``, multiplicative or additive: the centred moving average (2 x m for an
    even ``m``; computed once, on first use) is defined on rows ``head .. n - 1 - tail`` of a
    prefix of ``n`` rows, with the values of the whole series there; each period's mean of
    the detrended values (divided by, or less, the average) is kept as a running sum per
    kind, then scaled as ``seasonal_decompose`` does."""

    def __init__(self, x: np.ndarray, m: int) -> None:
        self.x, self.m = x, m
        self.filt = (
            np.array([0.5] + [1] * (m - 1) + [0.5]) / m if m % 2 == 0 else np.repeat(1 / m, m)
        )
        self.head = int(np.ceil(len(self.filt) / 2.0) - 1)
        self.tail = int(np.ceil(len(self.filt) / 2.0) - len(self.filt) % 2)
        self.trend: np.ndarray | None = None
        # per kind: (detrended values, sums, counts); and the rows of them added so far
        self.kinds: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]] = {}
        self.upto: dict[str, int] = {}

    def _kind(self, kind: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        if kind not in self.kinds:
            if self.trend is None:
                from statsmodels.tsa.filters.filtertools import convolution_filter

                self.trend = np.asarray(convolution_filter(self.x, self.filt, 2))
            detrended = self.x / self.trend if kind == "multiplicative" else self.x - self.trend
            self.kinds[kind] = (detrended, np.zeros(self.m), np.zeros(self.m))
            self.upto[kind] = self.head
        return self.kinds[kind]

    def means(self, n: int, kind: str) -> np.ndarray:
        """The ``(m,)`` indices of the prefix of ``n`` rows (``n`` never less than before)."""
        detrended, sums, counts = self._kind(kind)
        end = n - self.tail  # rows head .. end - 1 have a trend in this prefix
        for row in range(self.upto[kind], end):
            sums[row % self.m] += detrended[row]
            counts[row % self.m] += 1
        self.upto[kind] = max(self.upto[kind], end)
        means = sums / counts
        return means / np.mean(means) if kind == "multiplicative" else means - np.mean(means)
