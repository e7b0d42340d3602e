"""``Series``: a table as the windows read it, cleaned and time-ordered, one series or a
panel's series one after another (what :func:`stacklstm.data.prepare_series` gives)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["Series"]


@dataclass(frozen=True, eq=False)
class Series:
    """A cleaned, time-ordered table: every value finite, target columns first.

    Attributes:
        values: ``(time, n_columns)`` float64; ``columns[:n_targets]`` are the targets.
        times: ``(time,)`` datetime64 time stamps, ``int64`` ones for a time column of whole
            numbers (years, say), or None when there is no time column.
        columns: Column names of ``values``.
        n_targets: Number of target columns.
        n_filled: Rows that held at least one filled value (missing in the file or
            inserted as a missing time stamp).
        freq: The regular step as a pandas offset alias (e.g. ``"7D"``, ``"MS"``), the
            step of whole-number stamps (``"1"``), or None when the time stamps are absent or
            irregular.
        ids: The names of the series of a panel (``DataConfig.id_column``), sorted; None
            for a table that is one series.
        offsets: ``(n_series + 1,)`` int64: series ``i`` is rows ``offsets[i]:offsets[i+1]``
            of ``values`` (and ``times``); None for one series.
        n_future: The last ``n_future`` columns are known in advance (future features, then
            calendar columns); see :mod:`stacklstm.data.covariates`.
        static: ``(n_series, n_static)`` float64 static features of each series, or None.
        static_columns: Their names.
        tail: ``(n_series, horizon, n_future)`` float64 known-future values of the
            ``horizon`` steps after each series' last row (read by ``predict``), or None.
        tail_times: ``(n_series, horizon)`` time stamps of those steps, or None.

    Example:
        >>> import pandas as pd
        >>> from stacklstm.config import DataConfig
        >>> from stacklstm.data import prepare_series
        >>> frame = pd.DataFrame({"id": ["b", "a", "b", "a"], "t": [1, 1, 2, 2],
        ...                       "y": [10.0, 1.0, 20.0, 2.0]})
        >>> s = prepare_series(frame, DataConfig(target=("y",), time_column="t",
        ...                    id_column="id", window=1, horizon=1))
        >>> s.ids, s.bounds.tolist(), s.values[:, 0].tolist()
        (('a', 'b'), [0, 2, 4], [1.0, 2.0, 10.0, 20.0])
    """

    values: np.ndarray
    times: np.ndarray | None
    columns: tuple[str, ...]
    n_targets: int
    n_filled: int = 0
    freq: str | None = None
    ids: tuple[str, ...] | None = None
    offsets: np.ndarray | None = None
    n_future: int = 0
    static: np.ndarray | None = None
    static_columns: tuple[str, ...] = ()
    tail: np.ndarray | None = None
    tail_times: np.ndarray | None = None

    def __len__(self) -> int:
        return int(self.values.shape[0])

    @property
    def n_series(self) -> int:
        return 1 if self.ids is None else len(self.ids)

    @property
    def bounds(self) -> np.ndarray:
        """``(n_series + 1,)`` int64 row bounds of the series (``[0, len]`` for one series)."""
        if self.offsets is None:
            return np.array([0, len(self)], dtype=np.int64)
        return self.offsets

    def select(self, keep: Sequence[int] | np.ndarray) -> Series:
        """The panel's series at positions ``keep`` (ascending), rows copied; ``self`` when
        ``keep`` is every series."""
        keep = np.asarray(keep, dtype=np.int64)
        if self.ids is None or np.array_equal(keep, np.arange(self.n_series)):
            return self
        bounds = self.bounds
        rows = np.concatenate(
            [np.arange(bounds[i], bounds[i + 1]) for i in keep] or [np.zeros(0, np.int64)]
        )
        lengths = bounds[keep + 1] - bounds[keep]
        return dataclasses.replace(
            self,
            values=self.values[rows],
            times=None if self.times is None else self.times[rows],
            ids=tuple(self.ids[i] for i in keep),
            offsets=np.concatenate([[0], np.cumsum(lengths)]).astype(np.int64),
            static=None if self.static is None else self.static[keep],
            tail=None if self.tail is None else self.tail[keep],
            tail_times=None if self.tail_times is None else self.tail_times[keep],
        )
