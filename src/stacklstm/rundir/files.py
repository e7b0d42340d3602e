"""The names of everything stacklstm writes into its folders, in one place.

A run folder (``stacklstm train``), a seed ensemble's folder, a backtest folder and a search
folder (``stacklstm tune``) each hold the entries below; the modules that write them import
their names from here, and :func:`stacklstm.rundir.owners.run_folder_owner` reads them to refuse
an output that would replace one.

Example:
    >>> fold_dir_name(3), REPORT_FILE
    ('fold_03', 'report.json')
"""

from __future__ import annotations

# lock.py names its file: it imports nothing of the package, so a process can load it alone
from .lock import LOCK_FILE as LOCK_FILE

# A run folder (a seed ensemble's folder adds MEMBERS_DIR, a retrained run SELECTION_DIR).
CONFIG_FILE = "config.json"
METRICS_FILE = "metrics.jsonl"
LATEST_DIR = "checkpoints"
BEST_DIR = "checkpoints_best"
REPORT_FILE = "report.json"
FORECAST_PLOT = "forecast.png"
LOSS_PLOT = "loss.png"
CALIBRATION_FILE = "calibration.json"
#: The statistical baselines' forecasts of the report, kept for ``evaluate``.
BASELINES_FILE = "baselines.npz"
MEMBERS_DIR = "members"
#: A retrained run's first run, the one whose validation losses chose the epochs
#: (``retrain``; see :mod:`stacklstm.run.retrain`).
SELECTION_DIR = "selection"
#: ``stacklstm predict``'s default output (the user's file: not owned by the run).
PREDICTIONS_FILE = "predictions.csv"

# A backtest folder: its plan, its results and one run folder per fold.
PLAN_FILE = "plan.json"
BACKTEST_FILE = "backtest.json"
BACKTEST_PLOT = "backtest.png"

# A search folder.
STUDY_FILE = "study.db"
BEST_CONFIG = "best.toml"
TRIALS_TABLE = "trials.csv"
HISTORY_PLOT = "history.png"
IMPORTANCE_PLOT = "importances.png"


def fold_dir_name(fold: int) -> str:
    """The run folder of backtest fold ``fold`` inside the backtest folder."""
    return f"fold_{fold:02d}"
