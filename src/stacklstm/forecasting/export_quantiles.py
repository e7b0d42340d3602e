"""Model-space quantiles of an output head in JAX, for an exported program: what
:meth:`stacklstm.intervals.OutputHead.quantiles_at` computes with numpy and scipy.

The Student-t quantile has no JAX function: :func:`student_t_ppf` inverts the regularised
incomplete beta function by bisection in float64 (to the last bits of the double).

Example:
    >>> import numpy as np
    >>> from scipy import special
    >>> with jax.enable_x64(True):
    ...     got = np.asarray(student_t_ppf(jnp.asarray([3.0, 30.0]), jnp.asarray([0.9, 0.025])))
    >>> np.allclose(got, special.stdtrit([3.0, 30.0], [0.9, 0.025]), rtol=1e-10)
    True
"""

from __future__ import annotations

from collections.abc import Sequence

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy import special

from ..intervals import OutputHead

Array = jax.Array

#: Bisection steps of :func:`student_t_ppf`: each halves the bracket of ``x`` in (0, 1).
_BISECTIONS = 200


def student_t_ppf(df: Array, q: Array) -> Array:
    """The ``q`` quantile of Student's t with ``df`` degrees of freedom (broadcast), float64.

    For ``p = min(q, 1 - q)``: ``x`` solves ``I_x(df / 2, 1 / 2) = 2 p`` and the quantile's
    size is ``sqrt(df (1 - x) / x)``, negative below the median (as ``scipy.special.stdtrit``).
    """
    df, q = jnp.broadcast_arrays(jnp.asarray(df, jnp.float64), jnp.asarray(q, jnp.float64))
    p = jnp.minimum(q, 1.0 - q)
    target = 2.0 * p
    a = df / 2.0

    def step(_: int, bracket: tuple[Array, Array]) -> tuple[Array, Array]:
        lo, hi = bracket
        mid = 0.5 * (lo + hi)
        below = special.betainc(a, 0.5, mid) < target
        return jnp.where(below, mid, lo), jnp.where(below, hi, mid)

    lo, hi = jax.lax.fori_loop(0, _BISECTIONS, step, (jnp.zeros_like(df), jnp.ones_like(df)))
    x = 0.5 * (lo + hi)
    size = jnp.sqrt(df * (1.0 - x) / x)
    return jnp.where(q == 0.5, 0.0, jnp.where(q < 0.5, -size, size))


def model_quantiles(
    head: OutputHead, raw: Array, horizon: int, n_targets: int, levels: Sequence[float]
) -> Array:
    """``(batch, horizon, n_targets, len(levels))`` float64 model-space quantiles of raw
    outputs ``raw (batch, horizon * n_targets * P)``, as ``head.quantiles_at`` gives them.

    Raises:
        ValueError: A point loss, or ``levels`` that a quantile head did not learn.
    """
    params = head.params(raw, horizon, n_targets).astype(jnp.float64)  # float32 as in training
    levels = tuple(float(q) for q in levels)
    if head.loss == "quantile":
        missing = [q for q in levels if q not in head.quantiles]
        if missing:
            raise ValueError(f"the head learnt the quantiles {head.quantiles}, not {missing}")
        return params[..., [head.quantiles.index(q) for q in levels]]
    q = np.asarray(levels, np.float64)
    if head.loss == "normal":
        return params[..., :1] + params[..., 1:2] * special.ndtri(jnp.asarray(q))
    if head.loss == "student_t":
        return params[..., :1] + params[..., 1:2] * student_t_ppf(params[..., 2:3], q)
    raise ValueError(f"loss {head.loss!r} gives point forecasts only; use conformal")
