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
            phase 0, for a panel its first series': an ISO date-time, an integer, or null for
            phases counted in rows from a series' first row), ``freq`` (the time step) and
            ``step`` (see :func:`origin_steps`); None otherwise.
        season: ``seasonal["season"]``, or 1 without one.
        ids: A panel run's series names (``predict(..., ids=)``), or None.
        future_columns: The known-future columns (``predict(..., future=)``), in order: the
            last of ``columns``; ``()`` without them.
        static_columns: The static columns (``predict(..., static=)``); ``()`` without them.
        quantiles: The quantile levels of :meth:`predict_quantiles` (``()``: points only).
        conformal: Whether the quantiles are conformally calibrated.
        inputs: The program's inputs, in order (``windows`` first).
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
        ids = metadata["ids"]
        self.ids: tuple[str, ...] | None = None if ids is None else tuple(ids)
        self.future_columns: tuple[str, ...] = tuple(metadata["future_columns"])
        self.static_columns: tuple[str, ...] = tuple(metadata["static_columns"])
        self.quantiles: tuple[float, ...] = tuple(metadata["quantiles"] or ())
        self.conformal: bool = metadata["conformal"]
        self.inputs: tuple[str, ...] = tuple(metadata["inputs"])
        self._index = {name: i for i, name in enumerate(self.ids or ())}
        self._check_program(source)
        self._call = jax.jit(exported.call)

    def _shapes(self) -> dict[str, tuple[str | int, ...]]:
        """The shape of each input the metadata names."""
        return {
            "windows": self.input_shape,
            "phase": ("batch",),
            "ids": ("batch",),
            "future": ("batch", self.horizon, len(self.future_columns)),
            "static": ("batch", len(self.static_columns)),
        }

    def _check_program(self, source: str) -> None:
        """The program's inputs and outputs agree with the metadata."""
        inputs, outputs = self.exported.in_avals, self.exported.out_avals
        shapes = self._shapes()
        want_in = [shapes[name] for name in self.inputs]
        want_out = [self.output_shape] + ([self.quantile_shape] if self.quantiles else [])

        def same(avals: Any, want: list[tuple[str | int, ...]]) -> bool:
            return len(avals) == len(want) and all(
                len(a.shape) == len(w) and tuple(a.shape[1:]) == tuple(w[1:])
                for a, w in zip(avals, want, strict=True)
            )

        if not same(inputs, want_in) or not same(outputs, want_out):
            shown = ", ".join(str(tuple(a.shape)) for a in inputs)
            named = ", ".join(f"{n} {s}" for n, s in zip(self.inputs, want_in, strict=True))
            raise ValueError(
                f"{source} is damaged: its program maps {shown} to "
                f"{', '.join(str(a.shape) for a in outputs)} but its metadata says {named} to "
                f"{', '.join(map(str, want_out))}"
            )

    @property
    def input_shape(self) -> tuple[str | int, ...]:
        """``("batch", input_steps, n_columns)``."""
        return ("batch", self.input_steps, len(self.columns))

    @property
    def output_shape(self) -> tuple[str | int, ...]:
        """``("batch", horizon, n_targets)``."""
        return ("batch", self.horizon, len(self.targets))

    @property
    def quantile_shape(self) -> tuple[str | int, ...]:
        """``("batch", horizon, n_targets, n_quantiles)`` (:meth:`predict_quantiles`)."""
        return ("batch", self.horizon, len(self.targets), len(self.quantiles))

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

    def predict(
        self,
        windows: Any,
        phase: Any = None,
        *,
        last_time: Any = None,
        ids: Any = None,
        future: Any = None,
        static: Any = None,
    ) -> np.ndarray:
        """Forecasts ``(batch, horizon, n_targets)`` float64 of ``windows`` ``(batch,
        input_steps, n_columns)`` (any batch size), both in the run's original units.

        Args:
            windows: The input windows, oldest row first.
            phase: For a deseasonalised run (``seasonal`` set): the seasonal phase of each
                window's last row, ``(batch,)`` integers or one for all (taken modulo
                ``season``); see the module's input contract.
            last_time: Instead of ``phase``: the time stamps of the windows' last rows
                (see :meth:`phases`). Both are ignored for a run without a seasonal pattern.
            ids: For a panel run (``ids`` set): the series of each window, ``(batch,)`` names
                or one name for all.
            future: For a run with known-future columns: their raw values over the horizon,
                ``(batch, horizon, n_future)`` in :attr:`future_columns` order (the rows
                after each window's last row).
            static: For a run with static columns: ``(batch, n_static)`` raw values in
                :attr:`static_columns` order, or ``(n_static,)`` for all windows.

        Raises:
            ValueError: ``windows`` of another shape; a deseasonalised run's forecaster called
                without ``phase`` or ``last_time``, or with both, or phases of another length;
                ``ids``, ``future`` or ``static`` missing where the run needs them, given
                where it has none, of another shape, or an id the run was not trained on.

        Example:
            >>> f.predict(windows, last_time=frame["origin"].to_numpy())  # doctest: +SKIP
        """
        return self.forecast(
            windows, phase, last_time=last_time, ids=ids, future=future, static=static
        )[0]

    def predict_quantiles(self, windows: Any, phase: Any = None, **inputs: Any) -> np.ndarray:
        """Quantiles ``(batch, horizon, n_targets, n_quantiles)`` float64 at the levels
        :attr:`quantiles` (calibrated when :attr:`conformal`), in original units: what
        ``stacklstm predict`` writes as ``<target>_h<k>_q<level>``. Takes what
        :meth:`predict` takes.

        Raises:
            ValueError: A run without quantiles (a point loss without ``conformal``), and
                what :meth:`predict` raises.
        """
        if not self.quantiles:
            raise ValueError(
                "this forecaster gives point forecasts only: its run was trained with a point "
                "loss and without conformal; train with loss='quantile', 'normal' or "
                "'student_t', or with conformal=True, for quantiles"
            )
        return self.forecast(windows, phase, **inputs)[1]  # type: ignore[return-value]

    def forecast(
        self,
        windows: Any,
        phase: Any = None,
        *,
        last_time: Any = None,
        ids: Any = None,
        future: Any = None,
        static: Any = None,
    ) -> tuple[np.ndarray, np.ndarray | None]:
        """``(point, quantiles)``: :meth:`predict`'s and :meth:`predict_quantiles`' (None
        without quantiles), from one run of the program. Takes what :meth:`predict` takes."""
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
        _refuse_infinite("windows", x)
        batch = x.shape[0]
        if batch == 0:  # nothing to forecast (nor ids, phases, ... to check against)
            q = np.zeros((0, self.horizon, len(self.targets), len(self.quantiles)))
            return np.zeros((0, self.horizon, len(self.targets))), q if self.quantiles else None
        given = {
            "windows": x,
            "phase": self._phases(batch, phase, last_time),
            "ids": self.series_index(ids, batch),
            "future": self._future(future, batch),
            "static": self._static(static, batch),
        }
        for name in ("future", "static"):
            if given[name] is not None:
                _refuse_infinite(name, given[name])
        with jax.enable_x64(True):  # the program takes and returns float64
            out = self._call(*(given[name] for name in self.inputs))
        if self.quantiles:
            return np.asarray(out[0]), np.asarray(out[1])
        return np.asarray(out[0] if isinstance(out, (tuple, list)) else out), None

    def series_index(self, ids: Any, batch: int) -> np.ndarray | None:
        """``(batch,)`` int32 positions in :attr:`ids` of the series names ``ids`` (one name,
        or one per window); None for a run on one series (which takes no ``ids``).

        Raises:
            ValueError: ``ids`` missing for a panel run or given for another, of another
                length, or naming a series the run was not trained on.
        """
        if self.ids is None:
            if ids is not None:
                raise ValueError("this forecaster's run was trained on one series: it takes no ids")
            return None
        if ids is None:
            raise ValueError(
                f"this forecaster's run was trained on a panel of {len(self.ids)} series: pass "
                f"the series of each window (ids=, e.g. {_some(self.ids)})"
            )
        names = [ids] if isinstance(ids, str) else list(np.asarray(ids, dtype=object).ravel())
        if len(names) not in (1, batch):
            raise ValueError(f"got {len(names)} ids for {batch} windows")
        unknown = [name for name in names if name not in self._index]
        if unknown:
            raise ValueError(
                f"no series {unknown[0]!r} in the run: it was trained on {_some(self.ids)}"
            )
        index = np.asarray([self._index[name] for name in names], dtype=np.int32)
        return np.broadcast_to(index, (batch,)).copy()

    def _future(self, future: Any, batch: int) -> np.ndarray | None:
        """The program's ``(batch, horizon, n_future)`` float64 known-future input."""
        n = len(self.future_columns)
        if n == 0:
            if future is not None and np.size(future):
                raise ValueError(
                    "this forecaster's run has no known-future columns: it takes no future"
                )
            return None
        if future is None:
            raise ValueError(
                f"this forecaster's run knows {list(self.future_columns)} in advance: pass their "
                f"values over the horizon (future=, shape (batch, {self.horizon}, {n}))"
            )
        values = np.asarray(future, dtype=np.float64)
        if values.shape != (batch, self.horizon, n):
            raise ValueError(
                f"expected future of shape (batch, horizon, n_future) = ({batch}, {self.horizon}, "
                f"{n}) holding {list(self.future_columns)} in original units, got shape "
                f"{values.shape}"
            )
        return values

    def _static(self, static: Any, batch: int) -> np.ndarray | None:
        """The program's ``(batch, n_static)`` float64 static input."""
        n = len(self.static_columns)
        if n == 0:
            if static is not None and np.size(static):
                raise ValueError("this forecaster's run has no static columns: it takes no static")
            return None
        if static is None:
            raise ValueError(
                f"this forecaster's run has the static columns {list(self.static_columns)}: pass "
                f"their values (static=, shape (batch, {n}) or ({n},))"
            )
        values = np.asarray(static, dtype=np.float64)
        if values.shape == (n,):
            values = np.broadcast_to(values, (batch, n))
        if values.shape != (batch, n):
            raise ValueError(
                f"expected static of shape (batch, n_static) = ({batch}, {n}) or ({n},) holding "
                f"{list(self.static_columns)}, got shape {values.shape}"
            )
        return np.ascontiguousarray(values)

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


def _refuse_infinite(name: str, values: np.ndarray) -> None:
    """Raise ValueError if ``values`` holds +-inf (NaN is the contract's missing value)."""
    bad = np.argwhere(np.isinf(values))
    if bad.size:
        raise ValueError(
            f"{name} hold {bad.shape[0]} infinite value(s), the first at index "
            f"{tuple(int(i) for i in bad[0])}; expected finite values (or NaN for a missing "
            "row, which gives NaN out)"
        )


def _some(names: tuple[str, ...]) -> str:
    """Up to five names, quoted (``'a', 'b' and 3 more``)."""
    shown = ", ".join(map(repr, names[:5]))
    return shown + (f" and {len(names) - 5} more" if len(names) > 5 else "")


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
