"""What every config section shares: the setting types and limits, the field helper
:func:`setting` (default, help text, legacy value) and the section base class.

Example:
    >>> setting(8, help="input time steps per window").metadata["help"]
    'input time steps per window'
"""

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Mapping
from dataclasses import field
from typing import Any, Literal

import numpy as np

from ..checks import SettingTypeError, is_int, reject_unknown_keys
from ..losses import POINT_LOSSES as POINT_LOSSES

ScalerKind = Literal["standard", "minmax", "robust", "mean", "naive", "seasonal_naive", "none"]
#: The ``scaler`` setting: a kind, or ``"auto"`` (for a panel ``"naive"`` without a season
#: and ``"seasonal_naive"`` with a season of 2-4, ``"standard"`` otherwise; see
#: :attr:`stacklstm.config.DataConfig.scaler_kind`).
ScalerSetting = Literal[
    "auto", "standard", "minmax", "robust", "mean", "naive", "seasonal_naive", "none"
]
NormalizeKind = Literal["none", "window"]
GapPolicy = Literal["interpolate", "reject"]
#: The names of :data:`stacklstm.losses.LOSSES` (a test keeps the two equal).
LossKind = Literal["mse", "mae", "huber", "quantile", "normal", "student_t"]
BaselineKind = Literal["naive", "all"]
CombinationKind = Literal["weighted", "median", "median_and_weighted", "stacked"]
RetrainKind = Literal["auto", "all", "on", "off"]
InitKind = Literal["auto", "random", "pretrained"]
LossWeightKind = Literal["auto", "mase", "none"]
TargetTransform = Literal["seasonal_panel", "none", "log1p", "auto", "per_series"]
#: ``"auto"``: a setting derived from the data when the run starts (the season from the time
#: step, the window from the season, the training budget from the number of windows); the run
#: folder's ``config.json`` holds the value it resolved to.
Auto = Literal["auto"]
AUTO = "auto"
CalendarKind = Literal["auto", "none"]
#: ``"repeat"``: windows may start before a series' first row, their missing inputs repeating
#: its first value; ``"none"``: every window lies within its series; ``"auto"``: ``"repeat"``
#: for a panel (``id_column``), ``"none"`` for one series.
PaddingKind = Literal["auto", "repeat", "none"]

#: Prefix of the calendar columns (``calendar="auto"``); no column of the table may use it then.
CALENDAR_PREFIX = "calendar_"


def default_baselines() -> BaselineKind:
    """``"all"`` when statsforecast (the ``[baselines]`` extra) is installed, else ``"naive"``.

    Looks the package up without importing it.
    """
    return "all" if importlib.util.find_spec("statsforecast") is not None else "naive"


#: Version of the run folder's layout (config.json keys, checkpoint items). Version 1 had the
#: model keys ``hidden_size``/``num_layers``/``dropout`` and ``season`` under ``train``; it is
#: read through :data:`ALIASES`. A newer version is refused instead of misread.
LAYOUT_VERSION = 2
READABLE_LAYOUTS = (1, 2)

#: Most LSTM layers, and most head layers, a ModelConfig accepts: each layer is traced and
#: compiled on its own, so a deeper stack takes minutes to build.
MAX_LAYERS = 128

#: Most members of a seed ensemble: they are trained one after another, each a full run
#: folder of its own, so a larger ensemble takes days and fills the disk for a median that
#: no longer changes.
MAX_ENSEMBLE = 1000

#: Cut-offs of ``stacklstm backtest`` when ``--folds`` is not given (here, with the other
#: defaults, so that the command line reads it without loading the training stack).
DEFAULT_FOLDS = 3

#: ``(section, old key) -> (section, key)``: spellings accepted in config files, run folders
#: and as flags, besides the field names.
ALIASES: dict[tuple[str, str], tuple[str, str]] = {
    ("model", "hidden_size"): ("model", "lstm_hidden_size"),
    ("model", "num_layers"): ("model", "num_lstm_layers"),
    ("model", "dropout"): ("model", "dropout_rate"),
    ("train", "season"): ("data", "season"),
}


def setting(default: Any = dataclasses.MISSING, *, help: str, **kwargs: Any) -> Any:
    """A dataclass field with its help text (read by the CLI and by :func:`describe`).

    A field added after layout version 1 also passes ``legacy=VALUE``: the value that gives
    the behaviour runs had before the field existed, used when a saved ``config.json`` lacks it.
    """
    metadata = {"help": help}
    if "legacy" in kwargs:
        metadata["legacy"] = kwargs.pop("legacy")
    return field(default=default, metadata=metadata, **kwargs)


def describe(cls: type) -> dict[str, str]:
    """``{field: help}`` of a config dataclass.

    Example:
        >>> from stacklstm.config import TrainConfig
        >>> describe(TrainConfig)["lr"]
        'peak learning rate (AdamW, warm-up then cosine decay)'
    """
    return {f.name: f.metadata["help"] for f in dataclasses.fields(cls)}


def _normalise(obj: Any) -> None:
    """numpy scalars -> Python, lists -> tuples, ints -> float for float fields (stable JSON)."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, (np.integer, np.floating, np.bool_)):
            value = value.item()
        if isinstance(value, list):
            value = tuple(value)
        if f.type == "float" and is_int(value):
            value = float(value)
        object.__setattr__(obj, f.name, value)


class _Section:
    """What the three config sections share: normalising, validation, dict round trip."""

    def __post_init__(self) -> None:
        _normalise(self)
        self.validate()

    def validate(self) -> None:
        """Raise SettingError on the first bad setting (each section's ``_check``).

        A section is checked once, when it is built (also by ``dataclasses.replace``): it is
        frozen, so it stays valid, and a later call returns at once.
        """
        if self.__dict__.get("_checked"):
            return
        self._check()
        object.__setattr__(self, "_checked", True)  # not a field: no effect on ==, to_dict

    def _check(self) -> None:  # pragma: no cover - each section defines it
        raise NotImplementedError

    def to_dict(self) -> dict[str, Any]:
        """JSON-able dict of every setting (tuples become lists)."""
        return {
            k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(self).items()
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], what: str | None = None) -> Any:
        """Build from :meth:`to_dict` output; missing keys take the defaults.

        Raises:
            SettingError: ``data`` is not a mapping, has unknown keys, or holds a bad value.
        """
        what = what or cls.__name__
        if not isinstance(data, Mapping):
            raise SettingTypeError(f"{what} must be a table of settings, got {type(data).__name__}")
        reject_unknown_keys(cls, data, what)
        return cls(**dict(data))
