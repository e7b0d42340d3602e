"""Accuracy benchmark: stacklstm against the statistical forecasters on a panel of series.

Every series is forecast at horizon 1 and at one seasonal period (10 steps for the yearly
series without a season). The last 20 % of the rows are the test; the forecasts start at
every test origin (rolling origin, step 1) and every method is scored on exactly the same
``(origin, horizon step)`` targets, in original units: MASE (scaled by the in-sample
seasonal naive MAE of the rows before the test) and RMSE.

How the targets are made identical: the test windows are those of
:func:`stacklstm.data.make_splits` on the untransformed series (``test_fraction=0.2``,
``val_fraction=0.15``). stacklstm is trained through :func:`stacklstm.run.fit` (the code
path of ``stacklstm train``), whose report forecasts from the same test origins (the code
checks that they are equal, and fails otherwise). The baselines forecast from those origins:
last value and seasonal naive from :class:`~stacklstm.data.WindowSet`, and statsforecast's
AutoETS, AutoARIMA and AutoTheta built by :func:`stacklstm.baselines.statistical_models`,
fitted once on the rows before the test and moved forward to each origin without refitting
(the procedure of :func:`stacklstm.baselines.statistical_forecasts`, repeated here so that
the fit and the forecasts of each model can be timed on their own).

A *recipe* is a set of ``stacklstm train`` settings (any config field: ``epochs``,
``batch_size``, ``window``, ``lr``, ``normalize``, ``lstm_hidden_size`` ...) plus optional
benchmark-side transforms that prototype features the library does not have yet:

* ``log``: model ``log1p(y)`` of a non-negative series, forecast ``expm1`` of the model's
  forecast (a pointwise map: it uses nothing but the value itself);
* ``deseason``: subtract a seasonal pattern from the series before training and add it back
  to the forecasts. The pattern is a classical additive decomposition (centred moving average
  of one season, then the mean detrended value of each phase, centred to sum to 0) fitted on
  the *training rows only* (the first ``n_train`` rows of :func:`stacklstm.data.split_rows`),
  so it is fixed before any validation or test row is seen and is known, for every future
  row, at every forecast origin;
* ``ensemble=N``: N models with seeds ``N*s .. N*s+N-1`` for base seed ``s``, forecasting with
  the median of their forecasts (each member sees only what a single model sees); the
  library's own seed ensemble is the *setting* ``ensemble`` instead (recipe
  ``library-ensemble5``: one ``fit`` with ``ensemble=5``, seeds ``s .. s+4``, the median in
  the library's report);
* ``min_steps=K``: at least K optimiser steps: ``epochs`` is raised to
  ``ceil(K / steps_per_epoch)`` (steps per epoch from the number of training windows and the
  batch size), and ``patience`` is raised by the same factor, so that early stopping (on the
  validation rows, as always) keeps its share of the training.

Usage::

    python benchmarks/accuracy.py --out docs/accuracy.md              # the whole panel
    python benchmarks/accuracy.py --quick --out /tmp/accuracy.md      # 3 series, seed 0
    python benchmarks/accuracy.py --recipes default,log --seeds 0,1,2 --series air_passengers
    python benchmarks/accuracy.py --define 'big=lstm_hidden_size=128,epochs=200,log'

Every fit is cached in ``--work`` (default ``benchmarks/results/accuracy``) under a key of
its settings, so a rerun only fits what changed, and an ensemble reuses the single-model fits
of the same seeds. Accuracy is deterministic for a seed; fit times depend on the machine and
its load.
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import logging
import math
import os
import platform
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: config fields added after results were cached, with the value that changes nothing: left
#: out of a cache key at that value, so the older keys still hold
ADDED_LATER = (("train", "init", "random"), ("data", "season_window", None))
HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
TEST_FRACTION = 0.2
VAL_FRACTION = 0.15
NO_SEASON_HORIZON = 10  # the long horizon of a series without a season
STATISTICAL = ("auto_ets", "auto_arima", "auto_theta")
BASELINES = ("last_value", "seasonal_naive", *STATISTICAL)


# --------------------------------------------------------------------------- the panel


@dataclass(frozen=True)
class SeriesSpec:
    """One series of the panel: how to load it and its season.

    Attributes:
        name: Short name (the file name for the public ones).
        season: Period in steps (1: none).
        freq: ``monthly``, ``quarterly`` ...: for the table.
        source: One line on where it comes from (details in ``data/SOURCE.md``).
        load: ``() -> DataFrame`` with columns ``date`` and ``y``.
    """

    name: str
    season: int
    freq: str
    source: str
    load: Callable[[], pd.DataFrame]

    @property
    def horizons(self) -> tuple[int, int]:
        """``(1, season)``, or ``(1, NO_SEASON_HORIZON)`` without a season."""
        return (1, self.season if self.season > 1 else NO_SEASON_HORIZON)


def _csv(name: str) -> Callable[[], pd.DataFrame]:
    return lambda: pd.read_csv(DATA / f"{name}.csv")


def seasonal_trend(n: int = 240, seed: int = 1) -> pd.DataFrame:
    """Monthly: linear trend + two yearly harmonics + Gaussian noise (sd 2)."""
    t = np.arange(n)
    rng = np.random.default_rng(seed)
    y = (
        100.0
        + 0.3 * t
        + 10.0 * np.sin(2 * np.pi * t / 12)
        + 4.0 * np.cos(4 * np.pi * t / 12)
        + rng.normal(0.0, 2.0, n)
    )
    return pd.DataFrame({"date": pd.date_range("2000-01-01", periods=n, freq="MS"), "y": y})


def regime_change(n: int = 240, seed: int = 2) -> pd.DataFrame:
    """Monthly: yearly season + noise (sd 1.5); at 70 % of the rows (inside the validation
    rows, after every training row) the level jumps by 20 and a trend of 0.3 a month starts."""
    t = np.arange(n)
    rng = np.random.default_rng(seed)
    change = int(0.7 * n)
    after = t >= change
    y = 50.0 + 8.0 * np.sin(2 * np.pi * t / 12) + rng.normal(0.0, 1.5, n)
    y = y + after * (20.0 + 0.3 * (t - change))
    return pd.DataFrame({"date": pd.date_range("2000-01-01", periods=n, freq="MS"), "y": y})


def intermittent(n: int = 728, seed: int = 3) -> pd.DataFrame:
    """Daily intermittent demand: a sale on a day with probability 0.15 on weekdays and 0.45
    on weekends, of size 1 + Poisson(3); zero otherwise."""
    rng = np.random.default_rng(seed)
    dates = pd.date_range("2020-01-06", periods=n, freq="D")  # a Monday
    p = np.where(dates.dayofweek >= 5, 0.45, 0.15)
    y = (rng.random(n) < p) * (1 + rng.poisson(3.0, n))
    return pd.DataFrame({"date": dates, "y": y.astype(float)})


_M, _Q, _Y = "monthly", "quarterly", "yearly"
PANEL: tuple[SeriesSpec, ...] = (
    SeriesSpec("air_passengers", 12, _M, "Box-Jenkins airline passengers", _csv("air_passengers")),
    SeriesSpec("co2_monthly", 12, _M, "Mauna Loa CO2, monthly means", _csv("co2_monthly")),
    SeriesSpec("elec_equip", 12, _M, "Euro-area electrical equipment orders", _csv("elec_equip")),
    SeriesSpec("elnino", 12, _M, "Nino 1+2 sea surface temperature", _csv("elnino")),
    SeriesSpec("us_gdp", 4, _Q, "US real GDP (FRED)", _csv("us_gdp")),
    SeriesSpec("us_unemp", 4, _Q, "US unemployment rate (BLS)", _csv("us_unemp")),
    SeriesSpec("sunspots", 11, _Y, "yearly sunspot numbers (11-year cycle)", _csv("sunspots")),
    SeriesSpec("nile", 1, _Y, "Nile flow at Aswan (no season)", _csv("nile")),
    SeriesSpec("seasonal_trend", 12, _M, "synthetic: trend + season + noise", seasonal_trend),
    SeriesSpec("regime_change", 12, _M, "synthetic: level and trend change", regime_change),
    SeriesSpec("intermittent", 7, "daily", "synthetic: intermittent demand", intermittent),
)  # fmt: skip
PUBLIC = 8  # the first PUBLIC series are public data, the rest synthetic
QUICK_SERIES = ("air_passengers", "us_unemp", "seasonal_trend")


# --------------------------------------------------------------------------- recipes


@dataclass(frozen=True)
class Recipe:
    """Config overrides plus benchmark-side transforms (see the module docstring).

    Attributes:
        name: Column heading.
        settings: ``{config field: value}`` over the benchmark's base config (any field of
            DataConfig, ModelConfig or TrainConfig).
        log: Model ``log1p`` of non-negative series.
        deseason: Remove a training-rows seasonal pattern, add it back to the forecasts.
        ensemble: Members (median of their forecasts).
        min_steps: Least optimiser steps (epochs and patience raised to reach it).
        library: Start from the library's own defaults (``season``, ``window``, the training
            budget and deseasonalising as the library resolves them) instead of the
            benchmark's base settings; ``settings`` still apply over them.
    """

    name: str
    settings: dict[str, Any] = field(default_factory=dict)
    log: bool = False
    deseason: bool = False
    ensemble: int = 1
    min_steps: int = 0
    library: bool = False

    def describe(self) -> str:
        parts = ["the library's defaults (season, window, budget, deseasonalize: auto)"] * int(
            self.library
        )
        parts += [f"{k}={v}" for k, v in self.settings.items()]
        parts += [p for p, on in (("log", self.log), ("deseason", self.deseason)) if on]
        if self.min_steps:
            parts.append(f"min_steps={self.min_steps}")
        if self.ensemble > 1:
            parts.append(f"ensemble={self.ensemble}")
        return ", ".join(parts) or "nothing more (the base settings)"

    @property
    def n_members(self) -> int:
        """Members of the ensemble: the benchmark's (``ensemble``) or the library's (the
        setting ``ensemble``); 1 for a single model."""
        return self.ensemble if self.ensemble > 1 else int(self.settings.get("ensemble", 1))


RECIPES: dict[str, Recipe] = {
    r.name: r
    for r in (
        Recipe("default"),
        Recipe("log", log=True),
        Recipe("deseason", deseason=True),
        Recipe("steps1000", min_steps=1000),
        Recipe("log+deseason", log=True, deseason=True),
        Recipe("log+deseason+steps1000", log=True, deseason=True, min_steps=1000),
        Recipe("deseason+steps1000", deseason=True, min_steps=1000),
        Recipe("deseason+steps1000+ens5", deseason=True, min_steps=1000, ensemble=5),
        Recipe("ens5", ensemble=5),
        Recipe("log+deseason+ens5", log=True, deseason=True, ensemble=5),
        Recipe("log+deseason+steps1000+ens5", log=True, deseason=True, min_steps=1000, ensemble=5),
        Recipe("library", library=True),
        Recipe("library+season", {"season": "series"}, library=True),
        Recipe("library-ensemble5", {"ensemble": 5}, library=True),
        Recipe("library-auto-transform", {"target_transform": "auto"}, library=True),
        Recipe("library-init-auto", {"init": "auto"}, library=True),
        Recipe("library-init-random", {"init": "random"}, library=True),
    )
}
DEFAULT_RECIPES = (
    "default",
    "log",
    "deseason",
    "steps1000",
    "log+deseason",
    "log+deseason+steps1000",
    "deseason+steps1000",
    "deseason+steps1000+ens5",
)
QUICK_RECIPES = ("default", "deseason+steps1000")


def parse_recipe(text: str) -> Recipe:
    """``name=key=value,key=value,log,deseason,ensemble=5,min_steps=1000`` -> Recipe.

    Values are read as JSON where they parse (numbers, true/false), else kept as text; a
    comma-separated list value (``linear_layer_sizes``) is written with ``;``.

    Example:
        >>> r = parse_recipe("big=lstm_hidden_size=128,epochs=200,log,ensemble=3")
        >>> r.settings, r.log, r.ensemble
        ({'lstm_hidden_size': 128, 'epochs': 200}, True, 3)
    """
    name, sep, body = text.partition("=")
    if not sep or not name:
        raise ValueError(f"a recipe is NAME=SETTINGS, got {text!r}")
    settings: dict[str, Any] = {}
    flags: dict[str, Any] = {}
    for item in filter(None, body.split(",")):
        key, eq, raw = item.partition("=")
        key = key.strip().replace("-", "_")
        if key in ("log", "deseason") and not eq:
            flags[key] = True
            continue
        if not eq:
            raise ValueError(f"recipe {name!r}: {item!r} is not KEY=VALUE, log or deseason")
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = raw
        if isinstance(value, str) and ";" in value:
            value = [int(v) for v in value.split(";") if v]
        if key in ("ensemble", "min_steps"):
            flags[key] = int(value)
        else:
            settings[key] = value
    return Recipe(name, settings, **flags)


# --------------------------------------------------------------------------- transforms


@dataclass(frozen=True)
class Transform:
    """The benchmark-side target transform of one series: ``model = f(y)`` and back.

    ``forward`` maps original values to the values the model is trained on; ``inverse`` maps
    the model's forecasts of rows ``rows`` back. Both use only ``pattern`` (fitted on the
    training rows) and the value itself.
    """

    log: bool = False
    pattern: np.ndarray | None = None  # (season,) seasonal indices, phase 0 at row 0

    def forward(self, y: np.ndarray) -> np.ndarray:
        out = np.log1p(y) if self.log else np.array(y, dtype=np.float64)
        if self.pattern is not None:
            out = out - self.pattern[np.arange(len(out)) % len(self.pattern)]
        return out

    def inverse(self, forecast: np.ndarray, rows: np.ndarray) -> np.ndarray:
        """``forecast`` of series rows ``rows`` (same shape, any) back to original units."""
        out = np.array(forecast, dtype=np.float64)
        if self.pattern is not None:
            out = out + self.pattern[rows % len(self.pattern)]
        return np.expm1(out) if self.log else out


def make_transform(y: np.ndarray, recipe: Recipe, season: int, n_train: int) -> Transform:
    """The recipe's transform of series ``y``, fitted on its first ``n_train`` rows only.

    ``log`` is applied only to a series without negative values; ``deseason`` only to one
    with a season (>= 2) and at least 2 seasons of training rows. Otherwise the part is left
    out (the table notes it).
    """
    from stacklstm.data.season import classical_pattern  # the library's own decomposition

    log = recipe.log and bool(np.all(y >= 0))
    pattern = None
    if recipe.deseason and season >= 2 and n_train >= 2 * season:
        base = np.log1p(y[:n_train]) if log else y[:n_train]
        pattern = classical_pattern(base, season)
    return Transform(log=log, pattern=pattern)


def budget(
    recipe: Recipe, n_windows: int, batch_size: int, epochs: int, patience: int
) -> tuple[int, int, int]:
    """``(batch_size, epochs, patience)`` that give at least ``recipe.min_steps`` optimiser
    steps over ``n_windows`` training windows.

    The batch shrinks to ``n_windows // 8`` (not below 8) so that an epoch has about 8 steps
    or more (with few windows, batch 32 gives one step an epoch and drops the remainder);
    then ``epochs`` rises to reach ``min_steps`` and ``patience`` by the same factor.

    Example:
        >>> budget(Recipe("x", min_steps=1000), 57, 32, 60, 15)
        (8, 143, 36)
        >>> budget(Recipe("x", min_steps=1000), 2000, 32, 60, 15)
        (32, 60, 15)
    """
    from stacklstm.data import steps_per_epoch

    if not recipe.min_steps:
        return batch_size, epochs, patience
    batch_size = max(1, min(batch_size, max(8, n_windows // 8), n_windows))
    per_epoch = steps_per_epoch(n_windows, batch_size)
    if recipe.min_steps <= epochs * per_epoch:
        return batch_size, epochs, patience
    new_epochs = math.ceil(recipe.min_steps / per_epoch)
    return batch_size, new_epochs, math.ceil(patience * new_epochs / epochs)


# --------------------------------------------------------------------------- one task


@dataclass(frozen=True)
class Task:
    """A series at one horizon: the original series, its test windows and the MASE scale."""

    spec: SeriesSpec
    horizon: int
    times: Any  # the prepared series' time stamps (datetime64 or int64)
    y: np.ndarray  # (time,) original values after gap filling
    origin: np.ndarray  # (n,) test origins
    y_true: np.ndarray  # (n, horizon, 1)
    naive: dict[str, np.ndarray]  # last_value, seasonal_naive: (n, horizon, 1)
    scale: np.ndarray  # (1,) in-sample seasonal naive MAE of the rows before the test
    n_train: int
    n_seen: int

    @property
    def key(self) -> str:
        return f"{self.spec.name}/h{self.horizon}"


#: The benchmark's base settings pin what the library's defaults were before they became
#: "auto" (season and window are the series'), so that the prototype recipes keep their meaning.
LEGACY_TRAIN = {"epochs": 60, "batch_size": 32, "patience": 15, "min_steps": 0}


def data_config(spec: SeriesSpec, horizon: int, library: bool = False, **settings: Any):
    from stacklstm.config import DataConfig

    season = spec.season
    base: dict[str, Any] = dict(
        target=("y",),
        time_column="date",
        horizon=horizon,
        test_fraction=TEST_FRACTION,
        val_fraction=VAL_FRACTION,
    )
    if not library:
        base.update(season=season, window=2 * season if season > 1 else 10, deseasonalize=False)
    if settings.get("season") == "series":  # the series' own season, the rest auto
        settings = {**settings, "season": season}
    base.update(settings)
    return DataConfig(**base)


def make_task(spec: SeriesSpec, horizon: int) -> Task:
    from stacklstm.data import make_splits, prepare_series
    from stacklstm.metrics import seasonal_scale

    cfg = data_config(spec, horizon)
    series = prepare_series(spec.load(), cfg)
    splits, _ = make_splits(series, cfg)
    test = splits.test
    n_seen = splits.n_train + splits.n_val
    return Task(
        spec=spec,
        horizon=horizon,
        times=series.times,
        y=series.values[:, 0].copy(),
        origin=test.origin,
        y_true=test.y_true,
        naive={"last_value": test.last_value, "seasonal_naive": test.seasonal_naive(spec.season)},
        scale=seasonal_scale(series.values[:n_seen, :1], spec.season),
        n_train=splits.n_train,
        n_seen=n_seen,
    )


def statistical_timed(task: Task) -> dict[str, dict[str, Any]]:
    """Each statistical model fitted on the rows before the test and moved forward to every
    test origin: ``{name: {"forecast": (n, horizon, 1) or None, "fit_s", "forecast_s"}}``."""
    from stacklstm.baselines import statistical_models

    out: dict[str, dict[str, Any]] = {}
    first = int(task.origin[0])
    for name in STATISTICAL:
        model = statistical_models(task.spec.season, first + 1)[name]
        values = np.zeros((len(task.origin), task.horizon, 1))
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                start = time.perf_counter()
                model.fit(y=task.y[: first + 1])
                fit_s = time.perf_counter() - start
                for i, origin in enumerate(task.origin.tolist()):
                    values[i, :, 0] = model.forward(y=task.y[: origin + 1], h=task.horizon)["mean"]
                forecast_s = time.perf_counter() - start - fit_s
        except Exception as err:  # statsforecast's errors share no base class
            logging.warning("%s failed on %s: %s", name, task.key, err)
            out[name] = {"forecast": None, "fit_s": None, "forecast_s": None}
            continue
        out[name] = {"forecast": values, "fit_s": fit_s, "forecast_s": forecast_s}
    return out


def run_config(task: Task, recipe: Recipe, seed: int):
    """The RunConfig of one fit: base settings, the recipe's overrides, the step budget."""
    from stacklstm.config import SECTIONS, ModelConfig, RunConfig, TrainConfig
    from stacklstm.data import make_splits, prepare_series
    from stacklstm.train.resolve import resolve_data

    where = {name: section for section, cls in SECTIONS.items() for name in _fields(cls)}
    unknown = sorted(set(recipe.settings) - set(where))
    if unknown:
        raise ValueError(f"recipe {recipe.name!r}: unknown setting(s) {unknown}")
    per_section: dict[str, dict[str, Any]] = {"data": {}, "model": {}, "train": {}}
    for key, value in recipe.settings.items():
        per_section[where[key]][key] = value
    dcfg = data_config(task.spec, task.horizon, recipe.library, **per_section["data"])
    legacy = {} if recipe.library else LEGACY_TRAIN
    tcfg = TrainConfig(**{"baselines": "naive", **legacy, **per_section["train"], "seed": seed})
    if recipe.min_steps:  # the windows a run on these settings trains on ("auto" resolved)
        series = prepare_series(task.spec.load(), dcfg)
        n_windows = len(make_splits(series, resolve_data(dcfg, series.freq))[0].train)
        batch, epochs, patience = budget(
            recipe, n_windows, tcfg.batch_size, tcfg.epochs, tcfg.patience
        )
        tcfg = dataclasses.replace(tcfg, batch_size=batch, epochs=epochs, patience=patience)
    return RunConfig(data=dcfg, model=ModelConfig(**per_section["model"]), train=tcfg)


def _fields(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls)]


def fit_one(task: Task, recipe: Recipe, seed: int, work: Path) -> dict[str, Any]:
    """Train one model (cached in ``work``): ``{"forecast": (n, horizon, 1) original units,
    "fit_s", "steps", "epochs", "stop_reason"}``; a library seed ensemble (the setting
    ``ensemble``) also gives ``"members"``: ``(N, n, horizon, 1)`` its members' forecasts."""
    from stacklstm.run import fit

    cfg = run_config(task, recipe, seed)
    transform = make_transform(task.y, recipe, task.spec.season, task.n_train)
    config = cfg.to_dict()
    for section, name, value in ADDED_LATER:  # at these values they change no fit: the
        if config[section].get(name, value) == value:  # keys cached before them still hold
            config[section].pop(name, None)
    identity = {
        "series": task.spec.name,
        "config": config,
        "log": transform.log,
        "pattern": None if transform.pattern is None else transform.pattern.round(12).tolist(),
    }
    digest = hashlib.sha256(json.dumps(identity, sort_keys=True).encode()).hexdigest()[:16]
    cached = work / "fits" / f"{task.spec.name}-h{task.horizon}-s{seed}-{digest}.npz"
    if cached.exists():
        with np.load(cached, allow_pickle=False) as saved:
            meta = json.loads(str(saved["meta"]))
            extra = {"members": saved["members"]} if "members" in saved else {}
            return {"forecast": saved["forecast"], **extra, **meta}
    run_dir = work / "runs" / cached.stem
    csv = work / "data" / f"{cached.stem}.csv"
    csv.parent.mkdir(parents=True, exist_ok=True)
    pd.DataFrame({"date": task.times, "y": transform.forward(task.y)}).to_csv(
        csv, index=False, date_format="%Y-%m-%d", float_format="%.17g"
    )
    if run_dir.exists():  # an interrupted earlier fit: start again
        import shutil

        shutil.rmtree(run_dir)
    start = time.perf_counter()
    result = fit(cfg, run_dir, data_path=csv, quiet=True)
    fit_s = time.perf_counter() - start
    report = result.report
    if report is None or not np.array_equal(report.test_origin, task.origin):
        raise RuntimeError(f"{task.key}: the model's test origins differ from the baselines'")
    rows = task.origin[:, None] + np.arange(1, task.horizon + 1)  # (n, horizon) target rows
    forecast = transform.inverse(report.test_forecast[:, :, 0], rows)[:, :, None]
    meta = {
        "fit_s": fit_s,
        "steps": result.step,
        "epochs": result.epochs,
        "stop_reason": result.stop_reason,
        "best_step": result.best_step,
    }
    extra = {}
    if getattr(result, "members", ()):  # the library's seed ensemble: each member's forecast
        extra["members"] = np.stack(
            [
                transform.inverse(m.report.test_forecast[:, :, 0], rows)[:, :, None]
                for m in result.members
            ]
        )
        meta["member_steps"] = [m.step for m in result.members]
    cached.parent.mkdir(parents=True, exist_ok=True)
    np.savez(cached, forecast=forecast, meta=json.dumps(meta), **extra)
    return {"forecast": forecast, **extra, **meta}


def members(recipe: Recipe, seed: int) -> list[int]:
    """Seeds of the members of ``recipe`` for base seed ``seed``.

    Example:
        >>> members(Recipe("e", ensemble=5), 1)
        [5, 6, 7, 8, 9]
    """
    n = recipe.ensemble
    return list(range(n * seed, n * seed + n))


def score(task: Task, forecast: np.ndarray) -> dict[str, float | None]:
    from stacklstm.metrics import forecast_metrics

    if forecast is None or not np.isfinite(forecast).all():
        return {"mase": None, "rmse": None}
    m = forecast_metrics(task.y_true, forecast, task.scale)
    return {"mase": m["mase"], "rmse": m["rmse"]}


# --------------------------------------------------------------------------- the run


def run_task(task: Task, recipes: Sequence[Recipe], seeds: Sequence[int], work: Path) -> dict:
    """Scores and times of every method on one task (baselines cached in ``work``)."""
    out: dict[str, Any] = {
        "series": task.spec.name,
        "horizon": task.horizon,
        "n": int(task.y_true.size),
    }
    methods: dict[str, Any] = {}
    for name, values in task.naive.items():
        methods[name] = {**score(task, values), "fit_s": 0.0}
    stats_file = work / "baselines" / f"{task.spec.name}-h{task.horizon}.npz"
    if stats_file.exists():
        with np.load(stats_file, allow_pickle=False) as saved:
            stats = json.loads(str(saved["meta"]))
            for name in STATISTICAL:
                stats[name]["forecast"] = saved.get(name)
    else:
        stats = statistical_timed(task)
        stats_file.parent.mkdir(parents=True, exist_ok=True)
        arrays = {k: v["forecast"] for k, v in stats.items() if v["forecast"] is not None}
        meta = {k: {"fit_s": v["fit_s"], "forecast_s": v["forecast_s"]} for k, v in stats.items()}
        np.savez(stats_file, meta=json.dumps(meta), **arrays)
    for name in STATISTICAL:
        s = stats[name]
        methods[name] = {
            **score(task, s["forecast"]),
            "fit_s": s["fit_s"],
            "forecast_s": s["forecast_s"],
        }
    for recipe in recipes:
        per_seed = []
        for seed in seeds:
            fits = [fit_one(task, recipe, s, work) for s in members(recipe, seed)]
            forecast = np.median(np.stack([f["forecast"] for f in fits]), axis=0)
            per_seed.append(
                {
                    "seed": seed,
                    **score(task, forecast),
                    "fit_s": sum(f["fit_s"] for f in fits),
                    "steps": [s for f in fits for s in f.get("member_steps", [f["steps"]])],
                    "member_mase": [
                        score(task, m)["mase"]
                        for f in fits
                        for m in (f["members"] if "members" in f else [f["forecast"]])
                    ],
                }
            )
            logging.info(
                "%s %s seed %d: MASE %s", task.key, recipe.name, seed, per_seed[-1]["mase"]
            )
        methods[recipe.name] = {
            "mase": _mean([p["mase"] for p in per_seed]),
            "rmse": _mean([p["rmse"] for p in per_seed]),
            "fit_s": float(np.median([p["fit_s"] for p in per_seed])),
            "per_seed": per_seed,
        }
    out["methods"] = methods
    return out


def _mean(values: Sequence[float | None]) -> float | None:
    good = [v for v in values if v is not None]
    return float(np.mean(good)) if len(good) == len(values) and good else None


# --------------------------------------------------------------------------- the tables


def _cell(value: float | None, best: bool = False, digits: int = 3) -> str:
    if value is None:
        return "n/a"
    text = f"{value:.{digits}f}"
    return f"**{text}**" if best else text


def markdown(
    results: list[dict], recipes: Sequence[Recipe], seeds: Sequence[int], meta: dict
) -> str:
    """The results as markdown: MASE and RMSE per series and horizon, means, fit times."""
    names = [r.name for r in recipes] + list(BASELINES)
    lines = [
        "<!-- generated by benchmarks/accuracy.py; edit the prose around it, not the tables -->",
        f"Command: `{meta['command']}`  ",
        f"Seeds: {', '.join(map(str, seeds))} (a single-model recipe's figure is the mean over "
        "the seeds; an ensemble's is the mean over its ensembles)  ",
        f"Machine: {meta['machine']}; stacklstm {meta['stacklstm']}, jax {meta['jax']}, "
        f"statsforecast {meta['statsforecast']}; {meta['when']}",
        "",
        "Every fit: `test_fraction=0.2`, `val_fraction=0.15`, `baselines=naive` (the "
        "statistical ones are fitted by the benchmark); unless the recipe starts from the "
        "library's defaults, `season` of the series, `window` = 2 seasons (10 without a "
        "season), `deseasonalize=False`, epochs 60, batch 32, patience 15, `min_steps=0` (the "
        "fixed defaults older versions had), everything else the library's defaults; then the "
        "recipe:",
        "",
        *[f"- `{r.name}`: {r.describe()}" for r in recipes],
        "",
    ]
    for kind, title in (
        ("short", "horizon 1"),
        ("long", "horizon = one season (10 without a season)"),
    ):
        rows = [r for r in results if (r["horizon"] == 1) == (kind == "short")]
        if not rows:
            continue
        for metric in ("mase", "rmse"):
            lines += [f"### {metric.upper()}, {title}", ""]
            lines.append("| series | H | " + " | ".join(names) + " |")
            lines.append("|---|---|" + "---|" * len(names))
            for r in rows:
                vals = {n: r["methods"][n][metric] for n in names}
                good = [v for v in vals.values() if v is not None]
                best = min(good) if good else None
                cells = [
                    _cell(vals[n], vals[n] == best, 3 if metric == "mase" else 4) for n in names
                ]
                lines.append(f"| {r['series']} | {r['horizon']} | " + " | ".join(cells) + " |")
            if metric == "mase":
                public = {s.name for s in PANEL[:PUBLIC]}
                for label, subset in (
                    ("**mean**", rows),
                    ("mean, public series", [r for r in rows if r["series"] in public]),
                ):
                    if not subset or (len(subset) == len(rows) and label != "**mean**"):
                        continue
                    means = {n: _mean([r["methods"][n]["mase"] for r in subset]) for n in names}
                    good = [v for v in means.values() if v is not None]
                    lines.append(
                        f"| {label} | | "
                        + " | ".join(_cell(means[n], means[n] == min(good)) for n in names)
                        + " |"
                    )
                for label, subset in (
                    ("beats seasonal naive", rows),
                    ("beats seasonal naive, public", [r for r in rows if r["series"] in public]),
                ):
                    if not subset or (len(subset) == len(rows) and label != "beats seasonal naive"):
                        continue
                    wins = []
                    for n in names:
                        pairs = [
                            (r["methods"][n]["mase"], r["methods"]["seasonal_naive"]["mase"])
                            for r in subset
                        ]
                        wins.append(
                            f"{sum(a is not None and a < b for a, b in pairs)}/{len(pairs)}"
                        )
                    lines.append(f"| {label} | | " + " | ".join(wins) + " |")
            else:
                rel = {
                    n: _mean(
                        [
                            None
                            if r["methods"][n]["rmse"] is None
                            else r["methods"][n]["rmse"] / r["methods"]["seasonal_naive"]["rmse"]
                            for r in rows
                        ]
                    )
                    for n in names
                }
                lines.append(
                    "| **mean RMSE / seasonal naive RMSE** | | "
                    + " | ".join(_cell(rel[n]) for n in names)
                    + " |"
                )
            lines.append("")
    lines += _seed_table(results, recipes)
    lines += _time_table(results, recipes)
    return "\n".join(lines)


def _seed_table(results: list[dict], recipes: Sequence[Recipe]) -> list[str]:
    """Mean MASE of each recipe for each seed (how much of a difference is the seed's), and
    of each ensemble member: the ensemble against its best and worst member."""
    lines = [
        "### Mean MASE per seed, and per ensemble member",
        "",
        "| recipe | H | per seed | spread | members (each member's mean MASE) |",
        "|---|---|---|---|---|",
    ]
    for recipe in recipes:
        for kind in ("1", "season"):
            rows = [r for r in results if (r["horizon"] == 1) == (kind == "1")]
            if not rows:
                continue
            n_seeds = len(rows[0]["methods"][recipe.name]["per_seed"])
            per = [
                _mean([r["methods"][recipe.name]["per_seed"][i]["mase"] for r in rows])
                for i in range(n_seeds)
            ]
            good = [p for p in per if p is not None]
            spread = f"{max(good) - min(good):.3f}" if len(good) > 1 else "-"
            member_text = "-"
            if recipe.n_members > 1:
                texts = []
                for i in range(n_seeds):
                    member = [
                        _mean(
                            [
                                r["methods"][recipe.name]["per_seed"][i]["member_mase"][j]
                                for r in rows
                            ]
                        )
                        for j in range(recipe.n_members)
                    ]
                    done = [m for m in member if m is not None]
                    texts.append(
                        ", ".join(_cell(m) for m in member)
                        + (f" (best {min(done):.3f}, worst {max(done):.3f})" if done else "")
                    )
                member_text = "; ".join(texts)
            lines.append(
                f"| {recipe.name} | {kind} | {', '.join(_cell(p) for p in per)} | {spread} "
                f"| {member_text} |"
            )
    return [*lines, ""]


def _time_table(results: list[dict], recipes: Sequence[Recipe]) -> list[str]:
    """Seconds to fit, per series (both horizons summed for the LSTM recipes: one model
    each; the statistical models' fit at each horizon is the same model, the long one)."""
    names = [r.name for r in recipes] + list(STATISTICAL)
    lines = [
        "### Fit time, seconds (median over seeds; one horizon, the long one)",
        "",
        "| series | rows | " + " | ".join(names) + " |",
        "|---|---|" + "---|" * len(names),
    ]
    long = [r for r in results if r["horizon"] != 1]
    for r in long:
        cells = [_cell(r["methods"][n]["fit_s"], digits=1) for n in names]
        lines.append(f"| {r['series']} | {r['rows']} | " + " | ".join(cells) + " |")
    med = {
        n: [r["methods"][n]["fit_s"] for r in long if r["methods"][n]["fit_s"] is not None]
        for n in names
    }
    lines.append(
        "| **median** | | "
        + " | ".join(_cell(float(np.median(v)) if v else None, digits=1) for v in med.values())
        + " |"
    )
    fwd = [
        _cell(
            float(
                np.median(
                    [r["methods"][n]["forecast_s"] for r in long if r["methods"][n]["forecast_s"]]
                )
            ),
            digits=1,
        )
        for n in STATISTICAL
    ]
    steps = []
    for recipe in recipes:  # every member of every seed, both horizons
        done = [
            n for r in results for p in r["methods"][recipe.name]["per_seed"] for n in p["steps"]
        ]
        steps.append(f"{recipe.name} {int(np.median(done))} ({min(done)}-{max(done)})")
    lines += [
        "",
        "Optimiser steps trained (median, and range, over series, horizons and seeds; early "
        "stopping ends most runs before their last epoch): " + "; ".join(steps) + ".",
    ]
    timing = ", ".join(f"{n} {f} s" for n, f in zip(STATISTICAL, fwd, strict=True))
    lines += [
        "",
        "The statistical models' forecasts from every test origin (statsforecast's `forward`, no "
        f"refit) took a median of {timing} "
        "more per series; an LSTM's time includes its test forecasts and report.",
        "",
    ]
    return lines


# --------------------------------------------------------------------------- main

BEGIN, END = "<!-- accuracy tables: begin -->", "<!-- accuracy tables: end -->"


def write_tables(path: Path, tables: str) -> None:
    """Write ``tables`` between the markers of ``path``, keeping the prose around them (a new
    file, or one without the markers, gets the tables alone)."""
    block = f"{BEGIN}\n{tables}\n{END}"
    old = path.read_text() if path.exists() else ""
    if BEGIN in old and END in old:
        head, rest = old.split(BEGIN, 1)
        block = head + block + rest.split(END, 1)[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(block if block.endswith("\n") else block + "\n")


def _machine() -> str:
    cores = os.cpu_count()
    return f"{platform.processor() or platform.machine()}, {cores} cores"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="markdown file (a .json twin holds every figure)")
    parser.add_argument(
        "--quick",
        action="store_true",
        help=f"series {','.join(QUICK_SERIES)}, recipes {','.join(QUICK_RECIPES)}, seed 0",
    )
    parser.add_argument("--series", help="comma-separated series names (default: the whole panel)")
    parser.add_argument(
        "--recipes", help=f"comma-separated recipe names (default: {','.join(DEFAULT_RECIPES)})"
    )
    parser.add_argument(
        "--define",
        action="append",
        default=[],
        metavar="NAME=SETTINGS",
        help="add a recipe, e.g. 'big=lstm_hidden_size=128,epochs=200,log,deseason,"
        "ensemble=3,min_steps=1000'",
    )
    parser.add_argument("--seeds", default="0", help="comma-separated base seeds (default 0)")
    parser.add_argument("--horizons", default="both", choices=("both", "1", "season"))
    parser.add_argument(
        "--work",
        type=Path,
        default=HERE / "results" / "accuracy",
        help="run folders and the fit cache",
    )
    parser.add_argument(
        "--list", action="store_true", help="list the series and recipes, then exit"
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    for noisy in ("stacklstm", "absl", "jax", "orbax"):
        logging.getLogger(noisy).setLevel(logging.WARNING)

    recipes = dict(RECIPES)
    for text in args.define:
        r = parse_recipe(text)
        recipes[r.name] = r
    if args.list:
        for s in PANEL:
            print(f"{s.name:16} season {s.season:3} {s.freq:10} {s.source}")
        for r in recipes.values():
            print(f"{r.name:30} {r.describe()}")
        return 0
    series_names = QUICK_SERIES if args.quick else [s.name for s in PANEL]
    if args.series:
        series_names = args.series.split(",")
    chosen = (
        args.recipes.split(",")
        if args.recipes
        else list(QUICK_RECIPES if args.quick else DEFAULT_RECIPES)
    )
    chosen += [parse_recipe(t).name for t in args.define if parse_recipe(t).name not in chosen]
    by_name = {s.name: s for s in PANEL}
    bad = [n for n in series_names if n not in by_name] + [n for n in chosen if n not in recipes]
    if bad:
        parser.error(f"unknown series or recipe: {', '.join(bad)} (see --list)")
    seeds = [0] if args.quick else [int(s) for s in args.seeds.split(",")]
    use = [recipes[n] for n in chosen]

    results = []
    for spec in (by_name[n] for n in series_names):
        for horizon in spec.horizons:
            if args.horizons != "both" and (horizon == 1) != (args.horizons == "1"):
                continue
            task = make_task(spec, horizon)
            result = run_task(task, use, seeds, args.work)
            result["rows"] = len(task.y)
            results.append(result)
    import jax
    import statsforecast

    import stacklstm

    meta = {
        "command": " ".join(["python benchmarks/accuracy.py", *(argv or sys.argv[1:])]),
        "machine": _machine(),
        "stacklstm": stacklstm.__version__,
        "jax": jax.__version__,
        "statsforecast": statsforecast.__version__,
        "when": time.strftime("%Y-%m-%d"),
    }
    text = markdown(results, use, seeds, meta)
    print(text)
    if args.out:
        write_tables(args.out, text)
        args.out.with_suffix(".json").write_text(
            json.dumps(
                {"meta": meta, "recipes": {r.name: r.describe() for r in use}, "results": results},
                indent=1,
            )
            + "\n"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
