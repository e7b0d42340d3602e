"""Forecast from an exported model with jax and numpy only: no Flax, Optax, Orbax or pandas.

``stacklstm export RUN_DIR --output FILE`` (:func:`stacklstm.train.export.export_run`) writes
one self-contained file: a ``jax.export`` program (StableHLO, a symbolic batch dimension,
lowered for CPU and CUDA) that maps raw input windows in the run's original units to forecasts
in original units, with the fitted scaling, the differencing and the window normalisation
inside. :func:`load` reads it back; ``predict`` runs it.

The input contract (``Forecaster.input_shape``):

- ``windows`` ``(batch, input_steps, n_columns)``: the run's columns in order (targets first,
  then features), in original units, oldest row first, as ``stacklstm predict`` reads the
  table (after its gap filling: a NaN in gives NaN out). ``input_steps`` is the run's
  ``window``, plus one when the run models first differences (the row before the window is
  needed to difference its first step).
- ``phase`` ``(batch,)`` integers, only for a run trained deseasonalised (``deseasonalize``,
  metadata ``seasonal`` not null): the seasonal phase of each window's **last row** (the
  forecast origin), ``0 .. season - 1``: the number of time steps from the metadata's
  ``seasonal.reference`` (phase 0: the first training row of the series) to that row, modulo
  ``season``. :meth:`Forecaster.predict` takes it as ``phase=`` or computes it from the
  origin's time stamp, ``last_time=`` (the ``origin`` column ``stacklstm predict`` writes).
- Returns ``(batch, horizon, n_targets)`` float64 forecasts of the rows after each window's
  last row: what ``stacklstm predict`` writes for the origin at that row (within float32
  rounding of the network; the scaling is done in float64).

The file (layout version :data:`LAYOUT_VERSION`; version 1 files, written before the
``seasonal`` metadata key existed, are read too), all integers little-endian::

    16 bytes  MAGIC, b"stacklstm-export"
     4 bytes  layout version (uint32)
     8 bytes  length of the metadata (uint64)
     8 bytes  length of the program (uint64)
    32 bytes  SHA-256 of the metadata and the program, in that order
              metadata: UTF-8 JSON (columns, targets, window, horizon, input_steps, ...)
              program: ``jax.export.Exported.serialize()`` (needs the ``flatbuffers`` package)

Example:
    >>> from stacklstm import serving
    >>> forecaster = serving.load("runs/co2/model.stacklstm")  # doctest: +SKIP
    >>> forecaster.input_shape, forecaster.output_shape  # doctest: +SKIP
    (('batch', 10, 1), ('batch', 1, 1))
    >>> forecaster.predict(windows).shape  # doctest: +SKIP
    (5, 1, 1)
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jax
import numpy as np

MAGIC = b"stacklstm-export"
#: Version of the file layout (header and metadata keys) written.
LAYOUT_VERSION = 2
#: Versions read: 1 has no ``seasonal`` key (its programs take windows only); others are refused.
READ_VERSIONS = (1, 2)
_PREFIX = struct.Struct("<16sI")  # magic, layout version
_SIZES = struct.Struct("<QQ32s")  # metadata bytes, program bytes, SHA-256
_HEADER_SIZE = _PREFIX.size + _SIZES.size

#: Metadata keys every artifact holds, and their types.
METADATA_KEYS: dict[str, type | tuple[type, ...]] = {
    "layout_version": int,
    "stacklstm_version": str,
    "jax_version": str,
    "columns": list,
    "targets": list,
    "window": int,
    "horizon": int,
    "input_steps": int,
    "difference": bool,
    "normalize": str,
    "scaler": str,
    "quantiles": (list, type(None)),
    "platforms": list,
    "dtype": str,
    "checkpoint": dict,
    "seasonal": (dict, type(None)),
}
#: Keys added by each layout version after 1 (absent from older files: see :func:`unpack`).
_ADDED_KEYS = {"seasonal": 2}
#: Keys of the ``seasonal`` metadata (a deseasonalised run's; see :func:`origin_steps`).
SEASONAL_KEYS = ("season", "phase_of", "reference", "freq", "step")


def pack(metadata: Mapping[str, Any], program: bytes, version: int = LAYOUT_VERSION) -> bytes:
    """The file's bytes: header, metadata JSON and the serialized ``jax.export`` program
    (``version``: the layout version written in the header; older ones for tests)."""
    meta = json.dumps(dict(metadata), sort_keys=True).encode("utf-8")
    digest = hashlib.sha256(meta + program).digest()
    header = _PREFIX.pack(MAGIC, version) + _SIZES.pack(len(meta), len(program), digest)
    return header + meta + program


def unpack(data: bytes, source: str = "the artifact") -> tuple[dict[str, Any], bytes]:
    """``(metadata, program)`` of a file's bytes; checks magic, version, sizes and checksum.

    The metadata of a version 1 file gains ``"seasonal": None`` (such files hold no
    deseasonalised runs).

    Raises:
        ValueError: Not a stacklstm export, another layout version, a truncated or damaged
            file, or metadata without the expected keys.

    Example:
        >>> unpack(b"date,co2", "co2.csv")
        Traceback (most recent call last):
        ValueError: co2.csv is not a stacklstm export (it does not start with ...
        >>> unpack(MAGIC + (LAYOUT_VERSION + 1).to_bytes(4, "little"), "new.stacklstm")
        Traceback (most recent call last):
        ValueError: new.stacklstm has layout version 3 but this stacklstm reads versions 1 ...
    """
    if len(data) < _PREFIX.size or not data.startswith(MAGIC):
        if MAGIC.startswith(data[: len(MAGIC)]) and data:
            raise ValueError(f"{source} is truncated: {len(data)} bytes, not even a header")
        raise ValueError(
            f"{source} is not a stacklstm export (it does not start with {MAGIC!r}); write one "
            "with `stacklstm export RUN_DIR --output FILE`"
        )
    _, version = _PREFIX.unpack_from(data)
    if version not in READ_VERSIONS:
        raise ValueError(
            f"{source} has layout version {version} but this stacklstm reads versions "
            f"{' and '.join(map(str, READ_VERSIONS))}; export the run again with this stacklstm, "
            "or load the file with the version that wrote it"
        )
    if len(data) < _HEADER_SIZE:
        raise ValueError(f"{source} is truncated: {len(data)} bytes, not even a header")
    n_meta, n_program, digest = _SIZES.unpack_from(data, _PREFIX.size)
    expected = _HEADER_SIZE + n_meta + n_program
    if len(data) != expected:
        what = "truncated" if len(data) < expected else "damaged (it has trailing bytes)"
        raise ValueError(f"{source} is {what}: {len(data)} bytes, the header says {expected}")
    body = data[_HEADER_SIZE:]
    if hashlib.sha256(body).digest() != digest:
        raise ValueError(f"{source} is damaged: its SHA-256 checksum does not match its contents")
    try:
        metadata = json.loads(body[:n_meta].decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as err:
        raise ValueError(f"{source} is damaged: its metadata is not JSON ({err})") from err
    _check_metadata(metadata, source, version)
    return metadata, body[n_meta:]


def _check_metadata(metadata: Any, source: str, version: int) -> None:
    if not isinstance(metadata, dict):
        raise ValueError(f"{source}: the metadata must be a JSON object")
    expected = {k: v for k, v in METADATA_KEYS.items() if _ADDED_KEYS.get(k, 1) <= version}
    missing = sorted(set(expected) - set(metadata))
    if missing:
        raise ValueError(f"{source}: the metadata lacks the keys {missing}")
    for key in set(METADATA_KEYS) - set(expected):  # keys a file of this version cannot have
        metadata[key] = None
    for key, kind in expected.items():
        value = metadata[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f"{source}: metadata {key!r} has the wrong type: {value!r}")
    seasonal = metadata["seasonal"]
    if seasonal is not None and (
        sorted(seasonal) != sorted(SEASONAL_KEYS)
        or not isinstance(seasonal["season"], int)
        or isinstance(seasonal["season"], bool)
        or seasonal["season"] < 2
        or not isinstance(seasonal["step"], (dict, type(None)))
    ):
        raise ValueError(
            f"{source}: metadata 'seasonal' needs the keys {list(SEASONAL_KEYS)} and a season "
            f">= 2, got {seasonal!r}"
        )


def origin_steps(stamps: Any, seasonal: Mapping[str, Any]) -> np.ndarray:
    """``(n,)`` int64 time steps from ``seasonal["reference"]`` (phase 0) to each stamp,
    counted as ``seasonal["step"]`` says (numpy only); the phase is this modulo the season.

    ``step`` (written by ``stacklstm export`` after checking it against the run's time grid):

    - ``{"kind": "rows"}``: the run's table had no regular time stamps; a stamp is a row
      number counted from the first row of the table (``stacklstm predict``'s ``origin``).
    - ``{"kind": "integer", "every": k}``: whole-number stamps ``k`` apart.
    - ``{"kind": "fixed", "ns": d}``: date-times ``d`` nanoseconds apart (hours, days, weeks).
    - ``{"kind": "months", "every": k, "anchor": "start" | "end"}``: date-times ``k`` calendar
      months apart, at the same time after the start (before the end) of their month.
    - ``{"kind": "business_days"}``: weekdays, at the same time of day.
    - null: a time step numpy cannot count; give phases instead.

    Raises:
        ValueError: A stamp off that grid, or a step that cannot be counted here.

    Example:
        >>> months = {"season": 12, "reference": "1958-03-01T00:00:00", "freq": "MS",
        ...           "step": {"kind": "months", "every": 1, "anchor": "start"}}
        >>> origin_steps(["1958-03-01", "1959-05-01", "1957-12-01"], months).tolist()
        [0, 14, -3]
        >>> origin_steps(["1958-05-02"], months)
        Traceback (most recent call last):
        ValueError: time stamp 1958-05-02T00:00:00.000000000 is not on the MS grid of ...
    """
    step, reference = seasonal.get("step"), seasonal.get("reference")
    kind = None if step is None else step.get("kind")
    if kind in ("rows", "integer"):
        try:
            t = np.asarray(stamps)
            values = t.astype(np.int64)
            if t.dtype.kind not in "iu" and not np.array_equal(values, t.astype(np.float64)):
                raise ValueError
        except (TypeError, ValueError) as err:
            what = "row numbers" if kind == "rows" else "the run's integer time stamps"
            got = np.asarray(stamps).ravel()[:3]
            raise ValueError(f"expected whole-number time stamps ({what}), got {got}") from err
        if kind == "rows":
            return values.reshape(-1)
        diff, every = values.reshape(-1) - int(reference), int(step["every"])
        off = diff % every != 0
        if off.any():
            raise ValueError(
                f"time stamp {values.reshape(-1)[off][0]} is not on the grid of step {every} from "
                f"{reference}"
            )
        return diff // every
    if kind not in ("fixed", "months", "business_days"):
        raise ValueError(
            f"cannot count time steps of {seasonal.get('freq')!r} here: pass the phases of the "
            "windows' last rows instead (phase=)"
        )
    try:
        t = np.asarray(stamps, dtype="datetime64[ns]").reshape(-1)
    except (TypeError, ValueError) as err:
        raise ValueError(
            f"expected date-time stamps, got {np.asarray(stamps).ravel()[:3]}"
        ) from err
    ref = np.datetime64(reference, "ns")
    if kind == "fixed":
        diff, every = (t - ref).astype(np.int64), int(step["ns"])
        steps, on_grid = diff // every, diff % every == 0
    elif kind == "months":
        every = int(step["every"])
        months = t.astype("datetime64[M]").astype(np.int64) - ref.astype("datetime64[M]").astype(
            np.int64
        )

        def within(x: np.ndarray) -> np.ndarray:  # time after the start / before the end
            month = x.astype("datetime64[M]")
            if step["anchor"] == "end":
                return ((month + 1).astype("datetime64[ns]") - x).astype(np.int64)
            return (x - month.astype("datetime64[ns]")).astype(np.int64)

        steps = months // every
        on_grid = (months % every == 0) & (within(t) == within(ref[None]))
    else:
        days, ref_day = t.astype("datetime64[D]"), ref.astype("datetime64[D]")
        steps = np.busday_count(ref_day, days).astype(np.int64)
        on_grid = np.is_busday(days) & ((t - days) == (ref - ref_day))
    if not on_grid.all():
        raise ValueError(
            f"time stamp {t[~on_grid][0]} is not on the {seasonal.get('freq')} grid of "
            f"{reference} (the run's phase 0)"
        )
    return steps


class Forecaster:
    """An exported forecaster: raw windows in, forecasts in original units out.

    Attributes:
        metadata: The artifact's metadata (see :data:`METADATA_KEYS`).
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


def from_bytes(data: bytes, source: str = "the artifact") -> Forecaster:
    """A :class:`Forecaster` from a file's bytes (see :func:`load`)."""
    metadata, program = unpack(data, source)
    if importlib.util.find_spec("flatbuffers") is None:
        raise ImportError(
            "reading a jax.export program needs the flatbuffers package: pip install flatbuffers"
        )
    try:
        exported = jax.export.deserialize(bytearray(program))
    except Exception as err:  # the flatbuffer reader raises many kinds on bad bytes
        raise ValueError(f"{source} is damaged: its program cannot be read ({err})") from err
    return Forecaster(metadata, exported, source)


def load(path: str | Path) -> Forecaster:
    """Load a file written by ``stacklstm export``; needs jax, numpy and flatbuffers only.

    Args:
        path: The file.

    Returns:
        A :class:`Forecaster`; ``predict(windows)`` runs it on the default device (CPU or
        CUDA).

    Raises:
        ValueError: Not a stacklstm export, another layout version, or a truncated or damaged
            file.
        OSError: The file cannot be read.
    """
    path = Path(path)
    return from_bytes(path.read_bytes(), str(path))
