"""Windows and splits: split by time, scale, index windows, gather them per batch.

The series (one, or all of a panel's, one after another) are held once, scaled, in model
space: a :class:`HeldSeries` (the scalers and the held series are :mod:`.fitting`'s). A
:class:`WindowSet` is an index over it, one origin per window plus a few numbers per window
(anchor, level); :meth:`WindowSet.gather` builds the model inputs and targets of the windows
asked for, so memory grows with the series and one batch, never with ``windows x window``.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..checks import DataError
from ..config import DataConfig
from . import season as seasons
from .clean import Series
from .fitting import (
    check_scaler,
    check_series,
    check_static_scaler,
    fit_scaler,
    fit_static_scaler,
    hold_series,
)
from .scale import PanelScaler, Scaler
from .splits import split_problem, split_rows
from .windowset import HeldSeries, WindowSet

log = logging.getLogger(__name__)

_MAX_NAMED = 5


def _listed(texts: Sequence[str], sep: str = ", ") -> str:
    """The first :data:`_MAX_NAMED` of ``texts`` joined by ``sep``, and how many more."""
    more = len(texts) - _MAX_NAMED
    return sep.join(texts[:_MAX_NAMED]) + (f" and {more} more" if more > 0 else "")


@dataclass(frozen=True, eq=False)
class Splits:
    """Train, validation and test windows, and the row counts of each split.

    ``n_train + n_val + n_test`` is the number of rows of the series kept (for a panel, the
    sums over its series; ``rows`` has them per series); see :func:`split_rows`.
    """

    train: WindowSet
    val: WindowSet
    test: WindowSet
    n_train: int
    n_val: int
    n_test: int
    #: ``(n_series, 3)`` int64: ``(n_train, n_val, n_test)`` of each series kept.
    rows: np.ndarray | None = None
    #: The series the windows index (a panel's without the series left out).
    series: Series | None = None
    #: The scaler of the static features (None without them): :func:`fit_static_scaler`.
    static_scaler: Scaler | None = None


def _windows(held: HeldSeries, origins: Sequence[np.ndarray], cfg: DataConfig) -> WindowSet:
    """Windows ending at ``origins[i]`` (held rows) in series ``i``, in that order."""
    nt = held.original.shape[1]
    series = np.concatenate(
        [np.full(len(o), i, dtype=np.int64) for i, o in enumerate(origins)]
        or [np.zeros(0, np.int64)]
    )
    origin = np.concatenate([np.asarray(o, np.int64) for o in origins] or [np.zeros(0, np.int64)])
    # (n, n_targets): the model-space target value at the origin, or nothing to subtract
    window_relative = cfg.normalize == "window"
    anchor = held.model[origin, :nt] if window_relative else np.zeros((origin.size, nt))
    return WindowSet(
        held=held,
        origin=origin,
        series=series,
        anchor=anchor,
        level=held.original[origin],
        window=cfg.window,
        horizon=cfg.horizon,
        difference=bool(cfg.difference),
    )


def _aligned_origins(last: int, lowest: int, step: int) -> np.ndarray:
    """Ascending ``(n,)`` origins ``last, last - step, ...`` down to ``lowest`` (inclusive)."""
    if last < lowest:
        return np.zeros(0, dtype=np.int64)
    return np.arange(last, lowest - 1, -step, dtype=np.int64)[::-1].copy()


def _without_validation(
    n_rows: int, rows: tuple[int, int, int], cfg: DataConfig
) -> tuple[int, int, int] | None:
    """With padded windows (``cfg.padded``), the rows of a panel's series too short for a
    training window and its validation rows: its validation rows train too, ``(n_train +
    n_val, 0, n_test)``, where that holds a training window; None otherwise."""
    n_train, n_val, n_test = rows
    merged = (n_train + n_val, 0, n_test)
    if not cfg.padded or n_val == 0 or split_problem(n_rows, merged, cfg) is not None:
        return None
    return merged


def _skip_series(series: Series, problems: dict[int, str], cfg: DataConfig, what: str) -> Series:
    """The panel without the series in ``problems`` (position -> why it cannot be used for
    ``what``), each named in a warning; with ``cfg.strict``, a DataError instead. DataError
    when no series is left."""
    if not problems:
        return series
    assert series.ids is not None
    listed = _listed([f"{series.ids[i]!r} ({why})" for i, why in problems.items()], "; ")
    if cfg.strict:
        raise DataError(
            f"{len(problems)} series cannot be used for {what}: {listed}; drop them or turn "
            "off `strict` to skip them"
        )
    if len(problems) == series.n_series:
        raise DataError(
            f"no series can be used for {what}: {listed}; lower `window` or `horizon`, or use "
            "longer series"
        )
    log.warning("skipped %d series for %s: %s", len(problems), what, listed)
    keep = [i for i in range(series.n_series) if i not in problems]
    return series.select(keep)


def make_splits(
    series: Series,
    cfg: DataConfig,
    scaler: Scaler | PanelScaler | None = None,
    static_scaler: Scaler | None = None,
) -> tuple[Splits, Scaler | PanelScaler]:
    """Split by time, fit the scaler on the training rows, and index the windows of each split.

    Rows ``[0, n_train)`` train, ``[n_train, n_train + n_val)`` validation, the rest test
    (:func:`split_rows`). A window belongs to the split holding all its targets (windows
    whose targets straddle a boundary are dropped); its inputs may reach back into earlier
    splits, never forward, so no training window touches a validation or test row.

    Every split's windows are aligned to its end: the split's last row is the last target of
    its last window, and origins step back from there (so the most recent rows are always
    used). Training and validation windows step by ``cfg.stride``; test windows start at
    every origin (step 1) from the last row before the test rows, so every test row is
    scored, as step 1 of the forecast made just before it and at every later step up to
    ``horizon`` where the data allows.

    A panel is split the same way series by series (sizes and fractions apply to each), each
    series gets its own scaler (a :class:`~stacklstm.data.PanelScaler`), and no window
    crosses two series. A series too short for a training window (or with validation or test
    rows fewer than ``horizon``) is named in a warning and left out, or refused with
    ``cfg.strict``; with padded windows (``cfg.padded``) one whose validation rows would hold
    that window trains on them instead (named in an info line), unless no series of the
    panel would keep its validation rows.

    Args:
        series: From :func:`prepare_series` with the same ``cfg``.
        cfg: Window, split and scaling settings, ``season`` and ``window`` resolved
            (:func:`stacklstm.train.resolve.resolve_data`).
        scaler: A fitted scaler to use instead of fitting one (a run's saved one, to score
            it); for a panel, the series it lacks are left out, in an info line (the run
            named them, as warnings, when it was trained), or refused with ``cfg.strict``.
        static_scaler: A fitted scaler of the static features (a run's saved one); None:
            fitted over the series kept (``splits.static_scaler``).

    Returns:
        ``(splits, scaler)``; the scaler is fitted on the (differenced) training rows.

    Raises:
        ValueError: ``season`` or ``window`` is still ``"auto"``.
        DataError: Too few training rows for one window, or a validation/test split above
            0 that leaves fewer rows than ``horizon`` (for a panel: every series so, or one
            with ``strict``).
    """
    seasons.require_resolved(cfg, "make_splits")
    check_series(series, cfg)
    if scaler is not None:
        check_scaler(scaler, series, cfg)
    series, rows = _rows_to_split(series, cfg, scaler)
    if scaler is None:
        scaler = fit_scaler(series, cfg, [r[0] for r in rows])
    elif isinstance(scaler, PanelScaler):
        scaler = scaler.select(series.ids)  # type: ignore[arg-type]
    if static_scaler is None:
        static_scaler = fit_static_scaler(series, cfg)
    check_static_scaler(static_scaler, series)
    held = hold_series(series, cfg, scaler, static_scaler)
    origins = _split_origins(series.bounds, rows, cfg)
    totals = np.array(rows, dtype=np.int64).reshape(-1, 3)
    splits = Splits(
        train=_windows(held, origins["train"], cfg),
        val=_windows(held, origins["val"], cfg),
        test=_windows(held, origins["test"], cfg),
        n_train=int(totals[:, 0].sum()),
        n_val=int(totals[:, 1].sum()),
        n_test=int(totals[:, 2].sum()),
        rows=totals,
        series=series,
        static_scaler=static_scaler,
    )
    return splits, scaler


def _rows_to_split(
    series: Series, cfg: DataConfig, scaler: Scaler | PanelScaler | None
) -> tuple[Series, list[tuple[int, int, int]]]:
    """The series to split and the rows ``(n_train, n_val, n_test)`` of each
    (:func:`split_rows`): one series as it is (DataError when too short), a panel without
    the series left out (:func:`_panel_rows`)."""
    lengths = np.diff(series.bounds)
    rows = [split_rows(int(n), cfg) for n in lengths]
    if series.ids is None:
        problem = split_problem(int(lengths[0]), rows[0], cfg)
        if problem is not None:
            raise DataError(problem)
        return series, rows
    return _panel_rows(series, rows, cfg, scaler)


def _panel_rows(
    series: Series,
    rows: list[tuple[int, int, int]],
    cfg: DataConfig,
    scaler: Scaler | PanelScaler | None,
) -> tuple[Series, list[tuple[int, int, int]]]:
    """The panel without the series ``scaler`` lacks or too short for a training window (see
    :func:`make_splits`), and the ``rows`` of those kept (with padded windows, a short
    series' validation rows may train: :func:`_without_validation`)."""
    lengths = np.diff(series.bounds)
    problems: dict[int, str] = {}
    if isinstance(scaler, PanelScaler):
        # left out when the run was trained (and named then): noted, not warned again
        known = set(scaler.ids)
        untrained = [i for i, name in enumerate(series.ids) if name not in known]
        if untrained and not cfg.strict and len(untrained) < series.n_series:
            log.info(
                "left out %d series the run was not trained on: %s",
                len(untrained),
                _listed([repr(series.ids[i]) for i in untrained]),
            )
            keep = [i for i, name in enumerate(series.ids) if name in known]
            series, rows, lengths = series.select(keep), [rows[i] for i in keep], lengths[keep]
        else:
            problems = dict.fromkeys(untrained, "no scaler: the run was not trained on it")
    short: dict[int, str] = {}
    for i, n in enumerate(lengths):
        if i not in problems and (problem := split_problem(int(n), rows[i], cfg)) is not None:
            # "the series has 1 row but ..." names the rows itself
            short[i] = problem if rows[i][0] < 1 else f"{n} rows: {problem}"
    merged = {}
    if len(problems) + len(short) < len(lengths):  # some series keeps its validation rows
        merged = {i: m for i in short if (m := _without_validation(int(lengths[i]), rows[i], cfg))}
    for i, m in merged.items():
        rows[i] = m
    problems.update({i: why for i, why in short.items() if i not in merged})
    if merged:  # in the order of the series, as short
        log.info(
            "%d series too short for a training window and validation rows train on "
            "their validation rows too (padded windows): %s",
            len(merged),
            _listed([repr(series.ids[i]) for i in merged]),
        )
    problems = dict(sorted(problems.items()))
    kept = [i for i in range(series.n_series) if i not in problems]
    series = _skip_series(series, problems, cfg, "training")
    rows = [rows[i] for i in kept]
    return series, rows


def _split_origins(
    bounds: np.ndarray, rows: Sequence[tuple[int, int, int]], cfg: DataConfig
) -> dict[str, list[np.ndarray]]:
    """Each split's origins (held rows) in each series, aligned to the split's end (see
    :func:`make_splits`): ``{"train": [...], "val": [...], "test": [...]}``, one array a
    series."""
    h = cfg.horizon
    lowest = cfg.min_input_rows - 1  # earliest origin: a full input window, or padded
    origins: dict[str, list[np.ndarray]] = {"train": [], "val": [], "test": []}
    for start, n_rows, (n_train, n_val, _) in zip(bounds[:-1], _lengths(bounds), rows, strict=True):
        n_seen = n_train + n_val
        # origins, stepping back from the one whose last target is the split's last row
        origins["train"].append(start + _aligned_origins(n_train - 1 - h, lowest, cfg.stride))
        origins["val"].append(
            start + _aligned_origins(n_seen - 1 - h, max(lowest, n_train - 1), cfg.stride)
        )
        origins["test"].append(start + _aligned_origins(n_rows - 1 - h, max(lowest, n_seen - 1), 1))
    return origins


def _lengths(bounds: np.ndarray) -> list[int]:
    """Rows of each series from its ``(n_series + 1,)`` bounds."""
    return [int(n) for n in np.diff(bounds)]


def select_series(series: Series, ids: Sequence[str]) -> Series:
    """The panel's series named ``ids`` (kept in the panel's order).

    Raises:
        DataError: A table without an id column, or a name the table lacks.
    """
    if series.ids is None:
        raise DataError("the table is one series (no id column); there are no ids to choose")
    position = {name: i for i, name in enumerate(series.ids)}
    unknown = [name for name in ids if name not in position]
    if unknown:
        shown = _listed([repr(name) for name in series.ids])
        raise DataError(f"no series {unknown[0]!r} in the table; it has {shown}")
    return series.select(sorted({position[name] for name in ids}))


def unforecastable(series: Series, trained: Sequence[str], input_steps: int) -> dict[int, str]:
    """``{index: why}`` of the panel's series that a run trained on the series ``trained``
    cannot forecast: not among them, or with fewer rows than one input window."""
    known, problems = set(trained), {}
    for i, (name, n) in enumerate(zip(series.ids, _lengths(series.bounds), strict=True)):
        if name not in known:
            problems[i] = "no scaler: the run was not trained on it"
        elif n < input_steps:
            problems[i] = f"{n} rows, one input window needs {input_steps}"
    return problems


def make_inference_windows(
    series: Series,
    cfg: DataConfig,
    scaler: Scaler | PanelScaler,
    static_scaler: Scaler | None = None,
) -> WindowSet:
    """Windows at every origin with a full input window, stride 1, up to the last row.

    For an origin shared with :func:`make_splits` (same series, config and scaler), the
    gathered ``x`` and :meth:`WindowSet.to_original` are identical to the evaluation
    windows'. ``y`` and ``y_true`` are NaN where targets lie past the end of the data.

    For a panel: every series the scaler knows, each from its own first full window; a
    series the scaler lacks or too short for one input window is named in a warning and
    left out (refused with ``cfg.strict``).

    Args:
        series: From :func:`prepare_series` with the same ``cfg``.
        cfg: The training run's config, ``season`` and ``window`` resolved (a run folder's
            are).
        scaler: The training run's scaler (from :func:`make_splits` or a checkpoint).
        static_scaler: The training run's scaler of the static features (None without).

    With known-future columns, the windows whose horizon passes the end of a series read
    its ``tail`` (the future rows ``predict`` reads).

    Returns:
        WindowSet with origins ``window - 1 (+1 with difference) .. rows - 1`` of each series.

    Raises:
        ValueError: ``season`` or ``window`` is still ``"auto"``.
    """
    seasons.require_resolved(cfg, "make_inference_windows")
    check_series(series, cfg)
    check_scaler(scaler, series, cfg)
    lowest = cfg.min_input_rows - 1
    if series.ids is None:
        if len(series) <= lowest:
            raise DataError(
                f"the series has {len(series)} rows but one input window needs {lowest + 1}"
            )
    else:
        assert isinstance(scaler, PanelScaler)
        problems = unforecastable(series, scaler.ids, lowest + 1)
        series = _skip_series(series, problems, cfg, "forecasts")
        scaler = scaler.select(series.ids)  # type: ignore[arg-type]
    check_static_scaler(static_scaler, series)
    held = hold_series(series, cfg, scaler, static_scaler)
    bounds = series.bounds
    origins = [np.arange(start + lowest, stop) for start, stop in itertools.pairwise(bounds)]
    return _windows(held, origins, cfg)
