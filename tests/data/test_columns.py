"""The cell-level helpers of the table reader: numbers, time stamps, ids and their texts."""

import numpy as np
import pandas as pd
import pytest

from stacklstm.checks import DataError
from stacklstm.data.columns import (
    count_text,
    file_rows,
    numeric_column,
    parse_times,
    rows_text,
    series_ids,
    stamp_text,
    step_text,
)


def test_numeric_column_reads_numbers_blanks_and_what_python_reads():
    raw = pd.Series(["1.5", " ", None, "-2e3", "1e999", "7"])
    got = numeric_column(raw, "y", "target")
    assert got.dtype == np.float64
    np.testing.assert_array_equal(got, [1.5, np.nan, np.nan, -2000.0, np.inf, 7.0])
    np.testing.assert_array_equal(
        numeric_column(pd.Series([True, False]), "f", "feature"), [1.0, 0.0]
    )


def test_numeric_column_names_the_row_of_a_word():
    raw = pd.Series([1.0, 2.0, "abc"], index=[4, 5, 9])  # labels: the table's row positions
    with pytest.raises(DataError, match=r"^target column 'y' must be numeric; row 10 holds 'abc'$"):
        numeric_column(raw, "y", "target")


def test_parse_times_converts_offsets_to_utc_and_keeps_whole_numbers():
    got = parse_times(pd.Series(["2021-03-28T01:00+01:00", "2021-03-28T03:00+02:00"]), "t")
    # both are 00:00 and 01:00 UTC
    expected = np.array(["2021-03-28T00:00", "2021-03-28T01:00"], dtype="datetime64[ns]")
    np.testing.assert_array_equal(got, expected)
    years = parse_times(pd.Series([1990, 1995, 2000]), "year")
    assert years.dtype == np.int64 and years.tolist() == [1990, 1995, 2000]
    with pytest.raises(DataError, match="cannot parse 'soon' in row 2 as a date"):
        parse_times(pd.Series(["2001-01-01", "soon"]), "t")
    with pytest.raises(DataError, match="numbers that are not all whole"):
        parse_times(pd.Series([1.5, 2.5]), "t")


def test_row_and_stamp_texts():
    frame = pd.DataFrame({"y": [0.0, 1.0, 2.0]}, index=[0, 3, 7])
    assert file_rows(frame, [1, 2]).tolist() == [4, 8]  # label + 1
    assert rows_text(range(1, 4)) == "1, 2, 3"
    assert rows_text(range(1, 13)) == "1, 2, 3, 4, 5 and 7 more"  # 5 listed, then the count
    assert stamp_text(np.datetime64("2001-12-29")) == "2001-12-29"
    assert stamp_text(np.datetime64("2001-12-29T06:00")) == "2001-12-29 06:00:00"
    assert stamp_text(np.int64(1701)) == "1701"
    assert (count_text(1, "row"), count_text(3, "row")) == ("1 row", "3 rows")
    assert step_text(np.timedelta64(7, "D")) == "7 days"
    assert step_text(np.timedelta64(1, "D")) == "1 day"
    assert step_text(np.timedelta64(6, "h")) == "0 days 06:00:00"
    assert step_text(np.int64(5)) == "5"
    # the steps of a column of stamps are timedelta64 (an np.integer subclass), not numbers
    weekly = np.diff(np.array(["2001-01-01", "2001-01-08"], dtype="datetime64[ns]"))
    assert step_text(weekly[0]) == "7 days"


def test_series_ids_are_text_and_refuse_an_empty_cell():
    assert series_ids(pd.Series(["a", 1, 2.5]), "id").tolist() == ["a", "1", "2.5"]
    with pytest.raises(DataError, match="id column 'id' has no series name in row 2"):
        series_ids(pd.Series(["a", "  ", "b"]), "id")
