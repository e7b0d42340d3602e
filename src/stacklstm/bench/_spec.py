"""What a peer of the speed benchmark is (:class:`PeerSpec`), what it builds (:class:`Built`),
and the data every peer gets."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .workloads import OUTPUT_SIZE, Workload


class PeerUnavailable(RuntimeError):
    """The peer cannot run here (missing feature or library); the harness reports it as skipped."""


@dataclass
class Built:
    """What a worker can measure for one peer on one workload.

    Attributes:
        measures: name -> callable doing one unit of work and blocking on its results
            (``train``, ``forward``, ``stream``, ``gemm_xla``, ``gemm_torch``).
        compile: callable returning the seconds of one ``.lower(...).compile()`` of a freshly
            jitted train step (trace, lower, compile); ``None`` where there is none (torch).
        notes: how the peer is measured, for the report.
    """

    measures: dict[str, Callable[[], None]]
    compile: Callable[[], float] | None = None
    notes: str = ""


@dataclass(frozen=True)
class PeerSpec:
    """A peer: ``prepare() -> info`` (imports, backend start), then ``build(workload, seed)``."""

    name: str
    prepare: Callable[[], dict[str, Any]]
    build: Callable[[Workload, int], Built]
    description: str


def data_numpy(w: Workload, seed: int, batch: int | None = None, time_: int | None = None):
    """Fixed-seed inputs ``x (batch, time, features)`` and targets ``y (batch, 1)``, float32."""
    import numpy as np

    rng = np.random.default_rng(seed)
    b = w.batch if batch is None else batch
    t = w.time if time_ is None else time_
    x = rng.standard_normal((b, t, w.features), dtype=np.float32)
    y = rng.standard_normal((b, OUTPUT_SIZE), dtype=np.float32)
    return x, y
