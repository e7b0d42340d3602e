"""Inference: predictions of a finished run."""

import numpy as np
import pandas as pd

from helpers import TINY_RUN
from stacklstm.data import bundled_dataset_path, make_splits, prepare_series, read_table
from stacklstm.forecasting import TrainedRun, load_run, predict
from stacklstm.forecasting.ensemble import load_model
from stacklstm.forecasting.inference import load_series
from stacklstm.intervals import to_forecast
from stacklstm.report import evaluate_run
from stacklstm.train.step import make_predict_step


def test_predict_csv_reproduces_the_evaluation_forecasts(trained_run, tmp_path):
    out = trained_run.out_dir
    report = evaluate_run(out)
    csv = tmp_path / "forecasts.csv"
    frame = predict(out, output=csv)
    read = pd.read_csv(csv, parse_dates=["origin"], float_precision="round_trip")
    assert list(read.columns) == ["origin", "co2_h1"]
    assert len(read) == len(frame) == 2284 - 6 + 1  # every origin with a full window
    np.testing.assert_array_equal(read["co2_h1"].to_numpy(), frame["co2_h1"].to_numpy())
    series = prepare_series(read_table(bundled_dataset_path()), TINY_RUN.data)
    test_times = series.times[report.test_origin]
    rows = read.set_index("origin").loc[test_times, "co2_h1"].to_numpy()
    np.testing.assert_array_equal(rows, report.test_forecast[:, 0, 0])


def test_predict_from_the_newest_window_alone_labelled_by_whole_number_years(tmp_path):
    from stacklstm.config import DataConfig, ModelConfig, RunConfig, TrainConfig
    from stacklstm.run import fit

    years = np.arange(1700, 1900)
    table = pd.DataFrame({"year": years, "v": np.sin(years / 7.0) + years / 100.0})
    table.to_csv(tmp_path / "years.csv", index=False)
    cfg = RunConfig(
        DataConfig(target=("v",), time_column="year", window=4, horizon=2),
        ModelConfig(lstm_hidden_size=4, num_lstm_layers=1, linear_layer_sizes=()),
        TrainConfig(epochs=1, batch_size=32, baselines="naive"),
    )
    fit(cfg, tmp_path / "run", quiet=True, data_path=tmp_path / "years.csv")
    whole = predict(tmp_path / "run")
    assert whole["origin"].tolist() == list(range(1703, 1900))  # labelled by the years
    table.tail(4).to_csv(tmp_path / "newest.csv", index=False)  # window rows, no horizon
    newest = predict(tmp_path / "run", tmp_path / "newest.csv")
    assert newest["origin"].tolist() == [1899]
    np.testing.assert_array_equal(
        newest[["v_h1", "v_h2"]].to_numpy(), whole[["v_h1", "v_h2"]].to_numpy()[-1:]
    )


def test_predict_refuses_a_table_of_another_frequency(trained_run, tmp_path):
    from helpers import _main

    assert load_run(trained_run.out_dir).freq == "7D"  # weekly CO2
    days = pd.date_range("2020-01-01", periods=30, freq="D")
    pd.DataFrame({"date": days.strftime("%Y-%m-%d"), "co2": np.linspace(410, 411, 30)}).to_csv(
        tmp_path / "daily.csv", index=False
    )
    code, out, err = _main(
        "predict",
        trained_run.out_dir,
        "--data",
        tmp_path / "daily.csv",
        "--output",
        tmp_path / "p.csv",
        "--quiet",
    )
    assert (code, out) == (2, "") and len(err.splitlines()) == 1, err
    assert f"{tmp_path / 'daily.csv'} has a time step of D but the run was trained on data " in err
    assert "a step of 7D" in err and not (tmp_path / "p.csv").exists()
    weeks = pd.date_range("2020-01-04", periods=8, freq="7D")  # the same frequency: accepted
    pd.DataFrame({"date": weeks.strftime("%Y-%m-%d"), "co2": np.linspace(410, 411, 8)}).to_csv(
        tmp_path / "weekly.csv", index=False
    )
    assert predict(trained_run.out_dir, tmp_path / "weekly.csv")["origin"].tolist() == list(
        weeks[5:]
    )  # windows of 6: origins from the 6th row


def test_load_run_restores_the_forecasts_of_the_finished_run(trained_run):
    out = trained_run.out_dir
    run = load_run(out)
    assert isinstance(run, TrainedRun) and run.members == ()
    assert run.checkpoint == {"kind": "best", "step": trained_run.best_step}
    assert load_model is load_run  # the former name
    _, series = load_series(run.info, None)
    test = make_splits(series, run.info.config.data, scaler=run.info.scaler)[0].test
    forecast, members = run.forecasts(test)
    assert members == [] and forecast.point.shape == (len(test), 1, 1)
    # the forecasts that fit's own evaluation wrote, to the last bit
    np.testing.assert_array_equal(forecast.point, trained_run.report.test_forecast)
    np.testing.assert_array_equal(run.forecast_quantiles(test).point, forecast.point)
    # all windows in one forward pass, without the batches, the padding and the gathering
    x, _ = test.gather(np.arange(len(test)), targets=False)
    whole = to_forecast(
        run.info.config.train, np.asarray(make_predict_step(run.model)(run.params, x)), test
    )
    np.testing.assert_allclose(forecast.point, whole.point, rtol=1e-6)
