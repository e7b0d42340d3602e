"""The LSTM over a whole sequence, in JAX (no Flax).

On the CPU in float32 the recurrence runs in the package's compiled kernel (``native.py``,
``csrc/lstm_cpu.cc``); everywhere else (other backends, bfloat16, float64, the kernel not
built, or ``STACKLSTM_KERNEL=xla``) it is the pure-JAX scan of ``scan.py``. Both compute the same
numbers and are held to the same tests.

One layer, one direction:

    gates_t = x_t @ kernel_ih + h_{t-1} @ kernel_hh + bias          # (batch, 4*hidden)
    i, f, g, o = split(gates_t)                                      # PyTorch's gate order
    c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g)
    h_t = sigmoid(o) * tanh(c_t)
    h_t = h_t @ kernel_hr                                            # only with a projection

With a projection (LSTMP, PyTorch's ``proj_size``) ``h`` and the outputs have ``proj_size``
features, ``c`` keeps ``hidden`` and ``kernel_hh`` is ``(proj_size, 4*hidden)``. That case runs
the pure-JAX scan differentiated by JAX's autodiff (neither the CPU kernel nor the hand-written
VJP has the projection); without one nothing changes.

The pure-JAX scan and its hand-written VJP are in ``scan.py``; this module checks the
arguments, picks the path and handles padding, reversal and rematerialisation.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from . import native, scan

Array = jax.Array


class LSTMState(NamedTuple):
    """The state of one LSTM layer and direction. ``h`` first, like PyTorch.

    Attributes:
        h: hidden state, ``(batch, hidden)``.
        c: cell state, ``(batch, hidden)``.
    """

    h: Array
    c: Array


class LSTMLayerParams(NamedTuple):
    """Parameters of one layer and direction (the arrays of a ``layer_{l}`` entry).

    Attributes:
        kernel_ih: ``(in_features, 4*hidden)``, gates i, f, g, o along the last axis.
        kernel_hh: ``(hidden, 4*hidden)``.
        bias: ``(4*hidden,)``, PyTorch's ``b_ih + b_hh`` folded into one.
        kernel_hr: ``(hidden, proj_size)``, the projection of ``h`` (PyTorch's ``proj_size``;
            then ``kernel_hh`` is ``(proj_size, 4*hidden)``), or ``None`` for none.
    """

    kernel_ih: Array
    kernel_hh: Array
    bias: Array
    kernel_hr: Array | None = None


# Why the compiled CPU kernel steps aside for a projection (for whoever reports the path taken).
NATIVE_DECLINES_PROJECTION = (
    "proj_size > 0 (kernel_hr): the CPU kernel has no projection; the pure-JAX scan runs"
)


def _as_layer_params(params) -> LSTMLayerParams:
    if isinstance(params, LSTMLayerParams):
        return LSTMLayerParams(*(None if a is None else jnp.asarray(a) for a in params))
    try:
        arrays = [jnp.asarray(params[k]) for k in ("kernel_ih", "kernel_hh", "bias")]
        kernel_hr = jnp.asarray(params["kernel_hr"]) if "kernel_hr" in params else None
        return LSTMLayerParams(*arrays, kernel_hr)
    except (KeyError, TypeError) as e:
        raise TypeError(
            "LSTM layer params must be a mapping with keys 'kernel_ih', 'kernel_hh', 'bias' "
            "(and 'kernel_hr' with a projection) "
            f"(or an LSTMLayerParams); got {type(params).__name__}"
            + (f" with keys {sorted(params)}" if hasattr(params, "keys") else "")
        ) from e


def is_concrete(x) -> bool:
    """True when ``x`` holds values now (not a tracer under ``jit``/``vmap``/``grad``)."""
    return not isinstance(x, jax.core.Tracer)


def check_seq_lengths(seq_lengths, batch: int, time: int) -> Array:
    """Validates ``seq_lengths`` ``(batch,)`` and returns it as an int32 array.

    Values (``1 <= length <= time``) are checked when they are concrete; under ``jit`` they are
    tracers, which cannot be checked: they are clamped to ``[1, time]`` instead (a row longer
    than ``time`` is read as ``time`` steps, one of length 0 or less as 1), so a bad length
    never yields NaN.
    """
    seq_lengths = jnp.asarray(seq_lengths)
    if seq_lengths.shape != (batch,):
        raise ValueError(
            f"seq_lengths must have shape (batch,) = ({batch},); got shape {seq_lengths.shape}"
        )
    if not jnp.issubdtype(seq_lengths.dtype, jnp.integer):
        raise TypeError(f"seq_lengths must hold integers; got dtype {seq_lengths.dtype}")
    if is_concrete(seq_lengths):
        values = np.asarray(seq_lengths)
        bad = np.flatnonzero((values < 1) | (values > time))
        if bad.size:
            raise ValueError(
                f"seq_lengths must lie in [1, time={time}]; row {int(bad[0])} has "
                f"{int(values[bad[0]])}"
            )
        return seq_lengths.astype(jnp.int32)
    return jnp.clip(seq_lengths, 1, time).astype(jnp.int32)


def reverse_padded(x: Array, seq_lengths: Array | None, time_axis: int = 1) -> Array:
    """Reverses each row of ``x`` ``(batch, time, ...)`` within its own valid steps.

    Row ``b`` becomes ``x[b, L-1], ..., x[b, 0], x[b, L], ..., x[b, T-1]`` with ``L =
    seq_lengths[b]``: padding stays where it is. Applying it twice gives ``x`` back.
    ``time_axis=0`` takes a time-major ``(time, batch, ...)`` array instead.
    """
    time = x.shape[time_axis]
    if seq_lengths is None:
        return jnp.flip(x, axis=time_axis)
    t = jnp.arange(time)[None, :]  # (1, time)
    lengths = seq_lengths[:, None]  # (batch, 1)
    index = jnp.where(t < lengths, lengths - 1 - t, t)  # (batch, time)
    if time_axis == 0:
        index = index.T  # (time, batch)
    index = index.reshape(index.shape + (1,) * (x.ndim - 2))
    return jnp.take_along_axis(x, index, axis=time_axis)


def _time_mask(seq_lengths, batch: int, time: int, padded_time: int, acc_dtype) -> Array:
    """``(padded_time, batch, 1)`` 1.0 at valid steps, or a scalar placeholder for "all valid"."""
    if seq_lengths is None and padded_time == time:
        return jnp.zeros((), acc_dtype)
    lengths = jnp.full((batch,), time) if seq_lengths is None else seq_lengths
    return (jnp.arange(padded_time)[:, None] < lengths[None, :])[..., None].astype(acc_dtype)


def _remat_chunk(remat: bool | int, time: int) -> int | None:
    if remat is False or remat is None:
        return None
    if remat is True:
        return max(1, math.ceil(math.sqrt(time)))
    if not isinstance(remat, int) or remat < 1:
        raise ValueError(f"remat must be a bool or a chunk length >= 1; got {remat!r}")
    return remat


def _run(p, x_tm, h0, c0, mask, fused, dtype, acc_dtype, unroll):
    """The recurrence over time-major ``x_tm``: the compiled CPU kernel where it applies
    (float32 on the CPU, see ``native.py``), else the pure-JAX scan. ``-> (ys, h, c)``.

    Raises the same ``ValueError`` on both paths for an empty batch or sequence; ``hidden=0``
    gives empty outputs on both."""
    time, batch = x_tm.shape[:2]
    if time == 0 or batch == 0:
        raise ValueError(
            f"the LSTM needs batch >= 1 and time >= 1; got batch={batch}, time={time} (x "
            "(batch, time, features) has no rows or no steps: skip empty batches before the call)"
        )
    if p.kernel_hr is not None:
        # A projection: the plain scan, differentiated by autodiff (see the module docstring);
        # the CPU kernel is declined here, before it is asked (NATIVE_DECLINES_PROJECTION).
        x_in = x_tm if fused else scan.project(x_tm, p.kernel_ih, dtype, acc_dtype)
        hs, h, c, _ = scan.forward_scan(
            x_in,
            p.kernel_ih,
            p.kernel_hh,
            p.bias,
            h0,
            c0,
            mask,
            fused,
            dtype,
            acc_dtype,
            unroll or scan.DEFAULT_UNROLL,
            save=False,
            kernel_hr=p.kernel_hr,
        )
        return hs, h, c
    if native.wanted(dtype, acc_dtype):
        f32 = jnp.float32
        return native.recurrence(
            x_tm.astype(f32),
            p.kernel_ih.astype(f32),
            p.kernel_hh.astype(f32),
            p.bias.astype(f32),
            h0,
            c0,
            mask,
        )
    x_in = x_tm if fused else scan.project(x_tm, p.kernel_ih, dtype, acc_dtype)
    return scan.recurrence(
        x_in,
        p.kernel_ih,
        p.kernel_hh,
        p.bias,
        h0,
        c0,
        mask,
        fused,
        dtype,
        acc_dtype,
        unroll or scan.DEFAULT_UNROLL,
    )


def _chunked_recurrence(p, x_tm, h0, c0, seq_lengths, chunk, fused, dtype, acc_dtype, unroll):
    """The recurrence over chunks of ``chunk`` steps, each rematerialised in the backward pass.

    Only the chunk inputs and the state at chunk boundaries are kept for the backward pass; the
    input projection is inside the chunk too, so no ``(time, batch, 4*hidden)`` array lives
    across chunks.
    """
    time, batch, features = x_tm.shape
    n = -(-time // chunk)
    padded = n * chunk
    x_tm = jnp.pad(x_tm, ((0, padded - time), (0, 0), (0, 0)))
    mask = _time_mask(seq_lengths, batch, time, padded, acc_dtype)
    masked = mask.ndim > 0
    xs = x_tm.reshape(n, chunk, batch, features)
    if masked:
        xs = (xs, mask.reshape(n, chunk, batch, 1))

    @jax.checkpoint
    def chunk_step(carry, inputs):
        h, c = carry
        x_c, m_c = inputs if masked else (inputs, mask)
        hs, h, c = _run(p, x_c, h, c, m_c, fused, dtype, acc_dtype, unroll)
        return (h, c), hs

    (h, c), hs = jax.lax.scan(chunk_step, (h0, c0), xs)
    return hs.reshape(padded, batch, -1)[:time], h, c


def lstm_layer(
    params: LSTMLayerParams | Mapping[str, Array],
    x: Array,
    state: LSTMState,
    seq_lengths: Array | None = None,
    reverse: bool = False,
    *,
    dtype: Any = None,
    unroll: int | None = None,
    remat: bool | int = False,
    time_major: bool = False,
) -> tuple[Array, LSTMState]:
    """Runs one LSTM layer in one direction over a whole sequence.

    Args:
        params: ``LSTMLayerParams`` or a mapping with ``kernel_ih`` ``(features, 4*hidden)``,
            ``kernel_hh`` ``(hidden, 4*hidden)`` and ``bias`` ``(4*hidden,)``; with a
            projection (PyTorch's ``proj_size``) also ``kernel_hr`` ``(hidden, proj_size)``,
            and ``kernel_hh`` is ``(proj_size, 4*hidden)``.
        x: inputs, ``(batch, time, features)``.
        state: initial ``LSTMState`` with ``h`` and ``c`` of shape ``(batch, hidden)`` (``h``
            ``(batch, proj_size)`` with a projection).
        seq_lengths: optional ``(batch,)`` integers; row ``b`` is valid for its first
            ``seq_lengths[b]`` steps (right padding). Padded steps leave the state unchanged and
            output zeros.
        reverse: run from each row's last valid step back to its first.
        dtype: dtype of the matmul inputs (e.g. ``jnp.bfloat16``). The gates, the state and the
            accumulation stay in at least float32. ``None``: the promoted dtype of ``x`` and
            the params.
        unroll: scan unroll factor; ``None`` means 1 (no unrolling: see ``scan.DEFAULT_UNROLL``).
        remat: trade compute for memory on long sequences: ``True`` keeps the activations of
            only one chunk of ``ceil(sqrt(time))`` steps at a time (an int sets the chunk
            length) and recomputes the rest in the backward pass, so activation memory grows
            about as ``sqrt(time)`` instead of ``time``. Same numbers either way.
        time_major: ``x`` and the outputs are ``(time, batch, ...)``, the layout the scan
            works in (a stack of layers stays time-major between layers: no transposes).

    Returns:
        ``(outputs, final_state)``: outputs ``(batch, time, hidden)`` (``proj_size`` features
        with a projection) in ``dtype`` (zeros at
        padded steps, in input order also when ``reverse``), and the state after each row's
        last valid step (after its first step when ``reverse``).

    Example:
        >>> import jax, jax.numpy as jnp
        >>> p = {"kernel_ih": jnp.zeros((3, 8)), "kernel_hh": jnp.zeros((2, 8)),
        ...      "bias": jnp.zeros(8)}
        >>> s = LSTMState(jnp.zeros((4, 2)), jnp.zeros((4, 2)))
        >>> y, s = lstm_layer(p, jnp.ones((4, 5, 3)), s)
        >>> y.shape
        (4, 5, 2)
        >>> p["kernel_hr"], p["kernel_hh"] = jnp.zeros((2, 1)), jnp.zeros((1, 8))  # LSTMP
        >>> y, s = lstm_layer(p, jnp.ones((4, 5, 3)), LSTMState(jnp.zeros((4, 1)), s.c))
        >>> y.shape, s.h.shape, s.c.shape
        ((4, 5, 1), (4, 1), (4, 2))
    """
    p = _as_layer_params(params)
    x = jnp.asarray(x)
    layout = "(time, batch, features)" if time_major else "(batch, time, features)"
    if x.ndim != 3:
        raise ValueError(f"x must be {layout}; got shape {x.shape}")
    x_tm = x if time_major else jnp.swapaxes(x, 0, 1)  # (time, batch, features)
    time, batch, features = x_tm.shape
    if p.kernel_hh.ndim != 2:
        raise ValueError(f"kernel_hh must be (hidden, 4*hidden); got shape {p.kernel_hh.shape}")
    if not isinstance(state, (tuple, list)) or len(state) != 2:
        raise TypeError(f"state must be an LSTMState(h, c); got {type(state).__name__}")
    state = LSTMState(*state)
    hidden = h_size = p.kernel_hh.shape[0]
    h_name = "hidden"
    if p.kernel_hr is not None:
        if p.kernel_hr.ndim != 2 or min(p.kernel_hr.shape) < 1:
            raise ValueError(
                f"kernel_hr must be (hidden, proj_size) with both >= 1; got {p.kernel_hr.shape}"
            )
        hidden, h_size = p.kernel_hr.shape
        h_name = "proj_size"
        if p.kernel_hh.shape != (h_size, 4 * hidden) or p.bias.shape != (4 * hidden,):
            raise ValueError(
                f"with kernel_hr (hidden, proj_size) = {p.kernel_hr.shape}, kernel_hh must be "
                f"(proj_size, 4*hidden) = {(h_size, 4 * hidden)} and bias (4*hidden,) = "
                f"({4 * hidden},); got {p.kernel_hh.shape} and {p.bias.shape}"
            )
    if p.kernel_ih.shape != (features, 4 * hidden):
        raise ValueError(
            f"kernel_ih must be (features, 4*hidden) = ({features}, {4 * hidden}) for x with "
            f"{features} features; got {p.kernel_ih.shape}"
        )
    if p.kernel_hr is None and (
        p.kernel_hh.shape != (hidden, 4 * hidden) or p.bias.shape != (4 * hidden,)
    ):
        raise ValueError(
            f"kernel_hh must be (hidden, 4*hidden) and bias (4*hidden,); got "
            f"{p.kernel_hh.shape} and {p.bias.shape}"
        )
    for name, a, size, size_name in (
        ("h", state.h, h_size, h_name),
        ("c", state.c, hidden, "hidden"),
    ):
        if np.shape(a) != (batch, size):
            raise ValueError(
                f"state.{name} must be (batch, {size_name}) = ({batch}, {size}); got {np.shape(a)}"
            )
    if seq_lengths is not None:
        seq_lengths = check_seq_lengths(seq_lengths, batch, time)

    if dtype is None:
        dtype = jnp.result_type(x, *(a for a in p if a is not None))
    acc_dtype = jnp.promote_types(dtype, jnp.float32)

    if reverse:
        x_tm = reverse_padded(x_tm, seq_lengths, time_axis=0)

    h0 = state.h.astype(acc_dtype)
    c0 = state.c.astype(acc_dtype)
    chunk = _remat_chunk(remat, time)
    # Few input features: project inside the loop (see the note above ``scan.forward_scan``).
    fused = 4 * features <= hidden
    if chunk is None:
        mask = _time_mask(seq_lengths, batch, time, time, acc_dtype)
        ys, h, c = _run(p, x_tm, h0, c0, mask, fused, dtype, acc_dtype, unroll)
    else:
        ys, h, c = _chunked_recurrence(
            p, x_tm, h0, c0, seq_lengths, chunk, fused, dtype, acc_dtype, unroll
        )
    if reverse:
        ys = reverse_padded(ys, seq_lengths, time_axis=0)
    outputs = ys if time_major else jnp.swapaxes(ys, 0, 1)
    return outputs.astype(dtype), LSTMState(h.astype(state.h.dtype), c.astype(state.c.dtype))
