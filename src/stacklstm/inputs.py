"""``ForecastInputs``: a batch of model inputs with covariates, as one pytree.

Plain Python (no numpy, no JAX), so that the data pipeline builds what the model reads
without importing either side of the other.
"""

from __future__ import annotations

from typing import Any, NamedTuple


class ForecastInputs(NamedTuple):
    """A batch of model inputs with covariates (what the training step feeds a ``Forecaster``).

    ``Forecaster(inputs)`` is ``Forecaster(inputs.past, inputs.future, inputs.static)``.

    Attributes:
        past: ``(batch, window, features)`` the past window.
        future: ``(batch, horizon, n_future)`` the known-future covariates over the horizon
            (``n_future`` may be 0).
        static: ``(batch, n_static)`` the static covariates (``n_static`` may be 0).
    """

    past: Any
    future: Any
    static: Any
