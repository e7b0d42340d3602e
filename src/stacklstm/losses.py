"""The training losses, one small object each: the one place a loss is declared.

A loss has a ``name`` (the ``loss`` setting), a ``help`` line (the command line's help and
the config's docs are built from them) and says what its model forecasts:

- a :class:`PointLoss` trains a point forecast (one output per step and target) and computes
  its per-entry loss from the error ``prediction - target`` in model units; intervals then
  come from ``conformal``;
- a :class:`HeadLoss` trains an output head of ``n_params`` outputs per step and target
  (``None``: one per quantile level) whose pinball loss or negative log-likelihood lives in
  :class:`stacklstm.intervals.OutputHead`; its model gives intervals by itself.

:data:`LOSSES` holds them all, in the order the help lists them. The config's choices
(:data:`stacklstm.config.LossKind` is checked against it by a test), the help, the training
step (:func:`stacklstm.train.step.forecast_loss`) and the output heads read this registry.

Adding a point loss is one class here and one row in ``tests/test_losses.py``'s table (see
CONTRIBUTING.md). This module imports no jax at import time (the command line reads the
names before it loads jax).

Example:
    >>> [loss.name for loss in LOSSES.values() if loss.point]
    ['mse', 'mae', 'huber']
    >>> LOSSES["student_t"].n_params, LOSSES["quantile"].intervals
    (3, True)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class PointLoss:
    """A loss on a point forecast: :meth:`per_entry` of the errors, averaged over the
    horizon and the targets of each window by the training step."""

    name: ClassVar[str]
    help: ClassVar[str]
    point: ClassVar[bool] = True
    intervals: ClassVar[bool] = False
    n_params: ClassVar[int | None] = 1

    def per_entry(self, error: Any) -> Any:
        """The loss of each entry of ``error`` (a float32 jax array, any shape)."""
        raise NotImplementedError


@dataclass(frozen=True)
class HeadLoss:
    """A loss on an output head (quantiles or a distribution's parameters), computed by
    :class:`stacklstm.intervals.OutputHead`: its model gives intervals by itself."""

    name: str
    help: str
    n_params: int | None  # outputs per step and target; None: one per quantile level
    point: ClassVar[bool] = False
    intervals: ClassVar[bool] = True


class MSE(PointLoss):
    name = "mse"
    help = "mean squared error"

    def per_entry(self, error: Any) -> Any:
        import jax.numpy as jnp

        return jnp.square(error)


class MAE(PointLoss):
    name = "mae"
    help = "mean absolute error"

    def per_entry(self, error: Any) -> Any:
        import jax.numpy as jnp

        return jnp.abs(error)


class Huber(PointLoss):
    name = "huber"
    help = "Huber loss, delta 1 in scaled units"

    def per_entry(self, error: Any) -> Any:
        import optax

        return optax.huber_loss(error, delta=1.0)


#: Every loss by name, in the order the help lists them.
LOSSES: dict[str, PointLoss | HeadLoss] = {
    loss.name: loss
    for loss in (
        MSE(),
        MAE(),
        Huber(),
        HeadLoss("quantile", "pinball loss at the quantile levels", None),
        HeadLoss("normal", "Gaussian negative log-likelihood", 2),
        HeadLoss("student_t", "Student-t negative log-likelihood", 3),
    )
}
#: The losses whose model gives a point forecast only (intervals need ``conformal``).
POINT_LOSSES: tuple[str, ...] = tuple(n for n, loss in LOSSES.items() if loss.point)
#: The losses whose model gives intervals by itself.
INTERVAL_LOSSES: tuple[str, ...] = tuple(n for n, loss in LOSSES.items() if loss.intervals)


def loss_help() -> str:
    """The ``loss`` setting's help text, from the registry."""
    point = ", ".join(f"{n} ({LOSSES[n].help})" for n in POINT_LOSSES)
    heads = ", ".join(f"{n} ({LOSSES[n].help})" for n in INTERVAL_LOSSES)
    return f"training loss: {point} give point forecasts; {heads} also give prediction intervals"


__all__ = ["INTERVAL_LOSSES", "LOSSES", "POINT_LOSSES", "HeadLoss", "PointLoss", "loss_help"]
