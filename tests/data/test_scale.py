"""Scalers: fitted on training rows only, hand-computed statistics, inversion."""

import json

import numpy as np
import pytest

from helpers import series_of
from stacklstm.data import DataError, PanelScaler, Scaler, make_splits


def test_scaler_fitted_on_training_rows_only():
    rng = np.random.default_rng(1)
    values = rng.normal(size=(60, 2)).cumsum(axis=0)
    series, cfg = series_of(values, window=4, horizon=2, scaler="standard", normalize="window")
    splits, scaler = make_splits(series, cfg)
    changed = values.copy()
    changed[splits.n_train :] = changed[splits.n_train :] * 10.0 + 5.0  # only val and test rows
    splits2, scaler2 = make_splits(*series_of(changed, window=4, horizon=2, scaler="standard"))
    assert np.array_equal(scaler.center, scaler2.center)
    assert np.array_equal(scaler.scale, scaler2.scale)
    assert not np.array_equal(splits.test.y_true, splits2.test.y_true)
    n = splits.n_train
    assert np.allclose(scaler.center, values[:n].mean(axis=0), rtol=1e-14, atol=1e-14)
    assert np.allclose(scaler.scale, values[:n].std(axis=0), rtol=1e-14)
    changed[0] += 1.0  # a training row: now the scaler must move
    _, scaler3 = make_splits(*series_of(changed, window=4, horizon=2, scaler="standard"))
    assert not np.array_equal(scaler.center, scaler3.center)


@pytest.mark.parametrize(
    ("kind", "center", "scale"),
    [
        ("standard", [4.0, 10.0], [np.sqrt(12.5), 1.0]),
        ("minmax", [1.0, 10.0], [9.0, 1.0]),
        ("robust", [2.5, 10.0], [3.0, 1.0]),  # quartiles 1.75 and 4.75
        ("mean", [0.0, 0.0], [4.0, 10.0]),  # divides by the mean absolute value
        ("naive", [4.0, 10.0], [3.0, 1.0]),  # steps 1, 1, 7: the naive forecast's mean error
        ("none", [0.0, 0.0], [1.0, 1.0]),
    ],
)
def test_scaler_statistics_hand_computed(kind, center, scale):
    values = np.array([[1.0, 10.0], [2.0, 10.0], [3.0, 10.0], [10.0, 10.0]])  # column 1 constant
    scaler = Scaler.fit(values, kind, ("a", "b"), 1)
    assert scaler.center.tolist() == pytest.approx(center, rel=1e-15)
    assert scaler.scale.tolist() == pytest.approx(scale, rel=1e-15)


def test_the_seasonal_naive_scaler_divides_by_the_seasonal_naive_error():
    # rows 1, 2, 3, 10, 4, 9 with season 2: changes over a season 2, 8, 1, -1, the mean
    # absolute one 3.0; the in-sample MAE of the seasonal naive forecast (MASE's scale)
    values = np.array([[1.0], [2.0], [3.0], [10.0], [4.0], [9.0]])
    scaler = Scaler.fit(values, "seasonal_naive", ("a",), 1, season=2)
    assert scaler.center.tolist() == pytest.approx([29.0 / 6.0], rel=1e-15)
    assert scaler.scale.tolist() == [3.0]
    naive = Scaler.fit(values, "naive", ("a",), 1, season=2)  # naive ignores the season
    assert naive.scale.tolist() == pytest.approx([(1 + 1 + 7 + 6 + 5) / 5], rel=1e-15)
    # season 1, or rows holding only one season: the one-row steps, as naive
    for season, rows in ((1, values), (6, values), (5, values[:5])):
        got = Scaler.fit(rows, "seasonal_naive", ("a",), 1, season=season).scale
        assert got.tolist() == Scaler.fit(rows, "naive", ("a",), 1).scale.tolist()


def test_a_panel_of_seasonal_naive_scalers_uses_each_series_own_rows():
    from stacklstm.data import PanelScaler

    values = np.array([[0.0], [1.0], [4.0], [9.0], [5.0], [5.0], [7.0], [3.0]])  # a: 0-3, b: 4-7
    s = PanelScaler.fit(
        values, np.array([0, 4, 8]), [4, 4], "seasonal_naive", ("y",), 1, ("a", "b"), season=2
    )
    assert s.scale[:, 0].tolist() == [(4 + 8) / 2, (2 + 2) / 2]


def test_a_panels_seasonal_naive_scale_is_each_series_mase_denominator():
    import pandas as pd

    from stacklstm.data import DataConfig, prepare_series

    rng = np.random.default_rng(3)
    values = {"a": rng.normal(size=40).cumsum(), "b": 5.0 * rng.normal(size=30).cumsum()}
    frames = [
        pd.DataFrame({"id": i, "t": pd.date_range("2000-01-01", periods=len(v), freq="QS"), "y": v})
        for i, v in values.items()
    ]
    frame = pd.concat(frames)
    cfg = DataConfig(
        target=("y",),
        time_column="t",
        id_column="id",
        window=4,
        horizon=2,
        season=4,
        scaler="seasonal_naive",
        deseasonalize=False,
    )
    splits, scaler = make_splits(prepare_series(frame, cfg), cfg)
    for k, (name, v) in enumerate(values.items()):
        train = v[: splits.rows[k][0]]  # the series' training rows
        expected = np.abs(train[4:] - train[:-4]).mean()
        assert scaler.scale[k].tolist() == pytest.approx([expected], rel=1e-12), name


def test_the_naive_scaler_of_one_row_divides_by_one():
    scaler = Scaler.fit(np.array([[5.0]]), "naive", ("a",), 1)  # no step to measure
    assert (scaler.center.tolist(), scaler.scale.tolist()) == ([5.0], [1.0])


@pytest.mark.parametrize(
    "kind", ["standard", "minmax", "robust", "mean", "naive", "seasonal_naive", "none"]
)
def test_scaler_inverse_restores_values_and_round_trips(kind):
    rng = np.random.default_rng(2)
    values = rng.normal(3.0, 5.0, size=(30, 3))
    scaler = Scaler.fit(values[:20], kind, ("a", "b", "c"), 2)
    scaled = scaler.transform(values)
    np.testing.assert_allclose(scaler.inverse_transform(scaled), values, rtol=1e-13, atol=1e-13)
    np.testing.assert_allclose(
        scaler.inverse_transform(scaled[:, :2], targets_only=True), values[:, :2], rtol=1e-13
    )
    restored = Scaler.from_dict(json.loads(json.dumps(scaler.to_dict())))
    assert np.array_equal(restored.transform(values), scaled)
    assert (restored.kind, restored.columns, restored.n_targets) == (kind, ("a", "b", "c"), 2)
    with pytest.raises(ValueError, match="3 scaler columns"):
        scaler.transform(values[:, :2])
    with pytest.raises(DataError, match="scaler keys"):
        Scaler.from_dict({"kind": kind})


def test_joined_panel_scalers_keep_each_series_and_refuse_a_mismatch():
    values = np.array([[0.0], [2.0], [10.0], [30.0]])
    a = PanelScaler.fit(values[:2], np.array([0, 2]), [2], "minmax", ("y",), 1, ("a",))
    b = PanelScaler.fit(values[2:], np.array([0, 2]), [2], "minmax", ("y",), 1, ("b",))
    both = a.joined(b)
    assert both.ids == ("a", "b")
    np.testing.assert_array_equal(both.center[:, 0], [0.0, 10.0])
    np.testing.assert_array_equal(both.scale[:, 0], [2.0, 20.0])
    with pytest.raises(ValueError, match=r"both scalers have series \['a'\]"):
        a.joined(a)
    other = PanelScaler.fit(values[2:], np.array([0, 2]), [2], "standard", ("y",), 1, ("c",))
    with pytest.raises(ValueError, match="cannot join a 'standard' scaler"):
        a.joined(other)
