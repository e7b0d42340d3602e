"""The peers of the side-by-side benchmark: one builder per way a user can train this LSTM.

Each peer is a :class:`PeerSpec`: ``prepare()`` does the heavy imports (so the worker can take its
memory baseline after them) and ``build(workload, seed)`` returns a :class:`Built` of zero-argument
callables, each doing one blocked-on unit of work. Heavy libraries are imported inside the
functions; a peer whose library is missing raises ``ImportError`` or :class:`PeerUnavailable` and
is reported as skipped.

All JAX peers share one train step (:func:`_jax_callables`): ``value_and_grad`` of the MSE, Adam,
``jit`` with ``donate_argnums=(0, 1)`` on params and optimizer state. It is deliberately not
``stacklstm.train.step``: that step also clips gradients, weights windows and guards against
NaNs, work the other peers would not be asked to do.
"""

from __future__ import annotations

from ._spec import Built as Built
from ._spec import PeerSpec as PeerSpec
from ._spec import PeerUnavailable as PeerUnavailable
from .peers_jax import (
    _build_flax_rnn,
    _build_flax_scan_seed,
    _build_jax_rnn_cudnn,
    _build_keras,
    _build_stacklstm,
    _prepare_jax,
    _prepare_keras,
)
from .peers_torch import _build_gemm, _build_torch, _prepare_gemm, _prepare_torch
from .peers_torch import bench_threads as bench_threads
from .peers_torch import torch_device as torch_device

PEERS: dict[str, PeerSpec] = {
    p.name: p
    for p in (
        PeerSpec("stacklstm", _prepare_jax, _build_stacklstm, "stacklstm.LSTMModel"),
        PeerSpec(
            "stacklstm_remat",
            _prepare_jax,
            lambda w, seed: _build_stacklstm(w, seed, remat=True),
            "stacklstm.LSTMModel(remat=True)",
        ),
        PeerSpec("flax_rnn", _prepare_jax, _build_flax_rnn, "nn.RNN(nn.OptimizedLSTMCell)"),
        PeerSpec("flax_scan_seed", _prepare_jax, _build_flax_scan_seed, "nn.scan(nn.LSTMCell)"),
        PeerSpec("keras", _prepare_keras, _build_keras, "Keras 3 LSTM on JAX"),
        PeerSpec("torch", _prepare_torch, _build_torch, "torch.nn.LSTM (eager; cuDNN on a GPU)"),
        PeerSpec(
            "jax_rnn_cudnn",
            _prepare_jax,
            _build_jax_rnn_cudnn,
            "jax.experimental.rnn.lstm (cuDNN, GPU only)",
        ),
        PeerSpec("gemm", _prepare_gemm, _build_gemm, "float32 GEMM roofline"),
    )
}
DEFAULT_PEERS: tuple[str, ...] = (
    "stacklstm",
    "flax_rnn",
    "flax_scan_seed",
    "keras",
    "torch",
    "gemm",
)
"""Peers run when ``--peers`` is not given (workloads with a ``peers`` list keep only those)."""
