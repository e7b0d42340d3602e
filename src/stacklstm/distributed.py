"""Device mesh and placement: data parallelism over a 1-D mesh ``("data",)``.

Parameters and optimizer state are replicated on every device; each batch is split along its
first (batch) axis. One device is the same code path with a mesh of size 1.

Multi-process runs (``jax.distributed.initialize``) are not wired up yet; batches are placed
in exactly one function, :func:`shard_batch`, which already builds global arrays from each
process's rows with ``jax.make_array_from_process_local_data`` (pick a process's rows with
:func:`stacklstm.data.process_slice`).

Example:
    >>> import numpy as np
    >>> mesh = make_mesh()
    >>> n = mesh.devices.size * 2                       # rows: a multiple of the device count
    >>> x, y = shard_batch(mesh, np.zeros((n, 3)), np.zeros((n,)))
    >>> x.sharding.spec == P("data")
    True
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

DATA_AXIS = "data"
T = TypeVar("T")


def make_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A 1-D mesh named ``("data",)`` over ``devices`` (default: all of ``jax.devices()``)."""
    devices = list(jax.devices() if devices is None else devices)
    if not devices:
        raise ValueError("make_mesh needs at least one device")
    return Mesh(np.asarray(devices), (DATA_AXIS,))


def replicated(mesh: Mesh) -> NamedSharding:
    """The sharding that keeps a full copy on every device (params, optimizer state)."""
    return NamedSharding(mesh, P())


def batch_sharding(mesh: Mesh) -> NamedSharding:
    """The sharding that splits the first (batch) axis over the ``data`` axis."""
    return NamedSharding(mesh, P(DATA_AXIS))


def check_batch_size(batch_size: int, mesh: Mesh) -> None:
    """Raise ValueError unless ``batch_size`` divides evenly over the mesh's devices."""
    n = int(mesh.devices.size)
    if batch_size % n:
        raise ValueError(
            f"batch_size ({batch_size}) must be a multiple of the device count ({n}); "
            f"use e.g. --batch-size {max(n, batch_size - batch_size % n)}"
        )


def replicate(tree: T, mesh: Mesh) -> T:
    """Place every leaf of ``tree`` fully on every device of ``mesh``."""
    return jax.device_put(tree, replicated(mesh))


def shard_batch(mesh: Mesh, *arrays: Any) -> Any:
    """Place host arrays of one global batch on ``mesh``, split along their first axis.

    The only function that places batches. With one process each array is the whole global
    batch; with several, each process passes its own contiguous rows.

    Args:
        mesh: From :func:`make_mesh`.
        *arrays: numpy arrays with the same first (batch) dimension; a single NamedTuple
            (e.g. a ``Batch``) is accepted too and returned as the same type.

    Returns:
        The arrays as global ``jax.Array``s sharded ``P("data")``: a tuple, or the NamedTuple.

    Raises:
        ValueError: The batch does not divide evenly over the devices.
    """
    if len(arrays) == 1 and isinstance(arrays[0], tuple):
        return type(arrays[0])(*shard_batch(mesh, *arrays[0]))
    sharding = batch_sharding(mesh)
    local_devices = sum(d.process_index == jax.process_index() for d in mesh.devices.flat)
    out = []
    for a in arrays:
        a = np.asarray(a)
        if a.ndim == 0 or a.shape[0] % local_devices:
            raise ValueError(
                f"a batch of {a.shape[0] if a.ndim else 'no'} rows cannot be split evenly over "
                f"{local_devices} devices; use a batch size that is a multiple of {local_devices}"
            )
        out.append(jax.make_array_from_process_local_data(sharding, a))
    return tuple(out)
