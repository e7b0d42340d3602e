"""``stacklstm predict``: forecasts from every origin of a table, for a single run or a seed
ensemble, with their intervals, as a frame and optionally a CSV file.

Two layouts: ``wide`` (one row per origin, one column per target and horizon step) and
``long`` (:func:`to_long`: the forecasting ecosystem's ``unique_id, ds, <model>`` rows of the
next ``horizon`` steps after each series' last row, with ``<model>-lo-<level>`` and
``<model>-hi-<level>`` interval columns as statsforecast names them). ``combine=True`` adds
the combination forecaster's forecasts (:mod:`stacklstm.forecasting.combination`): wide
columns ``<target>_h<k>_combination``, a long column ``combination``.

Example:
    >>> frame = predict("runs/co2", output="forecasts.csv")  # doctest: +SKIP
    >>> frame.columns.tolist()[:2]  # doctest: +SKIP
    ['origin', 'co2_h1']
    >>> predict("runs/co2", format="long").columns.tolist()  # doctest: +SKIP
    ['unique_id', 'ds', 'stacklstm', 'stacklstm-lo-80', 'stacklstm-hi-80', ...]
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import numpy as np
import pandas as pd

from ..combine import NAME as COMBINATION
from ..data import DataError, make_inference_windows, select_series
from ..data.fitting import with_own_scalers
from ..intervals import interval_pairs, level_key
from ..rundir.outputs import check_output, write_output
from . import inference
from .calibration import interval_forecast, run_calibration
from .combination import by_quantile, predict_combination, saved_weights
from .fallback import fallback_frame, fallback_ids, merge
from .future import horizon_stamps, last_windows
from .inference import load_series, table_path

log = logging.getLogger(__name__)


def _some(names: Sequence[str]) -> str:
    """Up to five names, quoted (``'a', 'b' and 3 more``; ``none`` for no names)."""
    shown = ", ".join(map(repr, names[:5])) or "none"
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")


def predict(
    run_dir: str | Path,
    data_path: str | Path | None = None,
    output: str | Path | None = None,
    ids: Sequence[str] | None = None,
    format: Literal["wide", "long"] = "wide",
    combine: bool = False,
    fallback: bool = True,
    unseen: Literal["fallback", "model"] = "fallback",
) -> pd.DataFrame:
    """Forecast from every origin of a table with a full input window; optionally write a CSV.

    The table needs only ``window`` rows (+1 with ``difference``): the newest window alone
    gives the forecast from its last row. A panel run forecasts every series of the table
    it was trained on (or those named in ``ids``); a series it was not trained on, or too
    short for one input window, gets the seasonal naive forecast from its last row instead
    (:mod:`stacklstm.forecasting.fallback`), named in a warning and in a ``forecaster`` column
    (with ``fallback=False``: named in a warning and left out). A seed ensemble
    forecasts with the median of its members (:mod:`stacklstm.forecasting.ensemble`).

    Uses :func:`stacklstm.data.make_inference_windows` with the run's saved scaler(s), so the
    forecast from an origin that is also a test origin equals the report's.

    Args:
        run_dir: The run folder.
        data_path: The table (the run's own table by default); it needs the run's target,
            feature, time (and id) columns.
        output: CSV to write (None: write nothing): a file, replaced atomically; a symlink,
            whose target is written; a FIFO or device, written as a stream; ``-``, standard
            output. Never a folder, a run folder's own file, or the table read (checked
            before anything is computed). See :mod:`stacklstm.rundir.outputs`.
        ids: For a panel run: forecast only these series (None: all).
        format: ``"wide"``: the frame below; ``"long"``: :func:`to_long` of it, the next
            ``horizon`` steps after each series' last row, as ``stacklstm``, with an
            interval per symmetric pair of the quantiles the run forecasts (its
            ``interval_levels``: ``stacklstm-lo-80`` and ``stacklstm-hi-80`` for 0.8).
        combine: Also forecast with the combination of the run's report
            (:mod:`stacklstm.forecasting.combination`): the weighted mean (or median, or
            their mean) of the model's forecasts and the baselines' from the same origins,
            with the weights of the run's ``report.json``: the seasonal naive, and the
            statistical ones fitted once on each series' rows up to its first origin,
            forecasting from every origin without refitting. In the long format (the
            future) that origin is each series' last row, so they are fitted on every row,
            as statsforecast's ``forecast`` fits them. Point forecasts only.
        fallback: For a panel run, forecast the series the model cannot forecast with the
            seasonal naive forecast (True), or leave them out (False).
        unseen: For a panel run, the series of the table it was not trained on: ``"fallback"``
            (as above), or ``"model"``: the model forecasts them, each scaled (and
            transformed, deseasonalised) on its own rows as the run did its series on their
            training rows (:func:`~stacklstm.data.fitting.with_own_scalers`): a global
            model's forecast of new series, without training.

    Returns:
        One row per origin: for a panel run first ``id`` (the series), then ``origin`` (its
        time stamp, or its row number in its series without a time column), then
        ``<target>_h<k>`` for every target and horizon step ``k = 1..horizon``; a run with
        intervals adds ``<target>_h<k>_q<level>`` after each, one per quantile level
        (``co2_h1_q0.1``), calibrated with ``conformal`` (see
        :mod:`stacklstm.forecasting.calibration`). With ``combine``, ``<target>_h<k>_combination``
        after those of each step (``co2_h1_combination``) and, where the run's report has
        the combination's intervals (:mod:`stacklstm.forecasting.combination`, at
        ``interval_levels``), its quantiles ``<target>_h<k>_combination_q<level>``; in the
        long format the columns ``combination``, ``combination-lo-<level>`` and
        ``combination-hi-<level>`` after the model's. Where a series got the fallback forecast, a
        column ``forecaster`` after ``origin`` names what made each row (``"model"`` or
        ``"seasonal_naive"``; a fallback row has one origin, its series' last, and no
        intervals or combination: NaN), in the long format after ``ds``.
        ``frame.attrs["freq"]`` holds the time step
        :func:`to_long` reads (``"1"`` for row numbers; None for irregular stamps).

    Raises:
        ValueError: ``format`` is neither ``"wide"`` nor ``"long"``.
        DataError: ``ids`` for a run on one series, empty, naming a series the table lacks,
            or selecting no series the run can forecast.
        ValueError: ``output`` is refused by :func:`stacklstm.rundir.outputs.check_output`:
            a folder, a file or folder of a run folder, or the table itself.
        OSError: ``output`` cannot be written (for ``-``: standard output is closed).
        ValueError: ``combine`` for a run whose ``report.json`` has no combination weights
            (evaluated before the report had them), or whose weights need the statistical
            baselines without statsforecast installed.
    """
    if format not in ("wide", "long"):
        raise ValueError(f"format must be 'wide' or 'long', got {format!r}")
    if unseen not in ("fallback", "model"):
        raise ValueError(f"unseen must be 'fallback' or 'model', got {unseen!r}")
    if output is not None:
        check_output(output)
    if combine:  # refused before anything is computed: the run's report has no weights
        saved_weights(run_dir)
    run = inference.load_run(run_dir)
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
        if unseen == "fallback" and not set(trained) & set(ids):
            raise DataError(
                f"`ids` {','.join(ids)!r} select no series the run was trained on, so none "
                f"can be forecast; it was trained on {_some(trained)}"
            )
    scaler = run.info.scaler
    if unseen == "model" and series.ids is not None:  # new series scaled on their own rows
        scaler = with_own_scalers(series, cfg, scaler, cfg.min_input_rows)
    left: dict[str, str] = {}
    if series.ids is not None and fallback:
        left = fallback_ids(series, scaler.ids, cfg.min_input_rows)
    order = list(series.ids) if series.ids is not None else []
    fallback_rows = None
    if left:
        log.warning(
            "%d series get the seasonal naive forecast (the model cannot forecast them: too "
            "short for one input window, or not trained on): %s",
            len(left),
            _some(list(left)),
        )
        others = (COMBINATION,) if combine else ()
        fallback_rows = fallback_frame(
            series, list(left), cfg.target, cfg.horizon, cfg.season, others
        )
        kept = [name for name in order if name not in left]
        if not kept:
            frame = merge(None, fallback_rows, order)
            return _finish(frame, cfg, series, (), combine, format, output, source, run.freq)
        series = select_series(series, kept)
    windows = make_inference_windows(series, cfg, scaler, run.info.static_scaler)
    if format == "long":  # the future alone: each series' last window, so the
        windows = last_windows(windows)  # combination's statistical models fit every row
    out = interval_forecast(run, windows, run_calibration(run))
    values = out.point  # (n, horizon, n_targets)
    mixed, bands = (
        predict_combination(run_dir, windows, values, cfg.season) if combine else (None, {})
    )
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
            if mixed is not None:
                columns[f"{name}_h{k + 1}_{COMBINATION}"] = mixed[:, k, j]
            for q, bound in by_quantile(bands).items():  # the combination's intervals
                columns[f"{name}_h{k + 1}_{COMBINATION}_q{level_key(q)}"] = bound[:, k, j]
    frame = pd.DataFrame(columns)
    if fallback_rows is not None:
        frame = merge(frame, fallback_rows, order)
    return _finish(frame, cfg, series, out.levels, combine, format, output, source, run.freq)


def _finish(
    frame: pd.DataFrame,
    cfg: Any,
    series: Any,
    levels: Sequence[float],
    combine: bool,
    format: str,
    output: str | Path | None,
    source: Path,
    run_freq: str | None = None,
) -> pd.DataFrame:
    """The wide ``frame`` as ``format`` asks, written to ``output`` if given; the time step
    is the table's, or where the table is too short to show one (a row per series), the
    training data's (``run_freq``)."""
    step = "1" if cfg.time_column is None else (series.freq or run_freq)
    frame.attrs["freq"] = step  # the time step, for to_long (None: irregular stamps)
    if format == "long":
        percents = [100 * level for level, _, _ in interval_pairs(levels)]
        others = (COMBINATION,) if combine else ()
        frame = to_long(frame, cfg.target, cfg.horizon, step, levels=percents, models=others)
    if output is not None:
        write_output(output, frame.to_csv(index=False).encode(), inputs=(source,))
    return frame


def _pairs_of(wide: pd.DataFrame, prefix: str) -> dict[str, tuple[str, str]]:
    """``{level name: (low key, high key)}`` of the symmetric quantile pairs among the
    columns ``<prefix><key>`` of ``wide`` (a forecaster's intervals), ascending by level."""
    keys = {
        float(c.removeprefix(prefix)): c.removeprefix(prefix) for c in wide if c.startswith(prefix)
    }
    ordered = sorted(keys)
    return {
        level_name(100 * level): (keys[ordered[lo]], keys[ordered[hi]])
        for level, lo, hi in interval_pairs(ordered)
    }


def level_name(level: float) -> str:
    """The text of an interval level in percent as column names hold it: ``80 -> "80"``,
    ``97.5 -> "97.5"`` (statsforecast's ``<model>-lo-80``)."""
    return f"{round(float(level), 8):g}"


def to_long(
    wide: pd.DataFrame,
    targets: Sequence[str],
    horizon: int,
    freq: str | None,
    *,
    levels: Sequence[float] = (),
    alias: str = "stacklstm",
    every_origin: bool = False,
    models: Sequence[str] = (),
) -> pd.DataFrame:
    """The forecasts of :func:`predict`'s wide frame in the long format of statsforecast.

    Args:
        wide: :func:`predict`'s frame: ``[id,] origin, <target>_h<k>[, <target>_h<k>_q<q>]``.
        targets: The run's targets (``DataConfig.target``).
        horizon: The run's horizon.
        freq: The time step (``Series.freq``: a pandas offset alias, or a whole number as
            text for whole-number stamps and row numbers; None: irregular, refused).
        levels: Interval levels in percent (``80``: the 0.1 and 0.9 quantiles); each needs
            both quantiles among ``wide``'s columns.
        alias: The name of the forecast column (the model's name).
        every_origin: False: only each series' last origin (the forecast of the future);
            True: every origin, with a ``cutoff`` column holding it.
        models: Other forecasters whose columns ``<target>_h<k>_<model>`` the wide frame
            holds (``"combination"``): each becomes a column ``<model>`` after the intervals,
            and its quantile columns ``<target>_h<k>_<model>_q<q>`` the columns
            ``<model>-lo-<level>``, ``<model>-hi-<level>`` of each symmetric pair.

    Returns:
        One row per series, origin and horizon step: ``unique_id`` (the panel's id, or for a
        run on one series the target's name; with several targets in a panel
        ``<id>/<target>``), ``ds`` (the stamp of the step: ``origin + k`` steps of ``freq``),
        with ``every_origin`` ``cutoff``, then ``<alias>``, per level
        ``<alias>-lo-<level>``, ``<alias>-hi-<level>``, then each of ``models``. Rows
        ordered by target, series, origin, step.

    Raises:
        ValueError: A level outside (0, 100) or without its quantiles in ``wide``; irregular
            time stamps (``freq`` None).

    Example:
        >>> wide = pd.DataFrame({"origin": [3], "y_h1": [1.0], "y_h2": [2.0]})
        >>> to_long(wide, ["y"], 2, "1").to_dict("list")
        {'unique_id': ['y', 'y'], 'ds': [4, 5], 'stacklstm': [1.0, 2.0]}
    """
    quantile_of = {}
    for level in levels:
        if not 0 < float(level) < 100:
            raise ValueError(f"interval levels are percentages in (0, 100), got {level!r}")
        fraction = float(level) / 100
        pair = [level_key(round((1 - fraction) / 2, 10)), level_key(round((1 + fraction) / 2, 10))]
        missing = [key for key in pair if f"{targets[0]}_h1_q{key}" not in wide.columns]
        if missing:
            have = [c.split("_q")[-1] for c in wide.columns if c.startswith(f"{targets[0]}_h1_q")]
            raise ValueError(
                f"an interval at level {level_name(level)} needs the quantiles {pair[0]} and "
                f"{pair[1]} but the model forecasts {_some(have)}; train it with that level in "
                "`interval_levels` and a quantile or distribution `loss`, or with `conformal`"
            )
        quantile_of[level_name(level)] = pair
    if not every_origin:
        wide = wide.groupby("id", sort=False).tail(1) if "id" in wide else wide.tail(1)
    origin = wide["origin"].to_numpy()
    stamps = horizon_stamps(origin, freq, horizon).reshape(-1)
    blocks = []
    for target in targets:
        if "id" not in wide:
            names = np.full(len(wide), target, dtype=object)
        elif len(targets) == 1:
            names = wide["id"].to_numpy(dtype=object)
        else:
            names = np.asarray([f"{name}/{target}" for name in wide["id"]], dtype=object)
        columns: dict[str, Any] = {"unique_id": np.repeat(names, horizon), "ds": stamps}
        if every_origin:
            columns["cutoff"] = np.repeat(origin, horizon)
        if "forecaster" in wide:  # some series got the fallback forecast
            columns["forecaster"] = np.repeat(wide["forecaster"].to_numpy(dtype=object), horizon)

        def steps(suffix: str, target: str = target) -> np.ndarray:
            names = [f"{target}_h{k + 1}{suffix}" for k in range(horizon)]
            return wide[names].to_numpy(dtype=np.float64).reshape(-1)  # (n * horizon,)

        columns[alias] = steps("")
        for name, (low, high) in quantile_of.items():
            columns[f"{alias}-lo-{name}"] = steps(f"_q{low}")
            columns[f"{alias}-hi-{name}"] = steps(f"_q{high}")
        for model in models:
            columns[model] = steps(f"_{model}")
            for name, (low, high) in _pairs_of(wide, f"{target}_h1_{model}_q").items():
                columns[f"{model}-lo-{name}"] = steps(f"_{model}_q{low}")
                columns[f"{model}-hi-{name}"] = steps(f"_{model}_q{high}")
        blocks.append(pd.DataFrame(columns))
    return pd.concat(blocks, ignore_index=True)
