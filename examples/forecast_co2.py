"""Forecast weekly Mauna Loa CO2 with the library API: fit, then read the report.

The same run as ``stacklstm train`` with no arguments, written out in Python: one call to
``fit`` trains (with checkpoints, early stopping and a metrics log) and scores the best
checkpoint on the test weeks next to the last-value and seasonal-naive forecasts.

Run: python examples/forecast_co2.py [--quick] [--out DIR]
(``--quick`` or STACKLSTM_QUICK=1: a tiny model for 2 epochs, a few seconds.)
"""

import argparse
import logging
import os
import tempfile

from stacklstm.config import ModelConfig, RunConfig, TrainConfig
from stacklstm.data import DataConfig
from stacklstm.run import fit


def main(quick: bool = False, out: str | None = None) -> dict:
    cfg = RunConfig()  # the defaults: window 10, horizon 1, 2x64 LSTM, head 32-16
    if quick:
        cfg = RunConfig(
            DataConfig(window=6),
            ModelConfig(lstm_hidden_size=8, num_lstm_layers=1, linear_layer_sizes=(8,)),
            TrainConfig(epochs=2, batch_size=64, baselines="naive"),  # AutoARIMA: ~1 min
        )
    out = out or os.path.join(tempfile.mkdtemp(prefix="stacklstm-"), "co2")
    result = fit(cfg, out, quiet=quick)  # the bundled CO2 table; pass data_path=... for yours
    print(result.report.table)
    test = result.report.data["test"]
    print(
        f"test RMSE: model {test['model']['rmse']:.3f} ppm, last value "
        f"{test['last_value']['rmse']:.3f}, seasonal naive {test['seasonal_naive']['rmse']:.3f}"
    )
    print(f"run folder (config, checkpoints, metrics.jsonl, report.json, plots): {out}")
    return result.report.data


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, 2 epochs (for tests)")
    parser.add_argument("--out", help="run folder (default: a new temporary folder)")
    args = parser.parse_args()
    logger = logging.getLogger("stacklstm")  # our progress lines only, not every library's
    logger.addHandler(logging.StreamHandler())
    logger.setLevel(logging.INFO)
    main(args.quick or os.environ.get("STACKLSTM_QUICK") == "1", args.out)
