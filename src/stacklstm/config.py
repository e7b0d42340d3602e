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

from __future__ import annotations

import dataclasses
import importlib.util
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, get_args

import numpy as np

from .checks import (
    SettingError,
    SettingTypeError,
    check_bool,
    check_choice,
    check_fraction,
    check_int,
    check_levels,
    check_names,
    check_positive_int,
    check_real,
    check_sizes,
    is_int,
    reject_unknown_keys,
)

ScalerKind = Literal["standard", "minmax", "robust", "none"]
NormalizeKind = Literal["none", "window"]
GapPolicy = Literal["interpolate", "reject"]
LossKind = Literal["mse", "mae", "huber", "quantile", "normal", "student_t"]
#: The losses whose model gives a point forecast only (intervals need ``conformal``).
POINT_LOSSES = ("mse", "mae", "huber")
BaselineKind = Literal["naive", "all"]
TargetTransform = Literal["none", "log1p"]
#: ``"auto"``: a setting derived from the data when the run starts (the season from the time
#: step, the window from the season, the training budget from the number of windows); the run
#: folder's ``config.json`` holds the value it resolved to.
Auto = Literal["auto"]
AUTO = "auto"
CalendarKind = Literal["auto", "none"]

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

    def validate(self) -> None:  # pragma: no cover - each section defines it
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


@dataclass(frozen=True)
class DataConfig(_Section):
    """How a table becomes windows, and what the series is (its season).

    Example:
        >>> DataConfig(window=24, horizon=4).to_dict()["window"]
        24
    """

    target: tuple[str, ...] = setting(
        ("co2",), help="column(s) to forecast, comma separated; also model inputs"
    )
    features: tuple[str, ...] = setting(
        (), help="extra input column(s) (past covariates), comma separated ('' for none)"
    )
    time_column: str | None = setting(
        "date", help="column of time stamps ('none': use the row order)"
    )
    window: int | Auto = setting(
        "auto",
        help="input time steps per window ('auto': 2 seasons, at least 8 and at most 52; 10 "
        "without a season)",
        legacy=10,
    )
    horizon: int = setting(1, help="time steps forecast per window")
    stride: int = setting(
        1, help="step between training and validation windows (the test scores every origin)"
    )
    val_fraction: float = setting(
        0.15, help="share of the rows (the latest before test) for validation, in [0, 1)"
    )
    test_fraction: float = setting(0.15, help="share of the rows (the latest) for test, in [0, 1)")
    scaler: ScalerKind = setting("standard", help="per-column scaling fitted on the training rows")
    normalize: NormalizeKind = setting(
        "window", help="'window': subtract each window's last target value from that target"
    )
    difference: bool = setting(False, help="model first differences instead of levels")
    gaps: GapPolicy = setting(
        "interpolate", help="fill missing values and time stamps linearly, or reject them"
    )
    season: int | Auto = setting(
        "auto",
        help="period of the series in time steps ('auto': from the time step: 12 monthly, 4 "
        "quarterly, 52 weekly, 7 daily, 5 business-daily, 24 hourly; 1 otherwise)",
        legacy=52,
    )
    deseasonalize: bool = setting(
        True,
        help="subtract each series' seasonal pattern (classical additive decomposition, fitted "
        "on its training rows) from the targets before scaling, and add it back to the "
        "forecasts; needs season >= 2 and 2 seasons of training rows (else skipped)",
        legacy=False,
    )
    target_transform: TargetTransform = setting(
        "none",
        help="'log1p': model log(1 + y) of non-negative targets and forecast exp(.) - 1, "
        "clipped at 0 (counts, multiplicative seasons); 'none': the values themselves",
        legacy="none",
    )
    id_column: str | None = setting(
        None,
        help="column naming the series of a panel (one row per series and time stamp; one "
        "model for all); 'none': the table is one series",
        legacy=None,
    )
    val_size: int | None = setting(
        None,
        help="validation steps per series (the latest before test), instead of val_fraction",
        legacy=None,
    )
    test_size: int | None = setting(
        None, help="test steps per series (the latest), instead of test_fraction", legacy=None
    )
    strict: bool = setting(
        False,
        help="refuse a series too short for one window instead of naming and skipping it",
        legacy=False,
    )
    future_features: tuple[str, ...] = setting(
        (),
        help="input column(s) known in advance (a promotion plan, prices): the model sees their "
        "past and their values over the horizon; comma separated ('' for none)",
        legacy=(),
    )
    static_features: tuple[str, ...] = setting(
        (),
        help="input column(s) constant per series (a store's size); comma separated ('' for none)",
        legacy=(),
    )
    calendar: CalendarKind = setting(
        "none",
        help="'auto': add sin/cos of the seasonal position of each time stamp (hour of day, day "
        "of week, week, day or month of year, as the time step fits), known in advance",
        legacy="none",
    )

    @property
    def roles(self) -> dict[str, tuple[str, ...]]:
        """``{role: columns}`` of every column the model reads, in the order of the roles."""
        return {
            "target": self.target,
            "features": self.features,
            "future_features": self.future_features,
            "static_features": self.static_features,
        }

    @property
    def has_covariates(self) -> bool:
        """Whether the model needs known-future or static inputs (a ``Forecaster``)."""
        return bool(self.future_features or self.static_features or self.calendar != "none")

    def validate(self) -> None:
        """Raise SettingError on the first bad setting, in this order: the columns and their
        roles, the window and split sizes, the id column, the splits, the choices."""
        self._check_columns()
        self._check_sizes()
        self._check_id_column()
        self._check_splits()
        self._check_choices()

    def _check_columns(self) -> None:
        """Column names, each in one role; the calendar and the time column."""
        for name in self.roles:
            names = check_names(name, getattr(self, name), allow_empty=name != "target")
            object.__setattr__(self, name, names)
        both = [name for name in self.features if name in self.target]
        if both:
            raise SettingError(
                f"column {both[0]!r} is in both target and features; a target is already an input"
            )
        roles = list(self.roles.items())
        for i, (role, names) in enumerate(roles):
            for other, other_names in roles[i + 1 :]:
                shared = [name for name in names if name in other_names]
                if shared:
                    raise SettingError(
                        f"column {shared[0]!r} is in both {role} and {other}; give each column "
                        "one role",
                        other,
                    )
        check_choice("calendar", self.calendar, get_args(CalendarKind))
        if self.calendar == "auto":
            taken = [
                n for names in self.roles.values() for n in names if n.startswith(CALENDAR_PREFIX)
            ]
            if taken:
                raise SettingError(
                    f"column {taken[0]!r} starts with {CALENDAR_PREFIX!r}, the prefix of the "
                    "calendar columns calendar='auto' adds; rename it",
                    "calendar",
                )
            if self.time_column is None:
                raise SettingError(
                    "calendar='auto' needs a time column to read the calendar from; set "
                    "time_column or use calendar='none'",
                    "calendar",
                )
        if self.time_column is not None:
            if not isinstance(self.time_column, str) or not self.time_column:
                raise SettingTypeError(
                    f"time_column must be a column name or None, got {self.time_column!r}",
                    "time_column",
                )
            listed = [name for names in self.roles.values() for name in names]
            if self.time_column in listed:
                raise SettingError(
                    f"time_column {self.time_column!r} is also listed as a target or feature",
                    "time_column",
                )

    def _check_sizes(self) -> None:
        """Window, horizon, stride and the split fractions."""
        if self.window != AUTO:
            check_positive_int("window", self.window)
        for name in ("horizon", "stride"):
            check_positive_int(name, getattr(self, name))
        check_fraction("val_fraction", self.val_fraction)
        check_fraction("test_fraction", self.test_fraction)

    def _check_id_column(self) -> None:
        """The id column: a name, and none of the other columns."""
        if self.id_column is not None:
            if not isinstance(self.id_column, str) or not self.id_column:
                raise SettingTypeError(
                    f"id_column must be a column name or None, got {self.id_column!r}",
                    "id_column",
                )
            listed = [name for names in self.roles.values() for name in names]
            if self.id_column in (*listed, self.time_column):
                raise SettingError(
                    f"id_column {self.id_column!r} is also the time column or a target or feature",
                    "id_column",
                )

    def _check_splits(self) -> None:
        """Split sizes (one form each) and rows left for training."""
        for size, fraction in (("val_size", "val_fraction"), ("test_size", "test_fraction")):
            if getattr(self, size) is None:
                continue
            check_int(size, getattr(self, size), 0, 2**31 - 1)
            default = next(f.default for f in dataclasses.fields(self) if f.name == fraction)
            if getattr(self, fraction) != default:  # both forms given (the default is unset)
                raise SettingError(
                    f"give {size} or {fraction}, not both (got {size}={getattr(self, size)} "
                    f"and {fraction}={getattr(self, fraction)})",
                    size,
                )
        check_bool("strict", self.strict)
        if self.val_fraction + self.test_fraction >= 1.0:
            raise SettingError(
                "val_fraction + test_fraction must be below 1 so that rows remain for training, "
                f"got {self.val_fraction} + {self.test_fraction}"
            )

    def _check_choices(self) -> None:
        """Scaler, normalisation, gaps, differencing, season, deseasonalising, transform."""
        check_choice("scaler", self.scaler, get_args(ScalerKind))
        check_choice("normalize", self.normalize, get_args(NormalizeKind))
        check_choice("gaps", self.gaps, get_args(GapPolicy))
        check_bool("difference", self.difference)
        if self.season != AUTO:  # larger ones overflow the indexing
            check_int("season", self.season, 1, 2**31 - 1)
        check_bool("deseasonalize", self.deseasonalize)
        check_choice("target_transform", self.target_transform, get_args(TargetTransform))


@dataclass(frozen=True)
class ModelConfig(_Section):
    """The ``LSTMModel`` to build: its field names and defaults are ``LSTMModel``'s.

    Its ``output_size`` is ``horizon * n_targets`` of the data;
    :func:`stacklstm.forecaster.build_model` builds the module.

    Example:
        >>> ModelConfig(lstm_hidden_size=8).lstm_hidden_size
        8
    """

    lstm_hidden_size: int = setting(64, help="hidden size of each LSTM layer")
    num_lstm_layers: int = setting(2, help="stacked LSTM layers")
    linear_layer_sizes: tuple[int, ...] = setting(
        (32, 16), help="Dense+ELU head sizes, comma separated ('' for none)"
    )
    mean_aggregation: bool = setting(
        False, help="average the LSTM outputs over time instead of taking the last step"
    )
    bidirectional: bool = setting(False, help="add a reverse direction to every LSTM layer")
    dropout_rate: float = setting(0.0, help="dropout between LSTM layers in training, in [0, 1)")

    def validate(self) -> None:
        """Raise SettingError on the first bad setting."""
        check_positive_int("lstm_hidden_size", self.lstm_hidden_size)
        check_positive_int("num_lstm_layers", self.num_lstm_layers, MAX_LAYERS)
        sizes = check_sizes("linear_layer_sizes", self.linear_layer_sizes, MAX_LAYERS)
        object.__setattr__(self, "linear_layer_sizes", sizes)
        check_bool("mean_aggregation", self.mean_aggregation)
        check_bool("bidirectional", self.bidirectional)
        check_fraction("dropout_rate", self.dropout_rate)


@dataclass(frozen=True)
class TrainConfig(_Section):
    """How to train. The defaults train the default model on the bundled CO2 data in seconds.

    Example:
        >>> TrainConfig(epochs=2).lr
        0.003
    """

    epochs: int | Auto = setting(
        "auto",
        help="passes over the training windows ('auto': 60, or more to reach min_steps)",
        legacy=60,
    )
    batch_size: int | Auto = setting(
        "auto",
        help="windows per step (global; a multiple of the device count; 'auto': 32, or an "
        "eighth of the training windows when fewer than 256, at least 8)",
        legacy=32,
    )
    min_steps: int = setting(
        1000,
        help="with epochs='auto': raise the epochs (from 60) until training has at least this "
        "many optimiser steps, and patience by the same factor",
        legacy=0,
    )
    lr: float = setting(3e-3, help="peak learning rate (AdamW, warm-up then cosine decay)")
    weight_decay: float = setting(1e-4, help="AdamW's decoupled weight decay")
    warmup_fraction: float = setting(
        0.05, help="share of all steps for the learning-rate warm-up, in [0, 1)"
    )
    clip_norm: float = setting(1.0, help="clip gradients to this global norm")
    loss: LossKind = setting(
        "mse",
        help="training loss: mse, mae, huber (delta 1, in scaled units) give point forecasts; "
        "quantile (pinball loss), normal and student_t (negative log-likelihood) also give "
        "prediction intervals",
    )
    quantiles: tuple[float, ...] = setting(
        (),
        help="with loss=quantile: the quantile levels learnt, comma separated, ascending, in "
        "(0, 1); 0.5 (the point forecast) is added if absent; interval_levels given with them "
        "must find both quantiles of each level among them ('': those of interval_levels)",
        legacy=(),
    )
    interval_levels: tuple[float, ...] = setting(
        (0.8, 0.95),
        help="nominal coverage of the prediction intervals, comma separated, ascending, in "
        "(0, 1): 0.8 is the interval between the 0.1 and 0.9 quantiles ('' for none)",
        legacy=(),
    )
    conformal: bool = setting(
        False,
        help="calibrate the intervals on the validation windows (split conformal, per horizon "
        "step); with mse/mae/huber it makes symmetric intervals at interval_levels",
        legacy=False,
    )
    patience: int | Auto = setting(
        "auto",
        help="early stopping: epochs without a better validation loss (0: never stop; 'auto': "
        "15, scaled up with the epochs that min_steps adds)",
        legacy=15,
    )
    seed: int = setting(0, help="seed of the initialisation, the shuffling and dropout")
    ensemble: int = setting(
        1,
        help="seed ensemble: train this many models with the seeds seed, seed+1, ... one after "
        f"another (each a run folder under members/; at most {MAX_ENSEMBLE}) and forecast "
        "with the median of their forecasts, per step and target",
        legacy=1,
    )
    log_every: int = setting(50, help="steps between metrics.jsonl lines (and NaN checks)")
    checkpoint_every: int = setting(
        1000, help="steps between checkpoints besides each epoch end (0: epoch ends only)"
    )
    skip_nonfinite: bool = setting(
        False, help="skip updates whose loss or gradients are NaN/Inf instead of stopping"
    )
    baselines: BaselineKind = setting(
        default_baselines(),
        help="forecasters scored next to the model: 'naive' (last value, seasonal naive) or "
        "'all' (adds statsforecast's AutoETS, AutoARIMA, AutoTheta; pip install "
        "'stacklstm[baselines]'); the default is all when statsforecast is installed",
        legacy="naive",
    )

    def validate(self) -> None:
        """Raise SettingError on the first bad setting."""
        for name in ("epochs", "batch_size"):
            if getattr(self, name) != AUTO:
                check_positive_int(name, getattr(self, name))
        check_int("min_steps", self.min_steps, 0, 2**31 - 1)
        check_real("lr", self.lr, 0.0, open_low=True)
        check_real("weight_decay", self.weight_decay, 0.0)
        check_fraction("warmup_fraction", self.warmup_fraction)
        check_real("clip_norm", self.clip_norm, 0.0, open_low=True)
        check_choice("loss", self.loss, get_args(LossKind))
        for name in ("quantiles", "interval_levels"):
            object.__setattr__(self, name, check_levels(name, getattr(self, name)))
        check_bool("conformal", self.conformal)
        if self.quantiles and self.loss != "quantile":
            raise SettingError(
                f"quantiles apply to `loss=quantile`, got loss={self.loss!r}; the intervals of "
                "the other losses are set by `interval_levels`",
                "quantiles",
            )
        self._check_levels_in_quantiles()
        if self.conformal and self.loss in POINT_LOSSES and not self.interval_levels:
            raise SettingError(
                f"`conformal` with loss={self.loss!r} makes intervals at `interval_levels`, "
                "which is empty; give `interval_levels` (e.g. 0.8,0.95)",
                "interval_levels",
            )
        if self.patience != AUTO:
            check_int("patience", self.patience, 0)
        check_int("seed", self.seed, 0, 2**63 - 1)  # jax.random.key takes an int64
        check_positive_int("ensemble", self.ensemble)
        if self.ensemble > MAX_ENSEMBLE:
            raise SettingError(
                f"ensemble must be at most {MAX_ENSEMBLE} members (they are trained one after "
                f"another, each a run folder of its own), got {self.ensemble}",
                "ensemble",
            )
        if self.seed + self.ensemble - 1 > 2**63 - 1:  # the members' seeds are seed + k
            raise SettingError(
                f"the ensemble's last member would have seed {self.seed} + {self.ensemble - 1}, "
                f"more than the largest seed {2**63 - 1}; lower `seed`",
                "seed",
            )
        check_positive_int("log_every", self.log_every)
        check_int("checkpoint_every", self.checkpoint_every, 0)
        check_bool("skip_nonfinite", self.skip_nonfinite)
        check_choice("baselines", self.baselines, get_args(BaselineKind))

    def _check_levels_in_quantiles(self) -> None:
        """With ``loss=quantile`` and explicit ``quantiles``, the intervals are the symmetric
        pairs among them: refuse ``interval_levels`` (set, not the default) that they lack."""
        default = next(f.default for f in dataclasses.fields(self) if f.name == "interval_levels")
        if self.loss != "quantile" or not self.quantiles or self.interval_levels == default:
            return
        have = {round(q, 10) for q in self.quantiles}
        missing = [
            level
            for level in self.interval_levels
            if not {round((1 - level) / 2, 10), round((1 + level) / 2, 10)} <= have
        ]
        if missing:
            level = missing[0]
            low, high = round((1 - level) / 2, 10), round((1 + level) / 2, 10)
            raise SettingError(
                f"interval_levels {_listed(self.interval_levels)} cannot be read off `quantiles` "
                f"{_listed(self.quantiles)}: the interval at level {level:g} spans the "
                f"quantiles {low:g} and {high:g}; add them to `quantiles`, or leave `quantiles` "
                "empty to learn those of `interval_levels`",
                "interval_levels",
            )


def _listed(values: tuple[float, ...]) -> str:
    """Levels as a user writes them on the command line: ``0.1,0.9``."""
    return ",".join(f"{v:g}" for v in values)


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
                both = sorted([given_as[new_section, new_key], (section, key)],
                              key=lambda spelling: spelling == (new_section, new_key))  # fmt: skip
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

    def validate(self) -> None:
        """Raise SettingError on the first bad setting."""
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
        """A copy with ``{"section": {"key": value}}`` overrides applied (and validated)."""
        merged = self.to_dict()
        for section, values in resolve_aliases(overrides).items():
            if section not in merged:
                raise SettingError(f"unknown config section {section!r}")
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
