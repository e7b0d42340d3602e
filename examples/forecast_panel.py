"""Many series, one model: the bundled US macro panel (five quarterly series, 1959-2009).

The table has one row per series and quarter (``series, date, value``). One LSTM is trained
over all five series; each series is scaled with its own training rows, split by time on its
own (the last 12 quarters of each for test, the 12 before for validation), and no window
crosses two series. The same through the shell::

    stacklstm train --data us_macro_quarterly.csv --id-column series --target value \\
        --time-column date --window 12 --horizon 4 --season 4 --difference \\
        --test-size 12 --val-size 12 --out runs/macro
    stacklstm predict runs/macro --ids realgdp,realinv --output forecasts.csv

``report.json`` scores all series together (MASE: the mean of each series' MASE) and each
series under ``per_series``.

Run: python examples/forecast_panel.py [--quick]
(``--quick`` or STACKLSTM_QUICK=1: a tiny model for 2 epochs, a few seconds.)
"""

import argparse
import json
import os
import tempfile
from pathlib import Path

import pandas as pd

from stacklstm.cli import main as stacklstm
from stacklstm.data import bundled_panel_path


def main(quick: bool = False) -> dict:
    folder = Path(tempfile.mkdtemp(prefix="stacklstm-"))
    run, forecasts = folder / "runs" / "macro", folder / "forecasts.csv"
    size = ["--hidden-size", "8", "--num-layers", "1", "--epochs", "2"] if quick else []
    args = ["--data", bundled_panel_path(), "--id-column", "series", "--target", "value"]
    args += ["--time-column", "date", "--window", "12", "--horizon", "4", "--season", "4"]
    args += ["--difference", "--test-size", "12", "--val-size", "12", "--baselines", "naive"]
    args += ["--out", run, "--quiet", *size]
    if stacklstm(["train", *map(str, args)]) != 0:
        raise SystemExit("training failed")
    report = json.loads((run / "report.json").read_text())
    print("per-series MASE on the test quarters (below 1 beats seasonal naive in-sample):")
    for name, splits in report["per_series"].items():
        test = splits["test"]
        print(
            f"  {name:<9} model {test['model']['mase']:.3f}  "
            f"last_value {test['last_value']['mase']:.3f}"
        )
    predict = ["predict", str(run), "--ids", "realgdp,realinv", "--output", str(forecasts)]
    if stacklstm(predict) != 0:
        raise SystemExit("predict failed")
    table = pd.read_csv(forecasts)
    # the 4 quarters after each series' last row (the model trained on every row)
    print(table.to_string(index=False))
    return report


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny model, 2 epochs (for tests)")
    main(parser.parse_args().quick or os.environ.get("STACKLSTM_QUICK") == "1")
