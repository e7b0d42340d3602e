"""The fallback forecast of a panel's series that the model cannot forecast.

A global model forecasts a series from a full input window with the series' own scaler: a
series with fewer rows than one window, or one the run was not trained on (too short for
its splits when it was trained, or new), gets none from it. A forecaster is expected to
forecast every series, so such a series gets the seasonal naive forecast from its last row
instead (the last ``season`` values repeated; the last value where the series is shorter
than a season), and the forecast is named: ``predict``'s column ``forecaster`` says
``"seasonal_naive"`` on its rows (``"model"`` on the others), and the report lists the
series under ``fallback``.

Example:
    >>> y = np.array([[1.0], [2.0], [3.0], [4.0], [5.0]])  # (time, n_targets)
    >>> seasonal_naive(y, season=2, horizon=3)[:, 0].tolist()
    [4.0, 5.0, 4.0]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from ..data import Series, unforecastable

#: The name of the fallback forecaster, in ``predict``'s ``forecaster`` column and the report.
NAME = "seasonal_naive"
#: ``predict``'s ``forecaster`` value on the model's own rows.
MODEL = "model"


def seasonal_naive(y: np.ndarray, season: int, horizon: int) -> np.ndarray:
    """``(horizon, n_targets)`` the seasonal naive forecast from the last row of ``y``
    (``(time, n_targets)``, at least one row): step ``k`` repeats the value ``season``
    rows before it, or with fewer than ``season`` rows the last value."""
    m = season if len(y) >= season else 1
    return y[len(y) - m + np.arange(horizon) % m]


def fallback_ids(series: Series, trained: Sequence[str], input_steps: int) -> dict[str, str]:
    """``{id: why}`` of the series of ``series`` (a panel) that the model cannot forecast:
    not among the ``trained`` ids, or with fewer than ``input_steps`` rows (the series
    :func:`stacklstm.data.make_inference_windows` leaves out)."""
    assert series.ids is not None
    return {series.ids[i]: why for i, why in unforecastable(series, trained, input_steps).items()}


def fallback_frame(
    series: Series,
    ids: Sequence[str],
    targets: Sequence[str],
    horizon: int,
    season: int,
    others: Sequence[str] = (),
) -> pd.DataFrame:
    """``predict``'s wide rows of the series ``ids`` of ``series``: one per series, the
    seasonal naive forecast from its last row (``id``, ``origin``, ``<target>_h<k>``, and
    after each a NaN ``<target>_h<k>_<other>`` for each of ``others``, the forecasters the
    fallback does not give: ``"combination"``)."""
    assert series.ids is not None
    where = {name: i for i, name in enumerate(series.ids)}
    rows = []
    for name in ids:
        start, stop = series.bounds[where[name]], series.bounds[where[name] + 1]
        values = series.values[start:stop, : len(targets)]
        forecast = seasonal_naive(values, season, horizon)  # (horizon, n_targets)
        origin = stop - 1 - start if series.times is None else series.times[stop - 1]
        row = {"id": name, "origin": origin}
        for j, target in enumerate(targets):
            for k in range(horizon):
                row[f"{target}_h{k + 1}"] = forecast[k, j]
                row.update({f"{target}_h{k + 1}_{other}": np.nan for other in others})
        rows.append(row)
    return pd.DataFrame(rows)


def merge(model: pd.DataFrame | None, fallback: pd.DataFrame, order: Sequence[str]) -> pd.DataFrame:
    """The model's wide rows and the fallback's together, series in ``order``, with a
    ``forecaster`` column after ``origin`` (the fallback's columns the model has and it
    lacks, intervals say, are NaN)."""
    parts = []
    if model is not None and len(model):
        parts.append(model.assign(forecaster=MODEL))
    parts.append(fallback.assign(forecaster=NAME))
    columns = list(parts[0].columns)
    frame = pd.concat(parts, ignore_index=True)
    frame = frame[[*columns[:2], "forecaster", *[c for c in columns[2:] if c != "forecaster"]]]
    rank = {name: k for k, name in enumerate(order)}
    frame = frame.iloc[np.argsort(frame["id"].map(rank).to_numpy(), kind="stable")]
    return frame.reset_index(drop=True)
