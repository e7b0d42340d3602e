"""The search space of :func:`stacklstm.tune.tune`: the ``[tune]`` table parsed and checked
on the base settings, and sampled per trial.

Example:
    >>> space = SearchSpace.from_dict({"train": {"lr": {"low": 1e-4, "high": 1e-2}}}, RunConfig())
    >>> space.dimensions[0].key, space.dimensions[0].low
    ('train.lr', 0.0001)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..checks import SettingError, is_int, is_real
from ..config import SECTIONS, RunConfig


def default_space(base: RunConfig) -> dict[str, dict[str, Any]]:
    """The search space used without a ``[tune]`` section: hidden size, depth, head, dropout,
    learning rate, and the window around ``base``'s (half, same, double; with
    ``window="auto"`` the window is left to the data: 2 seasons)."""
    w = base.data.window
    windows = None if w == "auto" else sorted({max(2, w // 2), w, 2 * w})
    return {
        "data": {} if windows is None else {"window": windows},
        "model": {
            "lstm_hidden_size": [16, 32, 64, 128],
            "num_lstm_layers": {"low": 1, "high": 3},
            "linear_layer_sizes": [[], [32], [32, 16]],
            "dropout_rate": {"low": 0.0, "high": 0.3},
        },
        "train": {"lr": {"low": 3e-4, "high": 1e-2, "log": True}},
    }


@dataclass(frozen=True)
class Dimension:
    """One searched setting: ``choices`` (a list), or a ``low..high`` range.

    Attributes:
        section: ``"data"``, ``"model"`` or ``"train"``.
        name: The config field.
        choices: The values to choose from, or None for a range.
        low, high: The range's bounds (integers: an integer range).
        log: Sample the range on a log scale.
    """

    section: str
    name: str
    choices: tuple[Any, ...] | None = None
    low: float | None = None
    high: float | None = None
    log: bool = False

    @property
    def key(self) -> str:
        return f"{self.section}.{self.name}"

    def suggest(self, trial: Any) -> Any:
        if self.choices is not None:
            # Optuna's choices must be scalars: a list (layer sizes) is chosen by its label.
            labels = [_label(c) for c in self.choices]
            picked = trial.suggest_categorical(self.key, labels)
            return self.choices[labels.index(picked)]
        if is_int(self.low) and is_int(self.high):
            return trial.suggest_int(self.key, self.low, self.high, log=self.log)
        return trial.suggest_float(self.key, self.low, self.high, log=self.log)


def _label(choice: Any) -> Any:
    if isinstance(choice, (list, tuple)):
        return ",".join(map(str, choice)) or "()"
    return choice


#: Settings a search cannot vary: trials are ranked (and pruned) by their validation loss,
#: which these change the units, rows or meaning of, so their trials would not compare.
NOT_SEARCHED: dict[tuple[str, str], str] = {
    **{
        ("data", name): "it changes the units of the validation loss"
        for name in (
            "target",
            "scaler",
            "normalize",
            "difference",
            "deseasonalize",
            "season",
            "target_transform",
        )
    },
    **{
        ("data", name): "it changes the rows the validation loss is computed on"
        for name in ("horizon", "val_fraction", "val_size", "test_fraction", "test_size")
    },
    **{
        ("train", name): "it changes what the validation loss measures"
        for name in ("loss", "loss_weight", "quantiles")
    },
    ("train", "ensemble"): "a search prunes trials on one model's validation losses; tune "
    "with ensemble = 1, then train the best settings with `ensemble`",
}


@dataclass(frozen=True)
class SearchSpace:
    """The dimensions of a search, each checked against the config it will be applied to."""

    dimensions: tuple[Dimension, ...]

    @classmethod
    def from_dict(cls, raw: Mapping[str, Any], base: RunConfig) -> SearchSpace:
        """Parse a ``[tune]`` table; every choice and bound is checked on ``base``.

        Raises:
            SettingError: An unknown section or field, a malformed entry, or a value the
                config refuses (the message names ``[tune.section] field``).
        """
        if not isinstance(raw, Mapping) or not raw:
            raise SettingError(f"[tune] must be a non-empty table of sections, got {raw!r}")
        dims = []
        for section, fields in raw.items():
            if section not in SECTIONS:
                raise SettingError(
                    f"unknown [tune] section {section!r}; expected some of: {', '.join(SECTIONS)}"
                )
            if not isinstance(fields, Mapping):
                raise SettingError(f"[tune.{section}] must be a table, got {fields!r}")
            known = [f.name for f in dataclasses.fields(SECTIONS[section])]
            for name, spec in fields.items():
                where = f"[tune.{section}] {name}"
                if name not in known:
                    raise SettingError(
                        f"{where}: unknown setting; expected some of: {', '.join(known)}"
                    )
                if (section, name) in NOT_SEARCHED:
                    raise SettingError(
                        f"{where} cannot be searched: {NOT_SEARCHED[section, name]}; set it "
                        f"in [{section}] (or on the command line) and search the rest"
                    )
                dim = _dimension(section, name, spec, where)
                for value in dim.choices or (dim.low, dim.high):
                    try:
                        base.replace({section: {name: value}})
                    except ValueError as err:
                        raise SettingError(f"{where}: {value!r} is not allowed: {err}") from err
                dims.append(dim)
        return cls(tuple(dims))

    def suggest(self, trial: Any) -> dict[str, dict[str, Any]]:
        """``{"section": {field: value}}`` overrides sampled by ``trial``."""
        out: dict[str, dict[str, Any]] = {}
        for dim in self.dimensions:
            out.setdefault(dim.section, {})[dim.name] = dim.suggest(trial)
        return out


def _dimension(section: str, name: str, spec: Any, where: str) -> Dimension:
    if isinstance(spec, (list, tuple)):
        if not spec:
            raise SettingError(f"{where}: a list of choices must not be empty")
        labels = [_label(c) for c in spec]
        if len(set(map(repr, labels))) != len(labels):
            raise SettingError(f"{where}: the choices repeat a value: {list(spec)!r}")
        return Dimension(section, name, choices=tuple(spec))
    if isinstance(spec, Mapping):
        unknown = sorted(set(spec) - {"low", "high", "log"})
        if unknown or "low" not in spec or "high" not in spec:
            raise SettingError(
                f"{where}: a range is {{low = ..., high = ...}} (and optionally log = true), "
                f"got {dict(spec)!r}"
            )
        low, high, use_log = spec["low"], spec["high"], spec.get("log", False)
        if not (is_real(low) and is_real(high)) or not math.isfinite(low + high) or low >= high:
            raise SettingError(f"{where}: a range needs numbers low < high, got {low!r}, {high!r}")
        if not isinstance(use_log, bool) or (use_log and low <= 0):
            raise SettingError(f"{where}: log = true needs low > 0 (and log true or false)")
        return Dimension(section, name, low=low, high=high, log=use_log)
    raise SettingError(
        f"{where}: expected a list of choices or a range {{low = ..., high = ...}}, got {spec!r}"
    )


__all__ = ["Dimension", "SearchSpace", "default_space"]
