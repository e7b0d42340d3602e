"""The training loop's bookkeeping that every checkpoint saves with the state: where the data
stream is (:class:`Progress`) and the losses summed on the host (:class:`Meter`)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, ClassVar


@dataclass
class Meter:
    """Train losses read on the host since the last reset (a log interval, an epoch).

    Attributes:
        loss_sum: Sum of the finite losses.
        steps: Steps counted, skipped ones included.
        skipped: Steps whose update was skipped (loss or gradients not finite).

    Example:
        >>> m = Meter()
        >>> m.add(1.0); m.add(3.0); m.add(None)
        >>> m.mean, m.steps, m.skipped
        (2.0, 3, 1)
    """

    loss_sum: float = 0.0
    steps: int = 0
    skipped: int = 0

    def add(self, loss: float | None) -> None:
        """Count one step: its finite ``loss``, or None for a skipped update."""
        self.steps += 1
        if loss is None:
            self.skipped += 1
        else:
            self.loss_sum += loss

    @property
    def mean(self) -> float | None:
        """Mean loss of the steps taken, ``loss_sum / (steps - skipped)``; None before any
        step or when every step was skipped (not 0.0, which would look like a perfect fit)."""
        taken = self.steps - self.skipped
        return self.loss_sum / taken if taken else None

    def reset(self) -> None:
        self.loss_sum, self.steps, self.skipped = 0.0, 0, 0


@dataclass
class Progress:
    """The JSON part of a checkpoint: where the data stream is and what the host has summed.

    Attributes:
        epoch: 0-based epoch of the next batch (the data cursor).
        step_in_epoch: index of the next batch in that epoch.
        best_val_loss: best validation loss so far (None: none yet).
        best_step: step of that best checkpoint.
        best_epoch: 1-based epoch of that best checkpoint.
        bad_epochs: epochs since the validation loss last improved.
        interval: losses since the last log line.
        this_epoch: losses in the current epoch.
        total_skipped: skipped updates in the whole run.
        finished: training ended (all epochs, early stopping, or a callback said stop).
        stop_reason: ``"epochs"``, ``"early_stopping"`` or ``"callback"`` once finished.
    """

    epoch: int = 0
    step_in_epoch: int = 0
    best_val_loss: float | None = None
    best_step: int | None = None
    best_epoch: int | None = None
    bad_epochs: int = 0
    interval: Meter = field(default_factory=Meter)
    this_epoch: Meter = field(default_factory=Meter)
    total_skipped: int = 0
    finished: bool = False
    stop_reason: str | None = None

    # attribute -> prefix of its keys in the JSON
    _METERS: ClassVar[dict[str, str]] = {"interval": "interval", "this_epoch": "epoch"}

    def to_dict(self) -> dict[str, Any]:
        """Flat JSON (``interval_loss_sum``, ``epoch_steps``, ...), as checkpoints hold it."""
        out = {}
        for f in dataclasses.fields(self):
            value = getattr(self, f.name)
            if isinstance(value, Meter):
                prefix = self._METERS[f.name]
                out.update({f"{prefix}_{k}": v for k, v in dataclasses.asdict(value).items()})
            else:
                out[f.name] = value
        return out

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Progress:
        known = set(cls().to_dict())
        if not isinstance(data, dict) or set(data) != known:
            raise ValueError(f"checkpoint progress must hold the keys {sorted(known)}")
        data = dict(data)
        meters = {
            name: Meter(*(data.pop(f"{prefix}_{k}") for k in ("loss_sum", "steps", "skipped")))
            for name, prefix in cls._METERS.items()
        }
        return cls(**data, **meters)
