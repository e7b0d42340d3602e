"""Data parallelism over a 1-D mesh ``("data",)``, on one process or many.

Parameters and optimizer state are replicated on every device; each global batch is split
along its first (batch) axis. One device is the same code path with a mesh of size 1.

Several processes (one per host, or one per GPU) join with :func:`initialize`, which calls
``jax.distributed.initialize`` before anything touches a device. After that ``jax.devices()``
lists the devices of all processes, every process runs the same program, and:

- each process reads only its rows of each global batch
  (:func:`stacklstm.data.process_slice`) and :func:`shard_batch` puts them on its local
  devices with ``jax.make_array_from_process_local_data``;
- whatever the host reads back to decide something (losses, NaN checks, early stopping) goes
  through :func:`host_values`, which hands every process process 0's numbers, so the
  processes never take different branches;
- only process 0 (:func:`is_primary`) writes files other than checkpoints; Orbax writes
  those from all processes together.

Example:
    >>> import numpy as np
    >>> mesh = make_mesh()
    >>> n = mesh.devices.size * 2                       # rows: a multiple of the device count
    >>> x, y = shard_batch(mesh, np.zeros((n, 3)), np.zeros((n,)))
    >>> x.sharding.spec == P("data")
    True
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

log = logging.getLogger(__name__)

DATA_AXIS = "data"
ENV_COORDINATOR = "STACKLSTM_COORDINATOR"
ENV_NUM_PROCESSES = "STACKLSTM_NUM_PROCESSES"
ENV_PROCESS_ID = "STACKLSTM_PROCESS_ID"
T = TypeVar("T")


# --------------------------------------------------------------------------- processes


def _env_int(environ: Mapping[str, str], name: str) -> int | None:
    text = environ.get(name, "").strip()
    if not text:
        return None
    try:
        return int(text)
    except ValueError:
        raise ValueError(f"{name} must be an integer, got {text!r}") from None


def launcher_detected(environ: Mapping[str, str] | None = None) -> str | None:
    """The multi-process launcher this process was started by, if JAX can read its settings.

    ``"slurm"`` for an ``srun`` step of more than one task, ``"openmpi"`` for ``mpirun -n N``
    with ``N > 1``; None otherwise (a single task is a single-process run).
    """
    environ = os.environ if environ is None else environ
    slurm = ("SLURM_JOB_ID", "SLURM_STEP_NODELIST", "SLURM_PROCID", "SLURM_LOCALID")
    if all(name in environ for name in slurm) and (_env_int(environ, "SLURM_NTASKS") or 1) > 1:
        return "slurm"
    if "OMPI_MCA_orte_hnp_uri" in environ and (
        (_env_int(environ, "OMPI_COMM_WORLD_SIZE") or 1) > 1
    ):
        return "openmpi"
    return None


def initialize(
    coordinator: str | None = None,
    num_processes: int | None = None,
    process_id: int | None = None,
    *,
    environ: Mapping[str, str] | None = None,
) -> bool:
    """Join a multi-process run when one is asked for; call it before anything uses JAX.

    Each argument left None is read from ``STACKLSTM_COORDINATOR``, ``STACKLSTM_NUM_PROCESSES``
    and ``STACKLSTM_PROCESS_ID``. Without any of them, a SLURM or Open MPI launch of more than
    one task still initializes (``jax.distributed.initialize()`` reads the launcher's
    variables); otherwise the run is a single process and nothing happens. On CPU the
    processes talk over gloo (``jax_cpu_collectives_implementation``), unless the environment
    variable ``JAX_CPU_COLLECTIVES_IMPLEMENTATION`` chose otherwise.

    Args:
        coordinator: ``HOST:PORT`` of process 0, reachable from every process.
        num_processes: Number of processes in the run.
        process_id: This process's index, ``0 <= process_id < num_processes``.
        environ: Variables to read instead of ``os.environ`` (tests).

    Returns:
        Whether JAX's distributed runtime is initialized (True also if it already was).

    Raises:
        ValueError: A malformed or incomplete setting (checked before connecting).

    Example:
        >>> initialize()  # no flags, no variables, no launcher: one process  # doctest: +SKIP
        False
    """
    environ = os.environ if environ is None else environ
    if coordinator is None:
        coordinator = environ.get(ENV_COORDINATOR, "").strip() or None
    if num_processes is None:
        num_processes = _env_int(environ, ENV_NUM_PROCESSES)
    if process_id is None:
        process_id = _env_int(environ, ENV_PROCESS_ID)
    if coordinator is not None:
        host, _, port = coordinator.rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise ValueError(
                f"`coordinator` must be HOST:PORT (e.g. 10.0.0.1:1234), got {coordinator!r}"
            )
    if num_processes is not None and (isinstance(num_processes, bool) or num_processes < 1):
        raise ValueError(f"`num_processes` must be >= 1, got {num_processes}")
    if process_id is not None and not 0 <= process_id < (num_processes or process_id + 1):
        raise ValueError(
            f"`process_id` must be in [0, {num_processes}) for {num_processes} processes, "
            f"got {process_id}"
        )
    given = {
        "`coordinator`": coordinator,
        "`num_processes`": num_processes,
        "`process_id`": process_id,
    }
    launcher = launcher_detected(environ)
    if launcher is None:
        if num_processes == 1 or all(value is None for value in given.values()):
            return jax.distributed.is_initialized()  # one process
        missing = [flag for flag, value in given.items() if value is None]
        if missing:
            raise ValueError(
                f"a multi-process run needs `coordinator`, `num_processes` and `process_id` "
                f"(or {ENV_COORDINATOR}, {ENV_NUM_PROCESSES}, {ENV_PROCESS_ID}); "
                f"missing: {', '.join(missing)}"
            )
    if jax.distributed.is_initialized():
        return True
    if "JAX_CPU_COLLECTIVES_IMPLEMENTATION" not in environ:
        # Without it a CPU process would have no cross-process collectives; harmless on GPU.
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
    jax.distributed.initialize(coordinator, num_processes, process_id)
    idled = idle_gloo_event_loop(environ)
    log.info(
        "process %d of %d (%s), %d local of %d devices%s",
        jax.process_index(),
        jax.process_count(),
        launcher or "flags",
        jax.local_device_count(),
        jax.device_count(),
        ", gloo's event loop in the idle scheduling class" if idled else "",
    )
    return True


# epoll_wait's system call number and gloo's call: epoll_wait(fd, events, 64, 10 ms).
_EPOLL_WAIT = {"x86_64": "232", "aarch64": "22"}  # aarch64 has epoll_pwait only
_GLOO_LOOP_CALL = ("0x40", "0xa")
ENV_GLOO_IDLE = "STACKLSTM_GLOO_IDLE"


def gloo_event_loop_threads() -> list[int]:
    """The ids of this process's threads that are gloo's TCP event loop (Linux; else [])."""
    import platform

    number = _EPOLL_WAIT.get(platform.machine())
    if number is None or not os.path.isdir("/proc/self/task"):
        return []
    found = []
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/syscall") as f:
                call = f.read().split()
        except OSError:  # the thread ended, or the file is not readable
            continue
        if len(call) > 4 and call[0] == number and tuple(call[3:5]) == _GLOO_LOOP_CALL:
            found.append(int(tid))
    return found


def idle_gloo_event_loop(environ: Mapping[str, str] | None = None) -> list[int]:
    """Move gloo's TCP event-loop thread to the idle scheduling class; return its thread ids.

    gloo (JAX's cross-process collectives on CPU) busy-polls its sockets in one thread once
    the processes are connected (gloo issue 246, "Don't busy-spin in tcp transport's event
    loop"). On a host that runs one process per core, that thread takes half of the core
    from the computation: measured on 2 cores, a small training step in two processes took
    60 ms instead of 10 ms. In the idle class (``SCHED_IDLE``) it runs whenever the
    process's other threads wait, which is exactly when a collective needs it. Only the
    scheduling changes, never a number. Linux only, best effort: no thread found, no change;
    ``STACKLSTM_GLOO_IDLE=0`` turns it off. Called by :func:`initialize` on CPU.
    """
    import time

    environ = os.environ if environ is None else environ
    if environ.get(ENV_GLOO_IDLE, "1").strip() == "0" or not hasattr(os, "SCHED_IDLE"):
        return []
    if jax.default_backend() != "cpu":
        return []
    threads: list[int] = []
    for _ in range(20):  # the loop wakes every 10 ms: catch it inside its wait
        threads = gloo_event_loop_threads()
        if threads:
            break
        time.sleep(0.002)
    for tid in threads:
        try:
            os.sched_setscheduler(tid, os.SCHED_IDLE, os.sched_param(0))
        except OSError as e:
            log.warning("could not lower the priority of gloo's event loop: %s", e)
            return []
    return threads


def is_primary() -> bool:
    """True on process 0, the one that writes logs, metrics, the report and plots."""
    return jax.process_index() == 0


def sync(name: str) -> None:
    """Wait until every process got here (a no-op with one process)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


def host_values(tree: T) -> T:
    """Read device values on the host, the same on every process.

    With several processes the leaves are process 0's values (a broadcast), so a decision
    taken on them (stop on NaN, early stopping, best checkpoint) is the same everywhere even
    if two replicas of a number differed in the last bit. Leaves must be replicated (or
    host) arrays. One host sync.
    """
    host = jax.device_get(tree)
    if jax.process_count() == 1:
        return host
    from jax.experimental import multihost_utils

    return multihost_utils.broadcast_one_to_all(host)


def gather(tree: T) -> T:
    """The full value of every leaf on the host of every process (sharded leaves included)."""
    if jax.process_count() == 1:
        return jax.device_get(tree)
    from jax.experimental import multihost_utils

    return multihost_utils.process_allgather(tree, tiled=True)


# --------------------------------------------------------------------------- mesh, placement


def make_mesh(devices: Sequence[jax.Device] | None = None) -> Mesh:
    """A 1-D mesh named ``("data",)`` over ``devices`` (default: all of ``jax.devices()``,
    which lists every process's devices, process by process)."""
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
    """Raise ValueError unless ``batch_size`` divides evenly over the mesh's devices and,
    with several processes, over the processes and each process's devices."""
    n = int(mesh.devices.size)
    if batch_size % n:
        lower = batch_size - batch_size % n
        raise ValueError(
            f"`batch_size` ({batch_size}) must be a multiple of the device count ({n}); "
            f"use e.g. `batch_size={lower or n}` or `batch_size={lower + n}`"
        )
    processes = {d.process_index for d in mesh.devices.flat}
    local = sum(d.process_index == jax.process_index() for d in mesh.devices.flat)
    if len(processes) > 1 and n != local * len(processes):
        raise ValueError(
            f"the {n} devices are not spread evenly over the {len(processes)} processes "
            f"({local} on process {jax.process_index()}); give every process as many devices"
        )


def replicate(tree: T, mesh: Mesh) -> T:
    """Place every leaf of ``tree`` fully on every device of ``mesh``.

    With several processes every process must pass the same values (e.g. made from the same
    seed); each one fills its own devices from a host copy (``device_put`` refuses to move a
    committed array onto other processes' devices).
    """
    sharding = replicated(mesh)
    if jax.process_count() == 1:
        return jax.device_put(tree, sharding)

    def put(leaf: Any) -> jax.Array:
        if jax.dtypes.issubdtype(leaf.dtype, jax.dtypes.prng_key):  # typed keys: via key data
            data = put(jax.random.key_data(leaf))
            return jax.random.wrap_key_data(data, impl=jax.random.key_impl(leaf))
        host = np.asarray(jax.device_get(leaf))
        return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])

    return jax.tree.map(put, tree)


def shard_batch(mesh: Mesh, *arrays: Any, whole: bool = False) -> Any:
    """Place host arrays of one global batch on ``mesh``, split along their first axis.

    The only function that places batches.

    Args:
        mesh: From :func:`make_mesh`.
        *arrays: numpy arrays with the same first (batch) dimension; a single NamedTuple
            (e.g. a ``Batch``, whose ``x`` may itself be a NamedTuple of arrays) is accepted
            too and returned as the same type.
        whole: False (training): each process passes only its own contiguous rows of the
            global batch (one process: the whole batch). True (evaluation): every process
            passes the same whole global batch and keeps the rows of its own devices.

    Returns:
        The arrays as global ``jax.Array``s sharded ``P("data")``: a tuple, or the NamedTuple.

    Raises:
        ValueError: The batch does not divide evenly over the devices.
    """
    if len(arrays) == 1 and isinstance(arrays[0], tuple):
        fields = arrays[0]
        if any(isinstance(a, tuple) for a in fields):  # nested NamedTuples (model inputs)
            return type(fields)(
                *[
                    shard_batch(mesh, a, whole=whole)
                    if isinstance(a, tuple)
                    else shard_batch(mesh, a, whole=whole)[0]
                    for a in fields
                ]
            )
        return type(fields)(*shard_batch(mesh, *fields, whole=whole))
    sharding = batch_sharding(mesh)
    devices = int(mesh.devices.size)
    if not whole:
        devices = sum(d.process_index == jax.process_index() for d in mesh.devices.flat)
    out = []
    for a in arrays:
        a = np.asarray(a)
        if a.ndim == 0 or a.shape[0] % devices:
            raise ValueError(
                f"a batch of {a.shape[0] if a.ndim else 'no'} rows cannot be split evenly over "
                f"{devices} devices; use a batch size that is a multiple of {devices}"
            )
        global_shape = a.shape if whole else None  # None: this process's rows only
        out.append(jax.make_array_from_process_local_data(sharding, a, global_shape))
    return tuple(out)
