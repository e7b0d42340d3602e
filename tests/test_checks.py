"""The field checks and the error types: what each accepts, and the message it gives."""

import numpy as np
import pytest

from stacklstm.checks import (
    DataError,
    SettingError,
    SettingTypeError,
    check_choice,
    check_int,
    check_levels,
    check_names,
    check_real,
    check_sizes,
    reject_unknown_keys,
)


def test_numbers_are_checked_by_type_then_range_and_bools_are_not_numbers():
    assert check_int("n", np.int64(3), 1) == 3 and type(check_int("n", np.int64(3), 1)) is int
    with pytest.raises(SettingTypeError, match=r"^n must be an integer >= 1, got True$"):
        check_int("n", True, 1)
    with pytest.raises(SettingError, match=r"^n must be an integer in \[1, 4\], got 5$") as info:
        check_int("n", 5, 1, 4)
    assert info.value.field == "n" and not isinstance(info.value, TypeError)
    assert check_real("lr", 1, 0.0, open_low=True) == 1.0
    with pytest.raises(SettingError, match=r"^lr must be a number in \(0.0, inf\), got 0.0$"):
        check_real("lr", 0.0, 0.0, open_low=True)
    with pytest.raises(SettingError, match=r"in \[0.0, 1.0\), got nan"):
        check_real("p", float("nan"), 0.0, 1.0)


def test_sequences_levels_names_and_choices():
    assert check_sizes("sizes", [32, np.int32(16)]) == (32, 16) and check_sizes("s", ()) == ()
    with pytest.raises(SettingError, match=r"sizes must hold integers >= 1 .*got \[8, 0\]"):
        check_sizes("sizes", [8, 0])
    with pytest.raises(SettingError, match="sizes may list at most 1 sizes, got 2"):
        check_sizes("sizes", [8, 8], max_len=1)
    assert check_levels("q", [0.1, np.float32(0.5)]) == (0.1, 0.5)
    with pytest.raises(SettingError, match=r"^q must lie strictly between 0 and 1, got 1.0$"):
        check_levels("q", (0.5, 1.0))
    assert check_names("target", ["a", "b"], allow_empty=False) == ("a", "b")
    with pytest.raises(SettingTypeError, match=r"got the string 'a'; write \('a',\)"):
        check_names("target", "a", allow_empty=False)
    with pytest.raises(SettingError, match=r"^target must name at least one column, got \(\)$"):
        check_names("target", (), allow_empty=False)
    assert check_choice("loss", "mae", ("mse", "mae")) == "mae"
    with pytest.raises(SettingError, match=r"^loss must be one of 'mse', 'mae', got 'l1'$"):
        check_choice("loss", "l1", ("mse", "mae"))
    with pytest.raises(SettingError, match=r"^unknown \[x\] key\(s\) 'b', 'c'; expected some"):
        reject_unknown_keys(["a"], {"a": 1, "c": 2, "b": 3}, "[x]")


def test_messages_are_one_line():
    assert str(DataError("column 'y'\n  is   empty")) == "column 'y' is empty"
    assert str(SettingError("a\nb", "f")) == "a b"
    assert issubclass(SettingTypeError, TypeError) and issubclass(DataError, ValueError)
