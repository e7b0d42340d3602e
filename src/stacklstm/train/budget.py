"""The training budget: ``epochs``, ``batch_size`` and ``patience`` given as ``"auto"``.

A fixed number of epochs trains a short series for very few optimiser steps (60 epochs of
one batch of 32 are 60 steps), too few for the model to learn a seasonal pattern. With
``"auto"`` the budget follows the number of training windows ``n``:

* ``batch_size``: 32, lowered to ``n // 8`` (but not below 8, nor above ``n``) so that an
  epoch has about 8 steps or more;
* ``epochs``: 60, raised to ``ceil(min_steps / steps per epoch)`` when 60 epochs would give
  fewer than ``min_steps`` steps;
* ``patience``: 15, scaled by the same factor as the epochs (``ceil(15 * epochs / 60)``), so
  that early stopping waits the same share of the run.

Values given explicitly are used as they are. The run folder's ``config.json`` holds the
resolved values (so ``evaluate``, ``predict`` and ``resume`` use the same ones); the same
config and data always resolve alike.

Example:
    >>> from stacklstm.config import TrainConfig
    >>> t = resolve_train_config(TrainConfig(), n_windows=57)
    >>> t.batch_size, t.epochs, t.patience
    (8, 143, 36)
    >>> t = resolve_train_config(TrainConfig(), n_windows=2000)
    >>> t.batch_size, t.epochs, t.patience
    (32, 60, 15)
    >>> resolve_train_config(TrainConfig(epochs=5, batch_size=4), 57).epochs
    5
"""

from __future__ import annotations

import dataclasses
import math

from ..config import AUTO, TrainConfig
from ..data import steps_per_epoch

#: What ``"auto"`` starts from: the budget of the fixed defaults older versions had.
BASE_EPOCHS, BASE_BATCH_SIZE, BASE_PATIENCE = 60, 32, 15
#: The smallest batch ``batch_size="auto"`` lowers to.
MIN_AUTO_BATCH = 8


def auto_batch_size(n_windows: int) -> int:
    """``batch_size="auto"`` for ``n_windows`` training windows (at least 1)."""
    return max(1, min(BASE_BATCH_SIZE, max(MIN_AUTO_BATCH, n_windows // 8), n_windows))


def resolve_train_config(tcfg: TrainConfig, n_windows: int, multiple: int = 1) -> TrainConfig:
    """``tcfg`` with its ``"auto"`` budget settings resolved for ``n_windows`` windows.

    Args:
        tcfg: The training settings.
        n_windows: Training windows.
        multiple: An automatic batch size is rounded up to a multiple of this (the number
            of devices the batch is sharded over).

    Returns:
        ``tcfg`` itself when nothing is ``"auto"``, else a copy with integers in place.
    """
    changes: dict[str, int] = {}
    batch = tcfg.batch_size
    if batch == AUTO:
        batch = auto_batch_size(n_windows)
        batch = changes["batch_size"] = -(-batch // multiple) * multiple
    epochs = tcfg.epochs
    if epochs == AUTO:
        per_epoch = steps_per_epoch(n_windows, int(batch))
        epochs = BASE_EPOCHS
        if per_epoch and tcfg.min_steps > BASE_EPOCHS * per_epoch:
            epochs = math.ceil(tcfg.min_steps / per_epoch)
        changes["epochs"] = epochs
    if tcfg.patience == AUTO:
        factor = epochs / BASE_EPOCHS if tcfg.epochs == AUTO else 1.0
        changes["patience"] = math.ceil(BASE_PATIENCE * factor)
    return dataclasses.replace(tcfg, **changes) if changes else tcfg


__all__ = ["auto_batch_size", "resolve_train_config"]
