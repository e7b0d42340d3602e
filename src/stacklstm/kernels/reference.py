"""The slow, obvious LSTM: a Python loop over rows and steps in float64 numpy.

This is the oracle the fast kernel is tested against. It shares no code with ``lstm.py`` on
purpose: a bug there cannot hide here.
"""

from __future__ import annotations

import numpy as np


def _sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def lstm_layer_reference(
    params, x, h0, c0, seq_lengths=None, reverse: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """One layer, one direction, step by step.

    Args:
        params: mapping with ``kernel_ih (features, 4H)``, ``kernel_hh (H, 4H)``, ``bias (4H,)``;
            with a projection also ``kernel_hr (H, P)``, and then ``kernel_hh`` is ``(P, 4H)``.
        x: ``(batch, time, features)``.
        h0, c0: ``(batch, P or H)`` and ``(batch, H)``.
        seq_lengths: optional ``(batch,)``; steps at or after it are padding.
        reverse: walk each row from its last valid step to its first.

    Returns:
        ``(outputs (batch, time, P or H), h (batch, P or H), c (batch, H))`` as float64.
    """
    w_ih = np.asarray(params["kernel_ih"], np.float64)
    w_hh = np.asarray(params["kernel_hh"], np.float64)
    b = np.asarray(params["bias"], np.float64)
    w_hr = np.asarray(params["kernel_hr"], np.float64) if "kernel_hr" in params else None
    x = np.asarray(x, np.float64)
    batch, time, _ = x.shape
    hidden = w_hh.shape[1] // 4
    h_size = hidden if w_hr is None else w_hr.shape[1]
    out = np.zeros((batch, time, h_size))
    h_final = np.zeros((batch, h_size))
    c_final = np.zeros((batch, hidden))
    for row in range(batch):
        length = time if seq_lengths is None else int(seq_lengths[row])
        h = np.asarray(h0[row], np.float64).copy()
        c = np.asarray(c0[row], np.float64).copy()
        steps = range(length - 1, -1, -1) if reverse else range(length)
        for t in steps:
            z = x[row, t] @ w_ih + h @ w_hh + b
            i = _sigmoid(z[0:hidden])
            f = _sigmoid(z[hidden : 2 * hidden])
            g = np.tanh(z[2 * hidden : 3 * hidden])
            o = _sigmoid(z[3 * hidden : 4 * hidden])
            c = f * c + i * g
            h = o * np.tanh(c)
            if w_hr is not None:  # LSTMP: project h to P features
                h = h @ w_hr
            out[row, t] = h
        h_final[row], c_final[row] = h, c
    return out, h_final, c_final


def stacked_lstm_reference(
    params, x, states=None, seq_lengths=None, num_layers: int = 1, bidirectional: bool = False
):
    """A stack of layers built from :func:`lstm_layer_reference`, PyTorch's conventions.

    Returns ``(outputs (batch, time, D*H), [(h, c), ...])`` (``D*P`` with a projection) with
    the states in PyTorch's order (layer 0 forward, layer 0 reverse, layer 1 forward, ...).
    """
    x = np.asarray(x, np.float64)
    batch = x.shape[0]
    finals = []
    k = 0
    for layer in range(num_layers):
        outs = []
        for rev in (False, True) if bidirectional else (False,):
            p = params[f"layer_{layer}" + ("_reverse" if rev else "")]
            hidden = np.shape(p["kernel_hh"])[1] // 4
            h_size = np.shape(p["kernel_hr"])[1] if "kernel_hr" in p else hidden
            if states is None:
                h0, c0 = np.zeros((batch, h_size)), np.zeros((batch, hidden))
            else:
                h0, c0 = states[k]
            out, h, c = lstm_layer_reference(p, x, h0, c0, seq_lengths, rev)
            outs.append(out)
            finals.append((h, c))
            k += 1
        x = np.concatenate(outs, axis=-1)
    return x, finals
