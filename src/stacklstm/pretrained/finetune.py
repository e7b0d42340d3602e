"""``init="pretrained"``: a run that starts from the shipped weights of its data's frequency
family instead of random parameters, and fine-tunes them on its own series.

The weights read windows as they were trained on: their window, season, scaling, target
transform, deseasonalising and padding, and their model. :func:`pretrained_config` sets
those settings of the run to the weights' (a setting given otherwise is refused, naming
it), and :func:`pretrained_params` gives the parameters the run starts from: the weights,
with the output layer cut to the run's horizon where it is shorter than theirs (the point
forecast of step ``k`` is output ``k``). The learning rate, epochs and step floor left at
their defaults become a fine-tune's (:data:`FINE_TUNE_DEFAULTS`). Everything else is an
ordinary run: early stopping on the validation tail, checkpoints and bit-identical resume,
retraining on every row (from the weights again), export.

Example:
    >>> from stacklstm.config import RunConfig
    >>> cfg = pretrained_config(RunConfig().replace({"data": {"horizon": 4}}), "MS", False)
    >>> cfg.data.window, cfg.data.season, cfg.model.lstm_hidden_size  # doctest: +SKIP
    (24, 12, 64)
    >>> cfg.train.lr, cfg.train.epochs, cfg.train.min_steps  # doctest: +SKIP
    (0.0001, 20, 0)
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from ..checks import SettingError
from ..config import DataConfig, ModelConfig, RunConfig, TrainConfig
from ..config.schema import POINT_LOSSES
from .store import family_of, plain_tree, read_weights

__all__ = [
    "AUTO_FAMILIES",
    "FINE_TUNE_DEFAULTS",
    "WINDOW_SETTINGS",
    "pretrained_config",
    "pretrained_params",
]

#: The data settings that make the windows the weights read.
WINDOW_SETTINGS = (
    "window",
    "season",
    "scaler",
    "normalize",
    "difference",
    "deseasonalize",
    "season_test",
    "season_window",
    "target_transform",
    "start_padding",
)


#: The training settings of a fine-tune where the run leaves them at the library's defaults
#: (those of training from random parameters): a thirtieth of the learning rate, 20 epochs
#: and no floor of 1,000 steps, so that the weights move a little on a short series' few
#: windows. At the defaults a fine-tune fits the series' noise: on M3 quarterly series it
#: forecast a fifth worse than the weights unchanged.
FINE_TUNE_DEFAULTS: dict[str, Any] = {"lr": 1e-4, "epochs": 20, "min_steps": 0}

#: The families whose weights ``init="auto"`` fine-tunes for one series: those trained on the
#: competitions' series, where one model per series fine-tuned from them forecast M3 better
#: than one trained from random parameters (leave one competition out, docs/pretrained.md).
#: The weekly, daily and hourly weights saw synthetic series only, and a fine-tune of them
#: forecast worse than random parameters on the series measured (the daily series of
#: ``benchmarks/accuracy.py``, the bundled weekly CO2 record): ``"auto"`` trains those
#: steps from random parameters.
AUTO_FAMILIES = ("yearly", "quarterly", "monthly")

#: ``(setting, the weights', a run's)``: a run's value that is the weights' resolved for it
#: (``per_series`` on one series is its own choice of the log, made once).
RESOLVED = {("target_transform", "per_series", v) for v in ("none", "log1p", "auto")}


def _family(freq: str | None) -> str:
    if freq is None:
        raise SettingError(
            "init='pretrained' chooses the weights by the data's time step, but the table has "
            "no regular time column; give it one (time_column) or train with init='random'",
            "init",
        )
    try:
        return family_of(freq)
    except ValueError as err:
        raise SettingError(f"init='pretrained': {err}", "init") from None


def _defaults(cls: type) -> dict[str, Any]:
    return {f.name: f.default for f in dataclasses.fields(cls)}


def pretrained_config(cfg: RunConfig, freq: str | None, panel: bool) -> RunConfig:
    """``cfg`` with the window and model settings of the weights of ``freq``'s family, and
    :data:`FINE_TUNE_DEFAULTS` for the training settings it leaves at their defaults.

    Args:
        cfg: The run's settings, ``train.init == "pretrained"``.
        freq: The data's time step (``Series.freq``).
        panel: Whether the data is a panel (unused by the rules but kept for the log).

    Raises:
        SettingError: No time step or no family for it; more than one target, covariates,
            the hybrid, a loss that is not a point loss, a horizon longer than the weights',
            or a window or model setting given other than the weights'.
    """
    family = _family(freq)
    meta, _ = read_weights(family)
    weights = RunConfig.from_dict(meta["config"], saved=True)
    data, model, train = cfg.data, cfg.model, cfg.train
    covariates = data.features or data.future_features or data.static_features
    if len(data.target) != 1 or covariates or data.calendar != "none" or model.hybrid:
        raise SettingError(
            "init='pretrained' starts from weights that read one target and nothing else; "
            "give one target and no features, covariates, calendar or hybrid (or train with "
            "init='random')",
            "init",
        )
    if train.loss not in POINT_LOSSES:
        raise SettingError(
            f"init='pretrained' starts from a point forecast; loss={train.loss!r} needs an "
            f"output layer the weights lack: use {', '.join(POINT_LOSSES)} (conformal=True "
            "for intervals)",
            "loss",
        )
    if data.horizon > weights.data.horizon:
        raise SettingError(
            f"init='pretrained': the {family} weights forecast at most "
            f"{weights.data.horizon} steps, got horizon={data.horizon}",
            "horizon",
        )
    changes: dict[str, dict[str, Any]] = {"data": {}, "model": {}, "train": {}}
    from_scratch = _defaults(TrainConfig)
    for name, value in FINE_TUNE_DEFAULTS.items():
        if getattr(train, name) == from_scratch[name]:
            changes["train"][name] = value
    for section, names, defaults in (
        ("data", WINDOW_SETTINGS, _defaults(DataConfig)),
        ("model", [f.name for f in dataclasses.fields(ModelConfig)], _defaults(ModelConfig)),
    ):
        given, wanted = getattr(cfg, section), getattr(weights, section)
        for name in names:
            value, need = getattr(given, name), getattr(wanted, name)
            if value == need or (name, need, value) in RESOLVED:
                continue
            if value != defaults[name]:
                raise SettingError(
                    f"init='pretrained': the {family} weights were trained with {name}="
                    f"{need!r}, got {name}={value!r}; leave {name} unset (or train with "
                    "init='random')",
                    name,
                )
            changes[section][name] = need
    return cfg.replace({k: v for k, v in changes.items() if v})


def pretrained_params(freq: str | None, fresh: Any, horizon: int) -> Any:
    """The parameters a run with ``init="pretrained"`` starts from: the weights of
    ``freq``'s family, the output layer cut to ``horizon`` steps, in the structure, shapes
    and dtypes of ``fresh`` (the run's own initial parameters).

    Raises:
        SettingError: The weights do not fit ``fresh`` (a model another than theirs).
    """
    from flax import traverse_util

    family = _family(freq)
    _, params = read_weights(family)
    want = traverse_util.flatten_dict(plain_tree(fresh), sep="/")
    have = traverse_util.flatten_dict(params, sep="/")
    out = {}
    for key, target in want.items():
        value = have.get(key)
        if value is not None and value.shape != target.shape and value.shape[-1] > horizon:
            value = value[..., : target.shape[-1]]  # the output layer: its first steps
        if value is None or value.shape != target.shape:
            raise SettingError(
                f"init='pretrained': the {family} weights have no parameter {key!r} of shape "
                f"{tuple(target.shape)}; the model differs from theirs",
                "init",
            )
        out[key] = np.asarray(value, dtype=target.dtype)
    return traverse_util.unflatten_dict(out, sep="/")
