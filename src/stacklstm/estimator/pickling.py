"""A fitted :class:`~stacklstm.estimator.LSTMForecaster` pickles with its run folder inside:
a tar archive of the folder (its training table included, as ``data.parquet``), unpacked into
a temporary folder of its own when the pickle is loaded."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

from ..rundir.lock import LOCK_FILE

__all__ = ["archive_run", "unpack_run"]

RUN = "run"
TABLE = "data.parquet"


def archive_run(run_dir: Path, table: Path | None) -> bytes:
    """The run folder ``run_dir`` (but its lock) as tar bytes, with ``table`` as
    ``run/data.parquet`` where it lies outside the folder."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(run_dir, arcname=RUN, filter=lambda info: None if info.name.endswith(
            "/" + LOCK_FILE) else info)  # fmt: skip
        if table is not None and table.is_file() and table.parent != run_dir:
            tar.add(table, arcname=f"{RUN}/{TABLE}")
    return buffer.getvalue()


def unpack_run(archive: bytes, workspace: Path) -> tuple[Path, Path | None]:
    """``(run folder, its table or None)`` of ``archive`` unpacked in ``workspace``."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as tar:
        tar.extractall(workspace, filter="data")
    run_dir = workspace / RUN
    table = run_dir / TABLE
    return run_dir, table if table.is_file() else None
