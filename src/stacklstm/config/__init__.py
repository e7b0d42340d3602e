"""Run settings: ``DataConfig``, ``ModelConfig``, ``TrainConfig``, ``RunConfig``.

The only place defaults and help texts live: each field carries its help in its metadata,
and the command line builds one flag per field from it (``lstm_hidden_size`` ->
``--lstm-hidden-size``). A ``RunConfig`` round-trips through ``to_dict``/``from_dict`` (JSON,
TOML and YAML files hold the same nesting)::

    [data]               # DataConfig fields
    window = 24
    [model]              # ModelConfig fields
    lstm_hidden_size = 32
    [train]              # TrainConfig fields
    epochs = 10

Older spellings stay accepted as aliases (:data:`ALIASES`): ``hidden_size``, ``num_layers``
and ``dropout`` in ``[model]``, ``season`` in ``[train]``.

Config files (TOML, YAML) are read by :mod:`stacklstm.configfile`.

The sections live in their own modules (:mod:`~stacklstm.config.data`,
:mod:`~stacklstm.config.training` for ``[model]`` and ``[train]``, :mod:`~stacklstm.config.run`,
and :mod:`~stacklstm.config.schema` for what they share); import them from here. The package
imports nothing of stacklstm but :mod:`stacklstm.checks`.

Every bad value is a :class:`~stacklstm.checks.SettingError` (a ``ValueError``; a
:class:`~stacklstm.checks.SettingTypeError` for a wrong type) with a one-line message naming
the field, what was expected and what was given.

Example:
    >>> cfg = RunConfig.from_dict({"train": {"epochs": 3}, "model": {"hidden_size": 8}})
    >>> cfg.train.epochs, cfg.model.lstm_hidden_size, cfg.data.window
    (3, 8, 'auto')
    >>> RunConfig.from_dict(cfg.to_dict()) == cfg
    True
"""

from .data import DataConfig as DataConfig
from .run import SECTIONS as SECTIONS
from .run import RunConfig as RunConfig
from .run import _legacy_values as _legacy_values
from .run import resolve_aliases as resolve_aliases
from .schema import ALIASES as ALIASES
from .schema import AUTO as AUTO
from .schema import CALENDAR_PREFIX as CALENDAR_PREFIX
from .schema import DEFAULT_FOLDS as DEFAULT_FOLDS
from .schema import LAYOUT_VERSION as LAYOUT_VERSION
from .schema import MAX_ENSEMBLE as MAX_ENSEMBLE
from .schema import MAX_LAYERS as MAX_LAYERS
from .schema import POINT_LOSSES as POINT_LOSSES
from .schema import READABLE_LAYOUTS as READABLE_LAYOUTS
from .schema import Auto as Auto
from .schema import BaselineKind as BaselineKind
from .schema import CalendarKind as CalendarKind
from .schema import CombinationKind as CombinationKind
from .schema import GapPolicy as GapPolicy
from .schema import LossKind as LossKind
from .schema import LossWeightKind as LossWeightKind
from .schema import NormalizeKind as NormalizeKind
from .schema import PaddingKind as PaddingKind
from .schema import ScalerKind as ScalerKind
from .schema import ScalerSetting as ScalerSetting
from .schema import TargetTransform as TargetTransform
from .schema import default_baselines as default_baselines
from .schema import describe as describe
from .schema import setting as setting
from .training import ModelConfig as ModelConfig
from .training import TrainConfig as TrainConfig
