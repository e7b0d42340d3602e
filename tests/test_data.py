"""Data pipeline: hand-written windows on small series, leakage, inversion, errors, batching."""

import doctest
import json

import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from stacklstm import data
from stacklstm.checks import SettingError
from stacklstm.data import (
    DataConfig,
    DataError,
    Scaler,
    WindowSet,
    bundled_dataset_path,
    iterate_batches,
    make_inference_windows,
    make_splits,
    prepare_series,
    process_slice,
    read_table,
    split_rows,
    steps_per_epoch,
)

EPS32 = float(np.finfo(np.float32).eps)
# readable numbers: no scaling, no window normalisation, row order as time
RAW = {"target": ("v",), "time_column": None, "scaler": "none", "normalize": "none"}


def series_of(values, **overrides):
    """Prepared series and config of one column ``v`` (and optional feature columns)."""
    values = np.asarray(values, dtype=np.float64)
    columns = {"v": values} if values.ndim == 1 else {"v": values[:, 0]}
    if values.ndim == 2:
        columns.update({f"f{j}": values[:, j] for j in range(1, values.shape[1])})
        overrides.setdefault("features", tuple(f"f{j}" for j in range(1, values.shape[1])))
    cfg = DataConfig(**{**RAW, **overrides})
    return prepare_series(pd.DataFrame(columns), cfg), cfg


def raises_one_line(match, fn, *args, error=DataError, **kwargs):
    with pytest.raises(error, match=match) as info:
        fn(*args, **kwargs)
    assert "\n" not in str(info.value)
    return info.value


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


# ---------------------------------------------------------------- bundled data set


def test_bundled_dataset_reads_and_prepares():
    frame = read_table(bundled_dataset_path())
    assert frame.columns.tolist() == ["date", "co2"]
    assert frame.shape == (2284, 2)
    assert int(frame["co2"].isna().sum()) == 59
    series = prepare_series(frame, DataConfig())
    assert len(series) == 2284
    assert series.n_filled == 59
    assert series.freq == "7D"
    assert series.times[0] == np.datetime64("1958-03-29")
    assert series.times[-1] == np.datetime64("2001-12-29")
    assert series.values[0, 0] == 316.1
    # 1958-05-10 is empty in the file: halfway between 1958-05-03 and 1958-05-17
    i = int(np.flatnonzero(series.times == np.datetime64("1958-05-10"))[0])
    row = frame.index[frame["date"] == "1958-05-10"][0]
    assert np.isnan(frame["co2"][row])
    assert series.values[i, 0] == pytest.approx(
        (series.values[i - 1, 0] + series.values[i + 1, 0]) / 2, rel=1e-12
    )


# ---------------------------------------------------------------- windows, hand-written


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
    # test windows step by horizon and end on the last row
    assert test.origin.tolist() == [15, 17]
    assert test.x[..., 0].tolist() == [[13, 14, 15], [15, 16, 17]]
    assert test.y[..., 0].tolist() == [[16, 17], [18, 19]]
    assert test.y_true[..., 0].tolist() == [[16, 17], [18, 19]]
    assert test.last_value[..., 0].tolist() == [[15, 15], [17, 17]]
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
    assert test.origin.tolist() == [7, 9]
    assert test.x[..., 0].tolist() == [[11, 13], [15, 17]]
    assert test.y_true[..., 0].tolist() == [[64, 81], [100, 121]]
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


# ---------------------------------------------------------------- leakage and coverage


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
def test_every_test_target_scored_at_most_once(n_rows, horizon, test_fraction):
    series, cfg = series_of(
        np.arange(float(n_rows)), window=4, horizon=horizon, test_fraction=test_fraction
    )
    splits, _ = make_splits(series, cfg)
    scored = np.sort(splits.test.target_index.ravel())
    n_test = splits.n_test
    assert np.unique(scored).size == scored.size
    assert scored.tolist() == list(range(n_rows - (n_test // horizon) * horizon, n_rows))
    if n_test % horizon == 0:
        assert scored.tolist() == list(range(n_rows - n_test, n_rows))
    assert splits.test.y_true[..., 0].ravel().tolist() == list(map(float, scored))


def test_split_rows_counts():
    assert split_rows(20, DataConfig(val_fraction=0.2, test_fraction=0.2)) == (12, 4, 4)
    assert split_rows(2284, DataConfig()) == (1598, 343, 343)  # round(342.6) = 343
    assert split_rows(10, DataConfig(val_fraction=0.0, test_fraction=0.15)) == (8, 0, 2)


# ---------------------------------------------------------------- scaler


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
        ("none", [0.0, 0.0], [1.0, 1.0]),
    ],
)
def test_scaler_statistics_hand_computed(kind, center, scale):
    values = np.array([[1.0, 10.0], [2.0, 10.0], [3.0, 10.0], [10.0, 10.0]])  # column 1 constant
    scaler = Scaler.fit(values, kind, ("a", "b"), 1)
    assert scaler.center.tolist() == pytest.approx(center, rel=1e-15)
    assert scaler.scale.tolist() == pytest.approx(scale, rel=1e-15)


@pytest.mark.parametrize("kind", ["standard", "minmax", "robust", "none"])
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


# ---------------------------------------------------------------- inversion and inference


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
    cfg = DataConfig(window=12, horizon=3, stride=2, difference=difference)
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


# ---------------------------------------------------------------- time stamps and gaps


def test_prepare_series_sorts_inserts_missing_stamps_and_fills():
    weeks = pd.date_range("2000-01-01", periods=6, freq="7D")
    frame = pd.DataFrame({"date": weeks.strftime("%Y-%m-%d"), "co2": [10, 20, 30, 40, np.nan, 60]})
    frame = frame.drop(index=3).iloc[[3, 0, 4, 2, 1]]  # week 3 missing, week 4 empty, shuffled
    series = prepare_series(frame, DataConfig(window=2, horizon=1))
    assert series.times.tolist() == weeks.to_numpy().astype(series.times.dtype).tolist()
    assert series.values[:, 0].tolist() == pytest.approx([10, 20, 30, 40, 50, 60], rel=1e-15)
    assert series.n_filled == 2
    assert series.freq == "7D"


def test_prepare_series_monthly_calendar_gap_interpolated_by_time():
    months = ["2000-01-01", "2000-02-01", "2000-04-01", "2000-05-01"]
    frame = pd.DataFrame({"date": months, "co2": [1.0, 2.0, 4.0, 5.0]})
    series = prepare_series(frame, DataConfig(window=2, horizon=1))
    assert series.freq == "MS"
    assert series.n_filled == 1
    assert len(series) == 5
    assert series.times[2] == np.datetime64("2000-03-01")
    assert series.values[2, 0] == pytest.approx(2.0 + 2.0 * 29 / 60, rel=1e-15)  # Feb has 29 days


def test_prepare_series_business_days_keep_weekends_out():
    days = pd.bdate_range("2024-01-01", periods=10)
    frame = pd.DataFrame({"date": days, "co2": np.arange(10.0)})
    series = prepare_series(frame, DataConfig(window=2, horizon=1))
    assert series.freq == "B"
    assert len(series) == 10
    assert series.n_filled == 0
    series = prepare_series(frame.drop(index=2), DataConfig(window=2, horizon=1))
    assert len(series) == 10
    assert series.n_filled == 1
    assert series.values[2, 0] == 2.0


def test_prepare_series_irregular_stamps_kept():
    frame = pd.DataFrame({"date": ["2000-01-01", "2000-01-03", "2000-01-04", "2000-01-08"]})
    frame["co2"] = [1.0, 2.0, 3.0, 4.0]
    series = prepare_series(frame, DataConfig(window=2, horizon=1))
    assert series.freq is None
    assert len(series) == 4
    assert series.n_filled == 0


def test_prepare_series_fills_leading_and_trailing_by_nearest():
    series, _ = series_of([np.nan, 1.0, np.nan, 3.0, np.nan], window=2, horizon=1)
    assert series.values[:, 0].tolist() == [1.0, 1.0, 2.0, 3.0, 3.0]
    assert series.n_filled == 3


# ---------------------------------------------------------------- errors


def frame_of(**columns):
    return pd.DataFrame(columns)


DATES = ["2000-01-01", "2000-01-02", "2000-01-03", "2000-01-04", "2000-01-05"]
CFG = DataConfig(window=2, horizon=1)


def test_read_table_errors(tmp_path):
    raises_one_line("data file not found", read_table, tmp_path / "missing.csv")
    raises_one_line("got a folder", read_table, tmp_path)
    (tmp_path / "t.xlsx").write_text("a,b\n1,2\n")
    raises_one_line(
        r"ending in \.csv, \.tsv or \.parquet, got 't.xlsx'", read_table, tmp_path / "t.xlsx"
    )
    (tmp_path / "empty.csv").write_text("")
    raises_one_line("is empty", read_table, tmp_path / "empty.csv")
    (tmp_path / "header.csv").write_text("date,co2\n")
    raises_one_line("no data rows", read_table, tmp_path / "header.csv")
    (tmp_path / "bad.csv").write_bytes(b"date,co2\n\xff\xfe\xfa,1\n")
    raises_one_line("cannot read .*bad.csv as CSV", read_table, tmp_path / "bad.csv")


def test_read_table_tsv_and_gzip(tmp_path):
    frame = pd.DataFrame({"date": DATES, "co2": [1.0, 2.0, 3.0, 4.0, 5.0]})
    frame.to_csv(tmp_path / "t.tsv", sep="\t", index=False)
    frame.to_csv(tmp_path / "t.csv.gz", index=False)
    pd.testing.assert_frame_equal(read_table(tmp_path / "t.tsv"), frame)
    pd.testing.assert_frame_equal(read_table(tmp_path / "t.csv.gz"), frame)


def test_read_table_parquet(tmp_path):
    frame = pd.DataFrame({"date": DATES, "co2": [1.0, 2.0, 3.0, 4.0, 5.0]})
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        (tmp_path / "t.parquet").write_bytes(b"PAR1")
        raises_one_line("needs pyarrow", read_table, tmp_path / "t.parquet")
    else:
        frame.to_parquet(tmp_path / "t.parquet")
        pd.testing.assert_frame_equal(read_table(tmp_path / "t.parquet"), frame)


def test_prepare_series_column_errors():
    good = [1.0, 2.0, 3.0, 4.0, 5.0]
    raises_one_line(
        "column 'co3' not found; available columns: 'date', 'co2'",
        prepare_series,
        frame_of(date=DATES, co2=good),
        DataConfig(target=("co3",)),
    )
    raises_one_line(
        "target column 'co2' must be numeric; row 3 holds 'abc'",
        prepare_series,
        frame_of(date=DATES, co2=[1.0, 2.0, "abc", 4.0, 5.0]),
        CFG,
    )
    raises_one_line(
        "target column 'co2' has no values: all 5 rows are empty",
        prepare_series,
        frame_of(date=DATES, co2=[np.nan] * 5),
        CFG,
    )
    raises_one_line(
        "'co2' holds infinite values in rows 2, 5",
        prepare_series,
        frame_of(date=DATES, co2=[1.0, np.inf, 3.0, 4.0, -np.inf]),
        CFG,
    )
    raises_one_line(
        "series has 5 rows but window \\(4\\) \\+ horizon \\(1\\) \\+ 1 \\(difference\\) = 6",
        prepare_series,
        frame_of(date=DATES, co2=good),
        DataConfig(window=4, difference=True),
    )
    raises_one_line(
        "feature column 'temp' must be numeric; row 1 holds 'warm'",
        prepare_series,
        frame_of(date=DATES, co2=good, temp=["warm"] * 5),
        DataConfig(window=2, features=("temp",)),
    )


def test_prepare_series_time_errors():
    good = [1.0, 2.0, 3.0, 4.0, 5.0]
    bad_dates = ["2000-01-01", "not a date", "2000-01-03", "2000-01-04", "2000-01-05"]
    raises_one_line(
        "cannot parse 'not a date' in row 2 as a date",
        prepare_series,
        frame_of(date=bad_dates, co2=good),
        CFG,
    )
    raises_one_line(
        "no time stamp in row 5",
        prepare_series,
        frame_of(date=[*DATES[:4], None], co2=good),
        CFG,
    )
    raises_one_line(
        "time column 'date' holds numbers",
        prepare_series,
        frame_of(date=[1958, 1959, 1960, 1961, 1962], co2=good),
        CFG,
    )
    repeated = ["2000-01-01", "2000-01-03", "2000-01-02", "2000-01-03", "2000-01-04"]
    raises_one_line(
        "repeats 2000-01-03 \\(rows 2 and 4\\)",
        prepare_series,
        frame_of(date=repeated, co2=good),
        CFG,
    )


def test_prepare_series_gaps_reject_names_rows():
    reject = DataConfig(window=2, horizon=1, gaps="reject")
    raises_one_line(
        "gaps='reject' but rows 2, 4 hold empty values",
        prepare_series,
        frame_of(date=DATES, co2=[1.0, np.nan, 3.0, np.nan, 5.0]),
        reject,
    )
    holes = ["2000-01-01", "2000-01-02", "2000-01-04", "2000-01-05", "2000-01-06"]
    raises_one_line(
        "gaps='reject' but 1 time stamps of step D are missing, the first 2000-01-03;",
        prepare_series,
        frame_of(date=holes, co2=[1.0, 2.0, 3.0, 4.0, 5.0]),
        reject,
    )
    series = prepare_series(frame_of(date=DATES, co2=[1.0, 2.0, 3.0, 4.0, 5.0]), reject)
    assert series.n_filled == 0


@pytest.mark.parametrize(
    ("overrides", "match"),
    [
        ({"window": 0}, "window must be an integer >= 1, got 0"),
        ({"horizon": 1.5}, "horizon must be an integer >= 1, got 1.5"),
        ({"stride": True}, "stride must be an integer >= 1, got True"),
        ({"val_fraction": 1.0}, r"val_fraction must be a number in \[0.0, 1.0\), got 1.0"),
        ({"test_fraction": -0.1}, r"test_fraction must be a number in \[0.0, 1.0\), got -0.1"),
        ({"val_fraction": 0.5, "test_fraction": 0.5}, "below 1 .* got 0.5 \\+ 0.5"),
        ({"target": ()}, "target must name at least one column"),
        ({"target": "co2"}, "got the string 'co2'; write \\('co2',\\)"),
        ({"features": ("co2",)}, "'co2' is in both target and features"),
        ({"features": ("t", "t")}, "features names column 't' more than once"),
        ({"time_column": "co2"}, "time_column 'co2' is also listed"),
        ({"scaler": "zscore"}, "scaler must be one of 'standard', 'minmax', 'robust', 'none'"),
        ({"normalize": "revin"}, "normalize must be one of 'none', 'window', got 'revin'"),
        ({"gaps": "drop"}, "gaps must be one of 'interpolate', 'reject', got 'drop'"),
        ({"difference": "yes"}, "difference must be true or false, got 'yes'"),
    ],
)
def test_config_rejects_bad_values(overrides, match):
    raises_one_line(match, DataConfig, error=SettingError, **overrides)


def test_config_dict_round_trip_and_unknown_keys():
    cfg = DataConfig(target=("a", "b"), features=("c",), window=24, difference=True)
    assert DataConfig.from_dict(json.loads(json.dumps(cfg.to_dict()))) == cfg
    assert DataConfig.from_dict({}) == DataConfig()
    assert DataConfig(window=np.int64(5)).to_dict()["window"] == 5
    raises_one_line(
        "unknown DataConfig key\\(s\\) 'windw'; expected some of: target",
        DataConfig.from_dict,
        {"windw": 3},
        error=SettingError,
    )
    raises_one_line(
        "window must be an integer", DataConfig.from_dict, {"window": "3"}, error=SettingError
    )


def test_make_splits_errors():
    raises_one_line(
        r"training split has 14 of 20 rows \(val_fraction=0.15, test_fraction=0.15\) but window "
        r"\(13\) \+ horizon \(2\) = 15 rows are needed",
        make_splits,
        *series_of(np.arange(20.0), window=13, horizon=2),
    )
    raises_one_line(
        r"the validation split has 2 rows, fewer than horizon \(3\)",
        make_splits,
        *series_of(np.arange(20.0), window=2, horizon=3, val_fraction=0.1),
    )
    series, cfg = series_of(np.arange(20.0), window=8, horizon=2)
    raises_one_line(
        r"config expects \['w'\]", make_splits, series, DataConfig(**{**RAW, "target": ("w",)})
    )
    assert len(make_splits(series, cfg)[0].test) == 1  # 3 test rows, horizon 2


def test_make_inference_windows_rejects_mismatched_scaler():
    series, cfg = series_of(np.arange(20.0), window=3, horizon=1)
    scaler = Scaler.fit(np.ones((3, 1)), "none", ("w",), 1)
    raises_one_line("fitted on columns \\['w'\\]", make_inference_windows, series, cfg, scaler)


def test_series_length_message_names_both_numbers():
    err = raises_one_line(
        "series has 5 rows",
        prepare_series,
        frame_of(v=np.arange(5.0)),
        DataConfig(**{**RAW, "window": 4, "horizon": 2}),
    )
    assert "= 6 are needed" in str(err)


# ---------------------------------------------------------------- batching


def test_iterate_batches_full_epoch_is_the_seeded_permutation():
    batches = list(iterate_batches(10, 3, seed=7, epoch=2))
    expected = np.random.default_rng([7, 2]).permutation(10)
    assert [b.tolist() for b in batches] == [expected[i : i + 3].tolist() for i in (0, 3, 6)]
    other = np.concatenate(list(iterate_batches(10, 3, seed=7, epoch=3)))
    assert not np.array_equal(np.concatenate(batches), other)


def test_iterate_batches_resume_equals_tail():
    full = [b.tolist() for b in iterate_batches(23, 4, seed=1, epoch=5)]
    assert len(full) == steps_per_epoch(23, 4) == 5
    for k in range(len(full) + 1):
        resumed = [b.tolist() for b in iterate_batches(23, 4, seed=1, epoch=5, start_step=k)]
        assert resumed == full[k:]


def test_iterate_batches_keep_last_and_errors():
    batches = list(iterate_batches(10, 4, seed=0, epoch=0, drop_last=False))
    assert [len(b) for b in batches] == [4, 4, 2]
    assert sorted(np.concatenate(batches).tolist()) == list(range(10))
    assert steps_per_epoch(10, 4, drop_last=False) == 3
    assert steps_per_epoch(10, 4) == 2
    assert steps_per_epoch(0, 4) == 0
    assert list(iterate_batches(0, 4, seed=0, epoch=0)) == []
    raises_one_line(
        "batch_size \\(16\\) is larger than the 10", list, iterate_batches(10, 16, seed=0, epoch=0)
    )
    with pytest.raises(ValueError, match="start_step"):
        list(iterate_batches(10, 4, seed=0, epoch=0, start_step=3))


def test_process_slice_hand_written():
    batch = np.array([9, 8, 7, 6, 5, 4])
    assert process_slice(batch, 0, 2).tolist() == [9, 8, 7]
    assert process_slice(batch, 1, 2).tolist() == [6, 5, 4]
    assert process_slice(batch, 2, 3).tolist() == [5, 4]
    raises_one_line("batch of 6 must divide evenly over 4 processes", process_slice, batch, 0, 4)
    with pytest.raises(ValueError, match="process_index"):
        process_slice(batch, 2, 2)


# ---------------------------------------------------------------- docs


def test_data_docstring_examples():
    result = doctest.testmod(data)
    assert result.attempted > 0
    assert result.failed == 0
