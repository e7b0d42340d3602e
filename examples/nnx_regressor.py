"""The seed's stacked-LSTM regressor with Flax NNX and optax, trained on a toy sine series.

The same model as quickstart.py (linen), written the NNX way: the module owns its parameters,
``nnx.Optimizer`` updates them in place, ``model.train()``/``model.eval()`` switch dropout.
Its parameters are the linen tree, so a linen checkpoint loads into it and back.

Run: python examples/nnx_regressor.py [--quick]
"""

import argparse

import jax.numpy as jnp
import numpy as np
import optax
from flax import nnx

import stacklstm
import stacklstm.nnx as snnx


def make_windows(n: int, window: int = 10) -> tuple[np.ndarray, np.ndarray]:
    """Windows of a noisy sine: x (n, window), y (n, 1), the value after each window."""
    t = np.arange(n + window) * 0.2
    series = np.sin(t) + 0.05 * np.random.default_rng(0).normal(size=t.shape)
    x = np.stack([series[i : i + window] for i in range(n)]).astype(np.float32)
    y = series[window : window + n, None].astype(np.float32)
    return x, y


@nnx.jit
def train_step(model: snnx.LSTMModel, optimizer: nnx.Optimizer, xb, yb) -> jnp.ndarray:
    """One Adam step on the mean squared error; updates model and optimizer in place."""

    def loss_fn(model):
        return jnp.mean((model(xb) - yb) ** 2)

    loss, grads = nnx.value_and_grad(loss_fn)(model)
    optimizer.update(model, grads)
    return loss


def main(quick: bool = False) -> float:
    model = snnx.LSTMModel(
        1,  # in_features: one value per step
        lstm_hidden_size=64,
        num_lstm_layers=2,
        linear_layer_sizes=[32, 16],
        mean_aggregation=False,
        dropout_rate=0.1,
        rngs=nnx.Rngs(0),  # params and the dropout stream
    )
    optimizer = nnx.Optimizer(model, optax.adam(3e-3), wrt=nnx.Param)
    x, y = make_windows(256)  # x: (256, 10) -- a 2-D input is one feature per step

    model.train()  # dropout on
    first = None
    for step in range(60 if quick else 400):
        i = (step * 32) % 256
        loss = train_step(model, optimizer, x[i : i + 32], y[i : i + 32])
        first = float(loss) if first is None else first
    print(f"MSE first step {first:.4f} -> last step {float(loss):.4f}")

    model.eval()  # dropout off
    print("prediction shape:", model(x[:32], model.initialize_carry(32)).shape)  # (32, 1)

    # The parameters are the linen tree: the linen LSTMModel gives the same predictions.
    linen = stacklstm.LSTMModel(64, 2, [32, 16], False, dropout_rate=0.1)
    y_linen = linen.apply({"params": snnx.to_linen_params(model)}, x[:32])
    print(f"max |nnx - linen|: {float(jnp.max(jnp.abs(model(x[:32]) - y_linen))):.2e}")
    return float(loss)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="a few steps only (for tests)")
    main(parser.parse_args().quick)
