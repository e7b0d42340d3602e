"""Your own table through the command line: train, evaluate and predict on a CSV.

Writes a small synthetic daily sales table (trend + weekly pattern + a price covariate) to a
temporary folder and runs ``stacklstm train`` / ``predict`` on it through ``cli.main``,
exactly as the shell commands below would::

    stacklstm train --data sales.csv --target units --features price --time-column day \\
        --window 28 --horizon 7 --season 7 --out runs/sales
    stacklstm predict runs/sales --data sales.csv --output forecasts.csv

Run: python examples/train_on_csv.py [--quick]
(``--quick`` or STACKLSTM_QUICK=1: a tiny model for 2 epochs, scored against the naive
baselines only, a few seconds.)
"""

import argparse
import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from stacklstm.cli import main as stacklstm


def write_sales(path: Path, days: int = 730) -> None:
    """A daily table ``day, units, price`` with a few empty cells (they get interpolated)."""
    rng = np.random.default_rng(0)
    t = np.arange(days)
    price = 10 + np.round(rng.normal(0, 0.5, days).cumsum() * 0.1, 2)
    units = (
        200 + 0.1 * t + 25 * np.sin(2 * np.pi * t / 7) - 4 * (price - 10) + rng.normal(0, 5, days)
    )
    frame = pd.DataFrame(
        {"day": pd.date_range("2022-01-01", periods=days, freq="D"), "units": units, "price": price}
    )
    frame.loc[[100, 101, 400], "units"] = np.nan
    frame.to_csv(path, index=False)


def main(quick: bool = False) -> pd.DataFrame:
    folder = Path(tempfile.mkdtemp(prefix="stacklstm-"))
    data, run, forecasts = folder / "sales.csv", folder / "runs" / "sales", folder / "forecasts.csv"
    write_sales(data)
    size = ["--hidden-size", "8", "--num-layers", "1", "--epochs", "2", "--baselines", "naive"]
    size = size if quick else []
    args = ["--data", data, "--target", "units", "--features", "price", "--time-column", "day"]
    args += ["--window", "28", "--horizon", "7", "--season", "7", "--out", run, *size]
    if stacklstm(["train", *map(str, args)]) != 0:
        raise SystemExit("training failed")
    if stacklstm(["predict", str(run), "--data", str(data), "--output", str(forecasts)]) != 0:
        raise SystemExit("predict failed")
    table = pd.read_csv(forecasts)
    print(table.tail(3).to_string(index=False))  # the last row forecasts the 7 days after the data
    return table


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick", action="store_true", help="tiny model, 2 epochs, naive baselines (for tests)"
    )
    main(parser.parse_args().quick or os.environ.get("STACKLSTM_QUICK") == "1")
