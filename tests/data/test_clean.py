"""Preparing a series: time stamps, gaps, fills, and column/time errors."""

import numpy as np
import pandas as pd
import pytest

from helpers import DATES, RAW, raises_one_line, series_of
from stacklstm.data import DataConfig, prepare_series


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


def frame_of(**columns):
    return pd.DataFrame(columns)


CFG = DataConfig(window=2, horizon=1)


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
    raises_one_line(  # printed as written, not as np.float64(1958.5)
        r"time column 'date' holds numbers that are not all whole \(row 1: 1958\.5\)",
        prepare_series,
        frame_of(date=[1958.5, 1959, 1960, 1961, 1962], co2=good),
        CFG,
    )
    raises_one_line(
        "time column 'date' has no time stamp in row 2",
        prepare_series,
        frame_of(date=pd.array([1958, None, 1960, 1961, 1962], dtype="Int64"), co2=good),
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


def test_series_length_message_names_both_numbers():
    err = raises_one_line(
        "series has 5 rows",
        prepare_series,
        frame_of(v=np.arange(5.0)),
        DataConfig(**{**RAW, "window": 4, "horizon": 2}),
    )
    assert "= 6 are needed" in str(err)


def test_prepare_series_converts_stamps_across_daylight_saving_changes_to_utc(tmp_path):
    from stacklstm.data import read_table

    for start in ("2024-03-31 00:00", "2024-10-27 00:00"):  # clocks forward, clocks back
        local = pd.date_range(start, periods=6, freq="h", tz="Europe/Berlin")
        path = tmp_path / "berlin.csv"
        pd.DataFrame({"date": local, "co2": np.arange(6.0)}).to_csv(path, index=False)
        assert len({stamp[-6:] for stamp in pd.read_csv(path)["date"]}) == 2  # two offsets
        series = prepare_series(read_table(path), DataConfig(window=2, horizon=1))
        utc = local.tz_convert("UTC").tz_localize(None).to_numpy()
        assert series.times.tolist() == utc.astype(series.times.dtype).tolist()
        assert series.freq == "h" and series.n_filled == 0
        assert series.values[:, 0].tolist() == list(range(6))


def test_prepare_series_accepts_whole_number_time_stamps_with_their_step():
    years = [1700, 1702, 1704, 1708, 1710]  # step 2; 1706 missing
    series = prepare_series(
        frame_of(year=years, co2=[1.0, 2.0, 3.0, 5.0, 6.0]),
        DataConfig(window=2, horizon=1, time_column="year"),
    )
    assert series.times.dtype == np.int64
    assert series.times.tolist() == [1700, 1702, 1704, 1706, 1708, 1710]
    assert series.freq == "2" and series.n_filled == 1
    assert series.values[:, 0].tolist() == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    raises_one_line(
        "time column 'year' repeats 1702 \\(rows 2 and 3\\)",
        prepare_series,
        frame_of(year=[1700, 1702, 1702, 1703, 1704], co2=[1.0, 2.0, 3.0, 4.0, 5.0]),
        DataConfig(window=2, horizon=1, time_column="year"),
    )


def test_forecast_only_needs_one_input_window():
    cfg = DataConfig(**{**RAW, "window": 4, "horizon": 3})
    frame = frame_of(v=np.arange(4.0))
    raises_one_line("series has 4 rows but window", prepare_series, frame, cfg)
    assert len(prepare_series(frame, cfg, forecast_only=True)) == 4
    raises_one_line(
        "series has 3 rows but one input window needs window \\(4\\) = 4",
        prepare_series,
        frame_of(v=np.arange(3.0)),
        cfg,
        forecast_only=True,
    )
