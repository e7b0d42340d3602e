"""Fitting: the series and the scalers checked against the config, the scalers fitted on the
training rows, and the series scaled once into model space (the :class:`HeldSeries` every
window reads)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from ..checks import DataError
from ..config import DataConfig
from ..transforms import applied
from . import season as seasons
from .clean import Series
from .covariates import expected_columns
from .scale import PanelScaler, Scaler
from .transform import logged_series
from .windowset import HeldSeries


def check_series(series: Series, cfg: DataConfig) -> None:
    """DataError unless ``series`` was prepared with ``cfg`` (its columns, id column and
    static features); ``cfg`` validated."""
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


def check_static_scaler(static_scaler: Scaler | None, series: Series) -> None:
    """DataError unless ``static_scaler`` was fitted on the static features of ``series``."""
    if (static_scaler is None) != (series.static is None) or (
        static_scaler is not None and static_scaler.columns != series.static_columns
    ):
        fitted = None if static_scaler is None else list(static_scaler.columns)
        raise DataError(
            f"the static scaler was fitted on {fitted} but the series has static features "
            f"{list(series.static_columns)}"
        )


def check_scaler(scaler: Scaler | PanelScaler, series: Series, cfg: DataConfig) -> None:
    """DataError unless ``scaler`` was fitted on the columns of ``series``, of ``cfg``'s kind,
    per series for a panel and for one series otherwise."""
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


def fit_scaler(series: Series, cfg: DataConfig, n_train: Sequence[int]) -> Scaler | PanelScaler:
    """The scaler of the series (a :class:`PanelScaler` for a panel), fitted on the first
    ``n_train[i]`` rows of series ``i`` in model space: targets transformed, the seasonal
    pattern removed, differenced; it carries the pattern, and with ``per_series`` the series
    modelled on the log scale."""
    first = int(cfg.difference)
    logged = None
    if cfg.transform_kind == "per_series":
        if series.ids is None:
            raise DataError(
                "target_transform='per_series' chooses the log for each series "
                "of a panel (id_column); for one series use 'auto'"
            )
        logged = logged_series(series, cfg, n_train)
    values, seasonal = _deseasonalized(series, cfg, n_train, logged)
    steps = _model_space(series, cfg, values)
    if series.ids is None:
        scaler = Scaler.fit(
            steps[first : n_train[0]],
            cfg.scaler_kind,
            series.columns,
            series.n_targets,
            int(cfg.season),
        )
    else:
        scaler = PanelScaler.fit(
            steps,
            series.bounds,
            n_train,
            cfg.scaler_kind,
            series.columns,
            series.n_targets,
            series.ids,
            first,
            int(cfg.season),
        )
    scaler = dataclasses.replace(scaler, seasonal=seasonal)
    if logged is not None:
        scaler = dataclasses.replace(scaler, logged=logged)
    return scaler


def with_own_scalers(
    series: Series, cfg: DataConfig, scaler: PanelScaler, min_rows: int = 1
) -> PanelScaler:
    """``scaler`` joined with a scaler for each series of the panel ``series`` it lacks
    (of ``min_rows`` rows or more), fitted on all of that series' rows as a run fits each of
    its series on its training rows (:func:`fit_scaler`: the transform chosen, the seasonal
    pattern removed, the same scaling), so that a global model forecasts a series it was
    never trained on.

    Example:
        >>> import pandas as pd
        >>> from stacklstm.config import DataConfig
        >>> from stacklstm.data import prepare_series
        >>> frame = pd.DataFrame({"id": ["a"] * 4 + ["b"] * 4, "y": [1.0, 2, 3, 4, 10, 20, 30, 40]})
        >>> cfg = DataConfig(target=("y",), id_column="id", time_column=None, window=2,
        ...                  season=1, scaler="minmax", deseasonalize=False)
        >>> series = prepare_series(frame, cfg)
        >>> known = fit_scaler(series.select([0]), cfg, [4])
        >>> both = with_own_scalers(series, cfg, known)
        >>> both.ids, both.center[:, 0].tolist(), both.scale[:, 0].tolist()
        (('a', 'b'), [1.0, 10.0], [3.0, 30.0])
    """
    known = set(scaler.ids)
    lengths = np.diff(series.bounds)
    new = [i for i, name in enumerate(series.ids) if name not in known and lengths[i] >= min_rows]
    if not new:
        return scaler
    part = series.select(new)
    fitted = fit_scaler(part, cfg, [int(n) for n in np.diff(part.bounds)])
    assert isinstance(fitted, PanelScaler)
    if scaler.seasonal is not None and fitted.seasonal is None:  # too short for a pattern
        season, n = scaler.seasonal.season, len(fitted)
        zeros = np.zeros((n, season, fitted.n_targets))
        none = seasons.SeasonalPattern(season, zeros, (None,) * n, scaler.seasonal.freq)
        fitted = dataclasses.replace(fitted, seasonal=none)
    return scaler.joined(fitted)


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
    seasonal = seasons.fit_seasonal(
        series, targets, n_train, cfg.season, cfg.season_test, cfg.seasons_fitted
    )
    return seasons.model_values(series, cfg, seasonal, logged)[0], seasonal


def fit_static_scaler(series: Series, cfg: DataConfig) -> Scaler | None:
    """The scaler of the static features, fitted over the series (one row each), or None
    without static features. With one series every static value scales to 0."""
    if series.static is None:
        return None
    columns = series.static_columns
    naive = cfg.scaler_kind in ("naive", "seasonal_naive")
    kind = "standard" if naive else cfg.scaler_kind  # no order to step
    return Scaler.fit(series.static, kind, columns, len(columns))


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


def hold_series(
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
    transform = applied(cfg.transform_kind).name  # on every series, or (per_series) some
    per_series = cfg.transform_kind == "per_series" and logged is not None
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
        transformed=logged.copy() if per_series else transform != "none",
        transform=transform,
    )


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
