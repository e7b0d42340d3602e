"""Pure training and evaluation steps: state in NamedTuples, jitted once, buffers donated.

The model maps windows ``x (batch, window, features)`` to ``(batch, horizon * n_targets)``;
targets ``y (batch, horizon, n_targets)`` are flattened explicitly (horizon-major) before the
loss, and any other shape is a ``ValueError`` at trace time, never a silent broadcast.

Example:
    >>> import jax, numpy as np
    >>> from stacklstm.config import ModelConfig, TrainConfig
    >>> from stacklstm.forecaster import build_model
    >>> model, cfg = build_model(ModelConfig(lstm_hidden_size=8), output_size=2), TrainConfig()
    >>> optimizer = make_optimizer(cfg, total_steps=10)
    >>> state = init_state(model, optimizer, jax.random.key(0), np.zeros((4, 5, 1), np.float32))
    >>> step = make_train_step(model, optimizer, cfg)
    >>> batch = Batch(np.ones((4, 5, 1), np.float32), np.ones((4, 2, 1), np.float32),
    ...               np.ones(4, np.float32))
    >>> state, metrics = step(state, batch, jax.random.key(1))
    >>> int(state.step), metrics.loss.shape
    (1, ())
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any, NamedTuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import optax

from ..config import TrainConfig
from ..inputs import ForecastInputs
from ..intervals import OutputHead
from ..losses import LOSSES, POINT_LOSSES

if TYPE_CHECKING:
    from ..data import WindowSet

Array = jax.Array
PyTree = Any


class TrainState(NamedTuple):
    """Everything a train step changes.

    Attributes:
        step: ``()`` int32, updates done so far.
        params: the model's ``params`` collection.
        opt_state: the optimizer's state.
    """

    step: Array
    params: PyTree
    opt_state: PyTree


class Batch(NamedTuple):
    """One batch of windows, batch-major.

    Attributes:
        x: ``(batch, window, features)`` float32 inputs, or a
            :class:`~stacklstm.forecaster.ForecastInputs` of them with their covariates.
        y: ``(batch, horizon, n_targets)`` float32 targets.
        weight: ``(batch,)`` float32, 1 for real windows and 0 for padding.
    """

    x: Array | np.ndarray
    y: Array | np.ndarray
    weight: Array | np.ndarray


class StepMetrics(NamedTuple):
    """Device scalars from one train step (read on the host only every ``log_every`` steps).

    Attributes:
        loss: ``()`` mean loss of the batch before the update (NaN/Inf if it diverged).
        grad_norm: ``()`` global norm of the gradients before clipping.
        finite: ``()`` bool, loss and gradients finite (with ``skip_nonfinite`` the update
            was applied only where this is True).
    """

    loss: Array
    grad_norm: Array
    finite: Array


def make_schedule(cfg: TrainConfig, total_steps: int) -> optax.Schedule:
    """Linear warm-up from 0 to ``cfg.lr`` over ``warmup_fraction * total_steps``, then cosine to 0.

    Example:
        >>> s = make_schedule(TrainConfig(lr=1.0, warmup_fraction=0.5), total_steps=4)
        >>> [round(float(s(i)), 3) for i in range(5)]
        [0.0, 0.5, 1.0, 0.5, 0.0]
    """
    if not isinstance(total_steps, int) or total_steps < 1:
        raise ValueError(f"total_steps must be an integer >= 1, got {total_steps!r}")
    warmup = round(cfg.warmup_fraction * total_steps)
    if warmup == 0:  # (optax warns about a zero-length warm-up)
        return optax.cosine_decay_schedule(cfg.lr, decay_steps=total_steps)
    return optax.warmup_cosine_decay_schedule(
        init_value=0.0,
        peak_value=cfg.lr,
        warmup_steps=warmup,
        decay_steps=max(total_steps, warmup + 1),
        end_value=0.0,
    )


def make_optimizer(cfg: TrainConfig, total_steps: int) -> optax.GradientTransformation:
    """``clip_by_global_norm(clip_norm)`` then AdamW on the warm-up + cosine schedule."""
    return optax.chain(
        optax.clip_by_global_norm(cfg.clip_norm),
        optax.adamw(make_schedule(cfg, total_steps), weight_decay=cfg.weight_decay),
    )


def init_state(
    model: nn.Module,
    optimizer: optax.GradientTransformation,
    rng: Array,
    x: Array | np.ndarray,
) -> TrainState:
    """Fresh parameters (from ``rng``) and optimizer state; ``x`` only gives the input shape.

    Jitted: run eagerly, the initialisation would compile every small op on its own.
    """

    def init(rng: Array, x: Array) -> TrainState:
        params = model.init(rng, x)["params"]
        return TrainState(jnp.zeros((), jnp.int32), params, optimizer.init(params))

    return jax.jit(init)(rng, jax.tree.map(jnp.asarray, x))


def example_inputs(
    n_features: int, future_steps: int = 0, n_future: int = 0, n_static: int = 0
) -> np.ndarray | ForecastInputs:
    """Zero model inputs of one window of one step, the shapes the parameters depend on:
    ``(1, 1, n_features)``, or with covariates a ``ForecastInputs`` that adds ``(1,
    future_steps, n_future)`` and ``(1, n_static)``."""
    x = np.zeros((1, 1, n_features), np.float32)  # (batch, time, features)
    if not (n_future or n_static):
        return x
    future = np.zeros((1, future_steps if n_future else 0, n_future), np.float32)
    return ForecastInputs(x, future, np.zeros((1, n_static), np.float32))


def abstract_state(
    model: nn.Module, optimizer: optax.GradientTransformation, inputs: int | Any
) -> TrainState:
    """Shapes and dtypes of a fresh train state, from ``jax.eval_shape`` (nothing allocated).

    ``inputs``: the number of input features (an ``LSTMModel``'s parameter shapes depend on
    it only), or example inputs (:func:`example_inputs`).
    """
    x = example_inputs(inputs) if isinstance(inputs, int) else inputs
    return jax.eval_shape(lambda: init_state(model, optimizer, jax.random.key(0), x))


def check_state_fits(abstract: TrainState, device: jax.Device) -> None:
    """Raise ValueError if a train state shaped like ``abstract`` cannot fit on ``device``.

    ``abstract`` comes from ``jax.eval_shape`` (nothing allocated). A step holds the state
    (params and both AdamW moments) plus gradients and updates, about 5/3 of the state; the
    limit is the device's memory, or the machine's RAM when the device does not report it
    (CPU). Catches e.g. ``lstm_hidden_size=10_000_000`` before it allocates (or swaps, or hangs).
    """
    n_bytes = sum(leaf.size * leaf.dtype.itemsize for leaf in jax.tree.leaves(abstract))
    try:
        stats = device.memory_stats() or {}
    except RuntimeError:  # e.g. another process's device
        stats = {}
    limit = stats.get("bytes_limit")
    if not limit and hasattr(os, "sysconf"):
        with contextlib.suppress(ValueError, OSError):
            limit = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    if limit and n_bytes * 5 / 3 > limit:
        n_params = sum(leaf.size for leaf in jax.tree.leaves(abstract.params))
        raise ValueError(
            f"the model has {n_params:,} parameters: training needs about "
            f"{n_bytes * 5 / 3 / 2**30:.1f} GiB but {device.platform} device {device.id} has "
            f"{limit / 2**30:.1f} GiB; lower `lstm_hidden_size`, `num_lstm_layers` or "
            "`linear_layer_sizes`"
        )


def loss_of(cfg: TrainConfig) -> str | OutputHead:
    """What :func:`forecast_loss` takes for ``cfg.loss``: the name of a point loss, or the
    :class:`~stacklstm.intervals.OutputHead` of a quantile or distribution loss."""
    return cfg.loss if cfg.loss in POINT_LOSSES else OutputHead.of(cfg)


def forecast_loss(kind: str | OutputHead, pred: Array, y: Array) -> Array:
    """Per-window loss ``(batch,)`` of ``pred (batch, horizon*n_targets)`` vs ``y (batch, horizon,
    n_targets)``, averaged over the horizon and targets.

    ``kind`` is a point loss (``"mse"``, ``"mae"``, ``"huber"``) or an ``OutputHead`` (pinball
    loss or negative log-likelihood), whose ``pred`` is ``(batch, horizon * n_targets * P)``.

    Raises:
        ValueError: ``pred`` is not exactly ``(batch, horizon * n_targets)`` (times ``P``).
    """
    if isinstance(kind, OutputHead):
        if y.ndim != 3:
            raise ValueError(f"targets must be (batch, horizon, n_targets), got shape {y.shape}")
        kind.split(pred, y.shape[1], y.shape[2])  # shape check at trace time
        return kind.loss_per_window(pred, y)
    if y.ndim != 3:
        raise ValueError(f"targets must be (batch, horizon, n_targets), got shape {y.shape}")
    batch, horizon, n_targets = y.shape
    if pred.shape != (batch, horizon * n_targets):
        raise ValueError(
            f"predictions must be (batch, horizon * n_targets) = ({batch}, "
            f"{horizon * n_targets}), got {pred.shape}; build the model with "
            f"output_size = horizon * n_targets"
        )
    flat = y.reshape(batch, horizon * n_targets)  # horizon-major: index k * n_targets + j
    error = pred.astype(jnp.float32) - flat.astype(jnp.float32)
    if kind not in POINT_LOSSES:
        raise ValueError(f"loss must be one of {', '.join(POINT_LOSSES)}, got {kind!r}")
    return jnp.mean(LOSSES[kind].per_entry(error), axis=-1)


def _check_weight(per_window: Array, weight: Array) -> None:
    if weight.shape != per_window.shape:
        raise ValueError(f"weight must be (batch,) = {per_window.shape}, got {weight.shape}")


def train_step(
    model: nn.Module,
    optimizer: optax.GradientTransformation,
    loss_kind: str | OutputHead,
    skip_nonfinite: bool,
    state: TrainState,
    batch: Batch,
    rng: Array,
) -> tuple[TrainState, StepMetrics]:
    """One AdamW update on ``batch``; pure. Use :func:`make_train_step` for the jitted version.

    Dropout draws from ``fold_in(rng, step)``, so the same ``rng`` is passed every step and a
    resumed run draws the same masks. With ``skip_nonfinite`` an update whose loss or gradients
    are not finite leaves params and optimizer state unchanged (``jnp.where``, no host sync).
    """
    dropout_rng = jax.random.fold_in(rng, state.step)

    def loss_sum(params: PyTree) -> Array:
        pred = model.apply(
            {"params": params}, batch.x, deterministic=False, rngs={"dropout": dropout_rng}
        )  # (batch, horizon * n_targets)
        per_window = forecast_loss(loss_kind, pred, batch.y)
        _check_weight(per_window, batch.weight)
        return jnp.sum(per_window * batch.weight)

    # The weighted mean's gradient is the weighted sum's, divided by the weight sum after the
    # backward pass: under a batch-sharded mesh the gradients, the loss and the weight sum are
    # then independent reductions that XLA sends as ONE all-reduce (a cross-process collective
    # costs milliseconds on CPU hosts, more than a small step).
    loss, grads = jax.value_and_grad(loss_sum)(state.params)
    total = jnp.maximum(jnp.sum(batch.weight), 1.0)
    loss, grads = loss / total, jax.tree.map(lambda g: g / total, grads)
    grad_norm = optax.tree.norm(grads)
    finite = jnp.isfinite(loss) & jnp.isfinite(grad_norm)
    updates, opt_state = optimizer.update(grads, state.opt_state, state.params)
    params = optax.apply_updates(state.params, updates)
    if skip_nonfinite:
        keep = functools.partial(jax.tree.map, lambda new, old: jnp.where(finite, new, old))
        params, opt_state = keep(params, state.params), keep(opt_state, state.opt_state)
    return TrainState(state.step + 1, params, opt_state), StepMetrics(loss, grad_norm, finite)


def eval_step(
    model: nn.Module, loss_kind: str | OutputHead, params: PyTree, batch: Batch
) -> tuple[Array, Array]:
    """``(sum of weight * loss, sum of weight)`` over the batch, deterministic (no dropout)."""
    pred = model.apply({"params": params}, batch.x)  # (batch, horizon * n_targets)
    per_window = forecast_loss(loss_kind, pred, batch.y)
    return jnp.sum(per_window * batch.weight), jnp.sum(batch.weight)


def predict_step(model: nn.Module, params: PyTree, x: Array) -> Array:
    """``(batch, output_size)`` raw model-space outputs of ``x (batch, window, features)``:
    ``horizon * n_targets`` point forecasts for a point loss (see
    :class:`~stacklstm.intervals.OutputHead` for the others)."""
    return model.apply({"params": params}, x)


def make_train_step(
    model: nn.Module,
    optimizer: optax.GradientTransformation,
    cfg: TrainConfig,
    mesh: jax.sharding.Mesh | None = None,
):
    """``train_step(state, batch, rng) -> (state, StepMetrics)``, jitted once, ``state`` donated.

    Call it with the same shapes, dtypes and shardings every step (full batches) so it compiles
    once; the donated input state must not be used after the call. With a ``mesh``, the new
    state and the metrics are pinned to be replicated on it (batches come sharded along
    ``"data"``, so the gradients are all-reduced).
    """
    fn = functools.partial(train_step, model, optimizer, loss_of(cfg), cfg.skip_nonfinite)
    if mesh is None:
        return jax.jit(fn, donate_argnums=0)
    everywhere = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec())
    return jax.jit(fn, donate_argnums=0, out_shardings=everywhere)


def make_eval_step(model: nn.Module, cfg: TrainConfig):
    """``eval_step(params, batch) -> (loss_sum, weight_sum)``, jitted once."""
    return jax.jit(functools.partial(eval_step, model, loss_of(cfg)))


def make_predict_step(model: nn.Module):
    """``predict_step(params, x) -> (batch, output_size)``, jitted once."""
    return jax.jit(functools.partial(predict_step, model))


def padded_batches(
    x: np.ndarray, y: np.ndarray | None, batch_size: int
) -> Iterator[tuple[Batch, int]]:
    """In-order batches of exactly ``batch_size`` rows (the last padded with zero weight).

    Every batch has the same shape, so a jitted eval or predict step compiles once.

    Yields:
        ``(batch, n_real)``: the batch and how many of its rows are real windows.
    """
    n = jax.tree.leaves(x)[0].shape[0]
    if y is None:
        y = np.zeros((n, 1, 1), np.float32)

    def rows(a: np.ndarray, start: int, stop: int, pad: int) -> np.ndarray:
        part = a[start:stop]
        return np.concatenate([part, np.zeros((pad, *a.shape[1:]), a.dtype)]) if pad else part

    for start in range(0, n, batch_size):
        stop = min(start + batch_size, n)
        pad = batch_size - (stop - start)
        xb = jax.tree.map(lambda a, start=start, stop=stop, pad=pad: rows(a, start, stop, pad), x)
        weight = np.concatenate([np.ones(stop - start, np.float32), np.zeros(pad, np.float32)])
        yield Batch(xb, rows(y, start, stop, pad), weight), stop - start


#: Bytes of gathered batches that may wait on the device (dispatched, not yet run) before
#: the host waits for them: JAX dispatches ahead, and each waiting batch holds its inputs.
QUEUE_BYTES = 32 * 2**20


def sync_every(windows: WindowSet, batch_size: int) -> int:
    """Batches to dispatch between two host syncs: as many as :data:`QUEUE_BYTES` of inputs
    hold (1 to 256), so waiting batches stay bounded whatever the window."""
    batch_bytes = 4 * batch_size * windows.window * windows.n_columns  # float32 inputs
    return max(1, min(256, QUEUE_BYTES // max(batch_bytes, 1)))


def window_batches(
    windows: WindowSet, batch_size: int, *, targets: bool = True
) -> Iterator[tuple[Batch, int]]:
    """In-order batches of exactly ``batch_size`` windows, each gathered when it is reached
    (:meth:`~stacklstm.data.WindowSet.gather`), the last padded with zero weight.

    The same batches as :func:`~stacklstm.train.step.padded_batches` over ``windows.x`` and
    ``windows.y``, without ever holding every window. ``targets=False``: ``y`` is zeros.

    Yields:
        ``(batch, n_real)``: the batch and how many of its rows are real windows.
    """
    for rows in windows.chunks(batch_size):
        x, y = windows.gather(rows, targets=targets)
        yield from padded_batches(x, y, batch_size)
