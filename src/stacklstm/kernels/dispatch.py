"""Which implementation runs, and why: one place for the CPU kernel and the cuDNN path.

``lstm_layer`` asks :func:`stacklstm.kernels.native.wanted` for each layer (the compiled CPU
kernel, float32 on the CPU). ``StackedLSTM`` (linen and NNX) asks :func:`stack_path` once per
call whether the whole stack goes through cuDNN in one call (float32 on a CUDA GPU, once the
path has passed its self-check, :func:`stacklstm.kernels.cudnn.self_check`). Both follow
``kernels.use(...)`` / ``STACKLSTM_KERNEL``: ``"xla"`` turns every fast path off; ``"cudnn"``
insists on the one cuDNN call for every ``StackedLSTM`` call and raises where it cannot run
(bare ``lstm_layer`` calls then pick their path as under ``"auto"``).
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from . import cudnn, native

# Every choice: the CPU kernel's, and "cudnn".
CHOICES = native.CHOICES if "cudnn" in native.CHOICES else (*native.CHOICES, "cudnn")


def _insisted(source: str, why_not: str) -> RuntimeError:
    return RuntimeError(
        f"{source} asks for StackedLSTM's one cuDNN call, but it cannot run: {why_not}. Use "
        "'auto' to fall back to the pure-JAX path where it cannot."
    )


def stack_path(
    *,
    dtype: Any,
    param_dtype: Any,
    x_dtype: Any,
    remat: bool | int,
    proj_size: int,
    dropout_in_training: bool,
) -> str:
    """``"cudnn"`` when a ``StackedLSTM`` call should run as one cuDNN call, else ``"layers"``
    (layer by layer through ``lstm_layer``, which picks its own path).

    The first time the cuDNN path would be taken in a process, it runs its self-check
    (eagerly, outside any trace); after a failed check it steps aside with one warning.

    Raises:
        RuntimeError: ``kernels.use("cudnn")`` (or ``STACKLSTM_KERNEL=cudnn``) asks for the
            cuDNN path where it cannot run: not a CUDA GPU, a case it declines, or a failed
            self-check.
    """
    choice, source = native._choice()
    if choice == "xla":
        return "layers"
    compute = jnp.result_type(x_dtype, param_dtype) if dtype is None else jnp.dtype(dtype)
    float32 = all(jnp.dtype(d) == jnp.float32 for d in (compute, param_dtype, x_dtype))
    reason = cudnn.why_not(
        platform=cudnn.platform(),
        dtype=jnp.float32 if float32 else compute,
        remat=remat,
        proj_size=proj_size,
        dropout_in_training=dropout_in_training,
    )
    if reason is None:
        checked = cudnn.self_check()
        if checked.ok:
            return "cudnn"
        if choice == "cudnn":
            raise _insisted(source, checked.reason)
        cudnn.warn_step_aside(checked.reason)
        return "layers"
    if choice == "cudnn":
        raise _insisted(source, reason)
    return "layers"


def info() -> native.KernelInfo:
    """Which path the LSTM takes for float32 here, and why (see ``native.KernelInfo``).

    ``path`` is ``"native"`` (the compiled CPU kernel), ``"cudnn"`` (on a CUDA GPU: each
    ``StackedLSTM`` call as one cuDNN call; bare ``lstm_layer`` calls and the cases cuDNN
    declines run the scan) or ``"xla"`` (the pure-JAX scan). On a CUDA GPU this runs the cuDNN
    path's self-check if it has not run yet, and ``reason`` gives its verdict; after a failed
    check ``path`` is that of the layer-by-layer path (``"xla"`` on a GPU). Does not raise for
    ``"cudnn"`` where it cannot run (``reason`` says so; tracing a ``StackedLSTM`` would
    raise).

    Example:
        >>> from stacklstm import kernels
        >>> kernels.info().path in ("native", "cudnn", "xla")
        True
    """
    base = native.recurrence_info()
    if base.choice == "xla":
        return base
    insists = f" (tracing a StackedLSTM raises: {base.source} insists on it)"
    if cudnn.platform() != "cuda":
        if base.choice == "cudnn":
            return base._replace(
                reason=f"{base.reason}; the cuDNN path cannot run: "
                f"{cudnn.DECLINES['platform']}{insists}"
            )
        return base
    checked = cudnn.self_check()
    if not checked.ok:  # path: what runs layer by layer (the pure-JAX scan on a GPU)
        reason = (
            f"float32 on a CUDA GPU, but the cuDNN path is not used, {checked.reason}; "
            "StackedLSTM runs layer by layer instead"
        )
        if base.choice == "cudnn":
            reason += insists
        return base._replace(reason=reason)
    declines = "; ".join(f"{k}: {v}" for k, v in cudnn.DECLINES.items() if k != "platform")
    reason = (
        "float32 on a CUDA GPU: each StackedLSTM call is one cuDNN call "
        f"(jax.experimental.rnn.lstm), and {checked.reason}; it steps aside for {declines}"
    )
    return base._replace(path="cudnn", reason=reason)
