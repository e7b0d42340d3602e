"""StackedLSTM against torch.nn.LSTM with weights copied by from_torch: values and gradients."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from stacklstm import LSTMState, StackedLSTM
from stacklstm.interop import from_torch

torch = pytest.importorskip("torch")


def _configs(n, seed=0):
    rng = np.random.default_rng(seed)
    for k in range(n):
        yield dict(
            num_layers=int(rng.integers(1, 4)),
            hidden=int(rng.choice([1, 2, 5, 16, 33, 64])),
            features=int(rng.integers(1, 9)),
            batch=int(rng.integers(1, 6)),
            time=int(rng.integers(1, 21)),
            bidirectional=bool(k % 2),
            masked=bool((k // 2) % 2),
            with_state=bool(k % 3 == 0),
            seed=k,
        )


def _run_both(cfg):
    torch.manual_seed(cfg["seed"])
    rng = np.random.default_rng(cfg["seed"])
    L, H, D = cfg["num_layers"], cfg["hidden"], 2 if cfg["bidirectional"] else 1
    B, T, F = cfg["batch"], cfg["time"], cfg["features"]
    P = cfg.get("proj", 0)  # proj_size; h and the outputs have P features when > 0
    HP = P or H
    t_lstm = torch.nn.LSTM(
        F, H, L, batch_first=True, bidirectional=cfg["bidirectional"], proj_size=P
    )
    x = rng.normal(size=(B, T, F)).astype(np.float32)
    lengths = rng.integers(1, T + 1, size=B) if cfg["masked"] else None
    if cfg["with_state"]:
        h0 = rng.normal(size=(L * D, B, HP)).astype(np.float32)
        c0 = rng.normal(size=(L * D, B, H)).astype(np.float32)
    else:
        h0 = np.zeros((L * D, B, HP), np.float32)
        c0 = np.zeros((L * D, B, H), np.float32)
    w_out = rng.normal(size=(B, T, D * HP)).astype(np.float32)
    w_h = rng.normal(size=(L * D, B, HP)).astype(np.float32)
    w_c = rng.normal(size=(L * D, B, H)).astype(np.float32)

    # torch
    tx = torch.tensor(x, requires_grad=True)
    inp = tx
    if lengths is not None:
        inp = torch.nn.utils.rnn.pack_padded_sequence(
            tx, torch.tensor(lengths), batch_first=True, enforce_sorted=False
        )
    out, (hn, cn) = t_lstm(inp, (torch.tensor(h0), torch.tensor(c0)))
    if lengths is not None:
        out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=T)
    loss = (
        (out * torch.tensor(w_out)).sum()
        + (hn * torch.tensor(w_h)).sum()
        + (cn * torch.tensor(w_c)).sum()
    )
    loss.backward()
    t_grads = {k: v.grad.numpy() for k, v in t_lstm.named_parameters()}

    # stacklstm
    model = StackedLSTM(H, L, bidirectional=cfg["bidirectional"], proj_size=P)
    params = from_torch(t_lstm)
    state = tuple(LSTMState(h0[k], c0[k]) for k in range(L * D))

    def loss_fn(params, x):
        y, final = model.apply({"params": params}, x, state, seq_lengths=lengths)
        hs = jnp.stack([s.h for s in final])
        cs = jnp.stack([s.c for s in final])
        return jnp.sum(y * w_out) + jnp.sum(hs * w_h) + jnp.sum(cs * w_c), (y, hs, cs)

    grad_fn = jax.jit(jax.value_and_grad(loss_fn, argnums=(0, 1), has_aux=True))
    (_, (y, hs, cs)), (g_params, g_x) = grad_fn(params, x)
    return dict(
        torch=(out.detach().numpy(), hn.detach().numpy(), cn.detach().numpy(), tx.grad.numpy()),
        ours=(np.asarray(y), np.asarray(hs), np.asarray(cs), np.asarray(g_x)),
        t_grads=t_grads,
        g_params=g_params,
        suffixes=("", "_reverse")[:D],
        L=L,
    )


def _assert_matches_torch(r):
    (t_out, t_h, t_c, t_gx), (y, h, c, gx) = r["torch"], r["ours"]
    np.testing.assert_allclose(y, t_out, atol=1e-5, rtol=0)
    np.testing.assert_allclose(h, t_h, atol=1e-5, rtol=0)
    np.testing.assert_allclose(c, t_c, atol=1e-5, rtol=0)
    np.testing.assert_allclose(gx, t_gx, atol=1e-4, rtol=0)
    tg = r["t_grads"]
    for layer in range(r["L"]):
        for s in r["suffixes"]:
            g = r["g_params"][f"layer_{layer}{s}"]
            np.testing.assert_allclose(g["kernel_ih"], tg[f"weight_ih_l{layer}{s}"].T, atol=1e-4)
            np.testing.assert_allclose(g["kernel_hh"], tg[f"weight_hh_l{layer}{s}"].T, atol=1e-4)
            np.testing.assert_allclose(g["bias"], tg[f"bias_ih_l{layer}{s}"], atol=1e-4)
            np.testing.assert_allclose(g["bias"], tg[f"bias_hh_l{layer}{s}"], atol=1e-4)
            assert ("kernel_hr" in g) == (f"weight_hr_l{layer}{s}" in tg)
            if "kernel_hr" in g:
                np.testing.assert_allclose(
                    g["kernel_hr"], tg[f"weight_hr_l{layer}{s}"].T, atol=1e-4, rtol=0
                )


@pytest.mark.parametrize("cfg", list(_configs(16)), ids=lambda c: str(c["seed"]))
def test_stacked_lstm_matches_torch(cfg, kernel):
    _assert_matches_torch(_run_both(cfg))


# LSTMP (proj_size): uni- and bidirectional, 1-3 layers, packed and not, with and without an
# initial state. (The CPU kernel declines a projection, so one kernel setting is enough.)
PROJ_CONFIGS = [
    dict(num_layers=1, hidden=5, proj=2, features=3, batch=3, time=7, bidirectional=False,
         masked=False, with_state=True, seed=100),
    dict(num_layers=1, hidden=16, proj=3, features=2, batch=4, time=9, bidirectional=True,
         masked=True, with_state=False, seed=101),
    dict(num_layers=2, hidden=33, proj=7, features=4, batch=2, time=6, bidirectional=True,
         masked=False, with_state=True, seed=103),
    dict(num_layers=3, hidden=6, proj=1, features=1, batch=5, time=8, bidirectional=True,
         masked=True, with_state=True, seed=104),
    dict(num_layers=3, hidden=12, proj=5, features=8, batch=2, time=13, bidirectional=False,
         masked=True, with_state=False, seed=105),
]  # fmt: skip


@pytest.mark.parametrize("cfg", PROJ_CONFIGS, ids=lambda c: str(c["seed"]))
def test_stacked_lstm_with_projection_matches_torch(cfg):
    _assert_matches_torch(_run_both(cfg))
