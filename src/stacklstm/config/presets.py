"""Named presets: one bundle of settings, applied the same way to every dataset.

A preset sets some fields of the run's config (:data:`PRESETS`); every setting given besides
it (a flag, a keyword of the estimator) wins over the preset's. ``stacklstm train --preset
accurate`` and ``LSTMForecaster(preset="accurate")`` apply it.

``accurate``: the model and statsforecast's AutoETS, AutoARIMA and AutoTheta, combined by
the mean of their median and their weighted mean, value by value (``baselines="all"``,
``combination="median_and_weighted"``): the median (with four forecasts, the mean of the
middle two) is the combination of the M competitions, on average more accurate than any of
its members; the weighted mean (each weighed by the inverse of its validation MAE) follows
the member that did best on each series' validation windows; their mean is the weighted mean
shrunk halfway to the median. Its forecast is the combination's: ``stacklstm predict RUN
--combine`` (the column ``combination``), ``predict(combine=True)`` (the column
``<alias>-combination``), with its split-conformal intervals at ``interval_levels``
(:mod:`stacklstm.forecasting.combination`); the statistical models are fitted on each
series' every row. It needs the ``baselines`` extra (statsforecast), and the statistical fits
take about as long as the model on monthly series (``docs/mcomp.md`` has its accuracy and
cost).

Example:
    >>> preset_overrides("accurate")
    {'train': {'baselines': 'all', 'combination': 'median_and_weighted'}}
"""

from __future__ import annotations

from typing import Any

from ..checks import SettingError

#: Every preset by name: ``{section: {field: value}}`` of the config it sets.
PRESETS: dict[str, dict[str, dict[str, Any]]] = {
    "accurate": {"train": {"baselines": "all", "combination": "median_and_weighted"}},
}


def preset_overrides(name: str) -> dict[str, dict[str, Any]]:
    """``{section: {field: value}}`` of the preset ``name`` (a copy).

    Raises:
        SettingError: No preset of that name.
    """
    if not isinstance(name, str) or name not in PRESETS:
        raise SettingError(f"preset must be one of {', '.join(map(repr, PRESETS))}, got {name!r}")
    return {section: dict(values) for section, values in PRESETS[name].items()}


def with_preset(name: str | None, given: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The overrides ``given`` (``{section: {field: value}}``) over the preset ``name``'s
    (``given`` unchanged for None): a setting given wins over the preset's.

    Example:
        >>> with_preset("accurate", {"train": {"combination": "weighted"}})["train"]
        {'baselines': 'all', 'combination': 'weighted'}
    """
    if name is None:
        return given
    out = preset_overrides(name)
    for section, values in given.items():
        out[section] = {**out.get(section, {}), **values}
    return out


__all__ = ["PRESETS", "preset_overrides", "with_preset"]
