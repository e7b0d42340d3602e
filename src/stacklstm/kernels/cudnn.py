"""The whole stack in one cuDNN call, through ``jax.experimental.rnn.lstm``, on a GPU.

The params stay the ``StackedLSTM`` tree; they are packed into cuDNN's flat weight inside the
call (:func:`pack_weights`; that layout, and where this path applies, :func:`why_not`, are
in :mod:`stacklstm.kernels.cudnn_layout`).

Under the fast-path rule, the call keeps the portable path's JAX semantics: its derivatives of
any order come from a pure-JAX equivalent (so grad of grad works; first derivatives still run
cuDNN's backward), ``vmap`` runs one call per element, a batch-sharded mesh runs one call per
device on its own rows (``custom_partitioning``, as the CPU kernel does), and ``jax.export``
names ``kernels.use("xla")``. The backward recomputes cuDNN's forward for its reserve space,
so that every saved array splits by batch rows.

What the call gives: outputs ``(batch, time, D*hidden)`` and the final ``h``/``c`` of every
pseudo-layer, each row's at its own last valid step (``seq_lengths``), the reverse direction
starting at each row's last valid step: the semantics of the layer-by-layer path, which the
tests check through ``jax.experimental.rnn.lstm_ref`` (the same packed weights on the CPU).

Before its first use in a process the path checks itself (:func:`self_check`): one tiny
forward and backward (two layers, both directions, padded rows) against the pure-JAX
layer-by-layer path, run eagerly, outside any trace. Where they differ beyond float32 rounding
or the call fails, ``StackedLSTM`` steps aside to the pure-JAX path with one warning, and
``kernels.info()`` says why; ``kernels.use("cudnn")`` raises instead.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .choice import use
from .cudnn_layout import DECLINES as DECLINES
from .cudnn_layout import layer_names
from .cudnn_layout import pack_weights as pack_weights
from .cudnn_layout import platform as platform
from .cudnn_layout import unpack_weights as unpack_weights
from .cudnn_layout import why_not as why_not
from .ffi import PerShard, export_marker, portable_derivatives
from .lstm import LSTMState, lstm_layer

Array = jax.Array


class _Shape(NamedTuple):
    input_size: int
    hidden_size: int
    num_layers: int
    bidirectional: bool
    precision: Any


def _reference_forward(shape: _Shape, x, h0, c0, w, lengths):
    """cuDNN's computation in pure JAX (``jax.experimental.rnn.lstm_ref``)."""
    return reference_lstm(
        x,
        h0,
        c0,
        w,
        lengths,
        shape.input_size,
        shape.hidden_size,
        shape.num_layers,
        0.0,
        shape.bidirectional,
    )


def _reference_backward(shape: _Shape, x, h0, c0, w, lengths, dy, dhn, dcn):
    _, pullback = jax.vjp(lambda *a: _reference_forward(shape, *a, lengths), x, h0, c0, w)
    return pullback((dy, dhn, dcn))


def _cudnn_forward(shape: _Shape, x, h0, c0, w, lengths):
    from jax.experimental import rnn

    args = (shape.input_size, shape.hidden_size, shape.num_layers, 0.0, shape.bidirectional)
    outputs, _ = rnn.lstm_fwd(x, h0, c0, w, lengths, *args, shape.precision)
    return outputs


def _cudnn_backward(shape: _Shape, x, h0, c0, w, lengths, dy, dhn, dcn):
    from jax.experimental import rnn

    args = (shape.input_size, shape.hidden_size, shape.num_layers, 0.0, shape.bidirectional)
    # cuDNN's forward again, for its reserve space (whose size does not split by rows)
    _, residuals = rnn.lstm_fwd(x, h0, c0, w, lengths, *args, shape.precision)
    dx, dh0, dc0, dw, _ = rnn.lstm_bwd(*args, shape.precision, residuals, (dy, dhn, dcn))
    return dx, dh0, dc0, dw


_IMPLEMENTATIONS = {
    "cudnn": (_cudnn_forward, _cudnn_backward),
    "reference": (_reference_forward, _reference_backward),  # cuDNN's semantics, any backend
}
_EXPORT_MESSAGE = (
    "stacklstm: this function runs the LSTM stack through cuDNN (jax.experimental.rnn's "
    "custom calls), which jax.export cannot serialise. Trace it on the portable path instead: "
    "`with stacklstm.kernels.use('xla'): jax.export.export(jax.jit(f))(...)` (or set "
    "STACKLSTM_KERNEL=xla); same numbers."
)
_marker = export_marker("stacklstm_cudnn_stack", _EXPORT_MESSAGE)

# Batch axes: x (batch, time, features) and y on 0, states (L*D, batch, hidden) on 1, the
# lengths on 0, the flat weight not at all (its gradient summed over the devices).
_FORWARD_AXES = (0, 1, 1, None, 0)


@functools.cache
def _stack_call(implementation: str, shape: _Shape):
    """``call(x, h0, c0, w, lengths) -> (y, h_n, c_n)`` with cuDNN's values and backward and
    the portable path's semantics (see the module's docstring)."""
    fast_forward, fast_backward = _IMPLEMENTATIONS[implementation]
    forward_per_shard = PerShard(
        functools.partial(fast_forward, shape), _FORWARD_AXES, (0, 1, 1), marker=_marker
    )
    backward_per_shard = PerShard(
        functools.partial(fast_backward, shape),
        (*_FORWARD_AXES, 0, 1, 1),
        (0, 1, 1, None),
        summed=(3,),
        marker=_marker,
    )

    @portable_derivatives(functools.partial(_reference_forward, shape))
    def forward(x, h0, c0, w, lengths):
        return forward_per_shard(x, h0, c0, w, lengths)

    @portable_derivatives(functools.partial(_reference_backward, shape))
    def backward(x, h0, c0, w, lengths, dy, dhn, dcn):
        return backward_per_shard(x, h0, c0, w, lengths, dy, dhn, dcn)

    @jax.custom_vjp
    def call(x, h0, c0, w, lengths):
        return tuple(forward(x, h0, c0, w, lengths))

    def call_fwd(x, h0, c0, w, lengths):
        return tuple(forward(x, h0, c0, w, lengths)), (x, h0, c0, w, lengths)

    def call_bwd(residuals, cotangents):
        dx, dh0, dc0, dw = backward(*residuals, *cotangents)
        lengths = residuals[-1]
        return dx, dh0, dc0, dw, jnp.zeros(lengths.shape, jax.dtypes.float0)

    call.defvjp(call_fwd, call_bwd)
    return call


def run_stack(
    params: Mapping[str, Mapping[str, Array]],
    x: Array,
    initial_state: Sequence[LSTMState],
    seq_lengths: Array | None,
    *,
    hidden_size: int,
    num_layers: int,
    bidirectional: bool,
    implementation: str = "cudnn",
) -> tuple[Array, tuple[LSTMState, ...]]:
    """The stack over ``x (batch, time, features)`` in one call.

    Args:
        params: The ``StackedLSTM`` tree.
        x: Batch-major float32 inputs.
        initial_state: ``num_layers * D`` ``LSTMState``s in PyTorch's order.
        seq_lengths: ``(batch,)`` valid lengths, or None for full rows.
        hidden_size, num_layers, bidirectional: The stack's shape.
        implementation: ``"cudnn"`` (``jax.experimental.rnn``'s cuDNN calls, a CUDA GPU), or
            ``"reference"``: the same computation in pure JAX (``lstm_ref``) behind the same
            wrappers, which is how the tests run all of this on the CPU.

    Returns:
        ``(outputs (batch, time, D*hidden), final_state)``, as ``StackedLSTM`` returns them:
        outputs zero at padded steps, each final state at the row's own last valid step.
    """
    batch, time, input_size = x.shape
    flat = pack_weights(params, input_size, hidden_size, num_layers, bidirectional)
    h0 = jnp.stack([s.h for s in initial_state])  # (L*D, batch, hidden)
    c0 = jnp.stack([s.c for s in initial_state])
    lengths = (
        jnp.full((batch,), time, jnp.int32)
        if seq_lengths is None
        else jnp.asarray(seq_lengths).astype(jnp.int32)
    )
    precision = jax.config.jax_default_matmul_precision  # cuDNN follows the same setting
    shape = _Shape(input_size, hidden_size, num_layers, bidirectional, precision)
    y, h_n, c_n = _stack_call(implementation, shape)(x, h0, c0, flat, lengths)
    if seq_lengths is not None:  # padded steps are zero, as on the layer-by-layer path
        valid = jnp.arange(time)[None, :, None] < lengths[:, None, None]
        y = jnp.where(valid, y, 0)
    return y, tuple(LSTMState(h_n[k], c_n[k]) for k in range(h_n.shape[0]))


def reference_lstm(
    x, h0, c0, flat, lengths, input_size, hidden_size, num_layers, dropout, bidirectional
):
    """``jax.experimental.rnn.lstm``'s signature on ``lstm_ref``: cuDNN's semantics on any
    backend, differentiable by autodiff."""
    from jax.experimental import rnn

    w_ih, w_hh, b_ih, b_hh = rnn.unpack_lstm_weights(
        flat, input_size, hidden_size, num_layers, bidirectional
    )
    return rnn.lstm_ref(
        x,
        h0,
        c0,
        w_ih,
        w_hh,
        b_ih,
        b_hh,
        lengths,
        input_size,
        hidden_size,
        num_layers,
        dropout,
        bidirectional,
    )


# ---------------------------------------------------------------------------------------------
# The self-check: one tiny call against the pure-JAX path before the first use.

# The case: two layers, both directions, rows padded with seq_lengths, a random initial state.
_CHECK_BATCH, _CHECK_TIME, _CHECK_FEATURES, _CHECK_HIDDEN, _CHECK_LAYERS = 3, 5, 3, 4, 2
_CHECK_LENGTHS = (5, 2, 4)
# The tolerances (absolute; the values and gradients of this case are at most about 6). The
# pure-JAX path in float32 differs from the float64 oracle (``reference.py``; the gradients
# against its central differences) on this case by at most 1.7e-7 in the outputs and final
# states and 8e-7 in the gradients (worst of 5 seeds), so two correct float32 computations
# differ by about twice that; these leave a factor of about 15 on top. A wrong layout, gate or
# padding rule is off by 1e-2 or more.
_CHECK_ATOL_VALUES = 5e-6
_CHECK_ATOL_GRADIENTS = 2.5e-5


class SelfCheck(NamedTuple):
    """The verdict of the cuDNN path's self-check (:func:`self_check`).

    Attributes:
        ok: the one-call path gave the pure-JAX path's outputs, final states and gradients.
        reason: what passed, or what failed and by how much.
    """

    ok: bool
    reason: str


def _check_case() -> tuple[dict, np.ndarray, list[LSTMState], np.ndarray, np.ndarray, list]:
    """``(params, x, initial_state, seq_lengths, d_outputs, d_final_state)`` of the self-check,
    float32 numpy, from a fixed seed."""
    rng = np.random.default_rng(0)
    hidden, gates = _CHECK_HIDDEN, 4 * _CHECK_HIDDEN
    names = layer_names(_CHECK_LAYERS, True)
    params = {}
    for k, name in enumerate(names):
        in_features = _CHECK_FEATURES if k < 2 else 2 * hidden
        params[name] = {
            "kernel_ih": rng.normal(0, 0.5, (in_features, gates)).astype(np.float32),
            "kernel_hh": rng.normal(0, 0.5, (hidden, gates)).astype(np.float32),
            "bias": rng.normal(0, 0.5, (gates,)).astype(np.float32),
        }

    def normal(*shape):
        return rng.normal(size=shape).astype(np.float32)

    batch, time = _CHECK_BATCH, _CHECK_TIME
    x = normal(batch, time, _CHECK_FEATURES)
    state = [LSTMState(normal(batch, hidden), normal(batch, hidden)) for _ in names]
    d_y = normal(batch, time, 2 * hidden)
    d_state = [LSTMState(normal(batch, hidden), normal(batch, hidden)) for _ in names]
    return params, x, state, np.asarray(_CHECK_LENGTHS, np.int32), d_y, d_state


def _layer_by_layer(params, x, initial_state, seq_lengths):
    """The stack through ``lstm_layer``, layer by layer (``StackedLSTM``'s other path)."""
    finals = []
    for layer in range(_CHECK_LAYERS):
        outs = []
        for reverse in (False, True):
            name = f"layer_{layer}" + ("_reverse" if reverse else "")
            out, final = lstm_layer(
                params[name], x, initial_state[len(finals)], seq_lengths, reverse
            )
            outs.append(out)
            finals.append(final)
        x = jnp.concatenate(outs, axis=-1)
    return x, tuple(finals)


def _in_a_thread_of_its_own(fn):
    """``fn()``, run in a new thread and waited for: outside any trace of the caller's and of
    its config contexts (a mesh, ``kernels.use``, x64, the default device), which JAX keeps per
    thread. (``jax.ensure_compile_time_eval`` would not do: inside the check's own ``jit`` it
    turns arrays made from constants into captured constants, which ``custom_partitioning``
    refuses.) Raises what ``fn`` raised."""
    outcome = {}

    def run():
        try:
            outcome["value"] = fn()
        except BaseException as e:  # handed to the caller
            outcome["error"] = e

    thread = threading.Thread(target=run, name="stacklstm-cudnn-self-check")
    thread.start()
    thread.join()
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def _check_differences(implementation: str) -> list[tuple[str, float, float]]:
    """``(what, max |difference|, tolerance)`` of every output, final state and gradient of the
    check's case: the one-call path against the pure-JAX path, both at full float32 precision
    (no TF32), run eagerly in a thread of their own (also when the first use is inside a
    trace)."""
    params, x, state, lengths, d_y, d_state = _check_case()

    def one_call(p, x, s):
        return run_stack(
            p,
            x,
            s,
            lengths,
            hidden_size=_CHECK_HIDDEN,
            num_layers=_CHECK_LAYERS,
            bidirectional=True,
            implementation=implementation,
        )

    def layers(p, x, s):
        return _layer_by_layer(p, x, s, lengths)

    def values_and_gradients(f):
        def run(p, x, s, d_y, d_s):
            (y, final), pullback = jax.vjp(f, p, x, s)
            return (y, final, *pullback((d_y, d_s)))  # y, final, d_params, d_x, d_state

        return jax.tree.map(np.asarray, jax.jit(run)(params, x, state, d_y, tuple(d_state)))

    def both():
        device = jax.local_devices()[0]  # this process's own, on the default backend
        with jax.default_device(device), jax.default_matmul_precision("highest"):
            got = values_and_gradients(one_call)
            with use("xla"):  # the pure-JAX scan, whatever the backend
                want = values_and_gradients(layers)
        return got, want

    got, want = _in_a_thread_of_its_own(both)

    names = layer_names(_CHECK_LAYERS, True)
    rows = [("the outputs", got[0], want[0], _CHECK_ATOL_VALUES)]
    for k, name in enumerate(names):
        for part in ("h", "c"):
            values = (getattr(got[1][k], part), getattr(want[1][k], part))
            rows.append((f"the final {part} of {name}", *values, _CHECK_ATOL_VALUES))
    for name in names:
        for key in ("kernel_ih", "kernel_hh", "bias"):
            values = (got[2][name][key], want[2][name][key])
            rows.append((f"the gradient of {name}/{key}", *values, _CHECK_ATOL_GRADIENTS))
    rows.append(("the gradient of x", got[3], want[3], _CHECK_ATOL_GRADIENTS))
    for k, name in enumerate(names):
        for part in ("h", "c"):
            values = (getattr(got[4][k], part), getattr(want[4][k], part))
            rows.append(
                (f"the gradient of the initial {part} of {name}", *values, _CHECK_ATOL_GRADIENTS)
            )
    return [(what, float(np.max(np.abs(a - b))), tol) for what, a, b, tol in rows]


_check_lock = threading.Lock()


def self_check(implementation: str = "cudnn") -> SelfCheck:
    """Whether the one-call path computes what the pure-JAX path does, here: one tiny forward
    and backward (two layers, both directions, padded rows; gradients of the inputs, the
    initial state and every weight) against the layer-by-layer scan, within float32 rounding.

    Runs once per process (the verdict is kept), eagerly, in a thread of its own: also when
    first asked inside a ``jit`` trace, nothing of it is traced into that function. Never
    raises: a call that fails is a failed check.
    """
    with _check_lock:  # one check, also when several threads trace at once
        return _self_check_once(implementation, _IMPLEMENTATIONS[implementation])


@functools.cache
def _self_check_once(implementation: str, functions: tuple) -> SelfCheck:
    """The verdict on ``functions``, the implementation's ``(forward, backward)``: one per
    process, and a stand-in put in their place (as the tests do) gets its own."""
    case = (
        f"{_CHECK_LAYERS} layers, both directions, padded rows, batch {_CHECK_BATCH}, "
        f"time {_CHECK_TIME}, hidden {_CHECK_HIDDEN}"
    )
    try:
        differences = _check_differences(implementation)
    except Exception as e:  # any failure: the path is not used, and the reason says why
        error = f"{type(e).__name__}: {str(e)[:300]}" if str(e) else type(e).__name__
        return SelfCheck(False, f"its self-check call failed: {error}")
    for what, difference, tolerance in differences:
        if not difference <= tolerance:  # NaN fails too
            return SelfCheck(
                False,
                f"its self-check failed on {what}: {difference:.3g} off the pure-JAX path "
                f"(tolerance {tolerance:g}; {case})",
            )
    worst = max(difference for _, difference, _ in differences)
    return SelfCheck(
        True,
        f"it passed its self-check against the pure-JAX path ({case}: forward and gradients "
        f"within {worst:.2g})",
    )


@functools.cache
def warn_step_aside(reason: str) -> None:
    """The one warning that ``StackedLSTM`` steps aside after a failed check (once per reason)."""
    warnings.warn(
        f"stacklstm: the cuDNN path is not used, {reason}; StackedLSTM runs layer by layer on "
        "the pure-JAX path instead (same numbers, slower on the GPU)",
        RuntimeWarning,
        stacklevel=3,
    )
