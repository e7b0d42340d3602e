"""The numpy oracle, by hand: one unit whose gates are set by the bias alone."""

import math

import numpy as np

from stacklstm.kernels.reference import lstm_layer_reference


def _by_bias(kernel_hr=None):
    """One feature, one unit, no weights: gates i = o = 0.5, f = 0.75, g = 0.5 at every step
    (gate order i, f, g, o)."""
    params = {
        "kernel_ih": np.zeros((1, 4)),
        "kernel_hh": np.zeros((1, 4)),
        "bias": np.array([0.0, math.log(3.0), math.atanh(0.5), 0.0]),
    }
    if kernel_hr is not None:
        params["kernel_hr"] = np.array([[kernel_hr]])
    return params


def test_cell_updates_by_hand_forward_reverse_and_padded():
    x = np.zeros((2, 3, 1))
    h0, c0 = np.zeros((2, 1)), np.full((2, 1), 2.0)
    out, h, c = lstm_layer_reference(_by_bias(), x, h0, c0, seq_lengths=np.array([3, 1]))
    # c <- 0.75 c + 0.5 * 0.5: 2 -> 1.75 -> 1.5625 -> 1.421875; h = 0.5 tanh(c)
    cells = [1.75, 1.5625, 1.421875]
    np.testing.assert_allclose(out[0, :, 0], [0.5 * math.tanh(v) for v in cells], rtol=1e-12)
    np.testing.assert_allclose(out[1, :, 0], [0.5 * math.tanh(1.75), 0.0, 0.0], rtol=1e-12)
    np.testing.assert_allclose(c[:, 0], [1.421875, 1.75], rtol=1e-12)
    np.testing.assert_allclose(h[:, 0], [0.5 * math.tanh(1.421875), 0.5 * math.tanh(1.75)])
    # reversed: row 1 (length 1) starts at step 0 and its padding stays 0
    rev, _, c_rev = lstm_layer_reference(_by_bias(), x, h0, c0, np.array([3, 1]), reverse=True)
    np.testing.assert_allclose(rev[0, ::-1, 0], out[0, :, 0], rtol=1e-12)
    np.testing.assert_array_equal(rev[1, 1:, 0], [0.0, 0.0])
    np.testing.assert_allclose(c_rev[:, 0], [1.421875, 1.75], rtol=1e-12)


def test_a_projection_scales_the_output_and_the_recurrent_input():
    x, h0, c0 = np.zeros((1, 2, 1)), np.zeros((1, 1)), np.full((1, 1), 2.0)
    out, h, c = lstm_layer_reference(_by_bias(kernel_hr=3.0), x, h0, c0)
    # kernel_hh is zero, so the projected h feeds nothing back: h = 3 * 0.5 tanh(c)
    np.testing.assert_allclose(out[0, :, 0], [1.5 * math.tanh(1.75), 1.5 * math.tanh(1.5625)])
    assert out.dtype == np.float64 and h.shape == (1, 1)
    np.testing.assert_allclose(c[0, 0], 1.5625, rtol=1e-12)
