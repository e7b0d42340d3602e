"""Bad input to the public API fails early with ValueError/TypeError naming expected vs got."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stacklstm import LSTMModel, LSTMState, StackedLSTM, lstm_layer

MODEL = LSTMModel(4, 2, (3,))
X = np.zeros((2, 5, 3), np.float32)
PARAMS = MODEL.init(jax.random.key(0), X)


@pytest.mark.parametrize(
    "x, error, match",
    [
        (np.zeros(5, np.float32), ValueError, r"\(batch, time, features\).*got shape \(5,\)"),
        (np.zeros((2, 5, 3, 1), np.float32), ValueError, r"got shape \(2, 5, 3, 1\)"),
        (np.zeros((2, 5, 3), np.int32), TypeError, "floating-point.*int32"),
        (np.zeros((2, 5, 3), np.complex64), TypeError, "floating-point.*complex64"),
        (np.zeros((2, 0, 3), np.float32), ValueError, "at least one time step"),
        (
            np.zeros((2, 5, 4), np.float32),
            ValueError,
            "layer_0: the params expect inputs with 3 features.*got x with 4",
        ),
    ],
)
def test_model_rejects_bad_x(x, error, match):
    with pytest.raises(error, match=match):
        MODEL.apply(PARAMS, x)
    with pytest.raises(error, match=match):  # at trace time under jit too
        jax.jit(MODEL.apply)(PARAMS, x)


@pytest.mark.parametrize(
    "carry, error, match",
    [
        (MODEL.initialize_carry(2)[:1], ValueError, "must hold 2 LSTMState.*got 1"),
        (MODEL.initialize_carry(3), ValueError, r"\(batch, hidden\) = \(2, 4\); got \(3, 4\)"),
        (LSTMModel(5, 2).initialize_carry(2), ValueError, r"= \(2, 4\); got \(2, 5\)"),
        (jnp.zeros((2, 4)), TypeError, "tuple of LSTMState"),
        ((jnp.zeros((2, 4)),) * 2, TypeError, r"carry\)?\[0\] must be an LSTMState|must be an"),
    ],
)
def test_model_rejects_bad_carry(carry, error, match):
    with pytest.raises(error, match=match):
        MODEL.apply(PARAMS, X, carry)


@pytest.mark.parametrize(
    "lengths, error, match",
    [
        (np.array([5]), ValueError, r"shape \(batch,\) = \(2,\); got shape \(1,\)"),
        (np.array([[5, 5]]), ValueError, r"got shape \(1, 2\)"),
        (np.array([0, 5]), ValueError, r"\[1, time=5\]; row 0 has 0"),
        (np.array([5, 6]), ValueError, r"\[1, time=5\]; row 1 has 6"),
        (np.array([2.0, 5.0]), TypeError, "integers"),
    ],
)
def test_model_rejects_bad_seq_lengths(lengths, error, match):
    with pytest.raises(error, match=match):
        MODEL.apply(PARAMS, X, seq_lengths=lengths)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        (dict(num_lstm_layers=0), "num_lstm_layers must be an integer >= 1, got 0"),
        (dict(lstm_hidden_size=0), "lstm_hidden_size must be an integer >= 1, got 0"),
        (dict(lstm_hidden_size=2.5), "lstm_hidden_size must be an integer >= 1, got 2.5"),
        (
            dict(linear_layer_sizes=(8, -1)),
            r"integers >= 1 \(e.g. \(32, 16\) or \(\)\), got \[8, -1\]",
        ),
        (dict(dropout_rate=1.0), r"dropout_rate must be a number in \[0.0, 1.0\), got 1.0"),
        (dict(dropout_rate=-0.1), r"\[0.0, 1.0\), got -0.1"),
        (dict(output_size=0), "output_size must be an integer >= 1"),
    ],
)
def test_model_rejects_bad_config(kwargs, match):
    with pytest.raises(ValueError, match=match):
        LSTMModel(**kwargs)


def test_stacked_lstm_and_kernel_reject_bad_input():
    with pytest.raises(ValueError, match="hidden_size must be an integer >= 1"):
        StackedLSTM(0)
    with pytest.raises(ValueError, match="num_layers must be an integer >= 1"):
        StackedLSTM(3, num_layers=0)
    with pytest.raises(ValueError, match="batch_size must be an integer >= 1, got 0"):
        MODEL.initialize_carry(0)
    p = {"kernel_ih": jnp.zeros((3, 8)), "kernel_hh": jnp.zeros((2, 8)), "bias": jnp.zeros(8)}
    s = LSTMState(jnp.zeros((4, 2)), jnp.zeros((4, 2)))
    with pytest.raises(TypeError, match="keys 'kernel_ih', 'kernel_hh', 'bias'"):
        lstm_layer({"w": 1}, jnp.ones((4, 5, 3)), s)
    with pytest.raises(ValueError, match=r"state.h must be \(batch, hidden\) = \(4, 2\)"):
        lstm_layer(p, jnp.ones((4, 5, 3)), LSTMState(jnp.zeros((3, 2)), jnp.zeros((4, 2))))
