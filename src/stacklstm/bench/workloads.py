"""Benchmark workloads and the matmul FLOP count that sets their roofline.

Every peer trains the same regressor on a workload: ``layers`` stacked LSTMs of width ``hidden``
over ``(batch, time, features)`` float32 inputs, the last step fed to the head
``Dense(32) + ELU, Dense(16) + ELU, Dense(1)``, MSE loss, Adam.

Example:
    >>> w = WORKLOADS["S"]
    >>> (w.batch, w.time, w.features, w.hidden, w.layers)
    (32, 10, 1, 64, 2)
    >>> train_flops(w) == 3 * forward_flops(w)
    True
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass

HEAD_SIZES: tuple[int, ...] = (32, 16)
"""Hidden sizes of the Dense+ELU head every peer uses (then ``Dense(1)``)."""
OUTPUT_SIZE = 1
LEARNING_RATE = 1e-3
GEMM_SHAPE: tuple[int, int, int] = (2048, 1024, 1024)
"""``(m, k, n)`` of the roofline GEMM ``(m, k) @ (k, n)``, float32."""

REMAT_PEERS: tuple[str, ...] = ("stacklstm", "stacklstm_remat", "gemm")


@dataclass(frozen=True)
class Workload:
    """One benchmark configuration (sizes named ``batch time features hidden layers``).

    Attributes:
        name: short key (``S``, ``M``, ``L``, ``R``, ``G1``, ``G2``, ``tiny``).
        batch: sequences per step.
        time: steps per sequence.
        features: input features per step.
        hidden: hidden size of every LSTM layer.
        layers: stacked LSTM layers.
        streaming: also measure one-step streaming latency (batch 1, one time step).
        peers: the only peers this workload runs (``None``: any peer).
    """

    name: str
    batch: int
    time: int
    features: int
    hidden: int
    layers: int
    streaming: bool = False
    peers: tuple[str, ...] | None = None

    def describe(self) -> str:
        """One line: ``batch 32, time 10, features 1, hidden 64, layers 2``."""
        return (
            f"batch {self.batch}, time {self.time}, features {self.features}, "
            f"hidden {self.hidden}, layers {self.layers}"
        )


WORKLOADS: dict[str, Workload] = {
    w.name: w
    for w in (
        Workload("tiny", batch=4, time=5, features=2, hidden=8, layers=2, streaming=True),
        Workload("S", batch=32, time=10, features=1, hidden=64, layers=2, streaming=True),
        Workload("M", batch=64, time=100, features=8, hidden=256, layers=2),
        Workload("L", batch=16, time=1000, features=4, hidden=128, layers=1),
        Workload("R", batch=8, time=20000, features=4, hidden=128, layers=1, peers=REMAT_PEERS),
        # GPU-sized (benchmarks/gpu_check.sh)
        Workload("G1", batch=256, time=100, features=32, hidden=512, layers=2),
        Workload("G2", batch=64, time=1000, features=8, hidden=256, layers=1),
    )
}


def lstm_forward_flops(w: Workload) -> int:
    """Matmul FLOPs of the LSTM stack's forward pass.

    Layer ``l`` with input size ``F_l`` (``features`` for the first, ``hidden`` after) does
    ``[x_t, h_{t-1}] @ W`` with ``W`` of shape ``(F_l + hidden, 4 * hidden)`` at every step:
    ``2 * batch * time * (F_l + hidden) * 4 * hidden``. Gate nonlinearities are not counted.
    """
    total = 0
    for layer in range(w.layers):
        f_in = w.features if layer == 0 else w.hidden
        total += 2 * w.batch * w.time * (f_in + w.hidden) * 4 * w.hidden
    return total


def head_forward_flops(w: Workload) -> int:
    """Matmul FLOPs of the head on the last step: ``2 * batch * sum(in * out)``."""
    sizes = (w.hidden, *HEAD_SIZES, OUTPUT_SIZE)
    return 2 * w.batch * sum(a * b for a, b in itertools.pairwise(sizes))


def forward_flops(w: Workload) -> int:
    """Matmul FLOPs of one forward pass (LSTM stack + head)."""
    return lstm_forward_flops(w) + head_forward_flops(w)


def train_flops(w: Workload) -> int:
    """Matmul FLOPs of one training step: forward + backward (twice the forward) = 3x forward."""
    return 3 * forward_flops(w)


def gemm_flops() -> int:
    """FLOPs of the roofline GEMM: ``2 * m * k * n``."""
    m, k, n = GEMM_SHAPE
    return 2 * m * k * n
