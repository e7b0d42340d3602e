"""One model over a panel through the command line: train, report per series, predict,
resume; bad id columns and split flags refused in one line with nothing written."""

import json

import numpy as np
import pandas as pd
import pytest

from helpers import _assert_same_run, _main, _saved
from stacklstm.run.loop import fit
from stacklstm.rundir import read_run_info

PANEL_FLAGS = [
    "--id-column",
    "store",
    "--target",
    "sales",
    "--time-column",
    "day",
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
    "--hidden-size",
    "8",
    "--num-layers",
    "1",
    "--linear-layer-sizes",
    "8",
    "--epochs",
    "2",
    "--batch-size",
    "16",
    "--log-every",
    "3",
    "--baselines",
    "naive",
    "--quiet",
    "--no-deseasonalize",  # the scaler of the raw values is checked by hand
]


def panel_csv(path):
    """Stores a (60 days), b (80 days, starting later, 100 times larger) and c (8 days: too
    short for a training window), rows interleaved as a sales table would have them."""
    rng = np.random.default_rng(0)
    parts = []
    for store, n, start, level in (
        ("a", 60, "2021-01-01", 10.0),
        ("b", 80, "2021-02-15", 1000.0),
        ("c", 8, "2021-03-01", 50.0),
    ):
        t = np.arange(n)
        sales = level * (1 + 0.3 * np.sin(2 * np.pi * t / 7) + 0.05 * rng.normal(size=n))
        parts.append(
            pd.DataFrame(
                {"day": pd.date_range(start, periods=n, freq="D"), "store": store, "sales": sales}
            )
        )
    frame = pd.concat(parts).sort_values(["day", "store"])
    frame.to_csv(path, index=False)
    return frame


@pytest.fixture(scope="module")
def panel_run(tmp_path_factory):
    base = tmp_path_factory.mktemp("panel")
    frame = panel_csv(base / "sales.csv")
    run = base / "run"
    code, out, err = _main("train", "--data", base / "sales.csv", "--out", run, *PANEL_FLAGS)
    assert code == 0, err
    return base, run, frame, out


def test_panel_report_scores_every_series_and_together(panel_run):
    _, run, frame, out = panel_run
    report = json.loads((run / "report.json").read_text())
    assert report["n_series"] == 2 and list(report["per_series"]) == ["a", "b"]  # c skipped
    assert "2 series scored together; MASE is the mean of each series' MASE" in out
    # 5 test origins per series (6 test rows, horizon 2), every step scored
    assert report["n_test"] == 2 * 5 * 2 and report["n_val"] == 2 * 5 * 2
    for name in ("model", "last_value", "seasonal_naive"):
        mine = [report["per_series"][s]["test"][name] for s in ("a", "b")]
        overall = report["test"][name]
        # the same number of targets per series: the pooled MAE is the mean of the two
        assert overall["mae"] == pytest.approx(np.mean([m["mae"] for m in mine]), rel=1e-12)
        assert overall["mase"] == pytest.approx(np.mean([m["mase"] for m in mine]), rel=1e-12)
    # last value by hand: series a's test origins are its rows 53..57, targets 54..59
    a = frame[frame["store"] == "a"]["sales"].to_numpy()
    errors = [abs(a[o + k] - a[o]) for o in range(53, 58) for k in (1, 2)]
    assert report["per_series"]["a"]["test"]["last_value"]["mae"] == pytest.approx(
        np.mean(errors), rel=1e-12
    )
    # MASE scaled by a's own in-sample seasonal naive MAE (its 54 rows before the test)
    scale = np.mean(np.abs(a[7:54] - a[:47]))
    assert report["per_series"]["a"]["test"]["last_value"]["mase"] == pytest.approx(
        np.mean(errors) / scale, rel=1e-12
    )
    assert read_run_info(run / "selection").scaler.ids == ("a", "b")  # c: too short to score
    info = read_run_info(run)
    # the model that forecasts is trained again on every row of every series (c's 8 rows
    # too, now that they are not split), and scaled on them
    assert info.scaler.ids == ("a", "b", "c")
    assert info.config.train.retrain == "all"
    assert info.scaler.center[0, 0] == pytest.approx(np.mean(a), rel=1e-14)


def test_panel_predict_writes_an_id_column_and_matches_the_report(panel_run):
    base, run, frame, _ = panel_run
    # the report scores the selection's model (it did not train on the test rows): its
    # forecasts from b's test origins give the report's numbers
    code, _, err = _main(
        "predict", run / "selection", "--ids", "b", "--output", base / "b.csv", "--history"
    )
    assert code == 0, err
    pred = pd.read_csv(base / "b.csv")
    assert pred.columns.tolist() == ["id", "origin", "sales_h1", "sales_h2"]
    # a panel's windows are padded (start_padding 'auto'): an origin at every row of b
    assert set(pred["id"]) == {"b"} and len(pred) == 80
    b = frame[frame["store"] == "b"].set_index("day")["sales"]
    assert pred["origin"].iloc[0] == str(b.index[0].date())
    # the forecasts from b's test origins score what the report says
    test = pred.iloc[-(5 + 2) : -2]  # origins 73..77 of rows 0..79
    truth = b.to_numpy()
    errors = [
        abs(row[f"sales_h{k}"] - truth[73 + i + k])
        for i, (_, row) in enumerate(test.iterrows())
        for k in (1, 2)
    ]
    report = json.loads((run / "report.json").read_text())
    assert report["per_series"]["b"]["test"]["model"]["mae"] == pytest.approx(
        np.mean(errors), rel=1e-12
    )
    # the selection left c out (8 rows: too short for its splits): it gets the seasonal
    # naive forecast from its last row, season 7: steps 1 and 2 repeat its rows 1 and 2
    code, _, err = _main("predict", run / "selection", "--output", base / "all.csv", "--history")
    assert code == 0, err
    everything = pd.read_csv(base / "all.csv")
    assert everything["id"].value_counts().to_dict() == {"b": 80, "a": 60, "c": 1}
    assert everything.columns.tolist() == ["id", "origin", "forecaster", "sales_h1", "sales_h2"]
    c = frame[frame["store"] == "c"]["sales"].to_numpy()
    (_, row), *_ = everything[everything["id"] == "c"].iterrows()
    assert row["forecaster"] == "seasonal_naive" and row["origin"] == "2021-03-08"
    assert [row["sales_h1"], row["sales_h2"]] == [c[1], c[2]]
    # the model trained on every row forecasts c too: the future of each series, long
    code, _, err = _main("predict", run, "--output", base / "future.csv")
    assert code == 0, err
    future = pd.read_csv(base / "future.csv")
    assert future.columns.tolist() == ["unique_id", "ds", "stacklstm"]
    assert future["unique_id"].tolist() == ["a", "a", "b", "b", "c", "c"]
    assert future["ds"].tolist() == [
        "2021-03-02",
        "2021-03-03",
        "2021-05-06",
        "2021-05-07",
        "2021-03-09",
        "2021-03-10",
    ]
    assert "fallback" not in report
    model = everything[everything["forecaster"] == "model"].drop(columns="forecaster")
    assert model[model["id"] == "b"].reset_index(drop=True).equals(pred)
    # the selection's future: the next two days of every series, c's named
    code, _, err = _main("predict", run / "selection", "--output", base / "long.csv")
    assert code == 0, err
    long = pd.read_csv(base / "long.csv")
    assert long.columns.tolist() == ["unique_id", "ds", "forecaster", "stacklstm"]
    assert long.groupby("unique_id")["forecaster"].first().to_dict() == {
        "a": "model",
        "b": "model",
        "c": "seasonal_naive",
    }
    assert long[long["unique_id"] == "c"]["stacklstm"].tolist() == [c[1], c[2]]
    # --no-fallback: c left out, as a series the model cannot forecast
    code, _, err = _main(
        "predict", run / "selection", "--no-fallback", "--history", "--output", base / "some.csv"
    )
    assert code == 0, err
    some = pd.read_csv(base / "some.csv")
    assert some["id"].value_counts().to_dict() == {"b": 80, "a": 60}
    assert some.equals(model.reset_index(drop=True))


def test_panel_resume_is_bit_identical(panel_run, tmp_path):
    base, run, _, _ = panel_run
    cfg = read_run_info(run).config
    again = tmp_path / "again"
    stopped = fit(cfg, again, quiet=True, data_path=base / "sales.csv", stop_after_steps=4)
    assert stopped.stop_reason == "stop_after_steps"
    fit(cfg, again, resume=True, quiet=True, data_path=base / "sales.csv")
    _assert_same_run(_saved(again), _saved(run))


def _one_line_error(code, out, err):
    assert code == 2 and out == "", (code, out, err)
    assert err.startswith("stacklstm: error: ") and err.count("\n") == 1, err
    return err


@pytest.mark.parametrize(
    ("change", "flags", "message"),
    [
        ("", ["--id-column", "shop"], "column 'shop' not found; available columns: 'day',"),
        ("repeat", [], "series 'b' (id column 'store') repeats 2021-02-16 in rows"),
        ("mixed", [], "series 'a' (id column 'store') has irregular time stamps"),
        ("", ["--test-size", "3", "--test-fraction", "0.2"], "--test-size and --test-fraction"),
        ("", ["--val-size", "-1"], "--val-size must be an integer in [0, 2147483647], got -1"),
        (
            "",
            ["--strict"],
            "1 series cannot be used for training: 'c' (the series has 8 rows but "
            "the run needs at least 15: one input row (start_padding) + horizon (2) = 3 for one "
            "training window, then the validation and test rows (val_size=6, test_size=6)); drop "
            "them",
        ),
    ],
)
def test_bad_panels_are_one_line_and_write_nothing(tmp_path, change, flags, message):
    frame = panel_csv(tmp_path / "sales.csv").reset_index(drop=True)
    if change == "repeat":  # b's second day twice
        b = frame.index[frame["store"] == "b"]
        frame.loc[b[2], "day"] = frame.loc[b[1], "day"]
    elif change == "mixed":  # a's last day half a day later
        a = frame.index[frame["store"] == "a"]
        frame.loc[a[-1], "day"] = frame.loc[a[-1], "day"] + pd.Timedelta(hours=12)
    frame.to_csv(tmp_path / "sales.csv", index=False)
    argv = [*PANEL_FLAGS, *flags]
    err = _one_line_error(
        *_main("train", "--data", tmp_path / "sales.csv", "--out", tmp_path / "run", *argv)
    )
    assert message in err, err
    assert not (tmp_path / "run").exists()


def test_ids_need_a_panel_run(trained_run, tmp_path):
    err = _one_line_error(
        *_main("predict", trained_run.out_dir, "--ids", "a", "--output", tmp_path / "p.csv")
    )
    assert "the run was trained on one series (no --id-column); --ids needs a panel" in err
    assert not (tmp_path / "p.csv").exists()
