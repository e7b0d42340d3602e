"""The long frame: to_long by hand (two targets, monthly steps, interval levels)."""

import pandas as pd
import pytest


def test_to_long_by_hand_two_targets_monthly_steps_and_levels():
    from stacklstm.forecasting.prediction import to_long

    wide = pd.DataFrame({
        "id": ["s", "s", "t"],
        "origin": pd.to_datetime(["2020-01-01", "2020-02-01", "2020-12-01"]),
        "u_h1": [1.0, 2.0, 3.0], "u_h1_q0.1": [0.5, 1.5, 2.5], "u_h1_q0.9": [1.5, 2.5, 3.5],
        "u_h2": [4.0, 5.0, 6.0], "u_h2_q0.1": [3.5, 4.5, 5.5], "u_h2_q0.9": [4.5, 5.5, 6.5],
        "v_h1": [7.0, 8.0, 9.0], "v_h1_q0.1": [7.0, 8.0, 9.0], "v_h1_q0.9": [7.0, 8.0, 9.0],
        "v_h2": [0.0, 0.0, 1.0], "v_h2_q0.1": [0.0, 0.0, 1.0], "v_h2_q0.9": [0.0, 0.0, 1.0],
    })  # fmt: skip
    long = to_long(wide, ["u", "v"], 2, "MS", levels=[80], alias="m")
    assert list(long.columns) == ["unique_id", "ds", "m", "m-lo-80", "m-hi-80"]
    assert long["unique_id"].tolist() == ["s/u", "s/u", "t/u", "t/u", "s/v", "s/v", "t/v", "t/v"]
    assert (
        long["ds"].dt.strftime("%Y-%m-%d").tolist()
        == [
            "2020-03-01",
            "2020-04-01",
            "2021-01-01",
            "2021-02-01",
        ]
        * 2
    )
    assert long["m"].tolist() == [2.0, 5.0, 3.0, 6.0, 8.0, 0.0, 9.0, 1.0]
    assert long["m-lo-80"].tolist()[:4] == [1.5, 4.5, 2.5, 5.5]
    every = to_long(wide[["id", "origin", "u_h1", "u_h2"]], ["u"], 2, "MS", every_origin=True)
    assert list(every.columns) == ["unique_id", "ds", "cutoff", "stacklstm"]
    assert len(every) == 6 and every["cutoff"].nunique() == 3
    with pytest.raises(ValueError, match=r"level 95 needs the quantiles 0\.025 and 0\.975"):
        to_long(wide, ["u", "v"], 2, "MS", levels=[95])
    with pytest.raises(ValueError, match="irregular"):
        to_long(wide, ["u"], 2, None)
