"""The estimator's keyword arguments: the settings of ``stacklstm train`` under their config
names, each mapped to its section of :class:`~stacklstm.config.RunConfig`.

The names are the fields of ``DataConfig``, ``ModelConfig`` and ``TrainConfig`` (the same
fields the command line makes its flags from) and the older spellings of
:data:`stacklstm.config.ALIASES` (``hidden_size``, ``num_layers``, ``dropout``).

Example:
    >>> setting_sections()["lstm_hidden_size"], setting_sections()["hidden_size"]
    (('model', 'lstm_hidden_size'), ('model', 'lstm_hidden_size'))
    >>> section_overrides({"epochs": 3, "window": 8})["train"]
    {'epochs': 3}
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from typing import Any

from ..config import ALIASES, SECTIONS

#: Settings the estimator takes from its column arguments, not as keywords.
FROM_COLUMNS = {"target": "target_col", "time_column": "time_col", "id_column": "id_col"}
#: The estimator's own keyword arguments besides the settings.
OWN_ARGUMENTS = (
    "alias",
    "id_col",
    "time_col",
    "target_col",
    "run_dir",
    "verbose",
    "level",
    "preset",
)
#: neuralforecast's and statsforecast's names of the estimator's settings: an unknown
#: keyword among them is told the name here.
SYNONYMS = {
    "h": "horizon",
    "input_size": "window",
    "season_length": "season",
    "learning_rate": "lr",
    "random_seed": "seed",
    "max_epochs": "epochs",
    "encoder_hidden_size": "lstm_hidden_size",
    "encoder_n_layers": "num_lstm_layers",
    "encoder_dropout": "dropout",
    "levels": "level",
}


def suggestion(key: str) -> str:
    """`` (did you mean 'horizon'?)`` for an unknown keyword ``key`` (``h``), or ``""``.

    Example:
        >>> suggestion("h"), suggestion("windw"), suggestion("zzz")
        (" (did you mean 'horizon'?)", " (did you mean 'window'?)", '')
    """
    near = [SYNONYMS[key]] if key in SYNONYMS else []
    near = near or difflib.get_close_matches(key, accepted_names(), n=1, cutoff=0.75)
    return f" (did you mean {near[0]!r}?)" if near else ""


def levels_as_fractions(level: Any) -> tuple[float, ...]:
    """The estimator's ``level`` (percent, as statsforecast's ``[80, 95]``) as the run's
    ``interval_levels`` (fractions, ``(0.8, 0.95)``), sorted.

    Raises:
        TypeError: Not a list of numbers.
        ValueError: A level outside (0, 100).

    Example:
        >>> levels_as_fractions([95, 80])
        (0.8, 0.95)
    """
    if isinstance(level, (str, bytes)) or not hasattr(level, "__iter__"):
        raise TypeError(f"level must be a list of percentages such as [80, 95], got {level!r}")
    values = []
    for value in level:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"level must be a list of percentages such as [80, 95], got {level!r}")
        if not 1 < float(value) < 100:  # 0.8 is a fraction given for 80 (a 0.8 % interval?)
            raise ValueError(f"levels are percentages in (1, 100), such as [80, 95], got {value!r}")
        values.append(round(float(value) / 100, 10))
    return tuple(sorted(set(values)))


def setting_sections() -> dict[str, tuple[str, str]]:
    """``{name: (section, field)}`` of every config field and alias (as the CLI's flags)."""
    out = {
        f.name: (section, f.name)
        for section, cls in SECTIONS.items()
        for f in dataclasses.fields(cls)
    }
    for (_, old), (section, new) in ALIASES.items():
        out.setdefault(old, (section, new))  # `season` is a field of [data] itself
    return out


def accepted_names() -> list[str]:
    """Every keyword the estimator accepts: its own arguments, then the settings, sorted."""
    hidden = {*FROM_COLUMNS, "interval_levels"}  # the column arguments, and `level`
    settings = sorted(name for name in setting_sections() if name not in hidden)
    return [*OWN_ARGUMENTS, *settings]


def section_overrides(settings: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{"section": {"field": value}}`` of flat ``settings`` (what ``RunConfig.replace``
    takes).

    Raises:
        TypeError: An unknown name (the message lists the accepted ones), a setting the
            estimator takes from a column argument (``target``: ``target_col``), or one
            setting given under two names (``hidden_size`` and ``lstm_hidden_size``).
    """
    names = setting_sections()
    for key in settings:
        if key in FROM_COLUMNS:
            raise TypeError(
                f"LSTMForecaster sets {key!r} from its column argument: pass "
                f"{FROM_COLUMNS[key]}=... instead of {key}=..."
            )
    if "interval_levels" in settings:
        raise TypeError(
            "LSTMForecaster takes its interval levels in percent, as its predict and "
            "statsforecast do: pass level=[80, 95] instead of interval_levels=(0.8, 0.95)"
        )
    unknown = [key for key in settings if key not in names]
    if unknown:
        named = ", ".join(f"{key!r}{suggestion(key)}" for key in unknown)
        raise TypeError(
            f"LSTMForecaster got unknown keyword argument(s) {named}; it accepts "
            f"{', '.join(accepted_names())}"
        )
    out: dict[str, dict[str, Any]] = {section: {} for section in SECTIONS}
    given_as: dict[tuple[str, str], str] = {}
    for key, value in settings.items():
        section, name = names[key]
        if (section, name) in given_as:
            raise TypeError(
                f"{given_as[section, name]!r} and {key!r} are the same setting; give one"
            )
        out[section][name] = value
        given_as[section, name] = key
    return out
