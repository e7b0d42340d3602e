"""Panels (many series, one id column): order, per-series splits and scalers, windows that
never cross two series, short series, bad id columns; all on hand-made panels."""

import json
import logging

import numpy as np
import pandas as pd
import pytest

from helpers import raises_one_line
from stacklstm.checks import SettingError
from stacklstm.data import (
    DataConfig,
    PanelScaler,
    Scaler,
    make_inference_windows,
    make_splits,
    prepare_series,
    scaler_from_dict,
    select_series,
)

# exact values of ramps: without a seasonal pattern (tests/data/test_season.py has its own);
# daily rows (panel_frame), so the season of a day
PANEL = {
    "target": ("v",),
    "time_column": "t",
    "id_column": "id",
    "scaler": "none",
    "normalize": "none",
    "deseasonalize": False,
    "season": 7,
    "start_padding": "none",
}  # (padded windows: tests/data/test_padding.py)


def panel_frame(lengths, starts=None, bases=None, freq="D", seed=0):
    """Series ``name`` of ``lengths[name]`` daily rows from ``starts[name]``, values
    ``bases[name] + 0, 1, 2, ...``; the rows shuffled."""
    parts = []
    for name, n in lengths.items():
        start = (starts or {}).get(name, "2000-01-01")
        base = (bases or {}).get(name, 0.0)
        parts.append(
            pd.DataFrame(
                {
                    "id": name,
                    "t": pd.date_range(start, periods=n, freq=freq),
                    "v": base + np.arange(n, dtype=np.float64),
                }
            )
        )
    frame = pd.concat(parts, ignore_index=True)
    return frame.sample(frac=1.0, random_state=seed).reset_index(drop=True)


def prepared(frame, **overrides):
    cfg = DataConfig(**{**PANEL, **overrides})
    return prepare_series(frame, cfg), cfg


A_B = {"lengths": {"b": 30, "a": 20}, "starts": {"a": "2000-01-05"}, "bases": {"b": 1000.0}}


def test_panel_rows_are_ordered_by_series_then_time():
    series, _ = prepared(panel_frame(**A_B), window=3, horizon=2)
    assert series.ids == ("a", "b") and series.bounds.tolist() == [0, 20, 50]
    assert series.values[:20, 0].tolist() == list(range(20))
    assert series.values[20:, 0].tolist() == list(range(1000, 1030))
    assert series.times[0] == np.datetime64("2000-01-05") and series.freq == "D"
    assert series.times[20] == np.datetime64("2000-01-01")
    assert (np.diff(series.times[:20]) == np.timedelta64(1, "D")).all()


def test_panel_gaps_are_filled_within_each_series():
    frame = panel_frame({"a": 6, "b": 6}, bases={"b": 100.0})
    frame = frame[~((frame["id"] == "a") & (frame["t"] == "2000-01-03"))]  # a missing day
    frame.loc[(frame["id"] == "b") & (frame["t"] == "2000-01-01"), "v"] = np.nan  # a leading gap
    series, _ = prepared(frame, window=1, horizon=1)
    assert series.values[:, 0].tolist() == [0, 1, 2, 3, 4, 5, 101, 101, 102, 103, 104, 105]
    assert series.n_filled == 2


def test_panel_splits_by_size_per_series():
    series, cfg = prepared(panel_frame(**A_B), window=3, horizon=2, val_size=4, test_size=5)
    splits, _ = make_splits(series, cfg)
    assert splits.rows.tolist() == [[11, 4, 5], [21, 4, 5]]
    assert (splits.n_train, splits.n_val, splits.n_test) == (32, 8, 10)
    train, val, test = splits.train, splits.val, splits.test
    # series a is rows 0-19, series b rows 20-49; origins aligned to each split's end
    assert train.origin.tolist() == [*range(2, 9), *range(22, 39)]
    assert val.origin.tolist() == [10, 11, 12, 40, 41, 42]
    assert test.origin.tolist() == [14, 15, 16, 17, 44, 45, 46, 47]
    assert test.local_origin.tolist() == [14, 15, 16, 17, 24, 25, 26, 27]
    assert test.series.tolist() == [0] * 4 + [1] * 4
    assert train.x[7, :, 0].tolist() == [1000, 1001, 1002]  # b's first window
    assert train.y[7, :, 0].tolist() == [1003, 1004]
    assert test.y_true[3, :, 0].tolist() == [18, 19]  # a's last test window ends on its end
    # every test row of each series is scored, none of the other's
    assert np.unique(test.target_index).tolist() == [*range(15, 20), *range(45, 50)]


def test_panel_splits_by_fraction_per_series():
    series, cfg = prepared(
        panel_frame(**A_B), window=3, horizon=2, val_fraction=0.2, test_fraction=0.2
    )
    splits, _ = make_splits(series, cfg)
    # round(0.2 * 20) = 4 rows of a, round(0.2 * 30) = 6 rows of b
    assert splits.rows.tolist() == [[12, 4, 4], [18, 6, 6]]
    assert splits.test.origin.tolist() == [15, 16, 17, *range(43, 48)]


def test_panel_scalers_are_fitted_on_each_series_training_rows():
    series, cfg = prepared(
        panel_frame(**A_B),
        window=3,
        horizon=2,
        val_size=4,
        test_size=5,
        scaler="standard",
        normalize="window",
    )
    splits, scaler = make_splits(series, cfg)
    assert isinstance(scaler, PanelScaler) and scaler.ids == ("a", "b")
    # a trains on 0..10: mean 5, variance (11^2 - 1) / 12 = 10; b on 1000..1020: 1010, 440/12
    assert scaler.center[:, 0].tolist() == [5.0, 1010.0]
    np.testing.assert_allclose(scaler.scale[:, 0], [np.sqrt(10.0), np.sqrt(440 / 12)], rtol=1e-14)
    s = scaler.scale[1, 0]
    x, y = splits.train.gather(np.array([7]))  # b's first window: origin row 1002
    anchor = (1002 - 1010) / s
    expected_x = [np.float32((v - 1010) / s - anchor) for v in (1000.0, 1001.0, 1002.0)]
    assert x[0, :, 0].tolist() == expected_x and x[0, 2, 0] == 0
    assert y[0, :, 0].tolist() == [np.float32((v - 1010) / s - anchor) for v in (1003.0, 1004.0)]
    back = splits.train.take(np.array([7])).to_original(y.astype(np.float64))
    np.testing.assert_allclose(back[0, :, 0], [1003, 1004], rtol=1e-6)
    # the same scaler as fitting the series alone
    alone = Scaler.fit(series.values[20:41], "standard", ("v",), 1)
    assert scaler.series_scaler(1).to_dict() == alone.to_dict()


def test_no_window_crosses_two_series():
    frame = panel_frame({"a": 20, "b": 30, "c": 25}, bases={"b": 1000.0, "c": 5000.0})
    for difference in (False, True):
        series, cfg = prepared(
            frame, window=4, horizon=3, val_size=5, test_size=5, difference=difference
        )
        splits, scaler = make_splits(series, cfg)
        inference = make_inference_windows(series, cfg, scaler)
        bounds = series.bounds
        for ws in (splits.train, splits.val, splits.test, inference):
            inputs = ws.origin[:, None] + np.arange(1 - cfg.window, 1)
            first_row = bounds[ws.series]
            assert (inputs >= first_row[:, None] + int(difference)).all()
            assert np.isfinite(ws.x).all()
            # targets: inside the window's series, or NaN past its end
            inside = ws.target_index < bounds[ws.series + 1][:, None]
            assert np.isfinite(ws.y_true[..., 0][inside]).all()
            assert np.isnan(ws.y_true[..., 0][~inside]).all()
            assert np.isnan(ws.y[..., 0][~inside]).all()
        # a's forecasts past its last row are NaN, not b's first values
        last_a = inference.take(inference.series == 0)
        assert np.isnan(last_a.y_true[-1]).all()
        assert last_a.y_true[-2, 0, 0] == 19 and np.isnan(last_a.y_true[-2, 1:, 0]).all()
    # differences start afresh in each series: b's first difference is not 1000 - 19
    series, cfg = prepared(frame, window=2, horizon=1, test_size=3, val_size=0, difference=True)
    train = make_splits(series, cfg)[0].train
    assert train.x[train.series == 1][0, :, 0].tolist() == [1.0, 1.0]


def test_seasonal_naive_never_reaches_into_the_previous_series():
    series, cfg = prepared(panel_frame(**A_B), window=3, horizon=2, val_size=4, test_size=5)
    _, scaler = make_splits(series, cfg)
    inference = make_inference_windows(series, cfg, scaler)
    first_b = inference.take(np.flatnonzero(inference.series == 1)[:1])  # local origin 2
    assert first_b.local_origin.tolist() == [2]
    # season 4: step 1 would read local row -1 (before b starts): the last value instead
    assert first_b.seasonal_naive(4)[0, :, 0].tolist() == [1002.0, 1000.0]
    assert first_b.last_value[0, :, 0].tolist() == [1002.0, 1002.0]


def test_a_short_series_is_named_and_skipped_or_refused_with_strict(caplog):
    frame = panel_frame({"a": 20, "b": 30, "c": 12}, bases={"b": 1000.0, "c": 5000.0})
    series, cfg = prepared(frame, window=3, horizon=2, val_size=4, test_size=5)
    with caplog.at_level(logging.WARNING, logger="stacklstm.data"):
        splits, scaler = make_splits(series, cfg)
    expected = (
        "skipped 1 series for training: 'c' (12 rows: the training split has 3 of 12 rows "
        "(val_size=4, test_size=5) but window (3) + horizon (2) = 5"
    )
    assert expected in caplog.text
    assert scaler.ids == ("a", "b") and splits.test.ids == ("a", "b")
    assert splits.train.y_true.max() < 5000  # no window of c
    series, cfg = prepared(frame, window=3, horizon=2, val_size=4, test_size=5, strict=True)
    raises_one_line(
        r"1 series cannot be used for training: 'c' \(12 rows", make_splits, series, cfg
    )
    series, cfg = prepared(frame, window=30, horizon=2)
    message = r"no series can be used for training: 'a' \(20 rows: the training split has 14"
    raises_one_line(message, make_splits, series, cfg)


def test_inference_windows_skip_series_the_run_did_not_train_on(caplog):
    series, cfg = prepared(panel_frame(**A_B), window=3, horizon=2, val_size=4, test_size=5)
    _, scaler = make_splits(series, cfg)
    more, _ = prepared(
        panel_frame({**A_B["lengths"], "z": 10}, bases={"b": 1000.0}),
        window=3,
        horizon=2,
        val_size=4,
        test_size=5,
    )
    with caplog.at_level(logging.WARNING, logger="stacklstm.data"):
        windows = make_inference_windows(more, cfg, scaler)
    assert "'z' (no scaler: the run was not trained on it)" in caplog.text
    assert windows.ids == ("a", "b") and len(windows) == 18 + 28
    only_b = make_inference_windows(select_series(more, ["b"]), cfg, scaler)
    assert only_b.ids == ("b",) and only_b.x[0, :, 0].tolist() == [1000, 1001, 1002]
    raises_one_line("no series 'q' in the table; it has 'a', 'b', 'z'", select_series, more, ["q"])


def test_panel_scaler_round_trips_and_old_scalers_still_read():
    series, cfg = prepared(panel_frame(**A_B), window=3, horizon=2, scaler="robust")
    _, scaler = make_splits(series, cfg)
    back = scaler_from_dict(json.loads(json.dumps(scaler.to_dict())))
    assert isinstance(back, PanelScaler) and back.to_dict() == scaler.to_dict()
    assert np.array_equal(back.center, scaler.center) and np.array_equal(back.scale, scaler.scale)
    old = {"kind": "standard", "columns": ["co2"], "n_targets": 1, "center": [1.0], "scale": [2.0]}
    assert isinstance(scaler_from_dict(old), Scaler)
    bad = {**scaler.to_dict(), "scale": [[1.0]]}
    raises_one_line("a scaler of 2 series needs 2 centers and scales", scaler_from_dict, bad)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("no id column", r"column 'id' not found; available columns: 'x', 't', 'v'"),
        ("repeated stamp", "series 'b' (id column 'id') repeats 2000-01-02 in rows 12 and 13"),
        ("mixed steps", "series 'a' (id column 'id') has irregular time stamps (steps of"),
        ("other step", "series 'b' (id column 'id') has a time step of 7D but series 'a' has D"),
        ("empty id", "id column 'id' has no series name in row 4"),
        ("empty series column", "series 'b' (id column 'id') has no values in column 'v'"),
    ],
)
def test_bad_panels_are_refused_in_one_line(change, message):
    frame = panel_frame({"a": 10, "b": 10}).sort_values(["id", "t"]).reset_index(drop=True)
    if change == "no id column":
        frame = frame.rename(columns={"id": "x"})
    elif change == "repeated stamp":
        frame.loc[12, "t"] = frame.loc[11, "t"]
    elif change == "mixed steps":
        frame.loc[9, "t"] = frame.loc[8, "t"] + pd.Timedelta(hours=12)
    elif change == "other step":
        frame.loc[10:, "t"] = pd.date_range("2000-01-01", periods=10, freq="7D")
    elif change == "empty id":
        frame.loc[3, "id"] = None
    else:
        frame.loc[10:, "v"] = np.nan
    cfg = DataConfig(**{**PANEL, "window": 2, "horizon": 1})
    raises_one_line(message.replace("(", r"\(").replace(")", r"\)"), prepare_series, frame, cfg)


@pytest.mark.parametrize("short", ["a", "z"])  # the short series first, or last
def test_a_short_series_on_the_panels_calendar_step_is_no_other_step(short):
    # the first three quarters of 2000 are 91 days apart, a fixed step, and on quarters too
    stamps = {"m": pd.date_range("2000-01-01", periods=12, freq="QS"),
              short: pd.date_range("2000-01-01", periods=3, freq="QS")}  # fmt: skip
    frame = pd.concat(
        pd.DataFrame({"id": name, "t": t, "v": np.arange(len(t), dtype=float)})
        for name, t in stamps.items()
    )
    cfg = DataConfig(**{**PANEL, "window": 2, "horizon": 1})
    series = prepare_series(frame, cfg)
    assert series.freq == "QS"
    assert np.diff(series.bounds).tolist() == ([3, 12] if short == "a" else [12, 3])
    # on a monthly panel the same three stamps would need missing months: another step
    frame.loc[frame["id"] == "m", "t"] = pd.date_range("2000-01-01", periods=12, freq="MS")
    message = "has a time step of (91D|MS) but series '(m|a|z)' has (MS|91D); every series"
    raises_one_line(message, prepare_series, frame, cfg)


def test_split_sizes_and_fractions_are_two_forms_of_one_setting():
    assert DataConfig(test_size=5).test_size == 5
    raises_one_line(
        "give test_size or test_fraction, not both",
        DataConfig,
        error=SettingError,
        test_size=5,
        test_fraction=0.3,
    )
    raises_one_line("val_size must be an integer", DataConfig, error=SettingError, val_size=-1)
    raises_one_line(
        "id_column 'co2' is also the time column or a target",
        DataConfig,
        error=SettingError,
        id_column="co2",
    )
    # a one-series table with sizes: the rows themselves, and the message names the sizes
    series, cfg = prepared(panel_frame({"a": 20}), window=3, horizon=2, val_size=4, test_size=5)
    single = DataConfig(target=("v",), time_column="t", window=3, horizon=2, test_size=14, season=7)
    one = prepare_series(panel_frame({"a": 20}), single)
    raises_one_line(
        r"training split has 3 of 20 rows \(val_fraction=0.15, test_size=14\)",
        make_splits,
        one,
        single,
    )
    assert make_splits(series, cfg)[0].rows.tolist() == [[11, 4, 5]]
