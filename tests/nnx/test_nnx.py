"""The NNX front-end against the linen modules (same params -> same numbers, gradients and
errors), under nnx.jit / nnx.grad / nnx.Optimizer, and its train/eval dropout switch."""

import dataclasses
import inspect
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import optax
import pytest
from flax import nnx

import stacklstm
import stacklstm.nnx as snnx
from stacklstm import LSTMState


def _linen_stack(**kw):
    return stacklstm.StackedLSTM(**kw)


def _shapes(tree):
    return jax.tree.map(jnp.shape, tree)


def _perturbed(params, seed):
    """Non-trivial values everywhere (biases too), so a wrong path shows."""
    rng = np.random.default_rng(seed)
    return jax.tree.map(lambda a: a + 0.1 * rng.normal(size=a.shape).astype(a.dtype), params)


def _assert_trees_close(a, b, atol):
    assert jax.tree.structure(a) == jax.tree.structure(b)
    jax.tree.map(lambda u, v: np.testing.assert_allclose(u, v, atol=atol, rtol=0), a, b)


def test_param_tree_equals_linen_key_for_key():
    kw = dict(hidden_size=7, num_layers=2, bidirectional=True, proj_size=3)
    x = jnp.ones((2, 4, 3))
    linen = jax.eval_shape(_linen_stack(**kw).init, jax.random.key(0), x)["params"]
    ours = nnx.to_pure_dict(nnx.state(snnx.StackedLSTM(3, **kw, rngs=nnx.Rngs(0)), nnx.Param))
    assert _shapes(ours) == _shapes(linen)
    model = stacklstm.LSTMModel(5, 2, (4, 3), bidirectional=True)
    linen = jax.eval_shape(model.init, jax.random.key(0), x)["params"]
    nnx_model = snnx.LSTMModel(3, 5, 2, (4, 3), bidirectional=True, rngs=nnx.Rngs(0))
    assert _shapes(snnx.to_linen_params(nnx_model)) == _shapes(linen)
    # The same initialisers: forget-gate bias at 1, orthogonal kernel_hh rows.
    lstm = nnx_model.lstm.layer_1
    np.testing.assert_array_equal(lstm.bias[...], np.r_[np.zeros(5), np.ones(5), np.zeros(10)])
    np.testing.assert_allclose(lstm.kernel_hh[...] @ lstm.kernel_hh[...].T, np.eye(5), atol=1e-5)


def test_constructors_take_the_linen_fields_in_order():
    for linen_cls, nnx_cls in (
        (stacklstm.StackedLSTM, snnx.StackedLSTM),
        (stacklstm.LSTMModel, snnx.LSTMModel),
    ):
        fields = [f.name for f in dataclasses.fields(linen_cls) if f.name not in ("parent", "name")]
        params = list(inspect.signature(nnx_cls.__init__).parameters)
        assert params == ["self", "in_features", *fields, "rngs"]


def _linen_and_params(linen, nnx_model, seed):
    """Perturbed params (made by the NNX module: no linen init to compile)."""
    return linen, _perturbed(snnx.to_linen_params(nnx_model), seed)


def test_stacked_lstm_same_outputs_and_grads_as_linen():
    proj, bidirectional = 3, True
    kw = dict(hidden_size=6, num_layers=2, bidirectional=bidirectional, proj_size=proj)
    linen, params = _linen_and_params(
        _linen_stack(**kw), snnx.StackedLSTM(4, **kw, rngs=nnx.Rngs(1)), 2
    )
    rng = np.random.default_rng(proj)
    x = rng.normal(size=(3, 7, 4)).astype(np.float32)
    lengths = np.array([7, 2, 5])
    state = tuple(
        LSTMState(rng.normal(size=(3, proj or 6)).astype(np.float32), rng.normal(size=(3, 6)))
        for _ in range(2 * (1 + bidirectional))
    )
    model = snnx.from_linen(linen, params)
    w = rng.normal(size=(3, 7, (1 + bidirectional) * (proj or 6))).astype(np.float32)

    def loss(out):
        y, final = out
        return jnp.sum(y * w) + sum(jnp.sum(s.h) + jnp.sum(s.c**2) for s in final), out

    def linen_loss(params, x):
        return loss(linen.apply({"params": params}, x, state, seq_lengths=lengths))

    def nnx_loss(model, x):
        return loss(model(x, state, seq_lengths=lengths))

    # One compiled program per front-end: outputs, final states and gradients.
    (g_params, g_x), (y_l, final_l) = jax.jit(jax.grad(linen_loss, argnums=(0, 1), has_aux=True))(
        params, x
    )
    (g_model, g_xn), (y_n, final_n) = nnx.jit(nnx.grad(nnx_loss, argnums=(0, 1), has_aux=True))(
        model, x
    )
    np.testing.assert_allclose(y_n, y_l, atol=1e-6, rtol=0)
    _assert_trees_close(final_n, final_l, 1e-6)
    np.testing.assert_allclose(g_xn, g_x, atol=1e-6, rtol=0)
    _assert_trees_close(nnx.to_pure_dict(g_model), g_params, 1e-6)


def test_lstm_model_same_outputs_and_grads_as_linen():
    kw = dict(lstm_hidden_size=8, num_lstm_layers=2, linear_layer_sizes=(6, 5))
    kw.update(mean_aggregation=True, output_size=2)
    linen, params = _linen_and_params(
        stacklstm.LSTMModel(**kw), snnx.LSTMModel(3, **kw, rngs=nnx.Rngs(0)), 3
    )
    rng = np.random.default_rng(0)
    x = rng.normal(size=(4, 6, 3)).astype(np.float32)
    lengths = np.array([6, 3, 1, 5])
    model = snnx.from_linen(linen, {"params": params})
    target = rng.normal(size=(4, 2)).astype(np.float32)

    def loss(out):
        return jnp.mean((out[0] - target) ** 2), out

    def linen_loss(p):
        return loss(linen.apply({"params": p}, x, seq_lengths=lengths, return_carry=True))

    def nnx_loss(m):
        return loss(m(x, seq_lengths=lengths, return_carry=True))

    g_l, (y_l, carry_l) = jax.jit(jax.grad(linen_loss, has_aux=True))(params)
    g_n, (y_n, carry_n) = nnx.jit(nnx.grad(nnx_loss, has_aux=True))(model)
    np.testing.assert_allclose(y_n, y_l, atol=1e-6, rtol=0)
    _assert_trees_close(carry_n, carry_l, 1e-6)
    _assert_trees_close(nnx.to_pure_dict(g_n), g_l, 1e-6)
    # The 2-D input form is one feature, as in linen.
    one = snnx.LSTMModel(1, **kw, rngs=nnx.Rngs(0))
    linen_one = {"params": snnx.to_linen_params(one)}
    np.testing.assert_allclose(one(x[..., 0]), linen.apply(linen_one, x[..., :1]), atol=1e-6)


def test_conversions_round_trip_and_check_keys_and_shapes():
    model = snnx.StackedLSTM(3, 5, 2, proj_size=2, rngs=nnx.Rngs(0))
    params = snnx.to_linen_params(model)
    assert isinstance(params, dict) and isinstance(params["layer_0"], dict)
    other = snnx.StackedLSTM(3, 5, 2, proj_size=2, rngs=nnx.Rngs(1))
    x = np.random.default_rng(0).normal(size=(2, 4, 3)).astype(np.float32)
    assert not np.allclose(other(x)[0], model(x)[0])
    snnx.load_linen_params(other, {"params": params})
    np.testing.assert_array_equal(other(x)[0], model(x)[0])
    linen_y, _ = _linen_stack(hidden_size=5, num_layers=2, proj_size=2).apply({"params": params}, x)
    np.testing.assert_allclose(model(x)[0], linen_y, atol=1e-6, rtol=0)
    before = snnx.to_linen_params(other)
    missing = {**params, "layer_1": {k: v for k, v in params["layer_1"].items() if k != "bias"}}
    with pytest.raises(ValueError, match=r"missing \['layer_1/bias'\], unexpected \[\]"):
        snnx.load_linen_params(other, missing)
    wrong = {**params, "layer_0": {**params["layer_0"], "kernel_hr": jnp.zeros((2, 5))}}
    with pytest.raises(
        ValueError, match=r"layer_0/kernel_hr must have shape \(5, 2\); got \(2, 5\)"
    ):
        snnx.load_linen_params(other, wrong)
    _assert_trees_close(snnx.to_linen_params(other), before, 0)  # nothing changed
    with pytest.raises(TypeError, match=r"from_linen expects a stacklstm\.StackedLSTM"):
        snnx.from_linen(model, params)


def test_from_torch_params_load_into_nnx_with_torch_numbers():
    torch = pytest.importorskip("torch")
    from stacklstm.interop import from_torch

    torch.manual_seed(0)
    t_lstm = torch.nn.LSTM(3, 6, 2, batch_first=True, proj_size=2)
    model = snnx.StackedLSTM(3, 6, 2, proj_size=2, rngs=nnx.Rngs(0))
    snnx.load_linen_params(model, from_torch(t_lstm))
    x = np.random.default_rng(0).normal(size=(2, 5, 3)).astype(np.float32)
    with torch.no_grad():
        t_out, _ = t_lstm(torch.tensor(x))
    np.testing.assert_allclose(model(x)[0], t_out.numpy(), atol=1e-5, rtol=0)


def test_dropout_follows_train_and_eval():
    kw = dict(hidden_size=16, num_layers=3, dropout_rate=0.5)
    x = np.random.default_rng(0).normal(size=(4, 6, 2)).astype(np.float32)
    linen = _linen_stack(**kw)
    params = snnx.to_linen_params(snnx.StackedLSTM(2, **kw, rngs=nnx.Rngs(0)))
    model = snnx.from_linen(linen, params, rngs=nnx.Rngs(0, dropout=1))
    y_det, _ = linen.apply({"params": params}, x)  # linen's deterministic=True
    y_train1, _ = model(x)  # NNX modules start in training mode
    y_train2, _ = model(x)  # the dropout RNG stream has moved on
    assert not np.allclose(y_train1, y_det) and not np.allclose(y_train1, y_train2)
    np.testing.assert_array_equal(model(x, deterministic=True)[0], y_det)  # per-call override
    model.eval()
    np.testing.assert_array_equal(model(x)[0], y_det)
    assert not np.allclose(model(x, deterministic=False)[0], y_det)
    model.train()
    assert not np.allclose(model(x)[0], y_det)
    # Same rngs, same masks: reproducible.
    a = snnx.from_linen(linen, params, rngs=nnx.Rngs(0, dropout=7))
    b = snnx.from_linen(linen, params, rngs=nnx.Rngs(0, dropout=7))
    np.testing.assert_array_equal(a(x)[0], b(x)[0])


def test_jit_grad_and_optimizer_train_the_regressor():
    """nnx.jit + nnx.value_and_grad + nnx.Optimizer(optax.adam): the loss falls on a toy
    series, every parameter moves, and the second step does not retrace."""
    t = np.arange(74) * 0.3
    series = np.sin(t).astype(np.float32)
    x = np.stack([series[i : i + 10] for i in range(64)])  # (64, 10): one feature
    y = series[10:74, None]
    model = snnx.LSTMModel(1, 16, 2, (8,), dropout_rate=0.1, rngs=nnx.Rngs(0))
    optimizer = nnx.Optimizer(model, optax.adam(1e-2), wrt=nnx.Param)
    before = snnx.to_linen_params(model)
    traces = []

    @nnx.jit
    def train_step(model, optimizer, xb, yb):
        traces.append(1)  # runs only while tracing
        loss, grads = nnx.value_and_grad(lambda m: jnp.mean((m(xb) - yb) ** 2))(model)
        optimizer.update(model, grads)
        return loss

    losses = [float(train_step(model, optimizer, x, y)) for _ in range(40)]
    assert len(traces) == 1
    assert losses[-1] < losses[0] / 4, losses
    moved = jax.tree.map(lambda a, b: bool(np.any(a != b)), snnx.to_linen_params(model), before)
    assert all(jax.tree.leaves(moved))
    model.eval()
    eval_loss = float(jnp.mean((nnx.jit(lambda m, xb: m(xb))(model, x) - y) ** 2))
    assert eval_loss < losses[0] / 4


def _message(fn):
    try:
        fn()
    except (ValueError, TypeError) as e:
        return type(e), str(e)
    raise AssertionError("no error")


ARG_ERRORS = {
    "hidden 0": (dict(hidden_size=0), None),
    "layers 0": (dict(hidden_size=3, num_layers=0), None),
    "bidirectional str": (dict(hidden_size=3, bidirectional="no"), None),
    "dropout 1": (dict(hidden_size=3, dropout_rate=1.0), None),
    "proj = hidden": (dict(hidden_size=3, proj_size=3), None),
}
MODEL_ERRORS = {
    "lstm_hidden_size 0": dict(lstm_hidden_size=0),
    "output_size 0": dict(output_size=0),
    "linear_layer_sizes str": dict(linear_layer_sizes="32"),
    "linear_layer_sizes 0": dict(linear_layer_sizes=(4, 0)),
    "mean_aggregation str": dict(mean_aggregation="no"),
}


@pytest.mark.parametrize("case", list(ARG_ERRORS))
def test_stacked_lstm_argument_errors_equal_linen(case):
    kw, _ = ARG_ERRORS[case]
    want = _message(lambda: _linen_stack(**kw))
    assert _message(lambda: snnx.StackedLSTM(3, **kw, rngs=nnx.Rngs(0))) == want


@pytest.mark.parametrize("case", list(MODEL_ERRORS))
def test_lstm_model_argument_errors_equal_linen(case):
    kw = MODEL_ERRORS[case]
    want = _message(lambda: stacklstm.LSTMModel(**kw))
    assert _message(lambda: snnx.LSTMModel(3, **kw, rngs=nnx.Rngs(0))) == want


def test_call_errors_equal_linen():
    linen = stacklstm.LSTMModel(4, 2, (3,))
    good = np.zeros((2, 5, 3), np.float32)
    model = snnx.LSTMModel(3, 4, 2, (3,), rngs=nnx.Rngs(0))
    params = {"params": snnx.to_linen_params(model)}
    stack_l = _linen_stack(hidden_size=4, proj_size=2)
    stack_n = snnx.StackedLSTM(3, 4, proj_size=2, rngs=nnx.Rngs(0))
    stack_p = {"params": snnx.to_linen_params(stack_n)}
    bad_calls = {
        "int input": dict(x=np.zeros((2, 5, 3), np.int32)),
        "4-d input": dict(x=np.zeros((2, 5, 3, 1), np.float32)),
        "zero steps": dict(x=np.zeros((2, 0, 3), np.float32)),
        "other features": dict(x=np.zeros((2, 5, 4), np.float32)),
        "lengths too long": dict(x=good, seq_lengths=np.array([6, 1])),
        "lengths float": dict(x=good, seq_lengths=np.array([5.0, 1.0])),
        "carry count": dict(x=good, carry=linen.initialize_carry(2)[:1]),
        "carry shape": dict(x=good, carry=linen.initialize_carry(3)),
    }
    for name, kw in bad_calls.items():
        kw = dict(kw)
        x = kw.pop("x")
        want = _message(lambda x=x, kw=kw: linen.apply(params, x, **kw))
        assert _message(lambda x=x, kw=kw: model(x, **kw)) == want, name
    wrong_h = (LSTMState(np.zeros((2, 4), np.float32), np.zeros((2, 4), np.float32)),)
    want = _message(lambda: stack_l.apply(stack_p, good, wrong_h))
    assert "initial_state[0].h must be (batch, proj_size) = (2, 2)" in want[1]
    assert _message(lambda: stack_n(good, wrong_h)) == want


def test_import_stacklstm_does_not_load_nnx():
    code = "import sys, stacklstm; print('stacklstm.nnx' in sys.modules, 'flax.nnx' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False"]
