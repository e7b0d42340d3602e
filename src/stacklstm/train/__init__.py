"""Training: the pure steps, the training plan, checkpoints and the step loop.

A whole run (train, report, retrain on every row) is :func:`stacklstm.run.fit`; the run
folder is :mod:`stacklstm.rundir`, forecasting from it :mod:`stacklstm.forecasting`, its
report :mod:`stacklstm.report`. The names that lived here before those packages existed
(``stacklstm.train.fit``, ``load_run``, ``predict``, ``Report``, ...) still resolve to them.

Example:
    >>> from stacklstm.train import RunConfig, TrainConfig
    >>> RunConfig(train=TrainConfig(epochs=2)).train.epochs
    2
"""

import importlib
from typing import Any

from ..config import LAYOUT_VERSION as LAYOUT_VERSION
from ..config import ModelConfig as ModelConfig
from ..config import RunConfig as RunConfig
from ..config import TrainConfig as TrainConfig
from ..configfile import load_config as load_config
from .checkpoint import RunCheckpoints as RunCheckpoints
from .progress import Meter as Meter
from .progress import Progress as Progress
from .step import Batch as Batch
from .step import StepMetrics as StepMetrics
from .step import TrainState as TrainState
from .step import make_eval_step as make_eval_step
from .step import make_optimizer as make_optimizer
from .step import make_train_step as make_train_step
from .trainer import EpochCallback as EpochCallback
from .trainer import EpochEnd as EpochEnd
from .trainer import NonFiniteError as NonFiniteError

#: Names that moved to the packages above training: name -> the package that holds it now.
_MOVED = {
    **dict.fromkeys(("fit", "FitResult", "RetrainResult", "EnsembleResult"), "stacklstm.run"),
    **dict.fromkeys(
        (
            "forecast",
            "load_run",
            "predict",
            "TrainedRun",
            "EnsembleRun",
            "load_model",
            "median_forecast",
        ),
        "stacklstm.forecasting",
    ),
    **dict.fromkeys(("Report", "evaluate_run", "format_table"), "stacklstm.report"),
    **dict.fromkeys(("RunInfo", "read_run_info"), "stacklstm.rundir"),
}


def __getattr__(name: str) -> Any:
    if name in _MOVED:
        return getattr(importlib.import_module(_MOVED[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
