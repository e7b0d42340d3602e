"""The exported forecaster at run time: windows in, forecasts in original units out."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

import jax
import numpy as np

from ._format import origin_steps, unpack


class ExportedForecaster:
    """An exported forecaster: raw windows in, forecasts in original units out.

    Attributes:
        metadata: The artifact's metadata (see :data:`stacklstm.serving.METADATA_KEYS`).
        exported: The ``jax.export.Exported`` program.
        columns: The input columns, in order (targets first).
        targets: The forecast targets.
        window: The run's input window.
        horizon: Steps forecast per window.
        input_steps: Rows per input window: ``window``, plus one with differencing.
        seasonal: For a run trained deseasonalised: ``season``, ``phase_of`` (``"origin"``:
            the phase is that of each window's last row), ``reference`` (the time stamp of
            phase 0: an ISO date-time, an integer, or null for phases counted in rows from
            a table's first row), ``freq`` (the time step) and ``step`` (see
            :func:`origin_steps`); None otherwise.
        season: ``seasonal["season"]``, or 1 without one.
    """

    def __init__(self, metadata: dict[str, Any], exported: Any, source: str = "the artifact"):
        self.metadata = metadata
        self.exported = exported
        self.columns: tuple[str, ...] = tuple(metadata["columns"])
        self.targets: tuple[str, ...] = tuple(metadata["targets"])
        self.window: int = metadata["window"]
        self.horizon: int = metadata["horizon"]
        self.input_steps: int = metadata["input_steps"]
        self.seasonal: dict[str, Any] | None = metadata.get("seasonal")
        self.season: int = 1 if self.seasonal is None else self.seasonal["season"]
        inputs, outputs = exported.in_avals, exported.out_avals
        n_inputs = 1 if self.seasonal is None else 2
        shapes = [tuple(a.shape) for a in inputs]
        if (
            len(inputs) != n_inputs
            or len(outputs) != 1
            or len(inputs[0].shape) != 3
            or tuple(inputs[0].shape[1:]) != (self.input_steps, len(self.columns))
            or (n_inputs == 2 and len(inputs[1].shape) != 1)
            or len(outputs[0].shape) != 3
            or tuple(outputs[0].shape[1:]) != (self.horizon, len(self.targets))
        ):
            want = f"{self.input_shape}" + (" and phases ('batch',)" if n_inputs == 2 else "")
            raise ValueError(
                f"{source} is damaged: its program maps {', '.join(map(str, shapes))} to "
                f"{', '.join(str(a.shape) for a in outputs)} but its metadata says {want} to "
                f"{self.output_shape}"
            )
        self._call = jax.jit(exported.call)

    @property
    def input_shape(self) -> tuple[str | int, ...]:
        """``("batch", input_steps, n_columns)``."""
        return ("batch", self.input_steps, len(self.columns))

    @property
    def output_shape(self) -> tuple[str | int, ...]:
        """``("batch", horizon, n_targets)``."""
        return ("batch", self.horizon, len(self.targets))

    @property
    def forecast_columns(self) -> list[str]:
        """``<target>_h<k>``, target-major: the columns ``stacklstm predict`` writes."""
        return [f"{t}_h{k}" for t in self.targets for k in range(1, self.horizon + 1)]

    def windows(self, values: Any) -> np.ndarray:
        """Every input window of a series: ``(time, n_columns)`` -> ``(n, input_steps,
        n_columns)`` float64, window ``i`` ending at row ``input_steps - 1 + i``.

        Example:
            >>> f.windows(np.arange(12.0).reshape(12, 1)).shape  # doctest: +SKIP
            (3, 10, 1)
        """
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 2 or values.shape[1] != len(self.columns):
            raise ValueError(
                f"expected a series of shape (time, {len(self.columns)}) holding the columns "
                f"{list(self.columns)}, got shape {values.shape}"
            )
        if values.shape[0] < self.input_steps:
            raise ValueError(
                f"the series has {values.shape[0]} rows but one input window needs "
                f"{self.input_steps}"
            )
        view = np.lib.stride_tricks.sliding_window_view(values, self.input_steps, axis=0)
        return np.ascontiguousarray(np.swapaxes(view, 1, 2))  # (n, input_steps, n_columns)

    def phases(self, last_time: Any) -> np.ndarray:
        """``(batch,)`` int64 seasonal phases of windows whose last rows have the time stamps
        ``last_time`` (one, or ``(batch,)``): ``origin_steps(last_time) % season``.

        Stamps are what the run's time column held: date-times (``numpy.datetime64``, ISO
        text, pandas ``Timestamp`` objects), whole numbers, or, for a run without regular time
        stamps, row numbers counted from the first row of the table (``stacklstm predict``'s
        ``origin`` column in every case). Zeros without a seasonal pattern.

        Raises:
            ValueError: A stamp off the run's time grid, or a time step numpy cannot count
                (then pass ``phase=`` to :meth:`predict`).
        """
        if self.seasonal is None:
            return np.zeros(np.shape(last_time) or (1,), dtype=np.int64).reshape(-1)
        return origin_steps(last_time, self.seasonal) % self.season

    def predict(self, windows: Any, phase: Any = None, *, last_time: Any = None) -> np.ndarray:
        """Forecasts ``(batch, horizon, n_targets)`` float64 of ``windows`` ``(batch,
        input_steps, n_columns)`` (any batch size), both in the run's original units.

        Args:
            windows: The input windows, oldest row first.
            phase: For a deseasonalised run (``seasonal`` set): the seasonal phase of each
                window's last row, ``(batch,)`` integers or one for all (taken modulo
                ``season``); see the module's input contract.
            last_time: Instead of ``phase``: the time stamps of the windows' last rows
                (see :meth:`phases`). Both are ignored for a run without a seasonal pattern.

        Raises:
            ValueError: ``windows`` of another shape; a deseasonalised run's forecaster called
                without ``phase`` or ``last_time``, or with both, or phases of another length.

        Example:
            >>> f.predict(windows, last_time=frame["origin"].to_numpy())  # doctest: +SKIP
        """
        x = np.asarray(windows, dtype=np.float64)
        if x.ndim != 3 or x.shape[1:] != self.input_shape[1:]:
            extra = (
                f" ({self.window} steps plus the row before them, which differencing needs)"
                if self.input_steps != self.window
                else ""
            )
            raise ValueError(
                f"expected windows of shape (batch, input_steps, n_columns) = (batch, "
                f"{self.input_steps}{extra}, {len(self.columns)}) holding the columns "
                f"{list(self.columns)} in original units, got shape {x.shape}"
            )
        phases = self._phases(x.shape[0], phase, last_time)
        if x.shape[0] == 0:
            return np.zeros((0, self.horizon, len(self.targets)))
        with jax.enable_x64(True):  # the program takes and returns float64
            if phases is None:
                return np.asarray(self._call(x))
            return np.asarray(self._call(x, phases))

    def _phases(self, batch: int, phase: Any, last_time: Any) -> np.ndarray | None:
        """The program's ``(batch,)`` int32 phases, or None when it takes none."""
        if phase is not None and last_time is not None:
            raise ValueError("pass the phases (phase=) or the time stamps (last_time=), not both")
        if self.seasonal is None:
            return None
        if phase is None and last_time is None:
            raise ValueError(
                f"this forecaster's run was trained deseasonalised (season {self.season}): pass "
                "each window's phase (phase=, that of its last row) or its last row's time "
                f"stamp (last_time=; phase 0 is {self.seasonal['reference']!r}, the step "
                f"{self.seasonal['freq']!r})"
            )
        if phase is None:
            if np.ndim(last_time) > 1:
                shape = np.shape(last_time)
                raise ValueError(f"last_time must be one stamp or (batch,), got shape {shape}")
            if np.ndim(last_time) == 1 and len(last_time) != batch:
                raise ValueError(f"got {len(last_time)} time stamps for {batch} windows")
            values = self.phases(last_time)
        else:
            values = np.asarray(phase)
            if values.dtype.kind not in "iu" or values.ndim > 1:
                raise ValueError(
                    f"phase must be integers, one or one per window (batch,), got {values.dtype} "
                    f"of shape {values.shape}"
                )
            if values.ndim == 1 and values.shape[0] != batch:
                raise ValueError(f"got {values.shape[0]} phases for {batch} windows")
        phases = values.astype(np.int64).reshape(-1) % self.season
        return np.broadcast_to(phases, (batch,)).astype(np.int32)


def from_bytes(data: bytes, source: str = "the artifact") -> ExportedForecaster:
    """An :class:`ExportedForecaster` from a file's bytes (see :func:`load`)."""
    metadata, program = unpack(data, source)
    if importlib.util.find_spec("flatbuffers") is None:
        raise ImportError(
            "reading a jax.export program needs the flatbuffers package: pip install flatbuffers"
        )
    try:
        exported = jax.export.deserialize(bytearray(program))
    except Exception as err:  # the flatbuffer reader raises many kinds on bad bytes
        raise ValueError(f"{source} is damaged: its program cannot be read ({err})") from err
    return ExportedForecaster(metadata, exported, source)


def load(path: str | Path) -> ExportedForecaster:
    """Load a file written by ``stacklstm export``; needs jax, numpy and flatbuffers only.

    Args:
        path: The file.

    Returns:
        An :class:`ExportedForecaster`; ``predict(windows)`` runs it on the default device (CPU or
        CUDA).

    Raises:
        ValueError: Not a stacklstm export, another layout version, or a truncated or damaged
            file.
        OSError: The file cannot be read.
    """
    path = Path(path)
    return from_bytes(path.read_bytes(), str(path))
