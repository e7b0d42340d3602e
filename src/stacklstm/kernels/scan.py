"""The pure-JAX recurrence of one LSTM layer and direction, with its hand-written VJP.

The math both paths of :func:`stacklstm.kernels.lstm.lstm_layer` share: the portable path runs
:func:`recurrence` itself, and the compiled CPU kernel (``native.py``) takes its derivatives of
any order from :func:`forward_scan` and :func:`recurrence_backward`. Nothing here chooses a
path or checks a shape: ``lstm.py`` does both before it calls in.

Everything is time-major: ``x_in`` ``(time, batch, ...)``, states ``(batch, hidden)``, ``mask``
``(time, batch, 1)`` with 1.0 at valid steps or a scalar placeholder for "all valid".

Speed notes (why the code looks the way it does):
- the input projection ``x @ kernel_ih`` for all steps is one matmul outside the scan; only
  ``h @ kernel_hh`` runs inside it;
- the scan runs time-major, so each step reads one contiguous ``(batch, 4*hidden)`` slab;
- the gate layout is one ``(hidden, 4*hidden)`` matrix, so each step is a single matmul.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp

Array = jax.Array


def matmul(spec: str, a: Array, b: Array, dtype, acc_dtype) -> Array:
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


def project(x_tm: Array, kernel_ih: Array, dtype, acc_dtype) -> Array:
    """The input projection of all steps as ONE 2-D matmul: ``(time, batch, features) ->
    (time, batch, 4*hidden)``; the bias is added inside the scan (one pass less over this
    array). A plain ``(time*batch, features)`` matmul keeps
    the result in the layout the scan reads; a 3-D einsum that also transposes made XLA write
    it transposed and copy it again (about as slow as the whole recurrence on long sequences).
    """
    time, batch, features = x_tm.shape
    xw = matmul("nf,fg->ng", x_tm.reshape(time * batch, features), kernel_ih, dtype, acc_dtype)
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


def forward_scan(
    x_in,
    kernel_ih,
    kernel_hh,
    bias,
    h0,
    c0,
    mask,
    fused,
    dtype,
    acc_dtype,
    unroll,
    save,
    kernel_hr=None,
):
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
            gates = matmul("bk,kg->bg", jnp.concatenate([x_t, h], -1), kernel, dtype, acc_dtype)
        else:
            gates = x_t + matmul("bh,hg->bg", h, kernel, dtype, acc_dtype)
        acts = jnp.tanh((gates + bias) * scale) * scale + shift  # sigmoid(i, f, o), tanh(g)
        i, f, g, o = jnp.split(acts, 4, axis=-1)
        c_new = f * c + i * g
        h_new = o * jnp.tanh(c_new)
        if kernel_hr is not None:  # LSTMP: (batch, hidden) -> (batch, proj)
            h_new = matmul("bh,hp->bp", h_new, kernel_hr, dtype, acc_dtype)
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
def recurrence(x_in, kernel_ih, kernel_hh, bias, h0, c0, mask, fused, dtype, acc_dtype, unroll):
    """``-> (hs (time, batch, hidden), h, c)``; ``x_in`` as in the note above."""
    args = (x_in, kernel_ih, kernel_hh, bias, h0, c0, mask, fused, dtype, acc_dtype, unroll)
    hs, h, c, _ = forward_scan(*args, save=False)
    return hs, h, c


def _recurrence_fwd(
    x_in, kernel_ih, kernel_hh, bias, h0, c0, mask, fused, dtype, acc_dtype, unroll
):
    args = (x_in, kernel_ih, kernel_hh, bias, h0, c0, mask, fused, dtype, acc_dtype, unroll)
    hs, h, c, saved = forward_scan(*args, save=True)
    return (hs, h, c), (saved, x_in if fused else None, kernel_ih, kernel_hh, bias, h0, c0, mask)


def recurrence_backward(fused, dtype, acc_dtype, unroll, residuals, cotangents):
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
        dh_prev = matmul("bg,hg->bh", d_gates, kernel_hh, dtype, acc_dtype)
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


recurrence.defvjp(_recurrence_fwd, recurrence_backward)
