"""A DataFrame API in the conventions of statsforecast and neuralforecast:
:class:`LSTMForecaster` fits, predicts and cross-validates long frames (``unique_id, ds, y``)
through the same training and prediction code as the command line.

Example:
    >>> from stacklstm.estimator import LSTMForecaster
    >>> LSTMForecaster(horizon=2, epochs=1).settings
    {'horizon': 2, 'epochs': 1}
"""

from .core import LSTMForecaster as LSTMForecaster
from .pickling import TABLE_FILE as TABLE_FILE
from .pretrained import PretrainedForecaster as PretrainedForecaster

__all__ = ["TABLE_FILE", "LSTMForecaster", "PretrainedForecaster"]
