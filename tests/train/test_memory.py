"""The memory check: the bytes a series and one batch need, by hand, and the refusal."""

import pytest

from stacklstm.checks import DataError
from stacklstm.train import memory


def test_series_bytes_by_hand():
    # per row: 2 columns x 24 (three float64 copies) + 16 (stamp, order)
    # + 2 x (16 per window + 16 per target) = 48 + 16 + 64 = 128
    # one batch: 4 windows x 10 steps x 2 columns x 20 (index, gather, float32 copy) = 1600
    assert memory.series_bytes(1000, 2, 1, 10, 4) == (128_000, 1_600)
    # a second target adds 2 x 16 per row; the batch holds every column of every window
    assert memory.series_bytes(1000, 2, 2, 10, 4) == (160_000, 1_600)


def test_check_series_fit_refuses_one_byte_short_and_names_the_window(monkeypatch):
    memory.check_series_fit(1000, 2, 1, 10, 4, available=129_600)  # exactly enough
    monkeypatch.setattr(memory, "available_memory", lambda: None)  # unknown: passes
    memory.check_series_fit(10**12, 2, 1, 10, 4)
    monkeypatch.setattr(memory, "available_memory", lambda: 129_599)  # read when not given
    with pytest.raises(DataError, match=r"but 0\.00 GiB of memory is available"):
        memory.check_series_fit(1000, 2, 1, 10, 4)
    with pytest.raises(DataError) as info:
        memory.check_series_fit(1000, 2, 1, 10, 4, available=129_599)
    assert str(info.value) == (
        "the series of 1000 rows x 2 columns need about 0.00 GiB held in memory, and one "
        "batch of 4 windows of 10 steps 0.00 GiB more, but 0.00 GiB of memory is available; "
        "use fewer rows or columns, or lower `window` or `batch_size`"
    )
    with pytest.raises(DataError, match=r"of up to 10 steps \(`window` is 'auto'\)"):
        memory.check_series_fit(1000, 2, 1, 10, 4, available=0, exact=False)
