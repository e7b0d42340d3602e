"""One small function per command: the parsed flags -> the library call -> what it prints."""

from __future__ import annotations

import argparse
import logging
import sys
from datetime import datetime
from pathlib import Path
from typing import Any

from ..config import SECTIONS, RunConfig
from ..config.presets import with_preset
from ..configfile import read_config
from .flags import UsageError

#: What an interruption reports: the command running and, for train, its run folder.
_RUNNING: dict[str, Any] = {}


def _overrides(args: argparse.Namespace) -> dict[str, dict[str, Any]]:
    """``{"section": {"field": value}}`` of the setting flags actually given, over those of
    ``--preset`` (where the command has it)."""
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
    return with_preset(getattr(args, "preset", None), out)


def precheck(args: argparse.Namespace) -> None:
    """The checks of a command's inputs that need no jax (the settings, the table's file,
    the run folder), so that a mistake there is one line in a fraction of a second; the
    library checks them again, with the data, once it is loaded.

    Raises:
        ValueError: What the library would raise for the same mistake.
    """
    from ..checks import check_table_path

    if getattr(args, "data", None) is not None:
        check_table_path(args.data)
    if getattr(args, "run_dir", None) is not None:
        run_dir = Path(args.run_dir)
        if not run_dir.is_dir():
            raise ValueError(f"run folder not found: {run_dir}")
        if not (run_dir / "config.json").is_file():
            raise ValueError(f"{run_dir} is not a run folder: it has no config.json")
    if not hasattr(args, "config") or getattr(args, "resume", False):
        return  # no settings flags, or flags checked against the saved run's
    base = RunConfig() if args.config is None else read_config(args.config).config
    base.replace(_overrides(args))


def _train(args: argparse.Namespace) -> int:
    from .. import distributed
    from ..rundir.lock import unique_dir
    from ..rundir.outputs import check_new_folder

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
    from .. import distributed
    from ..config.schema import default_baselines
    from ..run.loop import fit
    from ..run.retrain import selecting
    from ..rundir.files import SELECTION_DIR
    from ..rundir.info import read_run_info

    data = args.data
    if args.config is not None:
        loaded = read_config(args.config)
        base, data = loaded.config, data if data is not None else loaded.data_path
    elif args.resume and selecting(out):  # a retrained run stopped in its selection run
        selection = read_run_info(out / SELECTION_DIR).config
        # its selection does not say whether it retrains on all rows or on those before the
        # test: the default ('auto': all), unless --retrain says otherwise
        base = selection.replace({"train": {"retrain": "auto", "baselines": default_baselines()}})
    elif args.resume:
        base = read_run_info(out).config  # flags given must then agree with the saved run
    else:
        base = RunConfig()
    cfg = base.replace(_overrides(args))
    _RUNNING["train_out"] = out
    result = fit(cfg, out, resume=args.resume, quiet=args.quiet, data_path=data)
    if not distributed.is_primary():
        return 0
    if result.report is not None:
        print(result.report.table)
    members = getattr(result, "members", None)  # a seed ensemble's EnsembleResult
    steps = (
        f"{result.step} steps"
        if members is None
        else (
            f"ensemble of {cfg.train.ensemble} members, {len(members)} trained or found finished, "
            f"{result.step} steps in all"
        )
    )
    if getattr(result, "selection", None) is not None:  # a RetrainResult
        steps += f" with its selection run in {out / SELECTION_DIR}"
    print(f"run folder: {out}  ({steps}, stopped by {result.stop_reason})")
    return 0


def _tune(args: argparse.Namespace) -> int:
    from ..rundir.outputs import check_new_folder
    from ..tune import tune

    space, data = None, args.data
    base = RunConfig()
    if args.out is not None:
        check_new_folder(args.out)
    if args.config is not None:
        loaded = read_config(args.config)
        base, space = loaded.config, loaded.space
        data = data if data is not None else loaded.data_path
    out = (
        Path(args.out) if args.out else Path("runs") / datetime.now().strftime("tune-%Y%m%d-%H%M%S")
    )
    result = tune(
        base.replace(_overrides(args)),
        out,
        trials=args.trials,
        space=space,
        storage=args.storage,
        study=args.study,
        data_path=data,
        heartbeat=args.heartbeat,
    )
    print(result.table)
    best = "none yet" if result.best_value is None else f"{result.best_value:.6g}"
    print(f"search folder: {out}  ({result.ran} trials here; best validation loss {best})")
    return 0


def _evaluate(args: argparse.Namespace) -> int:
    from ..report.evaluate import evaluate_run
    from ..rundir.files import REPORT_FILE

    report = evaluate_run(args.run_dir, args.data)
    print(report.table)
    print(f"wrote {Path(args.run_dir) / REPORT_FILE}")
    return 0


def _backtest(args: argparse.Namespace) -> int:
    from ..backtest import backtest, read_plan
    from ..rundir.files import BACKTEST_FILE
    from ..rundir.outputs import check_new_folder

    if not args.resume:
        check_new_folder(args.out)
    out = Path(args.out)
    _RUNNING["backtest_out"] = out
    data = args.data
    if args.config is not None:
        loaded = read_config(args.config)
        base, data = loaded.config, data if data is not None else loaded.data_path
    elif args.resume:
        base = read_plan(out)["config"]  # flags given must then agree with the saved backtest
    else:
        base = RunConfig()
    cfg = base.replace(_overrides(args))
    result = backtest(
        cfg,
        out,
        folds=args.folds,
        step=args.step,
        refit=args.refit,
        data_path=data,
        resume=args.resume,
        quiet=args.quiet,
    )
    print(result.table)
    print(f"wrote {out / BACKTEST_FILE}")
    return 0


def _predict(args: argparse.Namespace) -> int:
    from ..forecasting.prediction import predict
    from ..rundir.files import PREDICTIONS_FILE

    output = args.output if args.output else Path(args.run_dir) / PREDICTIONS_FILE
    frame = predict(
        args.run_dir,
        args.data,
        output,
        ids=args.ids,
        format=args.format,
        combine=args.combine,
        fallback=args.fallback,
        unseen=args.unseen,
    )
    # with `--output -` the CSV is standard output: the note goes to stderr
    note = sys.stderr if str(output) == "-" else sys.stdout
    print(f"wrote {len(frame)} forecasts to {output}", file=note)
    return 0


def _forecast(args: argparse.Namespace) -> int:
    from ..data import bundled_dataset_path, read_table
    from ..forecasting.zeroshot import forecast
    from ..rundir.outputs import check_output, write_output

    source = Path(args.data) if args.data is not None else bundled_dataset_path()
    check_output(args.output, inputs=(source,))
    frame = forecast(
        read_table(source),
        args.horizon,
        target=args.target,
        time_column=args.time_column,
        id_column=args.id_column,
        freq=args.freq,
        level=args.level,
        calibrate=args.calibrate,
        blend=args.blend,
    )
    write_output(args.output, frame.to_csv(index=False).encode(), inputs=(source,))
    note = sys.stderr if str(args.output) == "-" else sys.stdout
    print(f"wrote {len(frame)} forecasts to {args.output} ({frame.attrs['blend']})", file=note)
    return 0


def _export(args: argparse.Namespace) -> int:
    from ..forecasting.export import EXPORT_FILE, export_run

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
    for line in _export_inputs(meta):
        print(f"  {line}")
    return 0


def _export_inputs(meta: dict) -> list[str]:
    """The exported program's inputs beyond the windows, and its quantiles, one line each."""
    lines = []
    if meta.get("ids"):
        ids = [str(i) for i in meta["ids"]]
        named = ", ".join(ids[:3]) + (", ..." if len(ids) > 3 else "")
        lines.append(
            f"and each window's series: predict(windows, ids=...), one of {len(ids)} ({named})"
        )
    if meta.get("future_columns"):
        lines.append(
            f"and the known-future values over the horizon: future=(batch, "
            f"{meta['horizon']}, {len(meta['future_columns'])}) of "
            f"{', '.join(meta['future_columns'])}"
        )
    if meta.get("static_columns"):
        lines.append(
            f"and the static values: static=(batch, {len(meta['static_columns'])}) of "
            f"{', '.join(meta['static_columns'])}"
        )
    if meta.get("quantiles"):
        lines.append(
            f"predict_quantiles(...) gives the quantiles {', '.join(map(str, meta['quantiles']))}"
        )
    return lines
