"""Writes the public series of the accuracy benchmark as small CSVs (run once, kept in git).

Needs statsmodels and statsforecast (``pip install 'stacklstm[baselines]'`` brings both);
the benchmark itself reads only the CSVs. Every file has the columns ``date,y``: ISO dates
(``YYYY-MM-DD``) or whole years. See SOURCE.md for the origin and licence of each series.

    python benchmarks/data/extract.py
"""

from __future__ import annotations

from pathlib import Path

import pandas as pd

HERE = Path(__file__).resolve().parent
BUNDLED_CO2 = HERE.parents[1] / "src" / "stacklstm" / "datasets" / "co2_weekly.csv"


def _write(name: str, dates, values) -> None:
    frame = pd.DataFrame({"date": dates, "y": values})
    frame.to_csv(HERE / f"{name}.csv", index=False, date_format="%Y-%m-%d")
    print(f"{name}.csv: {len(frame)} rows")


def main() -> None:
    from statsforecast.utils import AirPassengersDF
    from statsmodels.datasets import elec_equip, elnino, macrodata, nile, sunspots

    air = AirPassengersDF  # month ends 1949-01-31 .. 1960-12-31 -> month starts
    _write("air_passengers", air["ds"].dt.to_period("M").dt.to_timestamp(), air["y"])

    weekly = pd.read_csv(BUNDLED_CO2, parse_dates=["date"]).set_index("date")["co2"]
    # mean of the measured weeks of each calendar month (a week counts for its Saturday)
    monthly = weekly.resample("MS").mean().round(3)
    _write("co2_monthly", monthly.index, monthly.to_numpy())

    elec = elec_equip.load_pandas().data.iloc[:, 0]
    _write("elec_equip", elec.index, elec.to_numpy())

    wide = elnino.load_pandas().data  # YEAR, JAN .. DEC
    long = wide.melt(id_vars="YEAR", var_name="month", value_name="y")
    months = {m: i for i, m in enumerate(wide.columns[1:], start=1)}
    long["date"] = pd.to_datetime(
        {"year": long["YEAR"].astype(int), "month": long["month"].map(months), "day": 1}
    )
    long = long.sort_values("date")
    _write("elnino", long["date"], long["y"].to_numpy())

    spots = sunspots.load_pandas().data
    _write("sunspots", spots["YEAR"].astype(int), spots["SUNACTIVITY"])

    flow = nile.load_pandas().data
    _write("nile", flow["year"].astype(int), flow["volume"])

    macro = macrodata.load_pandas().data
    quarters = pd.PeriodIndex.from_fields(
        year=macro["year"].astype(int), quarter=macro["quarter"].astype(int), freq="Q"
    ).to_timestamp()
    _write("us_gdp", quarters, macro["realgdp"])
    _write("us_unemp", quarters, macro["unemp"])


if __name__ == "__main__":
    main()
