"""The forecasters a model is scored against: naive ones, and statsforecast's statistical ones.

``baselines="naive"``: the last value and the seasonal naive forecast (from
:class:`~stacklstm.data.WindowSet`). ``baselines="all"`` adds statsforecast's AutoETS, AutoARIMA
and AutoTheta with the data's ``season`` as their season length; they need the optional extra
(``pip install 'stacklstm[baselines]'``), imported only when they run.

A statistical model is fitted once, on the values up to the first forecast origin (in the
report: the training rows), and then forecasts from every origin with the
values observed up to that origin, without refitting: statsforecast's ``forward``, exactly
as its ``cross_validation(refit=False)`` does. ``refit_at`` fits again at chosen origins
(``cross_validation(refit=N)``), as the backtest's refits do.

The forecasts of one fit come from one pass over the series where the model allows it
(AutoETS, AutoARIMA: :mod:`stacklstm.baselines.rolling`), with the numbers of ``forward``
at every origin. The statistical models run in worker processes, started on first use and
kept, so that a SIGINT or SIGTERM ends the command at once instead of waiting for a native
fit that may last minutes (:mod:`stacklstm.baselines.worker`); their numbers are those of
the same calls made here.

Example:
    >>> import numpy as np
    >>> history = np.arange(40.0)[:, None]  # (time, n_targets)
    >>> out = statistical_forecasts(history, np.array([29, 30]), 2, 4)  # doctest: +SKIP
    >>> sorted(out), out["auto_arima"].shape  # doctest: +SKIP
    (['auto_arima', 'auto_ets', 'auto_theta'], (2, 2, 1))
"""

from __future__ import annotations

import importlib.util
import logging
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..checks import SettingError, check_choice
from ..config import BaselineKind
from ..intervals import Forecast, calibrate, conformal_offsets
from . import cache, worker
from .registry import BASELINES as BASELINES
from .registry import NAIVE as NAIVE
from .registry import STATISTICAL as STATISTICAL
from .registry import naive_forecasts as naive_forecasts
from .registry import statistical_models as statistical_models

log = logging.getLogger(__name__)

INSTALL = "pip install 'stacklstm[baselines]'"


def names(kind: BaselineKind) -> tuple[str, ...]:
    """The report keys of the baselines of ``kind`` (``"naive"`` or ``"all"``)."""
    check_choice("baselines", kind, ("naive", "all"))
    return NAIVE + (STATISTICAL if kind == "all" else ())


def statsforecast_available() -> bool:
    """Whether statsforecast is installed (looked up without importing it)."""
    return importlib.util.find_spec("statsforecast") is not None


def require(kind: BaselineKind) -> None:
    """Raise SettingError if ``kind`` needs statsforecast and it is not installed."""
    check_choice("baselines", kind, ("naive", "all"))
    if kind == "all" and not statsforecast_available():
        raise SettingError(
            f"baselines 'all' needs statsforecast, which is not installed: {INSTALL} "
            "(or pass `baselines=naive`)",
            "baselines",
        )


def residual_intervals(
    y_val: np.ndarray,
    val_point: np.ndarray | None,
    point: np.ndarray | None,
    quantiles: tuple[float, ...],
) -> Forecast | None:
    """A baseline's intervals from its own validation residuals: symmetric split-conformal
    intervals around ``point`` (see :func:`stacklstm.intervals.conformal_offsets`), per
    horizon step and target.

    Args:
        y_val: ``(n_val, horizon, n_targets)`` validation targets.
        val_point: The baseline's forecasts of them (None: it has none).
        point: ``(n, horizon, n_targets)`` the forecasts to give intervals to (None: none).
        quantiles: Ascending quantile levels, symmetric pairs around 0.5 (the point).

    Returns:
        The forecasts with quantiles at ``quantiles``, or None without validation forecasts.

    Example:
        >>> y_val = np.arange(10.0).reshape(10, 1, 1)
        >>> out = residual_intervals(y_val, np.full((10, 1, 1), 4.5), np.zeros((1, 1, 1)),
        ...                          (0.1, 0.5, 0.9))
        >>> out.quantiles.ravel().tolist()  # |residuals| 0.5, 0.5, ..., 4.5: the 9th smallest
        [-4.5, 0.0, 4.5]
    """
    if val_point is None or point is None or len(y_val) == 0 or not quantiles:
        return None
    if not (np.isfinite(val_point).all() and np.isfinite(point).all()):
        return None
    # the report's baseline intervals: too few windows for a level's guarantee is the
    # report's business (its coverage column shows it), not a warning to the user
    calibration = conformal_offsets(y_val, Forecast(val_point).with_levels(quantiles), warn=False)
    return calibrate(Forecast(point), calibration)


#: ``(name, forecasts done, forecasts in all, stage)``: a statistical baseline's progress
#: (forecasts count origins times targets; stage: ``"fitting"``, ``"forecasting"``,
#: ``"done"`` or ``"failed"``).
Progress = Callable[[str, int, int, str], None]


def statistical_forecasts(
    history: np.ndarray,
    origins: np.ndarray,
    horizon: int,
    season: int,
    refit_at: Sequence[int] = (),
    progress: Progress | None = None,
) -> dict[str, np.ndarray | None]:
    """Forecasts of statsforecast's AutoETS, AutoARIMA and AutoTheta from every origin.

    Each model (built once per target, :func:`statistical_models` with ``n_fit =
    origins[0] + 1``) is fitted on ``history[: origins[0] + 1]`` (and again on ``history[: o + 1]``
    at each origin ``o`` in ``refit_at``) and forecasts ``horizon`` steps from every origin
    ``o`` with ``forward(history[: o + 1])``: the procedure of statsforecast's
    ``cross_validation`` with ``step_size=1`` and ``refit=False`` (or ``refit=N``). The
    forecasts of one fit come from one pass over the rows where the model allows it
    (:mod:`stacklstm.baselines.rolling`), with the numbers of ``forward``; the fits (one
    per model, target and fit origin) run in parallel worker processes. A call repeated in
    the same process (the same values, origins and settings) returns the first one's result.

    Args:
        history: ``(time, n_targets)`` observed values in original units; each target is a
            series of its own.
        origins: ``(n,)`` ascending rows of the last value seen by each forecast.
        horizon: Steps forecast from each origin.
        season: Season length of the models.
        refit_at: Origins (of ``origins``) where the models are fitted again.
        progress: Called as the models fit and forecast (see :data:`Progress`).

    Returns:
        ``{name: (n, horizon, n_targets) float64}``; None for a model that failed to fit
        (a warning names it).
    """
    history = np.asarray(history, dtype=np.float64)
    origins = np.asarray(origins, dtype=np.int64)
    if history.ndim != 2:
        raise ValueError(f"history must be (time, n_targets), got shape {history.shape}")
    if origins.ndim != 1:
        raise ValueError(f"origins must be (n,), got shape {origins.shape}")
    if origins.size == 0:
        return dict.fromkeys(STATISTICAL, np.zeros((0, horizon, history.shape[1])))
    if np.any(np.diff(origins) <= 0) or origins[0] < 0 or origins[-1] >= len(history):
        raise ValueError(f"origins must ascend within the {len(history)} rows of history")
    unknown = sorted(set(int(o) for o in refit_at) - set(origins.tolist()))
    if unknown:
        raise ValueError(f"refit_at must be among the origins, got {unknown}")
    fit_here = sorted({int(origins[0]), *(int(o) for o in refit_at)})
    starts = np.searchsorted(origins, fit_here)  # where the origins of each fit start
    pieces = np.split(origins, starts[1:])
    n_fit = int(origins[0]) + 1
    parts = forecast_parts(
        [(history, piece) for piece in pieces], horizon, season, progress, n_fit=n_fit
    )
    out: dict[str, np.ndarray | None] = {}
    for name in STATISTICAL:
        values = [part[name] for part in parts]
        out[name] = None if any(v is None for v in values) else np.concatenate(values)
    return out


def forecast_parts(
    parts: Sequence[tuple[np.ndarray, np.ndarray]],
    horizon: int,
    season: int,
    progress: Progress | None = None,
    n_fit: int | None = None,
    keys: Sequence[str] | None = None,
) -> list[dict[str, np.ndarray | None]]:
    """The statistical baselines of several ``(history, origins)`` parts, all fitted and
    forecast at once (in parallel worker processes): each model is fitted on
    ``history[: origins[0] + 1]`` of its part and forecasts from every origin of it, as
    :func:`statistical_forecasts` of that part alone does (its models built with ``n_fit``,
    by default ``origins[0] + 1``). A part computed before in this process (the same values,
    origins and settings) is not computed again.

    Args:
        parts: ``(history, origins)`` pairs: ``(time, n_targets)`` values and ``(n,)``
            (n >= 1) ascending rows within them.
        horizon: Steps forecast from each origin.
        season: Season length of the models.
        progress: Called as the models fit and forecast (see :data:`Progress`).
        n_fit: The ``n_fit`` of :func:`statistical_models` for every part (None: each
            part's own ``origins[0] + 1``).
        keys: :func:`part_keys` of these arguments, where the caller has them already
            (None: computed here).

    Returns:
        One ``{name: (n, horizon, n_targets) float64 or None}`` per part (None: the model
        failed on that part; a warning names it).
    """
    _check_parts(parts)
    keys = part_keys(parts, horizon, season, n_fit) if keys is None else list(keys)
    with worker.waited_for():  # the background's jobs may take every CPU from now on
        waited = cache.wait(keys, progress)
    if waited:
        log.info("statsforecast: the baselines started in the background are done")
    return _forecast_parts(parts, horizon, season, progress, n_fit, keys)


def _forecast_parts(
    parts: Sequence[tuple[np.ndarray, np.ndarray]],
    horizon: int,
    season: int,
    progress: Progress | None,
    n_fit: int | None,
    keys: list[str],
    spare: int = 0,
) -> list[dict[str, np.ndarray | None]]:
    """:func:`forecast_parts` (its parts' ``keys`` given) without waiting for the
    background, on workers that leave ``spare`` CPUs to other work."""
    results: list[dict[str, np.ndarray | None] | None] = []
    jobs, where = [], []
    for p, (history, origins) in enumerate(parts):
        known = cache.recall(keys[p])
        if known is not None:
            results.append(known)
            continue
        results.append(None)
        fit = int(origins[0]) + 1 if n_fit is None else n_fit
        for name in STATISTICAL:
            for j in range(history.shape[1]):
                y = np.ascontiguousarray(history[: origins[-1] + 1, j], dtype=np.float64)
                jobs.append((name, y, origins, horizon, season, fit))
                where.append((p, name, j, keys[p]))
    if not jobs:
        log.info("statsforecast: these forecasts were computed before; reused")
    else:
        fits = len({(w[0], w[2]) for w in where})
        log.info(
            "statsforecast: fitting AutoETS, AutoARIMA and AutoTheta (season %d) %d time(s) and "
            "forecasting from %d origins, in %d worker process(es); baselines='naive' skips them",
            season,
            fits,
            sum(parts[p][1].size for p in {w[0] for w in where}),
            worker.worker_count(len(jobs), spare),
        )
    total = dict.fromkeys(STATISTICAL, 0)
    for history, origins in (parts[p] for p in sorted({w[0] for w in where})):
        for name in total:
            total[name] += origins.size * history.shape[1]
    done, started = [0] * len(jobs), time.monotonic()
    left = {name: sum(w[1] == name for w in where) for name in STATISTICAL}

    def on_progress(job: int, stage: str, count: int) -> None:
        done[job] = count
        name = where[job][1]
        if stage in ("done", "failed"):
            left[name] -= 1
            if not left[name]:
                log.info(
                    "statsforecast: %s %s in %.1f s (%d forecasts)",
                    name,
                    stage,
                    time.monotonic() - started,
                    total[name],
                )
            elif stage == "done":  # another fit of the model is still running
                stage = "forecasting"
        if progress is not None:
            count = sum(done[k] for k in range(len(jobs)) if where[k][1] == name)
            progress(name, count, total[name], stage)

    answers = worker.run_jobs(jobs, on_progress, spare) if jobs else []
    _collect(parts, horizon, where, answers, results)
    return results  # type: ignore[return-value]


def _collect(
    parts: Sequence[tuple[np.ndarray, np.ndarray]],
    horizon: int,
    where: list[tuple[int, str, int, str]],
    answers: list[tuple],
    results: list[Any],
) -> None:
    """Put the jobs' answers (of ``(part, name, target, cache key)`` each) together into
    ``results[part]`` (None for a model that failed on any target of the part), and keep
    the parts without failures for a call to come."""
    fresh: dict[int, dict[str, np.ndarray | None]] = {}
    for (p, name, j, _), (status, value) in zip(where, answers, strict=True):
        history, origins = parts[p]
        part = fresh.setdefault(p, {})
        if name not in part:
            part[name] = np.zeros((origins.size, horizon, history.shape[1]))
        if part[name] is None:
            continue
        if status == "fail":
            log.warning("%s could not fit or forecast (%s); it is left out", name, value)
            part[name] = None
            continue
        part[name][:, :, j] = value
    keys = {p: key for p, _, _, key in where}
    for p, part in fresh.items():
        results[p] = part
        if any(v is None for v in part.values()):  # a failure is tried (and named) again
            continue
        cache.remember(keys[p], part)


def _check_parts(parts: Sequence[tuple[np.ndarray, np.ndarray]]) -> None:
    for history, origins in parts:
        if np.ndim(history) != 2 or np.ndim(origins) != 1 or np.size(origins) == 0:
            raise ValueError(
                f"each part must be (history (time, n_targets), origins (n,) with n >= 1), "
                f"got shapes {np.shape(history)} and {np.shape(origins)}"
            )
        if np.any(np.diff(origins) <= 0) or origins[0] < 0 or origins[-1] >= len(history):
            raise ValueError(f"origins must ascend within the {len(history)} rows of history")


def part_keys(
    parts: Sequence[tuple[np.ndarray, np.ndarray]],
    horizon: int,
    season: int,
    n_fit: int | None = None,
) -> list[str]:
    """The key of each part's result (:func:`stacklstm.baselines.cache.key`) for
    :func:`forecast_parts` with these arguments."""
    out = []
    for history, origins in parts:
        origins = np.asarray(origins, dtype=np.int64)
        fit = int(origins[0]) + 1 if n_fit is None else n_fit
        out.append(cache.key(history[: origins[-1] + 1], origins, horizon, season, fit))
    return out


def prefetch(
    parts: Sequence[tuple[np.ndarray, np.ndarray]],
    horizon: int,
    season: int,
    n_fit: int | None = None,
) -> bool:
    """Start :func:`forecast_parts` of ``parts`` in a background thread, so that the fits
    run in their worker processes while this process does something else, the model's
    training say. A later :func:`forecast_parts` of the same parts waits for them (with
    their progress bars from then on) and computes nothing again; should the background
    computation fail, that call computes the parts itself.

    Returns:
        Whether it started (False: every part is computed or under way already).
    """
    _check_parts(parts)
    keys = part_keys(parts, horizon, season, n_fit)
    parts = [(np.array(h, dtype=np.float64), np.array(o, dtype=np.int64)) for h, o in parts]

    def compute(progress: Progress) -> None:  # one CPU stays with the caller's own work
        _forecast_parts(parts, horizon, season, progress, n_fit, keys, spare=1)

    started = cache.start(keys, compute)
    if started:
        log.info("statsforecast: the baselines start fitting in the background")
    return started
