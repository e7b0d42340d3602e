"""Synthetic series (stacklstm.datasets.synthetic): reproducible, the properties each
generator promises (a periodic kernel repeats at its period, an ETS season shows at its lag,
ARIMA's parts are stationary and invertible), and the panel's long frame."""

import numpy as np
import pandas as pd
import pytest

from stacklstm.datasets import synthetic as syn


def test_the_same_seed_gives_the_same_series_and_another_seed_others():
    for make in (
        lambda seed: syn.kernel_synth(4, 40, seed=seed, periods=(12,)),
        lambda seed: syn.ets(4, 40, seed=seed, period=4),
        lambda seed: syn.arima(4, 40, seed=seed),
    ):
        np.testing.assert_array_equal(make(3), make(3))
        assert not np.allclose(make(3), make(4))
        assert np.isfinite(make(3)).all()
    frame = syn.synthetic_panel(6, 30, freq="W", seed=5)
    pd.testing.assert_frame_equal(frame, syn.synthetic_panel(6, 30, freq="W", seed=5))


def test_a_periodic_kernel_repeats_at_its_period_and_a_draw_with_it():
    length, period = 48, 12
    t = np.linspace(0.0, 1.0, length)
    periodic = syn._periodic(period / (length - 1), 1.0)(t, t)
    # covariance 1 at every multiple of the period: the draws repeat exactly
    np.testing.assert_allclose(np.diagonal(periodic, offset=period), 1.0, atol=1e-12)
    assert np.diagonal(periodic, offset=period // 2).max() < 0.2
    bank = syn.kernel_bank(length, (period,))
    assert len(bank) == 5 + 3 + 6 + 2 * 7  # periods 2, 3, 4, 6, 7, 12, 24 fit in 48 steps
    for kernel in bank:  # each a covariance: symmetric, positive semi-definite
        cov = kernel(t, t)
        np.testing.assert_allclose(cov, cov.T, atol=1e-12)
        assert np.linalg.eigvalsh(cov).min() > -1e-8 * max(1.0, np.abs(cov).max())


def test_an_ets_season_shows_at_its_lag():
    y = syn.ets(20, 96, seed=2, period=12)
    steps = np.diff(y, axis=1)

    def autocorrelation(x, lag):
        x = x - x.mean()
        return float(np.sum(x[lag:] * x[:-lag]) / np.sum(x * x))

    at_season = [autocorrelation(s, 12) for s in steps]
    at_half = [autocorrelation(s, 6) for s in steps]
    assert np.median(at_season) > 0.5 > np.median(at_half)


def test_arima_parts_are_stationary_and_invertible():
    rng = np.random.default_rng(0)
    for order in range(4):
        c = syn.stable_polynomial(order, rng)
        assert c.shape == (order + 1,) and c[0] == 1.0
        roots = np.roots(c[::-1])  # of c[0] + c[1] z + ...: all outside the unit circle
        assert len(roots) == order and (np.abs(roots) > 1.0).all()


def test_the_panel_is_a_long_frame_at_its_time_step():
    frame = syn.synthetic_panel(5, 24, freq="QS", seed=0)
    assert frame.columns.tolist() == ["unique_id", "ds", "y"]
    assert frame.groupby("unique_id").size().tolist() == [24] * 5
    first = frame[frame["unique_id"] == "QS-0"]["ds"]
    np.testing.assert_array_equal(first, pd.date_range("2000-01-01", periods=24, freq="QS"))
    with pytest.raises(ValueError, match="freq must be one of"):
        syn.synthetic_panel(2, 10, freq="Q", seed=0)


@pytest.mark.parametrize("freq", sorted(syn.PERIODS))
def test_the_library_reads_the_season_the_panel_was_made_with(freq):
    """A panel of each time step, read as a run reads it, gets the season its generator
    used first (1 where it used none)."""
    from stacklstm.config import DataConfig
    from stacklstm.config.auto import season_of_freq
    from stacklstm.data import prepare_series

    frame = syn.synthetic_panel(3, 60, freq=freq, seed=1)
    cfg = DataConfig(target=("y",), time_column="ds", id_column="unique_id", window=8)
    series = prepare_series(frame, cfg)
    assert season_of_freq(series.freq) == (syn.PERIODS[freq] or (1,))[0]
