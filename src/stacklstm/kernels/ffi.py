"""Custom calls with JAX's semantics, shared by the compiled CPU kernel and the cuDNN path.

:class:`PerShard` runs a custom call per device on its own rows of a batch-sharded mesh
(``jax.experimental.custom_partitioning``) and one call per element under ``vmap``;
:func:`portable_derivatives` gives a custom call the derivatives of a pure-JAX function of
the same outputs (any order); :func:`export_marker` makes ``jax.export`` name what to do
instead of failing on a call it cannot serialise.

Example:
    >>> import jax.numpy as jnp
    >>> double = PerShard(lambda x: (2 * x,), (0,), (0,), marker=export_marker("double", "no"))
    >>> double(jnp.ones((2, 3)))[0].tolist()
    [[2.0, 2.0, 2.0], [2.0, 2.0, 2.0]]
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.experimental.custom_partitioning import custom_partitioning
from jax.extend.core import Primitive
from jax.interpreters import ad, batching, mlir
from jax.sharding import NamedSharding, PartitionSpec

_F32 = jnp.float32


def export_marker(name: str, message: str) -> Primitive:
    """An identity primitive that lowers to nothing, except for ``jax.export``, where it raises
    ``ValueError(message)``: put on one operand of a custom call that jax.export cannot
    serialise, it says what to do instead of JAX's generic "no compatibility guarantees"."""
    marker = Primitive(name)
    marker.def_abstract_eval(lambda x: x)
    marker.def_impl(lambda x: x)

    def lowering(ctx, x):
        if getattr(ctx.module_context.lowering_parameters, "for_export", False):
            raise ValueError(message)
        return [x]

    mlir.register_lowering(marker, lowering)
    batching.primitive_batchers[marker] = lambda args, dims: (marker.bind(*args), dims[0])
    ad.deflinear2(marker, lambda t, _: [t])
    return marker


def _spec(batch_names, ndim: int, axis: int | None) -> PartitionSpec:
    """The spec of an array of rank ``ndim`` whose ``axis`` (if any) is the batch."""
    parts = [None] * ndim
    if axis is not None and axis < ndim and batch_names:
        parts[axis] = batch_names
    return PartitionSpec(*parts)


class PerShard:
    """A custom call run by each device on its own rows of the batch.

    ``fn(*arrays) -> tuple of arrays``; ``in_axes``/``out_axes``: the batch axis of each
    argument and result (None: not batched; ignored for an array without that axis, as the
    scalar "all valid" mask); ``summed``: results that are sums over the rows (the weight
    gradients), all-reduced over the devices. Under ``jit`` with the batch sharded over a mesh
    (``jax.experimental.custom_partitioning``: XLA's partitioner asks how to split the call),
    each device runs ``fn`` on its rows, with no all-gather; on one device it is ``fn``. A batch
    that does not split evenly, or a sharding of any other axis, is gathered first (correct,
    not per shard). ``vmap`` runs one call per element, like ``ffi_call``'s "sequential".
    ``marker``: the call's :func:`export_marker`, put on its first argument.
    """

    def __init__(self, fn, in_axes, out_axes, summed=(), *, marker: Primitive):
        self.fn, self.in_axes, self.out_axes, self.summed = fn, in_axes, out_axes, summed
        self.marker = marker
        self._by_ranks = {}

    def _batch_names(self, mesh, arg_shapes):
        """The mesh axes the batch is split over (from the first argument), or None."""
        lead, axis = arg_shapes[0], self.in_axes[0]
        spec = tuple(lead.sharding.spec) if hasattr(lead.sharding, "spec") else ()
        names = spec[axis] if axis < len(spec) else None
        if names is None:
            return None
        names = names if isinstance(names, tuple) else (names,)
        devices = math.prod(mesh.shape[n] for n in names)
        return names if devices > 1 and lead.shape[axis] % devices == 0 else None

    def _shardings(self, mesh, arg_shapes, result_shape):
        names = self._batch_names(mesh, arg_shapes)
        args = tuple(
            NamedSharding(mesh, _spec(names, len(a.shape), ax))
            for a, ax in zip(arg_shapes, self.in_axes, strict=True)
        )
        results = tuple(
            NamedSharding(mesh, _spec(None if i in self.summed else names, len(r.shape), ax))
            for i, (r, ax) in enumerate(zip(result_shape, self.out_axes, strict=True))
        )
        return names, args, results

    def _partitioned(self, ranks, out_ranks):
        def infer(mesh, arg_shapes, result_shape):
            return self._shardings(mesh, arg_shapes, result_shape)[2]

        def partition(mesh, arg_shapes, result_shape):
            names, args, results = self._shardings(mesh, arg_shapes, result_shape)

            def per_shard(*arrays):
                outs = self.fn(*arrays)
                if names is None:
                    return outs
                return tuple(
                    jax.lax.psum(o, names) if i in self.summed else o for i, o in enumerate(outs)
                )

            return mesh, per_shard, results, args

        # The same for Shardy: the batch one factor ("b"), every other axis its own factor that
        # stays whole.
        others = []

        def dims(k, rank, axis):
            names = []
            for d in range(rank):
                if d == axis:
                    names.append("b")
                else:
                    names.append(f"a{k}_{d}")
                    others.append(names[-1])
            return " ".join(names)

        n = len(ranks)
        in_pairs = zip(ranks, self.in_axes, strict=True)
        operands = [dims(k, r, ax) for k, (r, ax) in enumerate(in_pairs)]
        results = [
            dims(n + k, r, None if k in self.summed else ax)
            for k, (r, ax) in enumerate(zip(out_ranks, self.out_axes, strict=True))
        ]
        rule = ", ".join(operands) + " -> " + ", ".join(results)
        call = custom_partitioning(self.fn)
        call.def_partition(
            partition,
            infer_sharding_from_operands=infer,
            sharding_rule=rule,
            need_replication_factors=tuple(others),
        )
        return call

    def _call_partitioned(self, *arrays):
        ranks = tuple(a.ndim for a in arrays)
        if ranks not in self._by_ranks:
            out_ranks = tuple(len(o.shape) for o in jax.eval_shape(self.fn, *arrays))
            self._by_ranks[ranks] = self._partitioned(ranks, out_ranks)
        return self._by_ranks[ranks](*arrays)

    @functools.cached_property
    def _vmappable(self):
        call = jax.custom_batching.custom_vmap(self._call_partitioned)

        @call.def_vmap
        def _one_by_one(axis_size, in_batched, *arrays):
            batched = [a for a, b in zip(arrays, in_batched, strict=True) if b]

            def one(sliced):
                it = iter(sliced)
                pairs = zip(arrays, in_batched, strict=True)
                return call(*(next(it) if b else a for a, b in pairs))

            outs = jax.lax.map(one, batched)
            return outs, tuple(True for _ in outs)

        return call

    def __call__(self, *args):
        # float32 for the floating arguments (integer ones, as lengths, stay as they are)
        first, *rest = (
            jnp.asarray(a, _F32)
            if jnp.issubdtype(jnp.result_type(a), jnp.floating)
            else jnp.asarray(a)
            for a in args
        )
        # The marker lowers to nothing; it makes jax.export say what to do instead.
        return tuple(self._vmappable(self.marker.bind(first), *rest))


def portable_derivatives(portable):
    """Decorator: the decorated function (custom calls) gets the derivatives of ``portable``,
    a pure-JAX function of the same arguments with the same outputs. So its values come from
    the kernel and its derivatives of any order from JAX (grad of grad, ``jax.hessian``)."""

    def wrap(native_fn):
        fn = jax.custom_jvp(native_fn)

        @fn.defjvp
        def _jvp(primals, tangents):
            _, tangents_out = jax.jvp(portable, primals, tangents)
            return fn(*primals), tangents_out

        return functools.wraps(native_fn)(fn)

    return wrap
