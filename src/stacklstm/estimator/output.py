"""What :meth:`LSTMForecaster.predict <stacklstm.estimator.LSTMForecaster.predict>` reads
and gives back: the history table it forecasts from, and the run's long forecasts under the
estimator's column names, in the training frame's order of series, with the levels asked
for and the first ``h`` steps.

Example:
    >>> check_h(None, 12), check_h(3, 12)
    (12, 3)
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..config import DataConfig
from ..data import read_table
from ..forecasting.prediction import level_name
from .frames import check_frame, merge_statics, run_columns, with_future_rows

__all__ = ["check_h", "check_level_list", "history_table", "in_frame_order", "user_frame"]


def history_table(
    df: pd.DataFrame | None,
    futr_df: pd.DataFrame | None,
    data: DataConfig,
    source: Path,
    statics: pd.DataFrame | None,
) -> pd.DataFrame:
    """The table to forecast from: ``df`` (None: the training table ``source``), its static
    columns filled from the training frame's ``statics`` where it lacks them, and the
    future rows of ``futr_df``; the run's columns only.

    Raises:
        ValueError: ``df`` has series the model was not trained on and lacks their static
            columns.
    """
    if df is None:
        frame = read_table(source)
    else:
        frame = check_frame(df, "df", [data.target[0]])
        if data.static_features and statics is not None:
            missing = [n for n in data.static_features if n not in frame.columns]
            if missing:
                keep = [*([data.id_column] if data.id_column else []), *missing]
                if data.id_column is not None:
                    known = set(statics[data.id_column])
                    new = sorted(set(frame[data.id_column]) - known, key=str)
                    if new:
                        raise ValueError(
                            f"df has series the model was not trained on ({new[:5]}) and "
                            f"lacks the static column(s) {missing}: give them in df"
                        )
                frame, _ = merge_statics(frame, statics[keep], data.id_column)
    if futr_df is not None:
        frame = with_future_rows(frame, futr_df, data, statics)
    return frame[[c for c in run_columns(data) if c in frame.columns]]


def check_h(h: int | None, horizon: int) -> int:
    """``h`` checked against the run's ``horizon`` (None: the horizon).

    Raises:
        ValueError: ``h`` is not an integer in ``1..horizon``.
    """
    if h is None:
        return horizon
    if isinstance(h, bool) or not isinstance(h, (int, np.integer)) or not 1 <= h <= horizon:
        raise ValueError(
            f"h must be an integer in 1..{horizon} (the model's horizon), got {h!r}; "
            "train with a longer horizon to forecast further"
        )
    return int(h)


def in_frame_order(
    out: pd.DataFrame, id_col: str, id_values: dict[str, Any], id_dtype: Any, steps: int
) -> pd.DataFrame:
    """The first ``steps`` rows of each series, the series in the order the training frame
    named them (``id_values``: text -> value, in that order), the id column in ``id_dtype``."""
    if id_col in out and id_values:
        rank = {value: i for i, value in enumerate(id_values.values())}
        key = out[id_col].map(lambda v: rank.get(v, len(rank))).to_numpy()
        out = out.iloc[np.argsort(key, kind="stable")]
        with contextlib.suppress(TypeError, ValueError):  # a dtype the values cannot take
            out[id_col] = out[id_col].astype(id_dtype)
    if id_col in out:
        position = out.groupby(id_col, sort=False, observed=True).cumcount()
    else:
        position = pd.Series(np.arange(len(out)), index=out.index)
    return out[position.to_numpy() < steps].reset_index(drop=True)


def check_level_list(level: object) -> None:
    """Refuse a ``level`` argument that is neither None nor a list of percentages.

    Raises:
        TypeError: ``level`` is text or not iterable.
    """
    if level is not None and (isinstance(level, (str, bytes)) or not hasattr(level, "__iter__")):
        raise TypeError(f"level must be a list of percentages such as [80, 95], got {level!r}")


def user_frame(
    long: pd.DataFrame,
    level: Sequence[float] | None,
    names: tuple[str, str, str],
    id_values: dict[str, Any],
    time_dtype: Any,
) -> pd.DataFrame:
    """The run's long frame ``long`` under the estimator's ``names`` (``alias, id_col,
    time_col``), the ids as the training frame gave them (``id_values``), the stamps in
    ``time_dtype``, with the interval columns of each level of ``level`` (percent). A
    ``combination`` column of ``long`` (``predict(combine=True)``) becomes
    ``<alias>-combination``, after the model's columns, with its own interval columns at the
    levels asked for that it has.

    Raises:
        TypeError: ``level`` is not a list of percentages.
        ValueError: Neither the model nor the combination has an interval at a level asked
            for.
    """
    alias, id_col, time_col = names
    check_level_list(level)
    forecasters = ["stacklstm", *(["combination"] if "combination" in long else [])]
    keep = ["unique_id", "ds", *(c for c in ("cutoff", "forecaster") if c in long), "stacklstm"]
    bands: dict[str, list[str]] = {name: [] for name in forecasters}
    for value in level or ():
        name = level_name(value)
        found = [f for f in forecasters if f"{f}-lo-{name}" in long]
        if not found:
            have = [c.removeprefix("stacklstm-lo-") for c in long if c.startswith("stacklstm-lo-")]
            raise ValueError(
                f"the model has no interval at level {name}: it was trained "
                + (f"with intervals at {', '.join(have)}" if have else "without intervals")
                + f"; train it with {float(value) / 100:g} in `interval_levels` and a "
                "quantile or distribution `loss` (quantile, normal, student_t), or with "
                "`conformal=True`"
            )
        for f in found:
            if f"{f}-lo-{name}" not in bands[f]:  # a level asked twice: its columns once
                bands[f] += [f"{f}-lo-{name}", f"{f}-hi-{name}"]
    keep += bands["stacklstm"]
    if "combination" in forecasters:
        keep += ["combination", *bands["combination"]]
    out = long[keep].rename(columns=lambda c: c.replace("stacklstm", alias, 1))
    out = out.rename(columns=lambda c: f"{alias}-{c}" if c.startswith("combination") else c)
    out = out.rename(columns={"unique_id": id_col, "ds": time_col})
    out[id_col] = out[id_col].map(lambda v: id_values.get(v, v))
    if time_dtype is not None and pd.api.types.is_datetime64_any_dtype(time_dtype):
        zone = getattr(time_dtype, "tz", None)  # the run reads stamps as UTC
        for name in (time_col, "cutoff"):
            if name in out and zone is not None:
                out[name] = pd.to_datetime(out[name]).dt.tz_localize("UTC").dt.tz_convert(zone)
            elif name in out:
                out[name] = out[name].astype(time_dtype)
    return out.reset_index(drop=True)
