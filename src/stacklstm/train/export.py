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

Example:
    >>> meta = export_run("runs/co2", "runs/co2/model.stacklstm")  # doctest: +SKIP
    >>> meta["input_steps"], meta["horizon"]  # doctest: +SKIP
    (10, 1)
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd

from .. import __version__, kernels, serving
from ..config import DataConfig
from ..data import Scaler
from ..data.season import SeasonalPattern
from ..intervals import OutputHead
from ..kernels.lstm import LSTMState
from .files import MEMBERS_DIR
from .inference import TrainedRun, load_run
from .outputs import check_output
from .rundir import atomic_write, read_run_info

log = logging.getLogger(__name__)

#: Where ``stacklstm export RUN_DIR`` writes without ``--output``.
EXPORT_FILE = "model.stacklstm"
PLATFORMS = ("cpu", "cuda")

Array = jax.Array


def forecast_function(
    model: Any, params: Any, cfg: DataConfig, scaler: Scaler, head: OutputHead | None = None
) -> Callable[..., Array]:
    """The function the artifact holds: raw windows -> forecasts, both in original units.

    Args:
        model: The run's ``LSTMModel``.
        params: Its parameters (the ``params`` collection), baked in as constants.
        cfg: The run's data settings (window, horizon, targets, normalize, difference).
        scaler: The run's fitted scaler.
        head: The run's output head (None: a point loss); the artifact gives its point
            forecast (the 0.5 quantile, the mean or the Student-t location), no quantiles.

    Returns:
        ``f(x)``: ``x`` ``(batch, window + difference, n_columns)`` float64 ->
        ``(batch, horizon, n_targets)`` float64; ``f(x, phase)`` for a scaler with a
        seasonal pattern, ``phase`` ``(batch,)`` int32 the phase of each window's last row.
        Trace it with x64 enabled.
    """
    nt, horizon = len(cfg.target), cfg.horizon
    input_steps = cfg.window + int(cfg.difference)
    head = OutputHead("mse") if head is None else head
    center = np.asarray(scaler.center, np.float64)  # (n_columns,)
    scale = np.asarray(scaler.scale, np.float64)
    params = jax.tree.map(np.asarray, jax.device_get(params))

    log1p = cfg.target_transform == "log1p"
    seasonal = scaler.seasonal
    if seasonal is not None and seasonal.pattern.shape != (1, seasonal.season, nt):
        raise ValueError(
            f"expected the seasonal pattern of one series of {nt} targets, got shape "
            f"{seasonal.pattern.shape}"
        )
    pattern = None if seasonal is None else np.asarray(seasonal.pattern[0], np.float64)
    # the rows' offsets from the window's last row: the window's rows, then the horizon's
    offsets = np.arange(-(input_steps - 1), horizon + 1)

    def f(x: Array, phase: Array | None = None) -> Array:
        batch = x.shape[0]  # symbolic when exported
        if log1p:  # target_transform: the model works on log1p of the targets
            x = jnp.concatenate([jnp.log1p(x[:, :, :nt]), x[:, :, nt:]], axis=2)
        if pattern is not None:  # (batch, input_steps + horizon, n_targets) at each row's phase
            assert phase is not None
            rows = (phase.astype(jnp.int64)[:, None] + offsets) % pattern.shape[0]
            seasons = jnp.asarray(pattern)[rows]
            x = jnp.concatenate([x[:, :, :nt] - seasons[:, :input_steps], x[:, :, nt:]], axis=2)
        steps = x[:, 1:] - x[:, :-1] if cfg.difference else x  # (batch, window, n_columns)
        scaled = (steps - center) / scale
        if cfg.normalize == "window":
            anchor = scaled[:, -1, :nt]  # (batch, n_targets): the target at the origin
        else:
            anchor = jnp.zeros((batch, nt), scaled.dtype)
        inputs = jnp.concatenate([scaled[:, :, :nt] - anchor[:, None, :], scaled[:, :, nt:]], 2)
        # An explicit zero carry: LSTMModel's default one wants a concrete batch size.
        zeros = jnp.zeros((batch, model.lstm_hidden_size), jnp.float32)
        carry = tuple(LSTMState(zeros, zeros) for _ in range(model.num_states))
        y = model.apply({"params": params}, inputs.astype(jnp.float32), carry)
        y = head.point(y, horizon, nt).astype(jnp.float64)  # horizon-major, as in training
        out = (y + anchor[:, None, :]) * scale[:nt] + center[:nt]
        if cfg.difference:
            out = x[:, -1:, :nt] + jnp.cumsum(out, axis=1)  # from the level at the origin
        if pattern is not None:
            out = out + seasons[:, input_steps:]
        return jnp.maximum(jnp.expm1(out), 0.0) if log1p else out

    return f


def export_forecast(
    model: Any,
    params: Any,
    cfg: DataConfig,
    scaler: Scaler,
    platforms: Sequence[str] = PLATFORMS,
    head: OutputHead | None = None,
) -> jax.export.Exported:
    """Trace and lower :func:`forecast_function` for any batch size.

    Traced on the pure-JAX path (``kernels.use("xla")``) with x64 enabled; the input is
    ``(batch, window + difference, n_columns)`` float64 with ``batch`` symbolic, and for a
    deseasonalised run also ``(batch,)`` int32 phases.
    """
    input_steps = cfg.window + int(cfg.difference)
    fn = forecast_function(model, params, cfg, scaler, head)
    with jax.enable_x64(True), kernels.use("xla"):
        (batch,) = jax.export.symbolic_shape("batch")
        specs = [jax.ShapeDtypeStruct((batch, input_steps, len(scaler.columns)), jnp.float64)]
        if scaler.seasonal is not None:
            specs.append(jax.ShapeDtypeStruct((batch,), jnp.int32))
        return jax.export.export(jax.jit(fn), platforms=tuple(platforms))(*specs)


def seasonal_metadata(seasonal: SeasonalPattern | None) -> dict[str, Any] | None:
    """The artifact's ``seasonal`` entry for a one-series pattern (None without one): the
    season, the phase's row (``"origin"``: each window's last row), the time stamp of phase
    0, the time step, and how :func:`stacklstm.serving.origin_steps` counts steps from it
    (checked here against the run's own time grid; null when numpy cannot count them).

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
    (reference,) = seasonal.reference
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
    scaler: Scaler,
    checkpoint: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The metadata :mod:`stacklstm.serving` stores beside the program."""
    return {
        "layout_version": serving.LAYOUT_VERSION,
        "stacklstm_version": __version__,
        "jax_version": jax.__version__,
        "columns": list(scaler.columns),
        "targets": list(cfg.target),
        "window": cfg.window,
        "horizon": cfg.horizon,
        "input_steps": cfg.window + int(cfg.difference),
        "difference": cfg.difference,
        "normalize": cfg.normalize,
        "scaler": scaler.kind,
        "quantiles": None,  # point forecasts only
        "platforms": list(exported.platforms),
        "dtype": "float64",
        "checkpoint": dict(checkpoint or {}),
        "seasonal": seasonal_metadata(scaler.seasonal),
    }


def export_forecaster(
    run: TrainedRun, platforms: Sequence[str] = PLATFORMS
) -> tuple[jax.export.Exported, dict[str, Any]]:
    """A loaded run's ``(exported, metadata)``; see :func:`export_forecast`."""
    cfg, scaler = run.info.config.data, run.info.scaler
    head = OutputHead.of(run.info.config.train)
    exported = export_forecast(run.model, run.params, cfg, scaler, platforms, head)
    return exported, artifact_metadata(exported, cfg, scaler, run.checkpoint)


def export_run(
    run_dir: str | Path, output: str | Path, platforms: Sequence[str] = PLATFORMS
) -> dict[str, Any]:
    """Write the run's forecaster to ``output`` (atomically); returns its metadata.

    Args:
        run_dir: The run folder (its best checkpoint, else the latest).
        output: The file to write; its folder must exist.
        platforms: Where the program may run (``jax.export`` platform names).

    Raises:
        ValueError: Not a run folder, a seed ensemble's folder, a panel or covariate run, no
            checkpoint, or ``output`` is refused by
            :func:`stacklstm.train.outputs.check_output`: a folder (or a path ending in
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
    if info.config.data.id_column is not None:
        raise ValueError(
            f"{run_dir} was trained on a panel (id_column={info.config.data.id_column!r}), "
            "whose scaling differs per series; export writes one-series forecasters only"
        )
    if info.config.data.has_covariates:
        raise ValueError(
            f"{run_dir} was trained with covariates (future_features, static_features or "
            "calendar='auto'); export writes forecasters of the past window only"
        )
    run = load_run(run_dir)
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
