"""LSTMModel against a plain step-by-step computation of the same math, plus the seed's usage."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stacklstm import LSTMModel, LSTMState
from stacklstm.kernels.reference import stacked_lstm_reference


def _elu(z):
    return np.where(z > 0, z, np.expm1(np.minimum(z, 0)))


def _reference_model(params, x, model, carry=None, seq_lengths=None):
    """The seed's math in numpy: LSTM stack -> mean/last over valid steps -> Dense+ELU -> Dense."""
    states = None if carry is None else [(np.asarray(s.h), np.asarray(s.c)) for s in carry]
    out, finals = stacked_lstm_reference(
        params["lstm"], x, states, seq_lengths, model.num_lstm_layers, model.bidirectional
    )
    batch, time = out.shape[:2]
    lengths = np.full(batch, time) if seq_lengths is None else np.asarray(seq_lengths)
    if model.mean_aggregation:
        z = np.stack([out[b, : lengths[b]].mean(0) for b in range(batch)])
    else:
        z = np.stack([out[b, lengths[b] - 1] for b in range(batch)])
    head = params["head"]
    for j in range(len(model.linear_layer_sizes)):
        z = _elu(
            z @ np.asarray(head[f"dense_{j}"]["kernel"]) + np.asarray(head[f"dense_{j}"]["bias"])
        )
    y = z @ np.asarray(head["output"]["kernel"]) + np.asarray(head["output"]["bias"])
    return y, finals


@pytest.mark.parametrize("mean_aggregation", [False, True])
@pytest.mark.parametrize("masked", [False, True])
@pytest.mark.parametrize("bidirectional", [False, True])
def test_model_matches_step_by_step_reference(mean_aggregation, masked, bidirectional):
    model = LSTMModel(8, 2, (6, 5), mean_aggregation, output_size=3, bidirectional=bidirectional)
    rng = np.random.default_rng(int(mean_aggregation) + 2 * masked + 4 * bidirectional)
    x = rng.normal(size=(4, 7, 2)).astype(np.float32)
    lengths = np.array([7, 3, 1, 5]) if masked else None
    params = model.init(jax.random.key(0), x)["params"]
    # Non-trivial biases, so a wrong bias path shows.
    params = jax.tree.map(lambda a: a + 0.1 * rng.normal(size=a.shape).astype(a.dtype), params)
    carry = tuple(
        LSTMState(*(rng.normal(size=(4, 8)).astype(np.float32) for _ in range(2)))
        for _ in range(model.num_states)
    )
    y, new_carry = model.apply({"params": params}, x, carry, seq_lengths=lengths, return_carry=True)
    y_ref, finals = _reference_model(params, x, model, carry, lengths)
    assert y.shape == (4, 3)
    np.testing.assert_allclose(y, y_ref, atol=1e-5)
    for s, (h, c) in zip(new_carry, finals, strict=True):
        np.testing.assert_allclose(s.h, h, atol=1e-5)
        np.testing.assert_allclose(s.c, c, atol=1e-5)


def test_model_seed_usage():
    model = LSTMModel(
        lstm_hidden_size=64, num_lstm_layers=2, linear_layer_sizes=[32, 16], mean_aggregation=False
    )
    x = jax.random.normal(jax.random.key(1), (32, 10, 1))
    carry = model.initialize_carry(32)
    assert len(carry) == 2 and carry[0].h.shape == (32, 64)
    params = model.init(jax.random.key(0), x, carry)
    y = model.apply(params, x, carry)
    assert y.shape == (32, 1)
    # The 2-D input form means one feature, and carry=None means zeros.
    np.testing.assert_array_equal(model.apply(params, x[..., 0]), y)
    y_ref, _ = _reference_model(params["params"], np.asarray(x), model)
    np.testing.assert_allclose(y, y_ref, atol=1e-5)


def test_model_initialize_carry_needs_no_rng_and_creates_no_params():
    model = LSTMModel(5, 3, (), bidirectional=True)
    carry = model.initialize_carry(2)
    assert len(carry) == 6
    assert all(np.all(np.asarray(s.h) == 0) and np.all(np.asarray(s.c) == 0) for s in carry)


def test_model_streaming_in_chunks_equals_one_pass():
    model = LSTMModel(6, 2, (4,), mean_aggregation=False)
    x = np.random.default_rng(0).normal(size=(3, 12, 2)).astype(np.float32)
    params = model.init(jax.random.key(0), x)
    y_full, carry_full = model.apply(params, x, return_carry=True)
    carry = model.initialize_carry(3)
    carry_before = jax.tree.map(np.array, carry)
    for start in (0, 5, 9):  # uneven chunks
        stop = {0: 5, 5: 9, 9: 12}[start]
        y, carry = model.apply(params, x[:, start:stop], carry, return_carry=True)
    np.testing.assert_allclose(y, y_full, atol=1e-6)
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-6), carry, carry_full)
    # The caller's carry is never mutated.
    jax.tree.map(np.testing.assert_array_equal, model.initialize_carry(3), carry_before)


def test_model_param_tree_is_the_public_layout():
    model = LSTMModel(4, 2, (3, 2), output_size=2, bidirectional=True)
    params = model.init(jax.random.key(0), jnp.ones((1, 5, 3)))["params"]
    shapes = jax.tree.map(jnp.shape, params)
    assert shapes == {
        "lstm": {
            "layer_0": {"kernel_ih": (3, 16), "kernel_hh": (4, 16), "bias": (16,)},
            "layer_0_reverse": {"kernel_ih": (3, 16), "kernel_hh": (4, 16), "bias": (16,)},
            "layer_1": {"kernel_ih": (8, 16), "kernel_hh": (4, 16), "bias": (16,)},
            "layer_1_reverse": {"kernel_ih": (8, 16), "kernel_hh": (4, 16), "bias": (16,)},
        },
        "head": {
            "dense_0": {"kernel": (8, 3), "bias": (3,)},
            "dense_1": {"kernel": (3, 2), "bias": (2,)},
            "output": {"kernel": (2, 2), "bias": (2,)},
        },
    }
    bias = np.asarray(params["lstm"]["layer_1"]["bias"])  # forget gate at 1, the rest 0
    np.testing.assert_array_equal(bias, np.r_[np.zeros(4), np.ones(4), np.zeros(8)])
    k_hh = np.asarray(params["lstm"]["layer_0"]["kernel_hh"])  # orthogonal rows
    np.testing.assert_allclose(k_hh @ k_hh.T, np.eye(4), atol=1e-5)


def test_model_jit_grad_vmap_and_no_recompile():
    model = LSTMModel(8, 2, (4,))
    x = np.random.default_rng(0).normal(size=(5, 6, 3)).astype(np.float32)
    y_true = np.ones((5, 1), np.float32)
    params = model.init(jax.random.key(0), x)
    traces = []

    @jax.jit
    def loss_and_grad(params, x):
        traces.append(1)  # runs only while tracing
        return jax.value_and_grad(lambda p: jnp.mean((model.apply(p, x) - y_true) ** 2))(params)

    loss1, g = loss_and_grad(params, x)
    loss2, _ = loss_and_grad(params, x + 1)
    assert len(traces) == 1
    assert float(loss1) != float(loss2)
    assert all(float(jnp.abs(a).sum()) > 0 for a in jax.tree.leaves(g))
    # vmap over an extra leading axis equals a loop.
    xs = np.stack([x, -x])
    ys = jax.vmap(lambda xx: model.apply(params, xx))(xs)
    np.testing.assert_allclose(ys[1], model.apply(params, -x), atol=1e-6)


def test_model_dropout_active_only_when_not_deterministic():
    model = LSTMModel(16, 3, (4,), dropout_rate=0.5)
    x = np.random.default_rng(0).normal(size=(4, 6, 2)).astype(np.float32)
    params = model.init(jax.random.key(0), x)
    y_det = model.apply(params, x)
    np.testing.assert_array_equal(model.apply(params, x, deterministic=True), y_det)
    rngs = {"dropout": jax.random.key(3)}
    y1 = model.apply(params, x, deterministic=False, rngs=rngs)
    y2 = model.apply(params, x, deterministic=False, rngs=rngs)
    y3 = model.apply(params, x, deterministic=False, rngs={"dropout": jax.random.key(4)})
    np.testing.assert_array_equal(y1, y2)  # reproducible from the RNG
    assert not np.allclose(y1, y_det) and not np.allclose(y1, y3)
    # dropout_rate=0 with deterministic=False is the deterministic model.
    no_drop = LSTMModel(16, 3, (4,))
    np.testing.assert_array_equal(no_drop.apply(params, x, deterministic=False, rngs=rngs), y_det)
