"""LSTMModel against a plain step-by-step computation of the same math, plus the seed's usage."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from helpers import (
    _STATE,
    _WRONG_NDIM,
    BAD_CARRY,
    BAD_LENGTHS,
    BAD_X,
    PROPERTY,
    _raises_value_or_type_error,
)
from stacklstm import LSTMModel, LSTMState, StackedLSTM, lstm_layer
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


@pytest.fixture(scope="module")
def model_and_params():
    model = LSTMModel(4, 2, (3,))
    x = np.zeros((2, 5, 3), np.float32)  # (batch, time, features)
    return model, model.init(jax.random.key(0), x)


@PROPERTY
@given(x=BAD_X)
def test_model_rejects_malformed_x(model_and_params, x):
    model, params = model_and_params
    _raises_value_or_type_error(lambda: model.apply(params, x))


@PROPERTY
@given(carry=BAD_CARRY, lengths=st.none() | BAD_LENGTHS)
def test_model_rejects_malformed_carry_and_seq_lengths(model_and_params, carry, lengths):
    model, params = model_and_params
    x = np.zeros((2, 5, 3), np.float32)
    _raises_value_or_type_error(lambda: model.apply(params, x, carry, seq_lengths=lengths))
    if lengths is not None:
        _raises_value_or_type_error(lambda: model.apply(params, x, seq_lengths=lengths))


_BAD_COUNT = st.one_of(
    st.integers(max_value=0),
    st.floats(allow_nan=True),
    st.booleans(),
    st.text(max_size=3),
    st.none(),
    st.just(np.float32(3.0)),
)


_BAD_RATE = st.one_of(
    st.floats().filter(lambda r: not 0 <= r < 1), st.text(max_size=3), st.none(), st.just([0.1])
)


@PROPERTY
@given(
    field=st.sampled_from(
        ["lstm_hidden_size", "num_lstm_layers", "output_size", "linear_layer_sizes", "dropout_rate"]
    ),
    data=st.data(),
)
def test_model_and_stack_reject_malformed_settings(field, data):
    if field == "dropout_rate":
        value = data.draw(_BAD_RATE)
    elif field == "linear_layer_sizes":
        value = data.draw(st.one_of(_BAD_COUNT, st.lists(_BAD_COUNT, min_size=1, max_size=3)))
    else:
        value = data.draw(_BAD_COUNT)
    _raises_value_or_type_error(lambda: LSTMModel(**{field: value}))
    stack_field = {"lstm_hidden_size": "hidden_size", "num_lstm_layers": "num_layers"}
    if field in stack_field or field == "dropout_rate":
        kwargs = {"hidden_size": 4, stack_field.get(field, field): value}
        _raises_value_or_type_error(lambda: StackedLSTM(**kwargs))


_GOOD_LAYER = {"kernel_ih": jnp.zeros((3, 8)), "kernel_hh": jnp.zeros((2, 8)), "bias": jnp.zeros(8)}


_GOOD_STATE = LSTMState(jnp.zeros((2, 2)), jnp.zeros((2, 2)))


_SHAPES = st.lists(st.integers(0, 9), min_size=1, max_size=2).map(tuple)


BAD_LAYER_PARAMS = st.one_of(
    st.sampled_from(["kernel_ih", "kernel_hh", "bias"]).map(
        lambda k: {n: v for n, v in _GOOD_LAYER.items() if n != k}
    ),  # a key missing
    st.tuples(st.sampled_from(["kernel_ih", "kernel_hh", "bias"]), _SHAPES)
    .filter(lambda kv: kv[1] != _GOOD_LAYER[kv[0]].shape)
    .map(lambda kv: {**_GOOD_LAYER, kv[0]: jnp.zeros(kv[1])}),  # a wrong shape
    st.sampled_from([None, "abc", 3, [1, 2]]),
)


@PROPERTY
@given(
    case=st.one_of(
        BAD_LAYER_PARAMS.map(lambda p: (p, np.zeros((2, 5, 3), np.float32), _GOOD_STATE, None)),
        _WRONG_NDIM.map(lambda s: (_GOOD_LAYER, np.zeros(s, np.float32), _GOOD_STATE, None)),
        _STATE.filter(lambda s: s.h.shape != (2, 2)).map(
            lambda s: (_GOOD_LAYER, np.zeros((2, 5, 3), np.float32), s, None)
        ),
        BAD_LENGTHS.map(lambda n: (_GOOD_LAYER, np.zeros((2, 5, 3), np.float32), _GOOD_STATE, n)),
    ),
    remat=st.sampled_from([False, True, 2]),
)
def test_lstm_layer_rejects_malformed_input(case, remat):
    params, x, state, lengths = case
    _raises_value_or_type_error(lambda: lstm_layer(params, x, state, lengths, remat=remat))


@PROPERTY
@given(remat=st.one_of(st.integers(max_value=-1), st.text(max_size=3), st.floats(0.5, 9.5)))
def test_lstm_layer_rejects_malformed_remat(remat):
    x = np.zeros((2, 5, 3), np.float32)
    _raises_value_or_type_error(lambda: lstm_layer(_GOOD_LAYER, x, _GOOD_STATE, remat=remat))


# Escapes the tests above found once (each now a clear ValueError/TypeError).
def _zero_feature_init():
    LSTMModel(4, 1).init(jax.random.key(0), np.zeros((2, 5, 0), np.float32))


def _other_model_params():
    params = LSTMModel(5, 2, (3,)).init(jax.random.key(0), np.zeros((2, 5, 3), np.float32))
    LSTMModel(4, 2, (3,)).apply(params, np.zeros((2, 5, 3), np.float32))


KNOWN_API_ESCAPES = {
    "mean_aggregation not a bool is taken as truthy": lambda: LSTMModel(mean_aggregation="no"),
    "bidirectional not a bool is taken as truthy": lambda: StackedLSTM(4, bidirectional="no"),
    "zero features: ZeroDivisionError from the initializer": _zero_feature_init,
    "params of another model: flax ScopeParamShapeError": _other_model_params,
    "lstm_layer state None: AttributeError": lambda: lstm_layer(
        _GOOD_LAYER, np.zeros((2, 5, 3), np.float32), None
    ),
    "lstm_layer 0-d kernel_hh: IndexError": lambda: lstm_layer(
        {**_GOOD_LAYER, "kernel_hh": jnp.zeros(())}, np.zeros((2, 5, 3), np.float32), _GOOD_STATE
    ),
}


def test_lstm_layer_takes_params_as_nested_lists():
    as_lists = {k: np.asarray(v).tolist() for k, v in _GOOD_LAYER.items()}
    x = np.ones((2, 5, 3), np.float32)
    np.testing.assert_array_equal(
        lstm_layer(as_lists, x, _GOOD_STATE)[0], lstm_layer(_GOOD_LAYER, x, _GOOD_STATE)[0]
    )


@pytest.mark.parametrize("case", list(KNOWN_API_ESCAPES))
def test_once_known_api_escapes_are_clear_errors(case):
    _raises_value_or_type_error(KNOWN_API_ESCAPES[case])


MODEL = LSTMModel(4, 2, (3,))


X = np.zeros((2, 5, 3), np.float32)


PARAMS = MODEL.init(jax.random.key(0), X)


@pytest.mark.parametrize(
    "x, error, match",
    [
        (np.zeros(5, np.float32), ValueError, r"\(batch, time, features\).*got shape \(5,\)"),
        (np.zeros((2, 5, 3, 1), np.float32), ValueError, r"got shape \(2, 5, 3, 1\)"),
        (np.zeros((2, 5, 3), np.int32), TypeError, "floating-point.*int32"),
        (np.zeros((2, 5, 3), np.complex64), TypeError, "floating-point.*complex64"),
        (np.zeros((2, 0, 3), np.float32), ValueError, "at least one time step"),
        (
            np.zeros((2, 5, 4), np.float32),
            ValueError,
            "layer_0: the params expect inputs with 3 features.*got x with 4",
        ),
    ],
)
def test_model_rejects_bad_x(x, error, match):
    with pytest.raises(error, match=match):
        MODEL.apply(PARAMS, x)
    with pytest.raises(error, match=match):  # at trace time under jit too
        jax.jit(MODEL.apply)(PARAMS, x)


@pytest.mark.parametrize(
    "carry, error, match",
    [
        (MODEL.initialize_carry(2)[:1], ValueError, "must hold 2 LSTMState.*got 1"),
        (MODEL.initialize_carry(3), ValueError, r"\(batch, hidden\) = \(2, 4\); got \(3, 4\)"),
        (LSTMModel(5, 2).initialize_carry(2), ValueError, r"= \(2, 4\); got \(2, 5\)"),
        (jnp.zeros((2, 4)), TypeError, "tuple of LSTMState"),
        ((jnp.zeros((2, 4)),) * 2, TypeError, r"carry\)?\[0\] must be an LSTMState|must be an"),
    ],
)
def test_model_rejects_bad_carry(carry, error, match):
    with pytest.raises(error, match=match):
        MODEL.apply(PARAMS, X, carry)


@pytest.mark.parametrize(
    "lengths, error, match",
    [
        (np.array([5]), ValueError, r"shape \(batch,\) = \(2,\); got shape \(1,\)"),
        (np.array([[5, 5]]), ValueError, r"got shape \(1, 2\)"),
        (np.array([0, 5]), ValueError, r"\[1, time=5\]; row 0 has 0"),
        (np.array([5, 6]), ValueError, r"\[1, time=5\]; row 1 has 6"),
        (np.array([2.0, 5.0]), TypeError, "integers"),
    ],
)
def test_model_rejects_bad_seq_lengths(lengths, error, match):
    with pytest.raises(error, match=match):
        MODEL.apply(PARAMS, X, seq_lengths=lengths)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_lstm_layers=0), "num_lstm_layers must be an integer >= 1, got 0"),
        (dict(lstm_hidden_size=0), "lstm_hidden_size must be an integer >= 1, got 0"),
        (dict(lstm_hidden_size=2.5), "lstm_hidden_size must be an integer >= 1, got 2.5"),
        (
            dict(linear_layer_sizes=(8, -1)),
            r"integers >= 1 \(e.g. \(32, 16\) or \(\)\), got \[8, -1\]",
        ),
        (dict(dropout_rate=1.0), r"dropout_rate must be a number in \[0.0, 1.0\), got 1.0"),
        (dict(dropout_rate=-0.1), r"\[0.0, 1.0\), got -0.1"),
        (dict(output_size=0), "output_size must be an integer >= 1"),
    ],
)
def test_model_rejects_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LSTMModel(**kwargs)


def test_stacked_lstm_and_kernel_reject_bad_input():
    with pytest.raises(ValueError, match="hidden_size must be an integer >= 1"):
        StackedLSTM(0)
    with pytest.raises(ValueError, match="num_layers must be an integer >= 1"):
        StackedLSTM(3, num_layers=0)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1, got 0"):
        MODEL.initialize_carry(0)
    p = {"kernel_ih": jnp.zeros((3, 8)), "kernel_hh": jnp.zeros((2, 8)), "bias": jnp.zeros(8)}
    s = LSTMState(jnp.zeros((4, 2)), jnp.zeros((4, 2)))
    with pytest.raises(TypeError, match="keys 'kernel_ih', 'kernel_hh', 'bias'"):
        lstm_layer({"w": 1}, jnp.ones((4, 5, 3)), s)
    with pytest.raises(ValueError, match=r"state.h must be \(batch, hidden\) = \(4, 2\)"):
        lstm_layer(p, jnp.ones((4, 5, 3)), LSTMState(jnp.zeros((3, 2)), jnp.zeros((4, 2))))


def test_initialize_carry_gives_distinct_buffers_that_can_be_donated():
    model = LSTMModel(4, 2, (), bidirectional=True)
    x = np.random.default_rng(0).normal(size=(3, 5, 2)).astype(np.float32)
    params = model.init(jax.random.key(0), x)
    carry = model.initialize_carry(3)
    leaves = jax.tree.leaves(carry)
    assert len({leaf.unsafe_buffer_pointer() for leaf in leaves}) == len(leaves) == 8
    expected = model.apply(params, x, model.initialize_carry(3), return_carry=True)
    step = jax.jit(lambda p, x, c: model.apply(p, x, c, return_carry=True), donate_argnums=2)
    got = step(params, x, carry)  # used to fail: "Attempt to donate the same buffer twice"
    assert all(leaf.is_deleted() for leaf in leaves)
    jax.tree.map(np.testing.assert_array_equal, got, expected)


def test_seq_lengths_under_jit_are_clamped_to_the_time_axis():
    model = LSTMModel(4, 2, ())
    x = np.random.default_rng(1).normal(size=(3, 5, 2)).astype(np.float32)
    params = model.init(jax.random.key(0), x)
    jitted = jax.jit(lambda p, x, lengths: model.apply(p, x, seq_lengths=lengths))
    got = jitted(params, x, jnp.array([5, 9, 0]))  # 9 > time, 0 < 1: unchecked under jit
    assert np.isfinite(np.asarray(got)).all()
    np.testing.assert_array_equal(got, model.apply(params, x, seq_lengths=np.array([5, 5, 1])))
