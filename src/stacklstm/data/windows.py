"""Windows and splits: split by time, scale, index windows, gather them per batch.

The series (one, or all of a panel's, one after another) are held once, scaled, in model
space: a :class:`HeldSeries`. A :class:`WindowSet` is an index over it, one origin per
window plus a few numbers per window (anchor, level); :meth:`WindowSet.gather` builds the
model inputs and targets of the windows asked for, so memory grows with the series and one
batch, never with ``windows x window``.
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ..checks import DataError
from ..config import DataConfig
from . import season as seasons
from .clean import Series
from .covariates import expected_columns
from .scale import PanelScaler, Scaler
from .splits import split_problem, split_rows
from .transform import logged_series
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


def _check_series(series: Series, cfg: DataConfig) -> None:
    cfg.validate()
    expected = cfg.target + cfg.features + cfg.future_features
    if cfg.calendar == "auto":
        expected += ("calendar_...",)
    if not expected_columns(cfg, series.columns) or series.n_targets != len(cfg.target):
        raise DataError(
            f"the series has columns {list(series.columns)} ({series.n_targets} targets) but the "
            f"config expects {list(expected)}; prepare it with the same DataConfig"
        )
    if (series.ids is None) != (cfg.id_column is None):
        raise DataError(
            "the series and the config disagree on id_column; prepare it with the same DataConfig"
        )
    if series.static_columns != cfg.static_features:
        raise DataError(
            f"the series has static features {list(series.static_columns)} but the config "
            f"expects {list(cfg.static_features)}; prepare it with the same DataConfig"
        )


def fit_static_scaler(series: Series, cfg: DataConfig) -> Scaler | None:
    """The scaler of the static features, fitted over the series (one row each), or None
    without static features. With one series every static value scales to 0."""
    if series.static is None:
        return None
    columns = series.static_columns
    naive = cfg.scaler_kind in ("naive", "seasonal_naive")
    kind = "standard" if naive else cfg.scaler_kind  # no order to step
    return Scaler.fit(series.static, kind, columns, len(columns))


def _check_static_scaler(static_scaler: Scaler | None, series: Series) -> None:
    if (static_scaler is None) != (series.static is None) or (
        static_scaler is not None and static_scaler.columns != series.static_columns
    ):
        fitted = None if static_scaler is None else list(static_scaler.columns)
        raise DataError(
            f"the static scaler was fitted on {fitted} but the series has static features "
            f"{list(series.static_columns)}"
        )


def _check_scaler(scaler: Scaler | PanelScaler, series: Series, cfg: DataConfig) -> None:
    if scaler.columns != series.columns or scaler.n_targets != series.n_targets:
        raise DataError(
            f"the scaler was fitted on columns {list(scaler.columns)} but the series has "
            f"{list(series.columns)}"
        )
    if scaler.kind != cfg.scaler_kind:
        raise DataError(
            f"the config asks for scaler {cfg.scaler_kind!r} but got a {scaler.kind!r} one"
        )
    if isinstance(scaler, PanelScaler) != (series.ids is not None):
        what = "per series" if isinstance(scaler, PanelScaler) else "for one series"
        raise DataError(f"the scaler was fitted {what} but the table is not laid out alike")


def _model_space(series: Series, cfg: DataConfig, values: np.ndarray | None = None) -> np.ndarray:
    """``(time, n_columns)`` float64 differenced (first row of each series NaN) or level
    values (``series.values``, or ``values`` in its place), before scaling."""
    values = series.values if values is None else values
    if not cfg.difference:
        return values
    steps = np.full_like(values, np.nan)
    steps[1:] = np.diff(values, axis=0)
    steps[series.bounds[:-1]] = np.nan  # no difference across two series
    return steps


def _hold(
    series: Series,
    cfg: DataConfig,
    scaler: Scaler | PanelScaler,
    static_scaler: Scaler | None = None,
) -> HeldSeries:
    """Scale the model-space series once: what every window reads."""
    nt = series.n_targets
    logged = scaler.logged if isinstance(scaler, PanelScaler) else None
    values, pattern, phase0 = seasons.model_values(series, cfg, scaler.seasonal, logged)
    steps = _model_space(series, cfg, values)
    if isinstance(scaler, PanelScaler):
        model = scaler.transform(steps, series.bounds)
        center, scale = scaler.center[:, :nt], scaler.scale[:, :nt]
    else:
        model = scaler.transform(steps)
        center, scale = scaler.center[None, :nt], scaler.scale[None, :nt]
    return HeldSeries(
        n_future=series.n_future,
        static=None if static_scaler is None else static_scaler.transform(series.static),
        tail=_model_tail(series, cfg, scaler),
        model=model,
        original=series.values[:, :nt],
        times=series.times,
        offsets=series.bounds,
        ids=series.ids,
        center=center.copy(),
        scale=scale.copy(),
        pattern=pattern,
        phase0=phase0,
        log1p=logged.copy() if cfg.transform_kind == "per_series" and logged is not None
        else cfg.transform_kind == "log1p",
    )  # fmt: skip


def _model_tail(series: Series, cfg: DataConfig, scaler: Scaler | PanelScaler) -> np.ndarray | None:
    """``(n_series, horizon, n_future)`` the series' tail in model space, as the held series'
    known-future columns: differenced from each series' last row, then scaled."""
    if series.tail is None:
        return None
    nf = series.n_future
    known = slice(series.values.shape[1] - nf, series.values.shape[1])
    tail = series.tail  # (n_series, horizon, n_future)
    if cfg.difference:
        last = series.values[series.bounds[1:] - 1, known]  # (n_series, n_future)
        tail = np.diff(np.concatenate([last[:, None], tail], axis=1), axis=1)
    if isinstance(scaler, PanelScaler):
        center, scale = scaler.center[:, None, known], scaler.scale[:, None, known]
    else:
        center, scale = scaler.center[known], scaler.scale[known]
    return (tail - center) / scale


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
    _check_series(series, cfg)
    if scaler is not None:
        _check_scaler(scaler, series, cfg)
    h, first = cfg.horizon, int(cfg.difference)
    lengths = np.diff(series.bounds)
    rows = [split_rows(int(n), cfg) for n in lengths]
    if series.ids is None:
        problem = split_problem(int(lengths[0]), rows[0], cfg)
        if problem is not None:
            raise DataError(problem)
    else:
        problems: dict[int, str] = {}
        if isinstance(scaler, PanelScaler):
            # left out when the run was trained (and named then): noted, not warned again
            known = set(scaler.ids)
            untrained = [i for i, name in enumerate(series.ids) if name not in known]
            if untrained and not cfg.strict and len(untrained) < series.n_series:
                log.info("left out %d series the run was not trained on: %s", len(untrained),
                         _listed([repr(series.ids[i]) for i in untrained]))  # fmt: skip
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
            merged = {
                i: m for i in short if (m := _without_validation(int(lengths[i]), rows[i], cfg))
            }
        for i, m in merged.items():
            rows[i] = m
        problems.update({i: why for i, why in short.items() if i not in merged})
        if merged:  # in the order of the series, as short
            log.info("%d series too short for a training window and validation rows train on "
                     "their validation rows too (padded windows): %s", len(merged),
                     _listed([repr(series.ids[i]) for i in merged]))  # fmt: skip
        problems = dict(sorted(problems.items()))
        kept = [i for i in range(series.n_series) if i not in problems]
        series = _skip_series(series, problems, cfg, "training")
        rows = [rows[i] for i in kept]
    bounds = series.bounds
    if scaler is None:
        logged = None
        if cfg.transform_kind == "per_series":
            if series.ids is None:
                raise DataError("target_transform='per_series' chooses the log for each series "
                                "of a panel (id_column); for one series use 'auto'")  # fmt: skip
            logged = logged_series(series, cfg, [r[0] for r in rows])
        values, seasonal = _deseasonalized(series, cfg, [r[0] for r in rows], logged)
        steps = _model_space(series, cfg, values)
        if series.ids is None:
            scaler = Scaler.fit(steps[first : rows[0][0]], cfg.scaler_kind, series.columns,
                                series.n_targets, int(cfg.season))  # fmt: skip
        else:
            scaler = PanelScaler.fit(
                steps, bounds, [r[0] for r in rows], cfg.scaler_kind, series.columns,
                series.n_targets, series.ids, first, int(cfg.season),
            )  # fmt: skip
        scaler = dataclasses.replace(scaler, seasonal=seasonal)
        if logged is not None:
            scaler = dataclasses.replace(scaler, logged=logged)
    elif isinstance(scaler, PanelScaler):
        scaler = scaler.select(series.ids)  # type: ignore[arg-type]
    if static_scaler is None:
        static_scaler = fit_static_scaler(series, cfg)
    _check_static_scaler(static_scaler, series)
    held = _hold(series, cfg, scaler, static_scaler)
    lowest = cfg.min_input_rows - 1  # earliest origin: a full input window, or padded
    origins: dict[str, list[np.ndarray]] = {"train": [], "val": [], "test": []}
    for start, n_rows, (n_train, n_val, _) in zip(bounds[:-1], _lengths(bounds), rows,
                                                 strict=True):  # fmt: skip
        n_seen = n_train + n_val
        # origins, stepping back from the one whose last target is the split's last row
        origins["train"].append(start + _aligned_origins(n_train - 1 - h, lowest, cfg.stride))
        origins["val"].append(
            start + _aligned_origins(n_seen - 1 - h, max(lowest, n_train - 1), cfg.stride)
        )
        origins["test"].append(start + _aligned_origins(n_rows - 1 - h, max(lowest, n_seen - 1), 1))
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


def _deseasonalized(
    series: Series, cfg: DataConfig, n_train: Sequence[int], logged: np.ndarray | None = None
) -> tuple[np.ndarray, seasons.SeasonalPattern | None]:
    """The values the scaler is fitted on (targets transformed, the series ``logged`` with
    ``per_series``; the pattern fitted on each series' ``n_train`` training rows removed),
    and the pattern (None without one)."""
    values, _, _ = seasons.model_values(series, cfg, None, logged)
    if not cfg.deseasonalize:
        return values, None
    targets = values[:, : series.n_targets]
    seasonal = seasons.fit_seasonal(series, targets, n_train, cfg.season, cfg.season_test)
    return seasons.model_values(series, cfg, seasonal, logged)[0], seasonal


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
    _check_series(series, cfg)
    _check_scaler(scaler, series, cfg)
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
    _check_static_scaler(static_scaler, series)
    held = _hold(series, cfg, scaler, static_scaler)
    bounds = series.bounds
    origins = [np.arange(start + lowest, stop) for start, stop in itertools.pairwise(bounds)]
    return _windows(held, origins, cfg)
