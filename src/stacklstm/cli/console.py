"""Console output: the held-back log lines, the one-line error, the words of an interruption."""

from __future__ import annotations

import logging
import signal
import sys

from .commands import _RUNNING
from .flags import PROG


class _HeldLogs(logging.Handler):
    """Logs to stderr, but holds records back until the work has started.

    Info lines such as "filled 59 rows" come while the inputs are still being checked; if a
    check then fails, they are dropped so the error stays the only line on stderr. Records
    are released once the training loop logs (the run folder exists), or at a clean exit.
    """

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(logging.Formatter("%(message)s"))
        self.held: list[logging.LogRecord] | None = []

    def emit(self, record: logging.LogRecord) -> None:
        if self.held is not None and not record.name.startswith("stacklstm.run.loop"):
            self.held.append(record)
            return
        self.flush_held()
        self._write(record)

    def _write(self, record: logging.LogRecord) -> None:
        from tqdm import tqdm

        tqdm.write(self.format(record), file=sys.stderr)  # above the progress bar, if any

    def flush_held(self) -> None:
        held, self.held = self.held or [], None
        for record in held:
            self._write(record)

    def drop_held(self) -> None:
        self.held = None


def _fail(message: str) -> None:
    print(f"{PROG}: error: {' '.join(str(message).split())}", file=sys.stderr)


def _interrupted_words(signum: int) -> str:
    """The one line (after ``stacklstm: ``) an interrupted command prints."""
    from ..rundir.files import PLAN_FILE
    from ..rundir.folder import is_resumable

    words = "interrupted" if signum == signal.SIGINT else "terminated (SIGTERM)"
    out = _RUNNING.get("train_out")
    if out is not None and is_resumable(out):  # only train resumes, and only a real run
        words += f"; continue with: stacklstm train --out {out} --resume"
    backtest_out = _RUNNING.get("backtest_out")
    if backtest_out is not None and (backtest_out / PLAN_FILE).is_file():
        words += f"; continue with: stacklstm backtest --out {backtest_out} --resume"
    return words


class _NeverRaised(Exception):
    pass
