"""The target transforms, one small object each: the one place a transform is declared.

A transform maps a run's targets to the scale its model works on (before deseasonalising,
differencing and scaling) and maps the forecasts back. :data:`TRANSFORMS` holds those a run
applies; :data:`RULES` the settings that choose one of them from the data
(:mod:`stacklstm.config.auto` and :mod:`stacklstm.train.resolve` apply the rules). The
``target_transform`` setting's choices and help, the windows (:mod:`stacklstm.data.season`)
and the exported program (:mod:`stacklstm.forecasting.export_program`) read them. Each
function takes its array module (numpy, or ``jax.numpy`` in the exported program), so one
declaration serves both. Adding a transform is one entry here and one row of hand-computed
values in ``tests/test_transforms.py``. This module needs numpy only.

Example:
    >>> import numpy as np
    >>> log1p = TRANSFORMS["log1p"]
    >>> log1p.forward(np.array([0.0, np.e - 1]), np)
    array([0., 1.])
    >>> log1p.inverse(np.array([-1.0, 1.0]), np).round(6)  # clipped at 0
    array([0.      , 1.718282])
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

#: ``(values, xp) -> values``: ``xp`` is numpy or ``jax.numpy``.
ArrayFunction = Callable[[Any, Any], Any]


def _everything(values: np.ndarray) -> bool:
    return True


@dataclass(frozen=True)
class Transform:
    """One target transform: its name (the ``target_transform`` setting), its help, the map
    to the model's scale and back, and the values it takes.

    Attributes:
        name: The setting's value.
        help: What it does, for the setting's help.
        forward: Targets to the model's scale.
        inverse: The model's scale back to targets (forecasts, interval bounds).
        valid: Whether every value of an array may be transformed.
        needs: What :attr:`valid` asks for, in words (the error message's).
    """

    name: str
    help: str
    forward: ArrayFunction
    inverse: ArrayFunction
    valid: Callable[[np.ndarray], bool] = _everything
    needs: str = ""


#: Every transform a run applies, by name.
TRANSFORMS: dict[str, Transform] = {
    t.name: t
    for t in (
        Transform("none", "the values themselves", lambda x, xp: x, lambda x, xp: x),
        Transform(
            "log1p",
            "model log(1 + y) of non-negative targets and forecast exp(.) - 1, clipped at 0: "
            "counts, multiplicative seasons",
            lambda x, xp: xp.log1p(x),
            lambda x, xp: xp.maximum(xp.expm1(x), 0.0),
            lambda x: bool((x >= 0).all()),
            "non-negative targets",
        ),
    )
}

#: The transform ``per_series`` applies, to the series it chooses.
PER_SERIES = "log1p"

#: The settings that choose a transform from the data, by name, with their help.
RULES: dict[str, str] = {
    "auto": "log1p where every training value is positive and the swings grow with the level, "
    "Guerrero's Box-Cox lambda of the training rows below 0.5, else none; for a panel each "
    "series on its own: per_series, what auto becomes there",
    "per_series": "that choice of auto for each series of a panel on its own",
    "seasonal_panel": "per_series for a panel (id_column) with a season of 2 or more, none "
    "for one series and for a panel without a season",
}


def applied(kind: str) -> Transform:
    """The transform of a run whose ``target_transform`` resolved to ``kind`` (``none``,
    ``log1p``, ``per_series``: :data:`PER_SERIES` on the series it chose).

    Example:
        >>> applied("per_series").name, applied("none").name
        ('log1p', 'none')
    """
    return TRANSFORMS[PER_SERIES if kind == "per_series" else kind]


def transform_help() -> str:
    """The ``target_transform`` setting's help text, from the registry."""
    rows = [*((n, t.help) for n, t in TRANSFORMS.items()), *RULES.items()]
    return "the scale the model works on: " + "; ".join(f"{n} ({text})" for n, text in rows)


__all__ = ["PER_SERIES", "RULES", "TRANSFORMS", "Transform", "applied", "transform_help"]
