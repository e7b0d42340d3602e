"""Forecasting from a run folder: loading it, forecasts at every origin and of the future,
intervals, the combination with the baselines, and the exported program.

Example:
    >>> from stacklstm.forecasting import load_run, predict
    >>> run = load_run("runs/co2")  # doctest: +SKIP
    >>> predict("runs/co2", format="long").columns.tolist()[:3]  # doctest: +SKIP
    ['unique_id', 'ds', 'stacklstm']
"""

from .ensemble import EnsembleRun as EnsembleRun
from .ensemble import load_model as load_model
from .ensemble import median_forecast as median_forecast
from .inference import TrainedRun as TrainedRun
from .inference import forecast as forecast
from .inference import load_run as load_run
from .prediction import predict as predict
