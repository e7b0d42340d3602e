"""Batches: shuffled, resumable index batches, and each process's share of a global batch."""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np

from ..checks import DataError, is_int


def steps_per_epoch(n: int, batch_size: int, drop_last: bool = True) -> int:
    """Batches in one epoch over ``n`` examples.

    Example:
        >>> steps_per_epoch(10, 4), steps_per_epoch(10, 4, drop_last=False)
        (2, 3)
    """
    if not is_int(n) or n < 0:
        raise ValueError(f"n must be an integer >= 0, got {n!r}")
    if not is_int(batch_size) or batch_size < 1:
        raise DataError(f"batch_size must be an integer >= 1, got {batch_size!r}")
    return n // batch_size if drop_last else -(-n // batch_size)


def iterate_batches(
    n: int,
    batch_size: int,
    *,
    seed: int,
    epoch: int,
    start_step: int = 0,
    drop_last: bool = True,
) -> Iterator[np.ndarray]:
    """Yield index arrays ``(batch_size,)`` over a shuffled epoch, resumable at any step.

    The order is ``np.random.default_rng([seed, epoch]).permutation(n)``, so a run resumed
    at cursor ``(epoch, start_step)`` yields exactly the batches the uninterrupted run
    would have yielded from that step on.

    Raises:
        DataError: ``drop_last`` and fewer than ``batch_size`` examples (no batch at all).

    Example:
        >>> [b.tolist() for b in iterate_batches(5, 2, seed=0, epoch=0, drop_last=False)]
        [[2, 4], [3, 0], [1]]
    """
    steps = steps_per_epoch(n, batch_size, drop_last)
    for name, value in (("seed", seed), ("epoch", epoch)):
        if not is_int(value) or value < 0:
            raise ValueError(f"{name} must be an integer >= 0, got {value!r}")
    if not is_int(start_step) or not 0 <= start_step <= steps:
        raise ValueError(f"start_step must be an integer in [0, {steps}], got {start_step!r}")
    if n > 0 and steps == 0:
        raise DataError(
            f"batch_size ({batch_size}) is larger than the {n} training windows; lower it or "
            "use more data"
        )
    order = np.random.default_rng([seed, epoch]).permutation(n)
    for step in range(start_step, steps):
        yield order[step * batch_size : (step + 1) * batch_size]


def process_slice(indices: np.ndarray, process_index: int, process_count: int) -> np.ndarray:
    """The contiguous part of a global batch of ``indices`` that one process feeds.

    Example:
        >>> process_slice(np.arange(6), 1, 3).tolist()
        [2, 3]
    """
    if not is_int(process_count) or process_count < 1:
        raise ValueError(f"process_count must be an integer >= 1, got {process_count!r}")
    if not is_int(process_index) or not 0 <= process_index < process_count:
        raise ValueError(f"process_index must be in [0, {process_count}), got {process_index!r}")
    indices = np.asarray(indices)
    if indices.shape[0] % process_count:
        raise DataError(
            f"the global batch of {indices.shape[0]} must divide evenly over {process_count} "
            "processes; choose a batch size that is a multiple of the process count"
        )
    size = indices.shape[0] // process_count
    return indices[process_index * size : (process_index + 1) * size]
