"""The peers that run on JAX: stacklstm, Flax's cells (nn.RNN, the nn.scan recipe), JAX's cuDNN
LSTM and Keras 3 (on its JAX backend); all share one train step (:func:`_jax_callables`)."""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from typing import Any

from ._spec import Built, PeerUnavailable, data_numpy
from .workloads import HEAD_SIZES, LEARNING_RATE, OUTPUT_SIZE, Workload


def _prepare_jax() -> dict[str, Any]:
    import flax
    import jax
    import optax

    from stacklstm import kernels

    devices = jax.devices()  # starts the backend now, so its memory is in the baseline
    kernel = kernels.info()
    return {
        "stacklstm_kernel": f"{kernel.path} ({kernel.reason})",
        "jax": jax.__version__,
        "flax": flax.__version__,
        "optax": optax.__version__,
        "jax_devices": [str(d) for d in devices],
        "jax_backend": jax.default_backend(),
    }


def _flax_head():
    """The shared head as a linen module: Dense+ELU for each of ``HEAD_SIZES``, then Dense(1)."""
    import flax.linen as nn

    class Head(nn.Module):
        @nn.compact
        def __call__(self, z):  # (batch, hidden) -> (batch, 1)
            for size in HEAD_SIZES:
                z = nn.elu(nn.Dense(size)(z))
            return nn.Dense(OUTPUT_SIZE)(z)

    return Head


def _jax_callables(
    apply_fn: Callable[[Any, Any], Any],
    params: Any,
    w: Workload,
    seed: int,
    stream: tuple[Callable[..., Any], Any, Any] | None,
    notes: str,
) -> Built:
    """Train / forward / stream / compile callables for a JAX model ``apply_fn(params, x)``.

    ``stream`` is ``(step_fn, x_t, carry)`` with ``step_fn(params, x_t, carry) -> (y, carry)``
    (jitted here), or ``None``.
    """
    import jax
    import jax.numpy as jnp
    import optax

    x_np, y_np = data_numpy(w, seed)
    x, y = jnp.asarray(x_np), jnp.asarray(y_np)
    tx = optax.adam(LEARNING_RATE)

    def loss_fn(params, x, y):
        pred = apply_fn(params, x)  # (batch, 1), same shape as y: no broadcasting
        return jnp.mean((pred - y) ** 2)

    def make_step():
        # A new function object each call: a fresh jit with empty caches, so lower().compile()
        # does the whole trace + lower + compile without clearing the caches of the others.
        def train_step(params, opt_state, x, y):
            loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
            updates, opt_state = tx.update(grads, opt_state, params)
            return optax.apply_updates(params, updates), opt_state, loss

        return jax.jit(train_step, donate_argnums=(0, 1))

    step = make_step()
    forward_jit = jax.jit(apply_fn)
    # Mutable holder: the step donates the old buffers, so every callable reads the newest.
    state = {"params": params, "opt_state": tx.init(params)}

    def train() -> None:
        p, o, loss = step(state["params"], state["opt_state"], x, y)
        state["params"], state["opt_state"] = p, o
        jax.block_until_ready((p, o, loss))  # params and optimizer state too, not just the loss

    def forward() -> None:
        jax.block_until_ready(forward_jit(state["params"], x))

    def compile_train() -> float:
        fresh = make_step()
        t0 = time.perf_counter()
        fresh.lower(state["params"], state["opt_state"], x, y).compile()
        return time.perf_counter() - t0

    measures: dict[str, Callable[[], None]] = {"train": train, "forward": forward}
    if stream is not None:
        step_fn, x_t, carry0 = stream
        stream_jit = jax.jit(step_fn)
        carry_box = {"carry": carry0}

        def stream_step() -> None:
            y_t, carry = stream_jit(state["params"], x_t, carry_box["carry"])
            carry_box["carry"] = carry  # the carry goes out and comes back in next step
            jax.block_until_ready((y_t, carry))

        measures["stream"] = stream_step
    return Built(measures=measures, compile=compile_train, notes=notes)


# --------------------------------------------------------------------------- stacklstm


def _build_stacklstm(w: Workload, seed: int, *, remat: bool = False) -> Built:
    import jax
    import jax.numpy as jnp

    from stacklstm.model import LSTMModel

    model = LSTMModel(
        lstm_hidden_size=w.hidden,
        num_lstm_layers=w.layers,
        linear_layer_sizes=HEAD_SIZES,
        mean_aggregation=False,
        output_size=OUTPUT_SIZE,
        remat=remat,
    )
    carry = model.initialize_carry(w.batch)  # zeros: (h, c) per layer, (batch, hidden) each
    x0 = jnp.zeros((w.batch, w.time, w.features), jnp.float32)
    params = model.init(jax.random.key(seed), x0, carry)

    def apply_fn(params, x):
        return model.apply(params, x, carry)

    stream = None
    if w.streaming:

        def step_fn(params, x_t, carry):  # x_t (1, 1, features) -> y (1, 1), new carry
            return model.apply(params, x_t, carry, return_carry=True)

        x_t = jnp.asarray(data_numpy(w, seed + 1, batch=1, time_=1)[0])
        stream = (step_fn, x_t, model.initialize_carry(1))
    notes = (
        f"LSTMModel{'(remat=True)' if remat else ''}; jit(train_step, donate_argnums=(0, 1)); "
        "forward jit(apply); stream: jit(apply) on (1, 1, features), carry in and out, head applied"
    )
    return _jax_callables(apply_fn, params, w, seed, stream, notes)


# --------------------------------------------------------------------------- flax


def _flax_cell_stream(cell_cls, cell_names: list[str], w: Workload, seed: int):
    """Streams by applying each flax cell to one step with its own slice of the params."""
    import jax
    import jax.numpy as jnp

    head = _flax_head()()
    cell = cell_cls(w.hidden)

    def step_fn(params, x_t, carries):  # x_t (1, features); carries: per layer (c, h)
        p = params["params"]
        z, new = x_t, []
        for name, carry in zip(cell_names, carries, strict=True):
            carry, z = cell.apply({"params": p[name]}, carry, z)
            new.append(carry)
        return head.apply({"params": p["head"]}, z), tuple(new)

    x_t = jnp.asarray(data_numpy(w, seed + 1, batch=1, time_=1)[0][:, 0])  # (1, features)
    carries = tuple(
        cell.initialize_carry(jax.random.key(0), (1, w.features if i == 0 else w.hidden))
        for i in range(w.layers)
    )
    return step_fn, x_t, carries


def _build_flax_rnn(w: Workload, seed: int) -> Built:
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    head_cls = _flax_head()
    names = [f"cell_{i}" for i in range(w.layers)]

    class FlaxRNNRegressor(nn.Module):
        @nn.compact
        def __call__(self, x):  # (batch, time, features) -> (batch, 1)
            for name in names:
                x = nn.RNN(nn.OptimizedLSTMCell(w.hidden, name=name))(x)
            return head_cls(name="head")(x[:, -1])

    model = FlaxRNNRegressor()
    params = model.init(jax.random.key(seed), jnp.zeros((w.batch, w.time, w.features)))
    stream = _flax_cell_stream(nn.OptimizedLSTMCell, names, w, seed) if w.streaming else None
    notes = (
        "stack of nn.RNN(nn.OptimizedLSTMCell(hidden)) + head; same jitted train step; "
        "stream: OptimizedLSTMCell.apply per layer on one step, then the head"
    )
    return _jax_callables(model.apply, params, w, seed, stream, notes)


def _build_flax_scan_seed(w: Workload, seed: int) -> Built:
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    head_cls = _flax_head()
    names = [f"layer_{i}" for i in range(w.layers)]

    class ScanSeedRegressor(nn.Module):
        """The seed's pattern: ``nn.scan`` over the cell class, one scanned cell per layer."""

        @nn.compact
        def __call__(self, x):  # (batch, time, features) -> (batch, 1)
            scan_lstm = nn.scan(
                nn.LSTMCell,
                variable_broadcast="params",
                split_rngs={"params": False},
                in_axes=1,
                out_axes=1,
            )
            for name in names:
                cell = scan_lstm(w.hidden, name=name)
                carry = cell.initialize_carry(jax.random.key(0), x[:, 0].shape)
                carry, x = cell(carry, x)
            return head_cls(name="head")(x[:, -1])

    model = ScanSeedRegressor()
    params = model.init(jax.random.key(seed), jnp.zeros((w.batch, w.time, w.features)))
    stream = _flax_cell_stream(nn.LSTMCell, names, w, seed) if w.streaming else None
    notes = (
        "nn.scan(nn.LSTMCell, variable_broadcast='params', split_rngs={'params': False}, "
        "in_axes=1, out_axes=1) per layer + head; same jitted train step; "
        "stream: LSTMCell.apply per layer on one step, then the head"
    )
    return _jax_callables(model.apply, params, w, seed, stream, notes)


def _build_jax_rnn_cudnn(w: Workload, seed: int) -> Built:
    """``jax.experimental.rnn.lstm`` called directly (cuDNN; a GPU only) + the same head."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp
    from jax.experimental import rnn

    if jax.default_backend() != "gpu":
        raise PeerUnavailable("jax.experimental.rnn.lstm runs on a GPU only (cuDNN)")
    head_cls = _flax_head()

    class CudnnRegressor(nn.Module):
        @nn.compact
        def __call__(self, x):  # (batch, time, features) -> (batch, 1)
            n = rnn.get_num_params_in_lstm(w.features, w.hidden, w.layers, False)
            weights = self.param("lstm", nn.initializers.normal(0.1), (n,))
            zeros = jnp.zeros((w.layers, x.shape[0], w.hidden), x.dtype)
            lengths = jnp.full((x.shape[0],), x.shape[1], jnp.int32)
            y, _, _ = rnn.lstm(
                x, zeros, zeros, weights, lengths, w.features, w.hidden, w.layers, 0.0, False
            )
            return head_cls(name="head")(y[:, -1])

    model = CudnnRegressor()
    params = model.init(jax.random.key(seed), jnp.zeros((w.batch, w.time, w.features)))
    notes = "jax.experimental.rnn.lstm (cuDNN) + head, zero initial state; same jitted train step"
    return _jax_callables(model.apply, params, w, seed, None, notes)


# --------------------------------------------------------------------------- keras


def _prepare_keras() -> dict[str, Any]:
    if os.environ.setdefault("KERAS_BACKEND", "jax") != "jax":
        raise PeerUnavailable(f"KERAS_BACKEND={os.environ['KERAS_BACKEND']!r}; this peer needs jax")
    info = _prepare_jax()
    import keras

    if keras.backend.backend() != "jax":
        raise PeerUnavailable(f"keras runs on {keras.backend.backend()!r}, not jax")
    info["keras"] = keras.__version__
    return info


def _build_keras(w: Workload, seed: int) -> Built:
    import jax
    import jax.numpy as jnp
    import keras

    keras.utils.set_random_seed(seed)
    layers: list[Any] = [keras.Input(shape=(w.time, w.features), batch_size=w.batch)]
    for i in range(w.layers):
        layers.append(keras.layers.LSTM(w.hidden, return_sequences=i < w.layers - 1))
    layers += [keras.layers.Dense(size, activation="elu") for size in HEAD_SIZES]
    layers.append(keras.layers.Dense(OUTPUT_SIZE))
    model = keras.Sequential(layers)
    model.compile(optimizer=keras.optimizers.Adam(LEARNING_RATE), loss="mse", jit_compile=True)
    x_np, y_np = data_numpy(w, seed)
    x, y = jnp.asarray(x_np), jnp.asarray(y_np)  # device arrays, as the JAX peers get

    def train() -> None:
        model.train_on_batch(x, y)  # returns the loss as a Python float: blocks on it
        jax.block_until_ready([v.value for v in model.trainable_variables])

    def forward() -> None:
        model.predict_on_batch(x)  # returns numpy: blocks

    notes = (
        "keras.Sequential(LSTM... + head), compile(jit_compile=True); train = train_on_batch "
        "(+ block on the weights), forward = predict_on_batch; compile n/a (Keras jits inside "
        "train_on_batch: see the first-call row); streaming n/a"
    )
    return Built(measures={"train": train, "forward": forward}, notes=notes)
