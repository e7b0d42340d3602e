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
- Returns ``(batch, horizon, n_targets)`` float64 forecasts of the rows after each window's
  last row: what ``stacklstm predict`` writes for the origin at that row (within float32
  rounding of the network; the scaling is done in float64).

The file (layout version :data:`LAYOUT_VERSION`), all integers little-endian::

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
#: Version of the file layout (header and metadata keys). Another version is refused.
LAYOUT_VERSION = 1
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
}


def pack(metadata: Mapping[str, Any], program: bytes) -> bytes:
    """The file's bytes: header, metadata JSON and the serialized ``jax.export`` program."""
    meta = json.dumps(dict(metadata), sort_keys=True).encode("utf-8")
    digest = hashlib.sha256(meta + program).digest()
    header = _PREFIX.pack(MAGIC, LAYOUT_VERSION) + _SIZES.pack(len(meta), len(program), digest)
    return header + meta + program


def unpack(data: bytes, source: str = "the artifact") -> tuple[dict[str, Any], bytes]:
    """``(metadata, program)`` of a file's bytes; checks magic, version, sizes and checksum.

    Raises:
        ValueError: Not a stacklstm export, another layout version, a truncated or damaged
            file, or metadata without the expected keys.

    Example:
        >>> unpack(b"date,co2", "co2.csv")
        Traceback (most recent call last):
        ValueError: co2.csv is not a stacklstm export (it does not start with ...
        >>> unpack(MAGIC + (LAYOUT_VERSION + 1).to_bytes(4, "little"), "old.stacklstm")
        Traceback (most recent call last):
        ValueError: old.stacklstm has layout version 2 but this stacklstm reads version 1; ...
    """
    if len(data) < _PREFIX.size or not data.startswith(MAGIC):
        if MAGIC.startswith(data[: len(MAGIC)]) and data:
            raise ValueError(f"{source} is truncated: {len(data)} bytes, not even a header")
        raise ValueError(
            f"{source} is not a stacklstm export (it does not start with {MAGIC!r}); write one "
            "with `stacklstm export RUN_DIR --output FILE`"
        )
    _, version = _PREFIX.unpack_from(data)
    if version != LAYOUT_VERSION:
        raise ValueError(
            f"{source} has layout version {version} but this stacklstm reads version "
            f"{LAYOUT_VERSION}; export the run again with this stacklstm, or load the file with "
            "the version that wrote it"
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
    _check_metadata(metadata, source)
    return metadata, body[n_meta:]


def _check_metadata(metadata: Any, source: str) -> None:
    if not isinstance(metadata, dict):
        raise ValueError(f"{source}: the metadata must be a JSON object")
    missing = sorted(set(METADATA_KEYS) - set(metadata))
    if missing:
        raise ValueError(f"{source}: the metadata lacks the keys {missing}")
    for key, kind in METADATA_KEYS.items():
        value = metadata[key]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise ValueError(f"{source}: metadata {key!r} has the wrong type: {value!r}")


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
    """

    def __init__(self, metadata: dict[str, Any], exported: Any, source: str = "the artifact"):
        self.metadata = metadata
        self.exported = exported
        self.columns: tuple[str, ...] = tuple(metadata["columns"])
        self.targets: tuple[str, ...] = tuple(metadata["targets"])
        self.window: int = metadata["window"]
        self.horizon: int = metadata["horizon"]
        self.input_steps: int = metadata["input_steps"]
        (x,), (y,) = exported.in_avals, exported.out_avals
        if (
            len(x.shape) != 3
            or tuple(x.shape[1:]) != (self.input_steps, len(self.columns))
            or len(y.shape) != 3
            or tuple(y.shape[1:]) != (self.horizon, len(self.targets))
        ):
            raise ValueError(
                f"{source} is damaged: its program maps {x.shape} to {y.shape} but its metadata "
                f"says {self.input_shape} to {self.output_shape}"
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

    def predict(self, windows: Any) -> np.ndarray:
        """Forecasts ``(batch, horizon, n_targets)`` float64 of ``windows`` ``(batch,
        input_steps, n_columns)`` (any batch size), both in the run's original units.

        Raises:
            ValueError: ``windows`` of another shape.
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
        if x.shape[0] == 0:
            return np.zeros((0, self.horizon, len(self.targets)))
        with jax.enable_x64(True):  # the program takes and returns float64
            return np.asarray(self._call(x))


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
