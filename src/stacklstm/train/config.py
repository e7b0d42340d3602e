"""Run settings: ``ModelConfig``, ``TrainConfig``, ``RunConfig``. The only place defaults live.

The data settings are :class:`stacklstm.data.DataConfig`. A ``RunConfig`` round-trips through
``to_dict``/``from_dict`` (JSON, TOML and YAML files hold the same nesting)::

    [data]               # DataConfig fields
    window = 24
    [model]              # ModelConfig fields
    hidden_size = 32
    [train]              # TrainConfig fields
    epochs = 10

Every validation error is a ``ValueError`` (``DataError`` for data settings) with a one-line
message saying what was expected and what was given.

Example:
    >>> cfg = RunConfig.from_dict({"train": {"epochs": 3}, "model": {"hidden_size": 8}})
    >>> cfg.train.epochs, cfg.model.hidden_size, cfg.data.window
    (3, 8, 10)
    >>> RunConfig.from_dict(cfg.to_dict()) == cfg
    True
"""

from __future__ import annotations

import dataclasses
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

import numpy as np

from ..data import DataConfig, DataError, reject_unknown_keys

LossKind = Literal["mse", "mae", "huber"]

#: Version of the run folder's layout (config.json keys, checkpoint items). A run folder written
#: with another version is refused on resume, evaluate and predict instead of misread.
LAYOUT_VERSION = 1

#: Most LSTM layers, and most head layers, a ModelConfig accepts.
MAX_LAYERS = 128


def _is_int(value: object) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _is_real(value: object) -> bool:
    return isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(
        value, (bool, np.bool_)
    )


def _check_int(name: str, value: object, low: int, high: int | None = None) -> None:
    if not _is_int(value) or value < low or (high is not None and value > high):
        bound = f">= {low}" if high is None else f"in [{low}, {high}]"
        raise ValueError(f"{name} must be an integer {bound}, got {value!r}")


def _check_real(name: str, value: object, low: float, high: float, *, open_low: bool) -> None:
    inside = _is_real(value) and np.isfinite(value) and value < high
    inside = inside and (value > low if open_low else value >= low)
    if not inside:
        bracket = "(" if open_low else "["
        upper = "inf)" if high == np.inf else f"{high})"
        raise ValueError(f"{name} must be a number in {bracket}{low}, {upper}, got {value!r}")


def _normalise_numbers(obj: Any) -> None:
    """numpy scalars -> Python, ints -> float for float fields (so ``to_dict`` is stable JSON)."""
    for f in dataclasses.fields(obj):
        value = getattr(obj, f.name)
        if isinstance(value, (np.integer, np.floating, np.bool_)):
            value = value.item()
        if f.type == "float" and _is_int(value):
            value = float(value)
        object.__setattr__(obj, f.name, value)


def _from_mapping(cls: type, data: Any, section: str) -> Any:
    if not isinstance(data, Mapping):
        raise ValueError(f"[{section}] must be a table of settings, got {type(data).__name__}")
    reject_unknown_keys(cls, data, f"[{section}]", ValueError)
    return cls(**dict(data))


@dataclass(frozen=True)
class ModelConfig:
    """The ``LSTMModel`` to build; its ``output_size`` is ``horizon * n_targets`` of the data.

    Attributes:
        hidden_size: Hidden size of every LSTM layer.
        num_layers: Stacked LSTM layers.
        linear_layer_sizes: Sizes of the Dense+ELU layers of the head (may be empty).
        mean_aggregation: Average the LSTM outputs over time instead of taking the last step.
        bidirectional: Add a reverse direction to every LSTM layer.
        dropout: Dropout between LSTM layers during training, in [0, 1).

    Example:
        >>> ModelConfig(hidden_size=8).build(output_size=3).output_size
        3
    """

    hidden_size: int = 64
    num_layers: int = 2
    linear_layer_sizes: tuple[int, ...] = (32, 16)
    mean_aggregation: bool = False
    bidirectional: bool = False
    dropout: float = 0.0

    def __post_init__(self) -> None:
        if isinstance(self.linear_layer_sizes, list):
            object.__setattr__(self, "linear_layer_sizes", tuple(self.linear_layer_sizes))
        _normalise_numbers(self)
        self.validate()

    def validate(self) -> None:
        """Raise ValueError on the first bad setting."""
        _check_int("hidden_size", self.hidden_size, 1)
        # Each layer is traced and compiled on its own: a deeper stack takes minutes to build.
        _check_int("num_layers", self.num_layers, 1, MAX_LAYERS)
        sizes = self.linear_layer_sizes
        if not isinstance(sizes, tuple) or not all(_is_int(s) and s >= 1 for s in sizes):
            raise ValueError(
                f"linear_layer_sizes must be a list of integers >= 1 (e.g. [32, 16] or []), "
                f"got {sizes!r}"
            )
        if len(sizes) > MAX_LAYERS:
            raise ValueError(
                f"linear_layer_sizes may list at most {MAX_LAYERS} layers, got {len(sizes)}"
            )
        object.__setattr__(self, "linear_layer_sizes", tuple(int(s) for s in sizes))
        for name in ("mean_aggregation", "bidirectional"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(f"{name} must be true or false, got {getattr(self, name)!r}")
        _check_real("dropout", self.dropout, 0.0, 1.0, open_low=False)

    def build(self, output_size: int):
        """The ``LSTMModel`` with these settings and ``output_size`` outputs."""
        from ..model import LSTMModel

        return LSTMModel(
            lstm_hidden_size=self.hidden_size,
            num_lstm_layers=self.num_layers,
            linear_layer_sizes=self.linear_layer_sizes,
            mean_aggregation=self.mean_aggregation,
            output_size=output_size,
            bidirectional=self.bidirectional,
            dropout_rate=self.dropout,
        )


@dataclass(frozen=True)
class TrainConfig:
    """How to train. The defaults train the default model on the bundled CO2 data in seconds.

    Attributes:
        epochs: Passes over the training windows (early stopping may end sooner).
        batch_size: Windows per step (global, over all devices); a multiple of the device count.
        lr: Peak learning rate of AdamW.
        weight_decay: AdamW's decoupled weight decay.
        warmup_fraction: Share of all steps spent warming the learning rate up from 0, in
            [0, 1); a cosine decay to 0 follows.
        clip_norm: Gradients are clipped to this global norm.
        loss: ``"mse"``, ``"mae"`` or ``"huber"`` (delta 1, in scaled units).
        patience: Stop after this many epochs without a better validation loss; 0 never stops.
        seed: Seed of the initialisation, the shuffling and dropout.
        season: Period of the seasonal-naive baseline in time steps (52: yearly for weekly data).
        log_every: Steps between ``metrics.jsonl`` lines (and host checks for NaN/Inf).
        checkpoint_every: Steps between checkpoints, on top of one at every epoch end;
            0 means epoch ends only.
        skip_nonfinite: Skip updates whose loss or gradients are NaN/Inf (and count them)
            instead of stopping the run.
    """

    epochs: int = 60
    batch_size: int = 32
    lr: float = 3e-3
    weight_decay: float = 1e-4
    warmup_fraction: float = 0.05
    clip_norm: float = 1.0
    loss: LossKind = "mse"
    patience: int = 15
    seed: int = 0
    season: int = 52
    log_every: int = 50
    checkpoint_every: int = 1000
    skip_nonfinite: bool = False

    def __post_init__(self) -> None:
        _normalise_numbers(self)
        self.validate()

    def validate(self) -> None:
        """Raise ValueError on the first bad setting."""
        _check_int("epochs", self.epochs, 1)
        _check_int("batch_size", self.batch_size, 1)
        _check_real("lr", self.lr, 0.0, np.inf, open_low=True)
        _check_real("weight_decay", self.weight_decay, 0.0, np.inf, open_low=False)
        _check_real("warmup_fraction", self.warmup_fraction, 0.0, 1.0, open_low=False)
        _check_real("clip_norm", self.clip_norm, 0.0, np.inf, open_low=True)
        if self.loss not in get_args(LossKind):
            allowed = ", ".join(repr(k) for k in get_args(LossKind))
            raise ValueError(f"loss must be one of {allowed}, got {self.loss!r}")
        _check_int("patience", self.patience, 0)
        _check_int("seed", self.seed, 0, 2**63 - 1)  # jax.random.key takes an int64
        _check_int("season", self.season, 1, 2**31 - 1)  # larger ones overflow the indexing
        _check_int("log_every", self.log_every, 1)
        _check_int("checkpoint_every", self.checkpoint_every, 0)
        if not isinstance(self.skip_nonfinite, bool):
            raise ValueError(f"skip_nonfinite must be true or false, got {self.skip_nonfinite!r}")


@dataclass(frozen=True)
class RunConfig:
    """Everything that defines a run: data, model and training settings.

    Example:
        >>> RunConfig().train.batch_size
        32
    """

    data: DataConfig = field(default_factory=DataConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)

    def __post_init__(self) -> None:
        for name, cls in (("data", DataConfig), ("model", ModelConfig), ("train", TrainConfig)):
            if not isinstance(getattr(self, name), cls):
                raise TypeError(
                    f"RunConfig.{name} must be a {cls.__name__}, got {type(getattr(self, name))}"
                )

    def validate(self) -> None:
        """Raise ValueError (DataError for data settings) on the first bad setting."""
        self.data.validate()
        self.model.validate()
        self.train.validate()

    def to_dict(self) -> dict[str, dict[str, Any]]:
        """JSON-able nested dict ``{"data": ..., "model": ..., "train": ...}``."""
        model = dataclasses.asdict(self.model)
        model["linear_layer_sizes"] = list(self.model.linear_layer_sizes)
        return {
            "data": self.data.to_dict(),
            "model": model,
            "train": dataclasses.asdict(self.train),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RunConfig:
        """Build from a nested mapping; missing sections and keys take the defaults.

        Raises:
            ValueError: Unknown section or key (the message lists the known ones), or a bad
                value (``DataError`` for the data section).
        """
        if not isinstance(data, Mapping):
            raise ValueError(f"expected a table of run settings, got {type(data).__name__}")
        sections = ("data", "model", "train")
        unknown = sorted(str(k) for k in data if k not in sections)
        if unknown:
            raise ValueError(
                f"unknown config section(s) {', '.join(map(repr, unknown))}; "
                f"expected some of: {', '.join(sections)}"
            )
        data_section = data.get("data", {})
        if not isinstance(data_section, Mapping):
            raise ValueError(f"[data] must be a table of settings, got {type(data_section)}")
        try:
            data_cfg = DataConfig.from_dict(data_section)
        except TypeError as err:  # e.g. a wrong type the dataclass cannot take
            raise DataError(f"[data]: {err}") from err
        return cls(
            data=data_cfg,
            model=_from_mapping(ModelConfig, data.get("model", {}), "model"),
            train=_from_mapping(TrainConfig, data.get("train", {}), "train"),
        )

    def replace(self, overrides: Mapping[str, Mapping[str, Any]]) -> RunConfig:
        """A copy with ``{"section": {"key": value}}`` overrides applied (and validated)."""
        merged = self.to_dict()
        for section, values in overrides.items():
            if section not in merged:
                raise ValueError(f"unknown config section {section!r}")
            merged[section] = {**merged[section], **values}
        return RunConfig.from_dict(merged)

    def diff(self, other: RunConfig) -> list[str]:
        """Lines ``section.key: self_value != other_value`` for every setting that differs."""
        mine, theirs = self.to_dict(), other.to_dict()
        return [
            f"{section}.{key}: {mine[section][key]!r} != {theirs[section][key]!r}"
            for section in mine
            for key in mine[section]
            if mine[section][key] != theirs[section][key]
        ]


def load_config(path: str | Path) -> RunConfig:
    """Read a ``RunConfig`` from a TOML (``.toml``) or YAML (``.yaml``/``.yml``) file.

    Raises:
        ValueError: Missing file, unknown suffix, a syntax error (with its line), or bad
            settings.
    """
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"config file not found: {path}")
    suffix = path.suffix.lower()
    try:
        if suffix == ".toml":
            with path.open("rb") as fh:
                raw = tomllib.load(fh)
        elif suffix in (".yaml", ".yml"):
            import yaml

            with path.open("r", encoding="utf-8") as fh:
                raw = yaml.safe_load(fh)
            raw = {} if raw is None else raw
        else:
            raise ValueError(f"config file must end in .toml, .yaml or .yml, got {path.name!r}")
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as err:
        raise ValueError(f"cannot parse {path}: {' '.join(str(err).split())}") from err
    except Exception as err:  # yaml.YAMLError, without importing yaml at module level
        if type(err).__module__.startswith("yaml"):
            raise ValueError(f"cannot parse {path}: {' '.join(str(err).split())}") from err
        raise
    try:
        return RunConfig.from_dict(raw)
    except (ValueError, TypeError) as err:
        raise type(err)(f"{path}: {err}") from err
