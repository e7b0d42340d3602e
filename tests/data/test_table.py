"""Reading tables: the bundled data set, file types, read errors; the package's doctests."""

import doctest

import numpy as np
import pandas as pd
import pytest

from helpers import DATES, raises_one_line
from stacklstm import data
from stacklstm.data import DataConfig, bundled_dataset_path, prepare_series, read_table


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


def test_data_docstring_examples():
    result = doctest.testmod(data)
    assert result.attempted > 0
    assert result.failed == 0
