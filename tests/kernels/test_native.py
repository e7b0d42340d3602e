"""The compiled CPU kernel as part of JAX: how it loads (and steps aside), which path runs,
higher derivatives, export, empty and bad sizes, and bigger batches on several threads.

Numbers are held to the pure-JAX path (``kernels.use("xla")``) and to the float64 numpy oracle
(``kernels/reference.py``).
"""

import sys
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from helpers import TARGET, _both_paths, _case, _params, needs_kernel
from stacklstm import kernels
from stacklstm.kernels import native
from stacklstm.kernels.lstm import LSTMState, lstm_layer
from stacklstm.kernels.reference import lstm_layer_reference


@pytest.fixture
def fresh_load(monkeypatch):
    """Lets a test load the kernel again under patched conditions; loads it normally after."""
    monkeypatch.delenv("STACKLSTM_KERNEL", raising=False)
    native._load_once.cache_clear()
    jax.clear_caches()
    yield
    monkeypatch.undo()
    native._load_once.cache_clear()
    jax.clear_caches()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the real load must not warn
        native._load()


def _lowered(p, x, s0, **kw):
    return jax.jit(lambda p, x: lstm_layer(p, x, s0, **kw)[0]).lower(p, x).as_text()


# --- loading and the choice of path ---------------------------------------------------------


def test_native_choice_raises_where_it_cannot_run(monkeypatch, fresh_load):
    p, x, s0 = _case(1, 2, 3, 2, 4)
    with kernels.use("native"), pytest.raises(RuntimeError, match="float32 only, not bfloat16"):
        lstm_layer(p, x, s0, dtype=jnp.bfloat16)
    monkeypatch.setattr(native, "_load", lambda: native._Loaded(False, "no kernel here"))
    monkeypatch.setenv("STACKLSTM_KERNEL", "native")
    with pytest.raises(RuntimeError, match=r"STACKLSTM_KERNEL=native asks .* no kernel here"):
        lstm_layer(p, x, s0)
    monkeypatch.setenv("STACKLSTM_KERNEL", "auto")  # auto falls back quietly
    assert TARGET not in _lowered(p, x, s0)
    assert kernels.info().path == "xla"
    assert "no kernel here" in kernels.info().reason


def test_kernel_not_built_is_quietly_the_pure_jax_path(monkeypatch, fresh_load):
    """An install without the kernel (no compiler, no oneMKL, STACKLSTM_BUILD_KERNEL=0) runs on
    the pure-JAX path, without a warning; info() says why."""
    import stacklstm

    monkeypatch.setitem(sys.modules, "stacklstm.kernels._lstm_cpu", None)  # import fails
    monkeypatch.delattr(stacklstm.kernels, "_lstm_cpu", raising=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        info = kernels.info()
        p, x, s0 = _case(2, 2, 3, 2, 4)
        text = _lowered(p, x, s0)
    assert (info.path, info.kernel_loaded) == ("xla", False)
    assert "not built" in info.reason
    assert TARGET not in text


@needs_kernel
def test_ffi_api_mismatch_falls_back_with_one_warning(monkeypatch, fresh_load):
    from stacklstm.kernels import _lstm_cpu

    major, minor = _lstm_cpu.build_info()["ffi_api_version"]
    monkeypatch.setattr(native, "_running_ffi_api", lambda: (major, minor - 1))
    with pytest.warns(RuntimeWarning, match=rf"built for XLA FFI API {major}\.{minor}") as caught:
        info = kernels.info()
        p, x, s0 = _case(2, 2, 3, 2, 4)
        text = _lowered(p, x, s0)
    assert len(caught) == 1
    assert (info.path, info.kernel_loaded) == ("xla", False)
    assert TARGET not in text
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kernels.info()  # warned once only


@needs_kernel
def test_failing_first_call_falls_back_with_one_warning(monkeypatch, fresh_load):
    def broken():
        raise RuntimeError("handler crashed")

    monkeypatch.setattr(native, "_smoke_test", broken)
    with pytest.warns(RuntimeWarning, match="first call failed: RuntimeError: handler crashed"):
        assert not native.available()
    p, x, s0 = _case(3, 2, 3, 2, 4)
    assert TARGET not in _lowered(p, x, s0)


@needs_kernel
@pytest.mark.parametrize("wrong", ["values", "gradient"])
def test_first_call_catches_wrong_numbers(monkeypatch, wrong):
    """The load-time check compares values and a gradient with the oracle: a kernel that is off
    in either is refused."""
    right = native.recurrence

    def off(x, kernel_ih, kernel_hh, bias, h0, c0, mask):
        ys, h, c = right(x, kernel_ih, kernel_hh, bias, h0, c0, mask)
        if wrong == "values":
            return ys * 1.001, h, c
        # Same values, gradient with respect to h0 off by 0.01.
        return ys + 0.01 * (h0.sum() - jax.lax.stop_gradient(h0.sum())), h, c

    monkeypatch.setattr(native, "recurrence", off)
    with pytest.raises(AssertionError):
        native._smoke_test()
    monkeypatch.undo()
    native._smoke_test()  # the real kernel passes


# --- JAX semantics: higher derivatives, export, vmap -----------------------------------------


@needs_kernel
def test_export_under_use_xla_round_trips_and_plain_export_says_how(monkeypatch):
    from stacklstm.model import LSTMModel

    monkeypatch.delenv("STACKLSTM_KERNEL", raising=False)
    model = LSTMModel(lstm_hidden_size=8, num_lstm_layers=2, linear_layer_sizes=(4,))
    x = np.random.default_rng(5).normal(size=(3, 6, 2)).astype(np.float32)
    variables = model.init(jax.random.key(0), x)
    apply = jax.jit(model.apply)
    with pytest.raises(ValueError, match=r"jax\.export cannot serialise.*kernels\.use\('xla'\)"):
        jax.export.export(apply)(variables, x)
    with kernels.use("xla"):
        exported = jax.export.export(apply)(variables, x)
    assert "stacklstm_lstm" not in exported.mlir_module()
    pytest.importorskip("flatbuffers", reason="jax.export serialisation needs flatbuffers")
    restored = jax.export.deserialize(exported.serialize())
    np.testing.assert_allclose(restored.call(variables, x), apply(variables, x), atol=1e-6)


@needs_kernel
def test_vmap_of_grad_over_params_matches_portable_path(monkeypatch):
    """vmap over per-example weights (one kernel call per element) and of the gradient."""
    monkeypatch.delenv("STACKLSTM_KERNEL", raising=False)
    rng = np.random.default_rng(6)
    ps = jax.tree.map(lambda *a: np.stack(a), *(_params(rng, 2, 4) for _ in range(3)))
    x = rng.normal(size=(3, 2, 5, 2)).astype(np.float32)  # (groups, batch, time, features)
    s0 = LSTMState(jnp.zeros((2, 4)), jnp.zeros((2, 4)))

    def loss(p, x):
        y, s = lstm_layer(p, x, s0, jnp.array([5, 2]))
        return jnp.sum(jnp.sin(y)) + jnp.sum(s.c)

    out = _both_paths(lambda: jax.jit(jax.vmap(jax.value_and_grad(loss, argnums=(0, 1))))(ps, x))
    close = lambda a, b: np.testing.assert_allclose(a, b, atol=1e-5)  # noqa: E731
    jax.tree.map(close, out["native"], out["xla"])
    for k in range(3):  # and each element alone
        one = jax.tree.map(lambda a, k=k: a[k], ps)
        np.testing.assert_allclose(out["native"][0][k], loss(one, x[k]), atol=1e-5)


# --- empty and inconsistent sizes ------------------------------------------------------------


@pytest.mark.parametrize("batch, time", [(0, 3), (2, 0)])
def test_empty_batch_or_sequence_is_the_same_error_on_both_paths(batch, time):
    p, x, s0 = _case(7, batch, time, 2, 4)
    for path in ("native", "xla") if native.available() else ("xla",):
        with kernels.use(path), pytest.raises(ValueError, match=f"got batch={batch}, time={time}"):
            jax.jit(lambda p, x: lstm_layer(p, x, s0)[0])(p, x)


def test_zero_hidden_gives_empty_outputs_and_zero_grads_on_both_paths():
    p, x, s0 = _case(8, 2, 3, 2, 0)

    def loss(p, x):
        y, s = lstm_layer(p, x, s0, jnp.array([3, 1]))
        return jnp.sum(y) + jnp.sum(s.c), y

    paths = ("native", "xla") if native.available() else ("xla",)
    for path in paths:
        with kernels.use(path):
            (gp, gx), y = jax.jit(jax.grad(loss, argnums=(0, 1), has_aux=True))(p, x)
        assert y.shape == (2, 3, 0) and gp["bias"].shape == (0,)
        np.testing.assert_array_equal(gx, np.zeros_like(x))  # was uninitialised memory


def _ffi(name, outs, *args, **attrs):
    return jax.jit(lambda *a: jax.ffi.ffi_call(name, outs)(*a, **attrs))(*args)


@needs_kernel
@pytest.mark.parametrize(
    "bad, message",
    [
        ("h0", r"h0 must be \(2, 3\), got \(3, 2\)"),
        ("mask", r"mask must be \(4, 2\), got \(2, 4\)"),
        ("kernel_hh", r"x must be \(time, batch, features\) and kernel_hh \(hidden, 4\*hidden\)"),
        ("ys", r"ys must be \(4, 2, 3\), got \(4, 2, 5\)"),
    ],
)
def test_forward_call_checks_every_shape(bad, message):
    f32 = np.float32
    args = {
        "x": np.ones((4, 2, 1), f32),
        "kernel_ih": np.ones((1, 12), f32),
        "kernel_hh": np.ones((3, 12), f32),
        "bias": np.ones(12, f32),
        "h0": np.ones((2, 3), f32),
        "c0": np.ones((2, 3), f32),
        "mask": np.ones((4, 2), f32),
    }
    outs = [((4, 2, 3)), (2, 3), (2, 3)]
    if bad == "ys":
        outs[0] = (4, 2, 5)
    elif bad == "kernel_hh":
        args["kernel_hh"] = np.ones(12, f32)
    else:
        args[bad] = args[bad].T.copy()
    outs = tuple(jax.ShapeDtypeStruct(s, f32) for s in outs)
    with pytest.raises(Exception, match=message):
        _ffi(TARGET, outs, *args.values())


@needs_kernel
def test_backward_call_checks_every_shape():
    f32, t, b, f, h = np.float32, 4, 2, 1, 3
    z = lambda *s: np.zeros(s, f32)  # noqa: E731
    args = [
        z(t, b, 4 * h),
        z(t, b, h),
        z(b, h),
        z(h, 4 * h),
        z(t, b, h + 1),
        z(b, h),
        z(b, h),
        z(t, b),
        z(t, b, f),
        z(f, 4 * h),
        z(b, h),
        z(t, b, h),
    ]
    outs = [(b, h), (b, h), (t, b, f), (f, 4 * h), (h, 4 * h), (4 * h,)]
    outs = tuple(jax.ShapeDtypeStruct(s, f32) for s in outs)
    with pytest.raises(Exception, match=r"d_ys must be \(4, 2, 3\), got \(4, 2, 4\)"):
        _ffi("stacklstm_lstm_backward", outs, *args, h_is_output=False)


# --- bigger batches: several threads ---------------------------------------------------------


@pytest.mark.parametrize("path", ["native", "xla"])
@pytest.mark.parametrize("masked, reverse", [(False, False), (True, True)])
def test_batch_16_hidden_64_matches_oracle(path, masked, reverse):
    """Batch 16 and hidden 64 are big enough for the kernel to split the rows over its threads
    (two where two cores are there): values against the oracle, gradients between the paths."""
    if path == "native" and not native.available():
        pytest.skip("the compiled CPU kernel is not built on this platform")
    p, x, s0 = _case(9, 16, 12, 5, 64)
    p = jax.tree.map(lambda a: a * 0.3, p)
    lengths = np.random.default_rng(9).integers(1, 13, size=16) if masked else None

    def loss(p, x):
        y, s = lstm_layer(p, x, s0, lengths, reverse)
        return jnp.sum(jnp.sin(3 * y)) + jnp.sum(s.h * s.c), (y, s)

    with kernels.use(path):
        grads, (y, s) = jax.jit(jax.grad(loss, argnums=(0, 1), has_aux=True))(p, x)
        y_infer, s_infer = jax.jit(lambda p, x: lstm_layer(p, x, s0, lengths, reverse))(p, x)
    y_ref, h_ref, c_ref = lstm_layer_reference(p, x, s0.h, s0.c, lengths, reverse)
    for out, ref in ((y, y_ref), (s.h, h_ref), (s.c, c_ref), (y_infer, y_ref), (s_infer.c, c_ref)):
        np.testing.assert_allclose(out, ref, atol=2e-5)
    if path == "native":
        with kernels.use("xla"):
            grads_xla, _ = jax.jit(jax.grad(loss, argnums=(0, 1), has_aux=True))(p, x)
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-4), grads, grads_xla)


# --- small batches, large hidden sizes: each step split by hidden units ----------------------


@needs_kernel
def test_split_plan_rows_for_big_batches_units_for_small_ones():
    """The kernel's choice: rows of a batch of 8 and more over the threads; a smaller batch with
    hidden >= 128 splits each step by hidden units (at least 64 a thread); one thread else."""
    from stacklstm.kernels import _lstm_cpu

    plan = lambda batch, hidden, threads: tuple(_lstm_cpu.plan(batch, hidden, threads).values())  # noqa: E731
    assert plan(16, 64, 2) == (2, 1)  # test_batch_16_hidden_64_matches_oracle's rows
    assert plan(64, 256, 8) == (8, 1)
    assert plan(1, 256, 2) == plan(4, 256, 2) == plan(7, 128, 2) == (1, 2)
    assert plan(1, 256, 8) == (1, 4) and plan(8, 256, 2) == (2, 1)
    assert plan(1, 256, 1) == plan(4, 64, 2) == plan(1, 96, 4) == (1, 1)


@needs_kernel
@pytest.mark.parametrize("batch", [1, 4])
@pytest.mark.parametrize("masked, reverse", [(False, False), (True, True)])
def test_small_batch_hidden_256_matches_oracle(batch, masked, reverse):
    """Batch 1 and 4 at hidden 256: the kernel splits each step (and each reverse step) by hidden
    units over its threads where two cores are there. Inference and training outputs and final
    states against the oracle, all gradients (weights, inputs, initial state) against the
    pure-JAX path's."""
    p, x, s0 = _case(10 + batch, batch, 20, 5, 256)
    p = jax.tree.map(lambda a: a * 0.3, p)
    lengths = np.array([20, 7, 13, 1][:batch]) if masked else None
    if masked and batch == 1:
        lengths = np.array([13])

    def loss(p, x, s0):
        y, s = lstm_layer(p, x, s0, lengths, reverse)
        return jnp.sum(jnp.sin(3 * y)) + jnp.sum(s.h * s.c), (y, s)

    grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2), has_aux=True))
    with kernels.use("native"):
        grads, (y, s) = grad(p, x, s0)
        y_infer, s_infer = jax.jit(lambda p, x: lstm_layer(p, x, s0, lengths, reverse))(p, x)
    y_ref, h_ref, c_ref = lstm_layer_reference(p, x, s0.h, s0.c, lengths, reverse)
    outs = (y, s.h, s.c, y_infer, s_infer.h, s_infer.c)
    for out, ref in zip(outs, 2 * (y_ref, h_ref, c_ref), strict=True):
        np.testing.assert_allclose(out, ref, atol=2e-5)
    with kernels.use("xla"):
        grads_xla, _ = grad(p, x, s0)
    assert max(float(np.max(np.abs(g))) for g in jax.tree.leaves(grads_xla)) > 10
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4), grads, grads_xla
    )


@needs_kernel
def test_small_batch_split_with_uneven_units_matches_oracle():
    """Hidden 200: blocks of units that are not all alike (96 and 104 units on two threads), a
    batch of 3 with padding: outputs against the oracle, gradients against the pure-JAX path."""
    p, x, s0 = _case(15, 3, 9, 2, 200)
    p = jax.tree.map(lambda a: a * 0.3, p)
    lengths = np.array([9, 4, 6])

    def loss(p, x, s0):
        y, s = lstm_layer(p, x, s0, lengths)
        return jnp.sum(jnp.sin(3 * y)) + jnp.sum(s.h * s.c), (y, s)

    grad = jax.jit(jax.grad(loss, argnums=(0, 1, 2), has_aux=True))
    with kernels.use("native"):
        grads, (y, s) = grad(p, x, s0)
        y_infer, s_infer = jax.jit(lambda p, x: lstm_layer(p, x, s0, lengths))(p, x)
    with kernels.use("xla"):
        grads_xla, _ = grad(p, x, s0)
    y_ref, h_ref, c_ref = lstm_layer_reference(p, x, s0.h, s0.c, lengths)
    outs = (y, s.h, s.c, y_infer, s_infer.h, s_infer.c)
    for out, ref in zip(outs, 2 * (y_ref, h_ref, c_ref), strict=True):
        np.testing.assert_allclose(out, ref, atol=2e-5)
    jax.tree.map(
        lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-4), grads, grads_xla
    )


@needs_kernel
def test_small_batch_split_under_concurrent_callers():
    """Three threads calling the split kernel at once keep the pool busy (a helper may start late
    or never): every call finishes, with the numbers of a call made alone."""
    import threading

    p, x, s0 = _case(14, 1, 20, 5, 256)
    p = jax.tree.map(lambda a: a * 0.3, p)
    lengths = np.array([17])

    def loss(p, x):
        y, s = lstm_layer(p, x, s0, lengths)
        return jnp.sum(jnp.sin(3 * y)) + jnp.sum(s.h * s.c)

    with kernels.use("native"):
        step = jax.jit(jax.value_and_grad(loss, argnums=(0, 1)))
        alone = jax.block_until_ready(step(p, x))
    results = []

    def call():
        for _ in range(10):
            results.append(jax.block_until_ready(step(p, x)))

    callers = [threading.Thread(target=call) for _ in range(3)]
    for c in callers:
        c.start()
    for c in callers:
        c.join(timeout=120)
    assert not any(c.is_alive() for c in callers) and len(results) == 30
    close = lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)  # noqa: E731
    for got in results:  # the same program on the same inputs
        jax.tree.map(close, got, alone)


def test_the_kernel_modules_keep_their_public_names():
    from stacklstm.kernels import choice, cudnn, cudnn_layout, ffi

    assert native.CHOICES == ("auto", "native", "cudnn", "xla") == choice.CHOICES
    assert kernels.use is native.use is choice.use and native._choice is choice.current
    assert (native.PerShard, native.export_marker, native.portable_derivatives) == (
        ffi.PerShard,
        ffi.export_marker,
        ffi.portable_derivatives,
    )
    for name in ("DECLINES", "pack_weights", "unpack_weights", "why_not", "platform"):
        assert getattr(cudnn, name) is getattr(cudnn_layout, name), name
    with native.use("xla"):
        assert choice.current() == ("xla", "kernels.use('xla')")
        assert native.recurrence_info().path == "xla"
    with pytest.raises(ValueError, match=r"kernels\.use\(\) takes 'cudnn', 'auto', 'native'"):
        native.use("XLA")
