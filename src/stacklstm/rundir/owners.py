"""Which folder that stacklstm writes owns a path: run folders, backtest folders and search
folders are recognised by their files only, so that a command refuses to write into them
(:func:`stacklstm.rundir.outputs.check_output`). Re-exported by :mod:`stacklstm.rundir.info`.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from .files import (
    BACKTEST_FILE,
    BACKTEST_PLOT,
    BASELINES_FILE,
    BEST_CONFIG,
    BEST_DIR,
    CALIBRATION_FILE,
    CONFIG_FILE,
    FORECAST_PLOT,
    HISTORY_PLOT,
    IMPORTANCE_PLOT,
    LATEST_DIR,
    LOCK_FILE,
    LOSS_PLOT,
    MEMBERS_DIR,
    METRICS_FILE,
    PLAN_FILE,
    REPORT_FILE,
    SELECTION_DIR,
    STUDY_FILE,
    TRIALS_TABLE,
    fold_dir_name,
)

__all__ = ["owned_words", "run_folder_owner"]


# What each kind of folder that stacklstm writes holds (each name is defined once, in
# :mod:`.files`), and how such a folder is recognised (by its files only).
_RUN_ENTRIES = frozenset(
    {
        CONFIG_FILE,
        METRICS_FILE,
        LOCK_FILE,
        LATEST_DIR,
        BEST_DIR,
        MEMBERS_DIR,
        REPORT_FILE,
        FORECAST_PLOT,
        LOSS_PLOT,
        CALIBRATION_FILE,
        BASELINES_FILE,
        SELECTION_DIR,
    }
)
_BACKTEST_ENTRIES = frozenset({PLAN_FILE, BACKTEST_FILE, BACKTEST_PLOT})
_SEARCH_ENTRIES = frozenset({STUDY_FILE, BEST_CONFIG, TRIALS_TABLE, HISTORY_PLOT, IMPORTANCE_PLOT})


def _is_run(folder: Path) -> bool:  # a run being created has its lock before config.json
    return (folder / LOCK_FILE).exists() or (
        (folder / CONFIG_FILE).is_file()
        and any((folder / name).is_dir() for name in (LATEST_DIR, BEST_DIR, MEMBERS_DIR))
    )


def _is_backtest(folder: Path) -> bool:
    return (folder / PLAN_FILE).is_file() and (
        (folder / BACKTEST_FILE).exists() or (folder / fold_dir_name(0)).is_dir()
    )


def _is_search(folder: Path) -> bool:
    return (folder / STUDY_FILE).is_file() or all(
        (folder / name).is_file() for name in (TRIALS_TABLE, BEST_CONFIG)
    )


def _backtest_owns(name: str) -> bool:  # its files and its folds, fold_00, fold_01, ...
    number = name.removeprefix(fold_dir_name(0)[:-2])
    return name in _BACKTEST_ENTRIES or (number.isdigit() and name == fold_dir_name(int(number)))


#: ``(what, owns(entry name), is_one(folder))`` per kind of folder that stacklstm writes.
_FOLDER_KINDS: tuple[tuple[str, Callable[[str], bool], Callable[[Path], bool]], ...] = (
    ("run folder", _RUN_ENTRIES.__contains__, _is_run),
    ("backtest folder", _backtest_owns, _is_backtest),
    ("search folder", _SEARCH_ENTRIES.__contains__, _is_search),
)


def run_folder_owner(path: str | Path) -> tuple[Path, str, str] | None:
    """The folder stacklstm writes that owns ``path``, or None for a path of the user's own.

    ``path`` is resolved through symlinks first. It is owned when it is, or lies under, an
    entry that a run folder, a backtest folder or a search folder writes: ``config.json``,
    ``.lock``, ``metrics.jsonl``, ``report.json``, ``calibration.json``, the plots, the
    checkpoint folders, the members of a seed ensemble, a backtest's ``plan.json``, results
    and folds, a search's study, tables and plots. A lock file (``.lock``) is owned in any
    folder. A new file of the user's own in a run folder (``runs/co2/forecasts.csv``) is not
    owned (checks files only, writes nothing).

    Returns:
        ``(folder, what, entry)``: the owning folder, ``"run folder"``, ``"backtest folder"``
        or ``"search folder"``, and its entry that holds ``path``.
    """
    real = Path(os.path.realpath(path))
    if real.name == LOCK_FILE:
        return real.parent, "run folder", LOCK_FILE
    entry = real
    for folder in real.parents:
        for what, owns, is_one in _FOLDER_KINDS:
            if owns(entry.name) and is_one(folder):
                return folder, what, entry.name
        entry = folder
    return None


def owned_words(path: str | Path) -> str | None:
    """``it is (under) the run folder F's E, which stacklstm writes`` for a ``path`` that
    :func:`run_folder_owner` finds owned, else None: the reason a command refuses to write it."""
    owner = run_folder_owner(path)
    if owner is None:
        return None
    folder, what, entry = owner
    where = "is" if os.path.realpath(path) == os.path.join(folder, entry) else "is under"
    return f"it {where} the {what} {folder}'s {entry}, which stacklstm writes"
