"""``stacklstm train | evaluate | predict | backtest | export | tune``: parse -> config ->
call; no logic of its own.

Every setting flag is made from a field of ``DataConfig``, ``ModelConfig`` or ``TrainConfig``
(``lstm_hidden_size`` -> ``--lstm-hidden-size``; the older spellings of
``stacklstm.config.ALIASES`` as aliases, ``--hidden-size``), with its help text from the
field's metadata and no default of its own: a flag that is not given takes the value from
``--config FILE``, the resumed run, or the dataclass default.

A user error (bad flag, bad config, bad data, bad run folder: a ``ValueError``, which the
project's ``SettingError`` and ``DataError`` are, or an ``OSError``) prints exactly one line
``stacklstm: error: ...`` on stderr and exits with status 2; the library's messages name
Python fields, which :func:`in_flag_words` turns into the flags the user typed. Anything else
is a bug and keeps its traceback. Set ``STACKLSTM_TRACEBACK=1`` to see the traceback of a
user error too.
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Sequence

from .commands import _RUNNING, precheck
from .console import _fail, _HeldLogs, _interrupted_words, _NeverRaised
from .flags import PROG, UsageError, in_flag_words, typed_flags
from .parser import build_parser

__all__ = ["build_parser", "main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 diverged, 2 user error,
    130/143 interrupted by SIGINT/SIGTERM)."""
    from .._quiet import dropping_dependency_noise
    from ..signals import handling_signals

    process = argv is None  # the real command line, not a call from Python
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # the harness has its own arguments and output
        from ..bench.harness import main as bench_main

        return bench_main(argv[1:])
    _RUNNING.clear()
    # Orbax's abandoned reads and closed event loops are not the user's business; the real
    # command keeps them off the terminal until it exits (they may come after `main`).
    with dropping_dependency_noise(permanent=process), handling_signals(_interrupted_words):
        return _main(argv, process)


def _main(argv: list[str], process: bool) -> int:
    from ..signals import Interrupted, stop_now, test_hook
    from ..signals import check as check_signals

    parser = build_parser()
    handler = _HeldLogs()
    logger = logging.getLogger("stacklstm")
    old_level, old_propagate = logger.level, logger.propagate
    logger.addHandler(handler)
    logger.propagate = False  # our handler only, even if a library configured the root logger
    # Python warnings (e.g. pandas parsing dates) and Orbax's logs are held back the same
    # way, so an error found while checking the inputs stays the only line on stderr.
    others = [logging.getLogger(name) for name in ("py.warnings", "absl")]
    others_propagate = [other.propagate for other in others]
    for other in others:
        other.addHandler(handler)
        other.propagate = False
    logging.captureWarnings(True)
    traceback = os.environ.get("STACKLSTM_TRACEBACK", "") not in ("", "0")
    try:
        test_hook("imports")
        args = parser.parse_args(argv)  # jax is imported by the command that needs it
        precheck(args)  # before it is: a mistake is one line at once
        logger.setLevel(logging.WARNING if args.quiet else logging.INFO)
        code = args.func(args)
        check_signals()  # a Ctrl-C that Python dropped still ends as one
        handler.flush_held()
        return code
    except UsageError as err:
        handler.drop_held()
        _fail(str(err).removeprefix(f"{PROG}: "))
        return 2
    except _non_finite_error() as err:  # looked up once something was raised
        handler.flush_held()
        if traceback:
            raise
        _fail(in_flag_words(err, typed_flags(argv)))
        return 1
    except (ValueError, OSError) as err:  # SettingError and DataError are ValueErrors
        handler.drop_held()
        if traceback:
            raise
        _fail(in_flag_words(err, typed_flags(argv)))
        return 2
    except KeyboardInterrupt as err:  # Ctrl-C or SIGTERM: one line, 130 or 143
        handler.drop_held()
        signum = err.signum if isinstance(err, Interrupted) else signal.SIGINT
        if process:  # skip Python's teardown, which may crash while XLA threads are busy
            stop_now(signum)
        print(f"{PROG}: {_interrupted_words(signum)}", file=sys.stderr)
        return 128 + signum
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        logger.propagate = old_propagate
        logging.captureWarnings(False)
        for other, propagate in zip(others, others_propagate, strict=True):
            other.removeHandler(handler)
            other.propagate = propagate


def _non_finite_error() -> type[Exception]:
    """The training loop's ``NonFiniteError`` where it is loaded (a command that trained);
    else an exception nothing raises, so that an error before training needs no jax."""
    trainer = sys.modules.get("stacklstm.train.trainer")
    return getattr(trainer, "NonFiniteError", _NeverRaised)
