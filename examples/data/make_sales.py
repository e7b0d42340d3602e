"""Write the small synthetic sales tables that the command lines of docs/ train on.

Seeded, so every run writes the same bytes::

    python examples/data/make_sales.py            # into examples/data/
    python examples/data/make_sales.py OUT_DIR

- ``sales.csv``: one store, daily, 2022-01-01 .. 2023-12-31: ``day, units, price, promo``
  (units with a trend, a weekly pattern, a price effect and promotion days; a few empty
  cells, which training interpolates).
- ``sales_latest.csv``: the same store's newest 8 weeks, running 14 days past ``sales.csv``
  (``stacklstm predict --data``: the newest ``--window`` rows are enough).
- ``stores.csv``: eight stores, daily, each from its own first day to 2023-12-31:
  ``store, day, sales, price`` (a panel: ``--id-column store``).
- ``sales_by_store.csv``: three stores, daily, 2023-01-01 .. 2024-03-31: ``day, store, units,
  price, promo, store_size`` (past-only ``price``, known-future ``promo``, static
  ``store_size``).
- ``sales_by_store_next_week.csv``: the same, plus the 7 days after each store's last row
  with the promotion plan filled in and ``units`` and ``price`` empty (what ``stacklstm
  predict`` needs to forecast a run with known-future features).
"""

import sys
from pathlib import Path

import numpy as np
import pandas as pd

HERE = Path(__file__).resolve().parent


def _units(
    rng: np.random.Generator, days: int, level: float, price: np.ndarray, promo: np.ndarray
) -> np.ndarray:
    """Daily unit sales: level + trend + weekly pattern, fewer at a higher price, more on a
    promotion day, Gaussian noise; non-negative whole numbers."""
    t = np.arange(days)
    week = np.array([0.9, 0.85, 0.9, 1.0, 1.15, 1.3, 1.1])[t % 7]
    mean = (level + 0.05 * t) * week * (1 - 0.08 * (price - price[0])) * (1 + 0.35 * promo)
    return np.maximum(np.round(mean + rng.normal(0, 0.05 * level, days)), 0).astype(int)


def _price(rng: np.random.Generator, days: int, start: float) -> np.ndarray:
    """A price that changes now and then (about once a month)."""
    change = rng.random(days) < 1 / 30
    steps = np.where(change, rng.choice([-0.5, 0.5], days), 0.0)
    return np.round(np.clip(start + steps.cumsum(), start - 1.5, start + 1.5), 2)


def one_store(rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``sales.csv`` and ``sales_latest.csv``."""
    days = 730 + 14
    price = _price(rng, days, 2.5)
    promo = (rng.random(days) < 0.1).astype(int)
    frame = pd.DataFrame(
        {
            "day": pd.date_range("2022-01-01", periods=days, freq="D").strftime("%Y-%m-%d"),
            "units": pd.array(_units(rng, days, 120.0, price, promo), dtype="Int64"),
            "price": price,
            "promo": promo,
        }
    )
    frame.loc[[100, 101, 400], "units"] = pd.NA
    return frame.iloc[:730], frame.iloc[-56:]


def stores(rng: np.random.Generator) -> pd.DataFrame:
    """``stores.csv``: eight series of different lengths, ending together."""
    starts = [
        "2023-01-01",
        "2023-02-01",
        "2023-01-15",
        "2023-04-01",
        "2023-03-01",
        "2023-05-10",
        "2023-03-15",
        "2023-06-01",
    ]
    frames = []
    for k, start in enumerate(starts, 1):
        stamps = pd.date_range(start, "2023-12-31", freq="D")
        price = _price(rng, len(stamps), float(rng.choice([4.5, 7.5, 9.99])))
        sales = _units(rng, len(stamps), float(rng.uniform(40, 220)), price, np.zeros(len(stamps)))
        frames.append(
            pd.DataFrame(
                {
                    "store": f"store_{k}",
                    "day": stamps.strftime("%Y-%m-%d"),
                    "sales": sales,
                    "price": price,
                }
            )
        )
    return pd.concat(frames, ignore_index=True)


def by_store(rng: np.random.Generator) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``sales_by_store.csv`` and ``sales_by_store_next_week.csv``."""
    history, plans = [], []
    for store, size in (("a", 1200), ("b", 800), ("c", 2000)):
        stamps = pd.date_range("2023-01-01", "2024-04-07", freq="D")
        price = _price(rng, len(stamps), 2.5)
        promo = (rng.random(len(stamps)) < 0.1).astype(int)
        promo[-7] = 1 if store == "a" else promo[-7]  # a promotion planned for 2024-04-01
        units = pd.array(_units(rng, len(stamps), size / 10, price, promo), dtype="Int64")
        frame = pd.DataFrame(
            {
                "day": stamps.strftime("%Y-%m-%d"),
                "store": store,
                "units": units,
                "price": price,
                "promo": promo,
                "store_size": size,
            }
        )
        history.append(frame.iloc[:-7])
        plan = frame.copy()
        plan.loc[plan.index[-7:], ["units", "price"]] = pd.NA  # only the promotions are known
        plans.append(plan)
    return pd.concat(history, ignore_index=True), pd.concat(plans, ignore_index=True)


def main(out: Path = HERE) -> None:
    rng = np.random.default_rng(20240401)
    sales, latest = one_store(rng)
    tables = {"sales.csv": sales, "sales_latest.csv": latest, "stores.csv": stores(rng)}
    tables["sales_by_store.csv"], tables["sales_by_store_next_week.csv"] = by_store(rng)
    out.mkdir(parents=True, exist_ok=True)
    for name, frame in tables.items():
        frame.to_csv(out / name, index=False, lineterminator="\n")
        print(f"wrote {out / name}: {len(frame)} rows")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else HERE)
