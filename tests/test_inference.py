"""Inference: predictions of a finished run."""

import numpy as np
import pandas as pd

from helpers import TINY_RUN
from stacklstm.data import bundled_dataset_path, prepare_series, read_table
from stacklstm.train import evaluate_run, predict


def test_predict_csv_reproduces_the_evaluation_forecasts(trained_run, tmp_path):
    out = trained_run.out_dir
    report = evaluate_run(out)
    csv = tmp_path / "forecasts.csv"
    frame = predict(out, output=csv)
    read = pd.read_csv(csv, parse_dates=["origin"])
    assert list(read.columns) == ["origin", "co2_h1"]
    assert len(read) == len(frame) == 2284 - 6 + 1  # every origin with a full window
    np.testing.assert_array_equal(read["co2_h1"].to_numpy(), frame["co2_h1"].to_numpy())
    series = prepare_series(read_table(bundled_dataset_path()), TINY_RUN.data)
    test_times = series.times[report.test_origin]
    rows = read.set_index("origin").loc[test_times, "co2_h1"].to_numpy()
    np.testing.assert_array_equal(rows, report.test_forecast[:, 0, 0])
