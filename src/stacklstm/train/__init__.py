"""Training: the pure steps, the one loop, the run folder, checkpoints, inference, the report.

Example:
    >>> from stacklstm.train import RunConfig, TrainConfig
    >>> RunConfig(train=TrainConfig(epochs=2)).train.epochs
    2
"""

from ..config import LAYOUT_VERSION as LAYOUT_VERSION
from ..config import ModelConfig as ModelConfig
from ..config import RunConfig as RunConfig
from ..config import TrainConfig as TrainConfig
from ..configfile import load_config as load_config
from .checkpoint import RunCheckpoints as RunCheckpoints
from .ensemble import EnsembleRun as EnsembleRun
from .ensemble import load_model as load_model
from .ensemble import median_forecast as median_forecast
from .ensemble_fit import EnsembleResult as EnsembleResult
from .inference import TrainedRun as TrainedRun
from .inference import forecast as forecast
from .inference import load_run as load_run
from .loop import EpochCallback as EpochCallback
from .loop import EpochEnd as EpochEnd
from .loop import NonFiniteError as NonFiniteError
from .loop import fit as fit
from .prediction import predict as predict
from .progress import Meter as Meter
from .progress import Progress as Progress
from .report import Report as Report
from .report import evaluate_run as evaluate_run
from .report import format_table as format_table
from .results import FitResult as FitResult
from .retrain import RetrainResult as RetrainResult
from .rundir import RunInfo as RunInfo
from .rundir import read_run_info as read_run_info
from .step import Batch as Batch
from .step import StepMetrics as StepMetrics
from .step import TrainState as TrainState
from .step import make_eval_step as make_eval_step
from .step import make_optimizer as make_optimizer
from .step import make_train_step as make_train_step
