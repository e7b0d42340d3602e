"""Writing a file the user named: a regular file replaced atomically, anything else streamed.

``predict --output`` may name a regular file (replaced whole, never left half written), a
symlink (its target is written, the link stays), a FIFO or a device such as ``/dev/stdout``
(written as a stream, never replaced by a file), or ``-`` (standard output). It may not
name a folder, a file or folder of a run folder (``config.json``, the checkpoints, the lock,
...: see :func:`~stacklstm.rundir.owners.run_folder_owner`), or the input table itself.

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "out.csv"
    >>> write_output(path, b"a,b\\n1,2\\n")
    >>> path.read_text()
    'a,b\\n1,2\\n'
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
from collections.abc import Sequence
from pathlib import Path

from .folder import atomic_write
from .owners import owned_words

STDOUT = "-"


def is_stream(target: str | Path) -> bool:
    """Whether ``target`` is written as a stream: ``-``, or a path that is (or links to) a
    FIFO, socket or device, or lies under ``/dev`` or ``/proc`` (``/dev/stdout``, say)."""
    if str(target) == STDOUT:
        return True
    for path in (os.path.abspath(target), os.path.realpath(target)):
        if path.startswith(("/dev/", "/proc/")):  # /dev/stdout may link to a plain file
            return True
    try:
        mode = os.stat(target).st_mode
    except OSError:
        return False  # a new file (or a dangling link, whose target is created)
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def check_output(target: str | Path, inputs: Sequence[str | Path] = ()) -> None:
    """Raise ValueError if ``target`` cannot be written or must not be (checks, writes nothing).

    Refused: a folder, or a path written as one (ending in ``/``, existing or not); a path
    in a folder that does not exist; a file or folder that a run folder (or a backtest or
    search folder) owns, see :func:`~stacklstm.rundir.owners.run_folder_owner`; and the same
    file as one of ``inputs`` (the tables the output is made from), compared by device and
    inode, so a symlink or a hard link to an input is refused too. A symlink is judged by
    what it resolves to; ``-`` (standard output) is always accepted.
    """
    if str(target) == STDOUT:
        return
    if str(target).endswith(("/", os.sep)):
        raise ValueError(
            f"cannot write {target}: a path ending in / names a folder; name a file in `output`"
        )
    real = os.path.realpath(target)
    named = f"{target}" if real == os.path.abspath(target) else f"{target} (a link to {real})"
    owned = owned_words(target)
    if owned is not None:
        raise ValueError(f"cannot write {named}: {owned}; name a new file of your own in `output`")
    for source in inputs:
        with contextlib.suppress(OSError):  # a missing file is no input to overwrite
            if os.path.samestat(os.stat(target), os.stat(source)):
                raise ValueError(
                    f"cannot write {named}: it is the input table {source} (the same file); "
                    "name another file in `output`"
                )
    if is_stream(target):
        return
    if os.path.isdir(real):
        raise ValueError(f"cannot write {target}: it is a folder; name a file in `output`")
    if not os.path.isdir(os.path.dirname(real)):
        raise ValueError(f"cannot write {target}: folder {os.path.dirname(real)} does not exist")


def check_new_folder(out_dir: str | Path) -> None:
    """Raise ValueError if ``out_dir``, a folder that a command is to create for a new run,
    backtest or search, is or lies under a file or folder that a run folder (or a backtest or
    search folder) owns (``runs/co2/checkpoints/7``, ``runs/co2/.lock``); checks, creates
    nothing. Whether ``out_dir`` itself may be used is the command's own check."""
    owned = owned_words(out_dir)
    if owned is not None:
        raise ValueError(f"cannot create {out_dir}: {owned}; choose another `out_dir`")


def _write_stdout(data: bytes) -> None:
    """Write ``data`` to standard output; a closed one (None, EBADF, EPIPE) is an OSError."""
    out = sys.stdout
    if out is None:  # started with standard output closed (`>&-`)
        raise OSError(errno.EBADF, "cannot write to standard output (`output=-`): it is closed")
    buffer = getattr(out, "buffer", None)  # None: a text stream (redirected in-process)
    text = data.decode("utf-8") if buffer is None else ""
    try:
        out.flush()
        if buffer is None:
            out.write(text)
        else:
            buffer.write(data)
            buffer.flush()
    except (OSError, ValueError) as err:  # ValueError: a file object closed in-process
        if isinstance(err, OSError) and err.errno not in (errno.EBADF, errno.EPIPE):
            raise
        # what is still buffered can never be written: point the descriptor at /dev/null so
        # that Python's flush at exit does not fail a second time
        with contextlib.suppress(OSError, ValueError, AttributeError):
            fd = out.fileno()
            devnull = os.open(os.devnull, os.O_WRONLY)
            try:
                os.dup2(devnull, fd)
            finally:
                os.close(devnull)
        why = (
            "the reader has gone" if getattr(err, "errno", None) == errno.EPIPE else "it is closed"
        )
        raise OSError(
            getattr(err, "errno", None) or errno.EBADF,
            f"cannot write to standard output (`output=-`): {why}",
        ) from err


def write_output(target: str | Path, data: bytes, inputs: Sequence[str | Path] = ()) -> None:
    """Write ``data`` to ``target`` as the module docstring says, after
    :func:`check_output` (``inputs``: the tables the data is made from).

    A regular file (or a symlink's target) is replaced atomically with
    :func:`~stacklstm.rundir.folder.atomic_write` (mode: the replaced file's, or the umask's).

    Raises:
        ValueError: ``target`` is refused by :func:`check_output`.
        OSError: ``target`` cannot be written; for ``-``, standard output is closed.
    """
    check_output(target, inputs)
    if str(target) == STDOUT:
        _write_stdout(data)
        return
    if is_stream(target):
        with open(target, "wb") as handle:  # follows links; a FIFO blocks until read
            handle.write(data)
        return
    atomic_write(os.path.realpath(target), lambda handle: handle.write(data))
