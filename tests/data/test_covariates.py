"""Known-future, static and calendar covariates: the windows (on arange data), the future rows of
predict and their errors. (A promotion-driven series trained end to end is
tests/e2e/test_forecasts.py.)"""

import numpy as np
import pandas as pd
import pytest

from helpers import raises_one_line
from stacklstm.data import (
    DataConfig,
    make_inference_windows,
    make_splits,
    prepare_series,
)
from stacklstm.data.calendar import calendar_features


def _arange_frame(n=20, future_rows=0):
    """y = t, past feature p = 100 + t, future feature f = 1000 + t, static s = 7, days."""
    t = np.arange(n + future_rows, dtype=np.float64)
    frame = pd.DataFrame(
        {
            "date": pd.date_range("2024-01-01", periods=len(t), freq="D"),
            "y": t,
            "p": 100 + t,
            "f": 1000 + t,
            "s": 7.0,
        }
    )
    frame.loc[n:, ["y", "p"]] = np.nan  # the future rows: the target (and past feature) empty
    return frame


# daily rows: a season of 7
_CFG = DataConfig(
    target=("y",),
    features=("p",),
    future_features=("f",),
    static_features=("s",),
    calendar="auto",
    window=3,
    horizon=2,
    scaler="none",
    normalize="none",
    val_fraction=0.2,
    test_fraction=0.2,
    season=7,
)


def test_windows_see_the_horizon_of_future_features_never_the_future_of_past_ones():
    series = prepare_series(_arange_frame(), _CFG)
    assert series.columns[:3] == ("y", "p", "f") and series.n_future == 5  # f + 4 calendar
    days = pd.date_range("2024-01-01", periods=20, freq="D").to_numpy()
    names, calendar = calendar_features(days, "D")
    assert series.columns[3:] == names
    splits, scaler = make_splits(series, _CFG)
    assert splits.static_scaler.kind == "none"
    for windows in (splits.train, splits.val, splits.test):
        x, y = windows.gather()
        o = windows.origin  # (n,)
        steps = o[:, None] + np.arange(-2, 1)  # (n, window): the past rows
        ahead = o[:, None] + np.arange(1, 3)  # (n, horizon)
        expected_past = np.concatenate(
            [np.stack([steps, 100 + steps, 1000 + steps], axis=2), calendar[steps]], axis=2
        )
        np.testing.assert_array_equal(x.past, expected_past.astype(np.float32))
        expected_future = np.concatenate([(1000 + ahead)[..., None], calendar[ahead]], axis=2)
        np.testing.assert_array_equal(x.future, expected_future.astype(np.float32))
        np.testing.assert_array_equal(x.static, np.full((len(o), 1), 7.0, np.float32))
        np.testing.assert_array_equal(y[..., 0], ahead.astype(np.float32))
        # the past-only feature never shows a value after the origin
        assert (x.past[:, :, 1].max(axis=1) == 100 + o).all()

    # predict: the two rows after the last target give the last origins' horizon
    series = prepare_series(_arange_frame(future_rows=2), _CFG, forecast_only=True)
    assert len(series) == 20 and series.tail.shape == (1, 2, 5)
    windows = make_inference_windows(series, _CFG, scaler, splits.static_scaler)
    assert windows.origin[-2:].tolist() == [18, 19]
    x, _ = windows.gather(np.arange(len(windows) - 2, len(windows)), targets=False)
    _, calendar = calendar_features(pd.date_range("2024-01-01", periods=22).to_numpy(), "D")
    ahead = np.array([[19, 20], [20, 21]])
    expected = np.concatenate([(1000 + ahead)[..., None], calendar[ahead]], axis=2)
    np.testing.assert_array_equal(x.future, expected.astype(np.float32))
    assert (x.past[:, :, 1].max(axis=1) == [118, 119]).all()


def _future(frame, changes):
    frame = frame.copy()
    for (row, column), value in changes.items():
        if isinstance(value, str):
            frame[column] = frame[column].astype(object)
        frame.loc[row, column] = value
    return frame


@pytest.mark.parametrize(
    ("frame", "match"),
    [
        (
            _arange_frame(),
            r"holds 0 rows after the last observed target \(2024-01-20\) but "
            r"forecasting needs horizon \(2\) rows there.*\('f' filled\)",
        ),
        (_arange_frame(future_rows=3), "holds 3 rows after"),
        (
            _future(_arange_frame(future_rows=2), {(21, "f"): np.nan}),
            r"future feature 'f' has no value for 2024-01-22 \(row 22\); .*nothing is filled in",
        ),
        (
            _future(_arange_frame(future_rows=2), {(20, "f"): "", (21, "f"): np.nan}),
            r"future feature 'f' has no value for 2024-01-21, 2024-01-22 \(rows 21, 22\)",
        ),
        (
            _future(_arange_frame(future_rows=2), {(21, "date"): pd.Timestamp("2024-01-24")}),
            r"are 2024-01-21, 2024-01-24 but the horizon's steps of D are 2024-01-21, 2024-01-22",
        ),
        (
            _future(_arange_frame(future_rows=2), {(3, "s"): 8.0}),
            r"static feature column 's' holds 2 values in the table \(7 and 8\)",
        ),
        (_arange_frame(future_rows=2).assign(s=np.nan), "static feature column 's' has no value"),
        (_arange_frame(future_rows=2).drop(columns="s"), "column 's' not found"),
        (
            _arange_frame(future_rows=2).assign(f="x"),
            "feature column 'f' must be numeric; row 1 holds 'x'",
        ),
    ],
)
def test_future_rows_and_static_values_are_checked_and_never_filled(frame, match):
    raises_one_line(match, prepare_series, frame, _CFG, forecast_only=True)


def test_training_leaves_the_future_rows_out_and_static_values_are_per_series():
    series = prepare_series(_arange_frame(future_rows=2), _CFG)  # not filled, left out
    assert len(series) == 20 and series.tail is None
    np.testing.assert_array_equal(series.values[:, 0], np.arange(20.0))
    panel = pd.concat(
        [_arange_frame().assign(store="a", s=1.0), _arange_frame().assign(store="b", s=3.0)]
    )
    cfg = DataConfig(**{**_CFG.to_dict(), "id_column": "store", "scaler": "standard"})
    series = prepare_series(panel, cfg)
    assert series.static.tolist() == [[1.0], [3.0]]
    splits, _ = make_splits(series, cfg)
    # the static scaler is fitted over the series: (value - 2) / 1
    assert splits.static_scaler.center.tolist() == [2.0]
    x, _ = splits.train.gather()
    np.testing.assert_array_equal(x.static[:, 0], np.where(splits.train.series == 0, -1.0, 1.0))
    raises_one_line(
        r"static feature column 's' holds 2 values in series 'b' \(3 and 4\)",
        prepare_series,
        panel.assign(s=np.r_[np.ones(20), 3.0, np.full(19, 4.0)]),
        cfg,
    )


def test_calendar_only_runs_forecast_without_future_rows_from_the_step():
    cfg = DataConfig(
        target=("y",), calendar="auto", window=3, horizon=2, scaler="none", normalize="none"
    )
    series = prepare_series(_arange_frame()[["date", "y"]], cfg, forecast_only=True)
    assert series.tail_times[0].astype("datetime64[D]").astype(str).tolist() == [
        "2024-01-21",
        "2024-01-22",
    ]
    _, calendar = calendar_features(pd.date_range("2024-01-21", periods=2).to_numpy(), "D")
    np.testing.assert_array_equal(series.tail[0], calendar)
    years = pd.DataFrame({"date": np.arange(1990, 2010), "y": np.arange(20.0)})
    raises_one_line("whole numbers such as years have no calendar", prepare_series, years, cfg)
