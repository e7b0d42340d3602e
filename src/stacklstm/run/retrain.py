"""Retraining on the validation rows: choose the epochs on validation, then train again on all.

Early stopping picks the epoch whose model scores best on the validation windows, but that
model never saw the validation rows: the most recent ones, which matter most to a forecast.
With ``retrain="on"`` (the default ``"auto"`` for a panel with validation windows and one
model) :func:`~stacklstm.run.fit` trains two ordinary runs, one after the other::

    RUN_DIR/selection/       the run chosen on validation: the settings as given (but
                             retrain="off", baselines="naive"), with early stopping; its
                             best epoch E is what it is for
    RUN_DIR/config.json ...  the run itself: a fresh model (the same seed) trained for E
                             epochs on the windows of the training and validation rows
                             together (scaled, and deseasonalised, on those rows), no
                             early stopping, its last epoch kept

``RUN_DIR`` is then an ordinary run folder (``predict``, ``evaluate``, ``export`` read it as
any): its ``config.json`` holds the settings as given, resolved (``retrain="on"``; the epochs
it trained are in the report's ``retrain`` entry). Its report scores the test windows with
the retrained model, and the validation split with the selection's model (its windows cut
with the selection's scaler), which did not train on it: so the combination's weights and
the conformal offsets, fitted on validation, stay out of sample.

Each run resumes bit-identically as any run does; ``resume=True`` on ``RUN_DIR`` continues
whichever of the two is unfinished. ``stop_after_steps`` counts the updates of both.

Example:
    >>> from stacklstm.config import RunConfig
    >>> selection_config(RunConfig()).train.retrain
    'off'
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from ..config import RunConfig
from ..rundir.files import CONFIG_FILE, SELECTION_DIR
from ..rundir.info import finished_progress, newest_step
from .results import FitResult

__all__ = [
    "RetrainResult",
    "lines_said_once",
    "selected_epochs",
    "selecting",
    "selection_config",
    "started",
    "steps_done",
]

# the loggers of the data and the plan: a retrained run plans its data three times (to
# resolve ``retrain``, for the selection and for itself), and says each of their lines once
_PLAN_LOGGERS = (
    "stacklstm.data.covariates",
    "stacklstm.data.rows",
    "stacklstm.data.season",
    "stacklstm.data.windows",
    "stacklstm.train.plan",
    "stacklstm.train.resolve",
)


class _Once(logging.Filter):
    def __init__(self) -> None:
        super().__init__()
        self.seen: set[tuple[str, int, str]] = set()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, record.levelno, record.getMessage())
        if key in self.seen:
            return False
        self.seen.add(key)
        return True


@contextlib.contextmanager
def lines_said_once() -> Iterator[None]:
    """Within the block, each line of the data's and the plan's loggers is logged once (a
    warning about a skipped series, a setting derived from the data): a retrained run plans
    the same data three times."""
    once = _Once()
    loggers = [logging.getLogger(name) for name in _PLAN_LOGGERS]
    for logger in loggers:
        logger.addFilter(once)
    try:
        yield
    finally:
        for logger in loggers:
            logger.removeFilter(once)


@dataclass(frozen=True)
class RetrainResult(FitResult):
    """What :func:`~stacklstm.run.fit` did with ``retrain="on"``.

    The fields are the retrained run's (``out_dir``, ``epochs``, ``best_step``,
    ``stop_reason``, ``report``), but ``step`` and ``skipped`` count both runs and
    ``best_val_loss`` is the selection's (the retrained run has no validation). Until the
    retrained run has begun they are the selection's, with ``stop_reason=
    "stop_after_steps"``.

    Attributes:
        selection: The selection run's :class:`~stacklstm.run.FitResult` (its report is
            None when it had finished before this call: it is in its folder).
    """

    selection: FitResult | None = None

    @classmethod
    def of(cls, chosen: FitResult, result: FitResult | None) -> RetrainResult:
        """The result of the selection ``chosen`` and the retrained run ``result`` (None:
        not begun)."""
        if result is None:
            return cls(
                out_dir=Path(chosen.out_dir).parent,
                step=chosen.step,
                epochs=0,
                best_val_loss=chosen.best_val_loss,
                best_step=None,
                stop_reason="stop_after_steps",
                skipped=chosen.skipped,
                report=None,
                selection=chosen,
            )
        return cls(
            out_dir=result.out_dir,
            step=chosen.step + result.step,
            epochs=result.epochs,
            best_val_loss=chosen.best_val_loss,
            best_step=result.best_step,
            stop_reason=result.stop_reason,
            skipped=chosen.skipped + result.skipped,
            report=result.report,
            selection=chosen,
        )


def selection_config(cfg: RunConfig) -> RunConfig:
    """The settings of the selection run: ``cfg`` without retraining, and with the naive
    baselines only (its report is not the run's; the statistical ones are fitted once, for
    the retrained run's report)."""
    return cfg.replace({"train": {"retrain": "off", "baselines": "naive"}})


def started(out_dir: str | Path) -> bool:
    """Whether the selection run of the retrained run in ``out_dir`` has begun."""
    return (Path(out_dir) / SELECTION_DIR / CONFIG_FILE).is_file()


def steps_done(out_dir: str | Path) -> int:
    """The updates of the run in ``out_dir`` so far, with its ``selection/`` run's where it
    has one (a retrained run: :attr:`RetrainResult.step` counts both)."""
    selection = Path(out_dir) / SELECTION_DIR
    return newest_step(out_dir) + (newest_step(selection) if selection.is_dir() else 0)


def selecting(out_dir: str | Path) -> bool:
    """Whether ``out_dir`` holds a retrained run's selection run but not yet the run itself
    (it stopped in its selection: its settings, but ``retrain`` and ``baselines``, are the
    selection's)."""
    return not (Path(out_dir) / CONFIG_FILE).is_file() and started(out_dir)


def selected_epochs(folder: str | Path) -> int:
    """The epochs the finished selection run in ``folder`` chose: the 1-based epoch of its
    best validation loss (0: a fine-tune whose pretrained weights validated best).

    Raises:
        ValueError: the run has not finished.
    """
    progress = finished_progress(folder)
    if progress is None or progress.get("best_epoch") is None:
        raise ValueError(f"the selection run {folder} has not finished; resume it first")
    return int(progress["best_epoch"])
