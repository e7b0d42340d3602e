"""Orbax checkpoints of the training state, with the loop's bookkeeping (:mod:`.progress`).

Layout inside the run folder (see :mod:`stacklstm.rundir.info` for the rest)::

    out_dir/checkpoints/<step>/       latest checkpoints (the newest two are kept)
    out_dir/checkpoints_best/<step>/  the checkpoint with the best validation loss

Each checkpoint holds two items: ``state`` (params, optimizer state, step and the dropout RNG
key data, as arrays) and ``progress`` (JSON: the data cursor, best-validation bookkeeping and
the running loss sums of the current log interval and epoch, so a resumed run writes the same
metrics as an uninterrupted one). Saves are synchronous: when ``save`` returns, the step is on
disk; Orbax writes into a temporary folder and renames it, so a crash never leaves a half
checkpoint that looks complete (stale temporary folders are removed when the run is opened
again). A third item, ``checksum`` (JSON), holds the SHA-256 of the state's arrays: a restore
compares it, so a truncated or garbled file is reported instead of read as wrong numbers, and
:meth:`RunCheckpoints.restore_intact` falls back to the newest checkpoint that reads back
intact.

Example:
    >>> import tempfile, jax, jax.numpy as jnp
    >>> folder = tempfile.mkdtemp()
    >>> state = {"w": jnp.ones(3)}
    >>> with RunCheckpoints(folder) as ckpts:
    ...     _ = ckpts.save("latest", 7, state, jax.random.key(0), Progress(epoch=1))
    ...     restored, key, progress = ckpts.restore("latest", state)
    >>> progress.epoch, ckpts.latest_step("latest"), restored["w"].tolist()
    (1, 7, [1.0, 1.0, 1.0])
"""

from __future__ import annotations

import errno
import functools
import hashlib
import json
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any, ClassVar, Literal, TypeVar

import jax
import numpy as np

from ..rundir.files import BEST_DIR, LATEST_DIR
from ..signals import deferred, test_hook
from .progress import Progress

T = TypeVar("T")

log = logging.getLogger(__name__)

CONFIG_ITEM = "config"  # each checkpoint's copy of config.json
KEEP_LATEST = 2

Which = Literal["latest", "best"]


def abstract_target(abstract: Any, sharding: Any) -> Any:
    """``abstract`` (from ``jax.eval_shape``) with every leaf placed by ``sharding``: the
    ``target`` of :meth:`RunCheckpoints.restore`."""
    return jax.tree.map(
        lambda a: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=sharding), abstract
    )


def _all_finite(tree: Any) -> bool:
    """On the host: the save copies the arrays there anyway, and no op compiles per shape."""
    return all(
        np.isfinite(np.asarray(leaf)).all() for leaf in jax.device_get(jax.tree.leaves(tree))
    )


def state_checksum(tree: Any, progress: Progress | None = None) -> str:
    """SHA-256 (hex) of every leaf's dtype, shape and bytes, in tree order, read on the host,
    and of ``progress`` (its JSON, keys sorted; floats round-trip exactly).

    Example:
        >>> state_checksum({"w": np.zeros(2)}) == state_checksum({"w": np.zeros(2)})
        True
        >>> state_checksum({"w": np.zeros(2)}) == state_checksum({"w": np.ones(2)})
        False
    """
    digest = hashlib.sha256()
    if progress is not None:
        digest.update(json.dumps(progress.to_dict(), sort_keys=True).encode())
    for leaf in jax.device_get(jax.tree.leaves(tree)):
        array = np.ascontiguousarray(leaf)
        digest.update(f"{array.dtype.str}{array.shape};".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def _listing(list_steps: Callable[[], T]) -> T:
    """``list_steps()`` (Orbax opening or re-reading a checkpoint folder), tried again, three
    times in all, on an ``OSError``: Orbax looks at each step folder, and one that a writer
    deletes meanwhile raises (``NotADirectoryError``). For readers: a writer deletes the older
    steps only after committing a newer one, so a second look lists it."""
    for attempt in range(3):
        try:
            return list_steps()
        except OSError:
            if attempt == 2:
                raise
    raise AssertionError("not reached")


class RunCheckpoints:
    """The two Orbax ``CheckpointManager``s of a run folder: ``latest`` and ``best``.

    Args:
        run_dir: The run folder.
        read_only: Open existing checkpoints for reading only (evaluate, predict).

    Use as a context manager, or call :meth:`close`.
    """

    _hooked: ClassVar[bool] = False  # the "checkpoint" test hook fired in this process

    def __init__(
        self, run_dir: str | Path, *, read_only: bool = False, config: dict | None = None
    ) -> None:
        import orbax.checkpoint as ocp

        self._ocp = ocp
        self._config = config  # saved with every checkpoint (see rundir.run_copy)
        self.run_dir = Path(run_dir).absolute()
        self._managers = {}
        for which, name, keep in (("latest", LATEST_DIR, KEEP_LATEST), ("best", BEST_DIR, 1)):
            options = ocp.CheckpointManagerOptions(
                max_to_keep=keep,
                create=not read_only,  # Orbax's read_only=True only adds warnings
                enable_async_checkpointing=False,  # a finished save is durable
                cleanup_tmp_directories=not read_only,  # saves cut short by a crash
            )
            path = self.run_dir / name
            open_manager = functools.partial(ocp.CheckpointManager, path, options=options)
            self._managers[which] = _listing(open_manager) if read_only else open_manager()

    def directory(self, which: Which) -> Path:
        return self.run_dir / (LATEST_DIR if which == "latest" else BEST_DIR)

    def latest_step(self, which: Which) -> int | None:
        """The newest saved step of ``which``, or None."""
        return self._managers[which].latest_step()

    def save(self, which: Which, step: int, state: Any, rng: jax.Array, progress: Progress) -> bool:
        """Save ``state`` (any array pytree), the RNG key and ``progress`` as ``step``.

        A step that is already saved is left as it is (a resumed run reaches the same step
        with the same values). A best checkpoint is refused (with a warning) when the state
        holds NaN/Inf. Returns whether a checkpoint was written.

        Raises:
            OSError: The write failed (e.g. the disk is full); the message names the step and
                the newest complete checkpoint, which the failed write leaves as it was.
        """
        manager = self._managers[which]
        if step in manager.all_steps():
            return False
        if which == "best" and not _all_finite(state):
            log.warning("not saving a best checkpoint at step %d: parameters hold NaN/Inf", step)
            return False
        arrays = {"train": state, "rng": jax.random.key_data(rng)}
        with deferred():  # a signal waits until the save is over: no torn write, no noise
            if step > 0 and not RunCheckpoints._hooked:
                RunCheckpoints._hooked = True
                test_hook("checkpoint")
            self._write(which, step, arrays, progress)
        return True

    def _write(self, which: Which, step: int, arrays: Any, progress: Progress) -> None:
        ocp = self._ocp
        manager = self._managers[which]
        items = {
            "state": ocp.args.StandardSave(arrays),
            "progress": ocp.args.JsonSave(progress.to_dict()),
            "checksum": ocp.args.JsonSave({"sha256": state_checksum(arrays, progress)}),
        }
        if self._config is not None:
            items[CONFIG_ITEM] = ocp.args.JsonSave(self._config)
        try:
            manager.save(step, args=ocp.args.Composite(**items))
            manager.wait_until_finished()
        except Exception as err:  # OSError, or the TensorStore error a full disk raises
            raise OSError(
                getattr(err, "errno", None) or errno.EIO, self._write_failure(which, step, err)
            ) from err

    def _write_failure(self, which: Which, step: int, err: Exception) -> str:
        """The one line of a failed write of ``step``: what failed and, when there is one,
        the newest complete latest checkpoint (the one ``resume=True`` continues from), which
        the failed write leaves intact; after a failed best checkpoint, with its folder."""
        reason = " ".join(str(err).split())[:300] or type(err).__name__
        message = f"cannot write checkpoint step {step} to {self.directory(which)}: {reason}"
        try:
            intact = [
                s
                for s in self._managers["latest"].all_steps()
                if not (which == "latest" and s == step)
            ]
        except Exception:  # the write's error is the one to report
            intact = []
        if intact:
            where = "" if which == "latest" else f" in {self.directory('latest')}"
            message += (
                f"; the newest complete checkpoint is still step {max(intact)}{where}: fix "
                "the cause (a full disk?) and continue from it with `resume=True`"
            )
        return message

    def restore(
        self, which: Which, target: Any, step: int | None = None
    ) -> tuple[Any, jax.Array, Progress]:
        """Restore ``(state, rng, progress)`` of ``step`` (default: the newest).

        Args:
            target: A pytree with the structure of the saved state whose leaves are arrays or
                ``jax.ShapeDtypeStruct``s (e.g. from ``jax.eval_shape``); their shardings,
                when given, place the restored arrays.

        Raises:
            ValueError: No checkpoint, or one whose arrays do not fit ``target``.
        """
        ocp = self._ocp
        manager = self._managers[which]
        step = manager.latest_step() if step is None else step
        if step is None:
            raise ValueError(f"no checkpoint in {self.directory(which)}")
        key_data = jax.random.key_data(jax.random.key(0))
        abstract = jax.tree.map(ocp.utils.to_shape_dtype_struct, target)
        # The key gets an explicit placement too: left out, Orbax would use the one saved
        # in the checkpoint, which names devices a run on another topology does not have.
        meshes = [
            leaf.sharding.mesh
            for leaf in jax.tree.leaves(abstract)
            if isinstance(getattr(leaf, "sharding", None), jax.sharding.NamedSharding)
        ]
        key_sharding = (
            jax.sharding.NamedSharding(meshes[0], jax.sharding.PartitionSpec())
            if meshes
            else jax.sharding.SingleDeviceSharding(jax.local_devices()[0])
        )
        rng = jax.ShapeDtypeStruct(key_data.shape, key_data.dtype, sharding=key_sharding)
        abstract = {"train": abstract, "rng": rng}
        items = {"state": ocp.args.StandardRestore(abstract), "progress": ocp.args.JsonRestore()}
        # Checkpoints written before checksums existed have none and are read unverified.
        verify = (manager.directory / str(step) / "checksum").is_dir()
        if verify:
            items["checksum"] = ocp.args.JsonRestore()
        try:
            with deferred():  # Orbax's event loop is not cut short by a signal
                restored = manager.restore(step, args=ocp.args.Composite(**items))
            # The same tree type as `target` (NamedTuples included), whatever Orbax returns.
            state = jax.tree.unflatten(
                jax.tree.structure(target), jax.tree.leaves(restored["state"]["train"])
            )
            key_data = restored["state"]["rng"]
            progress = Progress.from_dict(dict(restored["progress"]))
            saved = dict(restored["checksum"]).get("sha256") if verify else None
        except Exception as err:  # a truncated file surfaces as a bare Exception from Orbax
            first = " ".join(str(err).split())[:300] or type(err).__name__
            raise ValueError(
                f"cannot restore step {step} from {self.directory(which)}: {first}"
            ) from err
        if verify and state_checksum({"train": state, "rng": key_data}, progress) != saved:
            raise ValueError(
                f"cannot restore step {step} from {self.directory(which)}: its contents differ "
                "from the checksum written with them (a truncated or garbled file)"
            )
        return state, jax.random.wrap_key_data(np.asarray(key_data)), progress

    def saved_config(self, which: Which, step: int) -> dict | None:
        """What checkpoint ``step`` keeps of its run (``config.json`` and the data's time
        step, see :func:`~stacklstm.rundir.info.run_copy`); None for a checkpoint written
        before checkpoints kept it."""
        path = self.directory(which) / str(step) / CONFIG_ITEM / "metadata"
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as err:
            raise ValueError(
                f"cannot read the config saved with {path.parent.parent}: {err}"
            ) from err

    def restore_newest(self, which: Which, target: Any) -> tuple[int, Any, jax.Array, Progress]:
        """:meth:`restore` the newest complete checkpoint of ``which`` as a reader: safe while
        another process trains into the folder. Returns ``(step, state, rng, progress)``.

        A writer commits a checkpoint by renaming its folder (so a half-written one is never
        listed) and deletes the older ones after it; a step deleted between listing and
        reading is therefore followed by a newer one, which is read instead.

        Raises:
            ValueError: No checkpoint, or the newest one cannot be read (and was not replaced
                by a newer one meanwhile).
        """
        manager = self._managers[which]

        def newest() -> int | None:  # the steps on disk now, not when the manager was opened
            _listing(manager.reload)
            return manager.latest_step()

        tried: set[int] = set()
        while True:
            step = newest()
            if step is None:
                raise ValueError(f"no checkpoint in {self.directory(which)}")
            try:
                return (step, *self.restore(which, target, step))
            except (ValueError, OSError):  # OSError: e.g. NotADirectoryError, a folder going
                if step in tried or newest() == step:
                    raise  # still the newest: a damaged checkpoint, not a moving one
                tried.add(step)
                log.debug("step %d of %s was replaced while read", step, self.directory(which))

    def restore_intact(self, which: Which, target: Any) -> tuple[Any, jax.Array, Progress]:
        """:meth:`restore` the newest checkpoint of ``which`` that reads back intact.

        A newer one that cannot be read (a truncated or garbled file, arrays that differ from
        their checksum) is named in a warning and deleted, so that the resumed run, which
        repeats the lost steps with the same numbers, writes it again.

        Raises:
            ValueError: No checkpoint, or none readable (the message names each failure).
        """
        steps = sorted(self._managers[which].all_steps(), reverse=True)
        if not steps:
            raise ValueError(f"no checkpoint in {self.directory(which)}")
        failures: list[str] = []
        for step in steps:
            try:
                restored = self.restore(which, target, step)
            except ValueError as err:
                failures.append(str(err))
                continue
            for bad, failure in zip(steps, failures, strict=False):
                log.warning(
                    "%s; using step %d, the newest intact checkpoint, and deleting step %d "
                    "(the steps after %d are repeated with the same numbers)",
                    failure,
                    step,
                    bad,
                    step,
                )
                self._managers[which].delete(bad)
            return restored
        raise ValueError(
            f"no checkpoint in {self.directory(which)} is readable: {' | '.join(failures)}; "
            "start a new run"
        )

    def close(self) -> None:
        with deferred():
            for manager in self._managers.values():
                manager.close()

    def __enter__(self) -> RunCheckpoints:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
