"""Windows and splits: hand-written windows, leakage, inversion, split errors."""

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import RAW, raises_one_line, series_of
from stacklstm.data import (
    DataConfig,
    Scaler,
    WindowSet,
    bundled_dataset_path,
    make_inference_windows,
    make_splits,
    prepare_series,
    read_table,
    split_rows,
)

EPS32 = float(np.finfo(np.float32).eps)


def to_original_tolerance(ws: WindowSet) -> float:
    """Bound on |to_original(y) - y_true| from y's float32 rounding (cumulated over horizon)."""
    finite = np.isfinite(ws.y)
    if not finite.any():
        return 0.0
    y_max = float(np.abs(ws.y[finite]).max())
    scale = float(ws.target_scale.max())
    true_max = float(np.nanmax(np.abs(ws.y_true)))
    return ws.horizon * (scale * EPS32 * (y_max + 1.0)) + 1e-12 * (1.0 + true_max) * ws.horizon


def assert_to_original_reproduces_y_true(ws: WindowSet) -> None:
    back = ws.to_original(ws.y)
    assert np.array_equal(np.isnan(back), np.isnan(ws.y_true))
    finite = np.isfinite(ws.y_true)
    err = np.abs(back[finite] - ws.y_true[finite])
    assert err.size == 0 or err.max() <= to_original_tolerance(ws)


def test_windows_arange_hand_written():
    series, cfg = series_of(
        np.arange(20.0), window=3, horizon=2, stride=2, val_fraction=0.2, test_fraction=0.2
    )
    splits, _ = make_splits(series, cfg)
    assert (splits.n_train, splits.n_val, splits.n_test) == (12, 4, 4)
    train, val, test = splits.train, splits.val, splits.test
    # aligned to the end: the last training window's last target is row 11
    assert train.origin.tolist() == [3, 5, 7, 9]
    assert train.x[..., 0].tolist() == [[1, 2, 3], [3, 4, 5], [5, 6, 7], [7, 8, 9]]
    assert train.y[..., 0].tolist() == [[4, 5], [6, 7], [8, 9], [10, 11]]
    assert val.origin.tolist() == [11, 13]
    assert val.x[..., 0].tolist() == [[9, 10, 11], [11, 12, 13]]
    assert val.y[..., 0].tolist() == [[12, 13], [14, 15]]
    # test windows start at every origin, from the last row before the test to the end
    assert test.origin.tolist() == [15, 16, 17]
    assert test.x[..., 0].tolist() == [[13, 14, 15], [14, 15, 16], [15, 16, 17]]
    assert test.y[..., 0].tolist() == [[16, 17], [17, 18], [18, 19]]
    assert test.y_true[..., 0].tolist() == [[16, 17], [17, 18], [18, 19]]
    assert test.last_value[..., 0].tolist() == [[15, 15], [16, 16], [17, 17]]
    assert train.x.dtype == np.float32
    assert train.y.dtype == np.float32
    assert train.y_true.dtype == np.float64
    assert train.origin_time is None


def test_windows_window_normalisation_hand_written():
    series, cfg = series_of(
        np.arange(20.0) ** 2,
        window=3,
        horizon=2,
        stride=2,
        normalize="window",
        val_fraction=0.2,
        test_fraction=0.2,
    )
    train = make_splits(series, cfg)[0].train
    assert train.origin.tolist() == [3, 5, 7, 9]
    # inputs and targets minus the last input value (9, 25, 49, 81)
    assert train.x[..., 0].tolist() == [[-8, -5, 0], [-16, -9, 0], [-24, -13, 0], [-32, -17, 0]]
    assert train.y[..., 0].tolist() == [[7, 16], [11, 24], [15, 32], [19, 40]]
    expected = [[16, 25], [36, 49], [64, 81], [100, 121]]
    assert train.to_original(train.y)[..., 0].tolist() == expected
    assert train.y_true[..., 0].tolist() == expected


def test_windows_difference_hand_written():
    # squares: first differences d[t] = 2t - 1
    series, cfg = series_of(
        np.arange(12.0) ** 2,
        window=2,
        horizon=2,
        difference=True,
        val_fraction=0.0,
        test_fraction=1 / 3,
    )
    splits, _ = make_splits(series, cfg)
    train, test = splits.train, splits.test
    assert (splits.n_train, splits.n_test) == (8, 4)
    assert train.origin.tolist() == [2, 3, 4, 5]  # origin 1 would need d[0], which does not exist
    assert train.x[..., 0].tolist() == [[1, 3], [3, 5], [5, 7], [7, 9]]
    assert train.y[..., 0].tolist() == [[5, 7], [7, 9], [9, 11], [11, 13]]
    assert train.y_true[..., 0].tolist() == [[9, 16], [16, 25], [25, 36], [36, 49]]
    assert train.to_original(train.y)[..., 0].tolist() == train.y_true[..., 0].tolist()
    assert test.origin.tolist() == [7, 8, 9]
    assert test.x[..., 0].tolist() == [[11, 13], [13, 15], [15, 17]]
    assert test.y_true[..., 0].tolist() == [[64, 81], [81, 100], [100, 121]]
    assert len(splits.val) == 0
    assert splits.val.x.shape == (0, 2, 1)


def test_windows_difference_scaled_normalised_hand_written():
    # training differences 1, 3, ..., 13: mean 7, std 4
    series, cfg = series_of(
        np.arange(12.0) ** 2,
        window=2,
        horizon=2,
        difference=True,
        val_fraction=0.0,
        test_fraction=1 / 3,
        scaler="standard",
        normalize="window",
    )
    splits, scaler = make_splits(series, cfg)
    assert scaler.center.tolist() == [7.0]
    assert scaler.scale.tolist() == [4.0]
    train = splits.train
    # origin 2: scaled inputs (1, 3) -> (-1.5, -1), anchor -1; scaled targets (5, 7) -> (-0.5, 0)
    assert train.x[0, :, 0].tolist() == [-0.5, 0.0]
    assert train.y[0, :, 0].tolist() == [0.5, 1.0]
    assert train.anchor[:, 0].tolist() == [-1.0, -0.5, 0.0, 0.5]
    assert train.to_original(train.y)[..., 0].tolist() == train.y_true[..., 0].tolist()


def test_windows_features_are_inputs_not_targets():
    values = np.stack([np.arange(10.0), 100.0 + np.arange(10.0)], axis=1)
    series, cfg = series_of(
        values, window=2, horizon=1, val_fraction=0.0, test_fraction=0.0, normalize="window"
    )
    train = make_splits(series, cfg)[0].train
    assert series.columns == ("v", "f1")
    assert series.n_targets == 1
    assert train.x.shape == (8, 2, 2)
    assert train.y.shape == (8, 1, 1)
    assert train.x[0].tolist() == [[-1, 100], [0, 101]]  # only the target is normalised
    assert train.y[:, 0, 0].tolist() == [1.0] * 8


def test_seasonal_naive_and_last_value_hand_written():
    series, cfg = series_of(np.arange(20.0), window=3, horizon=3, stride=1)
    ws = make_inference_windows(series, cfg, make_splits(series, cfg)[1])
    assert ws.origin[:2].tolist() == [2, 3]
    # season 2, origin 2: rows 1, 2, then 1 again (never after the origin)
    assert ws.seasonal_naive(2)[0, :, 0].tolist() == [1, 2, 1]
    assert ws.seasonal_naive(2)[3, :, 0].tolist() == [4, 5, 4]  # origin 5
    # season 4, origin 2: row -1 is before the data -> last value 2
    assert ws.seasonal_naive(4)[0, :, 0].tolist() == [2, 0, 1]
    assert ws.seasonal_naive(1)[0, :, 0].tolist() == [2, 2, 2]
    assert ws.last_value[0, :, 0].tolist() == [2, 2, 2]
    with pytest.raises(ValueError, match="season"):
        ws.seasonal_naive(0)


@pytest.mark.parametrize(
    "overrides",
    [
        {},
        {"stride": 3},
        {"difference": True},
        {"scaler": "standard", "normalize": "window", "difference": True},
        {"scaler": "robust", "normalize": "window"},
    ],
)
def test_no_training_window_sees_val_or_test_rows(overrides):
    rng = np.random.default_rng(0)
    values = rng.normal(size=100)
    values[70:85] += 1e6  # validation rows
    values[85:] += 2e6  # test rows
    series, cfg = series_of(values, window=5, horizon=3, **overrides)
    splits, scaler = make_splits(series, cfg)
    assert (splits.n_train, splits.n_val, splits.n_test) == (70, 15, 15)
    train, val = splits.train, splits.val
    assert np.abs(train.x).max() < 100
    assert np.abs(train.y).max() < 100
    assert np.abs(train.y_true).max() < 100
    assert np.abs(scaler.center).max() < 100
    assert scaler.scale.max() < 100
    assert train.target_index.max() == 69  # the last training window ends on the last row
    assert val.y_true.min() > 0.5e6
    assert val.y_true.max() < 1.5e6
    assert val.level.max() < 1.5e6  # no validation origin inside the test rows
    assert splits.test.y_true.min() > 1.5e6


@pytest.mark.parametrize(
    ("n_rows", "horizon", "test_fraction"),
    [(40, 2, 0.25), (41, 3, 0.3), (60, 1, 0.2), (50, 4, 0.24), (53, 5, 0.2)],
)
def test_every_test_origin_is_scored(n_rows, horizon, test_fraction):
    series, cfg = series_of(
        np.arange(float(n_rows)), window=4, horizon=horizon, test_fraction=test_fraction
    )
    splits, _ = make_splits(series, cfg)
    n_seen = n_rows - splits.n_test
    # every origin from the last row before the test rows to the last with all its targets
    assert splits.test.origin.tolist() == list(range(n_seen - 1, n_rows - horizon))
    # every test row is a target, as step 1 of the forecast made just before it
    assert np.unique(splits.test.target_index).tolist() == list(range(n_seen, n_rows))
    assert (splits.test.target_index[:, 0] == splits.test.origin + 1).all()
    assert splits.test.y_true[..., 0].tolist() == splits.test.target_index.astype(float).tolist()


def test_split_rows_counts():
    assert split_rows(20, DataConfig(val_fraction=0.2, test_fraction=0.2)) == (12, 4, 4)
    assert split_rows(2284, DataConfig()) == (1598, 343, 343)  # round(342.6) = 343
    assert split_rows(10, DataConfig(val_fraction=0.0, test_fraction=0.15)) == (8, 0, 2)


def random_walk_series(seed, n_rows, **overrides):
    rng = np.random.default_rng(seed)
    values = 50.0 + rng.normal(size=(n_rows, 2)).cumsum(axis=0)
    return series_of(values, **overrides)


@pytest.mark.parametrize("kind", ["standard", "minmax", "robust", "none"])
@pytest.mark.parametrize("normalize", ["none", "window"])
@pytest.mark.parametrize("difference", [False, True])
def test_to_original_reproduces_y_true(kind, normalize, difference):
    series, cfg = random_walk_series(
        3, 200, window=6, horizon=4, scaler=kind, normalize=normalize, difference=difference
    )
    splits, scaler = make_splits(series, cfg)
    for ws in (splits.train, splits.val, splits.test):
        assert len(ws) > 0
        assert_to_original_reproduces_y_true(ws)
    inference = make_inference_windows(series, cfg, scaler)
    assert_to_original_reproduces_y_true(inference)


@pytest.mark.parametrize("difference", [False, True])
def test_inference_windows_match_evaluation_windows(difference):
    frame = read_table(bundled_dataset_path())
    cfg = DataConfig(window=12, horizon=3, stride=2, difference=difference, season=52)
    series = prepare_series(frame, cfg)
    splits, scaler = make_splits(series, cfg)
    # the scaler as a checkpoint would store it
    restored = Scaler.from_dict(json.loads(json.dumps(scaler.to_dict())))
    inference = make_inference_windows(
        prepare_series(read_table(bundled_dataset_path()), cfg), cfg, restored
    )
    first = cfg.window - 1 + int(difference)
    assert inference.origin.tolist() == list(range(first, 2284))
    assert inference.origin_time[0] == series.times[first]
    rng = np.random.default_rng(4)
    for ws in (splits.train, splits.val, splits.test):
        rows = ws.origin - first
        assert np.array_equal(inference.origin[rows], ws.origin)
        assert np.array_equal(inference.x[rows], ws.x)
        prediction = rng.normal(size=ws.y.shape).astype(np.float32)
        subset = inference.take(rows)
        assert np.array_equal(subset.origin_time, ws.origin_time)
        assert np.array_equal(subset.to_original(prediction), ws.to_original(prediction))
    # the final origin forecasts past the data
    assert np.isnan(inference.y_true[-1]).all()
    assert np.isnan(inference.y[-1]).all()
    assert inference.y_true[-3, :2, 0].tolist() == series.values[-2:, 0].tolist()
    assert np.isnan(inference.y_true[-3, 2, 0])


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    n_rows=st.integers(40, 120),
    window=st.integers(1, 6),
    horizon=st.integers(1, 4),
    stride=st.integers(1, 3),
    kind=st.sampled_from(["standard", "minmax", "robust", "none"]),
    normalize=st.sampled_from(["none", "window"]),
    difference=st.booleans(),
    val_fraction=st.sampled_from([0.0, 0.1, 0.2]),
    test_fraction=st.sampled_from([0.0, 0.1, 0.25]),
)
def test_to_original_property(
    seed, n_rows, window, horizon, stride, kind, normalize, difference, val_fraction, test_fraction
):
    series, cfg = random_walk_series(
        seed,
        n_rows,
        window=window,
        horizon=horizon,
        stride=stride,
        scaler=kind,
        normalize=normalize,
        difference=difference,
        val_fraction=val_fraction,
        test_fraction=test_fraction,
    )
    splits, scaler = make_splits(series, cfg)
    inference = make_inference_windows(series, cfg, scaler)
    for ws in (splits.train, splits.val, splits.test):
        assert_to_original_reproduces_y_true(ws)
        assert np.array_equal(inference.x[ws.origin - inference.origin[0]], ws.x)
        assert ws.target_index.max(initial=-1) < n_rows
    assert_to_original_reproduces_y_true(inference)


def test_make_splits_errors():
    raises_one_line(
        r"training split has 14 of 20 rows \(val_fraction=0.15, test_fraction=0.15\) but window "
        r"\(13\) \+ horizon \(2\) = 15 rows are needed",
        make_splits,
        *series_of(np.arange(20.0), window=13, horizon=2),
    )
    raises_one_line(
        r"the validation split has 2 rows, fewer than horizon \(3\); raise `val_size`",
        make_splits,
        *series_of(np.arange(20.0), window=2, horizon=3, val_size=2),
    )
    # a fraction giving fewer rows than the horizon gives the horizon: round(0.1 * 20) = 2 -> 3
    splits, _ = make_splits(*series_of(np.arange(20.0), window=2, horizon=3, val_fraction=0.1))
    assert len(splits.val) == 1 and splits.val.origin.tolist() == [13]
    series, cfg = series_of(np.arange(20.0), window=8, horizon=2)
    raises_one_line(
        r"config expects \['w'\]",
        make_splits,
        series,
        DataConfig(**{**RAW, "target": ("w",), "window": 8}),
    )
    assert len(make_splits(series, cfg)[0].test) == 2  # 3 test rows, horizon 2: origins 16, 17


def test_windows_need_resolved_settings():
    series, cfg = series_of(np.arange(20.0), window=3, horizon=1)
    scaler = make_splits(series, cfg)[1]
    both = DataConfig(**{**RAW, "season": "auto"})  # window and season "auto"
    message = r"make_splits needs resolved settings, got season='auto', window='auto'; "
    raises_one_line(message, make_splits, series, both, error=ValueError)
    message = r"make_inference_windows needs resolved settings, got window='auto'; "
    raises_one_line(
        message, make_inference_windows, series, DataConfig(**RAW), scaler, error=ValueError
    )


def test_make_inference_windows_rejects_mismatched_scaler():
    series, cfg = series_of(np.arange(20.0), window=3, horizon=1)
    scaler = Scaler.fit(np.ones((3, 1)), "none", ("w",), 1)
    raises_one_line("fitted on columns \\['w'\\]", make_inference_windows, series, cfg, scaler)
