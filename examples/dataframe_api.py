"""The DataFrame API next to statsforecast: fit, forecast and score from one long frame.

``stacklstm.LSTMForecaster`` takes the frames of statsforecast and neuralforecast
(``unique_id, ds, y``) and returns theirs (``unique_id, ds, <model>`` with
``<model>-lo-80``/``-hi-80`` interval columns), training and forecasting through the same
code as ``stacklstm train`` and ``stacklstm predict``. Here: the bundled US macro panel
(five quarterly series), its last 4 quarters held out; one LSTM for the five series against
statsforecast's AutoETS, both scored with ``utilsforecast.evaluation.evaluate``; then the
cross-validation of both, merged on ``unique_id, ds, cutoff``.

Needs the ``[baselines]`` extra (statsforecast, utilsforecast).

Run: python examples/dataframe_api.py [--quick]
(``--quick`` or STACKLSTM_QUICK=1: a tiny model for a few epochs, well under a minute.)
"""

import argparse
import os

import pandas as pd
from statsforecast import StatsForecast
from statsforecast.models import AutoETS
from utilsforecast.evaluation import evaluate
from utilsforecast.losses import mae, rmse, scaled_crps

from stacklstm import LSTMForecaster
from stacklstm.data import bundled_panel_path

H = 4  # quarters forecast


def main(quick: bool = False) -> pd.DataFrame:
    # %% the panel in the long format: one row per series and quarter
    df = pd.read_csv(bundled_panel_path(), parse_dates=["date"])
    df = df.rename(columns={"series": "unique_id", "date": "ds", "value": "y"})
    test = df.groupby("unique_id").tail(H)
    train = df.drop(test.index)

    # %% one LSTM for the five series; the settings of `stacklstm train`, by their names
    size = dict(lstm_hidden_size=8, num_lstm_layers=1, epochs=3) if quick else dict(epochs=40)
    model = LSTMForecaster(
        horizon=H,
        window=12,
        season=4,
        difference=True,
        test_size=8,
        val_size=12,
        conformal=True,
        level=[80],
        baselines="naive",
        **size,
    )
    model.fit(train)
    lstm = model.predict(level=[80])  # the 4 quarters after each series' last row
    print(lstm.head(H).to_string(index=False))

    # %% statsforecast on the same frame, merged on unique_id and ds
    sf = StatsForecast(models=[AutoETS(season_length=4)], freq="QS")
    ets = sf.forecast(df=train, h=H, level=[80])
    both = test.merge(lstm, on=["unique_id", "ds"]).merge(ets, on=["unique_id", "ds"])
    scores = evaluate(
        both, metrics=[mae, rmse, scaled_crps], models=["stacklstm", "AutoETS"], level=[80]
    )
    print("\nheld-out quarters, mean over the series:")
    print(scores.groupby("metric")[["stacklstm", "AutoETS"]].mean().to_string())

    # %% cross-validation: the same cut-offs, so the frames merge row for row
    cv = model.cross_validation(train, n_windows=2, step_size=H)
    cv_ets = sf.cross_validation(df=train, h=H, n_windows=2, step_size=H)
    merged = cv.merge(cv_ets.drop(columns="y"), on=["unique_id", "ds", "cutoff"])
    assert len(merged) == len(cv) == len(cv_ets)
    cv_scores = evaluate(merged, metrics=[mae], models=["stacklstm", "AutoETS"])
    print("\ncross-validation MAE, mean over series and cut-offs:")
    print(cv_scores[["stacklstm", "AutoETS"]].mean().to_string())
    return scores


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, few epochs (for tests)")
    main(parser.parse_args().quick or os.environ.get("STACKLSTM_QUICK") == "1")
