"""``LSTMForecaster.pretrained()``: the shipped model of the data's frequency family
(:mod:`stacklstm.pretrained`) under the estimator's conventions, forecasting any series
without training.

Example:
    >>> import pandas as pd
    >>> model = PretrainedForecaster()
    >>> model
    PretrainedForecaster(alias='stacklstm', id_col='unique_id', time_col='ds', target_col='y')
    >>> df = pd.DataFrame({"ds": pd.date_range("2000", periods=40, freq="QS"), "y": range(40)})
    >>> model.predict(df, h=2).columns.tolist()  # doctest: +SKIP
    ['unique_id', 'ds', 'stacklstm']
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .frames import as_pandas, check_name, is_polars, to_polars
from .output import check_level_list

__all__ = ["PretrainedForecaster"]


class PretrainedForecaster:
    """Zero-shot forecasts in the long format of statsforecast, from the pretrained models.

    Args:
        alias: Name of the forecast column (and the prefix of its interval columns).
        id_col: Column naming the series (absent from a frame of one series).
        time_col: Column of time stamps (their step chooses the model).
        target_col: Column to forecast.
        freq: The time step as a pandas alias (None: inferred from each frame's stamps).
    """

    def __init__(
        self,
        *,
        alias: str = "stacklstm",
        id_col: str = "unique_id",
        time_col: str = "ds",
        target_col: str = "y",
        freq: str | None = None,
    ) -> None:
        if freq is not None and not isinstance(freq, str):
            raise TypeError(f"freq must be a pandas alias such as 'MS', got {freq!r}")
        self.alias = check_name("alias", alias)
        self.id_col = check_name("id_col", id_col)
        self.time_col = check_name("time_col", time_col)
        self.target_col = check_name("target_col", target_col)
        self.freq = freq

    def predict(
        self,
        df: Any,
        h: int | None = None,
        level: Sequence[float] | None = None,
        calibrate: str = "auto",
        blend: str = "auto",
    ) -> Any:
        """Forecast the next ``h`` steps after each series' last row of ``df``.

        Args:
            df: ``[id_col,] time_col, target_col`` rows (pandas or polars): one series, or
                a panel named by ``id_col``; each series forecast from its own rows, any
                length (shorter than the model's window too).
            h: Steps (``1 <= h <=`` the family's horizon; None: the horizon).
            level: Interval levels in percent (``[80, 95]``; None: no intervals).
            calibrate: Where the intervals' errors come from: ``"auto"``, ``"own"`` (the
                frame's own last windows) or ``"weights"`` (the model's training-time
                windows); see :func:`stacklstm.pretrained.forecast`.
            blend: ``"auto"``: for a frame of 50 own last windows or more, the model's
                forecast blended with the seasonal naive one (or that with drift) as did
                best on them; ``"none"``: the model's alone; see
                :func:`stacklstm.pretrained.forecast`.

        Returns:
            ``(n_series * h)`` rows (polars for a polars ``df``): ``id_col`` (for a frame
            of one series without it, ``target_col``'s name), ``time_col``, ``alias``, per
            level ``<alias>-lo-<level>`` and ``<alias>-hi-<level>``.

        Raises:
            TypeError: ``df`` is no DataFrame, or ``level`` no list of percentages.
            ValueError: See :func:`stacklstm.pretrained.forecast`.
        """
        from ..forecasting.zeroshot import forecast

        polars = is_polars(df)
        df = as_pandas(df, "df")
        check_level_list(level)
        out = forecast(
            df,
            h,
            target=self.target_col,
            time_column=self.time_col,
            id_column=self.id_col,
            freq=self.freq,
            level=() if level is None else list(level),
            alias=self.alias,
            calibrate=calibrate,
            blend=blend,
        )
        out = out.rename(columns={"unique_id": self.id_col, "ds": self.time_col})
        return to_polars(out) if polars else out

    def __repr__(self) -> str:
        return (
            f"PretrainedForecaster(alias={self.alias!r}, id_col={self.id_col!r}, "
            f"time_col={self.time_col!r}, target_col={self.target_col!r})"
        )
