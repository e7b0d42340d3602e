"""``RunConfig``: the three sections together, the older spellings, saved configs."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from ..checks import SettingError, SettingTypeError
from .data import DataConfig
from .schema import ALIASES, POINT_LOSSES
from .training import ModelConfig, TrainConfig

SECTIONS: dict[str, type] = {"data": DataConfig, "model": ModelConfig, "train": TrainConfig}


def resolve_aliases(data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """``{"section": {key: value}}`` with every alias renamed to its field.

    Raises:
        SettingError: A section is not a table, or a field is given under both its names.
    """
    out: dict[str, dict[str, Any]] = {}
    given_as: dict[tuple[str, str], tuple[str, str]] = {}  # field -> the spelling given
    for section, values in data.items():
        if not isinstance(values, Mapping):
            raise SettingTypeError(
                f"[{section}] must be a table of settings, got {type(values).__name__}"
            )
        out.setdefault(str(section), {})
    for section, values in data.items():
        for key, value in values.items():
            new_section, new_key = ALIASES.get((section, key), (section, key))
            target = out.setdefault(new_section, {})
            if new_key in target:  # the older spelling first, then the field's own name
                both = sorted(
                    [given_as[new_section, new_key], (section, key)],
                    key=lambda spelling: spelling == (new_section, new_key),
                )
                one_section = both[0][0] == both[1][0]
                first, second = (k if one_section else f"[{s}] {k}" for s, k in both)
                raise SettingError(f"{first} and {second} are the same setting; give one", new_key)
            target[new_key] = value
            given_as[new_section, new_key] = (section, key)
    return out


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines a run: data, model and training settings.

    Example:
        >>> RunConfig().train.batch_size
        'auto'
    """

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        for name, cls in SECTIONS.items():
            if not isinstance(getattr(self, name), cls):
                raise SettingTypeError(
                    f"RunConfig.{name} must be a {cls.__name__}, got "
                    f"{type(getattr(self, name)).__name__}",
                    name,
                )
        self._check_across()

    def _check_across(self) -> None:
        """The checks that involve two sections."""
        data = self.data
        no_val = data.val_size == 0 if data.val_size is not None else data.val_fraction == 0
        if self.train.conformal and no_val:
            given = "`val_size` is 0" if data.val_size is not None else "`val_fraction` is 0"
            raise SettingError(
                f"conformal calibrates the intervals on the validation windows but {given}; "
                "give a validation split or `conformal=False`",
                "conformal",
            )

        if self.model.hybrid:
            self._check_hybrid()

    def _check_hybrid(self) -> None:
        """The hybrid forecasts points from the past alone: a point loss, no known-future or
        static covariates."""
        if self.train.loss not in POINT_LOSSES:
            raise SettingError(
                f"the hybrid model forecasts points: loss must be one of "
                f"{', '.join(POINT_LOSSES)}, got {self.train.loss!r} (conformal=true gives it "
                "intervals)",
                "loss",
            )
        data = self.data
        for name in ("future_features", "static_features"):
            if getattr(data, name):
                raise SettingError(
                    f"the hybrid model takes no known-future or static covariates; got {name}="
                    f"{','.join(getattr(data, name))}",
                    name,
                )
        if data.calendar != "none":
            raise SettingError(
                "the hybrid model takes no known-future covariates; got calendar="
                f"{data.calendar!r}",
                "calendar",
            )

    def validate(self) -> None:
        """Raise SettingError on the first bad setting (each section was checked when it was
        built, see ``DataConfig.validate``; the checks across sections run again)."""
        self.data.validate()
        self.model.validate()
        self.train.validate()
        self._check_across()

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """JSON-able nested dict ``{"data": ..., "model": ..., "train": ...}``."""
        return {name: getattr(self, name).to_dict() for name in SECTIONS}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any], *, saved: bool = False) -> RunConfig:
        """Build from a nested mapping (aliases accepted).

        Args:
            data: ``{"data": {...}, "model": {...}, "train": {...}}``; sections may be absent.
            saved: ``data`` comes from a run folder's ``config.json``: a missing key then takes
                the field's ``legacy`` value (the behaviour of runs written before the field
                existed), never a newer default; a missing key without one is refused.

        Raises:
            SettingError: Unknown section or key (the message lists the known ones), or a bad
                value.
        """
        if not isinstance(data, Mapping):
            raise SettingTypeError(f"expected a table of run settings, got {type(data).__name__}")
        unknown = sorted(str(k) for k in data if k not in SECTIONS)
        if unknown:
            raise SettingError(
                f"unknown config section(s) {', '.join(map(repr, unknown))}; "
                f"expected some of: {', '.join(SECTIONS)}"
            )
        sections = resolve_aliases(data)
        built = {}
        for name, section_cls in SECTIONS.items():
            values = sections.get(name, {})
            if saved:
                values = {**_legacy_values(section_cls, values, name), **values}
            built[name] = section_cls.from_dict(values, f"[{name}]")
        return cls(**built)

    def replace(self, overrides: Mapping[str, Mapping[str, Any]]) -> RunConfig:
        """A copy with ``{"section": {"key": value}}`` overrides applied (and validated).

        Only the sections with overrides are built (and checked) again; the others are kept.
        """
        given = resolve_aliases(overrides)
        for section in given:
            if section not in SECTIONS:
                raise SettingError(f"unknown config section {section!r}")
        built = {}
        for name, section_cls in SECTIONS.items():  # in this order, as from_dict checks them
            current = getattr(self, name)
            values = given.get(name)
            built[name] = (
                section_cls.from_dict({**current.to_dict(), **values}, f"[{name}]")
                if values
                else current
            )
        return RunConfig(**built)

    def diff(self, other: RunConfig) -> list[str]:
        """Lines ``section.key: self_value != other_value`` for every setting that differs."""
        mine, theirs = self.to_dict(), other.to_dict()
        return [
            f"{section}.{key}: {mine[section][key]!r} != {theirs[section][key]!r}"
            for section in mine
            for key in mine[section]
            if mine[section][key] != theirs[section][key]
        ]


def _legacy_values(cls: type, values: Mapping[str, Any], section: str) -> dict[str, Any]:
    """For a saved config: the legacy value of every field ``values`` lacks."""
    out = {}
    for f in dataclasses.fields(cls):
        if f.name in values:
            continue
        if "legacy" not in f.metadata:
            raise SettingError(
                f"the saved config lacks [{section}] {f.name}, which every run folder holds; "
                "the file was edited or damaged",
                f.name,
            )
        out[f.name] = f.metadata["legacy"]
    return out
