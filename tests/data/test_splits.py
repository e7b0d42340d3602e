"""Row counts of the splits, the fewest rows a run needs, and why a series gives no window."""

import pytest

from stacklstm.config import DataConfig
from stacklstm.data.splits import fewest_rows, split_problem, split_rows


@pytest.mark.parametrize(
    ("n_rows", "settings", "expected"),
    [
        (100, {}, (70, 15, 15)),  # 0.15 * 100 = 15 each
        (10, {}, (6, 2, 2)),  # 0.15 * 10 is 1.5000000000000002 in floats: 2
        (30, {"val_fraction": 0.1, "test_fraction": 0.25}, (19, 3, 8)),  # round(7.5) = 8
        (50, {"val_size": 4, "test_size": 6}, (40, 4, 6)),
        (50, {"val_fraction": 0.0, "test_fraction": 0.0}, (50, 0, 0)),
    ],
)
def test_split_rows_by_hand(n_rows, settings, expected):
    assert split_rows(n_rows, DataConfig(window=4, season=1, **settings)) == expected


def test_split_rows_rounds_half_to_even():
    # 0.25 * 10 = 2.5 -> 2 and 0.25 * 14 = 3.5 -> 4 (Python's round)
    cfg = DataConfig(window=4, season=1, val_fraction=0.25, test_fraction=0.25)
    assert split_rows(10, cfg) == (6, 2, 2)
    assert split_rows(14, cfg) == (6, 4, 4)


def test_fewest_rows_by_hand():
    # fixed sizes: 8 + 1 = 9 training rows, then 14 + 14
    assert fewest_rows(DataConfig(window=8, horizon=1, val_size=14, test_size=14)) == 37
    # fractions of 0.15: n - 2 * round(0.15 n) >= 9 first holds at n = 13 (13 - 2 * 2 = 9)
    assert fewest_rows(DataConfig(window=8, horizon=1)) == 13
    # difference adds a row: 8 + 2 + 1 = 11 needed; n = 15 gives 15 - 2 * 2 = 11
    assert fewest_rows(DataConfig(window=8, horizon=2, difference=True)) == 15


def test_split_problem_names_what_is_missing():
    cfg = DataConfig(window=8, horizon=1, val_size=14, test_size=14)
    assert split_problem(40, split_rows(40, cfg), cfg) is None  # 12 training rows >= 9
    assert split_problem(30, split_rows(30, cfg), cfg) == (
        "the training split has 2 of 30 rows (val_size=14, test_size=14) but window (8) + "
        "horizon (1) = 9 rows are needed; the series needs at least 37 rows"
    )
    assert split_problem(1, (-27, 14, 14), cfg) == (
        "the series has 1 row but the run needs at least 37: window (8) + horizon (1) = 9 for "
        "one training window, then the validation and test rows (val_size=14, test_size=14)"
    )
    short = DataConfig(window=4, horizon=3, val_size=2, test_size=5)
    assert split_problem(20, split_rows(20, short), short) == (
        "the validation split has 2 rows, fewer than horizon (3); raise `val_size` or set it to 0"
    )


def test_a_fraction_gives_at_least_one_horizon_of_rows():
    # round(0.15 * 40) = 6 < horizon 8: each split is raised to 8 rows; a size is kept as given
    cfg = DataConfig(window=4, season=1, horizon=8)
    assert split_rows(40, cfg) == (24, 8, 8)
    assert split_rows(40, DataConfig(window=4, season=1, horizon=8, val_size=2)) == (30, 2, 8)
    # a fraction of 0 stays 0 rows; a fraction giving more than the horizon is untouched
    assert split_rows(40, DataConfig(window=4, season=1, horizon=8, test_fraction=0.0)) == (
        32,
        8,
        0,
    )
    assert split_rows(100, DataConfig(window=4, season=1, horizon=8)) == (70, 15, 15)
    assert split_problem(40, split_rows(40, cfg), cfg) is None  # 24 >= 4 + 8
