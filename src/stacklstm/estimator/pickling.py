"""Keeping a fitted :class:`~stacklstm.estimator.LSTMForecaster`: ``save`` and ``load`` (a
run folder with its table inside), and pickling, with the run folder inside the pickle: a tar
archive of the folder (its training table included, as ``data.parquet``), unpacked into a
temporary folder of its own when the pickle is loaded.

:class:`SaveLoad` holds those methods of the estimator (it is one of its bases)."""

from __future__ import annotations

import io
import shutil
import tarfile
import tempfile
import weakref
from pathlib import Path
from typing import Any, Self

from ..data import read_table
from ..forecasting.inference import table_path
from ..rundir.info import read_run_info
from ..rundir.lock import LOCK_FILE
from .staging import check_target, staged

__all__ = ["SaveLoad", "archive_run", "unpack_run"]

RUN = "run"
#: The training table inside a folder written by :meth:`SaveLoad.save`.
TABLE_FILE = "data.parquet"


def archive_run(run_dir: Path, table: Path | None) -> bytes:
    """The run folder ``run_dir`` (but its lock) as tar bytes, with ``table`` as
    ``run/data.parquet`` where it lies outside the folder."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        tar.add(
            run_dir,
            arcname=RUN,
            filter=lambda info: None if info.name.endswith("/" + LOCK_FILE) else info,
        )
        if table is not None and table.is_file() and table.parent != run_dir:
            tar.add(table, arcname=f"{RUN}/{TABLE_FILE}")
    return buffer.getvalue()


def unpack_run(archive: bytes, workspace: Path) -> tuple[Path, Path | None]:
    """``(run folder, its table or None)`` of ``archive`` unpacked in ``workspace``."""
    with tarfile.open(fileobj=io.BytesIO(archive), mode="r") as tar:
        tar.extractall(workspace, filter="data")
    run_dir = workspace / RUN
    table = run_dir / TABLE_FILE
    return run_dir, table if table.is_file() else None


class SaveLoad:
    """``save``, ``load`` and pickling of :class:`~stacklstm.estimator.LSTMForecaster`."""

    def save(self, path: str | Path) -> Path:
        """Copy the run folder to ``path`` (absent or empty), with the training table in it
        as ``data.parquet``: ``stacklstm evaluate/predict/export PATH`` read it without
        ``--data`` (the run's ``config.json`` names its table relative to the folder), once
        this process has ended and wherever ``path`` is moved; :meth:`load` loads it.

        A run folder that keeps its table elsewhere (one ``stacklstm train`` wrote, loaded
        with :meth:`load`) still names that table; ``path/data.parquet`` is then a copy that
        :meth:`load` reads and ``--data`` can name.

        Returns:
            ``path``.

        Raises:
            ValueError: Not fitted; ``path`` is a file, a folder that is not empty, or lies
                in another run folder's own files.
        """

        run_dir = self.run_dir
        target = check_target(path, what="save", hint="expected a new or empty folder")
        with staged(target, what="save") as work:  # complete or absent, never mixed
            shutil.copytree(run_dir, work, ignore=shutil.ignore_patterns(LOCK_FILE))
            inside = self._table is not None and self._table.parent == run_dir
            if self._table is not None and self._table.is_file() and not inside:
                shutil.copyfile(self._table, work / TABLE_FILE)
        return Path(path)

    @classmethod
    def load(cls, path: str | Path, *, alias: str = "stacklstm") -> Self:
        """An estimator over the run folder ``path`` (written by :meth:`save`, by ``fit`` with
        ``run_dir``, or by ``stacklstm train``); its columns are the run's (``id_column``,
        ``time_column``, the one ``target``; ``unique_id`` and ``ds`` where it has none).

        The training frame of :meth:`predict` is ``path/data.parquet`` when present, else
        the run's own table.

        Raises:
            ValueError: Not a run folder, or a run with several targets.
        """

        path = Path(path)
        data = read_run_info(path).config.data
        model = cls(
            alias=alias,
            id_col=data.id_column or "unique_id",
            time_col=data.time_column or "ds",
            target_col=data.target[0],
        )

        table = path / TABLE_FILE
        model._adopt(path, table if table.is_file() else None)
        source = table if table.is_file() else table_path(model._info, None)
        if source.is_file():  # the series' names, time stamps and static values
            model._remember(read_table(source))
        return model

    def __getstate__(self) -> dict[str, Any]:
        """A fitted estimator pickles with its run folder inside (a tar archive of it, table
        included), so the copy forecasts after this process and its temporary folder are
        gone; :meth:`save` is the way to keep a run as a folder."""
        state = {k: v for k, v in self.__dict__.items() if k != "_cleanup"}
        if self._run_dir is not None:
            state["_archive"] = archive_run(self._run_dir, self._table)
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        archive = state.pop("_archive", None)
        self.__dict__.update(state, _cleanup=None)
        if archive is not None:  # unpacked into a temporary folder of its own
            workspace = Path(tempfile.mkdtemp(prefix="stacklstm-"))
            self._cleanup = weakref.finalize(self, shutil.rmtree, workspace, ignore_errors=True)
            run_dir, table = unpack_run(archive, workspace)
            self._run_dir, self._table, self._out_dir = run_dir, table, None
            self._info = read_run_info(run_dir)
