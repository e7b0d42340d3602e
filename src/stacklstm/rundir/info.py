"""What a run folder holds: ``config.json`` (what the run is), ``metrics.jsonl``, progress.

Layout (the checkpoints are :mod:`stacklstm.train.checkpoint`'s)::

    out_dir/config.json         layout version, the full RunConfig, data path, fitted scaler
    out_dir/metrics.jsonl       one JSON line per log interval and per epoch
    out_dir/checkpoints/, checkpoints_best/

A run folder is either resumable (``config.json`` and a first checkpoint) or absent: it is
created inside :func:`~stacklstm.rundir.folder.creating_run_dir`, which removes whatever it
made if creating fails.

A run folder may hold its own table (``out_dir/data.parquet``, say, put there before the run
is created: a new run folder may already hold that one file). ``config.json`` then stores
the table's path relative to the folder, so the folder can be moved or copied and still
reads its table (:func:`run_data_path`); a table elsewhere is stored as an absolute path.

Example:
    >>> import tempfile
    >>> import numpy as np
    >>> from stacklstm.config import RunConfig
    >>> from stacklstm.data import Scaler
    >>> folder = tempfile.mkdtemp()
    >>> scaler = Scaler.fit(np.array([[0.0], [2.0]]), "standard", ("co2",), 1)
    >>> write_run_info(folder, RunInfo(RunConfig(), None, scaler))
    >>> read_run_info(folder).config == RunConfig()
    True
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..config import LAYOUT_VERSION, READABLE_LAYOUTS, RunConfig
from ..data import PanelScaler, Scaler, scaler_from_dict
from .files import (
    CONFIG_FILE,
    LATEST_DIR,
    MEMBERS_DIR,
    REPORT_FILE,
    SELECTION_DIR,
)
from .files import METRICS_FILE as METRICS_FILE
from .folder import _normal, atomic_write_text
from .owners import owned_words as owned_words
from .owners import run_folder_owner as run_folder_owner


@dataclass(frozen=True)
class RunInfo:
    """What ``config.json`` holds: everything needed to rebuild the run's data and model.

    Attributes:
        config: The full run configuration.
        data_path: The table the run was trained on, or None for the bundled CO2 data.
        scaler: The scaler fitted on the training rows (for a panel, one per series).
        static_scaler: The scaler of the static features, fitted over the series (None
            without static features; the key is then absent from ``config.json``).
        data_relative: The table's path relative to the run folder, as ``config.json``
            stores it, when the table lies inside the run folder (or, for a seed ensemble's
            member, inside its ensemble's folder); None: ``data_path`` is stored as it is.
            ``data_path`` is then that path resolved from where the folder is now.
    """

    config: RunConfig
    data_path: Path | None
    scaler: Scaler | PanelScaler
    static_scaler: Scaler | None = None
    data_relative: str | None = None

    def to_dict(self) -> dict[str, Any]:
        stored = self.data_relative
        if stored is None and self.data_path is not None:
            stored = str(self.data_path)
        return {
            "layout_version": LAYOUT_VERSION,
            "config": self.config.to_dict(),
            "data_path": stored,
            "scaler": self.scaler.to_dict(),
            **(
                {}
                if self.static_scaler is None
                else {"static_scaler": self.static_scaler.to_dict()}
            ),
        }


def _inside(path: Path, folder: Path) -> bool:
    return path != folder and path.is_relative_to(folder)


def run_data_path(
    out_dir: str | Path, data_path: str | Path | None
) -> tuple[Path | None, str | None]:
    """``(absolute table path, path relative to the run folder or None)``: what a run in
    ``out_dir`` trained on ``data_path`` stores. The relative path is given when the table
    lies inside ``out_dir``, or, for a seed ensemble's member (``ENS/members/<k>``), inside
    the ensemble's folder ``ENS``: then the folder reads its table wherever it is moved.

    Example:
        >>> run_data_path("/runs/a", "/runs/a/data.parquet")
        (PosixPath('/runs/a/data.parquet'), 'data.parquet')
        >>> run_data_path("/runs/e/members/0", "/runs/e/data.parquet")[1]
        '../../data.parquet'
        >>> run_data_path("/runs/a", "/tables/sales.csv")
        (PosixPath('/tables/sales.csv'), None)
    """
    if data_path is None:
        return None, None
    table, folder = _normal(data_path), _normal(out_dir)
    home = folder.parent.parent if folder.parent.name == MEMBERS_DIR else folder
    if folder.name == SELECTION_DIR:  # a retrained run's selection: its home is the run's
        home = folder.parent
    if _inside(table, folder) or _inside(table, home):
        return table, os.path.relpath(table, folder)
    return table, None


def write_run_info(out_dir: str | Path, info: RunInfo) -> None:
    """Write ``out_dir/config.json`` atomically."""
    atomic_write_text(Path(out_dir) / CONFIG_FILE, json.dumps(info.to_dict(), indent=2) + "\n")


def read_run_info(run_dir: str | Path) -> RunInfo:
    """Read ``run_dir/config.json``.

    Raises:
        ValueError: No run there, an unreadable file, or another layout version.
    """
    run_dir = Path(run_dir)
    path = run_dir / CONFIG_FILE
    if not run_dir.is_dir():
        raise ValueError(f"run folder not found: {run_dir}")
    if not path.is_file():
        raise ValueError(f"{run_dir} is not a run folder: it has no {CONFIG_FILE}")
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"cannot read {path}: {err}") from err
    keys = {"layout_version", "config", "data_path", "scaler"}
    if isinstance(raw, dict) and "static_scaler" in raw:  # a run with static features
        keys.add("static_scaler")
    if not isinstance(raw, dict) or set(raw) != keys:
        got = sorted(raw) if isinstance(raw, dict) else type(raw).__name__
        raise ValueError(f"{path} must hold the keys {sorted(keys)}, got {got}")
    if raw["layout_version"] not in READABLE_LAYOUTS:
        raise ValueError(
            f"{path} has layout version {raw['layout_version']!r} but this stacklstm reads "
            f"versions {', '.join(map(str, READABLE_LAYOUTS))}; use the stacklstm version "
            "that wrote the run"
        )
    data_path, relative = raw["data_path"], None
    if isinstance(data_path, str) and not os.path.isabs(data_path):  # the run's own table
        data_path, relative = _normal(run_dir / data_path), data_path
    return RunInfo(
        config=_saved_config(raw["config"], path),
        data_path=None if data_path is None else Path(data_path),
        scaler=scaler_from_dict(raw["scaler"]),
        static_scaler=Scaler.from_dict(raw["static_scaler"]) if "static_scaler" in keys else None,
        data_relative=relative,
    )


def _saved_config(raw: Any, path: Path) -> RunConfig:
    try:
        return RunConfig.from_dict(raw, saved=True)
    except ValueError as err:
        raise type(err)(f"{path}: {err}") from err


def _flat(value: Any, prefix: str = "") -> dict[str, Any]:
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, inner in value.items():
            out.update(_flat(inner, f"{prefix}{key}."))
        return out
    return {prefix.rstrip("."): value}


def run_copy(info: RunInfo, freq: str | None) -> dict[str, Any]:
    """What each checkpoint keeps of its run: ``config.json``'s content and the time step
    of the data it was trained on (``Series.freq``)."""
    return {"config_json": json.loads(json.dumps(info.to_dict())), "freq": freq}


def check_config_unchanged(
    run_dir: str | Path, info: RunInfo, saved: dict | None, step: int
) -> None:
    """Raise ValueError if ``config.json`` (``info``) differs from the copy in ``saved`` (a
    :func:`run_copy` kept with checkpoint ``step``), naming each changed key. ``saved=None``
    (an older checkpoint without a copy) passes."""
    if saved is None:
        return
    now = _flat(run_copy(info, None)["config_json"])
    then = _flat(saved.get("config_json") if isinstance(saved, dict) else None)
    changed = sorted(key for key in now.keys() | then.keys() if now.get(key) != then.get(key))
    if changed:
        shown = "; ".join(f"{key}: {now.get(key)!r} != {then.get(key)!r}" for key in changed[:5])
        more = f" and {len(changed) - 5} more" if len(changed) > 5 else ""
        raise ValueError(
            f"{Path(run_dir) / CONFIG_FILE} was edited after checkpoint step {step} was "
            f"written ({shown}{more}; config.json first); put back the values the run was "
            "trained with or start a new run"
        )


def newest_saved_config(run_dir: str | Path) -> tuple[int, dict | None] | None:
    """``(step, config)`` of the newest complete checkpoint in ``run_dir/checkpoints``: the
    copy of ``config.json`` saved with it (None for an older checkpoint without one); None
    when there is no checkpoint. Reads one small JSON file."""
    folder = Path(run_dir) / "checkpoints"
    try:
        steps = sorted((int(p.name) for p in folder.iterdir() if p.name.isdigit()), reverse=True)
    except OSError:
        return None
    for step in steps:
        try:
            text = (folder / str(step) / "config" / "metadata").read_text(encoding="utf-8")
            return step, json.loads(text)
        except FileNotFoundError:
            if (folder / str(step)).is_dir():
                return step, None
        except (OSError, ValueError):
            continue  # damaged: resume falls back past it, and checks the one it uses
    return None


def newest_step(folder: str | Path) -> int:
    """The step of the newest checkpoint in the run folder ``folder`` (0: none)."""
    latest = Path(folder) / LATEST_DIR
    steps = [int(p.name) for p in latest.glob("*") if p.name.isdigit()]
    return max(steps, default=0)


def finished_progress(folder: str | Path) -> dict[str, Any] | None:
    """The bookkeeping saved with the newest checkpoint of the run in ``folder``
    (:class:`~stacklstm.train.progress.Progress` as a dict: ``epoch``, ``best_epoch``,
    ``best_val_loss``, ``best_step``, ``stop_reason``, ``total_skipped``) when its training
    finished and its report is written (read from two small JSON files); None otherwise."""
    folder = Path(folder)
    path = folder / LATEST_DIR / str(newest_step(folder)) / "progress" / "metadata"
    try:
        progress = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not (isinstance(progress, dict) and progress.get("finished")):
        return None
    if not (folder / REPORT_FILE).is_file():
        return None
    return progress


def read_metrics(path: Path, through_step: int) -> list[str]:
    """Lines of ``metrics.jsonl`` written at or before ``through_step`` (the restored step)."""
    if not path.exists():
        return []
    kept = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            step = json.loads(line)["step"]
        except (json.JSONDecodeError, KeyError, TypeError):
            continue  # a line torn by a crash mid-write, or an empty one
        if step <= through_step:
            kept.append(line)
    return kept
