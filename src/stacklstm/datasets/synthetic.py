"""Synthetic series for pretraining and testing: Gaussian-process draws from random kernel
mixtures (KernelSynth), exponential-smoothing and ARIMA simulations, at any time step.

KernelSynth follows Ansari et al., "Chronos: Learning the Language of Time Series" (2024),
Algorithm 2: draw up to :data:`MAX_KERNELS` kernels from a bank (constant, white noise,
linear, RBF, rational quadratic, periodic with the periods of the time step), join them with
``+`` or ``*`` at random, and draw one series from the Gaussian process with that kernel. The
simulations add what a Gaussian process rarely gives: additive or multiplicative seasons with
a moving level and trend (ETS), and ARMA noise, integrated or not (ARIMA), with level shifts.
Everything comes from one ``numpy.random.Generator``: the same seed gives the same series.

Example:
    >>> y = kernel_synth(3, 64, seed=0, periods=(12,))
    >>> y.shape, bool(np.isfinite(y).all())
    ((3, 64), True)
    >>> frame = synthetic_panel(4, 48, freq="MS", seed=1)
    >>> frame.columns.tolist(), frame["unique_id"].nunique(), len(frame)
    (['unique_id', 'ds', 'y'], 4, 192)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pandas as pd

__all__ = [
    "MAX_KERNELS",
    "PERIODS",
    "arima",
    "ets",
    "kernel_bank",
    "kernel_synth",
    "stable_polynomial",
    "synthetic_panel",
]

#: The most kernels one KernelSynth series joins (Chronos: 5).
MAX_KERNELS = 5
#: The seasonal periods of each time step (pandas offset aliases), the periodic kernels' and
#: the simulations' choice; other periods are drawn too (:func:`kernel_bank`).
PERIODS: dict[str, tuple[int, ...]] = {
    "h": (24, 168),
    "D": (7, 365),
    "B": (5,),
    "W": (52,),
    "MS": (12,),
    "QS": (4,),
    "YS": (),
}

#: ``(x (n,), x' (n,)) -> (n, n)`` covariance on times scaled to ``[0, 1]``.
Kernel = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _constant(c: float) -> Kernel:
    return lambda a, b: np.full((len(a), len(b)), c)


def _white(noise: float) -> Kernel:
    return lambda a, b: noise * (a[:, None] == b[None, :])


def _linear(c: float) -> Kernel:
    return lambda a, b: (a[:, None] - c) * (b[None, :] - c)


def _rbf(scale: float) -> Kernel:
    return lambda a, b: np.exp(-0.5 * ((a[:, None] - b[None, :]) / scale) ** 2)


def _rational(scale: float, alpha: float) -> Kernel:
    return lambda a, b: (1 + ((a[:, None] - b[None, :]) ** 2) / (2 * alpha * scale**2)) ** -alpha


def _periodic(period: float, scale: float) -> Kernel:
    def k(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        gap = np.abs(a[:, None] - b[None, :])
        return np.exp(-2 * np.sin(np.pi * gap / period) ** 2 / scale**2)

    return k


def kernel_bank(length: int, periods: Sequence[int] = ()) -> list[Kernel]:
    """The kernels KernelSynth draws from, for series of ``length`` steps: constants, white
    noise, linear trends, RBF and rational-quadratic kernels of several length scales, and
    periodic kernels with the ``periods`` (in steps) of the time step and 2, 3, 4, 6, 7, 12,
    24, 52 steps, each with two length scales."""
    bank: list[Kernel] = [_constant(1.0), _white(0.1), _white(1.0), _linear(0.0), _linear(1.0)]
    bank += [_rbf(s) for s in (0.1, 1.0, 10.0)]
    bank += [_rational(s, a) for s in (0.1, 1.0) for a in (0.1, 1.0, 10.0)]
    steps = sorted({*periods, 2, 3, 4, 6, 7, 12, 24, 52})
    bank += [_periodic(p / length, s) for p in steps if p < length for s in (0.5, 1.0)]
    return bank


def kernel_synth(
    n: int, length: int, *, seed: int, periods: Sequence[int] = (), max_kernels: int = MAX_KERNELS
) -> np.ndarray:
    """``(n, length)`` draws of Gaussian processes whose kernel joins 1 to ``max_kernels``
    kernels of :func:`kernel_bank` by ``+`` or ``*``, each series its own kernel.

    Args:
        n: Series.
        length: Steps per series.
        seed: The generator's seed.
        periods: The seasonal periods of the time step (:data:`PERIODS`).
        max_kernels: The most kernels one series joins.
    """
    rng = np.random.default_rng(seed)
    t = np.linspace(0.0, 1.0, length)
    bank = kernel_bank(length, periods)
    out = np.empty((n, length))
    for i in range(n):
        chosen = rng.choice(len(bank), size=rng.integers(1, max_kernels + 1))
        cov = bank[chosen[0]](t, t)
        for j in chosen[1:]:
            cov = cov + bank[j](t, t) if rng.random() < 0.5 else cov * bank[j](t, t)
        cov = cov + 1e-6 * np.eye(length)  # a jitter keeps it positive definite
        # the eigendecomposition is stable where Cholesky fails on a nearly singular kernel
        values, vectors = np.linalg.eigh(cov)
        out[i] = vectors @ (np.sqrt(np.clip(values, 0.0, None)) * rng.standard_normal(length))
    return out


def ets(n: int, length: int, *, seed: int, period: int = 1) -> np.ndarray:
    """``(n, length)`` exponential-smoothing simulations: a level near 100 and a damped trend
    with random smoothing, a season of ``period`` steps (5-30 % of the level, additive or
    multiplicative; none for period 1), Gaussian noise, and a level shift in a third of the
    series."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, length))
    for i in range(n):
        alpha, beta, gamma = rng.uniform(0.05, 0.5), rng.uniform(0.0, 0.2), rng.uniform(0.0, 0.3)
        phi = rng.uniform(0.8, 1.0)
        level, trend = rng.uniform(50, 150), rng.normal(0, 1)
        amplitude = rng.uniform(0.05, 0.3) * level
        season = rng.normal(0, amplitude, period) if period > 1 else np.zeros(1)
        season -= season.mean()
        multiplicative = period > 1 and rng.random() < 0.5
        sigma = rng.uniform(0.5, 3.0)
        shift_at = rng.integers(length // 3, length) if rng.random() < 1 / 3 else None
        for k in range(length):
            s = season[k % len(season)]
            point = level + phi * trend
            y = point * (1 + s / level) if multiplicative else point + s
            error = rng.normal(0, sigma)
            out[i, k] = y + error
            level = point + alpha * error
            trend = phi * trend + beta * alpha * error
            season[k % len(season)] = s + gamma * (1 - alpha) * error * (period > 1)
            if shift_at is not None and k == shift_at:
                level += rng.normal(0, 0.2) * level
    return out


def stable_polynomial(order: int, rng: np.random.Generator) -> np.ndarray:
    """``(order + 1,)`` coefficients ``c`` of ``c[0] + c[1] z + ... = prod_j (1 - z / r_j)``
    with real roots ``r_j`` of modulus 1.2 to 3 (outside the unit circle: a stationary AR or
    an invertible MA part), ``c[0] = 1``."""
    roots = rng.uniform(1.2, 3.0, order) * rng.choice([-1.0, 1.0], order)
    return np.poly(1 / roots) if order else np.ones(1)


def arima(n: int, length: int, *, seed: int, max_order: int = 3) -> np.ndarray:
    """``(n, length)`` ARIMA(p, d, q) simulations: stationary AR and invertible MA parts of
    orders up to ``max_order`` (roots drawn outside the unit circle), integrated once in half
    the series, plus a constant level."""
    rng = np.random.default_rng(seed)
    out = np.empty((n, length))
    burn = 50
    for i in range(n):
        p, q = rng.integers(0, max_order + 1, size=2)
        ar, ma = -stable_polynomial(p, rng)[1:], stable_polynomial(q, rng)[1:]
        noise = rng.standard_normal(length + burn)
        x = np.zeros(length + burn)
        for k in range(length + burn):
            past_x = sum(ar[j] * x[k - 1 - j] for j in range(len(ar)) if k - 1 - j >= 0)
            past_e = sum(ma[j] * noise[k - 1 - j] for j in range(len(ma)) if k - 1 - j >= 0)
            x[k] = past_x + noise[k] + past_e
        x = x[burn:]
        out[i] = (np.cumsum(x) if rng.random() < 0.5 else x) + rng.uniform(-10, 10)
    return out


def synthetic_panel(n: int, length: int, *, freq: str, seed: int) -> pd.DataFrame:
    """A long frame (``unique_id, ds, y``) of ``n`` series of ``length`` steps at the time
    step ``freq`` (a key of :data:`PERIODS`), stamped from 2000-01-01: about a half
    KernelSynth draws, a quarter ETS and a quarter ARIMA simulations, in a random order."""
    if freq not in PERIODS:
        raise ValueError(f"freq must be one of {', '.join(PERIODS)}, got {freq!r}")
    rng = np.random.default_rng(seed)
    periods = PERIODS[freq]
    kinds = rng.choice(3, size=n, p=[0.5, 0.25, 0.25])
    seeds = rng.integers(0, 2**31, size=3)
    parts = [
        kernel_synth(int((kinds == 0).sum()), length, seed=int(seeds[0]), periods=periods),
        ets(
            int((kinds == 1).sum()),
            length,
            seed=int(seeds[1]),
            period=periods[0] if periods and periods[0] < length // 2 else 1,
        ),
        arima(int((kinds == 2).sum()), length, seed=int(seeds[2])),
    ]
    taken = [0, 0, 0]
    rows = []
    for kind in kinds:
        rows.append(parts[kind][taken[kind]])
        taken[kind] += 1
    stamps = pd.date_range("2000-01-01", periods=length, freq=freq)
    return pd.DataFrame(
        {
            "unique_id": np.repeat([f"{freq}-{i}" for i in range(n)], length),
            "ds": np.tile(stamps, n),
            "y": np.concatenate(rows) if rows else np.zeros(0),
        }
    )
