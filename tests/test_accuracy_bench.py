"""The accuracy benchmark's own pieces (benchmarks/accuracy.py): transforms, budget, targets."""

import numpy as np
import pandas as pd
import pytest

from helpers import load_benchmark
from stacklstm.data.season import classical_pattern

acc = load_benchmark("accuracy", "accuracy_bench")


def _spec(frame: pd.DataFrame, season: int, name: str = "toy"):
    return acc.SeriesSpec(name, season, "monthly", "test", lambda: frame.copy())


def _monthly(y) -> pd.DataFrame:
    y = np.asarray(y, dtype=float)
    return pd.DataFrame({"date": pd.date_range("2000-01-01", periods=len(y), freq="MS"), "y": y})


def test_classical_pattern_exact_on_trend_plus_season():
    # linear trend + a zero-sum pattern: the centred moving average is the trend exactly
    pattern = np.array([3.0, -1.0, 0.5, -2.5])
    t = np.arange(40.0)
    for season_pattern, season in ((pattern, 4), (np.array([2.0, -3.0, 1.0]), 3)):
        y = 7.0 - 0.4 * t + np.tile(season_pattern, 14)[:40]
        np.testing.assert_allclose(classical_pattern(y, season), season_pattern, atol=1e-12)


def test_classical_pattern_matches_statsmodels():
    statsmodels = pytest.importorskip("statsmodels.tsa.seasonal")
    y = np.random.default_rng(0).normal(size=50).cumsum() + np.tile([1.0, 4.0, -2.0, 0.0, 3.0], 10)
    for season in (4, 5):
        expected = statsmodels.seasonal_decompose(y, period=season).seasonal[:season]
        np.testing.assert_allclose(classical_pattern(y, season), expected, atol=1e-12)


def test_classical_pattern_refuses_short_series():
    with pytest.raises(ValueError, match="at least 2 seasons"):
        classical_pattern(np.arange(7.0), 4)


def test_transform_uses_training_rows_only_and_inverts_exactly():
    t = np.arange(48)
    y = 10.0 + np.tile([1.0, 3.0, 0.0, 5.0], 12) * (1 + t / 48)
    y_late = y.copy()
    y_late[30:] += 100.0  # rows after n_train must not change the fitted pattern
    recipe = acc.Recipe("x", log=True, deseason=True)
    first, late = (acc.make_transform(v, recipe, 4, n_train=30) for v in (y, y_late))
    np.testing.assert_array_equal(first.pattern, late.pattern)
    expected_pattern = classical_pattern(np.log1p(y[:30]), 4)
    np.testing.assert_array_equal(first.pattern, expected_pattern)
    model = first.forward(y)
    np.testing.assert_allclose(model, np.log1p(y) - np.tile(expected_pattern, 12), rtol=1e-14)
    rows = np.arange(48).reshape(12, 4)
    np.testing.assert_allclose(
        first.inverse(model.reshape(12, 4), rows), y.reshape(12, 4), rtol=1e-12
    )


def test_transform_leaves_out_what_does_not_apply():
    y = np.array([1.0, -2.0, 3.0, 4.0] * 6)
    t = acc.make_transform(y, acc.Recipe("x", log=True, deseason=True), 1, n_train=20)
    assert not t.log and t.pattern is None  # negative values; no season
    np.testing.assert_array_equal(t.forward(y), y)


def test_budget_reaches_min_steps():
    recipe = acc.Recipe("x", min_steps=1000)
    # 57 windows: batch 8 -> 7 steps an epoch; 143 epochs = 1001 steps; patience x 143/60
    assert acc.budget(recipe, 57, 32, 60, 15) == (8, 143, 36)
    assert acc.budget(recipe, 3000, 32, 60, 15) == (32, 60, 15)  # 93 x 60 steps already
    assert acc.budget(acc.Recipe("x"), 57, 32, 60, 15) == (32, 60, 15)


def test_parse_recipe_and_members():
    r = acc.parse_recipe(
        "r=lstm_hidden_size=16,normalize=none,linear_layer_sizes=8;4,deseason,ensemble=3"
    )
    assert r.settings == {"lstm_hidden_size": 16, "normalize": "none", "linear_layer_sizes": [8, 4]}
    assert (r.deseason, r.log, r.ensemble, r.min_steps) == (True, False, 3, 0)
    assert acc.members(r, 0) == [0, 1, 2] and acc.members(r, 2) == [6, 7, 8]
    assert r.n_members == 3 and acc.Recipe("one").n_members == 1
    library = acc.RECIPES["library-ensemble5"]  # the library's ensemble: one fit, 5 members
    assert (library.n_members, library.ensemble, library.settings) == (5, 1, {"ensemble": 5})
    assert acc.members(library, 1) == [1]
    with pytest.raises(ValueError, match="KEY=VALUE"):
        acc.parse_recipe("r=epochs")


def test_write_tables_keeps_the_prose(tmp_path):
    path = tmp_path / "doc.md"
    acc.write_tables(path, "table 1")
    assert path.read_text() == f"{acc.BEGIN}\ntable 1\n{acc.END}\n"
    path.write_text("intro\n" + path.read_text() + "discussion\n")
    acc.write_tables(path, "table 2")
    assert path.read_text() == f"intro\n{acc.BEGIN}\ntable 2\n{acc.END}\ndiscussion\n"


def test_task_targets_scale_and_naive_forecasts():
    y = np.arange(40.0) ** 1.5
    task = acc.make_task(_spec(_monthly(y), 4), horizon=2)
    # 40 rows: 8 test, 6 validation, 26 training; origins 31 .. 37 (every one, step 1)
    assert (task.n_train, task.n_seen) == (26, 32)
    np.testing.assert_array_equal(task.origin, np.arange(31, 38))
    np.testing.assert_array_equal(task.y_true[:, :, 0], y[task.origin[:, None] + [1, 2]])
    np.testing.assert_allclose(task.scale, [np.mean(np.abs(y[4:32] - y[:28]))])
    np.testing.assert_array_equal(
        task.naive["last_value"][:, :, 0], y[task.origin][:, None] + [0, 0]
    )
    np.testing.assert_array_equal(
        task.naive["seasonal_naive"][:, :, 0], y[task.origin[:, None] + [-3, -2]]
    )


def test_statistical_timed_matches_the_library_baselines():
    pytest.importorskip("statsforecast")
    from stacklstm.baselines import statistical_forecasts

    rng = np.random.default_rng(1)
    y = 20 + np.tile([2.0, -1.0, 3.0, -4.0], 15) + rng.normal(0, 0.5, 60).cumsum()
    task = acc.make_task(_spec(_monthly(y), 4), horizon=4)
    timed = acc.statistical_timed(task)
    library = statistical_forecasts(task.y[:, None], task.origin, 4, 4)
    for name in acc.STATISTICAL:
        # the library's AutoTheta sums its decomposition in another order: equal to rounding
        np.testing.assert_allclose(timed[name]["forecast"], library[name], rtol=1e-12, atol=0)
        assert timed[name]["fit_s"] >= 0 and timed[name]["forecast_s"] >= 0


def test_docstring_examples_run():
    import doctest

    result = doctest.testmod(acc, optionflags=doctest.NORMALIZE_WHITESPACE)
    # (the decomposition's example lives with the library's classical_pattern now)
    assert result.attempted >= 5 and result.failed == 0
