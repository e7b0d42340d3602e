"""Seasons: the inferred season and window, deseasonalising, log1p."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from helpers import monthly
from stacklstm.checks import DataError, SettingError
from stacklstm.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from stacklstm.config.auto import season_of_freq, window_for_season
from stacklstm.data import make_inference_windows, make_splits, prepare_series, scaler_from_dict
from stacklstm.data.season import (
    classical_pattern,
    is_seasonal,
)
from stacklstm.train.resolve import resolve_data

PATTERN = np.array([3.0, -1.0, 2.0, -4.0, 0.5, -0.5])  # sums to 0


def cfg(**kw):
    base = dict(
        target=("y",),
        time_column="date",
        season=6,
        window=4,
        horizon=3,
        scaler="standard",
        val_fraction=0.2,
        test_fraction=0.2,
        season_test=False,
        target_transform="none",
    )
    return DataConfig(**{**base, **kw})  # the additive pattern of the values themselves


@pytest.mark.parametrize(
    ("freq", "season"),
    [
        ("MS", 12),
        ("ME", 12),
        ("QS", 4),
        ("QE", 4),
        ("7D", 52),
        ("W-SUN", 52),
        ("D", 7),
        ("B", 5),
        ("h", 24),
        ("YS", 1),
        ("15min", 1),
        ("2MS", 6),
        ("1", 1),
        (None, 1),
    ],
)
def test_season_of_freq(freq, season):
    assert season_of_freq(freq) == season


def test_auto_window_is_two_seasons_within_bounds():
    assert [window_for_season(s) for s in (1, 4, 5, 7, 12, 24, 52, 365)] == [
        10,
        8,
        10,
        14,
        24,
        48,
        52,
        52,
    ]
    explicit = resolve_data(DataConfig(season=7), "MS")
    assert (explicit.season, explicit.window) == (7, 14)
    weekly = prepare_series(
        pd.DataFrame(
            {"date": pd.date_range("2000-01-02", periods=300, freq="7D"), "y": np.arange(300.0)}
        ),
        DataConfig(target=("y",)),
    )
    splits, _ = make_splits(weekly, resolve_data(DataConfig(target=("y",)), weekly.freq))
    assert (weekly.freq, splits.train.window) == ("7D", 52)


def test_classical_pattern_is_exact_on_trend_plus_season():
    t = np.arange(36.0)
    values = 100 + 0.7 * t + np.tile(PATTERN, 6)
    np.testing.assert_allclose(classical_pattern(values, 6), PATTERN, atol=1e-12)
    odd = np.array([2.0, -3.0, 1.0])
    np.testing.assert_allclose(
        classical_pattern(5 - 0.2 * t[:15] + np.tile(odd, 5), 3), odd, atol=1e-12
    )
    with pytest.raises(ValueError, match="at least 2 seasons"):
        classical_pattern(values[:11], 6)


def test_deseasonalised_model_space_and_its_exact_inverse():
    n = 60  # train 36 rows, val 12, test 12
    t = np.arange(n, dtype=float)
    values = 10 + 0.5 * t + np.tile(PATTERN, n // 6)
    series = prepare_series(monthly(values), cfg())
    splits, scaler = make_splits(series, cfg())
    assert splits.n_train == 36
    np.testing.assert_allclose(scaler.seasonal.pattern[0, :, 0], PATTERN, atol=1e-12)
    # the targets the model sees are the trend alone, scaled: a straight line
    held = splits.train.held
    trend = (10 + 0.5 * t - scaler.center[0]) / scaler.scale[0]
    np.testing.assert_allclose(held.model[:, 0], trend, atol=1e-12)
    assert held.original[:, 0].tolist() == values.tolist()  # the report's values are untouched
    for windows in (splits.train, splits.val, splits.test):  # exact inverse (float64 targets)
        rows = np.minimum(windows.target_index, n - 1)
        y64 = held.model[rows, :1] - windows.anchor[:, None, :]
        np.testing.assert_allclose(windows.to_original(y64), windows.y_true, atol=1e-11)
    # fitted on the training rows only: other validation and test values, same pattern
    changed = values.copy()
    changed[36:] += np.random.default_rng(0).normal(0, 50, n - 36)
    _, again = make_splits(prepare_series(monthly(changed), cfg()), cfg())
    assert again.seasonal.pattern.tolist() == scaler.seasonal.pattern.tolist()
    assert scaler_from_dict(json.loads(json.dumps(scaler.to_dict()))).to_dict() == scaler.to_dict()


def test_deseasonalised_differences_invert_exactly():
    n = 60
    values = 10 + 0.5 * np.arange(n) + np.tile(PATTERN, n // 6)
    c = cfg(difference=True, scaler="none")  # constant differences: no spread to scale by
    splits, _ = make_splits(prepare_series(monthly(values), c), c)
    held, test = splits.test.held, splits.test
    rows = np.minimum(test.target_index, n - 1)
    y64 = held.model[rows, :1] - test.anchor[:, None, :]
    np.testing.assert_allclose(test.to_original(y64), test.y_true, atol=1e-11)
    np.testing.assert_allclose(held.model[1:, 0], 0.5, atol=1e-12)  # the slope alone


def test_phases_follow_the_time_stamps_of_a_later_table():
    n = 60
    values = 10 + 0.5 * np.arange(n) + np.tile(PATTERN, n // 6)
    _, scaler = make_splits(prepare_series(monthly(values), cfg()), cfg())
    # the same series from its 5th month: phases count months from the fitted table's start
    later = prepare_series(monthly(values[5:], start="2000-06-01"), cfg())
    windows = make_inference_windows(later, cfg(), scaler)
    assert windows.held.phase0.tolist() == [5]
    np.testing.assert_allclose(
        windows.held.model[:, 0] * scaler.scale[0] + scaler.center[0],
        10 + 0.5 * np.arange(5, n),
        atol=1e-11,
    )
    off_grid = monthly(values)
    off_grid["date"] += pd.Timedelta(days=14)  # the 15th of each month
    with pytest.raises(DataError, match="not on the MS grid"):
        make_inference_windows(prepare_series(off_grid, cfg()), cfg(), scaler)


def test_season_window_fits_the_pattern_on_the_last_seasons_at_the_series_phase():
    n = 104  # train 62 rows: not whole seasons, so the first row fitted on is mid-season
    old, new = PATTERN, np.roll(PATTERN, 2) * 3  # the pattern changed after 3 seasons
    values = 10 + 0.5 * np.arange(n) + np.r_[np.tile(old, 3), np.resize(new, n - 18)]
    splits, scaler = make_splits(prepare_series(monthly(values), cfg()), cfg())
    train = splits.n_train
    assert train == 62
    # every training row: a mix of both patterns
    whole = classical_pattern(values[:train], 6)
    np.testing.assert_allclose(scaler.seasonal.pattern[0, :, 0], whole, atol=1e-12)
    # the last 5 seasons (rows 32-61): the new pattern alone, phase 0 at the series' row 0
    c = cfg(season_window=5)
    _, recent = make_splits(prepare_series(monthly(values), c), c)
    np.testing.assert_allclose(recent.seasonal.pattern[0, :, 0], new, atol=1e-12)
    # 8 seasons start at row 14, inside the old pattern: by hand, rolled to row 0's phase
    c8 = cfg(season_window=8)
    _, eight = make_splits(prepare_series(monthly(values), c8), c8)
    by_hand = classical_pattern(values[14:train], 6)  # phase 0 at row 14
    np.testing.assert_allclose(eight.seasonal.pattern[0, :, 0], np.roll(by_hand, 14 % 6))
    # a window longer than the training rows: every training row
    c20 = cfg(season_window=20)
    _, longer = make_splits(prepare_series(monthly(values), c20), c20)
    np.testing.assert_allclose(longer.seasonal.pattern[0, :, 0], whole, atol=1e-12)
    with pytest.raises(SettingError, match="season_window"):
        cfg(season_window=1)


def test_a_panels_default_pattern_is_its_last_10_seasons_and_one_series_every_row():
    n = 160  # 96 training rows: 16 seasons, the last 10 of them from row 36 (phase 0)
    old, new = PATTERN, np.roll(PATTERN, 2) * 3  # the pattern changed after 4 seasons
    values = 10 + np.r_[np.tile(old, 4), np.resize(new, n - 24)]
    frame = monthly(values)
    panel = pd.concat([frame.assign(id="a"), frame.assign(id="b", y=2 * frame["y"])])
    c = cfg(id_column="id")  # season_window "auto", as every default
    splits, scaler = make_splits(prepare_series(panel, c), c)
    assert splits.n_train == 2 * 96  # training rows of both series
    np.testing.assert_allclose(scaler.seasonal.pattern[0, :, 0], new, atol=1e-12)
    np.testing.assert_allclose(scaler.seasonal.pattern[1, :, 0], 2 * new, atol=1e-12)
    # none: every training row, as one series gets by default
    c_all = cfg(id_column="id", season_window=None)
    _, every = make_splits(prepare_series(panel, c_all), c_all)
    whole = classical_pattern(values[:96], 6)
    np.testing.assert_allclose(every.seasonal.pattern[0, :, 0], whole, atol=1e-12)
    _, single = make_splits(prepare_series(frame, cfg()), cfg())
    np.testing.assert_allclose(single.seasonal.pattern[0, :, 0], whole, atol=1e-12)
    assert not np.allclose(whole, new, atol=0.1)  # the two fits differ


def test_no_pattern_without_two_seasons_of_training_rows_or_when_off():
    values = np.arange(18.0)  # 10 training rows < 2 x 6 rows
    _, scaler = make_splits(prepare_series(monthly(values), cfg()), cfg())
    assert scaler.seasonal is None and "seasonal" not in scaler.to_dict()
    long = 10 + np.tile(PATTERN, 10)
    _, off = make_splits(
        prepare_series(monthly(long), cfg(deseasonalize=False)), cfg(deseasonalize=False)
    )
    assert off.seasonal is None


def _bartlett_reference(values, season):
    """The test from statsmodels' autocorrelations: |r_m| > 1.645 sqrt((1 + 2 sum r_k^2) / n)."""
    from statsmodels.tsa.stattools import acf

    r = acf(values, nlags=season, fft=False)[1:]
    return abs(r[-1]) > 1.645 * np.sqrt((1 + 2 * np.sum(r[:-1] ** 2)) / len(values))


def test_the_season_test_is_bartletts_on_the_autocorrelations():
    pytest.importorskip("statsmodels")
    rng = np.random.default_rng(3)
    t = np.arange(72.0)
    cases = [
        rng.normal(size=72) + amp * np.sin(2 * np.pi * t / 12) for amp in np.linspace(0, 1, 25)
    ]
    answers = [is_seasonal(x, 12) for x in cases]
    assert answers == [bool(_bartlett_reference(x, 12)) for x in cases]
    assert not answers[0] and answers[-1]  # both outcomes occur: the threshold is exercised
    assert not is_seasonal(cases[-1][:35], 12)  # fewer than 3 seasons
    assert is_seasonal(cases[-1][:36], 12) == bool(_bartlett_reference(cases[-1][:36], 12))
    assert not is_seasonal(np.full(48, 2.0), 12) and not is_seasonal(cases[-1], 1)


def test_season_test_leaves_a_series_without_a_significant_season_as_it_is():
    rng = np.random.default_rng(0)
    n = 90  # 54 training rows: 9 seasons of 6
    seasonal = 10 + np.tile(PATTERN, n // 6) + rng.normal(0, 0.3, n)
    noise = 10 + rng.normal(0, 2.0, n)
    frame = pd.concat([monthly(seasonal).assign(id="a"), monthly(noise).assign(id="b")])
    c = cfg(id_column="id", season_test=True)
    splits, scaler = make_splits(prepare_series(frame, c), c)
    train = splits.n_train // 2
    assert is_seasonal(seasonal[:train], 6) and not is_seasonal(noise[:train], 6)
    np.testing.assert_allclose(
        scaler.seasonal.pattern[0, :, 0], classical_pattern(seasonal[:train], 6), atol=1e-12
    )
    assert not scaler.seasonal.pattern[1].any()  # "b": nothing removed
    _, untested = make_splits(prepare_series(frame, cfg(id_column="id")), cfg(id_column="id"))
    np.testing.assert_allclose(
        untested.seasonal.pattern[1, :, 0], classical_pattern(noise[:train], 6), atol=1e-12
    )
    only_noise = prepare_series(monthly(noise), cfg(season_test=True))
    assert make_splits(only_noise, cfg(season_test=True))[1].seasonal is None


def test_log1p_transform_inverts_exactly_and_clips_at_zero():
    n = 60
    values = np.exp(1 + 0.02 * np.arange(n)) * np.tile([1.0, 2.0, 0.5, 1.5, 0.8, 1.2], n // 6)
    c = cfg(target_transform="log1p")
    splits, scaler = make_splits(prepare_series(monthly(values), c), c)
    held, test = splits.test.held, splits.test
    assert held.transformed and held.transform == "log1p" and scaler.seasonal is not None
    np.testing.assert_allclose(  # the pattern is fitted on log1p: a multiplicative season
        scaler.seasonal.pattern[0, :, 0],
        classical_pattern(np.log1p(values[: splits.n_train]), 6),
        atol=1e-12,
    )
    rows = np.minimum(test.target_index, n - 1)
    y64 = held.model[rows, :1] - test.anchor[:, None, :]
    np.testing.assert_allclose(test.to_original(y64), test.y_true, rtol=1e-12)
    low = test.to_original(np.full((len(test), 3, 1), -1e3))  # far below log1p(0)
    assert (low == 0).all()
    with pytest.raises(DataError, match="non-negative"):
        make_splits(prepare_series(monthly(values - 5), c), c)


def test_auto_settings_are_recorded_and_resume_bit_identically(tmp_path):
    from stacklstm.run import fit
    from stacklstm.rundir.info import read_run_info

    rng = np.random.default_rng(0)
    values = 50 + 0.3 * np.arange(96) + np.tile(PATTERN * 3, 16) + rng.normal(0, 0.5, 96)
    path = tmp_path / "m.csv"
    monthly(values).to_csv(path, index=False)
    run_cfg = RunConfig(
        DataConfig(target=("y",), horizon=2),
        ModelConfig(lstm_hidden_size=4, num_lstm_layers=1, linear_layer_sizes=()),
        TrainConfig(min_steps=40, baselines="naive", retrain="off"),  # all's resume: test_retrain
    )
    whole = fit(run_cfg, tmp_path / "a", data_path=path, quiet=True)
    saved = read_run_info(tmp_path / "a").config
    # monthly: season 12, window 24; 96 rows -> 67 train, 14 val; 42 windows: batch 8, 5 steps
    # an epoch, 60 epochs = 300 steps >= 40
    assert (saved.data.season, saved.data.window) == (12, 24)
    assert (saved.train.batch_size, saved.train.epochs, saved.train.patience) == (8, 60, 15)
    assert saved.data.deseasonalize and saved.train.min_steps == 40
    part = fit(run_cfg, tmp_path / "b", data_path=path, quiet=True, stop_after_steps=7)
    assert part.report is None
    resumed = fit(run_cfg, tmp_path / "b", data_path=path, quiet=True, resume=True)
    assert resumed.step == whole.step and resumed.best_step == whole.best_step
    np.testing.assert_array_equal(resumed.report.test_forecast, whole.report.test_forecast)
