"""The exported file's format: header, metadata checks, and the seasonal phase of an origin."""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Mapping
from typing import Any

import numpy as np

MAGIC = b"stacklstm-export"
#: Version of the file layout (header and metadata keys) written.
LAYOUT_VERSION = 3
#: Versions read: 1 has no ``seasonal`` key (its programs take windows only), 1 and 2 none of
#: ``inputs``, ``ids``, ``future_columns``, ``static_columns``, ``conformal`` (their programs
#: take windows and phases, give point forecasts); others are refused.
READ_VERSIONS = (1, 2, 3)
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
    "inputs": list,
    "ids": (list, type(None)),
    "future_columns": list,
    "static_columns": list,
    "conformal": bool,
}
#: Keys added by each layout version after 1 (absent from older files: see :func:`unpack`).
_ADDED_KEYS = {
    "seasonal": 2,
    "inputs": 3,
    "ids": 3,
    "future_columns": 3,
    "static_columns": 3,
    "conformal": 3,
}
#: The program inputs a file may name, in the order they come.
INPUT_NAMES = ("windows", "phase", "ids", "future", "static")
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
        ValueError: new.stacklstm has layout version 4 but this stacklstm reads versions 1, 2 ...
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
        read = f"{', '.join(map(str, READ_VERSIONS[:-1]))} and {READ_VERSIONS[-1]}"
        raise ValueError(
            f"{source} has layout version {version} but this stacklstm reads versions {read}; "
            "export the run again with this stacklstm, or load the file with the version that "
            "wrote it"
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


def _older_default(key: str, metadata: dict[str, Any]) -> Any:
    """The value of ``key`` in a file written before the key existed."""
    if key == "inputs":  # windows, and a deseasonalised run's phases
        return ["windows"] + (["phase"] if metadata.get("seasonal") is not None else [])
    return {"future_columns": [], "static_columns": [], "conformal": False}.get(key)


def _check_metadata(metadata: Any, source: str, version: int) -> None:
    if not isinstance(metadata, dict):
        raise ValueError(f"{source}: the metadata must be a JSON object")
    expected = {k: v for k, v in METADATA_KEYS.items() if _ADDED_KEYS.get(k, 1) <= version}
    missing = sorted(set(expected) - set(metadata))
    if missing:
        raise ValueError(f"{source}: the metadata lacks the keys {missing}")
    for key in set(METADATA_KEYS) - set(expected):  # keys a file of this version cannot have
        metadata[key] = _older_default(key, metadata)
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
    _check_inputs(metadata, source)


def _check_inputs(metadata: dict[str, Any], source: str) -> None:
    """The ``inputs`` agree with the keys that say which inputs the program takes."""
    ids = metadata["ids"]
    if ids is not None and (not ids or not all(isinstance(i, str) for i in ids)):
        raise ValueError(f"{source}: metadata 'ids' must be a non-empty list of names, got {ids!r}")
    for key in ("future_columns", "static_columns"):
        if not all(isinstance(name, str) for name in metadata[key]):
            raise ValueError(f"{source}: metadata {key!r} must list column names")
    used = {
        "windows": True,
        "phase": metadata["seasonal"] is not None,
        "ids": ids is not None,
        "future": bool(metadata["future_columns"]),
        "static": bool(metadata["static_columns"]),
    }
    want = [name for name in INPUT_NAMES if used[name]]
    if metadata["inputs"] != want:
        raise ValueError(
            f"{source} is damaged: its metadata names the inputs {metadata['inputs']!r} but its "
            f"other keys say {want!r}"
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
