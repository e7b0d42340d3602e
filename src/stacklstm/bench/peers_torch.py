"""The peers that run outside JAX: PyTorch's LSTM and the float32 GEMM roofline."""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from typing import Any

from ._spec import Built, data_numpy
from .peers_jax import _prepare_jax
from .workloads import GEMM_SHAPE, HEAD_SIZES, LEARNING_RATE, OUTPUT_SIZE, Workload

# --------------------------------------------------------------------------- torch


def bench_threads() -> int:
    """Threads every peer may use: ``STACKLSTM_BENCH_THREADS`` (set by the harness) or all cores."""
    return int(os.environ.get("STACKLSTM_BENCH_THREADS") or os.cpu_count() or 1)


def torch_device() -> str:
    """``cuda`` where PyTorch sees a GPU (unless ``STACKLSTM_BENCH_TORCH_DEVICE=cpu``), else
    ``cpu``: PyTorch runs where JAX runs, for a fair side by side."""
    import torch

    wanted = os.environ.get("STACKLSTM_BENCH_TORCH_DEVICE", "auto")
    if wanted == "cpu" or not torch.cuda.is_available():
        return "cpu"
    return "cuda"


def _prepare_torch() -> dict[str, Any]:
    import torch

    torch.set_num_threads(bench_threads())
    info = {"torch": torch.__version__, "torch_threads": torch.get_num_threads()}
    info["torch_device"] = torch_device()
    if info["torch_device"] == "cuda":
        info["torch_cuda_device"] = torch.cuda.get_device_name(0)
        info["cudnn"] = torch.backends.cudnn.version()
    return info


def _build_torch(w: Workload, seed: int) -> Built:
    import torch
    from torch import nn

    torch.manual_seed(seed)

    class TorchRegressor(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.lstm = nn.LSTM(w.features, w.hidden, num_layers=w.layers, batch_first=True)
            sizes = (w.hidden, *HEAD_SIZES)
            head: list[nn.Module] = []
            for a, b in itertools.pairwise(sizes):
                head += [nn.Linear(a, b), nn.ELU()]
            head.append(nn.Linear(sizes[-1], OUTPUT_SIZE))
            self.head = nn.Sequential(*head)

        def forward(self, x, state=None):  # (batch, time, features) -> (batch, 1), (h, c)
            out, state = self.lstm(x, state)
            return self.head(out[:, -1]), state

    device = torch_device()
    # On the GPU every unit of work ends with a synchronize, as the JAX peers block on theirs.
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    model = TorchRegressor().to(device)
    opt = torch.optim.Adam(model.parameters(), lr=LEARNING_RATE)
    x_np, y_np = data_numpy(w, seed)
    x, y = torch.from_numpy(x_np).to(device), torch.from_numpy(y_np).to(device)

    def train() -> None:  # eager: on the CPU every op has finished when step() returns
        opt.zero_grad(set_to_none=True)
        pred, _ = model(x)
        loss = torch.nn.functional.mse_loss(pred, y)
        loss.backward()
        opt.step()
        sync()

    def forward() -> None:
        with torch.inference_mode():
            model(x)
        sync()

    measures: dict[str, Callable[[], None]] = {"train": train, "forward": forward}
    if w.streaming:
        x_t = torch.from_numpy(data_numpy(w, seed + 1, batch=1, time_=1)[0]).to(device)
        zeros = torch.zeros(w.layers, 1, w.hidden, device=device)
        box = {"state": (zeros, zeros.clone())}

        def stream_step() -> None:
            with torch.inference_mode():
                _, box["state"] = model(x_t, box["state"])  # (h, c) in and out
            sync()

        measures["stream"] = stream_step
    notes = (
        f"eager nn.LSTM(batch_first=True) + head on {device}"
        f"{' (cuDNN), torch.cuda.synchronize after each call' if device == 'cuda' else ''}, "
        f"Adam; torch.set_num_threads({bench_threads()}); forward and stream under "
        "inference_mode; compile n/a"
    )
    return Built(measures=measures, notes=notes)


# --------------------------------------------------------------------------- gemm


def _prepare_gemm() -> dict[str, Any]:
    info = _prepare_jax()
    try:
        info.update(_prepare_torch())
    except ImportError as err:
        info["torch"] = f"not importable: {err}"
    return info


def _build_gemm(w: Workload, seed: int) -> Built:
    import jax
    import jax.numpy as jnp
    import numpy as np

    m, k, n = GEMM_SHAPE
    rng = np.random.default_rng(seed)
    a_np = rng.standard_normal((m, k), dtype=np.float32)
    b_np = rng.standard_normal((k, n), dtype=np.float32)
    a, b = jnp.asarray(a_np), jnp.asarray(b_np)
    matmul = jax.jit(jnp.matmul)

    def gemm_xla() -> None:
        matmul(a, b).block_until_ready()

    measures: dict[str, Callable[[], None]] = {"gemm_xla": gemm_xla}
    backends = ["jit(jnp.matmul)"]
    try:
        import torch
    except ImportError:
        pass
    else:
        ta, tb = torch.from_numpy(a_np), torch.from_numpy(b_np)
        out = torch.empty(m, n)

        def gemm_torch() -> None:
            torch.mm(ta, tb, out=out)

        measures["gemm_torch"] = gemm_torch
        backends.append("torch.mm")
    notes = f"float32 ({m}, {k}) @ ({k}, {n}) with {' and '.join(backends)}"
    return Built(measures=measures, notes=notes)
