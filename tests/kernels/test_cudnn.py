"""The one-call cuDNN path, held on the CPU to jax.experimental.rnn's own reference.

The packing is checked against ``unpack_lstm_weights`` in test_cudnn_layout.py; here the
whole call (packing, state order, padding, final states) against the layer-by-layer path,
with ``lstm_ref`` standing in for cuDNN: the same packed weights and the same signature as
``jax.experimental.rnn.lstm``. The path's self-check is held to stand-ins that are right, off
by 1e-2 and failing.
"""

import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import _stack
from stacklstm import LSTMState, StackedLSTM, kernels
from stacklstm.kernels import cudnn

CASES = [
    # layers, bidirectional, lengths (None: full rows), with an initial state
    (1, False, None, False),
    (1, True, [7, 3, 5], True),
    (2, False, [7, 1, 4], True),
    (2, True, None, True),
    (3, True, [2, 7, 6], False),
]


@pytest.mark.parametrize(("layers", "bidirectional", "lengths", "with_state"), CASES)
def test_one_call_equals_the_layer_by_layer_path(layers, bidirectional, lengths, with_state):
    hidden, features, batch, time = 6, 3, 3, 7
    lstm, params = _stack(hidden, layers, bidirectional, features, seed=layers)
    rng = np.random.default_rng(layers)
    x = jnp.asarray(rng.normal(size=(batch, time, features)), jnp.float32)
    seq = None if lengths is None else jnp.asarray(lengths)
    n_states = layers * (2 if bidirectional else 1)
    state = None
    if with_state:
        state = tuple(
            LSTMState(*(jnp.asarray(rng.normal(size=(batch, hidden)), jnp.float32) for _ in "hc"))
            for _ in range(n_states)
        )
    want_y, want_state = lstm.apply({"params": params}, x, state, seq_lengths=seq)
    start = state or lstm.initialize_carry(batch)
    got_y, got_state = jax.jit(
        lambda p, x, s, q: cudnn.run_stack(
            p,
            x,
            s,
            q,
            hidden_size=hidden,
            num_layers=layers,
            bidirectional=bidirectional,
            implementation="reference",
        )
    )(params, x, start, seq)
    np.testing.assert_allclose(got_y, want_y, atol=1e-5)
    if lengths is not None:  # padded steps are exactly zero
        for row, n in enumerate(lengths):
            assert not np.asarray(got_y[row, n:]).any()
    assert len(got_state) == n_states
    for got, want in zip(got_state, want_state, strict=True):
        np.testing.assert_allclose(got.h, want.h, atol=1e-5)
        np.testing.assert_allclose(got.c, want.c, atol=1e-5)


def test_one_call_gradients_equal_the_layer_by_layer_path():
    hidden, features, layers = 5, 2, 2
    lstm, params = _stack(hidden, layers, True, features, seed=3)
    x = jnp.asarray(np.random.default_rng(3).normal(size=(3, 6, features)), jnp.float32)
    seq = jnp.asarray([6, 2, 4])

    def loss_default(p, x):
        y, state = lstm.apply({"params": p}, x, seq_lengths=seq)
        return jnp.sum(y**2) + sum(jnp.sum(s.c) for s in state)

    def loss_one_call(p, x):
        y, state = cudnn.run_stack(
            p,
            x,
            lstm.initialize_carry(3),
            seq,
            hidden_size=hidden,
            num_layers=layers,
            bidirectional=True,
            implementation="reference",
        )
        return jnp.sum(y**2) + sum(jnp.sum(s.c) for s in state)

    want = jax.jit(jax.grad(loss_default, argnums=(0, 1)))(params, x)
    got = jax.jit(jax.grad(loss_one_call, argnums=(0, 1)))(params, x)
    jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, atol=1e-4), got, want)


# --------------------------------------------------------------------------- the dispatch
# On the CPU the one-call path runs with cuDNN's computation done by lstm_ref (the
# "reference" implementation) behind the very wrappers the GPU uses: partitioning, vmap,
# derivatives, the export marker, and StackedLSTM's choice of path.


@pytest.fixture
def one_call(monkeypatch):
    """StackedLSTM takes the one-call path here; returns the list of its calls."""
    calls = []
    run_stack = cudnn.run_stack

    def spy(*args, **kwargs):
        calls.append(kwargs)
        return run_stack(*args, **kwargs)

    monkeypatch.setattr(cudnn, "platform", lambda: "cuda")
    monkeypatch.setitem(cudnn._IMPLEMENTATIONS, "cudnn", cudnn._IMPLEMENTATIONS["reference"])
    monkeypatch.setattr(cudnn, "run_stack", spy)
    monkeypatch.delenv("STACKLSTM_KERNEL", raising=False)
    cudnn._stack_call.cache_clear()
    cudnn.warn_step_aside.cache_clear()
    yield calls
    cudnn._stack_call.cache_clear()
    cudnn.warn_step_aside.cache_clear()


def _data(batch=4, time=6, features=3, seed=0):
    rng = np.random.default_rng(seed)
    x = jnp.asarray(rng.normal(size=(batch, time, features)), jnp.float32)
    return x, jnp.asarray(rng.integers(1, time + 1, size=batch))


def test_stacked_lstm_takes_one_call_with_the_same_numbers(one_call):
    lstm = StackedLSTM(5, 2, bidirectional=True)
    x, seq = _data()
    params = lstm.init(jax.random.key(0), x)

    def loss(p, x):
        y, state = lstm.apply(p, x, seq_lengths=seq)
        return jnp.sum(jnp.sin(y)) + sum(jnp.sum(s.h * s.c) for s in state)

    got = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(params, x)
    assert one_call, "the one-call path was not taken"
    with kernels.use("xla"):
        n = len(one_call)
        want = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))(params, x)
        assert len(one_call) == n, "use('xla') must turn the one-call path off"
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)
    jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, atol=1e-4), got[1], want[1])
    assert kernels.info().path == "cudnn" and "one cuDNN call" in kernels.info().reason


@pytest.mark.parametrize(
    ("module_kwargs", "call_kwargs"),
    [
        ({"dropout_rate": 0.5}, {"deterministic": False}),  # dropout in training
        ({"remat": True}, {}),
        ({"proj_size": 2}, {}),
        ({"dtype": jnp.bfloat16}, {}),
    ],
)
def test_the_one_call_path_steps_aside(one_call, module_kwargs, call_kwargs):
    lstm = StackedLSTM(5, 2, **module_kwargs)
    x, _ = _data()
    params = lstm.init(jax.random.key(0), x)
    # the first init in a process may run the path's self-check (its own calls): only the
    # apply's calls count
    before = len(one_call)
    lstm.apply(params, x, rngs={"dropout": jax.random.key(1)}, **call_kwargs)
    assert one_call[before:] == []


def test_nnx_stack_takes_one_call_with_the_same_numbers(one_call):
    from flax import nnx

    import stacklstm.nnx as snnx

    lstm = snnx.StackedLSTM(3, 5, num_layers=2, rngs=nnx.Rngs(0))
    lstm.eval()
    x, seq = _data()
    got = lstm(x, seq_lengths=seq)
    assert one_call
    with kernels.use("xla"):
        want = lstm(x, seq_lengths=seq)
    jax.tree.map(lambda g, w: np.testing.assert_allclose(g, w, atol=1e-5), got, want)


def test_second_derivatives_and_vmap_keep_the_portable_paths_numbers(one_call):
    lstm = StackedLSTM(4, 1)
    x, seq = _data(batch=3, time=4, features=2, seed=1)
    params = lstm.init(jax.random.key(0), x)

    def loss(x):
        return jnp.sum(lstm.apply(params, x, seq_lengths=seq)[0] ** 3)

    def run():
        hvp = jax.jit(jax.grad(lambda x: jnp.sum(jax.grad(loss)(x) * x)))(x)
        per_row = jax.jit(jax.vmap(lambda row: lstm.apply(params, row[None])[0][0]))(x)
        return hvp, per_row

    got = run()
    assert one_call
    with kernels.use("xla"):
        want = run()
    np.testing.assert_allclose(got[0], want[0], atol=1e-4)
    np.testing.assert_allclose(got[1], want[1], atol=1e-5)


def test_export_names_the_portable_path(one_call):
    lstm = StackedLSTM(4, 1)
    x, _ = _data(batch=2, time=3, features=2)
    params = lstm.init(jax.random.key(0), x)
    f = jax.jit(lambda x: lstm.apply(params, x)[0])
    with pytest.raises(ValueError, match=r"through cuDNN .*kernels\.use\('xla'\)"):
        jax.export.export(f)(x)
    with kernels.use("xla"):
        exported = jax.export.export(f)(x)
    np.testing.assert_allclose(exported.call(x), f(x), atol=1e-5)


# --------------------------------------------------------------------------- the self-check
# Stand-ins for cuDNN's computation: the reference (right), and ones off by 1e-2 in the outputs
# or in a weight's gradient, or failing. The verdict is kept per stand-in, so each module-level
# one is checked once in the session.
REFERENCE = cudnn._IMPLEMENTATIONS["reference"]
ONE_CALL = "stacklstm_cudnn_stack"  # the marker on the one-call path's custom call


def _outputs_off(shape, *args):
    y, h_n, c_n = REFERENCE[0](shape, *args)
    return y + 1e-2, h_n, c_n


def _weight_gradient_off(shape, *args):
    d_x, d_h0, d_c0, d_w = REFERENCE[1](shape, *args)
    # off at element 0, layer_0's kernel_ih[0, 0] (a mask made from iota, not a constant array,
    # which custom_partitioning does not take)
    first = jnp.arange(d_w.shape[0]) == 0
    return d_x, d_h0, d_c0, jnp.where(first, d_w + 1e-2, d_w)


def _failing(shape, *args):
    raise RuntimeError("CUDNN_STATUS_EXECUTION_FAILED")


OUTPUTS_OFF = (_outputs_off, REFERENCE[1])
WEIGHT_GRADIENT_OFF = (REFERENCE[0], _weight_gradient_off)
FAILING = (_failing, REFERENCE[1])


def _ours(caught):
    """The warnings about the cuDNN path among ``caught``."""
    return [w for w in caught if "the cuDNN path is not used" in str(w.message)]


def test_the_self_checks_tolerances_sit_well_above_float32_rounding():
    """On the check's own case the pure-JAX path in float32 is within a tenth of each tolerance
    of the float64 oracle: outputs and final states, and the gradient along a unit direction
    against the oracle's central difference (so a right cuDNN call is not turned away)."""
    from stacklstm.kernels import native
    from stacklstm.kernels.reference import stacked_lstm_reference

    params, x, state, lengths, d_y, d_state = cudnn._check_case()
    with native.use("xla"), jax.default_matmul_precision("highest"):
        (y, final), pullback = jax.vjp(
            lambda p, x, s: cudnn._layer_by_layer(p, x, s, lengths), params, x, state
        )
        grads = pullback((d_y, tuple(d_state)))
    cotangents = jax.tree.leaves((d_y, d_state))

    def oracle(leaves):  # -> (outputs and final states, their dot with the cotangents)
        p, x, s = jax.tree.unflatten(tree, leaves)
        y, final = stacked_lstm_reference(p, x, s, lengths, num_layers=2, bidirectional=True)
        values = jax.tree.leaves((y, final))
        return values, sum(np.sum(v * d) for v, d in zip(values, cotangents, strict=True))

    leaves, tree = jax.tree.flatten(
        jax.tree.map(lambda a: np.asarray(a, np.float64), (params, x, [tuple(s) for s in state]))
    )
    want, _ = oracle(leaves)
    got = jax.tree.leaves((y, final))
    errors = [float(np.max(np.abs(g - w))) for g, w in zip(got, want, strict=True)]
    assert max(errors) <= cudnn._CHECK_ATOL_VALUES / 10, errors

    rng = np.random.default_rng(1)
    direction = [rng.normal(size=np.shape(a)) for a in leaves]
    norm = np.sqrt(sum(np.sum(d * d) for d in direction))
    direction = [d / norm for d in direction]
    eps = 1e-5
    plus, minus = (
        oracle([a + sign * eps * d for a, d in zip(leaves, direction, strict=True)])[1]
        for sign in (1, -1)
    )
    gradient = jax.tree.leaves((grads[0], grads[1], [tuple(s) for s in grads[2]]))
    along = sum(np.sum(g * d) for g, d in zip(gradient, direction, strict=True))
    assert abs(along - (plus - minus) / (2 * eps)) <= cudnn._CHECK_ATOL_GRADIENTS / 10


def test_a_right_stand_in_passes_the_self_check_and_is_used(one_call):
    lstm = StackedLSTM(5, 2, bidirectional=True)
    x, seq = _data()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        params = lstm.init(jax.random.key(0), x)
        f = jax.jit(lambda p, x: lstm.apply(p, x, seq_lengths=seq)[0])
        got = f(params, x)
        info = kernels.info()
        with kernels.use("cudnn"):  # insisting on it changes nothing here
            insisted = f(params, x)
            jaxpr = str(jax.make_jaxpr(f)(params, x))
    assert not _ours(caught)
    verdict = cudnn.self_check()
    assert verdict.ok and "passed its self-check" in verdict.reason, verdict
    assert info.path == "cudnn" and "passed its self-check" in info.reason, info
    assert one_call and ONE_CALL in jaxpr
    with kernels.use("xla"):
        want = f(params, x)
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(insisted, want, atol=1e-5)


@pytest.mark.parametrize(
    ("stand_in", "named"),
    [
        (OUTPUTS_OFF, "its self-check failed on the outputs: 0.01 off the pure-JAX path"),
        (
            WEIGHT_GRADIENT_OFF,
            "its self-check failed on the gradient of layer_0/kernel_ih: 0.01 off the pure-JAX "
            "path",
        ),
        (FAILING, "its self-check call failed: RuntimeError: CUDNN_STATUS_EXECUTION_FAILED"),
    ],
    ids=["outputs-off", "weight-gradient-off", "failing"],
)
def test_a_wrong_stand_in_makes_the_path_step_aside_with_one_warning(
    one_call, monkeypatch, stand_in, named
):
    monkeypatch.setitem(cudnn._IMPLEMENTATIONS, "cudnn", stand_in)
    lstm = StackedLSTM(5, 2, bidirectional=True)
    x, seq = _data()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        params = lstm.init(jax.random.key(0), x)
        f = jax.jit(lambda p, x: lstm.apply(p, x, seq_lengths=seq)[0])
        got = f(params, x)
        jaxpr = str(jax.make_jaxpr(f)(params, x))
        other = StackedLSTM(3, 1)  # another stack, another trace: no second warning
        other.apply(other.init(jax.random.key(1), x), x)
        info = kernels.info()
    ours = _ours(caught)
    assert len(ours) == 1, [str(w.message) for w in ours]
    assert ours[0].category is RuntimeWarning and named in str(ours[0].message)
    assert ONE_CALL not in jaxpr
    assert info.path != "cudnn" and named in info.reason, info
    with kernels.use("xla"):  # what runs instead is the layer-by-layer path: its numbers
        want = f(params, x)
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_the_cudnn_choice_raises_where_the_path_would_step_aside(one_call, monkeypatch):
    monkeypatch.setitem(cudnn._IMPLEMENTATIONS, "cudnn", OUTPUTS_OFF)
    lstm = StackedLSTM(5, 2, bidirectional=True)
    x, _ = _data()
    with kernels.use("xla"):
        params = lstm.init(jax.random.key(0), x)
    insists = r"kernels\.use\('cudnn'\) asks for StackedLSTM's one cuDNN call, but it cannot run: "
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with kernels.use("cudnn"):
            with pytest.raises(
                RuntimeError, match=insists + "its self-check failed on the outputs"
            ):
                jax.jit(lambda p, x: lstm.apply(p, x)[0])(params, x)
            info = kernels.info()
            # a case cuDNN declines, and a machine without cuDNN, raise too
            with pytest.raises(RuntimeError, match=insists + "not float32"):
                StackedLSTM(5, 2, bidirectional=True, dtype=jnp.bfloat16).apply(params, x)
            monkeypatch.setattr(cudnn, "platform", lambda: "cpu")
            with pytest.raises(RuntimeError, match=insists + "not a CUDA GPU"):
                lstm.apply(params, x)
            on_the_cpu = kernels.info()
    assert not _ours(caught)  # raised, not warned
    assert info.path != "cudnn" and (info.choice, info.source) == ("cudnn", "kernels.use('cudnn')")
    assert "its self-check failed on the outputs" in info.reason
    assert "tracing a StackedLSTM raises: kernels.use('cudnn') insists on it" in info.reason
    assert "the cuDNN path cannot run: not a CUDA GPU" in on_the_cpu.reason
    assert "tracing a StackedLSTM raises" in on_the_cpu.reason
    with kernels.use("auto"):  # auto steps aside instead
        jax.jit(lambda p, x: lstm.apply(p, x)[0])(params, x)
    with pytest.raises(ValueError, match="'cudnn', 'auto', 'native' or 'xla'; got 'CUDNN'"):
        kernels.use("CUDNN")


def test_the_environment_variable_insists_on_cudnn_as_kernels_use_does(one_call, monkeypatch):
    monkeypatch.setitem(cudnn._IMPLEMENTATIONS, "cudnn", OUTPUTS_OFF)
    lstm = StackedLSTM(5, 2, bidirectional=True)
    x, _ = _data()
    with kernels.use("xla"):
        params = lstm.init(jax.random.key(0), x)
    monkeypatch.setenv("STACKLSTM_KERNEL", "cudnn")
    with pytest.raises(
        RuntimeError, match=r"STACKLSTM_KERNEL=cudnn asks for StackedLSTM's one cuDNN call"
    ):
        jax.jit(lambda p, x: lstm.apply(p, x)[0])(params, x)
    assert (kernels.info().choice, kernels.info().source) == ("cudnn", "STACKLSTM_KERNEL=cudnn")


def test_the_self_check_runs_once_eagerly_outside_the_users_trace(one_call, monkeypatch):
    # a right stand-in not checked before in this process
    monkeypatch.setitem(
        cudnn._IMPLEMENTATIONS, "cudnn", (lambda *a: REFERENCE[0](*a), REFERENCE[1])
    )
    runs = []
    differences = cudnn._check_differences
    monkeypatch.setattr(
        cudnn, "_check_differences", lambda name: runs.append(name) or differences(name)
    )
    lstm = StackedLSTM(4, 1)
    x, seq = _data(batch=2, time=3, features=2)
    with kernels.use("xla"):  # no check here
        params = lstm.init(jax.random.key(0), x)
    assert not runs

    def f(p, x):
        return lstm.apply(p, x, seq_lengths=seq)[0]

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        first = str(jax.make_jaxpr(f)(params, x))  # the first use: inside a trace
        assert runs == ["cudnn"]
        again = str(jax.make_jaxpr(f)(params, x))
        y = jax.jit(f)(params, x)
        kernels.info()
        StackedLSTM(3, 2, bidirectional=True).init(jax.random.key(1), x)
    assert runs == ["cudnn"], "the verdict is kept for the process"
    assert not _ours(caught) and cudnn.self_check().ok
    assert ONE_CALL in first and first == again, "the check must not be traced into f"
    with kernels.use("xla"):
        np.testing.assert_allclose(y, jax.jit(f)(params, x), atol=1e-5)
