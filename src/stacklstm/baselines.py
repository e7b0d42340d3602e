"""The forecasters a model is scored against: naive ones, and statsforecast's statistical ones.

``baselines="naive"``: the last value and the seasonal naive forecast (from
:class:`~stacklstm.data.WindowSet`). ``baselines="all"`` adds statsforecast's AutoETS, AutoARIMA
and AutoTheta with the data's ``season`` as their season length; they need the optional extra
(``pip install 'stacklstm[baselines]'``), imported only when they run.

A statistical model is fitted once, on the values up to the first forecast origin (in the
report: the training and validation rows), and then forecasts from every origin with the
values observed up to that origin, without refitting: statsforecast's ``forward``, exactly
as its ``cross_validation(refit=False)`` does. ``refit_at`` fits again at chosen origins
(``cross_validation(refit=N)``), as the backtest's refits do.

The statistical models run in a worker process, started on first use and kept, so that a
SIGINT or SIGTERM ends the command at once instead of waiting for a native fit that may last
minutes (see ``_in_worker_process``); their numbers are those of the same calls made here.

Example:
    >>> import numpy as np
    >>> history = np.arange(40.0)[:, None]  # (time, n_targets)
    >>> out = statistical_forecasts(history, np.array([29, 30]), 2, 4)  # doctest: +SKIP
    >>> sorted(out), out["auto_arima"].shape  # doctest: +SKIP
    (['auto_arima', 'auto_ets', 'auto_theta'], (2, 2, 1))
"""

from __future__ import annotations

import contextlib
import importlib.util
import logging
import os
import pickle
import signal
import subprocess
import sys
import threading
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from .checks import SettingError, check_choice
from .config import BaselineKind
from .intervals import Forecast, calibrate, conformal_offsets

log = logging.getLogger(__name__)

NAIVE = ("last_value", "seasonal_naive")
STATISTICAL = ("auto_ets", "auto_arima", "auto_theta")
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
    calibration = conformal_offsets(y_val, Forecast(val_point).with_levels(quantiles))
    return calibrate(Forecast(point), calibration)


def statistical_models(season: int, n_fit: int) -> dict[str, Any]:
    """``{name: statsforecast model}`` with season length ``season``, unfitted.

    AutoARIMA searches with the approximation that R's ``auto.arima`` uses by default for
    long or long-season series (``n_fit > 150`` rows or ``season > 12``): an exact search
    with season 52 on 1600 weekly rows takes over ten minutes.
    """
    from statsforecast.models import AutoARIMA, AutoETS, AutoTheta

    return {
        "auto_ets": AutoETS(season_length=season),
        "auto_arima": AutoARIMA(season_length=season, approximation=n_fit > 150 or season > 12),
        "auto_theta": AutoTheta(season_length=season),
    }


def statistical_forecasts(
    history: np.ndarray,
    origins: np.ndarray,
    horizon: int,
    season: int,
    refit_at: Sequence[int] = (),
) -> dict[str, np.ndarray | None]:
    """Forecasts of statsforecast's AutoETS, AutoARIMA and AutoTheta from every origin.

    Each model (built once per target, :func:`statistical_models` with ``n_fit =
    origins[0] + 1``) is fitted on ``history[: origins[0] + 1]`` (and again on ``history[: o + 1]``
    at each origin ``o`` in ``refit_at``) and forecasts ``horizon`` steps from every origin
    ``o`` with ``forward(history[: o + 1])``: the procedure of statsforecast's
    ``cross_validation`` with ``step_size=1`` and ``refit=False`` (or ``refit=N``).

    Args:
        history: ``(time, n_targets)`` observed values in original units; each target is a
            series of its own.
        origins: ``(n,)`` ascending rows of the last value seen by each forecast.
        horizon: Steps forecast from each origin.
        season: Season length of the models.
        refit_at: Origins (of ``origins``) where the models are fitted again.

    Returns:
        ``{name: (n, horizon, n_targets) float64}``; None for a model that failed to fit
        (a warning names it).
    """
    history = np.asarray(history, dtype=np.float64)
    origins = np.asarray(origins, dtype=np.int64)
    if history.ndim != 2:
        raise ValueError(f"history must be (time, n_targets), got shape {history.shape}")
    if origins.size == 0:
        return dict.fromkeys(STATISTICAL, np.zeros((0, horizon, history.shape[1])))
    if np.any(np.diff(origins) <= 0) or origins[0] < 0 or origins[-1] >= len(history):
        raise ValueError(f"origins must ascend within the {len(history)} rows of history")
    unknown = sorted(set(int(o) for o in refit_at) - set(origins.tolist()))
    if unknown:
        raise ValueError(f"refit_at must be among the origins, got {unknown}")
    fit_here = {int(origins[0]), *(int(o) for o in refit_at)}
    log.info(
        "statsforecast: fitting AutoETS, AutoARIMA and AutoTheta (season %d) %d time(s) and "
        "forecasting from %d origins; baselines='naive' skips them",
        season, len(fit_here), origins.size,
    )  # fmt: skip
    n_first = int(origins[0]) + 1
    out, failures = _in_worker_process(
        (history, origins, horizon, season, sorted(fit_here), n_first)
    )
    for name, reason in failures:
        log.warning("%s could not fit or forecast (%s); it is left out", name, reason)
    return out


def _fit_and_forecast(
    history: np.ndarray,
    origins: np.ndarray,
    horizon: int,
    season: int,
    fit_here: Sequence[int],
    n_first: int,
) -> tuple[dict[str, np.ndarray | None], list[tuple[str, str]]]:
    """The work of :func:`statistical_forecasts`: its result, and ``(name, reason)`` of each
    model that failed (None in the result)."""
    fit_at = set(fit_here)
    out: dict[str, np.ndarray | None] = {}
    failures = []
    for name in STATISTICAL:
        values = np.zeros((origins.size, horizon, history.shape[1]))
        try:
            with warnings.catch_warnings():  # convergence notes, one per search step
                warnings.simplefilter("ignore")
                for j in range(history.shape[1]):
                    model = statistical_models(season, n_first)[name]
                    for i, origin in enumerate(origins.tolist()):
                        seen = history[: origin + 1, j]
                        if origin in fit_at:
                            model.fit(y=seen)
                        values[i, :, j] = model.forward(y=seen, h=horizon)["mean"]
        except Exception as err:  # statsforecast's errors share no base class of their own
            failures.append((name, str(err)))
            out[name] = None
            continue
        out[name] = values
    return out, failures


# statsforecast fits in native code that may run for minutes on a long series without
# returning to Python (and without releasing the GIL), and Python runs a signal handler only
# between two of its own steps: in this process a SIGINT or SIGTERM would wait for the fit to
# end. So the fits run in a worker process of their own, started on first use and kept for
# the next calls (one start per process, not per series of a panel), while this process
# only waits for its answer, and takes a signal at once: it then kills the worker. The
# worker is in a session of its own (a Ctrl-C at the terminal reaches this process only) and,
# on Linux, dies with this process. The numbers are those of the same calls made here.
_WORKER: dict[str, Any] = {}
_WORKER_LOCK = threading.Lock()
_SERVE = "from stacklstm.baselines import _serve; _serve()"


def _in_worker_process(request: tuple) -> Any:
    """``_fit_and_forecast(*request)`` in the worker process."""
    with _WORKER_LOCK:
        worker = _WORKER.get("process")
        if worker is None or worker.poll() is not None:
            worker = _WORKER["process"] = _start_worker()
        try:
            pickle.dump(request, worker.stdin, protocol=pickle.HIGHEST_PROTOCOL)
            worker.stdin.flush()
            status, value = pickle.load(worker.stdout)
        except BaseException as err:  # a signal (or a dead worker): no half-read answer kept
            _WORKER.pop("process", None)
            with contextlib.suppress(OSError):
                worker.kill()
            worker.wait()
            if isinstance(err, (OSError, EOFError, pickle.UnpicklingError)):
                raise RuntimeError(
                    f"the statistical baselines' worker process ended unexpectedly (exit "
                    f"status {worker.returncode})"
                ) from err
            raise
    if status == "error":
        raise value
    return value


def _start_worker() -> subprocess.Popen:
    root = str(Path(__file__).resolve().parents[1])  # where this package is imported from
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": root if not path else os.pathsep.join([root, path])}
    return subprocess.Popen(
        [sys.executable, "-c", _SERVE, str(os.getpid())],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env,
        start_new_session=True,
    )  # fmt: skip


def _serve() -> None:
    """The worker process: answer each pickled request on standard input with
    ``("ok", result)`` or ``("error", exception)`` on standard output, until it closes."""
    _die_with_parent(int(sys.argv[1]))
    requests, answers = sys.stdin.buffer, os.fdopen(os.dup(1), "wb")
    os.dup2(2, 1)  # anything a library prints stays off the answers
    while True:
        try:
            request = pickle.load(requests)
        except EOFError:
            return
        try:
            answer = ("ok", _fit_and_forecast(*request))
        except Exception as err:
            answer = ("error", err)
        pickle.dump(answer, answers, protocol=pickle.HIGHEST_PROTOCOL)
        answers.flush()


def _die_with_parent(parent: int) -> None:
    """On Linux, have the kernel kill this process when ``parent`` ends."""
    if sys.platform.startswith("linux"):
        with contextlib.suppress(Exception):
            import ctypes

            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    if os.getppid() != parent:  # it ended before that took effect
        os._exit(0)
