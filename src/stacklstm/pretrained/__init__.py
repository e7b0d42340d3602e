"""Pretrained stacked LSTMs that ship with the package: a forecast for any yearly,
quarterly, monthly, weekly, daily or hourly series without training, and a starting point
for training on your own series (``init="pretrained"``).

One small model per frequency family (:data:`FAMILIES`; the monthly one a seed ensemble of
three, forecasting the median of theirs), trained by ``benchmarks/pretrain.py``: the
yearly, quarterly and monthly ones on every series of the M1, M3 and tourism competitions,
the weekly, daily and hourly ones on synthetic series (:mod:`stacklstm.datasets.synthetic`).
:func:`forecast` (:func:`stacklstm.forecasting.zeroshot.forecast`) is ``stacklstm forecast``
and ``LSTMForecaster.pretrained().predict(df)``.

Layout: :mod:`~stacklstm.pretrained.store` (the weight files, the families) sits below
``train``, which starts a run from the weights; the zero-shot forecast sits in
``forecasting`` (:mod:`stacklstm.forecasting.zeroshot`), loaded here on first use.

Example:
    >>> from stacklstm.pretrained import FAMILIES, family_of
    >>> FAMILIES["quarterly"].horizon, family_of("QE-DEC")
    (8, 'quarterly')
    >>> forecast(df, h=4)  # doctest: +SKIP
"""

from typing import Any

from .store import FAMILIES, Family, available, family_of, infer_freq

__all__ = ["FAMILIES", "Family", "available", "family_of", "forecast", "infer_freq", "load"]


def __getattr__(name: str) -> Any:
    if name in ("forecast", "load"):  # the zero-shot forecast, above ``train``: on first use
        from ..forecasting import zeroshot

        return getattr(zeroshot, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
