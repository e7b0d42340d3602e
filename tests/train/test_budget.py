"""The training budget: batch size, epochs and patience from the number of training windows."""

from __future__ import annotations

from stacklstm.config import TrainConfig
from stacklstm.train.budget import resolve_train_config


def test_training_budget_follows_the_windows():
    t = resolve_train_config(TrainConfig(min_steps=1000), 100)
    assert (t.batch_size, t.epochs, t.patience) == (12, 125, 32)  # 8 steps an epoch
    t = resolve_train_config(TrainConfig(min_steps=1000, patience=4), 100)
    assert (t.epochs, t.patience) == (125, 4)
    t = resolve_train_config(TrainConfig(epochs=3), 5)
    assert (t.batch_size, t.epochs, t.patience) == (5, 3, 15)
    assert resolve_train_config(TrainConfig(batch_size=7), 5, multiple=2).batch_size == 7
    assert resolve_train_config(TrainConfig(), 100, multiple=8).batch_size == 16
