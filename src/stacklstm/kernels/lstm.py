"""The LSTM over a whole sequence, in JAX (no Flax).

On the CPU in float32 the recurrence runs in the package's compiled kernel (``native.py``,
``csrc/lstm_cpu.cc``); everywhere else (other backends, bfloat16, float64, the kernel not
built, or ``STACKLSTM_KERNEL=xla``) it is the pure-JAX scan below. Both compute the same
numbers and are held to the same tests.

One layer, one direction:

    gates_t = x_t @ kernel_ih + h_{t-1} @ kernel_hh + bias          # (batch, 4*hidden)
    i, f, g, o = split(gates_t)                                      # PyTorch's gate order
    c_t = sigmoid(f) * c_{t-1} + sigmoid(i) * tanh(g)
    h_t = sigmoid(o) * tanh(c_t)
    h_t = h_t @ kernel_hr                                            # only with a projection

With a projection (LSTMP, PyTorch's ``proj_size``) ``h`` and the outputs have ``proj_size``
features, ``c`` keeps ``hidden`` and ``kernel_hh`` is ``(proj_size, 4*hidden)``. That case runs
the scan below differentiated by JAX's autodiff (neither the CPU kernel nor the hand-written
VJP has the projection); without one nothing changes.

Speed notes (why the code looks the way it does):
- the input projection ``x @ kernel_ih`` for all steps is one matmul outside the scan; only
  ``h @ kernel_hh`` runs inside it;
- the scan runs time-major, so each step reads one contiguous ``(batch, 4*hidden)`` slab;
- the gate layout is one ``(hidden, 4*hidden)`` matrix, so each step is a single matmul.
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from stacklstm.kernels import native

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


def _matmul(spec: str, a: Array, b: Array, dtype, acc_dtype) -> Array:
    """``einsum`` with inputs rounded to ``dtype`` and accumulation in ``acc_dtype``.

    XLA's CPU backend has no bf16 x bf16 -> f32 dot, so there the inputs are rounded to
    ``dtype`` and multiplied in ``acc_dtype``: the same numbers, a portable program.
    """
    if dtype == acc_dtype:
        return jnp.einsum(spec, a.astype(dtype), b.astype(dtype))
    if jax.default_backend() == "cpu":
        a = a.astype(dtype).astype(acc_dtype)
        b = b.astype(dtype).astype(acc_dtype)
        return jnp.einsum(spec, a, b)
    return jnp.einsum(spec, a.astype(dtype), b.astype(dtype), preferred_element_type=acc_dtype)


def _project(x_tm: Array, p: LSTMLayerParams, dtype, acc_dtype) -> Array:
    """The input projection of all steps as ONE 2-D matmul: ``(time, batch, features) ->
    (time, batch, 4*hidden)``; the bias is added inside the scan (one pass less over this
    array). A plain ``(time*batch, features)`` matmul keeps
    the result in the layout the scan reads; a 3-D einsum that also transposes made XLA write
    it transposed and copy it again (about as slow as the whole recurrence on long sequences).
    """
    time, batch, features = x_tm.shape
    xw = _matmul("nf,fg->ng", x_tm.reshape(time * batch, features), p.kernel_ih, dtype, acc_dtype)
    return xw.reshape(time, batch, -1)


# Unrolling would let XLA fuse across step boundaries, but each unrolled step is compiled again
# for the forward and the backward pass of every layer and direction (a full unroll of 16 steps
# costs ~8x the compile time), and on CPU it measured no faster: 35.8, 37.4 and 36.4 us/step at
# unroll 1, 2, 4 (batch 16, hidden 128). So by default: no unrolling.
DEFAULT_UNROLL = 1


# The recurrence has a hand-written VJP. Autodiff of the scan would accumulate the weight
# gradients with small matmuls per step inside the reverse loop; here the reverse scan carries
# only (dh, dc) and emits the gate gradients, and the weight gradients are ONE matmul each over
# all steps afterwards. The saved activations are the gates after their nonlinearity, the cell
# states and the carried h.
#
# Two ways in for the inputs (``fused``, chosen by ``lstm_layer``):
# - fused=False: ``x_in`` is the projection ``x @ kernel_ih`` of all steps, ``(time, batch,
#   4*hidden)``, done as one big matmul outside; a step adds ``h @ kernel_hh``.
# - fused=True (few input features): ``x_in`` is ``x`` itself, ``(time, batch, features)``, and a
#   step does ``[x_t, h] @ [kernel_ih; kernel_hh]``, one matmul only a little wider than
#   ``h @ kernel_hh``. This avoids writing and re-reading a ``(time, batch, 4*hidden)`` array,
#   which costs more than the recurrence saves on long sequences with few features.


def _gate_constants(hidden: int, acc_dtype):
    # All four gate nonlinearities as ONE tanh over (batch, 4*hidden), using
    # sigmoid(z) = 0.5 * tanh(0.5 * z) + 0.5: on CPU this halves the time of a step against
    # three sigmoids and a tanh on the four slices (XLA emits one vectorised loop).
    half, one = jnp.full((hidden,), 0.5, acc_dtype), jnp.ones((hidden,), acc_dtype)
    scale = jnp.concatenate([half, half, one, half])  # i, f, g, o
    shift = jnp.concatenate([half, half, 0 * one, half])
    return scale, shift


def _forward_scan(x_in, kernel_ih, kernel_hh, bias, h0, c0, mask, fused, dtype, acc_dtype,
                  unroll, save, kernel_hr=None):  # fmt: skip
    """The forward recurrence over time-major ``x_in`` (see the note above); ``kernel_hr``
    ``(hidden, proj)`` projects each new ``h`` (then ``save`` must be False: the hand-written
    VJP has no projection)."""
    masked = mask.ndim > 0
    scale, shift = _gate_constants(kernel_hh.shape[1] // 4, acc_dtype)
    bias = bias.astype(acc_dtype)
    kernel = jnp.concatenate([kernel_ih, kernel_hh], axis=0) if fused else kernel_hh

    def step(carry, inputs):
        h, c = carry
        x_t, m_t = inputs if masked else (inputs, None)
        if fused:
            gates = _matmul("bk,kg->bg", jnp.concatenate([x_t, h], -1), kernel, dtype, acc_dtype)
        else:
            gates = x_t + _matmul("bh,hg->bg", h, kernel, dtype, acc_dtype)
        acts = jnp.tanh((gates + bias) * scale) * scale + shift  # sigmoid(i, f, o), tanh(g)
        i, f, g, o = jnp.split(acts, 4, axis=-1)
        c_new = f * c + i * g
        h_new = o * jnp.tanh(c_new)
        if kernel_hr is not None:  # LSTMP: (batch, hidden) -> (batch, proj)
            h_new = _matmul("bh,hp->bp", h_new, kernel_hr, dtype, acc_dtype)
        if masked:  # padded steps keep the state and output zeros
            keep = m_t > 0
            h_out = jnp.where(keep, h_new, 0)
            h_new, c_new = jnp.where(keep, h_new, h), jnp.where(keep, c_new, c)
        else:
            h_out = h_new
        saved = (acts, c_new, h_new) if save else None
        return (h_new, c_new), (h_out, saved)

    xs = (x_in, mask) if masked else x_in
    (h, c), (hs, saved) = jax.lax.scan(step, (h0, c0), xs, unroll=unroll)
    return hs, h, c, saved


@functools.partial(jax.custom_vjp, nondiff_argnums=(7, 8, 9, 10))
def _recurrence(x_in, kernel_ih, kernel_hh, bias, h0, c0, mask, fused, dtype, acc_dtype, unroll):
    """``-> (hs (time, batch, hidden), h, c)``; ``x_in`` as in the note above."""
    args = (x_in, kernel_ih, kernel_hh, bias, h0, c0, mask, fused, dtype, acc_dtype, unroll)
    hs, h, c, _ = _forward_scan(*args, save=False)
    return hs, h, c


def _recurrence_fwd(x_in, kernel_ih, kernel_hh, bias, h0, c0, mask, fused, dtype, acc_dtype,
                    unroll):  # fmt: skip
    args = (x_in, kernel_ih, kernel_hh, bias, h0, c0, mask, fused, dtype, acc_dtype, unroll)
    hs, h, c, saved = _forward_scan(*args, save=True)
    return (hs, h, c), (saved, x_in if fused else None, kernel_ih, kernel_hh, bias, h0, c0, mask)


def _recurrence_bwd(fused, dtype, acc_dtype, unroll, residuals, cotangents):
    (acts, cs, hs_carried), x_in, kernel_ih, kernel_hh, bias, h0, c0, mask = residuals
    d_hs, d_h, d_c = cotangents
    masked = mask.ndim > 0
    time, batch, hidden = cs.shape
    c_prev = jnp.concatenate([c0[None], cs[:-1]])  # (time, batch, hidden)
    h_prev = jnp.concatenate([h0[None], hs_carried[:-1]])

    def step(carry, inputs):
        dh, dc = carry
        dy_t, act_t, c_t, c_prev_t, m_t = inputs
        i, f, g, o = jnp.split(act_t, 4, axis=-1)
        tanh_c = jnp.tanh(c_t)
        dh_t = dh + dy_t
        dc_t = dc + dh_t * o * (1 - tanh_c * tanh_c)
        d_gates = jnp.concatenate(
            [
                dc_t * g * i * (1 - i),
                dc_t * c_prev_t * f * (1 - f),
                dc_t * i * (1 - g * g),
                dh_t * tanh_c * o * (1 - o),
            ],
            axis=-1,
        )  # (batch, 4*hidden), w.r.t. the pre-activations
        dh_prev = _matmul("bg,hg->bh", d_gates, kernel_hh, dtype, acc_dtype)
        dc_prev = dc_t * f
        if masked:  # a padded step passed the state through unchanged
            keep = m_t > 0
            d_gates = jnp.where(keep, d_gates, 0)
            dh_prev, dc_prev = jnp.where(keep, dh_prev, dh), jnp.where(keep, dc_prev, dc)
        return (dh_prev, dc_prev), d_gates

    m = mask if masked else jnp.zeros((time,), acc_dtype)
    (dh0, dc0), d_gates = jax.lax.scan(
        step, (d_h, d_c), (d_hs, acts, cs, c_prev, m), reverse=True, unroll=unroll
    )
    # The weight gradients as one matmul each over all (time * batch) rows.
    d_flat = d_gates.reshape(time * batch, 4 * hidden)
    d_kernel_hh = (h_prev.reshape(time * batch, hidden).T @ d_flat).astype(kernel_hh.dtype)
    d_bias = jnp.sum(d_flat, axis=0).astype(bias.dtype)
    if fused:
        x_flat = x_in.reshape(time * batch, -1)
        d_kernel_ih = (x_flat.T.astype(acc_dtype) @ d_flat).astype(kernel_ih.dtype)
        d_x_in = (d_flat @ kernel_ih.T.astype(acc_dtype)).reshape(x_in.shape).astype(x_in.dtype)
    else:  # x_in was the projection: its gradient is the gate gradient
        d_kernel_ih = jnp.zeros_like(kernel_ih)
        d_x_in = d_gates.astype(acc_dtype)
    return d_x_in, d_kernel_ih, d_kernel_hh, d_bias, dh0, dc0, jnp.zeros_like(mask)


_recurrence.defvjp(_recurrence_fwd, _recurrence_bwd)


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
        x_in = x_tm if fused else _project(x_tm, p, dtype, acc_dtype)
        hs, h, c, _ = _forward_scan(
            x_in, p.kernel_ih, p.kernel_hh, p.bias, h0, c0, mask, fused, dtype, acc_dtype,
            unroll or DEFAULT_UNROLL, save=False, kernel_hr=p.kernel_hr,
        )  # fmt: skip
        return hs, h, c
    if native.wanted(dtype, acc_dtype):
        f32 = jnp.float32
        return native.recurrence(
            x_tm.astype(f32), p.kernel_ih.astype(f32), p.kernel_hh.astype(f32),
            p.bias.astype(f32), h0, c0, mask,
        )  # fmt: skip
    x_in = x_tm if fused else _project(x_tm, p, dtype, acc_dtype)
    return _recurrence(
        x_in, p.kernel_ih, p.kernel_hh, p.bias, h0, c0, mask, fused, dtype, acc_dtype,
        unroll or DEFAULT_UNROLL,
    )  # fmt: skip


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
    params,
    x: Array,
    state: LSTMState,
    seq_lengths: Array | None = None,
    reverse: bool = False,
    *,
    dtype=None,
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
        unroll: scan unroll factor; ``None`` means 1 (no unrolling: see ``DEFAULT_UNROLL``).
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
        if jnp.shape(a) != (batch, size):
            raise ValueError(
                f"state.{name} must be (batch, {size_name}) = ({batch}, {size}); got {jnp.shape(a)}"
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
    # Few input features: project inside the loop (see the note above _forward_scan).
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
