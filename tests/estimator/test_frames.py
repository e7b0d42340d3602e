"""The estimator's frames: checks, statics merged per series, order, positions and the
cut-offs of statsforecast's cross_validation, by hand."""

import pandas as pd
import pytest

from stacklstm.estimator.frames import (
    check_frame,
    cutoff_positions,
    merge_statics,
    positions,
    sort_series,
)


def _frame():
    """Series b (3 rows, stamps out of order) before series a (2 rows)."""
    return pd.DataFrame(
        {"id": ["b", "a", "b", "a", "b"], "t": [3, 2, 1, 1, 2], "y": [30.0, 20, 10, 1, 20]}
    )


def test_sort_series_keeps_first_appearance_and_positions_count_within_each():
    df = sort_series(_frame(), "id", "t")
    assert df["id"].tolist() == ["b", "b", "b", "a", "a"]
    assert df["t"].tolist() == [1, 2, 3, 1, 2] and df.index.tolist() == [2, 4, 0, 3, 1]
    assert positions(df, "id").tolist() == [0, 1, 2, 0, 1]
    assert positions(df, None).tolist() == [0, 1, 2, 3, 4]
    assert sort_series(_frame(), "id", None)["y"].tolist() == [30.0, 10, 20, 20, 1]


def test_cutoff_positions_by_hand():
    df = pd.DataFrame({"id": ["a"] * 10 + ["b"] * 8})
    # horizon 2, 2 windows 3 apart: the last 5 rows are forecast; a's first cut-off is its
    # row 10 - 5 - 1 = 4, then 7; b's 8 - 6 = 2, then 5
    cuts = cutoff_positions(df, "id", horizon=2, n_windows=2, step_size=3)
    assert cuts.values.tolist() == [["a", 0, 4], ["a", 1, 7], ["b", 0, 2], ["b", 1, 5]]
    alone = cutoff_positions(df.iloc[:10], None, horizon=2, n_windows=2, step_size=3)
    assert alone["cutoff_pos"].tolist() == [4, 7] and alone["series"].isna().all()
    with pytest.raises(ValueError, match=r"^series 'b' has 8 rows but 3 window\(s\) of horizon"):
        cutoff_positions(df, "id", horizon=2, n_windows=3, step_size=3)


def test_check_frame_and_merge_statics():
    df = _frame()
    with pytest.raises(TypeError, match="df must be a pandas or polars DataFrame, got builtins"):
        check_frame({"y": [1]}, "df")
    with pytest.raises(ValueError, match=r"lacks the column\(s\) 'ds'; it has 'id', 't', 'y'"):
        check_frame(df, "df", ("id", "ds"))
    statics = pd.DataFrame({"id": ["a", "b"], "size": [1.0, 2.0]})
    merged, names = merge_statics(df, statics, "id")
    assert names == ("size",) and merged["size"].tolist() == [2.0, 1.0, 2.0, 1.0, 2.0]
    assert merged.index.equals(df.index)
    with pytest.raises(ValueError, match=r"static_df has no row for the id\(s\) \['b'\] of df"):
        merge_statics(df, statics.iloc[:1], "id")
    with pytest.raises(ValueError, match=r"both have the column\(s\) 'y'"):
        merge_statics(df, statics.assign(y=0.0), "id")
