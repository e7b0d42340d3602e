"""Which LSTM path is asked for: ``use(...)`` in force, else ``STACKLSTM_KERNEL``, else auto.

:func:`use` is a context manager that is part of JAX's jit cache keys (a function traced once
under each choice gets one program for each); see :mod:`stacklstm.kernels.native` for what
each choice does.

Example:
    >>> with use("xla"):
    ...     current()[0]
    'xla'
"""

from __future__ import annotations

import contextlib
import os
import threading

import jax

CHOICES = ("auto", "native", "cudnn", "xla")


class _ClearingContext:
    """Stand-in for ``jax.make_user_context`` on JAX versions without it: a thread's own value,
    and JAX's caches cleared on each change (so functions are traced again)."""

    def __init__(self):
        self._local = threading.local()

    @property
    def value(self):
        return getattr(self._local, "value", None)

    @contextlib.contextmanager
    def __call__(self, value):
        previous = self.value
        self._local.value = value
        jax.clear_caches()
        try:
            yield
        finally:
            self._local.value = previous
            jax.clear_caches()


# The choice made with use(); None defers to STACKLSTM_KERNEL. Part of JAX's jit cache keys.
_choice_context = (
    jax.make_user_context(None) if hasattr(jax, "make_user_context") else _ClearingContext()
)


def use(kernel: str):
    """Context manager: trace the LSTM with the given path (``stacklstm.kernels.use``).

    Args:
        kernel: ``"xla"`` (the portable pure-JAX path, e.g. for ``jax.export``), ``"native"``
            (the compiled CPU kernel; raises where it cannot run), ``"cudnn"`` (each
            ``StackedLSTM`` call as one cuDNN call, see ``cudnn.py``; raises where it cannot
            run or failed its self-check; ``auto`` for the recurrence itself) or ``"auto"``.

    Raises:
        ValueError: ``kernel`` is none of these.

    Example:
        >>> import jax, jax.numpy as jnp
        >>> from stacklstm import kernels
        >>> from stacklstm.kernels import LSTMState, lstm_layer
        >>> p = {"kernel_ih": jnp.zeros((3, 8)), "kernel_hh": jnp.zeros((2, 8)),
        ...      "bias": jnp.zeros(8)}
        >>> s = LSTMState(jnp.zeros((4, 2)), jnp.zeros((4, 2)))
        >>> f = jax.jit(lambda x: lstm_layer(p, x, s)[0])
        >>> with kernels.use("xla"):
        ...     exported = jax.export.export(f)(jnp.ones((4, 5, 3)))
    """
    if kernel not in CHOICES:
        raise ValueError(f"kernels.use() takes 'cudnn', 'auto', 'native' or 'xla'; got {kernel!r}")
    return _choice_context(kernel)


def current() -> tuple[str, str]:
    """The choice in force and where it comes from."""
    if _choice_context.value is not None:
        return _choice_context.value, f"kernels.use({_choice_context.value!r})"
    choice = os.environ.get("STACKLSTM_KERNEL", "auto")
    if choice not in CHOICES:
        raise ValueError(
            f"STACKLSTM_KERNEL must be 'auto', 'native', 'cudnn' or 'xla'; got {choice!r}"
        )
    return choice, f"STACKLSTM_KERNEL={choice}" if "STACKLSTM_KERNEL" in os.environ else "default"
