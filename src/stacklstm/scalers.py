"""The scalers, one small object each: the one place a scaling is declared.

A scaler kind is the pair of statistics ``(center, spread)`` per column that
:class:`stacklstm.data.Scaler` fits on the training rows (``(value - center) / spread``; a
column with zero or non-finite spread gets 1). :data:`SCALERS` holds them all, in the order the
help lists them; the ``scaler`` setting's choices (``"auto"`` besides) and its help, and
``Scaler.fit``, read it. Adding a scaler is one entry here and one row of hand-computed
statistics in ``tests/test_scalers.py``. This module needs numpy only (the command line reads
the names before it loads jax).

Example:
    >>> import numpy as np
    >>> SCALERS["robust"].statistics(np.array([[1.0], [2.0], [3.0], [4.0], [100.0]]), 1)
    (array([3.]), array([2.]))
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from .metrics import seasonal_scale

#: ``(values (rows, columns), season) -> (center (columns,), spread (columns,))``.
Statistics = Callable[[np.ndarray, int], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class Scaling:
    """One scaling: its name (the ``scaler`` setting), its help and its statistics."""

    name: str
    help: str
    statistics: Statistics


def _robust(values: np.ndarray, season: int) -> tuple[np.ndarray, np.ndarray]:
    q25, center, q75 = np.percentile(values, [25.0, 50.0, 75.0], axis=0)
    return center, q75 - q25


def _changes(lag_of: Callable[[int], int]) -> Statistics:
    """Mean and the mean absolute change over ``lag_of(season)`` rows: MASE's scale."""

    def statistics(values: np.ndarray, season: int) -> tuple[np.ndarray, np.ndarray]:
        spread = (
            seasonal_scale(values, lag_of(season)) if len(values) > 1 else np.zeros(values.shape[1])
        )
        return values.mean(axis=0), spread

    return statistics


#: Every scaler by name, in the order the help lists them.
SCALERS: dict[str, Scaling] = {
    s.name: s
    for s in (
        Scaling(
            "standard", "mean, standard deviation", lambda v, _: (v.mean(axis=0), v.std(axis=0))
        ),
        Scaling(
            "minmax",
            "minimum, range: the training rows to [0, 1]",
            lambda v, _: (v.min(axis=0), v.max(axis=0) - v.min(axis=0)),
        ),
        Scaling("robust", "median, interquartile range", _robust),
        Scaling(
            "mean",
            "0, mean absolute value: divides only, positive values stay positive",
            lambda v, _: (np.zeros(v.shape[1]), np.abs(v).mean(axis=0)),
        ),
        Scaling(
            "naive", "mean, mean absolute step from one row to the next", _changes(lambda s: 1)
        ),
        Scaling(
            "seasonal_naive",
            "mean, mean absolute change over one season: MASE's scale",
            _changes(lambda s: s),
        ),
        Scaling("none", "no scaling", lambda v, _: (np.zeros(v.shape[1]), np.ones(v.shape[1]))),
    )
}


def scaler_help() -> str:
    """The ``scaler`` setting's help text, from the registry."""
    kinds = ", ".join(f"{name} ({s.help})" for name, s in SCALERS.items())
    return (
        f"per-column scaling fitted on the training rows: {kinds}; 'auto': for a panel "
        "(id_column) naive without a season (season 1), seasonal_naive with a season of 2-4 "
        "(quarters), else standard"
    )


__all__ = ["SCALERS", "Scaling", "scaler_help"]
