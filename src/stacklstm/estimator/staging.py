"""All-or-nothing writes of the DataFrame API into a folder the user names (``fit``'s
``run_dir``, ``save``'s ``path``).

The work is done in a private folder beside the target, ``.<name>.stacklstm-staging``, held
with the same OS lock as a run folder (:class:`~stacklstm.rundir.lock.RunLock`), and moved to
the target by one ``rename`` when it is complete. So:

- the target is either absent (or the empty folder it was) or complete: an interrupted or
  failed ``fit`` or ``save`` (Ctrl-C, an error, a full disk) leaves nothing at the target;
- two processes writing the same target never mix their files: the second is refused at
  once while the first works ("is being written by another process (pid N)"), and if the
  target is filled by someone else meanwhile, the rename fails and the finished work is
  kept beside it (``<name>-2``) and named in the error, never lost;
- what a killed writer (``kill -9``) left in the private folder is cleared by the next
  writer of the same target, once it holds the lock.

Example:
    >>> import tempfile, pathlib
    >>> target = pathlib.Path(tempfile.mkdtemp()) / "model"
    >>> with staged(target, what="save") as work:
    ...     work.mkdir()
    ...     _ = (work / "a.txt").write_text("done")
    >>> sorted(p.name for p in target.iterdir()), sorted(p.name for p in target.parent.iterdir())
    (['a.txt'], ['model'])
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from ..rundir.lock import (
    LOCK_FILE,
    RunInUseError,
    RunLock,
    lock_holder,
)
from ..rundir.outputs import check_new_folder

#: The suffix of the private folder beside a target (``.<name>.stacklstm-staging``).
STAGING_SUFFIX = ".stacklstm-staging"


def check_target(target: str | Path, *, what: str, hint: str) -> Path:
    """``target`` as an absolute path, if a ``what`` may write it: absent or an empty folder,
    not inside another run's (or backtest's, search's) own files, not in use by a
    ``stacklstm train``. Checks, creates nothing.

    Raises:
        ValueError: Why not, with ``hint`` (what to do instead) where the folder holds
            something.
    """
    target = Path(os.path.normpath(Path(target).absolute()))
    check_new_folder(target)
    if target.exists() or target.is_symlink():
        if not target.is_dir():
            raise ValueError(f"cannot {what} to {target}: it is a file; expected a new folder")
        RunLock.check_free(target)
        if any(target.iterdir()):
            raise ValueError(f"cannot {what} to {target}: the folder is not empty; {hint}")
    return target


def _clear(folder: Path) -> None:
    """Remove everything in ``folder`` but its lock file (what a killed writer left)."""
    for path in folder.iterdir():
        if path.name == LOCK_FILE:
            continue
        if path.is_dir() and not path.is_symlink():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)


def _publish(work: Path, target: Path, what: str) -> None:
    """Move ``work`` to ``target`` (absent or an empty folder) in one rename; if ``target``
    was filled meanwhile, move it beside ``target`` instead and say where."""
    try:
        os.rename(work, target)  # replaces an empty folder, atomically
        return
    except OSError as err:
        if err.errno not in (errno.ENOTEMPTY, errno.EEXIST, errno.ENOTDIR, errno.EISDIR):
            raise
    for n in range(2, 10_000):
        kept = target.with_name(f"{target.name}-{n}")
        if not (kept.exists() or kept.is_symlink()):
            with contextlib.suppress(OSError):
                os.rename(work, kept)
                break
    else:  # pragma: no cover - ten thousand siblings
        kept = work
    raise ValueError(
        f"cannot {what} to {target}: another process filled it while this {what} ran; "
        f"{target} was left as it is, and this {what}'s result is at {kept}"
    )


@contextlib.contextmanager
def staged(target: str | Path, *, what: str) -> Iterator[Path]:
    """Yield the path of a new folder (not created) to write; when the block ends without an
    error, that folder becomes ``target`` in one rename. If the block fails, or the process
    is interrupted, nothing is left at ``target`` (parents made here are removed when empty).

    Raises:
        RunInUseError: Another process is writing ``target`` now (a ``ValueError``).
        ValueError: ``target`` cannot be created (an unwritable place, say), or was filled by
            another process meanwhile (the work is kept beside it, as said).
    """
    target = Path(os.path.normpath(Path(target).absolute()))
    stage = target.with_name(f".{target.name}{STAGING_SUFFIX}")
    made_parents = []
    parent = target.parent
    while not parent.exists():
        made_parents.append(parent)
        parent = parent.parent
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        stage.mkdir(exist_ok=True)
        lock = RunLock.acquire(stage)
    except RunInUseError:
        holder = lock_holder(stage / LOCK_FILE)
        raise RunInUseError(
            f"cannot {what} to {target}: another process is writing it now ({holder}); wait "
            "for it to end or choose another folder"
        ) from None
    except OSError as err:
        _remove_empty(made_parents)
        raise ValueError(
            f"cannot {what} to {target}: {err.strerror or err} ({err.filename or stage})"
        ) from None
    try:
        _clear(stage)
        yield stage / "work"
        _publish(stage / "work", target, what)
    finally:
        shutil.rmtree(stage, ignore_errors=True)  # while holding the lock
        lock.release()
        if not target.exists():
            _remove_empty(made_parents)


def _remove_empty(folders: list[Path]) -> None:
    for folder in folders:  # innermost first
        with contextlib.suppress(OSError):
            folder.rmdir()
