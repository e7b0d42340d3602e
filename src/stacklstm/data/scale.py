"""Scaling: per-column affine maps fitted on the training rows, and their exact inverse."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..checks import DataError, is_int
from ..config import ScalerKind
from ..scalers import SCALERS
from .season import SeasonalPattern


@dataclass(frozen=True, eq=False)
class Scaler:
    """Per-column affine scaling ``(value - center) / scale``, fitted on training rows.

    ``standard``: mean and standard deviation; ``minmax``: minimum and range (maps the
    training rows to [0, 1]); ``robust``: median and interquartile range; ``mean``: 0 and the
    mean absolute value (divides only: positive values stay positive); ``naive``: mean and
    the mean absolute change from one row to the next (the error of the naive forecast, the
    denominator of MASE: a trending series' steps, not its trend, set the scale);
    ``seasonal_naive``: mean and the mean absolute change from one season to the next (the
    in-sample error of the seasonal naive forecast, MASE's denominator with a season; the
    one-row steps where the rows hold no more than one season); ``none``: 0 and 1. A column
    with zero spread gets scale 1.

    Attributes:
        kind: Which statistic pair.
        columns: Column names; the first ``n_targets`` are the targets.
        n_targets: Number of target columns.
        center: ``(n_columns,)`` float64.
        scale: ``(n_columns,)`` float64, all > 0.
        seasonal: The targets' seasonal pattern removed before scaling (``deseasonalize``),
            or None.

    Example:
        >>> s = Scaler.fit(np.array([[0.0], [10.0]]), "minmax", ("co2",), 1)
        >>> s.transform(np.array([[5.0]])).tolist(), s.inverse_transform(np.array([[1.0]])).tolist()
        ([[0.5]], [[10.0]])
    """

    kind: ScalerKind
    columns: tuple[str, ...]
    n_targets: int
    center: np.ndarray
    scale: np.ndarray
    seasonal: SeasonalPattern | None = None

    @classmethod
    def fit(
        cls,
        values: np.ndarray,
        kind: ScalerKind,
        columns: Sequence[str],
        n_targets: int,
        season: int = 1,
    ) -> Scaler:
        """Fit on ``values`` of shape ``(rows, n_columns)`` (the training rows only);
        ``season`` is the lag of ``seasonal_naive`` (the other kinds ignore it)."""
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 2 or values.shape[1] != len(columns):
            raise ValueError(f"expected values of shape (rows, {len(columns)}), got {values.shape}")
        if values.shape[0] == 0:
            raise DataError("cannot fit the scaler on zero training rows")
        if kind not in SCALERS:
            allowed = ", ".join(repr(k) for k in SCALERS)
            raise DataError(f"scaler must be one of {allowed}, got {kind!r}")
        center, spread = SCALERS[kind].statistics(values, season)
        scale = np.where((spread > 0) & np.isfinite(spread), spread, 1.0)
        return cls(kind, tuple(columns), int(n_targets), center.astype(np.float64), scale)

    def _check(self, values: np.ndarray, width: int, what: str) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        if values.ndim < 1 or values.shape[-1] != width:
            raise ValueError(
                f"expected the last axis to hold the {width} {what} columns, got shape "
                f"{values.shape}"
            )
        return values

    def transform(self, values: np.ndarray) -> np.ndarray:
        """Scale ``(..., n_columns)`` values; returns float64 of the same shape."""
        values = self._check(values, len(self.columns), "scaler")
        return (values - self.center) / self.scale

    def inverse_transform(self, values: np.ndarray, *, targets_only: bool = False) -> np.ndarray:
        """Undo :meth:`transform` on ``(..., n_columns)``, or ``(..., n_targets)`` values."""
        width = self.n_targets if targets_only else len(self.columns)
        values = self._check(values, width, "target" if targets_only else "scaler")
        return values * self.scale[:width] + self.center[:width]

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict; floats round-trip exactly through JSON (``seasonal`` only when
        there is a pattern)."""
        out = {
            "kind": self.kind,
            "columns": list(self.columns),
            "n_targets": self.n_targets,
            "center": [float(v) for v in self.center],
            "scale": [float(v) for v in self.scale],
        }
        if self.seasonal is not None:
            out["seasonal"] = self.seasonal.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Scaler:
        """Inverse of :meth:`to_dict`; raises DataError on missing keys or bad values."""
        keys = ("kind", "columns", "n_targets", "center", "scale")
        seasonal = _seasonal_of(data)
        if isinstance(data, Mapping):
            data = {key: value for key, value in data.items() if key != "seasonal"}
        if not isinstance(data, Mapping) or sorted(data) != sorted(keys):
            got = sorted(data) if isinstance(data, Mapping) else type(data).__name__
            raise DataError(f"expected scaler keys {list(keys)}, got {got}")
        try:  # a hand-edited or damaged config.json may hold anything
            center = np.asarray(data["center"], dtype=np.float64)
            scale = np.asarray(data["scale"], dtype=np.float64)
        except (TypeError, ValueError) as err:
            raise DataError(f"scaler centers and scales must be lists of numbers: {err}") from err
        columns, n_targets = data["columns"], data["n_targets"]
        if not isinstance(columns, (list, tuple)) or not all(isinstance(c, str) for c in columns):
            raise DataError(f"scaler columns must be a list of column names, got {columns!r}")
        columns = tuple(columns)
        n = len(columns)
        if data["kind"] not in SCALERS:
            raise DataError(f"unknown scaler kind {data['kind']!r}")
        if center.shape != (n,) or scale.shape != (n,) or not is_int(n_targets):
            n_targets = None  # reported as not an integer in 1..n below
        if n_targets is None or not 1 <= n_targets <= n:
            raise DataError(
                f"scaler for {n} columns needs {n} centers and scales and 1..{n} targets, got "
                f"centers of shape {center.shape}, scales of shape {scale.shape} and "
                f"{data['n_targets']!r} targets"
            )
        if not (np.isfinite(center).all() and np.isfinite(scale).all() and (scale > 0).all()):
            raise DataError("scaler centers must be finite and scales finite and positive")
        return cls(data["kind"], columns, int(data["n_targets"]), center, scale, seasonal)


@dataclass(frozen=True, eq=False)
class PanelScaler:
    """One :class:`Scaler` per series of a panel, each fitted on that series' training rows.

    Attributes:
        kind: Which statistic pair (as :class:`Scaler`).
        columns: Column names; the first ``n_targets`` are the targets.
        n_targets: Number of target columns.
        ids: The series' names, in the order of the rows of ``center`` and ``scale``.
        center: ``(n_series, n_columns)`` float64.
        scale: ``(n_series, n_columns)`` float64, all > 0.
        seasonal: The targets' seasonal patterns (one per series, in ``ids`` order) removed
            before scaling, or None.
        logged: ``(n_series,)`` bool, the series modelled on the ``log1p`` scale
            (``target_transform="per_series"``), or None.

    Example:
        >>> values = np.array([[0.0], [2.0], [10.0], [30.0]])  # series a: rows 0-1, b: 2-3
        >>> s = PanelScaler.fit(values, np.array([0, 2, 4]), [2, 2], "minmax", ("y",), 1,
        ...                     ("a", "b"))
        >>> s.center.tolist(), s.scale.tolist()
        ([[0.0], [10.0]], [[2.0], [20.0]])
        >>> s.transform(values, np.array([0, 2, 4]))[:, 0].tolist()
        [0.0, 1.0, 0.0, 1.0]
    """

    kind: ScalerKind
    columns: tuple[str, ...]
    n_targets: int
    ids: tuple[str, ...]
    center: np.ndarray
    scale: np.ndarray
    seasonal: SeasonalPattern | None = None
    logged: np.ndarray | None = None

    @classmethod
    def fit(
        cls,
        values: np.ndarray,
        bounds: np.ndarray,
        n_train: Sequence[int] | np.ndarray,
        kind: ScalerKind,
        columns: Sequence[str],
        n_targets: int,
        ids: Sequence[str],
        first: int = 0,
        season: int = 1,
    ) -> PanelScaler:
        """Fit series ``i``'s scaler on its rows ``bounds[i] + first .. bounds[i] +
        n_train[i]`` of ``values`` ``(rows, n_columns)`` (``first=1`` skips the undefined
        first difference; ``season`` as :meth:`Scaler.fit`)."""
        fitted = [
            Scaler.fit(values[start + first : start + int(n)], kind, columns, n_targets, season)
            for start, n in zip(np.asarray(bounds)[:-1], n_train, strict=True)
        ]
        return cls(
            kind,
            tuple(columns),
            int(n_targets),
            tuple(ids),
            np.stack([f.center for f in fitted]),
            np.stack([f.scale for f in fitted]),
        )

    def __len__(self) -> int:
        return len(self.ids)

    def series_scaler(self, i: int) -> Scaler:
        """The :class:`Scaler` of series ``i``."""
        return Scaler(self.kind, self.columns, self.n_targets, self.center[i], self.scale[i])

    def transform(self, values: np.ndarray, bounds: np.ndarray) -> np.ndarray:
        """Scale ``(rows, n_columns)`` values, series ``i`` being rows ``bounds[i]:bounds[i+1]``
        (``len(self) + 1`` bounds); float64, each series exactly as its :class:`Scaler` does."""
        values = np.asarray(values, dtype=np.float64)
        if bounds.shape != (len(self) + 1,) or bounds[-1] != values.shape[0]:
            raise ValueError(
                f"expected {len(self) + 1} row bounds ending at {values.shape[0]}, got {bounds}"
            )
        out = np.empty_like(values)
        for i in range(len(self)):
            rows = slice(bounds[i], bounds[i + 1])
            out[rows] = (values[rows] - self.center[i]) / self.scale[i]
        return out

    def select(self, ids: Sequence[str]) -> PanelScaler:
        """The scalers of the series ``ids`` (in that order); DataError names one it lacks."""
        position = {name: i for i, name in enumerate(self.ids)}
        unknown = [name for name in ids if name not in position]
        if unknown:
            raise DataError(f"no scaler for series {unknown[0]!r}: the run was not trained on it")
        rows = np.array([position[name] for name in ids], dtype=np.int64)
        seasonal = None if self.seasonal is None else self.seasonal.select(rows)
        logged = None if self.logged is None else self.logged[rows]
        return PanelScaler(
            self.kind,
            self.columns,
            self.n_targets,
            tuple(ids),
            self.center[rows],
            self.scale[rows],
            seasonal,
            logged,
        )

    def joined(self, other: PanelScaler) -> PanelScaler:
        """The scalers of this panel's series, then those of ``other`` (series this one
        lacks, fitted alike: the same kind, columns, season and transform).

        Raises:
            ValueError: ``other`` is another kind, has other columns, a series this one has,
                or not the same seasonal patterns or per-series logs (present or not).
        """
        if (other.kind, other.columns, other.n_targets) != (
            self.kind,
            self.columns,
            self.n_targets,
        ):
            raise ValueError(
                f"cannot join a {other.kind!r} scaler of {list(other.columns)} to a "
                f"{self.kind!r} one of {list(self.columns)}"
            )
        if set(self.ids) & set(other.ids):
            raise ValueError(f"both scalers have series {sorted(set(self.ids) & set(other.ids))}")
        if (self.seasonal is None) != (other.seasonal is None) or (self.logged is None) != (
            other.logged is None
        ):
            raise ValueError("cannot join scalers with and without seasonal patterns or logs")
        seasonal = None
        if self.seasonal is not None and other.seasonal is not None:
            if (other.seasonal.season, other.seasonal.freq) != (
                self.seasonal.season,
                self.seasonal.freq,
            ):
                raise ValueError("cannot join seasonal patterns of another season or time step")
            seasonal = SeasonalPattern(
                self.seasonal.season,
                np.concatenate([self.seasonal.pattern, other.seasonal.pattern]),
                self.seasonal.reference + other.seasonal.reference,
                self.seasonal.freq,
            )
        logged = None
        if self.logged is not None and other.logged is not None:
            logged = np.concatenate([self.logged, other.logged])
        return PanelScaler(
            self.kind,
            self.columns,
            self.n_targets,
            self.ids + other.ids,
            np.concatenate([self.center, other.center]),
            np.concatenate([self.scale, other.scale]),
            seasonal,
            logged,
        )

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict (floats round-trip exactly): :meth:`Scaler.to_dict`'s keys, with
        one list per series for ``center`` and ``scale``, and ``ids``."""
        out = {
            "kind": self.kind,
            "columns": list(self.columns),
            "n_targets": self.n_targets,
            "ids": list(self.ids),
            "center": [[float(v) for v in row] for row in self.center],
            "scale": [[float(v) for v in row] for row in self.scale],
        }
        if self.seasonal is not None:
            out["seasonal"] = self.seasonal.to_dict()
        if self.logged is not None:
            out["log1p"] = [bool(v) for v in self.logged]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> PanelScaler:
        """Inverse of :meth:`to_dict`; raises DataError on missing keys or bad values."""
        if not isinstance(data, Mapping) or "ids" not in data:
            raise DataError("expected a per-series scaler with the key 'ids'")
        ids = data["ids"]
        if not isinstance(ids, list) or not ids or not all(isinstance(i, str) for i in ids):
            raise DataError(f"scaler ids must be a non-empty list of series names, got {ids!r}")
        if len(set(ids)) != len(ids):
            raise DataError("scaler ids must be distinct")
        center, scale = data.get("center"), data.get("scale")
        if not isinstance(center, list) or not isinstance(scale, list):
            raise DataError("scaler centers and scales must be lists, one per series")
        if len(center) != len(ids) or len(scale) != len(ids):
            raise DataError(
                f"a scaler of {len(ids)} series needs {len(ids)} centers and scales, got "
                f"{len(center)} and {len(scale)}"
            )
        seasonal = _seasonal_of(data)
        if seasonal is not None and seasonal.pattern.shape[0] != len(ids):
            raise DataError(
                f"the seasonal pattern has {seasonal.pattern.shape[0]} series, the "
                f"scaler {len(ids)}"
            )
        logged = data.get("log1p")
        if logged is not None and (
            not isinstance(logged, list)
            or len(logged) != len(ids)
            or not all(isinstance(v, bool) for v in logged)
        ):
            raise DataError(
                f"scaler 'log1p' must be one true or false per series ({len(ids)}), got {logged!r}"
            )
        rest = {k: v for k, v in data.items() if k not in ("ids", "seasonal", "log1p")}
        fitted = [
            Scaler.from_dict({**rest, "center": c, "scale": s})
            for c, s in zip(center, scale, strict=True)
        ]
        first = fitted[0]
        return cls(
            first.kind,
            first.columns,
            first.n_targets,
            tuple(ids),
            np.stack([f.center for f in fitted]),
            np.stack([f.scale for f in fitted]),
            seasonal,
            None if logged is None else np.asarray(logged, dtype=bool),
        )


def _seasonal_of(data: Any) -> SeasonalPattern | None:
    """A saved scaler's seasonal pattern (its optional ``seasonal`` key), or None."""
    if not isinstance(data, Mapping) or data.get("seasonal") is None:
        return None
    return SeasonalPattern.from_dict(data["seasonal"])


def scaler_from_dict(data: Mapping[str, Any]) -> Scaler | PanelScaler:
    """A run folder's saved scaler: a :class:`PanelScaler` when it names series (``ids``),
    else a :class:`Scaler` (the only kind older run folders hold)."""
    if isinstance(data, Mapping) and "ids" in data:
        return PanelScaler.from_dict(data)
    return Scaler.from_dict(data)
