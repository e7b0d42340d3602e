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

import argparse
import dataclasses
import logging
import os
import re
import signal
import sys
import typing
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

from .config import ALIASES, SECTIONS, RunConfig, describe, load_config

PROG = "stacklstm"

EPILOG = """\
examples:
  stacklstm train                        # default model on the bundled weekly CO2 data
  stacklstm train --data sales.csv --target units --features price --time-column day \\
      --window 28 --horizon 7 --season 7 --epochs 30 --out runs/sales
  stacklstm train --config run.toml --lr 1e-3 --out runs/sales2     # flags override the file
  stacklstm train --out runs/sales --resume                          # continue an interrupted run
  stacklstm train --ensemble 5 --out runs/co2-ens   # 5 seeds, forecasts with their median
  stacklstm train --out runs/co2 --coordinator 10.0.0.1:1234 --num-processes 2 --process-id 0
  stacklstm evaluate runs/sales          # report.json: model vs last-value and seasonal naive
  stacklstm predict runs/sales --data sales.csv --output forecasts.csv
  stacklstm train --data stores.csv --id-column store --target sales --time-column day \\
      --test-size 28 --val-size 28 --out runs/stores    # one model for every store's series
  stacklstm export runs/sales --output sales.stacklstm   # one file: jax + numpy to serve
  stacklstm tune --data sales.csv --target units --trials 20 --out runs/tune   # Optuna search

A config file (TOML or YAML) has the sections [data], [model] and [train] with the field
names of the flags below (written with underscores), e.g.
  [data]
  target = ["units"]
  window = 28
  [train]
  epochs = 30
"""

#: Arguments of ``fit``, ``initialize`` and friends -> the flags that set them.
_ARGUMENT_FLAGS = {
    "out_dir": "--out",
    "resume": "--resume",
    "data_path": "--data",
    "output": "--output",
    "coordinator": "--coordinator",
    "num_processes": "--num-processes",
    "process_id": "--process-id",
    "trials": "--trials",
    "heartbeat": "--heartbeat",
    "folds": "--folds",
    "step": "--step",
    "refit": "--refit",
    "ids": "--ids",
}


def _flag(name: str) -> str:
    return "--" + name.replace("_", "-")


def _setting_flags() -> dict[str, list[str]]:
    """``{field: [flag, alias flags...]}`` for every config field."""
    flags = {f.name: [_flag(f.name)] for cls in SECTIONS.values() for f in dataclasses.fields(cls)}
    for (_, old), (_, new) in ALIASES.items():
        if _flag(old) not in flags[new]:
            flags[new].append(_flag(old))
    return flags


def typed_flags(argv: Sequence[str]) -> dict[str, str]:
    """``{field: flag}`` for the setting flags as ``argv`` spells them (an alias included)."""
    typed = {}
    for name, flags in _setting_flags().items():
        for flag in flags:
            if any(arg == flag or arg.startswith(flag + "=") for arg in argv):
                typed[name] = flag
    return typed


def in_flag_words(err: BaseException, typed: dict[str, str] | None = None) -> str:
    """The one-line message of a library error, with Python names turned into flags.

    The library writes a name it suggests changing in backticks (`` `batch_size` ``,
    `` `resume=True` ``); a :class:`~stacklstm.checks.SettingError` about one field starts
    with that field's name. Each becomes the flag the user typed (``--hidden-size`` for
    ``lstm_hidden_size`` if that is what they typed).

    Example:
        >>> in_flag_words(ValueError("lower `batch_size` or pass `resume=True`"))
        'lower --batch-size or pass --resume'
    """
    typed = typed or {}
    known = {name: flags[0] for name, flags in _setting_flags().items()} | _ARGUMENT_FLAGS

    def flag(name: str) -> str | None:
        return typed.get(name) or known.get(name)

    def replace(match: re.Match[str]) -> str:
        name, value = match.group(1), match.group(2)
        if flag(name) is None:
            return match.group(0)
        if value == "True":
            return flag(name)
        if value == "False":
            return "--no-" + flag(name).removeprefix("--")
        return flag(name) if value is None else f"{flag(name)} {value}"

    message = " ".join(str(err).split()) or type(err).__name__
    message = re.sub(r"`([a-z_]+)(?:=([^`]*))?`", replace, message)
    field = getattr(err, "field", None)
    if field is not None and flag(field) and message.startswith(field + " "):
        message = flag(field) + message[len(field) :]
    return message


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


def _floats(text: str) -> tuple[float, ...]:
    parts = [part.strip() for part in text.split(",") if part.strip()]
    try:
        return tuple(float(part) for part in parts)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected comma-separated numbers such as 0.1,0.5,0.9, got {text!r}"
        ) from None


def _column_or_none(text: str) -> str | None:
    return None if text.strip().lower() in ("", "none") else text


def _int(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _int_or_none(text: str) -> int | None:
    return None if text.strip().lower() in ("", "none") else _int(text)


def _int_or_auto(text: str) -> int | str:
    return "auto" if text.strip().lower() == "auto" else _int(text)


def _float(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _refit(text: str) -> str | int:
    if text in ("every", "never"):
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected every, never or an integer, got {text!r}"
        ) from None


def _shown(value: Any) -> str:
    if isinstance(value, tuple):
        return ",".join(map(str, value)) or "''"
    return str(value)


def _add_setting_flags(parser: argparse.ArgumentParser) -> None:
    """One flag per config field; defaults are SUPPRESSed so only given flags override."""
    flags = _setting_flags()
    for section, cls in SECTIONS.items():
        group = parser.add_argument_group(f"{section} settings")
        hints = typing.get_type_hints(cls)
        helps = describe(cls)
        for field in dataclasses.fields(cls):
            kind = hints[field.name]
            default = field.default
            aliases = flags[field.name][1:]
            also = f"; also {', '.join(aliases)}" if aliases else ""
            kwargs: dict[str, Any] = {
                "dest": f"{section}.{field.name}",
                "default": argparse.SUPPRESS,
                "help": f"{helps[field.name]} (default: {_shown(default)}{also})",
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
            elif kind == tuple[float, ...]:
                kwargs.update(type=_floats, metavar="X,Y")
            elif kind == (str | None):
                kwargs.update(type=_column_or_none, metavar="NAME")
            elif kind == (int | None):
                kwargs.update(type=_int_or_none, metavar="N")
            elif kind == (int | Literal["auto"]):
                kwargs.update(type=_int_or_auto, metavar="N|auto")
            else:  # a new field type: teach this function about it
                raise TypeError(f"no flag type for {cls.__name__}.{field.name}: {kind}")
            group.add_argument(*flags[field.name], **kwargs)


def build_parser() -> argparse.ArgumentParser:
    """The ``stacklstm`` argument parser."""
    formatter = argparse.RawDescriptionHelpFormatter
    parser = _Parser(
        prog=PROG,
        description="Stacked-LSTM forecasting in JAX: train, evaluate, predict, backtest.",
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

    tune = commands.add_parser(
        "tune",
        help="hyperparameter search on Optuna; many workers can share one study",
        description=(
            "Search the [tune] section's space (or a default one) with Optuna's TPE sampler, "
            "pruning on the validation loss; each trial is a run folder under OUT/trials/. "
            "Start the same command several times (processes or machines) with one --storage "
            "to share the study. Writes OUT/best.toml, trials.csv and plots."
        ),
        epilog=(
            "example:\n  stacklstm tune --trials 10 --out runs/tune &\n"
            "  stacklstm tune --trials 10 --out runs/tune     # a second worker, same study"
        ),
        formatter_class=formatter,
    )
    tune.add_argument("--data", metavar="FILE", help="CSV/Parquet table (default: bundled CO2)")
    tune.add_argument(
        "--config", metavar="FILE", help="TOML or YAML settings with a [tune] search space"
    )
    tune.add_argument("--out", metavar="DIR", help="search folder (default: runs/tune-<date-time>)")
    tune.add_argument("--trials", type=_int, default=10, metavar="N",
                      help="trials this worker runs (default: 10)")  # fmt: skip
    tune.add_argument(
        "--storage", metavar="URL",
        help="Optuna storage URL shared by the workers (default: sqlite:///OUT/study.db)",
    )  # fmt: skip
    tune.add_argument("--study", default="stacklstm", metavar="NAME",
                      help="study name (default: stacklstm)")  # fmt: skip
    tune.add_argument(
        "--heartbeat", type=_int, default=60, metavar="S",
        help="seconds between a trial's heartbeats; a trial silent for 2*S is marked failed "
        "(default: 60)",
    )  # fmt: skip
    tune.add_argument("--quiet", action="store_true", help="no info logs")
    _add_setting_flags(tune)
    tune.set_defaults(func=_tune)

    evaluate = commands.add_parser(
        "evaluate",
        help="recompute a run's report (test metrics vs the baselines)",
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
            "time stamp and one column <target>_h<k> per target and horizon step; for a run "
            "on a panel, first an id column naming the series."
        ),
        epilog="example:\n  stacklstm predict runs/co2 --data co2.csv --output forecasts.csv",
        formatter_class=formatter,
    )
    predict.add_argument("run_dir", metavar="RUN_DIR", help="run folder written by train")
    predict.add_argument("--data", metavar="FILE", help="table to forecast (default: the run's)")
    predict.add_argument(
        "--output",
        metavar="FILE",
        help="CSV to write (default: RUN_DIR/predictions.csv); - for standard output",
    )
    predict.add_argument(
        "--ids", type=_names, metavar="A,B",
        help="for a run on a panel: forecast only these series (default: every series)",
    )  # fmt: skip
    predict.add_argument("--quiet", action="store_true", help="no info logs")
    predict.set_defaults(func=_predict)

    export = commands.add_parser(
        "export",
        help="write one self-contained forecaster file (jax.export) to serve with jax + numpy",
        description=(
            "Write the run's forecaster as one jax.export program (StableHLO, any batch size, "
            "CPU and CUDA) with the scaling and window normalisation inside: raw windows of "
            "the run's columns in, forecasts in original units out. Load it with "
            "stacklstm.serving.load(FILE).predict(windows)."
        ),
        epilog="example:\n  stacklstm export runs/co2 --output co2.stacklstm",
        formatter_class=formatter,
    )
    export.add_argument("run_dir", metavar="RUN_DIR", help="run folder written by train")
    export.add_argument(
        "--output", metavar="FILE", help="file to write (default: RUN_DIR/model.stacklstm)"
    )
    export.add_argument("--quiet", action="store_true", help="no info logs")
    export.set_defaults(func=_export)

    from .backtest import DEFAULT_FOLDS

    backtest = commands.add_parser(
        "backtest",
        help="rolling-origin backtest: train at several cut-offs, score every origin",
        description=(
            "Train at K cut-offs (each model on the rows before its cut-off, early stopping on "
            "their validation tail) and forecast every origin up to the next cut-off; score "
            "the model and the baselines on the same targets. Writes DIR/backtest.json, "
            "DIR/backtest.png and one run folder per trained fold. --test-fraction is not "
            "used: the folds are the test."
        ),
        epilog=(
            "example:\n  stacklstm backtest --folds 4 --step 52 --refit never --out bt/co2\n"
            "  stacklstm backtest --out bt/co2 --resume          # continue a killed backtest"
        ),
        formatter_class=formatter,
    )
    backtest.add_argument("--data", metavar="FILE", help="CSV/Parquet table (default: bundled CO2)")
    backtest.add_argument("--config", metavar="FILE", help="TOML or YAML settings; flags override")
    backtest.add_argument("--out", metavar="DIR", required=True, help="backtest folder")
    backtest.add_argument("--resume", action="store_true", help="continue the backtest in --out")
    backtest.add_argument("--quiet", action="store_true", help="no progress bar or info logs")
    backtest.add_argument(
        "--folds", type=_int, metavar="K", help=f"cut-offs (default: {DEFAULT_FOLDS})"
    )
    backtest.add_argument(
        "--step", type=_int, metavar="S",
        help="origins per fold: the steps between cut-offs, counted back from the end of the "
        "data (default: the horizon)",
    )  # fmt: skip
    backtest.add_argument(
        "--refit", type=_refit, metavar="every|never|N",
        help="train a model at every cut-off, only at the first, or at every N-th "
        "(default: every)",
    )  # fmt: skip
    _add_setting_flags(backtest)
    backtest.set_defaults(func=_backtest)

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
    out: dict[str, dict[str, Any]] = {section: {} for section in SECTIONS}
    for dest, value in vars(args).items():
        section, _, name = dest.partition(".")
        if name and section in out:
            out[section][name] = value
    for split in ("val", "test"):
        if {f"{split}_size", f"{split}_fraction"} <= out["data"].keys():
            raise UsageError(
                f"--{split}-size and --{split}-fraction are two forms of one setting; give one"
            )
    return out


def _train(args: argparse.Namespace) -> int:
    from . import distributed
    from .train.lock import unique_dir
    from .train.outputs import check_new_folder

    if args.resume and args.out is None:
        raise UsageError("train: --resume needs --out RUN_DIR, the run to continue")
    if args.out is not None and not args.resume:  # not inside another run's own files
        check_new_folder(args.out)
    # Before anything touches a device: join the other processes, if there are any.
    if distributed.initialize(args.coordinator, args.num_processes, args.process_id):
        if args.out is None:  # each process would pick its own date-time folder
            raise UsageError("train: a multi-process run needs --out DIR, shared by all")
        if not distributed.is_primary():  # process 0 speaks for the run
            logging.getLogger("stacklstm").setLevel(logging.WARNING)
    if args.out is None:  # a new folder runs/<date-time>[-N], never another run's
        with unique_dir("runs", datetime.now().strftime("%Y%m%d-%H%M%S")) as out:
            return _train_in(args, out)
    return _train_in(args, Path(args.out))


def _train_in(args: argparse.Namespace, out: Path) -> int:
    from . import distributed
    from .train.loop import fit
    from .train.rundir import read_run_info

    if args.config is not None:
        base = load_config(args.config)
    elif args.resume:
        base = read_run_info(out).config  # flags given must then agree with the saved run
    else:
        base = RunConfig()
    cfg = base.replace(_overrides(args))
    _RUNNING["train_out"] = out
    result = fit(cfg, out, resume=args.resume, quiet=args.quiet, data_path=args.data)
    if not distributed.is_primary():
        return 0
    if result.report is not None:
        print(result.report.table)
    members = getattr(result, "members", None)  # a seed ensemble's EnsembleResult
    steps = f"{result.step} steps" if members is None else (
        f"ensemble of {cfg.train.ensemble} members, {len(members)} trained or found finished, "
        f"{result.step} steps in all"
    )  # fmt: skip
    print(f"run folder: {out}  ({steps}, stopped by {result.stop_reason})")
    return 0


def _tune(args: argparse.Namespace) -> int:
    from .config import load_config_and_space
    from .train.outputs import check_new_folder
    from .tune import tune

    space = None
    base = RunConfig()
    if args.out is not None:
        check_new_folder(args.out)
    if args.config is not None:
        base, space = load_config_and_space(args.config)
    out = (
        Path(args.out) if args.out else Path("runs") / datetime.now().strftime("tune-%Y%m%d-%H%M%S")
    )
    result = tune(
        base.replace(_overrides(args)), out, trials=args.trials, space=space,
        storage=args.storage, study=args.study, data_path=args.data, heartbeat=args.heartbeat,
    )  # fmt: skip
    print(result.table)
    best = "none yet" if result.best_value is None else f"{result.best_value:.6g}"
    print(f"search folder: {out}  ({result.ran} trials here; best validation loss {best})")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from .train.files import REPORT_FILE
    from .train.report import evaluate_run

    report = evaluate_run(args.run_dir, args.data)
    print(report.table)
    print(f"wrote {Path(args.run_dir) / REPORT_FILE}")
    return 0


def _backtest(args: argparse.Namespace) -> int:
    from .backtest import backtest, read_plan
    from .train.files import BACKTEST_FILE
    from .train.outputs import check_new_folder

    if not args.resume:
        check_new_folder(args.out)
    out = Path(args.out)
    _RUNNING["backtest_out"] = out
    if args.config is not None:
        base = load_config(args.config)
    elif args.resume:
        base = read_plan(out)["config"]  # flags given must then agree with the saved backtest
    else:
        base = RunConfig()
    cfg = base.replace(_overrides(args))
    result = backtest(
        cfg, out, folds=args.folds, step=args.step, refit=args.refit, data_path=args.data,
        resume=args.resume, quiet=args.quiet,
    )  # fmt: skip
    print(result.table)
    print(f"wrote {out / BACKTEST_FILE}")
    return 0


def _predict(args: argparse.Namespace) -> int:
    from .train.files import PREDICTIONS_FILE
    from .train.prediction import predict

    output = args.output if args.output else Path(args.run_dir) / PREDICTIONS_FILE
    frame = predict(args.run_dir, args.data, output, ids=args.ids)
    # with `--output -` the CSV is standard output: the note goes to stderr
    note = sys.stderr if str(output) == "-" else sys.stdout
    print(f"wrote {len(frame)} forecasts to {output}", file=note)
    return 0


def _export(args: argparse.Namespace) -> int:
    from .train.export import EXPORT_FILE, export_run
    from .train.rundir import read_run_info

    try:
        n = read_run_info(args.run_dir).config.train.ensemble
    except ValueError:  # not a run folder: export_run says so, after its own checks
        n = 1
    if n > 1:
        member = Path(args.run_dir) / "members" / "0"
        raise UsageError(
            f"export: {args.run_dir} is a seed ensemble of {n} models forecasting with their "
            f"median, and an exported file holds one model; export a member instead, e.g. "
            f"stacklstm export {member}"
        )
    # as typed: a path written `dir/` names a folder, which Path() would hide
    output = args.output if args.output else str(Path(args.run_dir) / EXPORT_FILE)
    meta = export_run(args.run_dir, output)
    print(
        f"wrote {output}: windows (batch, {meta['input_steps']}, {len(meta['columns'])}) of "
        f"{', '.join(meta['columns'])} -> forecasts (batch, {meta['horizon']}, "
        f"{len(meta['targets'])}); platforms {', '.join(meta['platforms'])}"
    )
    if meta["seasonal"] is not None:  # deseasonalised: the program takes each window's phase
        print(
            f"  and the phase of each window's last row (season {meta['seasonal']['season']}): "
            "predict(windows, phase=...) or predict(windows, last_time=...)"
        )
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


#: What an interruption reports: the command running and, for train, its run folder.
_RUNNING: dict[str, Any] = {}


def _interrupted_words(signum: int) -> str:
    """The one line (after ``stacklstm: ``) an interrupted command prints."""
    from .train.files import PLAN_FILE
    from .train.rundir import is_resumable

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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 1 diverged, 2 user error,
    130/143 interrupted by SIGINT/SIGTERM)."""
    from ._quiet import dropping_dependency_noise
    from .signals import handling_signals

    process = argv is None  # the real command line, not a call from Python
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["bench"]:  # the harness has its own arguments and output
        from .bench.harness import main as bench_main

        return bench_main(argv[1:])
    _RUNNING.clear()
    # Orbax's abandoned reads and closed event loops are not the user's business; the real
    # command keeps them off the terminal until it exits (they may come after `main`).
    with dropping_dependency_noise(permanent=process), handling_signals(_interrupted_words):
        return _main(argv, process)


def _main(argv: list[str], process: bool) -> int:
    from .signals import Interrupted, stop_now, test_hook
    from .signals import check as check_signals

    NonFiniteError: type[Exception] = _NeverRaised  # until the training modules are loaded
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
        from .train.loop import NonFiniteError

        test_hook("imports")
        args = parser.parse_args(argv)
        logger.setLevel(logging.WARNING if args.quiet else logging.INFO)
        code = args.func(args)
        check_signals()  # a Ctrl-C that Python dropped still ends as one
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
