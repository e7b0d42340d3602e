"""``stacklstm predict``: forecasts from every origin of a table, for a single run or a seed
ensemble, with their intervals, as a frame and optionally a CSV file.

Example:
    >>> frame = predict("runs/co2", output="forecasts.csv")  # doctest: +SKIP
    >>> frame.columns.tolist()[:2]  # doctest: +SKIP
    ['origin', 'co2_h1']
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ..data import DataError, make_inference_windows, select_series
from ..intervals import level_key
from .calibration import interval_forecast, run_calibration
from .ensemble import load_model
from .inference import load_series, table_path
from .outputs import check_output, write_output


def _some(names: Sequence[str]) -> str:
    """Up to five names, quoted (``'a', 'b' and 3 more``; ``none`` for no names)."""
    shown = ", ".join(map(repr, names[:5])) or "none"
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def predict(
    run_dir: str | Path,
    data_path: str | Path | None = None,
    output: str | Path | None = None,
    ids: Sequence[str] | None = None,
) -> pd.DataFrame:
    """Forecast from every origin of a table with a full input window; optionally write a CSV.

    The table needs only ``window`` rows (+1 with ``difference``): the newest window alone
    gives the forecast from its last row. A panel run forecasts every series of the table
    it was trained on (or those named in ``ids``); a series it was not trained on, or too
    short for one input window, is named in a warning and left out. A seed ensemble
    forecasts with the median of its members (:mod:`stacklstm.train.ensemble`).

    Uses :func:`stacklstm.data.make_inference_windows` with the run's saved scaler(s), so the
    forecast from an origin that is also a test origin equals the report's.

    Args:
        run_dir: The run folder.
        data_path: The table (the run's own table by default); it needs the run's target,
            feature, time (and id) columns.
        output: CSV to write (None: write nothing): a file, replaced atomically; a symlink,
            whose target is written; a FIFO or device, written as a stream; ``-``, standard
            output. Never a folder, a run folder's own file, or the table read (checked
            before anything is computed). See :mod:`stacklstm.train.outputs`.
        ids: For a panel run: forecast only these series (None: all).

    Returns:
        One row per origin: for a panel run first ``id`` (the series), then ``origin`` (its
        time stamp, or its row number in its series without a time column), then
        ``<target>_h<k>`` for every target and horizon step ``k = 1..horizon``; a run with
        intervals adds ``<target>_h<k>_q<level>`` after each, one per quantile level
        (``co2_h1_q0.1``), calibrated with ``conformal`` (see
        :mod:`stacklstm.train.calibration`).

    Raises:
        DataError: ``ids`` for a run on one series, empty, naming a series the table lacks,
            or selecting no series the run can forecast.
        ValueError: ``output`` is refused by :func:`stacklstm.train.outputs.check_output`:
            a folder, a file or folder of a run folder, or the table itself.
        OSError: ``output`` cannot be written (for ``-``: standard output is closed).
    """
    if output is not None:
        check_output(output)
    run = load_model(run_dir)
    cfg = run.info.config.data
    if ids is not None and cfg.id_column is None:
        raise DataError("the run was trained on one series (no `id_column`); `ids` needs a panel")
    source = table_path(run.info, data_path)
    if output is not None:  # the forecasts may not replace the table they are made from
        check_output(output, inputs=(source,))
    source, series = load_series(run.info, data_path, forecast_only=True)  # `window` rows do
    if run.freq is not None and series.freq is not None and series.freq != run.freq:
        raise DataError(
            f"{source} has a time step of {series.freq} but the run was trained on data with "
            f"a step of {run.freq}; its forecasts would be for steps of {run.freq}: give it a "
            "table of the same frequency"
        )
    if ids is not None:
        if not ids:
            raise DataError(
                f"`ids` is empty: name at least one series; the table has {_some(series.ids)}"
            )
        series = select_series(series, ids)  # a name the table lacks: refused there
        trained = list(run.info.scaler.ids)
        if not set(trained) & set(ids):
            raise DataError(
                f"`ids` {','.join(ids)!r} select no series the run was trained on, so none "
                f"can be forecast; it was trained on {_some(trained)}"
            )
    windows = make_inference_windows(series, cfg, run.info.scaler, run.info.static_scaler)
    out = interval_forecast(run, windows, run_calibration(run))
    values = out.point  # (n, horizon, n_targets)
    origin = windows.local_origin if windows.origin_time is None else windows.origin_time
    columns: dict[str, Any] = {}
    if windows.ids is not None:
        columns["id"] = np.asarray(windows.ids, dtype=object)[windows.series]
    columns["origin"] = origin
    for j, name in enumerate(cfg.target):
        for k in range(cfg.horizon):
            columns[f"{name}_h{k + 1}"] = values[:, k, j]
            for i, level in enumerate(out.levels):  # (n, horizon, n_targets, Q)
                columns[f"{name}_h{k + 1}_q{level_key(level)}"] = out.quantiles[:, k, j, i]
    frame = pd.DataFrame(columns)
    if output is not None:
        write_output(output, frame.to_csv(index=False).encode(), inputs=(source,))
    return frame
