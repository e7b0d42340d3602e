"""Reading tables as written: series ids as text, one name per header column, the rows of a
message as the table numbers them (the future rows of predict included), and the messages
of a run whose series or memory cannot hold its windows."""

import json
import logging

import numpy as np
import pandas as pd
import pytest

from helpers import _main, raises_one_line
from stacklstm.data import (
    DataConfig,
    DataError,
    make_splits,
    prepare_series,
    read_table,
    select_series,
    windows,
)
from stacklstm.rundir import read_run_info
from stacklstm.train import memory

_PANEL = DataConfig(target=("y",), id_column="id", window=2, horizon=1, val_size=3, test_size=3)


def _panel_csv(path, series):
    """``id,date,y``: series ``(id, start, rows, level)`` of daily values ``level + 0, 1, ...``,
    written as text so that the ids are the file's exactly."""
    lines = ["id,date,y"]
    for name, start, n, level in series:
        for k, day in enumerate(pd.date_range(start, periods=n, freq="D")):
            lines.append(f"{name},{day.date()},{level + k}")
    path.write_text("\n".join(lines) + "\n")
    return path


def _one_line_error(code, out, err):
    assert code == 2 and out == "", (code, out, err)
    assert err.startswith("stacklstm: error: ") and err.count("\n") == 1, err
    return err


# ----------------------------------------------------------------------------- series ids


def test_csv_ids_are_the_text_as_written(tmp_path):
    # "01" ends the day "1" starts: as numbers they were one series repeating 2021-04-01
    path = _panel_csv(
        tmp_path / "ids.csv",
        [
            ("01", "2021-01-01", 91, 5.0),
            ("1", "2021-04-01", 91, 500.0),
            ("NA", "2021-01-01", 10, 7.0),
            ("None", "2021-01-01", 11, 8.0),
            ("null", "2021-01-01", 12, 9.0),
            ("nan", "2021-01-01", 13, 10.0),
        ],
    )
    series = prepare_series(read_table(path), _PANEL)
    assert series.ids == ("01", "1", "NA", "None", "nan", "null")
    assert series.bounds.tolist() == [0, 91, 182, 192, 203, 216, 228]
    assert series.values[series.bounds[:-1], 0].tolist() == [5.0, 500.0, 7.0, 8.0, 10.0, 9.0]
    assert str(series.times[91])[:10] == "2021-04-01" and series.values[90, 0] == 95.0
    only = select_series(series, ["01", "NA"])
    assert only.ids == ("01", "NA") and only.values[:, 0].tolist() == [
        *np.arange(5.0, 96.0),
        *np.arange(7.0, 17.0),
    ]
    raises_one_line(
        "no series '001' in the table; it has '01', '1', 'NA'", select_series, series, ["001"]
    )


def test_an_id_column_changed_after_reading_is_used_as_changed(tmp_path):
    path = _panel_csv(
        tmp_path / "ids.csv", [("01", "2021-01-01", 5, 5.0), ("1", "2021-01-01", 6, 9.0)]
    )
    frame = read_table(path)
    assert frame["id"].tolist() == [1] * 11  # pandas reads both as the number 1
    frame["id"] = np.where(frame.index < 5, 200, 100)  # the file is not read again over it
    series = prepare_series(frame, _PANEL)
    assert series.ids == ("100", "200") and series.bounds.tolist() == [0, 6, 11]
    assert series.values[[0, 6], 0].tolist() == [9.0, 5.0]
    assert prepare_series(read_table(path), _PANEL).ids == ("01", "1")


@pytest.mark.parametrize("cell", ["", "   "])
def test_an_empty_id_is_refused_naming_its_row(tmp_path, cell):
    path = tmp_path / "ids.csv"
    path.write_text(f"id,date,y\na,2021-01-01,1\na,2021-01-02,2\n{cell},2021-01-03,3\n")
    raises_one_line(
        "id column 'id' has no series name in row 3; every row needs the name",
        prepare_series,
        read_table(path),
        _PANEL,
    )


def test_parquet_ids_are_text_too(tmp_path):
    days = list(pd.date_range("2021-01-01", periods=10, freq="D")) * 2
    numbers = pd.DataFrame({"id": [7] * 10 + [10] * 10, "date": days, "y": np.arange(20.0)})
    numbers.to_parquet(tmp_path / "n.parquet")
    series = prepare_series(read_table(tmp_path / "n.parquet"), _PANEL)
    assert series.ids == ("10", "7") and series.values[:10, 0].tolist() == list(range(10, 20))
    text = numbers.assign(id=["NA"] * 10 + ["01"] * 10)
    text.to_parquet(tmp_path / "t.parquet")
    assert prepare_series(read_table(tmp_path / "t.parquet"), _PANEL).ids == ("01", "NA")


def test_a_column_named_twice_in_the_header_is_refused(tmp_path):
    path = tmp_path / "twice.csv"
    path.write_text("date,y,y\n2021-01-01,1,2\n2021-01-02,3,4\n")
    raises_one_line(
        f"column 'y' appears 2 times in the header of {path}; expected each column name once",
        read_table,
        path,
    )
    code, out, err = _main("train", "--data", path, "--target", "y", "--out", tmp_path / "run")
    assert "column 'y' appears 2 times in the header" in _one_line_error(code, out, err)
    assert not (tmp_path / "run").exists()


# ------------------------------------------------------------- future rows at predict

_FUTURE = DataConfig(target=("y",), future_features=("promo",), window=3, horizon=1)


def _future_csv(path, future_promo="1", future_date=None, n=310):
    """``n`` observed daily rows, then one future row (row ``n + 1`` of the table, the line
    ``n + 2`` of the file): target empty, ``promo`` as given."""
    days = pd.date_range("2020-01-01", periods=n + 1, freq="D")
    lines = ["date,y,promo"] + [f"{d.date()},{10 + k % 7},{k % 2}" for k, d in enumerate(days[:-1])]
    lines.append(f"{future_date or days[-1].date()},,{future_promo}")
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize(
    ("promo", "date", "message"),
    [
        ("yes", None, "future feature column 'promo' must be numeric; row 311 holds 'yes'"),
        ("inf", None, "future feature 'promo' holds an infinite value for 2020-11-06 (row 311); "
                      "forecasting needs finite future values"),
        ("", None, "future feature 'promo' has no value for 2020-11-06 (row 311); forecasting "
                   "needs every future value"),
        ("1", "2020-11-06 12:00", "the future row 311 has the time stamp 2020-11-06 12:00:00, "
         "which parses but is not on the series' time step of D from its last observed target "
         "(2020-11-05): the nearest steps are 2020-11-06 and 2020-11-07"),
    ],
)  # fmt: skip
def test_future_row_messages_name_the_table_row_and_the_problem(tmp_path, promo, date, message):
    path = _future_csv(tmp_path / "f.csv", promo, date)
    err = raises_one_line(None, prepare_series, read_table(path), _FUTURE, forecast_only=True)
    assert message in str(err)


def test_rows_after_a_series_future_rows_keep_their_table_numbers(tmp_path):
    # series a's future row (row 11) comes before b's rows: b's bad value is in row 15
    lines = ["id,date,y,promo"]
    lines += [f"a,2021-01-{d:02d},{d},0" for d in range(1, 11)] + ["a,2021-01-11,,1"]
    lines += [f"b,2021-01-{d:02d},{'x' if d == 4 else d},0" for d in range(1, 11)]
    lines += ["b,2021-01-11,,1"]
    (tmp_path / "p.csv").write_text("\n".join(lines) + "\n")
    cfg = DataConfig(**{**_FUTURE.to_dict(), "id_column": "id"})
    raises_one_line(
        "target column 'y' must be numeric; row 15 holds 'x'",
        prepare_series,
        read_table(tmp_path / "p.csv"),
        cfg,
        forecast_only=True,
    )


_FUTURE_FLAGS = [
    "--target",
    "y",
    "--future-features",
    "promo",
    "--window",
    "3",
    "--horizon",
    "1",
    "--season",
    "7",
    "--no-deseasonalize",
    "--hidden-size",
    "4",
    "--num-layers",
    "1",
    "--linear-layer-sizes",
    "4",
    "--epochs",
    "1",
    "--batch-size",
    "64",
    "--baselines",
    "naive",
    "--log-every",
    "10",
    "--quiet",
]


def test_predict_names_the_table_row_of_a_bad_future_row(tmp_path):
    data = _future_csv(tmp_path / "train.csv", n=200)
    run = tmp_path / "run"
    code, _, err = _main("train", "--data", data, "--out", run, *_FUTURE_FLAGS)
    assert code == 0, err
    for promo, date, message in [
        ("yes", None, "future feature column 'promo' must be numeric; row 311 holds 'yes'"),
        ("inf", None, "future feature 'promo' holds an infinite value for 2020-11-06 (row 311)"),
        ("1", "2020-11-06 12:00", "the future row 311 has the time stamp 2020-11-06 12:00:00, "
         "which parses but is not on the series' time step of D"),
    ]:  # fmt: skip
        table = _future_csv(tmp_path / "p.csv", promo, date)
        code, out, err = _main("predict", run, "--data", table, "--output", tmp_path / "o.csv")
        assert message in _one_line_error(code, out, err)
        assert not (tmp_path / "o.csv").exists()


# -------------------------------------------------------- series too short, memory


def test_a_one_row_series_is_named_once_with_the_rows_the_run_needs(tmp_path, caplog):
    # daily rows: a season of 7
    cfg = DataConfig(
        target=("y",),
        id_column="id",
        window=8,
        horizon=1,
        val_size=14,
        test_size=14,
        season=7,
        start_padding="none",
    )
    path = _panel_csv(
        tmp_path / "p.csv", [("a", "2021-01-01", 40, 0.0), ("b", "2021-01-01", 1, 9.0)]
    )
    series = prepare_series(read_table(path), cfg)
    expected = (
        "skipped 1 series for training: 'b' (the series has 1 row but the run needs at least 37: "
        "window (8) + horizon (1) = 9 for one training window, then the validation and test rows "
        "(val_size=14, test_size=14))"
    )

    def said():
        return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == windows.__name__]

    with caplog.at_level(logging.INFO, logger="stacklstm.data"):
        splits, scaler = make_splits(series, cfg)
        assert said() == [("WARNING", expected)]
        assert scaler.ids == ("a",) and splits.rows.tolist() == [[12, 14, 14]]
        caplog.clear()
        # scoring the run again (its report, its calibration): b was named when it trained
        again, _ = make_splits(series, cfg, scaler=scaler)
    assert said() == [("INFO", "left out 1 series the run was not trained on: 'b'")]
    assert again.rows.tolist() == [[12, 14, 14]]
    one = DataConfig(target=("y",), window=8, horizon=1, val_size=14, test_size=14)
    raises_one_line(
        r"the series has 1 row but window \(8\) \+ horizon \(1\) = 9 are needed for one training "
        r"window; with the validation and test rows the run needs at least 37$",
        prepare_series,
        read_table(path).iloc[:1].drop(columns="id"),
        one,
    )


_PANEL_FLAGS = [
    "--id-column",
    "id",
    "--target",
    "y",
    "--window",
    "4",
    "--horizon",
    "2",
    "--season",
    "7",
    "--test-size",
    "6",
    "--val-size",
    "6",
    "--no-deseasonalize",
    "--hidden-size",
    "4",
    "--num-layers",
    "1",
    "--linear-layer-sizes",
    "4",
    "--epochs",
    "1",
    "--batch-size",
    "64",
    "--baselines",
    "naive",
    "--log-every",
    "10",
    "--quiet",
    "--start-padding",
    "none",
]


def test_cli_panel_ids_as_written_and_a_one_row_series_named_once(tmp_path):
    path = _panel_csv(
        tmp_path / "p.csv",
        [
            ("01", "2021-01-01", 91, 5.0),
            ("1", "2021-04-01", 91, 500.0),
            ("NA", "2021-01-01", 40, 50.0),
            ("short", "2021-01-01", 1, 9.0),
        ],
    )
    run = tmp_path / "run"
    code, _, err = _main("train", "--data", path, "--out", run, *_PANEL_FLAGS)
    assert code == 0, err
    assert [line for line in err.splitlines() if "'short'" in line] == [
        "skipped 1 series for training: 'short' (the series has 1 row but the run needs at "
        "least 18: window (4) + horizon (2) = 6 for one training window, then the validation "
        "and test rows (val_size=6, test_size=6))"
    ]
    report = json.loads((run / "report.json").read_text())
    assert report["n_series"] == 3 and list(report["per_series"]) == ["01", "1", "NA"]
    info = read_run_info(run)
    assert info.scaler.ids == ("01", "1", "NA")
    # each series scaled on its own 91 (40) rows (the model that forecasts is trained again
    # on every row): level + 0..90 (0..39), no splicing
    assert info.scaler.center[:, 0].tolist() == pytest.approx([5 + 45, 500 + 45, 50 + 19.5])
    code, _, err = _main(
        "predict", run, "--ids", "01,NA", "--output", tmp_path / "o.csv", "--history"
    )
    assert code == 0, err
    pred = pd.read_csv(tmp_path / "o.csv", dtype={"id": str}, keep_default_na=False)
    assert pred["id"].value_counts().to_dict() == {"01": 88, "NA": 37}
    assert pred.groupby("id")["origin"].first().to_dict() == {
        "01": "2021-01-04",
        "NA": "2021-01-04",
    }
    assert pred.groupby("id")["origin"].last().to_dict() == {"01": "2021-04-01", "NA": "2021-02-09"}


def test_the_memory_refusal_names_the_window_the_run_uses():
    assert memory.planned_window(DataConfig(window=8)) == (8, True)  # season "auto" too
    assert memory.planned_window(DataConfig(window=8, time_column=None)) == (8, True)
    assert memory.planned_window(DataConfig(season=4)) == (8, True)  # auto: 2 seasons
    assert memory.planned_window(DataConfig(season=26)) == (52, True)
    assert memory.planned_window(DataConfig()) == (52, False)  # the step decides
    with pytest.raises(
        DataError, match=r"one batch of 32 windows of 8 steps 0\.00 GiB more"
    ) as info:
        memory.check_series_fit(10**6, 1, 1, 8, 32, available=10**6)
    assert "\n" not in str(info.value)
    with pytest.raises(DataError, match=r"windows of up to 52 steps \(`window` is 'auto'\) 0.00"):
        memory.check_series_fit(10**6, 1, 1, 52, 32, available=10**6, exact=False)


def test_cli_memory_refusal_names_the_window_of_the_run(tmp_path, monkeypatch):
    rows = 200_000
    days = pd.date_range("2000-01-01", periods=rows, freq="h").astype(str)
    pd.DataFrame({"date": days, "co2": np.arange(rows, dtype=np.float64)}).to_csv(
        tmp_path / "t.csv", index=False
    )
    monkeypatch.setattr(memory, "available_memory", lambda: 10 * 2**20)  # 10 MiB left
    for flags, steps in ((["--window", "8"], "windows of 8 steps"),
                         ([], "windows of up to 52 steps (--window is 'auto')")):  # fmt: skip
        code, out, err = _main(
            "train", "--data", tmp_path / "t.csv", "--out", tmp_path / "run", *flags
        )
        assert f"one batch of 32 {steps} 0.00 GiB more" in _one_line_error(code, out, err)
        assert not (tmp_path / "run").exists()
