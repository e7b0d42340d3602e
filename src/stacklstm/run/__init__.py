"""A whole run: train, choose the epochs, report, and retrain on every row (``fit``).

Example:
    >>> import tempfile
    >>> from stacklstm.config import DataConfig, ModelConfig, RunConfig, TrainConfig
    >>> from stacklstm.run import fit
    >>> cfg = RunConfig(
    ...     DataConfig(window=8), ModelConfig(lstm_hidden_size=8), TrainConfig(epochs=1)
    ... )
    >>> result = fit(cfg, tempfile.mkdtemp() + "/run", quiet=True)  # doctest: +SKIP
"""

from .ensemble_fit import EnsembleResult as EnsembleResult
from .loop import fit as fit
from .results import FitResult as FitResult
from .retrain import RetrainResult as RetrainResult
