"""One writer per run folder: an OS lock on ``<run folder>/.lock``, held for the life of ``fit``.

The lock is ``fcntl.flock`` on the lock file (the kernel drops it when the holder exits, even
when killed, so a crashed run never leaves a stale lock); the file holds the holder's pid so
that a second writer can name it. Readers (``evaluate``, ``predict``) take no lock: they read
only complete checkpoints (see :meth:`stacklstm.train.checkpoint.RunCheckpoints.restore_newest`).

Example:
    >>> import tempfile
    >>> folder = tempfile.mkdtemp()
    >>> with RunLock.acquire(folder) as lock:
    ...     RunLock.acquire(folder)  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    stacklstm.rundir.lock.RunInUseError: ... is in use by another `stacklstm train` (pid ...)...
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator
from pathlib import Path

#: The lock file of a run folder (named here, not in :mod:`.files`: this module imports nothing
#: of the package, so that a process can load it on its own).
LOCK_FILE = ".lock"


class RunInUseError(ValueError):
    """Another process holds the run folder's lock (a user error: exit status 2)."""


def lock_holder(path: Path) -> str:
    """``"pid N"`` of the process named in the lock file ``path`` (``"pid unknown"``)."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(path.read_text().strip() or "x")
        return f"pid {pid}"
    return "pid unknown"


def _open_lock_file(path: Path, mode: int) -> int:
    """Open an existing lock file without blocking; anything but a plain file (a FIFO, a
    device, a folder) is refused, never waited on.

    Raises:
        RunInUseError: ``path`` is not a plain file.
        OSError: It cannot be opened (FileNotFoundError: removed meanwhile).
    """
    import stat

    fd = os.open(path, mode | os.O_CLOEXEC | os.O_NONBLOCK)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise RunInUseError(
            f"{path} is not a plain file, so the run folder cannot be locked; remove it"
        )
    os.set_blocking(fd, True)
    return fd


class RunLock:
    """The held lock of a run folder; :meth:`release` (or the ``with`` block's end) drops it.

    Attributes:
        run_dir: The locked folder.
        created: Whether :meth:`acquire` created the lock file (so a failed new run removes
            it again).
    """

    def __init__(self, run_dir: Path, fd: int, created: bool) -> None:
        self.run_dir, self._fd, self.created = run_dir, fd, created

    @property
    def path(self) -> Path:
        return self.run_dir / LOCK_FILE

    @classmethod
    def acquire(cls, run_dir: str | Path) -> RunLock:
        """Lock ``run_dir`` (an existing folder) for writing, without waiting.

        Raises:
            RunInUseError: Another process holds the lock; the message names the folder and
                the holder's pid. Nothing is changed.
            OSError: The lock file cannot be created (no permission, say).
        """
        import fcntl

        run_dir = Path(run_dir)
        path = run_dir / LOCK_FILE
        for _ in range(100):  # only a holder that removes the file as we open it makes us retry
            created = False
            try:
                fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
                created = True
            except FileExistsError:
                try:
                    fd = _open_lock_file(path, os.O_RDWR)
                except FileNotFoundError:
                    continue
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError as err:
                os.close(fd)
                if err.errno not in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                    raise
                raise RunInUseError(
                    f"{run_dir} is in use by another `stacklstm train` ({lock_holder(path)}); wait "
                    "for it to end or choose another `out_dir`"
                ) from None
            try:  # the file we locked must still be the one at `path` (not removed meanwhile)
                same = os.path.samestat(os.fstat(fd), os.stat(path))
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            os.ftruncate(fd, 0)
            os.write(fd, f"{os.getpid()}\n".encode())
            return cls(run_dir, fd, created)
        raise RunInUseError(f"could not lock {run_dir}: its lock file keeps changing")

    @staticmethod
    def check_free(run_dir: str | Path) -> None:
        """Raise :class:`RunInUseError` if a process holds ``run_dir``'s lock; creates nothing."""
        import fcntl

        path = Path(run_dir) / LOCK_FILE
        try:
            fd = _open_lock_file(path, os.O_RDONLY)
        except OSError:
            return  # no lock file (or none readable): nobody to wait for
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except OSError:
            raise RunInUseError(
                f"{run_dir} is in use by another `stacklstm train` ({lock_holder(path)}); wait "
                "for it to end or choose another `out_dir`"
            ) from None
        finally:
            os.close(fd)

    def release(self, *, remove: bool = False) -> None:
        """Drop the lock; ``remove`` deletes the lock file first (while still holding it)."""
        if self._fd < 0:
            return
        if remove:
            self.path.unlink(missing_ok=True)
        os.close(self._fd)
        self._fd = -1

    def __enter__(self) -> RunLock:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


@contextlib.contextmanager
def unique_dir(parent: str | Path, name: str) -> Iterator[Path]:
    """Create a new empty folder ``parent/name``, or ``name-2``, ``name-3``, ... if that exists,
    and yield it (``os.mkdir`` is atomic: two processes never get the same folder). If the
    block fails, the folder and a ``parent`` made here are removed when they are empty.

    Example:
        >>> import tempfile
        >>> parent = tempfile.mkdtemp()
        >>> with unique_dir(parent, "run") as a, unique_dir(parent, "run") as b:
        ...     a.name, b.name
        ('run', 'run-2')
    """
    parent = Path(parent)
    made_parent = not parent.exists()
    parent.mkdir(parents=True, exist_ok=True)
    for n in range(1, 10_000):
        path = parent / (name if n == 1 else f"{name}-{n}")
        try:
            path.mkdir()
        except FileExistsError:
            continue
        break
    else:
        raise OSError(errno.EEXIST, f"cannot create a new folder {parent / name}-N: all taken")
    try:
        yield path
    except BaseException:
        for folder in (path, parent) if made_parent else (path,):
            with contextlib.suppress(OSError):
                folder.rmdir()  # only if empty
        raise
