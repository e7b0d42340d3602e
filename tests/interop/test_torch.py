"""Torch weight conversion: round trips, unknown and missing keys, no bias, projections."""

import jax
import numpy as np
import pytest

from stacklstm import StackedLSTM
from stacklstm.interop import from_torch, to_torch

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("bidirectional, proj", [(False, 0), (True, 0), (True, 3)])
def test_to_torch_round_trip_gives_same_outputs(bidirectional, proj):
    model = StackedLSTM(7, 2, bidirectional=bidirectional, proj_size=proj)
    x = np.random.default_rng(0).normal(size=(3, 9, 4)).astype(np.float32)
    params = model.init(jax.random.key(1), x)["params"]
    y, _ = model.apply({"params": params}, x)
    t_lstm = torch.nn.LSTM(4, 7, 2, batch_first=True, bidirectional=bidirectional, proj_size=proj)
    t_lstm.load_state_dict(to_torch(params))  # strict: every key must match
    with torch.no_grad():
        t_out, _ = t_lstm(torch.tensor(x))
    np.testing.assert_allclose(y, t_out.numpy(), atol=1e-5)
    back = from_torch(t_lstm.state_dict())
    jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, atol=1e-7), back, params)


def test_from_torch_rejects_unknown_and_missing_keys():
    sd = torch.nn.LSTM(2, 3, 2, batch_first=True).state_dict()
    with pytest.raises(ValueError, match="unexpected key 'extra'"):
        from_torch({**sd, "extra": torch.zeros(1)})
    del sd["weight_hh_l1"]
    with pytest.raises(ValueError, match="missing \\['weight_hh_l1'\\]"):
        from_torch(sd)
    bad = torch.nn.LSTM(2, 3, 2, batch_first=True).state_dict()
    bad["bias_hh_l0"] = torch.zeros(5)
    with pytest.raises(ValueError, match="bias_hh_l0 must have shape \\(12,\\)"):
        from_torch(bad)
    proj = torch.nn.LSTM(2, 3, 2, proj_size=2).state_dict()
    with pytest.raises(ValueError, match=r"weight_hr_l1 must have shape \(2, 3\); got \(2, 4\)"):
        from_torch({**proj, "weight_hr_l1": torch.zeros(2, 4)})
    with pytest.raises(ValueError, match=r"weight_hh_l0 must have shape \(12, 2\)"):
        from_torch({**proj, "weight_hh_l0": torch.zeros(12, 3)})
    del proj["weight_hr_l1"]
    with pytest.raises(ValueError, match=r"missing \['weight_hr_l1'\]"):
        from_torch(proj)
    with pytest.raises(TypeError, match=r"torch\.nn\.LSTM or its state_dict"):
        from_torch([1, 2])


def test_from_torch_without_bias_gives_zero_bias():
    t_lstm = torch.nn.LSTM(2, 3, bias=False, batch_first=True)
    params = from_torch(t_lstm)
    np.testing.assert_array_equal(params["layer_0"]["bias"], np.zeros(12))
    x = np.random.default_rng(0).normal(size=(2, 5, 2)).astype(np.float32)
    y, _ = StackedLSTM(3).apply({"params": params}, x)
    with torch.no_grad():
        np.testing.assert_allclose(y, t_lstm(torch.tensor(x))[0].numpy(), atol=1e-5)


def test_to_torch_rejects_mixed_or_misshapen_projection():
    params = from_torch(torch.nn.LSTM(2, 4, 2, proj_size=3))
    mixed = {**params, "layer_1": {k: v for k, v in params["layer_1"].items() if k != "kernel_hr"}}
    with pytest.raises(ValueError, match="layer_1 must hold bias, kernel_hh, kernel_hr, kernel_ih"):
        to_torch(mixed)
    bad = {**params, "layer_0": {**params["layer_0"], "kernel_hr": np.zeros((5, 3), np.float32)}}
    with pytest.raises(ValueError, match=r"layer_0/kernel_hr must be \(hidden, proj_size\)"):
        to_torch(bad)
