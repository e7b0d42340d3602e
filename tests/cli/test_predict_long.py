"""``stacklstm predict --format long``: the long frame of the DataFrame API, from the command
line, for a run the command line trained and for one the estimator trained."""

import numpy as np
import pandas as pd
import pytest

from helpers import _main, tiny_run
from stacklstm.estimator import LSTMForecaster
from stacklstm.forecasting import predict

TINY_FLAGS, _ = tiny_run()


@pytest.fixture(scope="module")
def co2_run(tmp_path_factory):
    """The suite's tiny run on the bundled weekly CO2 data, with conformal intervals."""
    run = tmp_path_factory.mktemp("long") / "run"
    code, _, err = _main("train", "--out", run, "--quiet", *TINY_FLAGS, "--conformal")
    assert code == 0, err
    return run


def test_long_format_is_the_forecast_after_the_last_row_in_statsforecasts_names(co2_run, tmp_path):
    out = tmp_path / "long.csv"
    code, stdout, err = _main("predict", co2_run, "--format", "long", "--output", out)
    assert code == 0, err
    assert "wrote 1 forecasts" in stdout  # horizon 1, one series
    long = pd.read_csv(out, parse_dates=["ds"], float_precision="round_trip")
    assert list(long.columns) == [
        "unique_id",
        "ds",
        "stacklstm",
        "stacklstm-lo-80",
        "stacklstm-hi-80",
        "stacklstm-lo-95",
        "stacklstm-hi-95",
    ]
    wide = predict(co2_run)  # the default stays the wide frame, every origin
    last = wide.iloc[-1]
    assert long["unique_id"].tolist() == ["co2"]  # one series: named by its target
    assert long["ds"].tolist() == [last["origin"] + pd.Timedelta(days=7)]  # weekly data
    assert long["stacklstm"].tolist() == [last["co2_h1"]]
    assert long["stacklstm-lo-80"].tolist() == [last["co2_h1_q0.1"]]
    assert long["stacklstm-hi-95"].tolist() == [last["co2_h1_q0.975"]]
    # the estimator over the same folder gives the same frame, under the run's column names
    loaded = LSTMForecaster.load(co2_run).predict(level=[80, 95])
    assert list(loaded.columns[:2]) == ["unique_id", "date"]
    pd.testing.assert_frame_equal(loaded.rename(columns={"date": "ds"}), long)


def test_long_format_of_an_estimators_run_equals_its_predict(tmp_path):
    rng = np.random.default_rng(4)
    df = pd.DataFrame(
        {
            "unique_id": np.repeat([3, 7], 50),  # whole-number ids come back as given
            "ds": np.tile(pd.date_range("2021-01-03", periods=50, freq="W-SUN"), 2),
            "y": rng.standard_normal(100).cumsum(),
        }
    )
    model = LSTMForecaster(
        horizon=2,
        window=6,
        season=1,
        lstm_hidden_size=4,
        epochs=1,
        batch_size=8,
        baselines="naive",
        test_size=4,
        val_size=6,
        loss="quantile",
        level=[50],
    ).fit(df)
    out = tmp_path / "long.csv"
    code, _, err = _main("predict", model.run_dir, "--format", "long", "--output", out)
    assert code == 0, err
    cli = pd.read_csv(out, parse_dates=["ds"], float_precision="round_trip")
    mine = model.predict(level=[50])
    assert mine["unique_id"].tolist() == [3, 3, 7, 7]
    assert mine["ds"].tolist() == [pd.Timestamp("2021-12-19"), pd.Timestamp("2021-12-26")] * 2
    pd.testing.assert_frame_equal(cli, mine)


def test_an_unknown_format_is_a_usage_error(co2_run):
    code, _, err = _main("predict", co2_run, "--format", "tall")
    assert code == 2
    assert "--format" in err and "'tall'" in err and "long" in err
    assert len(err.strip().splitlines()) == 1


def test_long_format_carries_the_combination_column():
    from stacklstm.forecasting.prediction import to_long

    wide = pd.DataFrame({
        "id": ["a", "a", "b"], "origin": [3, 4, 9],
        "y_h1": [1.0, 2.0, 5.0], "y_h1_combination": [1.5, 2.5, 5.5],
        "y_h2": [3.0, 4.0, 6.0], "y_h2_combination": [3.5, 4.5, 6.5],
    })  # fmt: skip
    long = to_long(wide, ["y"], 2, "1", models=("combination",))
    assert long.to_dict("list") == {
        "unique_id": ["a", "a", "b", "b"],
        "ds": [5, 6, 10, 11],
        "stacklstm": [2.0, 4.0, 5.0, 6.0],
        "combination": [2.5, 4.5, 5.5, 6.5],
    }
