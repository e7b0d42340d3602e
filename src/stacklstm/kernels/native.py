"""The compiled CPU kernel of the LSTM recurrence (``csrc/lstm_cpu.cc``), called from JAX.

Two XLA FFI custom calls do the per-step loop in C++ (one packed GEMM and one vectorised pass
over the gates per step); the backward call also does the input, weight and bias gradients, one
GEMM each over all steps. ``lstm.py`` picks this path on the CPU for float32 and keeps the
pure-JAX scan as the portable path (other backends, bfloat16, float64); both are held to the
same tests.

``STACKLSTM_KERNEL`` in the environment (read when a function is traced): ``auto`` (the default)
or ``native`` use this path where it applies, ``xla`` turns it off.
"""

from __future__ import annotations

import functools
import os

import jax
import jax.numpy as jnp

Array = jax.Array
_F32 = jnp.float32


@functools.cache
def _load() -> bool:
    """Imports the extension and registers its handlers once; False if it is not built."""
    try:
        from stacklstm import _lstm_cpu  # the compiled module, built by the package's build
    except ImportError:
        return False
    for name, capsule in _lstm_cpu.handlers().items():
        jax.ffi.register_ffi_target(name, capsule, platform="cpu")
    return True


def available() -> bool:
    """True when the compiled kernel is built and importable."""
    return _load()


def wanted(dtype, acc_dtype) -> bool:
    """True when ``lstm_layer`` should use this path: float32 on the CPU, kernel built, and
    not turned off with ``STACKLSTM_KERNEL=xla``."""
    choice = os.environ.get("STACKLSTM_KERNEL", "auto")
    if choice not in ("auto", "native", "xla"):
        raise ValueError(f"STACKLSTM_KERNEL must be 'auto', 'native' or 'xla'; got {choice!r}")
    return (
        choice != "xla"
        and jnp.dtype(dtype) == _F32
        and jnp.dtype(acc_dtype) == _F32
        and jax.default_backend() == "cpu"
        and available()
    )


def _mask2d(mask: Array) -> Array:
    """``(time, batch, 1)`` -> ``(time, batch)``; the scalar "all valid" stays a scalar."""
    return mask if mask.ndim == 0 else mask[..., 0]


def _call(name: str, outs, *args, **attrs):
    call = jax.ffi.ffi_call(name, outs, vmap_method="sequential")
    return call(*(jnp.asarray(a, _F32) for a in args), **attrs)


def _forward(x, kernel_ih, kernel_hh, bias, h0, c0, mask, save: bool):
    time, batch, _ = x.shape
    hidden = kernel_hh.shape[0]
    seq = jax.ShapeDtypeStruct((time, batch, hidden), _F32)
    state = jax.ShapeDtypeStruct((batch, hidden), _F32)
    if not save:
        return _call(
            "stacklstm_lstm_forward", (seq, state, state), x, kernel_ih, kernel_hh, bias, h0, c0,
            _mask2d(mask),
        )  # fmt: skip
    acts = jax.ShapeDtypeStruct((time, batch, 4 * hidden), _F32)
    # The h each step starts from, for the weight gradient; without padding the outputs are
    # that already (h_prev[t] = ys[t - 1]), so it is not written: shape (0,).
    h_prev = seq if mask.ndim > 0 else jax.ShapeDtypeStruct((0,), _F32)
    return _call(
        "stacklstm_lstm_forward_train", (seq, state, state, acts, seq, h_prev), x, kernel_ih,
        kernel_hh, bias, h0, c0, _mask2d(mask),
    )  # fmt: skip


@jax.custom_vjp
def recurrence(x, kernel_ih, kernel_hh, bias, h0, c0, mask):
    """The LSTM over time-major ``x`` ``(time, batch, features)`` from ``(h0, c0)``.

    ``mask``: ``(time, batch, 1)`` with 1 at valid steps, or a scalar for "all valid".
    Returns ``(ys (time, batch, hidden), h (batch, hidden), c (batch, hidden))``, float32.
    """
    return tuple(_forward(x, kernel_ih, kernel_hh, bias, h0, c0, mask, save=False))


def _recurrence_fwd(x, kernel_ih, kernel_hh, bias, h0, c0, mask):
    ys, h, c, acts, cs, h_prev = _forward(x, kernel_ih, kernel_hh, bias, h0, c0, mask, save=True)
    h_seq = h_prev if mask.ndim > 0 else ys
    return (ys, h, c), (acts, cs, h0, h_seq, x, kernel_ih, kernel_hh, c0, mask)


def _recurrence_bwd(residuals, cotangents):
    acts, cs, h0, h_seq, x, kernel_ih, kernel_hh, c0, mask = residuals
    d_ys, d_h, d_c = cotangents

    def like(a):
        return jax.ShapeDtypeStruct(a.shape, _F32)

    # The reverse recurrence, then the input, weight and bias gradients as one GEMM each over
    # all (time * batch) rows (the gate gradients themselves are not needed here).
    dh0, dc0, d_x, d_kernel_ih, d_kernel_hh, d_bias = _call(
        "stacklstm_lstm_backward",
        (like(c0), like(c0), like(x), like(kernel_ih), like(kernel_hh), like(acts[0, 0])),
        acts, cs, c0, kernel_hh, d_ys, d_h, d_c, _mask2d(mask), x, kernel_ih, h0, h_seq,
        h_is_output=mask.ndim == 0,
    )  # fmt: skip
    return d_x, d_kernel_ih, d_kernel_hh, d_bias, dh0, dc0, jnp.zeros_like(mask)


recurrence.defvjp(_recurrence_fwd, _recurrence_bwd)
