"""Batching: seeded epochs, resume mid-epoch, per-process slices."""

import numpy as np
import pytest

from helpers import raises_one_line
from stacklstm.data import iterate_batches, process_slice, steps_per_epoch


def test_iterate_batches_full_epoch_is_the_seeded_permutation():
    batches = list(iterate_batches(10, 3, seed=7, epoch=2))
    expected = np.random.default_rng([7, 2]).permutation(10)
    assert [b.tolist() for b in batches] == [expected[i : i + 3].tolist() for i in (0, 3, 6)]
    other = np.concatenate(list(iterate_batches(10, 3, seed=7, epoch=3)))
    assert not np.array_equal(np.concatenate(batches), other)


def test_iterate_batches_resume_equals_tail():
    full = [b.tolist() for b in iterate_batches(23, 4, seed=1, epoch=5)]
    assert len(full) == steps_per_epoch(23, 4) == 5
    for k in range(len(full) + 1):
        resumed = [b.tolist() for b in iterate_batches(23, 4, seed=1, epoch=5, start_step=k)]
        assert resumed == full[k:]


def test_iterate_batches_keep_last_and_errors():
    batches = list(iterate_batches(10, 4, seed=0, epoch=0, drop_last=False))
    assert [len(b) for b in batches] == [4, 4, 2]
    assert sorted(np.concatenate(batches).tolist()) == list(range(10))
    assert steps_per_epoch(10, 4, drop_last=False) == 3
    assert steps_per_epoch(10, 4) == 2
    assert steps_per_epoch(0, 4) == 0
    assert list(iterate_batches(0, 4, seed=0, epoch=0)) == []
    raises_one_line(
        "batch_size \\(16\\) is larger than the 10", list, iterate_batches(10, 16, seed=0, epoch=0)
    )
    with pytest.raises(ValueError, match="start_step"):
        list(iterate_batches(10, 4, seed=0, epoch=0, start_step=3))


def test_process_slice_hand_written():
    batch = np.array([9, 8, 7, 6, 5, 4])
    assert process_slice(batch, 0, 2).tolist() == [9, 8, 7]
    assert process_slice(batch, 1, 2).tolist() == [6, 5, 4]
    assert process_slice(batch, 2, 3).tolist() == [5, 4]
    raises_one_line("batch of 6 must divide evenly over 4 processes", process_slice, batch, 0, 4)
    with pytest.raises(ValueError, match="process_index"):
        process_slice(batch, 2, 2)
