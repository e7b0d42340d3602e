"""The loss registry: every loss is declared once (stacklstm.losses) and the config, the help,
the training step and the output heads read it. A new point loss is one class there and one
row in HAND below."""

from typing import get_args

import jax.numpy as jnp
import numpy as np
import pytest

from helpers import check_registry_setting
from stacklstm.config import LossKind, TrainConfig
from stacklstm.intervals import OutputHead
from stacklstm.losses import INTERVAL_LOSSES, LOSSES, POINT_LOSSES
from stacklstm.train.step import forecast_loss

ERRORS = np.array([-2.0, -0.5, 0.0, 0.5, 3.0])
#: Each point loss of the errors above, by hand.
HAND = {
    "mse": [4.0, 0.25, 0.0, 0.25, 9.0],
    "mae": [2.0, 0.5, 0.0, 0.5, 3.0],
    "huber": [1.5, 0.125, 0.0, 0.125, 2.5],  # 0.5 e^2 within 1, |e| - 0.5 beyond
}
#: Each head loss's outputs per step and target (None: one per quantile level).
PARAMS = {"quantile": None, "normal": 2, "student_t": 3}


def test_every_loss_is_in_the_registry_the_config_and_the_help():
    assert tuple(LOSSES) == get_args(LossKind)
    assert set(POINT_LOSSES) == set(HAND) and set(INTERVAL_LOSSES) == set(PARAMS)
    check_registry_setting(TrainConfig, "train", "loss", LOSSES, "hinge")


@pytest.mark.parametrize("name", sorted(HAND))
def test_a_point_loss_is_its_hand_computed_value_in_the_training_step(name):
    np.testing.assert_allclose(LOSSES[name].per_entry(jnp.asarray(ERRORS)), HAND[name], rtol=1e-6)
    y = jnp.zeros((1, 5, 1))
    pred = jnp.asarray(ERRORS, dtype=jnp.float32)[None, :]  # (batch, horizon * n_targets)
    got = forecast_loss(name, pred, y)
    np.testing.assert_allclose(got, [np.mean(HAND[name])], rtol=1e-6)


@pytest.mark.parametrize("name", sorted(PARAMS))
def test_a_head_loss_declares_its_outputs_and_gives_intervals(name):
    loss = LOSSES[name]
    assert loss.intervals and not loss.point and loss.n_params == PARAMS[name]
    head = OutputHead(name, (0.1, 0.9) if name == "quantile" else ())
    assert head.n_params == (3 if name == "quantile" else PARAMS[name])
