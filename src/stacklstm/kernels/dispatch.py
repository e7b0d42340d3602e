"""Which implementation runs, and why: one place for the CPU kernel and the cuDNN path.

``lstm_layer`` asks :func:`stacklstm.kernels.native.wanted` for each layer (the compiled CPU
kernel, float32 on the CPU). ``StackedLSTM`` (linen and NNX) asks :func:`stack_path` once per
call whether the whole stack goes through cuDNN in one call (float32 on a CUDA GPU). Both
follow ``kernels.use(...)`` / ``STACKLSTM_KERNEL``: ``"xla"`` turns every fast path off.
"""

from __future__ import annotations

from typing import Any

import jax.numpy as jnp

from . import cudnn, native


def stack_path(
    *, dtype: Any, param_dtype: Any, x_dtype: Any, remat: bool | int, proj_size: int,
    dropout_in_training: bool,
) -> str:  # fmt: skip
    """``"cudnn"`` when a ``StackedLSTM`` call should run as one cuDNN call, else ``"layers"``
    (layer by layer through ``lstm_layer``, which picks its own path)."""
    choice, _ = native._choice()
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
    return "cudnn" if reason is None else "layers"


def info() -> native.KernelInfo:
    """Which path the LSTM takes for float32 here, and why (see ``native.KernelInfo``).

    ``path`` is ``"native"`` (the compiled CPU kernel), ``"cudnn"`` (on a CUDA GPU: each
    ``StackedLSTM`` call as one cuDNN call; bare ``lstm_layer`` calls and the cases cuDNN
    declines run the scan) or ``"xla"`` (the pure-JAX scan).

    Example:
        >>> from stacklstm import kernels
        >>> kernels.info().path in ("native", "cudnn", "xla")
        True
    """
    base = native.info()
    if base.choice == "xla" or cudnn.platform() != "cuda":
        return base
    declines = "; ".join(f"{k}: {v}" for k, v in cudnn.DECLINES.items() if k != "platform")
    reason = (
        "float32 on a CUDA GPU: each StackedLSTM call is one cuDNN call "
        f"(jax.experimental.rnn.lstm); it steps aside for {declines}"
    )
    return base._replace(path="cudnn", reason=reason)
