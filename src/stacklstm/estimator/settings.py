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
from collections.abc import Mapping
from typing import Any

from ..config import ALIASES, SECTIONS

#: Settings the estimator takes from its column arguments, not as keywords.
FROM_COLUMNS = {"target": "target_col", "time_column": "time_col", "id_column": "id_col"}
#: The estimator's own keyword arguments besides the settings.
OWN_ARGUMENTS = ("alias", "id_col", "time_col", "target_col", "run_dir")


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
    settings = sorted(name for name in setting_sections() if name not in FROM_COLUMNS)
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
    unknown = [key for key in settings if key not in names]
    if unknown:
        raise TypeError(
            f"LSTMForecaster got unknown keyword argument(s) {', '.join(map(repr, unknown))}; "
            f"it accepts {', '.join(accepted_names())}"
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
