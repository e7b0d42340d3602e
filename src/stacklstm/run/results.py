"""What :func:`~stacklstm.run.fit` returns."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ..report.evaluate import Report
from ..rundir.info import finished_progress, newest_step


@dataclass(frozen=True)
class FitResult:
    """What :func:`fit` did.

    Attributes:
        out_dir: The run folder.
        step: Updates done in total.
        epochs: Epochs completed.
        best_val_loss: Best validation loss (None without validation windows).
        best_step: Step of the best checkpoint.
        stop_reason: ``"epochs"``, ``"early_stopping"``, ``"callback"`` or
            ``"stop_after_steps"``.
        skipped: Updates skipped because their loss or gradients were not finite.
        report: The test report, written when training finished (None otherwise).
    """

    out_dir: Path
    step: int
    epochs: int
    best_val_loss: float | None
    best_step: int | None
    stop_reason: str
    skipped: int
    report: Report | None


def finished_result(folder: str | Path) -> FitResult | None:
    """The result of the run in ``folder`` if its newest checkpoint says training finished
    and its report is written (``report=None``: it is in the folder); None otherwise."""
    progress = finished_progress(folder)
    if progress is None:
        return None
    return FitResult(
        out_dir=Path(folder),
        step=newest_step(folder),
        epochs=int(progress["epoch"]),
        best_val_loss=progress["best_val_loss"],
        best_step=progress["best_step"],
        stop_reason=str(progress["stop_reason"]),
        skipped=int(progress["total_skipped"]),
        report=None,
    )
