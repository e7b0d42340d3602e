"""The seed's use case: a stacked-LSTM regressor in Flax, trained on a toy sine series.

Run: python examples/quickstart.py [--quick]
"""

import argparse

import jax
import jax.numpy as jnp
import numpy as np
import optax

from stacklstm import LSTMModel


def make_windows(n: int, window: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Windows of a noisy sine: x (n, window), y (n, 1), the value after each window."""
    t = np.arange(n + window) * 0.2
    series = np.sin(t) + 0.05 * np.random.default_rng(0).normal(size=t.shape)
    x = np.stack([series[i : i + window] for i in range(n)]).astype(np.float32)
    y = series[window : window + n, None].astype(np.float32)
    return x, y


def main(quick: bool = False) -> float:
    model = LSTMModel(
        lstm_hidden_size=64, num_lstm_layers=2, linear_layer_sizes=[32, 16], mean_aggregation=False
    )
    x, y = make_windows(256)  # x: (256, 10) -- a 2-D input is one feature per step
    carry = model.initialize_carry(batch_size=32)
    params = model.init(jax.random.key(0), x[:32], carry)
    optimizer = optax.adam(3e-3)
    opt_state = optimizer.init(params)

    @jax.jit
    def train_step(params, opt_state, xb, yb):
        def loss_fn(p):
            return jnp.mean((model.apply(p, xb, carry) - yb) ** 2)

        loss, grads = jax.value_and_grad(loss_fn)(params)
        updates, opt_state = optimizer.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state, loss

    first = None
    for step in range(60 if quick else 400):
        i = (step * 32) % 256
        params, opt_state, loss = train_step(params, opt_state, x[i : i + 32], y[i : i + 32])
        first = float(loss) if first is None else first
    print(f"MSE first step {first:.4f} -> last step {float(loss):.4f}")
    print("prediction shape:", model.apply(params, x[:32], carry).shape)  # (32, 1)
    return float(loss)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few steps only (for tests)")
    main(parser.parse_args().quick)
