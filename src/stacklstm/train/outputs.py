"""Writing a file the user named: a regular file replaced atomically, anything else streamed.

``predict --output`` may name a regular file (replaced whole, never left half written), a
symlink (its target is written, the link stays), a FIFO or a device such as ``/dev/stdout``
(written as a stream, never replaced by a file), or ``-`` (standard output).

Example:
    >>> import tempfile, pathlib
    >>> path = pathlib.Path(tempfile.mkdtemp()) / "out.csv"
    >>> write_output(path, b"a,b\\n1,2\\n")
    >>> path.read_text()
    'a,b\\n1,2\\n'
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

from .rundir import atomic_write

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


def check_output(target: str | Path) -> None:
    """Raise ValueError if ``target`` cannot be written (checks, writes nothing)."""
    if is_stream(target):
        return
    real = Path(os.path.realpath(target))
    if real.is_dir():
        raise ValueError(f"cannot write {target}: it is a folder")
    if not real.parent.is_dir():
        raise ValueError(f"cannot write {target}: folder {real.parent} does not exist")


def write_output(target: str | Path, data: bytes) -> None:
    """Write ``data`` to ``target`` as the module docstring says.

    A regular file (or a symlink's target) is replaced atomically with
    :func:`~stacklstm.train.rundir.atomic_write` (mode: the replaced file's, or the umask's).
    """
    if str(target) == STDOUT:
        out = sys.stdout
        buffer = getattr(out, "buffer", None)  # None: a text stream (redirected in-process)
        out.flush()
        if buffer is None:
            out.write(data.decode("utf-8"))
        else:
            buffer.write(data)
            buffer.flush()
        return
    if is_stream(target):
        with open(target, "wb") as handle:  # follows links; a FIFO blocks until read
            handle.write(data)
        return
    atomic_write(os.path.realpath(target), lambda handle: handle.write(data))
