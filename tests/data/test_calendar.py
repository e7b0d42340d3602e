"""Calendar features: positions on hand-made dates, wall-clock time across daylight saving."""

import numpy as np
import pandas as pd
import pytest

from stacklstm.data import DataConfig, DataError, prepare_series
from stacklstm.data.calendar import calendar_features, utc_offsets, wall_clock


def _sincos(*positions):
    """``(time, 2 * len(positions))``: sin, cos of each position list, hand-given in [0, 1)."""
    columns = []
    for p in positions:
        angle = 2 * np.pi * np.asarray(p, dtype=np.float64)
        columns += [np.sin(angle), np.cos(angle)]
    return np.stack(columns, axis=1)


def _utc(raw: pd.Series) -> np.ndarray:
    """The UTC stamps as ``prepare_series`` orders them."""
    return pd.to_datetime(raw, utc=True).dt.tz_localize(None).to_numpy()


def test_hourly_across_the_spring_daylight_saving_change_keeps_the_wall_clock():
    # Berlin, 2021-03-28 (a Sunday): 02:00 does not exist; the UTC stamps are one hour apart
    raw = pd.Series(
        [
            "2021-03-28T00:00:00+01:00",
            "2021-03-28T01:00:00+01:00",
            "2021-03-28T03:00:00+02:00",
            "2021-03-28T04:00:00+02:00",
        ]
    )
    frame = pd.DataFrame({"date": raw, "co2": [1.0, 2.0, 3.0, 4.0]})
    series = prepare_series(frame, DataConfig(window=2, horizon=1))
    assert series.freq == "h"  # regular in UTC: 23:00 (Saturday), 00:00, 01:00, 02:00
    offsets = utc_offsets(raw)
    assert (offsets // np.timedelta64(1, "h")).tolist() == [1, 1, 2, 2]
    local = wall_clock(series.times, _utc(raw), offsets)
    assert local.astype(str).tolist() == [
        "2021-03-28T00:00:00",
        "2021-03-28T01:00:00",
        "2021-03-28T03:00:00",
        "2021-03-28T04:00:00",
    ]
    names, values = calendar_features(local, series.freq)
    assert names == (
        "calendar_hour_of_day_sin",
        "calendar_hour_of_day_cos",
        "calendar_day_of_week_sin",
        "calendar_day_of_week_cos",
    )
    expected = _sincos([0 / 24, 1 / 24, 3 / 24, 4 / 24], [6 / 7] * 4)  # Sunday is 6
    np.testing.assert_array_equal(values, expected)
    # computed from UTC, the first stamp would be Saturday 23:00: the calendar would move
    _, from_utc = calendar_features(series.times, series.freq)
    assert from_utc[0, 0] == _sincos([23 / 24])[0, 0] != values[0, 0]


def test_hourly_across_the_autumn_change_repeats_the_hour_and_inserted_stamps_take_the_offset():
    # Berlin, 2021-10-31: 02:00 happens twice; the second one (01:00 UTC) is missing from the
    # table and inserted by the cleaning
    raw = pd.Series(
        [
            "2021-10-31T01:00:00+02:00",
            "2021-10-31T02:00:00+02:00",
            "2021-10-31T03:00:00+01:00",
            "2021-10-31T04:00:00+01:00",
        ]
    )
    frame = pd.DataFrame({"date": raw, "co2": [1.0, 2.0, 4.0, 5.0]})
    series = prepare_series(frame, DataConfig(window=2, horizon=1))
    assert len(series) == 5 and series.n_filled == 1  # 23:00, 00:00, (01:00), 02:00, 03:00 UTC
    local = wall_clock(series.times, _utc(raw), utc_offsets(raw))
    # the inserted 01:00 UTC takes the offset of the stamp before it (+02:00), so it reads
    # 03:00 (a table of offsets does not say when the zone changed; a clock still on +02:00
    # would show 03:00); the written stamps keep their own wall-clock hours
    assert local.astype(str).tolist() == [
        "2021-10-31T01:00:00",
        "2021-10-31T02:00:00",
        "2021-10-31T03:00:00",
        "2021-10-31T03:00:00",
        "2021-10-31T04:00:00",
    ]
    _, values = calendar_features(local, series.freq)
    np.testing.assert_array_equal(
        values, _sincos([1 / 24, 2 / 24, 3 / 24, 3 / 24, 4 / 24], [6 / 7] * 5)
    )


def test_daily_across_a_daylight_saving_change_finds_its_step_on_the_wall_clock():
    # local midnights: the UTC steps are 24 h and 23 h, irregular in UTC
    raw = pd.Series(
        [
            "2021-03-27T00:00+01:00",
            "2021-03-28T00:00+01:00",
            "2021-03-29T00:00+02:00",
            "2021-03-30T00:00+02:00",
        ]
    )
    frame = pd.DataFrame({"date": raw, "co2": [1.0, 2.0, 3.0, 4.0]})
    series = prepare_series(frame, DataConfig(window=2, horizon=1))
    local = wall_clock(series.times, _utc(raw), utc_offsets(raw))
    assert local.astype(str).tolist() == [
        "2021-03-27T00:00:00",
        "2021-03-28T00:00:00",
        "2021-03-29T00:00:00",
        "2021-03-30T00:00:00",
    ]
    names, values = calendar_features(local, series.freq)  # freq None: the local median step
    assert names[::2] == ("calendar_day_of_week_sin", "calendar_day_of_year_sin")
    # Saturday..Tuesday; 2021-03-27 is day 86 of 365
    expected = _sincos([5 / 7, 6 / 7, 0 / 7, 1 / 7], [85 / 365, 86 / 365, 87 / 365, 88 / 365])
    np.testing.assert_array_equal(values, expected)


def test_utc_offsets_of_zone_aware_stamps_text_forms_and_naive_ones():
    berlin = pd.Series(pd.date_range("2021-03-28 00:00", periods=4, freq="h", tz="Europe/Berlin"))
    assert (utc_offsets(berlin) // np.timedelta64(1, "h")).tolist() == [1, 1, 2, 2]
    texts = pd.Series(["2021-01-01 06:00Z", "2021-01-01 07:00 -0530", "2021-01-01T08:00:00.5-03"])
    assert (utc_offsets(texts) // np.timedelta64(1, "m")).tolist() == [0, -330, -180]
    objects = pd.Series([pd.Timestamp("2021-07-01 12:00", tz="America/New_York")], dtype=object)
    assert (utc_offsets(objects) // np.timedelta64(1, "h")).tolist() == [-4]
    assert utc_offsets(pd.Series(["2021-03-28", "2021-03-29"])) is None  # "-29" is a day
    assert utc_offsets(pd.Series(["2021-03-28 12:00", "2021-03-28 13:00"])) is None
    assert utc_offsets(pd.Series(pd.date_range("2021-01-01", periods=2))) is None
    assert utc_offsets(pd.Series([1990, 1991])) is None


def test_daily_positions_in_a_leap_year_and_business_days():
    days = np.array(["2024-02-28", "2024-02-29", "2024-03-01", "2024-12-31"], "datetime64[D]")
    names, values = calendar_features(days, "D")
    assert names == (
        "calendar_day_of_week_sin",
        "calendar_day_of_week_cos",
        "calendar_day_of_year_sin",
        "calendar_day_of_year_cos",
    )
    # Wednesday, Thursday, Friday, Tuesday; days 59, 60, 61, 366 of 366
    expected = _sincos([2 / 7, 3 / 7, 4 / 7, 1 / 7], [58 / 366, 59 / 366, 60 / 366, 365 / 366])
    np.testing.assert_array_equal(values, expected)
    _, business = calendar_features(days[:3], "B")
    np.testing.assert_array_equal(business, expected[:3])


def test_weekly_positions_follow_iso_weeks_including_week_53():
    weeks = np.array(["2020-12-21", "2020-12-28", "2021-01-04", "2021-12-27"], "datetime64[D]")
    names, values = calendar_features(weeks, "7D")
    assert names == ("calendar_week_of_year_sin", "calendar_week_of_year_cos")
    # ISO 2020 has 53 weeks (weeks 52 and 53 here); ISO 2021 has 52 (weeks 1 and 52)
    np.testing.assert_array_equal(values, _sincos([51 / 53, 52 / 53, 0 / 52, 51 / 52]))


@pytest.mark.parametrize("freq", ["MS", "ME", "QS", None])
def test_monthly_and_quarterly_positions(freq):
    months = pd.date_range("2023-01-01", periods=12, freq="MS").to_numpy()
    if freq == "QS":
        months = months[::3]
    names, values = calendar_features(months, freq)
    assert names == ("calendar_month_of_year_sin", "calendar_month_of_year_cos")
    step = 3 if freq == "QS" else 1
    positions = [step * i / 12 for i in range(len(months))]
    np.testing.assert_array_equal(values, _sincos(positions))


def test_sub_hourly_positions_count_minutes_and_seconds():
    times = np.array(["2024-01-07T23:45:30", "2024-01-08T00:00:00"], "datetime64[s]")
    _, values = calendar_features(times, "15min")
    expected = _sincos([(23 * 3600 + 45 * 60 + 30) / 86400, 0.0], [6 / 7, 0 / 7])
    np.testing.assert_array_equal(values, expected)


@pytest.mark.parametrize(
    ("times", "freq", "message"),
    [
        (np.array(["2000-01-01", "2001-01-01"], "datetime64[D]"), "YS", "yearly"),
        (np.array(["2000-01-01", "2002-01-01"], "datetime64[D]"), None, "a year or more"),
        (np.array([1990, 1991]), "1", "whole numbers such as years"),
        (np.array(["2000-01-01"], "datetime64[D]"), None, "at least two"),
    ],
)
def test_stamps_without_a_seasonal_position_are_refused(times, freq, message):
    with pytest.raises(DataError, match=message):
        calendar_features(times, freq)
