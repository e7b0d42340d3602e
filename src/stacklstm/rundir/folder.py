"""Creating a run folder, and writing its files atomically.

A run folder is either resumable (``config.json`` and a first checkpoint) or absent: it is
created inside :func:`creating_run_dir`, which removes whatever it made if creating fails.
What the folder holds is :mod:`stacklstm.rundir.info`'s; its file names are
:mod:`stacklstm.rundir.files`'.

Example:
    >>> import tempfile
    >>> from pathlib import Path
    >>> folder = Path(tempfile.mkdtemp())
    >>> atomic_write_text(folder / "note.txt", "hello")
    >>> (folder / "note.txt").read_text()
    'hello'
"""

from __future__ import annotations

import contextlib
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

from .files import CONFIG_FILE, LOCK_FILE
from .lock import RunLock


def umask_mode() -> int:
    """The mode a new file gets from ``open``: ``0o666`` less the process's umask."""
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return 0o666 & ~mask


def atomic_write(path: str | Path, write: Callable[[IO[bytes]], Any]) -> None:
    """Write a file all at once: ``write(handle)`` fills a temporary file in the same folder,
    which then replaces ``path`` (``os.replace`` is atomic on one file system).

    The file gets the mode of the file it replaces, or for a new file the umask's (as
    ``open`` would give it), not the temporary file's 0600. To write through symlinks, to a
    FIFO, a device or standard output, see :func:`stacklstm.rundir.outputs.write_output`.
    """
    path = Path(path)
    try:
        mode = stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        mode = umask_mode()
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | Path, text: str) -> None:
    """Write ``text`` (UTF-8) to ``path`` atomically."""
    atomic_write(path, lambda handle: handle.write(text.encode("utf-8")))


def _normal(path: str | Path) -> Path:
    """``path`` absolute, with ``.`` and ``..`` taken out (symlinks are not followed)."""
    return Path(os.path.normpath(Path(path).absolute()))


def is_resumable(run_dir: str | Path) -> bool:
    """Whether ``run_dir`` holds a run that ``resume=True`` continues: ``config.json`` and a
    complete checkpoint, or for a seed ensemble ``config.json`` and ``members/`` (checks
    files only, reads nothing)."""
    run_dir = Path(run_dir)
    latest = run_dir / "checkpoints"
    with contextlib.suppress(OSError):
        if (run_dir / CONFIG_FILE).is_file() and (run_dir / "members").is_dir():
            return True
        return (run_dir / CONFIG_FILE).is_file() and any(p.name.isdigit() for p in latest.iterdir())
    return False


#: What a table's name ends with (a file a new run folder may already hold: its own table).
_TABLE_SUFFIXES = (".csv", ".tsv", ".txt", ".parquet", ".pq", ".gz", ".bz2", ".zip", ".xz", ".zst")


def _own_table(out_dir: Path, keep: tuple[str, ...] = ()) -> str | None:
    """The name of the one file a new run folder ``out_dir`` holds besides a lock (and the
    entries ``keep``), when it is a table (a CSV or Parquet file, not a link) and nothing
    else is there; else None."""
    names = [p for p in out_dir.iterdir() if p.name not in (LOCK_FILE, *keep)]
    one = names[0] if len(names) == 1 else None
    if (
        one
        and one.is_file()
        and not one.is_symlink()
        and one.name.lower().endswith(_TABLE_SUFFIXES)
    ):
        return one.name
    return None


def check_new_run_dir(
    out_dir: str | Path, data_path: str | Path | None = None, *, keep: tuple[str, ...] = ()
) -> None:
    """Raise ValueError unless a new run can be created at ``out_dir`` (checks, creates nothing).

    ``out_dir`` must be absent or an empty folder (a lock file left alone counts as empty),
    not in use by another ``train``, and its nearest existing ancestor writable. A folder
    whose one file is the run's own table (``data_path``, directly inside ``out_dir``) counts
    as empty too: the run keeps its table inside (:func:`run_data_path`), and so do the
    entries named in ``keep`` (a retrained run's ``selection/``, trained before it).
    """
    out_dir = Path(out_dir)
    if out_dir.exists():
        if not out_dir.is_dir():
            raise ValueError(f"output path {out_dir} is a file; expected a folder for the run")
        RunLock.check_free(out_dir)
        if (out_dir / CONFIG_FILE).exists():
            raise ValueError(
                f"{out_dir} already holds a run; pass `resume=True` to continue it or choose "
                "another `out_dir`"
            )
        table = None
        if data_path is not None and _normal(data_path).parent == _normal(out_dir):
            table = _normal(data_path).name
        if any(p.name not in (LOCK_FILE, table, *keep) for p in out_dir.iterdir()):
            also = "" if table is None else f" but for its table {table}"
            raise ValueError(
                f"output folder {out_dir} is not empty{also}; choose another `out_dir`"
            )
    ancestor = out_dir.absolute()
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir() or not os.access(ancestor, os.W_OK | os.X_OK):
        raise ValueError(f"cannot create the run folder {out_dir}: {ancestor} is not writable")


@contextlib.contextmanager
def creating_run_dir(
    out_dir: str | Path, *, writer: bool = True, keep: tuple[str, ...] = ()
) -> Iterator[RunLock | None]:
    """Create and lock a new run folder; if the block fails, remove all it created.

    So a run folder is either resumable (``config.json`` and a first checkpoint) or absent.
    The writer (``writer=True``; in a multi-process run, process 0) creates ``out_dir`` and
    takes its :class:`~stacklstm.rundir.lock.RunLock`, which the block receives and keeps
    when it succeeds. If another ``train`` holds the folder, or it is no longer empty (a
    lone table file, the run's own as :func:`check_new_run_dir` checked it, is kept and
    counts as empty), nothing is changed and a ``ValueError`` says why. If the block fails,
    what this call made is removed while the lock is held: the folder's contents (not that
    table), the folder if it was made here, and the parents made here if they are empty (so
    another run's files are never touched). The entries named in ``keep`` (a retrained
    run's ``selection/``) count as empty and are never removed either.
    An ``OSError`` (a full disk, no permission) comes out with a message naming the folder.
    Other processes (``writer=False``) receive None and remove nothing.
    """
    out_dir = Path(out_dir).absolute()
    if not writer:
        yield None
        return
    top = out_dir  # the outermost folder that does not exist yet, or out_dir itself
    while not top.parent.exists():
        top = top.parent
    lock = None
    made = False
    kept: str | None = None  # the run's own table, there before: never removed
    try:
        try:
            out_dir.mkdir(parents=True)
            made = True
        except FileExistsError:
            if not out_dir.is_dir():
                raise ValueError(
                    f"output path {out_dir} is a file; expected a folder for the run"
                ) from None
        lock = RunLock.acquire(out_dir)  # RunInUseError: another train has it
        kept = None if made else _own_table(out_dir, keep)
        if (out_dir / CONFIG_FILE).exists() or any(
            p.name not in (LOCK_FILE, kept, *keep) for p in out_dir.iterdir()
        ):  # another run began and ended here since the checks
            lock.release()
            lock = None
            raise ValueError(f"output folder {out_dir} is not empty; choose another `out_dir`")
        yield lock
    except BaseException as err:
        if lock is not None:  # only a lock holder removes anything
            for path in out_dir.iterdir():
                if path.name in (LOCK_FILE, kept, *keep):
                    continue
                if path.is_dir() and not path.is_symlink():
                    shutil.rmtree(path, ignore_errors=True)
                else:
                    path.unlink(missing_ok=True)
            lock.release(remove=True)
            if made:
                folder = out_dir
                while True:
                    with contextlib.suppress(OSError):
                        folder.rmdir()  # only if empty: another run's files stay
                    if folder == top:
                        break
                    folder = folder.parent
        if isinstance(err, OSError):
            detail = err.strerror or str(err)
            where = f" ({err.filename})" if err.filename else ""
            raise OSError(
                err.errno,
                f"cannot create the run folder {out_dir}: {detail}{where}; nothing was left behind",
            ) from err
        raise
