"""Export a run as one self-contained forecaster: ``stacklstm export RUN_DIR --output FILE``.

The artifact is a ``jax.export`` program (StableHLO) with the trained parameters baked in,
traced on the portable pure-JAX path (``kernels.use("xla")``: the compiled CPU kernel's custom
calls cannot be serialised), with a symbolic batch dimension, lowered for CPU and CUDA. It maps
raw windows in original units to forecasts in original units, doing in one program what
``stacklstm predict`` does around the network (:func:`stacklstm.data.make_inference_windows`
and :meth:`stacklstm.data.WindowSet.to_original`): difference, scale, subtract the window
anchor, run the network, and undo each of them. The affine steps run in float64 as in
``predict``; the network in float32. :mod:`stacklstm.serving` reads the file with jax and
numpy only; the container format (header, metadata, checksum) lives there.

A run trained deseasonalised (``deseasonalize``, :mod:`stacklstm.data.season`) gives a
program of two inputs: the windows and each window's seasonal phase, that of its last row
(the forecast origin). It subtracts the pattern from the window's targets at their phases
(after ``log1p`` with ``target_transform="log1p"``) before differencing and scaling, and adds
it back at the forecast steps' phases before ``expm1``, as ``predict`` does. The metadata's
``seasonal`` entry holds what a caller needs to compute phases from time stamps (the season,
the time stamp of phase 0, the time step; see :func:`stacklstm.serving.origin_steps`).

Every kind of single run exports (:mod:`stacklstm.forecasting.export_program` builds the program;
its inputs come in the order of the metadata's ``inputs``):

- **Panels** (``id_column``): the program holds each series' scaler, and for a
  deseasonalised run each series' pattern and the shift of its phase 0 from the first
  series' (the phases it takes count from that one, the metadata's ``seasonal.reference``);
  it takes ``ids`` ``(batch,)`` int32, each window's series as its position in the
  metadata's ``ids`` (the Python runtime takes the names).
- **Covariates**: ``future`` ``(batch, horizon, n_future)``, the raw known-future columns
  (``future_features``, then the ``calendar="auto"`` columns: the metadata's
  ``future_columns``, also the last of the window's ``columns``) of the rows after each
  window's last row, differenced from the origin's row and scaled inside as ``predict``
  does; ``static`` ``(batch, n_static)``, the raw ``static_features`` (``static_columns``),
  scaled by the run's static scaler.
- **Intervals**: a quantile or distribution loss with ``interval_levels``, or ``conformal``,
  gives a second output, ``(batch, horizon, n_targets, Q)`` quantiles at the metadata's
  ``quantiles`` (``predict``'s ``<target>_h<k>_q<level>`` columns), the conformal offsets
  (``calibration.json``, or computed as ``predict`` computes them) applied inside
  (``conformal`` true).

A seed ensemble (``ensemble > 1``) is refused: a file holds one network, and the ensemble
forecasts with the median of several; export one member instead (``RUN_DIR/members/0``, a
single run with its own checkpoint and scaler).

Example:
    >>> meta = export_run("runs/co2", "runs/co2/model.stacklstm")  # doctest: +SKIP
    >>> meta["input_steps"], meta["horizon"]  # doctest: +SKIP
    (10, 1)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jax
import numpy as np
import pandas as pd

from .. import __version__, kernels, serving
from ..config import DataConfig
from ..data import PanelScaler, Scaler, covariate_sizes
from ..data.season import SeasonalPattern
from ..intervals import INTERVAL_LOSSES, Calibration, OutputHead, report_quantiles
from ..rundir.files import MEMBERS_DIR
from ..rundir.folder import atomic_write
from ..rundir.info import read_run_info
from ..rundir.outputs import check_output
from .calibration import run_calibration
from .export_program import ProgramSpec, forecast_function
from .inference import TrainedRun, load_run

log = logging.getLogger(__name__)

#: Where ``stacklstm export RUN_DIR`` writes without ``--output``.
EXPORT_FILE = "model.stacklstm"
PLATFORMS = ("cpu", "cuda")

Array = jax.Array

__all__ = [
    "EXPORT_FILE",
    "PLATFORMS",
    "ProgramSpec",
    "artifact_metadata",
    "export_forecast",
    "export_forecaster",
    "export_run",
    "forecast_function",
    "seasonal_metadata",
]


def export_forecast(
    model: Any,
    params: Any,
    cfg: DataConfig,
    scaler: Scaler | PanelScaler,
    platforms: Sequence[str] = PLATFORMS,
    head: OutputHead | None = None,
    *,
    spec: ProgramSpec | None = None,
    static_scaler: Scaler | None = None,
    calibration: Calibration | None = None,
) -> jax.export.Exported:
    """Trace and lower :func:`forecast_function` for any batch size.

    Traced on the pure-JAX path (``kernels.use("xla")``) with x64 enabled; the inputs are
    those of :attr:`ProgramSpec.inputs` (``spec`` None: the windows ``(batch, window +
    difference, n_columns)`` float64, and for a deseasonalised run ``(batch,)`` int32
    phases), ``batch`` symbolic.
    """
    spec = spec or ProgramSpec(len(scaler.columns), seasonal=scaler.seasonal is not None)
    fn = forecast_function(
        model,
        params,
        cfg,
        scaler,
        head,
        spec=spec,
        static_scaler=static_scaler,
        calibration=calibration,
    )
    with jax.enable_x64(True), kernels.use("xla"):
        (batch,) = jax.export.symbolic_shape("batch")
        specs = spec.shapes(batch, cfg.input_steps, cfg.horizon)
        return jax.export.export(jax.jit(fn), platforms=tuple(platforms))(*specs)


def seasonal_metadata(seasonal: SeasonalPattern | None) -> dict[str, Any] | None:
    """The artifact's ``seasonal`` entry (None without a pattern): the season, the phase's
    row (``"origin"``: each window's last row), the time stamp of phase 0 (for a panel, its
    first series'; the program shifts the phases of the others), the time step, and how
    :func:`stacklstm.serving.origin_steps` counts steps from it (checked here against the
    run's own time grid; null when numpy cannot count them).

    Example:
        >>> p = SeasonalPattern(12, np.zeros((1, 12, 1)), ("1958-03-01T00:00:00",), "MS")
        >>> seasonal_metadata(p)["step"]
        {'kind': 'months', 'every': 1, 'anchor': 'start'}
        >>> p = SeasonalPattern(7, np.zeros((1, 7, 1)), (None,), None)
        >>> seasonal_metadata(p)["step"], seasonal_metadata(p)["reference"]
        ({'kind': 'rows'}, None)
    """
    if seasonal is None:
        return None
    reference = seasonal.reference[0]  # a panel's phases count from its first series' phase 0
    return {
        "season": seasonal.season,
        "phase_of": "origin",
        "reference": reference,
        "freq": seasonal.freq,
        "step": _step_rule(reference, seasonal.freq),
    }


#: Steps on each side of phase 0 where a step rule must count as pandas does.
_CHECK_STEPS = (64, 640)


def _step_rule(reference: str | int | None, freq: str | None) -> dict[str, Any] | None:
    """How numpy counts time steps of ``freq`` from ``reference``: the first candidate that
    counts pandas' grid of ``freq`` around it and refuses a stamp between two steps."""
    if reference is None:
        return {"kind": "rows"}
    if isinstance(reference, int):
        return {"kind": "integer", "every": int(freq) if freq and freq.lstrip("-").isdigit() else 1}
    try:
        before = pd.date_range(end=reference, periods=_CHECK_STEPS[0] + 1, freq=freq)[:-1]
        after = pd.date_range(reference, periods=_CHECK_STEPS[1], freq=freq)
    except (ValueError, TypeError, OverflowError):
        return None
    grid = before.append(after)
    if len(after) == 0 or after[0] != pd.Timestamp(reference):
        return None
    ns = np.diff(grid.asi8)
    candidates: list[dict[str, Any]] = [
        {"kind": "fixed", "ns": int(ns[0])},
        {"kind": "business_days"},
    ]
    months = np.diff(grid.to_numpy().astype("datetime64[M]").astype(np.int64))
    if len(months) and months[0] > 0:
        candidates[1:1] = [
            {"kind": "months", "every": int(months[0]), "anchor": anchor}
            for anchor in ("start", "end")
        ]
    want = np.arange(-len(before), len(after))
    off = pd.Timestamp(reference) + pd.Timedelta(int(ns.min()) // 2, "ns")  # between two steps
    for step in candidates:
        rule = {"reference": reference, "freq": freq, "step": step}
        try:
            if not np.array_equal(serving.origin_steps(grid.to_numpy(), rule), want):
                continue
        except ValueError:
            continue
        try:
            serving.origin_steps([off.to_datetime64()], rule)
        except ValueError:  # a stamp off the grid is refused, as predict refuses it
            return step
    log.warning("cannot count steps of %r with numpy: the artifact takes phases only", freq)
    return None


def artifact_metadata(
    exported: jax.export.Exported,
    cfg: DataConfig,
    scaler: Scaler | PanelScaler,
    checkpoint: dict[str, Any] | None = None,
    *,
    spec: ProgramSpec | None = None,
    static_columns: Sequence[str] = (),
    conformal: bool = False,
) -> dict[str, Any]:
    """The metadata :mod:`stacklstm.serving` stores beside the program."""
    spec = spec or ProgramSpec(len(scaler.columns), seasonal=scaler.seasonal is not None)
    columns = list(scaler.columns)
    return {
        "layout_version": serving.LAYOUT_VERSION,
        "stacklstm_version": __version__,
        "jax_version": jax.__version__,
        "columns": columns,
        "targets": list(cfg.target),
        "window": cfg.window,
        "horizon": cfg.horizon,
        "input_steps": cfg.input_steps,
        "difference": cfg.difference,
        "normalize": cfg.normalize,
        "scaler": scaler.kind,
        "quantiles": list(spec.levels) or None,
        "platforms": list(exported.platforms),
        "dtype": "float64",
        "checkpoint": dict(checkpoint or {}),
        "seasonal": seasonal_metadata(scaler.seasonal),
        "inputs": spec.inputs,
        "ids": list(scaler.ids) if spec.panel else None,  # type: ignore[union-attr]
        "future_columns": columns[len(columns) - spec.n_future :] if spec.n_future else [],
        "static_columns": list(static_columns),
        "conformal": conformal,
    }


def export_forecaster(
    run: TrainedRun, platforms: Sequence[str] = PLATFORMS
) -> tuple[jax.export.Exported, dict[str, Any]]:
    """A loaded run's ``(exported, metadata)``: its program takes what the run needs (see
    :class:`~stacklstm.forecasting.export_program.ProgramSpec`) and gives its point forecasts,
    and its quantiles when ``stacklstm predict`` gives them (a quantile or distribution
    loss with ``interval_levels``, or ``conformal``, whose offsets the program applies)."""
    cfg, train, scaler = run.info.config.data, run.info.config.train, run.info.scaler
    head = OutputHead.of(train)
    calibration = run_calibration(run)
    if calibration is not None:
        levels = tuple(calibration.quantiles)
    elif train.loss in INTERVAL_LOSSES:
        levels = tuple(report_quantiles(train))
    else:
        levels = ()
    n_future, n_static = covariate_sizes(cfg, scaler.columns)
    panel = isinstance(scaler, PanelScaler)
    spec = ProgramSpec(
        len(scaler.columns),
        len(scaler.ids) if panel else 1,
        panel,
        scaler.seasonal is not None,
        n_future,
        n_static,
        levels,
    )
    exported = export_forecast(
        run.model,
        run.params,
        cfg,
        scaler,
        platforms,
        head,
        spec=spec,
        static_scaler=run.info.static_scaler,
        calibration=calibration,
    )
    metadata = artifact_metadata(
        exported,
        cfg,
        scaler,
        run.checkpoint,
        spec=spec,
        static_columns=cfg.static_features,
        conformal=calibration is not None,
    )
    return exported, metadata


def export_run(
    run_dir: str | Path, output: str | Path, platforms: Sequence[str] = PLATFORMS
) -> dict[str, Any]:
    """Write the run's forecaster to ``output`` (atomically); returns its metadata.

    Args:
        run_dir: The run folder (its best checkpoint, else the latest).
        output: The file to write; its folder must exist.
        platforms: Where the program may run (``jax.export`` platform names).

    Raises:
        ValueError: Not a run folder, a seed ensemble's folder (export one of its members
            instead: ``RUN_DIR/members/0``, a single run), no checkpoint, or ``output`` is
            refused by :func:`stacklstm.rundir.outputs.check_output`: a folder (or a path ending in
            ``/``), in a folder that does not exist, or a file or folder of a run folder.
        OSError: ``output`` cannot be written.
    """
    check_output(output)  # before Path(), which drops the / of a folder written `dir/`
    output = Path(output)
    info = read_run_info(run_dir)  # a bad run folder is reported before anything is traced
    n = info.config.train.ensemble
    if n > 1:
        member = Path(run_dir) / MEMBERS_DIR / "0"
        raise ValueError(
            f"{run_dir} is a seed ensemble of {n} models forecasting with their median, and "
            f"an exported file holds one model; export a member instead, e.g. "
            f"stacklstm export {member}"
        )
    run = load_run(run_dir)
    assert isinstance(run, TrainedRun)
    exported, metadata = export_forecaster(run, platforms)
    data = serving.pack(metadata, bytes(exported.serialize()))

    def write(handle) -> None:
        handle.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(handle.fileno(), 0o666 & ~umask)  # as open() would, not mkstemp's 0o600

    check_output(output)  # again: a run may have begun at `output` while this one traced
    try:
        atomic_write(output, write)
    except OSError as err:
        raise OSError(err.errno, f"cannot write {output}: {err.strerror or err}") from err
    log.info("exported %s (%d bytes, %s)", output, len(data), ", ".join(exported.platforms))
    return metadata
