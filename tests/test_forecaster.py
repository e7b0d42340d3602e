"""Forecaster: LSTMModel exactly without covariates; covariates join the head in the documented
order (checked against the float64 numpy oracle)."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stacklstm import LSTMModel
from stacklstm.checks import SettingError
from stacklstm.forecaster import Forecaster
from stacklstm.kernels.reference import stacked_lstm_reference

SIZES = {"lstm_hidden_size": 5, "num_lstm_layers": 2, "output_size": 3}


def _elu(z):
    return np.where(z > 0, z, np.expm1(np.minimum(z, 0)))


def _reference(params, x, future, static, model):
    """The forecaster's math in float64 numpy: encoder, last or mean step, concat, head."""
    out, _ = stacked_lstm_reference(
        params["lstm"], x, None, None, model.num_lstm_layers, model.bidirectional
    )
    z = out.mean(axis=1) if model.mean_aggregation else out[:, -1]
    z = np.concatenate([z, np.asarray(future, np.float64).reshape(len(x), -1), static], axis=1)
    head = params["head"]
    for j in range(len(model.linear_layer_sizes)):
        layer = head[f"dense_{j}"]
        z = _elu(z @ np.asarray(layer["kernel"], np.float64) + np.asarray(layer["bias"]))
    return z @ np.asarray(head["output"]["kernel"], np.float64) + np.asarray(head["output"]["bias"])


def _inputs(batch=4, window=6, features=3, horizon=3, n_future=2, n_static=2):
    keys = jax.random.split(jax.random.key(7), 3)
    x = jax.random.normal(keys[0], (batch, window, features))
    future = jax.random.normal(keys[1], (batch, horizon, n_future))
    static = jax.random.normal(keys[2], (batch, n_static))
    return x, future, static


@pytest.mark.parametrize(
    "options",
    [{}, {"mean_aggregation": True, "bidirectional": True}, {"linear_layer_sizes": ()}],
)
def test_without_covariates_it_is_lstm_model_bit_for_bit(options):
    x, _, _ = _inputs()
    reference = LSTMModel(**SIZES, **options)
    model = Forecaster(**SIZES, **options)
    rng = jax.random.key(3)
    expected = reference.init(rng, x)
    params = model.init(rng, x)
    assert jax.tree.structure(params) == jax.tree.structure(expected)
    for got, want in zip(jax.tree.leaves(params), jax.tree.leaves(expected), strict=True):
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(model.apply(params, x), reference.apply(expected, x))
    carry = reference.initialize_carry(4)
    carry = jax.tree.map(lambda a: a + 0.5, carry)
    lengths = jnp.array([6, 2, 5, 1])
    want_y, want_carry = reference.apply(expected, x, carry, seq_lengths=lengths, return_carry=True)
    got_y, got_carry = model.apply(params, x, carry=carry, seq_lengths=lengths, return_carry=True)
    np.testing.assert_array_equal(got_y, want_y)
    for got, want in zip(jax.tree.leaves(got_carry), jax.tree.leaves(want_carry), strict=True):
        np.testing.assert_array_equal(got, want)
    # empty covariate arrays mean none
    np.testing.assert_array_equal(
        model.apply(params, x, jnp.zeros((4, 3, 0)), jnp.zeros((4, 0))),
        reference.apply(expected, x),
    )


def test_covariates_join_the_head_as_documented_against_the_numpy_oracle():
    options = {"mean_aggregation": True, "bidirectional": True}
    x, future, static = _inputs()
    model = Forecaster(
        **SIZES, **options, linear_layer_sizes=(4,), future_steps=3, n_future=2, n_static=2
    )
    params = model.init(jax.random.key(3), x, future, static)["params"]
    # the encoder is LSTMModel's, initialised alike; the first head kernel has the extra rows
    plain = LSTMModel(**SIZES, **options, linear_layer_sizes=(4,)).init(jax.random.key(3), x)
    for got, want in zip(
        jax.tree.leaves(params["lstm"]), jax.tree.leaves(plain["params"]["lstm"]), strict=True
    ):
        np.testing.assert_array_equal(got, want)
    assert params["head"]["dense_0"]["kernel"].shape == (2 * 5 + 3 * 2 + 2, 4)
    assert model.n_covariates == 8
    got = model.apply({"params": params}, x, future, static)
    want = _reference(params, x, future, static, model)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # every covariate reaches the output
    for name, value in (("future", future), ("static", static)):
        bumped = {"future": future, "static": static, name: value.at[0].add(1.0)}
        moved = model.apply({"params": params}, x, **bumped)
        assert not np.allclose(moved[0], got[0]) and np.array_equal(moved[1:], got[1:])


def test_the_extra_head_rows_read_the_future_horizon_major_then_the_static_values():
    """With no hidden head layer the output is linear in the covariates: the forecaster minus
    LSTMModel (same encoder, same first rows) is future_flat @ rows + static @ rows."""
    x, future, static = _inputs()
    plain = LSTMModel(**SIZES, linear_layer_sizes=())
    base = plain.init(jax.random.key(3), x)["params"]
    extra = jax.random.normal(jax.random.key(9), (3 * 2 + 2, 3))  # (covariates, output)
    kernel = jnp.concatenate([base["head"]["output"]["kernel"], extra])
    params = {
        "lstm": base["lstm"],
        "head": {"output": {**base["head"]["output"], "kernel": kernel}},
    }
    model = Forecaster(**SIZES, linear_layer_sizes=(), future_steps=3, n_future=2, n_static=2)
    got = np.asarray(model.apply({"params": params}, x, future, static), np.float64)
    without = np.asarray(plain.apply({"params": base}, x), np.float64)
    # horizon-major: step 1's two features, step 2's, step 3's; then the static values
    flat = np.concatenate(
        [np.asarray(future)[:, k, f, None] for k in range(3) for f in range(2)]
        + [np.asarray(static)],
        axis=1,
    )
    np.testing.assert_allclose(got - without, flat @ np.asarray(extra), rtol=1e-5, atol=1e-5)
    zero = model.apply({"params": params}, x, jnp.zeros_like(future), jnp.zeros_like(static))
    np.testing.assert_allclose(zero, without, rtol=1e-6, atol=1e-7)


def test_bad_covariates_and_settings_are_refused():
    x, future, static = _inputs()
    model = Forecaster(**SIZES, future_steps=3, n_future=2, n_static=2)
    params = model.init(jax.random.key(0), x, future, static)
    with pytest.raises(ValueError, match=r"future covariates of shape \(4, 3, 2\); got None"):
        model.apply(params, x, None, static)
    with pytest.raises(ValueError, match=r"future must be \(4, 3, 2\).*got shape \(4, 2, 2\)"):
        model.apply(params, x, future[:, :2], static)
    with pytest.raises(ValueError, match=r"static must be \(4, 2\).*got shape \(4, 3\)"):
        model.apply(params, x, future, jnp.ones((4, 3)))
    with pytest.raises(TypeError, match="future must be a real floating-point array"):
        model.apply(params, x, future.astype(jnp.int32), static)
    with pytest.raises(ValueError, match=r"no static covariates \(n_static=0\); got shape"):
        Forecaster(**SIZES).init(jax.random.key(0), x, None, static)
    with pytest.raises(SettingError, match="n_future must be an integer >= 0, got -1"):
        Forecaster(n_future=-1)
    with pytest.raises(SettingError, match=r"future_steps must be an integer >= 1, got 0"):
        Forecaster(n_future=2)
    with pytest.raises(SettingError, match="n_static must be an integer >= 0, got True"):
        Forecaster(n_static=True)


def test_inputs_as_one_pytree_pad_shard_and_train_like_separate_arrays():
    from stacklstm.config import ModelConfig, TrainConfig
    from stacklstm.distributed import make_mesh, shard_batch
    from stacklstm.forecaster import ForecastInputs
    from stacklstm.train.step import (
        abstract_state,
        example_inputs,
        init_state,
        make_optimizer,
        make_train_step,
        padded_batches,
    )

    x, future, static = _inputs(batch=5)
    from stacklstm.forecaster import build_model

    model = build_model(
        ModelConfig(lstm_hidden_size=4, num_lstm_layers=1, linear_layer_sizes=(3,)),
        output_size=3,
        future_steps=3,
        n_future=2,
        n_static=2,
    )
    assert isinstance(model, Forecaster) and model.n_covariates == 8
    assert not isinstance(build_model(ModelConfig(), output_size=3, future_steps=3), Forecaster)
    inputs = ForecastInputs(np.asarray(x), np.asarray(future), np.asarray(static))
    batches = list(padded_batches(inputs, np.ones((5, 3, 1), np.float32), 4))
    assert [n for _, n in batches] == [4, 1]
    last = batches[1][0]
    np.testing.assert_array_equal(last.x.future[0], inputs.future[4])
    np.testing.assert_array_equal(last.x.static[1:], np.zeros((3, 2)))
    assert last.weight.tolist() == [1.0, 0.0, 0.0, 0.0]
    optimizer = make_optimizer(TrainConfig(), total_steps=10)
    example = example_inputs(3, future_steps=3, n_future=2, n_static=2)
    shapes = abstract_state(model, optimizer, example)
    state = init_state(model, optimizer, jax.random.key(0), example)
    assert jax.tree.map(lambda a: a.shape, state) == jax.tree.map(lambda a: a.shape, shapes)
    # the pytree and the three arrays give the same forecast
    np.testing.assert_array_equal(
        model.apply({"params": state.params}, inputs),
        model.apply({"params": state.params}, x, future, static),
    )
    with pytest.raises(ValueError, match="inside ForecastInputs or separately, not both"):
        model.apply({"params": state.params}, inputs, future)
    step = make_train_step(model, optimizer, TrainConfig())
    before = jax.tree.map(np.array, state.params)
    state, metrics = step(state, shard_batch(make_mesh(), batches[0][0]), jax.random.key(1))
    assert np.isfinite(metrics.loss)
    kernel = np.asarray(state.params["head"]["dense_0"]["kernel"])
    moved = kernel != before["head"]["dense_0"]["kernel"]
    assert moved[4:].all()  # every covariate row of the head learns
