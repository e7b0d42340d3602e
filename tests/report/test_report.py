"""The report: the model and baseline scores of a finished run."""

import json

import numpy as np
import pytest

from helpers import TINY_RUN
from stacklstm.data import bundled_dataset_path, make_splits, prepare_series, read_table
from stacklstm.forecasting import predict


def test_report_baselines_match_a_hand_computation(trained_run):
    """The report's numbers against numpy on the raw series and the predictions CSV."""
    out = trained_run.out_dir
    report = json.loads((out / "report.json").read_text())
    cfg = TINY_RUN.data
    series = prepare_series(read_table(bundled_dataset_path()), cfg)
    splits, _ = make_splits(series, cfg)
    origins = splits.test.origin
    values = series.values[:, 0]
    actual, last = values[origins + 1], values[origins]
    seasonal = values[origins + 1 - 52]
    rmse = lambda a, b: float(np.sqrt(np.mean((a - b) ** 2)))  # noqa: E731
    assert report["test"]["last_value"]["rmse"] == pytest.approx(rmse(actual, last), rel=1e-12)
    assert report["test"]["seasonal_naive"]["rmse"] == pytest.approx(
        rmse(actual, seasonal), rel=1e-12
    )
    frame = predict(out)
    by_origin = frame.set_index("origin")["co2_h1"]
    model = by_origin.loc[series.times[origins]].to_numpy()
    assert report["test"]["model"]["rmse"] == pytest.approx(rmse(actual, model), rel=1e-9)
    assert report["test"]["model"]["mae"] == pytest.approx(np.mean(np.abs(actual - model)))


def test_the_statistical_baselines_show_one_bar_each_on_a_terminal(monkeypatch):
    import io
    import logging

    from stacklstm.forecasting import baseline_forecasts as report_baselines

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    monkeypatch.setattr(report_baselines.sys, "stderr", Terminal())
    monkeypatch.setattr(logging.getLogger("stacklstm"), "level", logging.INFO)
    with report_baselines._bars() as progress:
        progress("auto_arima", 0, 20, "fitting")
        progress("auto_ets", 5, 20, "forecasting")
        progress("auto_arima", 20, 20, "done")
    text = report_baselines.sys.stderr.getvalue()
    last = {
        name: [line for line in text.replace("\r", "\n").splitlines() if name in line][-1]
        for name in ("auto_arima", "auto_ets")
    }
    assert "20/20" in last["auto_arima"] and "done" in last["auto_arima"]
    assert "5/20" in last["auto_ets"] and "forecasting" in last["auto_ets"]
    # not a terminal (or --quiet): no bars
    monkeypatch.setattr(report_baselines.sys, "stderr", io.StringIO())
    with report_baselines._bars() as progress:
        assert progress is None
