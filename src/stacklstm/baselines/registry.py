"""The baselines, one small object each: the one place a baseline is declared.

A :class:`Baseline` has its report key (``name``), the name a reader sees (``label``), its
colour in every plot, and how it forecasts: a naive one from the windows alone (``naive``:
``(windows, season) -> (n, horizon, n_targets)``), a statistical one as a statsforecast
model (``model``: ``(season, n_fit) -> unfitted model``, fitted once and then forecasting
from every origin, :mod:`stacklstm.baselines`). The report, its table, the backtest, the
plots and the combination read :data:`BASELINES`; ``baselines="naive"`` runs the naive ones,
``"all"`` every one.

Adding a statistical baseline is one entry here (any statsforecast model: a model with
``fit`` and ``forward`` is forecast from every origin by ``forward``) and one row in
``tests/baselines/test_registry.py``; adding a naive one is one entry with its formula.

Example:
    >>> [b.name for b in BASELINES.values() if not b.statistical]
    ['last_value', 'seasonal_naive']
    >>> BASELINES["auto_ets"].label
    'AutoETS'
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Baseline:
    """One forecaster the model is scored against.

    Attributes:
        name: Its key in the report, the backtest and the combination's weights.
        label: Its name for a reader (plots' legends).
        colour: Its matplotlib colour, the same in every plot.
        naive: For a naive baseline: its forecasts from the origins of a
            :class:`~stacklstm.data.WindowSet` and the season.
        model: For a statistical baseline: a new statsforecast model for a season length
            and the number of rows it is fitted on.
    """

    name: str
    label: str
    colour: str
    naive: Callable[[Any, int], np.ndarray] | None = None
    model: Callable[[int, int], Any] | None = None

    @property
    def statistical(self) -> bool:
        """Whether it is a fitted statsforecast model (it needs the ``[baselines]`` extra)."""
        return self.model is not None


def _auto_ets(season: int, n_fit: int) -> Any:
    from statsforecast.models import AutoETS

    return AutoETS(season_length=season)


def _auto_arima(season: int, n_fit: int) -> Any:
    """AutoARIMA searches with the approximation that R's ``auto.arima`` uses by default for
    long or long-season series (``n_fit > 150`` rows or ``season > 12``): an exact search
    with season 52 on 1600 weekly rows takes over ten minutes."""
    from statsforecast.models import AutoARIMA

    return AutoARIMA(season_length=season, approximation=n_fit > 150 or season > 12)


def _auto_theta(season: int, n_fit: int) -> Any:
    from statsforecast.models import AutoTheta

    return AutoTheta(season_length=season)


#: Every baseline by report key, the naive ones first, in the order reports list them.
BASELINES: dict[str, Baseline] = {
    b.name: b
    for b in (
        Baseline("last_value", "last value", "tab:gray", naive=lambda w, season: w.last_value),
        Baseline(
            "seasonal_naive",
            "seasonal naive",
            "tab:olive",
            naive=lambda w, season: w.seasonal_naive(season),
        ),
        Baseline("auto_ets", "AutoETS", "tab:blue", model=_auto_ets),
        Baseline("auto_arima", "AutoARIMA", "tab:green", model=_auto_arima),
        Baseline("auto_theta", "AutoTheta", "tab:purple", model=_auto_theta),
    )
}
#: The report keys of the naive baselines (computed from the windows).
NAIVE: tuple[str, ...] = tuple(n for n, b in BASELINES.items() if not b.statistical)
#: The report keys of statsforecast's models.
STATISTICAL: tuple[str, ...] = tuple(n for n, b in BASELINES.items() if b.statistical)


def naive_forecasts(windows: Any, season: int) -> dict[str, np.ndarray]:
    """``{name: (n, horizon, n_targets)}`` of every naive baseline from the origins of
    ``windows`` (a :class:`~stacklstm.data.WindowSet`)."""
    return {name: BASELINES[name].naive(windows, season) for name in NAIVE}


def statistical_models(season: int, n_fit: int) -> dict[str, Any]:
    """``{name: statsforecast model}`` of every statistical baseline, unfitted, with season
    length ``season`` (``n_fit``: the rows each is fitted on)."""
    return {name: BASELINES[name].model(season, n_fit) for name in STATISTICAL}


__all__ = ["BASELINES", "NAIVE", "STATISTICAL", "Baseline", "naive_forecasts", "statistical_models"]
