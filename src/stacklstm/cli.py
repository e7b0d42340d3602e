"""``stacklstm train | evaluate | predict``: parse -> config -> call. No logic of its own.

Every setting flag is made from a field of ``DataConfig``, ``ModelConfig`` or ``TrainConfig``
(``hidden_size`` -> ``--hidden-size``) with no default of its own: a flag that is not given
takes the value from ``--config FILE``, the resumed run, or the dataclass default.

A user error (bad flag, bad config, bad data, bad run folder) prints exactly one line
``stacklstm: error: ...`` on stderr and exits with status 2; set ``STACKLSTM_TRACEBACK=1`` to
see the traceback instead.
"""

from __future__ import annotations

import argparse
import dataclasses
import logging
import os
import sys
import typing
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from .data import DataConfig
from .train.config import ModelConfig, RunConfig, TrainConfig

PROG = "stacklstm"

EPILOG = """\
examples:
  stacklstm train                        # default model on the bundled weekly CO2 data
  stacklstm train --data sales.csv --target units --features price --time-column day \\
      --window 28 --horizon 7 --season 7 --epochs 30 --out runs/sales
  stacklstm train --config run.toml --lr 1e-3 --out runs/sales2     # flags override the file
  stacklstm train --out runs/sales --resume                          # continue an interrupted run
  stacklstm train --out runs/co2 --coordinator 10.0.0.1:1234 --num-processes 2 --process-id 0
  stacklstm evaluate runs/sales          # report.json: model vs last-value and seasonal naive
  stacklstm predict runs/sales --data sales.csv --output forecasts.csv

A config file (TOML or YAML) has the sections [data], [model] and [train] with the field
names of the flags below (written with underscores), e.g.
  [data]
  target = ["units"]
  window = 28
  [train]
  epochs = 30
"""

_HELP = {
    # data
    "target": "column(s) to forecast, comma separated",
    "features": "extra input column(s), comma separated ('' for none)",
    "time_column": "column of time stamps ('none': use the row order)",
    "window": "input time steps per window",
    "horizon": "time steps forecast per window",
    "stride": "step between training windows",
    "val_fraction": "share of the rows (the latest before test) for validation",
    "test_fraction": "share of the rows (the latest) for test",
    "scaler": "per-column scaling fitted on the training rows",
    "normalize": "'window': subtract each window's last target value",
    "difference": "model first differences instead of levels",
    "gaps": "fill missing values/time stamps, or reject them",
    # model
    "hidden_size": "hidden size of each LSTM layer",
    "num_layers": "stacked LSTM layers",
    "linear_layer_sizes": "Dense+ELU head sizes, comma separated ('' for none)",
    "mean_aggregation": "average LSTM outputs over time instead of the last step",
    "bidirectional": "bidirectional LSTM layers",
    "dropout": "dropout between LSTM layers",
    # train
    "epochs": "passes over the training windows",
    "batch_size": "windows per step (a multiple of the device count)",
    "lr": "peak learning rate (AdamW, warm-up then cosine decay)",
    "weight_decay": "AdamW weight decay",
    "warmup_fraction": "share of steps for the learning-rate warm-up",
    "clip_norm": "clip gradients to this global norm",
    "loss": "training loss",
    "patience": "early stopping: epochs without a better val loss (0: never)",
    "seed": "seed of initialisation, shuffling and dropout",
    "season": "period of the seasonal-naive baseline, in time steps",
    "log_every": "steps between metrics.jsonl lines (and NaN checks)",
    "checkpoint_every": "steps between checkpoints besides each epoch end (0: epoch ends only)",
    "skip_nonfinite": "skip NaN/Inf updates instead of stopping",
}

_SECTIONS: tuple[tuple[str, type], ...] = (
    ("data", DataConfig),
    ("model", ModelConfig),
    ("train", TrainConfig),
)


class UsageError(Exception):
    """A command-line usage error (printed as one line, exit status 2)."""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> typing.NoReturn:  # one line instead of usage + message
        raise UsageError(f"{self.prog}: {message}")


def _names(text: str) -> tuple[str, ...]:
    names = tuple(part.strip() for part in text.split(",") if part.strip())
    if text.strip() and not names:
        raise argparse.ArgumentTypeError(f"expected comma-separated column names, got {text!r}")
    return names


def _ints(text: str) -> tuple[int, ...]:
    parts = [part.strip() for part in text.split(",") if part.strip()]
    try:
        return tuple(int(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated integers such as 32,16, got {text!r}"
        ) from None


def _column_or_none(text: str) -> str | None:
    return None if text.strip().lower() in ("", "none") else text


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "''"
    return str(value)


def _add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per config field; defaults are SUPPRESSed so only given flags override."""
    for section, cls in _SECTIONS:
        group = parser.add_argument_group(f"{section} settings")
        hints = typing.get_type_hints(cls)
        for field in dataclasses.fields(cls):
            kind = hints[field.name]
            default = field.default
            kwargs: dict[str, Any] = {
                "dest": f"{section}.{field.name}",
                "default": argparse.SUPPRESS,
                "help": f"{_HELP[field.name]} (default: {_shown(default)})",
            }
            if kind is bool:
                kwargs["action"] = argparse.BooleanOptionalAction
            elif kind is int:
                kwargs.update(type=_int, metavar="N")
            elif kind is float:
                kwargs.update(type=_float, metavar="X")
            elif typing.get_origin(kind) is Literal:
                kwargs["choices"] = typing.get_args(kind)
            elif kind == tuple[str, ...]:
                kwargs.update(type=_names, metavar="A,B")
            elif kind == tuple[int, ...]:
                kwargs.update(type=_ints, metavar="N,M")
            elif kind == (str | None):
                kwargs.update(type=_column_or_none, metavar="NAME")
            else:  # a new field type: teach this function about it
                raise TypeError(f"no flag type for {cls.__name__}.{field.name}: {kind}")
            group.add_argument("--" + field.name.replace("_", "-"), **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The ``stacklstm`` argument parser."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog=PROG,
        description="Stacked-LSTM time-series forecasting in JAX: train, evaluate, predict.",
        epilog=EPILOG,
        formatter_class=formatter,
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    train = commands.add_parser(
        "train",
        help="train a model; writes a run folder with checkpoints and a report",
        description="Train a stacked LSTM on a CSV/Parquet table (default: bundled CO2 data).",
        epilog=EPILOG,
        formatter_class=formatter,
    )
    train.add_argument("--data", metavar="FILE", help="CSV/Parquet table (default: bundled CO2)")
    train.add_argument("--config", metavar="FILE", help="TOML or YAML settings; flags override")
    train.add_argument("--out", metavar="DIR", help="run folder (default: runs/<date-time>)")
    train.add_argument("--resume", action="store_true", help="continue the run in --out")
    train.add_argument("--quiet", action="store_true", help="no progress bar or info logs")
    _add_setting_flags(train)
    processes = train.add_argument_group(
        "multi-process settings",
        "Data-parallel training over several processes (hosts or GPUs), one command per "
        "process; each flag falls back to STACKLSTM_COORDINATOR, STACKLSTM_NUM_PROCESSES, "
        "STACKLSTM_PROCESS_ID. Under SLURM or Open MPI none is needed. See docs/distributed.md.",
    )
    processes.add_argument("--coordinator", metavar="HOST:PORT", help="address of process 0")
    processes.add_argument("--num-processes", type=_int, metavar="N", help="processes in all")
    processes.add_argument("--process-id", type=_int, metavar="I", help="this process, 0..N-1")
    train.set_defaults(func=_train)

    evaluate = commands.add_parser(
        "evaluate",
        help="recompute a run's report (test metrics vs naive baselines)",
        description="Score a run's best checkpoint; rewrites report.json and the plots.",
        epilog="example:\n  stacklstm evaluate runs/co2 --data co2_new.csv",
        formatter_class=formatter,
    )
    evaluate.add_argument("run_dir", metavar="RUN_DIR", help="run folder written by train")
    evaluate.add_argument("--data", metavar="FILE", help="table to score (default: the run's)")
    evaluate.add_argument("--quiet", action="store_true", help="no info logs")
    evaluate.set_defaults(func=_evaluate)

    predict = commands.add_parser(
        "predict",
        help="forecast from every origin of a table; writes a CSV",
        description=(
            "Forecast from every time step with a full input window. The CSV has the origin's "
            "time stamp and one column <target>_h<k> per target and horizon step."
        ),
        epilog="example:\n  stacklstm predict runs/co2 --data co2.csv --output forecasts.csv",
        formatter_class=formatter,
    )
    predict.add_argument("run_dir", metavar="RUN_DIR", help="run folder written by train")
    predict.add_argument("--data", metavar="FILE", help="table to forecast (default: the run's)")
    predict.add_argument(
        "--output", metavar="FILE", help="CSV to write (default: RUN_DIR/predictions.csv)"
    )
    predict.add_argument("--quiet", action="store_true", help="no info logs")
    predict.set_defaults(func=_predict)

    # Listed here for --help; main() hands its arguments to the harness untouched.
    commands.add_parser(
        "bench",
        help="side-by-side speed benchmark against flax, Keras and PyTorch",
        description="stacklstm bench [--workloads S,M,L] ...: see stacklstm bench --help",
        add_help=False,
    )
    return parser


def _overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``{"section": {"field": value}}`` of the setting flags actually given."""
    out: dict[str, dict[str, Any]] = {section: {} for section, _ in _SECTIONS}
    for dest, value in vars(args).items():
        section, _, name = dest.partition(".")
        if name and section in out:
            out[section][name] = value
    return out


def _train(args: argparse.Namespace) -> int:
    from . import distributed
    from .train.checkpoint import read_run_info
    from .train.config import load_config
    from .train.loop import fit

    if args.resume and args.out is None:
        raise UsageError("train: --resume needs --out RUN_DIR, the run to continue")
    # Before anything touches a device: join the other processes, if there are any.
    if distributed.initialize(args.coordinator, args.num_processes, args.process_id):
        if args.out is None:  # each process would pick its own date-time folder
            raise UsageError("train: a multi-process run needs --out DIR, shared by all")
        if not distributed.is_primary():  # process 0 speaks for the run
            logging.getLogger("stacklstm").setLevel(logging.WARNING)
    out = Path(args.out) if args.out else Path("runs") / datetime.now().strftime("%Y%m%d-%H%M%S")
    if args.config is not None:
        base = load_config(args.config)
    elif args.resume:
        base = read_run_info(out).config  # flags given must then agree with the saved run
    else:
        base = RunConfig()
    cfg = base.replace(_overrides(args))
    result = fit(cfg, out, resume=args.resume, quiet=args.quiet, data_path=args.data)
    if not distributed.is_primary():
        return 0
    if result.report is not None:
        print(result.report.table)
    print(f"run folder: {out}  ({result.step} steps, stopped by {result.stop_reason})")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from .train.report import REPORT_FILE, evaluate_run

    report = evaluate_run(args.run_dir, args.data)
    print(report.table)
    print(f"wrote {Path(args.run_dir) / REPORT_FILE}")
    return 0


def _predict(args: argparse.Namespace) -> int:
    from .train.report import PREDICTIONS_FILE, predict

    output = Path(args.output) if args.output else Path(args.run_dir) / PREDICTIONS_FILE
    frame = predict(args.run_dir, args.data, output)
    print(f"wrote {len(frame)} forecasts to {output}")
    return 0


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
        if self.held is not None and not record.name.startswith("stacklstm.train.loop"):
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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 diverged, 2 user error)."""
    from .train.loop import NonFiniteError

    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # the harness has its own arguments and output
        from .bench.harness import main as bench_main

        return bench_main(argv[1:])
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
        args = parser.parse_args(argv)
        logger.setLevel(logging.WARNING if args.quiet else logging.INFO)
        code = args.func(args)
        handler.flush_held()
        return code
    except UsageError as err:
        handler.drop_held()
        _fail(str(err).removeprefix(f"{PROG}: "))
        return 2
    except NonFiniteError as err:
        handler.flush_held()
        if traceback:
            raise
        _fail(str(err))
        return 1
    except (ValueError, TypeError, OSError) as err:  # DataError is a ValueError
        handler.drop_held()
        if traceback:
            raise
        _fail(str(err) or type(err).__name__)
        return 2
    except KeyboardInterrupt:
        handler.flush_held()
        print(f"{PROG}: interrupted; continue with: stacklstm train --out DIR --resume",
              file=sys.stderr)  # fmt: skip
        return 130
    finally:
        logger.removeHandler(handler)
        logger.setLevel(old_level)
        logger.propagate = old_propagate
        logging.captureWarnings(False)
        for other, propagate in zip(others, others_propagate, strict=True):
            other.removeHandler(handler)
            other.propagate = propagate
