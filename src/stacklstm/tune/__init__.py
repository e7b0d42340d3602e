"""Hyperparameter search on Optuna: one study in any Optuna storage, shared by many workers.

Each trial is a normal run folder (``DIR/trials/<number>``) trained by :func:`fit`; the
objective is its best validation loss. Trials are sampled by TPE and pruned on the
per-epoch validation loss through ``fit``'s epoch callbacks (a pruned trial's run folder is
finished, with ``stop_reason="callback"``). Many workers are many processes (on one machine
or many) running the same search with one storage URL: Optuna's own distributed mode, with
SQLite on one machine and PostgreSQL or MySQL across machines. With a heartbeat, a worker
that dies mid-trial leaves that trial marked failed by the next worker.

The search space is the ``[tune]`` section of the config file, one sub-table per config
section; a list is a choice, a table ``{low, high}`` a range (integers when both bounds are
integers; ``log = true`` samples on a log scale)::

    [tune.model]
    lstm_hidden_size = [16, 32, 64, 128]
    num_lstm_layers = {low = 1, high = 3}
    linear_layer_sizes = [[], [32], [32, 16]]
    [tune.train]
    lr = {low = 1e-4, high = 1e-2, log = true}

Without a ``[tune]`` section, :func:`default_space` is searched.

Example:
    >>> space = SearchSpace.from_dict({"model": {"lstm_hidden_size": [8, 16]}}, RunConfig())
    >>> import optuna
    >>> space.suggest(optuna.trial.FixedTrial({"model.lstm_hidden_size": 16}))
    {'model': {'lstm_hidden_size': 16}}
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..checks import SettingError, check_positive_int
from ..config import RunConfig
from ..plots.style import save_figure
from ..run import loop
from ..rundir.files import (
    HISTORY_PLOT,
    IMPORTANCE_PLOT,
    STUDY_FILE,
    TRIALS_TABLE,
)
from ..rundir.folder import atomic_write_text
from ..train.plan import check_settings
from .best import to_toml, write_best
from .space import Dimension, SearchSpace, default_space

log = logging.getLogger(__name__)

DEFAULT_STUDY = "stacklstm"
#: Seconds between a running trial's heartbeats; a trial silent for twice as long is failed.
DEFAULT_HEARTBEAT = 60
_OPEN_ATTEMPTS = 10


def _import_optuna():
    try:
        import optuna
    except ImportError as err:
        raise SettingError(
            "hyperparameter search needs Optuna, which is not installed; run "
            "`pip install 'stacklstm[tune]'`"
        ) from err
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


def open_study(
    storage: str, study: str, heartbeat: int = DEFAULT_HEARTBEAT, seed: int | None = None
):
    """Create or join the study ``study`` in the Optuna storage URL ``storage`` (TPE sampler,
    median pruner, heartbeat on the trials).

    Raises:
        SettingError: Optuna is not installed, or the storage cannot be opened.
    """
    optuna = _import_optuna()
    check_positive_int("heartbeat", heartbeat)
    # Workers started together race to create the storage's tables: the loser sees "already
    # exists" (or a locked SQLite file) and simply opens what the winner made.
    for attempt in range(_OPEN_ATTEMPTS):
        try:
            with warnings.catch_warnings():  # the heartbeat is marked experimental
                warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
                rdb = optuna.storages.RDBStorage(
                    storage, heartbeat_interval=heartbeat, grace_period=2 * heartbeat
                )
            return optuna.create_study(
                storage=rdb,
                study_name=study,
                direction="minimize",
                load_if_exists=True,
                sampler=optuna.samplers.TPESampler(seed=seed),
                pruner=optuna.pruners.MedianPruner(n_startup_trials=2, n_warmup_steps=1),
            )
        except Exception as err:  # sqlalchemy's errors, a missing database driver, a bad URL
            first = " ".join(str(err).split())[:300] or type(err).__name__
            racing = any(word in first for word in ("already exists", "locked", "UNIQUE"))
            if not racing or attempt + 1 == _OPEN_ATTEMPTS:
                raise SettingError(f"cannot open the study storage {storage!r}: {first}") from err
            time.sleep(0.2 * (attempt + 1))
    raise AssertionError("unreachable")


def _search_key(base: RunConfig, dims: SearchSpace, data_path: str | Path | None) -> dict:
    """What makes the trials of a study comparable: the table (its bytes' SHA-256; None:
    the bundled data), the settings every trial starts from and the searched settings."""
    digest = None
    if data_path is not None:
        with open(data_path, "rb") as handle:
            digest = hashlib.file_digest(handle, "sha256").hexdigest()
    return {
        "table_sha256": digest,
        "settings": json.dumps(base.to_dict(), sort_keys=True, default=str),
        "searched": sorted(f"{d.section}.{d.name}" for d in dims.dimensions),
    }


def check_same_search(
    the_study: Any, storage: str, base: RunConfig, dims: SearchSpace, data_path: Any
) -> None:
    """Record what the study searches (the first worker), or refuse a worker that searches
    something else: another table, other base settings or another space (its trials would
    be ranked against the others' and could name the wrong table in ``best.toml``).

    Raises:
        SettingError: The study was started on another search; the message says what differs.
    """
    key = _search_key(base, dims, data_path)
    known = the_study.user_attrs.get("stacklstm_search")
    if known is None:
        the_study.set_user_attr("stacklstm_search", key)
        return
    labels = {
        "table_sha256": "the table's contents",
        "settings": "the base settings",
        "searched": "the searched settings",
    }
    differs = [labels[k] for k in labels if known.get(k) != key[k]]
    if differs:
        raise SettingError(
            f"the study {the_study.study_name!r} in {storage} differs from this worker's "
            f"search in {' and '.join(differs)}, so their trials would not compare: use "
            "another study name or search folder, or the same table and settings"
        )


@dataclass(frozen=True)
class TuneResult:
    """What :func:`tune` did.

    Attributes:
        out_dir: The search folder.
        ran: Trials this worker ran.
        best_value: The study's best validation loss so far (all workers), or None.
        best_config: The run config of the best trial, or None.
        table: A text summary of the study's trials.
    """

    out_dir: Path
    ran: int
    best_value: float | None
    best_config: RunConfig | None
    table: str


def tune(
    base: RunConfig,
    out_dir: str | Path,
    *,
    trials: int,
    space: Mapping[str, Any] | None = None,
    storage: str | None = None,
    study: str = DEFAULT_STUDY,
    data_path: str | Path | None = None,
    heartbeat: int = DEFAULT_HEARTBEAT,
    quiet: bool = True,
) -> TuneResult:
    """Run ``trials`` trials of the study, then write the best config, a table and plots.

    Args:
        base: The settings every trial starts from; the space overrides some of them.
            ``init="auto"`` becomes ``"random"`` (``"pretrained"`` fine-tunes every trial).
        out_dir: The search folder: ``trials/<number>/`` run folders, ``study.db`` (the
            default storage), ``best.toml`` (the best trial's settings, and ``data_path`` as
            ``[data] file``), ``trials.csv``, ``history.png``, ``importances.png``.
        trials: Trials this worker runs (others may run more on the same study).
        space: The ``[tune]`` table; None searches :func:`default_space`.
        storage: An Optuna RDB storage URL (``sqlite:///...``, ``postgresql://...``,
            ``mysql://...``); None means ``sqlite:///<out_dir>/study.db``.
        study: The study's name: workers with the same storage and name share it.
        data_path: The table to train on (None: the bundled CO2 data).
        heartbeat: Seconds between heartbeats of a running trial.
        quiet: No progress bars.

    Raises:
        TypeError: ``base`` is not a RunConfig.
        SettingError: Bad settings, search space or storage, no validation windows
            (the objective is the validation loss), or a seed ensemble (``ensemble > 1``).
    """

    optuna = _import_optuna()
    check_positive_int("trials", trials)
    # the settings as a run's plan checks them (each trial's baselines are the naive ones)
    check_settings(base, "base", require_baselines=False)
    if base.data.val_size == 0 or (base.data.val_size is None and base.data.val_fraction <= 0):
        raise SettingError(
            "the search minimises the validation loss: `val_fraction` must be above 0 (or "
            "`val_size`)"
        )
    if base.train.ensemble > 1:
        raise SettingError(
            f"the search prunes trials on one model's validation losses, but `ensemble` is "
            f"{base.train.ensemble}; tune with `ensemble=1`, then train the best settings "
            "with `ensemble`",
            "ensemble",
        )
    if base.train.init == "auto":  # every trial from random parameters: the trials'
        # validation losses must share one scaling, and a fine-tune takes the weights'
        base = base.replace({"train": {"init": "random"}})
    dims = SearchSpace.from_dict(default_space(base) if space is None else space, base)
    out_dir = Path(out_dir)
    if storage is None:
        out_dir.mkdir(parents=True, exist_ok=True)
        storage = f"sqlite:///{(out_dir / STUDY_FILE).absolute()}"
    the_study = open_study(storage, study, heartbeat)
    check_same_search(the_study, storage, base, dims, data_path)
    out_dir.mkdir(parents=True, exist_ok=True)

    interrupted: list[int] = []  # the trial a Ctrl-C or SIGTERM stopped

    def objective(trial: Any) -> float:
        try:
            return run_trial(trial)
        except KeyboardInterrupt:  # Optuna marks the trial failed, then raises it again
            interrupted.append(trial.number)
            raise

    def run_trial(trial: Any) -> float:
        # A trial's report scores the naive baselines only: the statistical ones cost up to a
        # minute per trial and do not enter the objective; and a trial is not retrained on
        # its validation rows, which score it (best.toml keeps `baselines` and `retrain`).
        overrides = dims.suggest(trial)
        overrides["train"] = {**overrides.get("train", {}), "baselines": "naive", "retrain": "off"}
        cfg = base.replace(overrides)
        pruned = []

        def report(end: Any) -> bool:
            if end.val_loss is not None and math.isfinite(end.val_loss):
                trial.report(end.val_loss, end.epoch)
                if trial.should_prune():
                    pruned.append(end.epoch)
                    return True
            return False

        run_dir = out_dir / "trials" / f"{trial.number:04d}"
        trial.set_user_attr("run_dir", str(run_dir))
        result = loop.fit(cfg, run_dir, quiet=quiet, data_path=data_path, callbacks=[report])
        if pruned:
            raise optuna.TrialPruned(f"pruned after epoch {pruned[0]}")
        if result.best_val_loss is None or not math.isfinite(result.best_val_loss):
            raise optuna.TrialPruned("no finite validation loss")
        return result.best_val_loss

    before = len(the_study.trials)
    with _quiet_when_interrupted(interrupted):
        the_study.optimize(objective, n_trials=trials, catch=(loop.NonFiniteError,))
    log.info("ran %d trials of study %r", trials, study)
    return _summarise(
        the_study, base, dims, out_dir, ran=len(the_study.trials) - before, data_path=data_path
    )


@contextlib.contextmanager
def _quiet_when_interrupted(interrupted: list[int]) -> Iterator[None]:
    """Within the block, once ``interrupted`` names a trial, drop what Optuna logs about it
    (its "Trial N failed" warning with the traceback of the KeyboardInterrupt): an
    interrupted command's one line is the command line's own."""
    logger = logging.getLogger("optuna.study._optimize")  # where Optuna logs a failed trial

    def keep(record: logging.LogRecord) -> bool:
        return not interrupted

    logger.addFilter(keep)
    try:
        yield
    finally:
        logger.removeFilter(keep)


def best_overrides(the_study: Any, dims: SearchSpace) -> dict[str, dict[str, Any]]:
    """The best trial's overrides, decoded from Optuna's parameter values."""
    from optuna.trial import FixedTrial

    return dims.suggest(FixedTrial(the_study.best_trial.params))


def _summarise(
    the_study: Any,
    base: RunConfig,
    dims: SearchSpace,
    out_dir: Path,
    ran: int,
    data_path: str | Path | None = None,
):

    done = [t for t in the_study.trials if t.state.name == "COMPLETE"]
    best_value = best_config = None
    if done:
        best_config = base.replace(best_overrides(the_study, dims))
        best_value = the_study.best_value
        write_best(best_config, out_dir, data_path)
    frame = the_study.trials_dataframe(attrs=("number", "state", "value", "params"))
    atomic_write_text(out_dir / TRIALS_TABLE, frame.to_csv(index=False))
    table = frame.to_string(index=False) if len(frame) else "(no trials)"
    if len(done) >= 2:
        _plot(the_study, out_dir)
    return TuneResult(out_dir, ran, best_value, best_config, table)


def _plot(the_study: Any, out_dir: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from optuna.importance import PedAnovaImportanceEvaluator
    from optuna.visualization import matplotlib as optuna_plots

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # Optuna marks its matplotlib plots experimental
        for name, plot in (
            (HISTORY_PLOT, optuna_plots.plot_optimization_history),
            (IMPORTANCE_PLOT, optuna_plots.plot_param_importances),
        ):
            # PED-ANOVA: Optuna's own importance estimate, without scikit-learn
            kwargs = {"evaluator": PedAnovaImportanceEvaluator()} if name == IMPORTANCE_PLOT else {}
            ax = plot(the_study, **kwargs)
            figure = ax.figure
            figure.tight_layout()
            save_figure(figure, out_dir / name)
            plt.close(figure)


__all__ = [
    "DEFAULT_HEARTBEAT",
    "DEFAULT_STUDY",
    "Dimension",
    "SearchSpace",
    "TuneResult",
    "best_overrides",
    "check_same_search",
    "default_space",
    "open_study",
    "to_toml",
    "tune",
]
