"""The compiled CPU kernel of the LSTM recurrence (``csrc/lstm_cpu.cc``), called from JAX.

Two XLA FFI custom calls do the per-step loop in C++ (one packed GEMM and one vectorised pass
over the gates per step); the backward call also does the input, weight and bias gradients, one
GEMM each over all steps. ``lstm.py`` picks this path on the CPU for float32 and keeps the
pure-JAX scan as the portable path (other backends, bfloat16, float64); both are held to the
same tests.

Which path runs (read when a function is traced; :mod:`stacklstm.kernels.choice`):

- ``use("auto" | "native" | "cudnn" | "xla")``, a context manager, wins; JAX's jit caches key
  on it, so a function traced once under each gets one program for each.
- else ``STACKLSTM_KERNEL`` in the environment, ``auto`` by default.
- ``auto`` takes this path where it applies (float32, the CPU, the kernel built and loaded);
  ``native`` insists on it and raises where it cannot run; ``xla`` turns it off; ``cudnn``
  insists on StackedLSTM's one cuDNN call on a CUDA GPU (``cudnn.py``) and is ``auto`` here.

``recurrence_info()`` says which path the recurrence takes and why. Loading checks that the
extension was built for an FFI API version the running jaxlib accepts and makes one tiny call;
any failure falls back to the pure-JAX path with one warning that says why.

JAX semantics kept on this path: ``jit``, ``grad``, ``vmap`` (one call per vmapped element),
grad of grad and ``jax.hessian`` (each custom call's own derivative is that of the pure-JAX
computation of the same outputs), and sharding: with the batch split over a mesh, each device
runs the calls on its own rows and the weight gradients are all-reduced (``PerShard``, in
:mod:`stacklstm.kernels.ffi` with the other helpers it shares with the cuDNN path).
``jax.export`` cannot serialise these custom calls; an export that meets one fails with a
message that says to trace under ``use("xla")``.
"""

from __future__ import annotations

import functools
import re
import threading
import warnings
from importlib import metadata
from pathlib import Path
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import scan
from .choice import CHOICES as CHOICES
from .choice import current as _choice
from .choice import use as use
from .ffi import PerShard as PerShard
from .ffi import export_marker as export_marker
from .ffi import portable_derivatives as portable_derivatives
from .reference import lstm_layer_reference

Array = jax.Array
_F32 = jnp.float32
_TARGETS = ("stacklstm_lstm_forward", "stacklstm_lstm_forward_train", "stacklstm_lstm_backward")


# ---------------------------------------------------------------------------------------------
# Loading: version check, registration, smoke call.


class _Loaded(NamedTuple):
    ok: bool
    reason: str  # why not, or what was loaded
    built_ffi_api: tuple[int, int] | None = None
    running_ffi_api: tuple[int, int] | None = None


def _running_ffi_api() -> tuple[int, int] | None:
    """The XLA FFI C API version of the running jaxlib, from the header it ships; None if not
    found (then the smoke call alone decides)."""
    try:
        files = metadata.files("jaxlib") or ()
    except metadata.PackageNotFoundError:
        return None
    for f in files:
        if str(f).replace("\\", "/").endswith("xla/ffi/api/c_api.h"):
            try:
                text = Path(f.locate()).read_text()
            except OSError:
                return None
            found = [re.search(rf"#define XLA_FFI_API_{k} (\d+)", text) for k in ("MAJOR", "MINOR")]
            if all(found):
                return int(found[0].group(1)), int(found[1].group(1))
    return None


def _smoke_test() -> None:
    """One tiny forward and gradient through the custom calls, against the float64 numpy oracle
    (``reference.py``; the gradient along one random direction against a central difference).
    Raises on any failure or difference."""
    rng = np.random.default_rng(0)
    shapes = ((3, 2, 2), (2, 12), (3, 12), (12,), (2, 3), (2, 3))  # time 3, batch 2, hidden 3
    args = [rng.normal(0, 0.5, s) for s in shapes]  # x, kernel_ih, kernel_hh, bias, h0, c0
    lengths = np.array([3, 2])
    mask = (np.arange(3)[:, None] < lengths)[..., None].astype(np.float32)  # (time, batch, 1)

    def oracle(x, w_ih, w_hh, bias, h0, c0):
        p = {"kernel_ih": w_ih, "kernel_hh": w_hh, "bias": bias}
        y, h, c = lstm_layer_reference(p, x.swapaxes(0, 1), h0, c0, lengths)
        return np.sum(np.sin(y)) + np.sum(h * c), y.swapaxes(0, 1)

    def loss(*a):
        ys, h, c = recurrence(*a, mask)
        return jnp.sum(jnp.sin(ys)) + jnp.sum(h * c), ys

    # Eagerly, also when the first use is inside a jit trace.
    # On this process's own CPU device: with several processes jax.devices()[0] may be another's.
    device = jax.local_devices(backend="cpu")[0]
    with jax.ensure_compile_time_eval(), jax.default_device(device):
        grad = jax.jit(jax.grad(loss, argnums=range(6), has_aux=True))
        grads, ys = jax.tree.map(np.asarray, grad(*(a.astype(np.float32) for a in args)))
    np.testing.assert_allclose(ys, oracle(*args)[1], atol=1e-4)
    direction = [rng.normal(size=a.shape) for a in args]
    eps = 1e-4
    plus, minus = (
        oracle(*(a + sign * eps * d for a, d in zip(args, direction, strict=True)))[0]
        for sign in (1, -1)
    )
    along = sum(np.sum(g * d) for g, d in zip(grads, direction, strict=True))
    np.testing.assert_allclose(along, (plus - minus) / (2 * eps), rtol=1e-3, atol=1e-3)


_load_lock = threading.Lock()


def _load() -> _Loaded:
    """Imports the extension and registers its handlers once, after checking them; the result
    says whether the kernel can be used and why not. A failure is warned about once."""
    with _load_lock:  # one load, also when several threads trace at once
        return _load_once()


@functools.cache
def _load_once() -> _Loaded:
    try:
        from . import _lstm_cpu  # the compiled module, built by the package's build
    except ImportError as e:
        return _Loaded(False, f"the compiled kernel is not built or not importable ({e})")
    info = _lstm_cpu.build_info() if hasattr(_lstm_cpu, "build_info") else {}
    built = tuple(info["ffi_api_version"]) if "ffi_api_version" in info else None
    running = _running_ffi_api()
    if built is None:
        reason = "the extension does not record its XLA FFI API version (an old build)"
    elif running is not None and (built[0] != running[0] or built[1] > running[1]):
        reason = (
            f"the extension was built for XLA FFI API {built[0]}.{built[1]} (jaxlib "
            f"{info.get('jaxlib')}), which the running jaxlib {metadata.version('jaxlib')} (FFI "
            f"API {running[0]}.{running[1]}) does not accept; rebuild stacklstm against it"
        )
    else:
        try:
            for name, capsule in _lstm_cpu.handlers().items():
                jax.ffi.register_ffi_target(name, capsule, platform="cpu")
            _smoke_test()
        except Exception as e:  # any failure: fall back, and say why
            reason = f"its first call failed: {type(e).__name__}: {str(e)[:300]}"
        else:
            return _Loaded(True, f"built with jaxlib {info.get('jaxlib')}", built, running)
    warnings.warn(
        f"stacklstm: the compiled CPU kernel is not used, {reason}; the pure-JAX path runs "
        "instead (same numbers, slower on the CPU)",
        RuntimeWarning,
        stacklevel=4,
    )
    return _Loaded(False, reason, built, running)


def available() -> bool:
    """True when the compiled kernel is built, loads and passed its first call."""
    return _load().ok


def _why_not(dtype, acc_dtype) -> str | None:
    """Why this path cannot run for these dtypes here, or None when it can."""
    if jax.default_backend() != "cpu":
        return f"the default backend is {jax.default_backend()!r}, not 'cpu'"
    if jnp.dtype(dtype) != _F32 or jnp.dtype(acc_dtype) != _F32:
        return f"it computes in float32 only, not {jnp.dtype(dtype).name}"
    loaded = _load()
    return None if loaded.ok else loaded.reason


def wanted(dtype, acc_dtype) -> bool:
    """True when ``lstm_layer`` should use this path (see the module's docstring).

    Raises:
        RuntimeError: the native path is asked for (``use("native")`` or
            ``STACKLSTM_KERNEL=native``) where it cannot run.
    """
    choice, source = _choice()
    if choice == "xla":
        return False
    why_not = _why_not(dtype, acc_dtype)
    if why_not is not None and choice == "native":
        raise RuntimeError(
            f"{source} asks for the compiled CPU kernel, but it cannot run: {why_not}. Use "
            "'auto' to fall back to the pure-JAX path where it cannot."
        )
    return why_not is None


def blas_info() -> dict[str, Any] | None:
    """The BLAS the compiled kernel links, as it runs on this CPU: ``{"blas": oneMKL's
    version, "code_path": the instruction set it chose here (AVX2, AVX-512, ...),
    "max_threads": int}``; None where the kernel is not built (or is an older build).

    Example:
        >>> info = blas_info()
        >>> info is None or info["blas"].startswith("Intel")
        True
    """
    try:
        from . import _lstm_cpu
    except ImportError:
        return None
    if not hasattr(_lstm_cpu, "blas_info"):
        return None
    return dict(_lstm_cpu.blas_info())


class KernelInfo(NamedTuple):
    """Which implementation of the LSTM recurrence runs, and why.

    Attributes:
        path: ``"native"`` (the compiled CPU kernel) or ``"xla"`` (the pure-JAX scan), for
            float32 on the default backend with the current choice.
        reason: why that path.
        choice: ``"auto"``, ``"native"`` or ``"xla"``.
        source: where the choice comes from (``kernels.use(...)``, ``STACKLSTM_KERNEL``, default).
        kernel_loaded: the compiled kernel is built, loaded and passed its first call.
        ffi_api_built: the XLA FFI API version the kernel was built for, or None.
        ffi_api_running: that of the running jaxlib, or None where unknown.
    """

    path: str
    reason: str
    choice: str
    source: str
    kernel_loaded: bool
    ffi_api_built: tuple[int, int] | None
    ffi_api_running: tuple[int, int] | None


def recurrence_info() -> KernelInfo:
    """Which path one layer's recurrence takes for float32 here (the compiled kernel or the
    scan), and why; :func:`stacklstm.kernels.info` builds the whole stack's answer on it.

    Loads the kernel if it is not loaded yet. Does not raise for ``native`` where it cannot run
    (``path`` is then ``"xla"`` and ``reason`` says why; tracing would raise).

    Example:
        >>> recurrence_info().path in ("native", "xla")
        True
    """
    choice, source = _choice()
    loaded = _load()
    why_not = _why_not(_F32, _F32)
    if choice == "xla":
        path, reason = "xla", f"{source} turns the compiled kernel off"
    elif why_not is None:
        path, reason = "native", f"float32 on the CPU, compiled kernel loaded ({loaded.reason})"
    else:
        path, reason = "xla", f"the compiled kernel cannot run: {why_not}"
        if choice == "native":
            reason += f" (tracing raises: {source} insists on it)"
    return KernelInfo(
        path, reason, choice, source, loaded.ok, loaded.built_ffi_api, loaded.running_ffi_api
    )


# ---------------------------------------------------------------------------------------------
# The custom calls.

_EXPORT_MESSAGE = (
    "stacklstm: this function uses the compiled CPU kernel of the LSTM (XLA custom calls "
    "{targets}), which jax.export cannot serialise. Trace it on the portable path instead: "
    "`with stacklstm.kernels.use('xla'): jax.export.export(jax.jit(f))(...)` (or set "
    "STACKLSTM_KERNEL=xla); same numbers."
)
_native_marker_p = export_marker(
    "stacklstm_native_kernel", _EXPORT_MESSAGE.format(targets=", ".join(_TARGETS))
)


def _mask2d(mask: Array) -> Array:
    """``(time, batch, 1)`` -> ``(time, batch)``; the scalar "all valid" stays a scalar."""
    return mask if mask.ndim == 0 else mask[..., 0]


def _call(name: str, outs, *args, **attrs):
    """One custom call; ``args`` already float32."""
    return tuple(jax.ffi.ffi_call(name, outs)(*args, **attrs))


def _portable_forward(x, kernel_ih, kernel_hh, bias, h0, c0, mask, save: bool):
    """What ``_forward`` computes, in pure JAX (the portable path's scan)."""
    hs, h, c, saved = scan.forward_scan(
        x, kernel_ih, kernel_hh, bias, h0, c0, mask, True, _F32, _F32, 1, save=save
    )
    if not save:
        return hs, h, c
    acts, cs, hs_carried = saved  # hs_carried[t]: the state after step t
    h_prev = (
        jnp.concatenate([h0[None], hs_carried[:-1]]) if mask.ndim > 0 else jnp.zeros((0,), _F32)
    )
    return hs, h, c, acts, cs, h_prev


def _portable_backward(acts, cs, c0, kernel_hh, d_ys, d_h, d_c, mask, x, kernel_ih, h0, h_seq):
    """What the backward custom call computes, in pure JAX (the portable path's reverse scan)."""
    # The portable backward reads the state after each step (hs_carried[t] = h_prev[t + 1]);
    # without a mask h_seq is the outputs, which are that already.
    padded = mask.ndim > 0
    hs_carried = jnp.concatenate([h_seq[1:], jnp.zeros_like(h_seq[:1])]) if padded else h_seq
    bias = jnp.zeros((kernel_hh.shape[1],), _F32)  # read for its dtype only
    residuals = ((acts, cs, hs_carried), x, kernel_ih, kernel_hh, bias, h0, c0, mask)
    d_x, d_kernel_ih, d_kernel_hh, d_bias, dh0, dc0, _ = scan.recurrence_backward(
        True, _F32, _F32, 1, residuals, (d_ys, d_h, d_c)
    )
    return dh0, dc0, d_x, d_kernel_ih, d_kernel_hh, d_bias


def _infer_call(x, kernel_ih, kernel_hh, bias, h0, c0, mask2d):
    time, batch, _ = x.shape
    hidden = kernel_hh.shape[0]
    seq = jax.ShapeDtypeStruct((time, batch, hidden), _F32)
    state = jax.ShapeDtypeStruct((batch, hidden), _F32)
    return _call(
        "stacklstm_lstm_forward", (seq, state, state), x, kernel_ih, kernel_hh, bias, h0, c0, mask2d
    )


def _train_call(x, kernel_ih, kernel_hh, bias, h0, c0, mask2d):
    time, batch, _ = x.shape
    hidden = kernel_hh.shape[0]
    seq = jax.ShapeDtypeStruct((time, batch, hidden), _F32)
    state = jax.ShapeDtypeStruct((batch, hidden), _F32)
    acts = jax.ShapeDtypeStruct((time, batch, 4 * hidden), _F32)
    # The h each step starts from, for the weight gradient; without padding the outputs are
    # that already (h_prev[t] = ys[t - 1]), so it is not written: shape (0,).
    h_prev = seq if mask2d.ndim > 0 else jax.ShapeDtypeStruct((0,), _F32)
    return _call(
        "stacklstm_lstm_forward_train",
        (seq, state, state, acts, seq, h_prev),
        x,
        kernel_ih,
        kernel_hh,
        bias,
        h0,
        c0,
        mask2d,
    )


def _backward_call(acts, cs, c0, kernel_hh, d_ys, d_h, d_c, mask2d, x, kernel_ih, h0, h_seq):
    def like(a):
        return jax.ShapeDtypeStruct(a.shape, _F32)

    # The reverse recurrence, then the input, weight and bias gradients as one GEMM each over
    # all (time * batch) rows (the gate gradients themselves are not needed here).
    bias = jax.ShapeDtypeStruct((kernel_hh.shape[1],), _F32)
    return _call(
        "stacklstm_lstm_backward",
        (like(c0), like(c0), like(x), like(kernel_ih), like(kernel_hh), bias),
        acts,
        cs,
        c0,
        kernel_hh,
        d_ys,
        d_h,
        d_c,
        mask2d,
        x,
        kernel_ih,
        h0,
        h_seq,
        h_is_output=mask2d.ndim == 0,
    )


# Batch axes: time-major sequences (time, batch, ...) on axis 1, states (batch, hidden) on 0,
# the mask (time, batch) on 1, weights not at all; the weight gradients summed over devices.
_FORWARD_AXES = (1, None, None, None, 0, 0, 1)
_infer_per_shard = PerShard(_infer_call, _FORWARD_AXES, (1, 0, 0), marker=_native_marker_p)
_train_per_shard = PerShard(_train_call, _FORWARD_AXES, (1, 0, 0, 1, 1, 1), marker=_native_marker_p)
_backward_per_shard = PerShard(
    _backward_call,
    (1, 1, 0, None, 1, 0, 0, 1, 1, None, 0, 1),
    (0, 0, 1, None, None, None),
    summed=(3, 4, 5),
    marker=_native_marker_p,
)


@portable_derivatives(functools.partial(_portable_forward, save=False))
def _forward_infer(x, kernel_ih, kernel_hh, bias, h0, c0, mask):
    return _infer_per_shard(x, kernel_ih, kernel_hh, bias, h0, c0, _mask2d(mask))


@portable_derivatives(functools.partial(_portable_forward, save=True))
def _forward_train(x, kernel_ih, kernel_hh, bias, h0, c0, mask):
    return _train_per_shard(x, kernel_ih, kernel_hh, bias, h0, c0, _mask2d(mask))


@portable_derivatives(_portable_backward)
def _backward(acts, cs, c0, kernel_hh, d_ys, d_h, d_c, mask, x, kernel_ih, h0, h_seq):
    return _backward_per_shard(
        acts, cs, c0, kernel_hh, d_ys, d_h, d_c, _mask2d(mask), x, kernel_ih, h0, h_seq
    )


@jax.custom_vjp
def recurrence(x, kernel_ih, kernel_hh, bias, h0, c0, mask):
    """The LSTM over time-major ``x`` ``(time, batch, features)`` from ``(h0, c0)``.

    ``mask``: ``(time, batch, 1)`` with 1 at valid steps, or a scalar for "all valid".
    Returns ``(ys (time, batch, hidden), h (batch, hidden), c (batch, hidden))``, float32.
    """
    return tuple(_forward_infer(x, kernel_ih, kernel_hh, bias, h0, c0, mask))


def _recurrence_fwd(x, kernel_ih, kernel_hh, bias, h0, c0, mask):
    ys, h, c, acts, cs, h_prev = _forward_train(x, kernel_ih, kernel_hh, bias, h0, c0, mask)
    h_seq = h_prev if mask.ndim > 0 else ys
    return (ys, h, c), (acts, cs, h0, h_seq, x, kernel_ih, kernel_hh, c0, mask)


def _recurrence_bwd(residuals, cotangents):
    acts, cs, h0, h_seq, x, kernel_ih, kernel_hh, c0, mask = residuals
    d_ys, d_h, d_c = cotangents
    dh0, dc0, d_x, d_kernel_ih, d_kernel_hh, d_bias = _backward(
        acts, cs, c0, kernel_hh, d_ys, d_h, d_c, mask, x, kernel_ih, h0, h_seq
    )
    return d_x, d_kernel_ih, d_kernel_hh, d_bias, dh0, dc0, jnp.zeros_like(mask)


recurrence.defvjp(_recurrence_fwd, _recurrence_bwd)
