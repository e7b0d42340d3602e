"""The ``stacklstm`` argument parser: one small builder per command; the setting flags come
from the config fields (:mod:`.flags`)."""

from __future__ import annotations

import argparse
from typing import Any

from ..config import DEFAULT_FOLDS
from ..config.presets import PRESETS
from .commands import _backtest, _evaluate, _export, _forecast, _predict, _train, _tune
from .flags import PROG, _add_setting_flags, _column_or_none, _int, _names, _Parser, _refit

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
  stacklstm predict runs/sales --output forecasts.csv
  stacklstm forecast --data sales.csv --target units --time-column day   # pretrained, no training
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
    _add_train(commands, formatter)
    _add_tune(commands, formatter)
    _add_evaluate(commands, formatter)
    _add_predict(commands, formatter)
    _add_forecast(commands, formatter)
    _add_export(commands, formatter)
    _add_backtest(commands, formatter)
    _add_bench(commands, formatter)
    return parser


def _add_train(commands: Any, formatter: type) -> None:
    train = commands.add_parser(
        "train",
        help="train a model; writes a run folder with checkpoints and a report",
        description="Train a stacked LSTM on a CSV/Parquet table (default: bundled CO2 data).",
        epilog=EPILOG,
        formatter_class=formatter,
    )
    train.add_argument("--data", metavar="FILE", help="CSV/Parquet table (default: bundled CO2)")
    train.add_argument("--config", metavar="FILE", help="TOML or YAML settings; flags override")
    train.add_argument(
        "--preset",
        choices=tuple(PRESETS),
        help="a named bundle of settings over --config's, flags override; accurate: the model "
        "and AutoETS, AutoARIMA, AutoTheta combined by the mean of their median and their "
        "weighted mean (--baselines all --combination median_and_weighted; forecast with "
        "predict --combine)",
    )
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


def _add_tune(commands: Any, formatter: type) -> None:
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
    tune.add_argument(
        "--trials", type=_int, default=10, metavar="N", help="trials this worker runs (default: 10)"
    )
    tune.add_argument(
        "--storage",
        metavar="URL",
        help="Optuna storage URL shared by the workers (default: sqlite:///OUT/study.db)",
    )
    tune.add_argument(
        "--study", default="stacklstm", metavar="NAME", help="study name (default: stacklstm)"
    )
    tune.add_argument(
        "--heartbeat",
        type=_int,
        default=60,
        metavar="S",
        help="seconds between a trial's heartbeats; a trial silent for 2*S is marked failed "
        "(default: 60)",
    )
    tune.add_argument("--quiet", action="store_true", help="no info logs")
    _add_setting_flags(tune)
    tune.set_defaults(func=_tune)


def _add_evaluate(commands: Any, formatter: type) -> None:
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


def _add_predict(commands: Any, formatter: type) -> None:
    predict = commands.add_parser(
        "predict",
        help="forecast the future of every series; writes a CSV",
        description=(
            "Forecast the next horizon steps after each series' last row, as statsforecast "
            "writes them: one row per series and step, unique_id, ds (the step's time stamp), "
            "stacklstm, and stacklstm-lo-<level>, stacklstm-hi-<level> for the run's "
            "intervals. --history writes the forecasts from every past origin instead."
        ),
        epilog=(
            "examples:\n  stacklstm predict runs/co2                     # the future, to "
            "RUN_DIR/predictions.csv\n"
            "  stacklstm predict runs/co2 --output -          # the CSV on standard output\n"
            "  stacklstm predict runs/co2 --data new.csv --output future.csv\n"
            "  stacklstm predict runs/co2 --history          # every origin, one row each\n"
            "  stacklstm predict runs/co2 --combine          # and the combination's forecasts\n"
            "  stacklstm predict runs/panel --data new.csv --unseen model  # series it never saw"
        ),
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
        "--ids",
        type=_names,
        metavar="A,B",
        help="for a run on a panel: forecast only these series (default: every series)",
    )
    predict.add_argument(
        "--history",
        dest="format",
        action="store_const",
        const="wide",
        help="the forecasts from every origin with a full input window instead of the future: "
        "one row per origin (its time stamp) and a column <target>_h<k> per target and "
        "horizon step (the same as --format wide)",
    )
    predict.add_argument(
        "--format",
        choices=("wide", "long"),
        default="long",
        help="long: the next horizon steps after each series' last row as rows unique_id, ds, "
        "stacklstm (with stacklstm-lo-<level>, stacklstm-hi-<level> for the run's intervals), "
        "as statsforecast writes them (default); wide: --history",
    )
    predict.add_argument(
        "--combine",
        action="store_true",
        help="also the combination's forecasts: the model and the baselines from the same "
        "origins weighed by the run's report.json weights (inverse validation MAE), their "
        "median (--combination median), the mean of the two (--preset accurate) or one set "
        "of weights for every series (--combination stacked); columns "
        "<target>_h<k>_combination (long: combination), and its split-conformal intervals "
        "at the run's interval levels (long: combination-lo-80, combination-hi-80, ...)",
    )
    predict.add_argument(
        "--no-fallback",
        dest="fallback",
        action="store_false",
        help="for a run on a panel: leave out the series the model cannot forecast (too short "
        "for one input window, or not trained on) instead of giving them the seasonal naive "
        "forecast from their last row (a column `forecaster` names which rows are which)",
    )
    predict.add_argument(
        "--unseen",
        choices=("fallback", "model"),
        default="fallback",
        help="for a run on a panel, the series of --data it was not trained on: fallback (the "
        "seasonal naive forecast, default) or model: the model forecasts them, each scaled on "
        "its own rows as the run scaled its series (a global model's forecast of new series)",
    )
    predict.add_argument("--quiet", action="store_true", help="no info logs")
    predict.set_defaults(func=_predict, format="long")


def _add_forecast(commands: Any, formatter: type) -> None:
    forecast = commands.add_parser(
        "forecast",
        help="forecast a table with the pretrained model, without training; writes a CSV",
        description=(
            "Forecast the next steps after each series' last row with the pretrained model of "
            "the data's time step (yearly, quarterly, monthly, weekly, daily or hourly; "
            "shipped with the package), without training: one row per series and step, "
            "unique_id, ds, stacklstm, stacklstm-lo-<level>, stacklstm-hi-<level>, as "
            "`predict` writes them. Each series is scaled on its own rows; a series shorter "
            "than the model's window is forecast too."
        ),
        epilog=(
            "examples:\n  stacklstm forecast                       # the bundled weekly CO2 "
            "record\n"
            "  stacklstm forecast --data sales.csv --target units --time-column day "
            "--horizon 7\n"
            "  stacklstm forecast --data stores.csv --id-column store --target sales "
            "--time-column week --output future.csv"
        ),
        formatter_class=formatter,
    )
    forecast.add_argument(
        "--data", metavar="FILE", help="table to forecast (CSV or Parquet; default: bundled CO2)"
    )
    forecast.add_argument(
        "--output",
        metavar="FILE",
        default="-",
        help="CSV to write (default: - , standard output)",
    )
    forecast.add_argument(
        "--horizon",
        type=_int,
        metavar="N",
        help="steps to forecast (default and most: the model's horizon: yearly 6, quarterly "
        "8, monthly 18, weekly 13, daily 14, hourly 48)",
    )
    forecast.add_argument("--target", default="co2", metavar="NAME", help="column to forecast")
    forecast.add_argument(
        "--time-column", default="date", metavar="NAME", help="column of time stamps"
    )
    forecast.add_argument(
        "--id-column",
        type=_column_or_none,
        metavar="NAME",
        help="column naming the series of a panel (default: the table is one series)",
    )
    forecast.add_argument(
        "--freq",
        metavar="ALIAS",
        help="the time step as a pandas alias (MS, W, D, h, ...; default: from the stamps)",
    )
    forecast.add_argument(
        "--level",
        type=_floats_percent,
        default=(80.0, 95.0),
        metavar="80,95",
        help="interval levels in percent, comma separated ('' for none; default 80,95)",
    )
    forecast.add_argument(
        "--calibrate",
        choices=("auto", "own", "weights"),
        default="auto",
        help="the intervals' errors: own, the table's last windows (each series forecast from "
        "its rows before its last --horizon); weights, the model's training-time windows; "
        "auto (default): own where the table gives 50 windows or more",
    )
    forecast.add_argument(
        "--blend",
        choices=("auto", "none"),
        default="auto",
        help="auto (default): where the table gives 50 windows or more, blend the model's "
        "forecast with the seasonal naive one (or that with drift) as did best on them; "
        "none: the model's forecast",
    )
    forecast.add_argument("--quiet", action="store_true", help="no info logs")
    forecast.set_defaults(func=_forecast)


def _floats_percent(text: str) -> tuple[float, ...]:
    """``"80,95"`` -> ``(80.0, 95.0)``; ``""`` -> ``()``."""
    try:
        return tuple(float(part) for part in text.split(",") if part.strip())
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected percentages such as 80,95, got {text!r}"
        ) from None


def _add_export(commands: Any, formatter: type) -> None:
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


def _add_backtest(commands: Any, formatter: type) -> None:
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
        "--step",
        type=_int,
        metavar="S",
        help="origins per fold: the steps between cut-offs, counted back from the end of the "
        "data (default: the horizon)",
    )
    backtest.add_argument(
        "--refit",
        type=_refit,
        metavar="every|never|N",
        help="train a model at every cut-off, only at the first, or at every N-th (default: every)",
    )
    _add_setting_flags(backtest)
    backtest.set_defaults(func=_backtest)


def _add_bench(commands: Any, formatter: type) -> None:
    # Listed here for --help; main() hands its arguments to the harness untouched.
    commands.add_parser(
        "bench",
        help="side-by-side speed benchmark against flax, Keras and PyTorch",
        description="stacklstm bench [--workloads S,M,L] ...: see stacklstm bench --help",
        add_help=False,
    )
