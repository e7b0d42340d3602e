"""The jitted steps: losses, the schedule, padded batches, the train step and its sharding."""

from dataclasses import replace

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from helpers import TOY_CFG, _leaves, make_toy
from stacklstm.data import DataConfig, make_splits, prepare_series
from stacklstm.distributed import check_batch_size, make_mesh, replicate, shard_batch
from stacklstm.train import TrainConfig
from stacklstm.train.step import (
    Batch,
    forecast_loss,
    make_schedule,
    make_train_step,
    padded_batches,
)


@pytest.fixture(scope="module")
def toy():
    """The toy model, optimizer, train step and batch (helpers.make_toy), once per module."""
    return make_toy()


def test_forecast_loss_matches_numpy_and_refuses_broadcasting():
    rng = np.random.default_rng(0)
    y = rng.normal(size=(4, 3, 2)).astype(np.float32) * 2  # (batch, horizon, n_targets)
    pred = rng.normal(size=(4, 6)).astype(np.float32) * 2
    err = pred - y.reshape(4, 6)  # horizon-major flattening
    huber = np.where(np.abs(err) <= 1, 0.5 * err**2, np.abs(err) - 0.5)
    for kind, expected in (("mse", err**2), ("mae", np.abs(err)), ("huber", huber)):
        got = forecast_loss(kind, jnp.asarray(pred), jnp.asarray(y))
        np.testing.assert_allclose(got, expected.mean(axis=1), rtol=1e-6)
    with pytest.raises(ValueError, match=r"\(batch, horizon \* n_targets\) = \(4, 6\)"):
        forecast_loss("mse", jnp.zeros((4, 1)), jnp.asarray(y))
    with pytest.raises(ValueError, match="targets must be"):
        forecast_loss("mse", jnp.zeros((4, 1)), jnp.zeros((4,)))


def test_schedule_warms_up_then_decays_as_cosine():
    cfg = TrainConfig(lr=0.1, warmup_fraction=0.2)
    schedule = make_schedule(cfg, total_steps=50)  # 10 warm-up steps, then 40 of cosine
    for step in (0, 5, 10, 30, 50):
        warm = step <= 10
        expected = 0.1 * step / 10 if warm else 0.05 * (1 + np.cos(np.pi * (step - 10) / 40))
        assert float(schedule(step)) == pytest.approx(expected, abs=1e-7)


def test_padded_batches_pad_with_zero_weight():
    x = np.arange(5, dtype=np.float32).reshape(5, 1, 1)
    batches = list(padded_batches(x, None, 2))
    assert [n for _, n in batches] == [2, 2, 1]
    last, _ = batches[-1]
    assert last.x[:, 0, 0].tolist() == [4.0, 0.0] and last.weight.tolist() == [1.0, 0.0]


def test_train_step_changes_every_parameter(toy):
    state = toy.state()
    before = _leaves(state.params)
    state, metrics = toy.step(state, toy.batch, jax.random.key(1))
    after = _leaves(state.params)
    assert int(state.step) == 1 and bool(metrics.finite)
    assert len(before) == len(after) == 10  # 2 LSTM layers x 3, head dense_0 and output x 2
    for old, new in zip(before, after, strict=True):
        assert old.shape == new.shape
        assert np.all(old != new), "every entry of every parameter must move after one step"


def test_train_step_compiles_once_and_donates_the_state(toy):
    state = toy.state()
    rng = jax.random.key(1)
    old_leaf = jax.tree.leaves(state.params)[0]
    state, _ = toy.step(state, toy.batch, rng)
    assert old_leaf.is_deleted()  # donated: the buffer was reused for the new state
    losses = []
    for _ in range(3):
        state, metrics = toy.step(state, toy.batch, rng)
        losses.append(float(metrics.loss))
    assert toy.step._cache_size() == 1  # one compilation for all calls in this module
    assert losses[0] > losses[1] > losses[2]  # and the steps did change something


def test_train_step_loss_falls_on_a_sine(toy):
    t = np.arange(400)
    frame = pd.DataFrame({"v": np.sin(2 * np.pi * t / 25) + 0.5 * np.sin(2 * np.pi * t / 9)})
    cfg = DataConfig(
        target=("v",), time_column=None, window=6, horizon=2, normalize="none", season=1
    )
    splits, _ = make_splits(prepare_series(frame, cfg), cfg)
    train = splits.train  # x (n, 6, 1), y (n, 2, 1): the toy's shapes, so no new compile
    state, rng, losses = toy.state(), jax.random.key(0), []
    for i in range(100):  # the toy optimizer's whole schedule
        rows = np.random.default_rng(i).choice(len(train), 16, replace=False)
        state, metrics = toy.step(state, Batch(train.x[rows], train.y[rows], np.ones(16)), rng)
        losses.append(metrics.loss)
    losses = np.asarray(jax.device_get(losses))
    variance = float(np.mean(np.square(train.y - train.y.mean())))
    assert losses[:5].mean() > 0.5 * variance  # starts near predicting the mean
    assert losses[-10:].mean() < 0.1 * losses[:5].mean()


def test_skip_nonfinite_keeps_the_state_and_flags_the_step(toy):
    state = toy.state()
    bad = toy.batch._replace(x=np.where(np.arange(6)[None, :, None] == 3, np.nan, toy.batch.x))
    before = _leaves(state.params)
    skipping = make_train_step(toy.model, toy.optimizer, replace(TOY_CFG, skip_nonfinite=True))
    state, metrics = skipping(state, bad, jax.random.key(0))
    assert not bool(metrics.finite) and not np.isfinite(float(metrics.loss))
    assert int(state.step) == 1
    for old, new in zip(before, _leaves(state.params), strict=True):
        np.testing.assert_array_equal(old, new)
    state, metrics = toy.step(state, bad, jax.random.key(0))  # without skipping
    assert not bool(metrics.finite)
    assert not all(np.isfinite(leaf).all() for leaf in _leaves(state.params))


def test_sharded_step_on_one_device_equals_plain_step(toy):
    mesh = make_mesh(jax.devices()[:1])
    sharded = make_train_step(toy.model, toy.optimizer, TOY_CFG, mesh=mesh)
    rng = jax.random.key(3)
    plain_state, plain_metrics = toy.step(toy.state(), toy.batch, rng)
    placed = replicate(toy.state(), mesh)
    sharded_state, sharded_metrics = sharded(placed, shard_batch(mesh, toy.batch), rng)
    assert sharded_state.params["head"]["output"]["kernel"].sharding.is_fully_replicated
    assert float(plain_metrics.loss) == float(sharded_metrics.loss)
    for a, b in zip(_leaves(plain_state), _leaves(sharded_state), strict=True):
        np.testing.assert_array_equal(a, b)


def test_batch_placement_checks_divisibility():
    mesh = make_mesh()
    check_batch_size(4 * mesh.devices.size, mesh)
    x, y = shard_batch(mesh, np.zeros((2 * mesh.devices.size, 3)), np.ones(2 * mesh.devices.size))
    assert x.shape == (2 * mesh.devices.size, 3) and float(y.sum()) == 2 * mesh.devices.size
