"""The ``[model]`` and ``[train]`` sections: the model to build and how to train it."""

# The fields' `setting(default, help=...)` returns an immutable dataclasses.field.

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import get_args

from ..checks import (
    SettingError,
    check_bool,
    check_choice,
    check_fraction,
    check_int,
    check_levels,
    check_positive_int,
    check_real,
    check_sizes,
)
from ..losses import LOSSES, loss_help
from .schema import (
    AUTO,
    MAX_ENSEMBLE,
    MAX_LAYERS,
    POINT_LOSSES,
    Auto,
    BaselineKind,
    CombinationKind,
    InitKind,
    LossKind,
    LossWeightKind,
    RetrainKind,
    _Section,
    default_baselines,
    setting,
)


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
    hybrid: bool = setting(
        False,
        help="the ES-RNN hybrid (stacklstm.hybrid.ESHybrid): each window normalised by a "
        "multiplicative Holt-Winters level and season whose smoothing is learnt with the LSTM, "
        "the forecast multiplied back; positive targets, no covariates; it sets scaler=mean, "
        "normalize=none, deseasonalize=false, target_transform=none, difference=false",
        legacy=False,
    )

    def _check(self) -> None:
        """Raise SettingError on the first bad setting."""
        check_positive_int("lstm_hidden_size", self.lstm_hidden_size)
        check_positive_int("num_lstm_layers", self.num_lstm_layers, MAX_LAYERS)
        sizes = check_sizes("linear_layer_sizes", self.linear_layer_sizes, MAX_LAYERS)
        object.__setattr__(self, "linear_layer_sizes", sizes)
        check_bool("mean_aggregation", self.mean_aggregation)
        check_bool("bidirectional", self.bidirectional)
        check_fraction("dropout_rate", self.dropout_rate)
        check_bool("hybrid", self.hybrid)


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
    loss: LossKind = setting("mse", help=loss_help())
    loss_weight: LossWeightKind = setting(
        "auto",
        help="how a panel's series weigh in the training loss: 'mase' weighs each series' "
        "windows by the inverse of its seasonal naive error on its training rows (in model "
        "units; squared for mse), so the loss counts every series as MASE does; 'none': each "
        "window alike; 'auto': mase for a panel (id_column) with loss=mse, unless its scaler is "
        "already MASE's (naive, seasonal_naive), else none",
        legacy="none",
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
    init: InitKind = setting(
        "auto",
        help="the parameters training starts from: 'random' (from seed) or 'pretrained': the "
        "shipped model of the data's time step (yearly ... hourly; stacklstm forecast's), "
        "fine-tuned on your series; it sets the window, scaling and model the weights were "
        "trained with, and needs one target, no covariates and a horizon up to the model's; "
        "lr, epochs and min_steps left at their defaults become 1e-4, 20 and 0; 'auto': "
        "'pretrained' for one yearly, quarterly or monthly series that meets those needs "
        "(and sets none of the window or model settings), else 'random'",
        legacy="random",
    )
    ensemble: int = setting(
        1,
        help="seed ensemble: train this many models with the seeds seed, seed+1, ... one after "
        f"another (each a run folder under members/; at most {MAX_ENSEMBLE}) and forecast "
        "with the median of their forecasts, per step and target",
        legacy=1,
    )
    retrain: RetrainKind = setting(
        "auto",
        help="after early stopping, train a fresh model again for the epochs that scored best "
        "on validation (the run chosen on validation is kept in selection/ and scores the "
        "report): 'all' on every row of every series (the model that forecasts has seen the "
        "newest rows), 'on' on the training and validation rows (the test rows held out, "
        "as before), 'off' keeps the run chosen on validation; 'auto': all where there are "
        "validation windows, else off",
        legacy="off",
    )
    log_every: int = setting(50, help="steps between metrics.jsonl lines (and NaN checks)")
    checkpoint_every: int = setting(
        1000,
        help="steps between checkpoints besides the epoch ends (an epoch end saves once the last "
        "checkpoint is 10 s old; 0: epoch ends only)",
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
    combination: CombinationKind = setting(
        "weighted",
        help="the report's combination of the model and the baselines (predict --combine): "
        "'weighted' (each weighed by the inverse of its validation MAE), 'median' (their "
        "median, value by value; with baselines=naive, the mean of the model and the "
        "seasonal naive), 'median_and_weighted' (the mean of the two; --preset accurate) or "
        "'stacked' (one set of weights for every series, of the lowest validation MASE, "
        "the seasonal naive weighed too)",
        legacy="weighted",
    )

    def _check(self) -> None:
        """Raise SettingError on the first bad setting."""
        for name in ("epochs", "batch_size"):
            if getattr(self, name) != AUTO:
                check_positive_int(name, getattr(self, name))
        check_int("min_steps", self.min_steps, 0, 2**31 - 1)
        check_real("lr", self.lr, 0.0, open_low=True)
        check_real("weight_decay", self.weight_decay, 0.0)
        check_fraction("warmup_fraction", self.warmup_fraction)
        check_real("clip_norm", self.clip_norm, 0.0, open_low=True)
        check_choice("loss", self.loss, tuple(LOSSES))
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
        check_choice("loss_weight", self.loss_weight, get_args(LossWeightKind))
        check_choice("retrain", self.retrain, get_args(RetrainKind))
        check_choice("init", self.init, get_args(InitKind))
        check_positive_int("log_every", self.log_every)
        check_int("checkpoint_every", self.checkpoint_every, 0)
        check_bool("skip_nonfinite", self.skip_nonfinite)
        check_choice("baselines", self.baselines, get_args(BaselineKind))
        check_choice("combination", self.combination, get_args(CombinationKind))

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
