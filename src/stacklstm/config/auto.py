"""Every ``"auto"`` rule in one place: what each setting given as ``"auto"`` becomes.

The rules are pure functions of what the data says (its time step, whether it is a panel,
how many windows its splits give); :mod:`stacklstm.train.resolve` reads the data and applies
them once, before anything is trained, so the code below it receives settings resolved. A
run folder's ``config.json`` holds them resolved.

* ``season``: the usual period of the time step (12 monthly, 4 quarterly, 52 weekly,
  7 daily, 5 business-daily, 24 hourly; else 1): :func:`season_of_freq`;
* ``window``: 2 seasons, 8 to 52 steps (10 without a season): :func:`window_for_season`;
* ``start_padding``: ``"repeat"`` for a panel, ``"none"`` for one series: :func:`padding_of`;
* ``season_window``: :data:`PANEL_SEASON_WINDOW` seasons for a panel, every row (None) for
  one series: :func:`season_window_of`;
* ``scaler``: for a panel whose season is 1 to :data:`SHORT_SEASON`, MASE's own scale,
  else ``"standard"``: :func:`scaler_of`;
* ``target_transform``: ``"seasonal_panel"`` (the default) is ``"per_series"`` for a
  seasonal panel, else ``"none"`` (:func:`transform_of`); ``"auto"`` reads the data
  (Guerrero's lambda, :mod:`stacklstm.data.transform`);
* ``batch_size``, ``epochs``, ``patience``: from the number of training windows, below
  (:func:`resolve_train_config`);
* ``retrain``: ``"all"`` where there are validation windows, else ``"off"``
  (:func:`retrain_of`; a backtest's fold: :func:`fold_retrain_of`);
* ``loss_weight``: ``"mase"`` for a panel trained on the squared error whose scaler is not
  MASE's own, else ``"none"`` (:func:`loss_weight_of`);
* ``init``: ``"pretrained"`` for one yearly, quarterly or monthly series the shipped weights can
  fine-tune on, else ``"random"`` (:func:`stacklstm.train.resolve.choose_init`, which reads
  the weights).

The training budget. A fixed number of epochs trains a short series for very few optimiser
steps (60 epochs of one batch of 32 are 60 steps), too few to learn a seasonal pattern; with
``"auto"`` the budget follows the number of training windows ``n``:

* ``batch_size``: 32, lowered to ``n // 8`` (but not below 8, nor above ``n``) so that an
  epoch has about 8 steps or more;
* ``epochs``: 60, raised to ``ceil(min_steps / steps per epoch)`` when 60 epochs would give
  fewer than ``min_steps`` steps;
* ``patience``: 15, scaled by the same factor as the epochs (``ceil(15 * epochs / 60)``), so
  that early stopping waits the same share of the run.

Example:
    >>> from stacklstm.config import DataConfig, TrainConfig
    >>> c = resolve_data_config(DataConfig(), "MS")
    >>> c.season, c.window, c.scaler, c.start_padding, c.target_transform
    (12, 24, 'standard', 'none', 'none')
    >>> t = resolve_train_config(TrainConfig(), n_windows=57)
    >>> t.batch_size, t.epochs, t.patience
    (8, 143, 36)
    >>> resolve_train_config(TrainConfig(epochs=5, batch_size=4), 57).epochs
    5
"""

from __future__ import annotations

import dataclasses
import math
from typing import TYPE_CHECKING

from .schema import AUTO

if TYPE_CHECKING:
    from .data import DataConfig
    from .training import TrainConfig

#: Longest season for which ``scaler="auto"`` scales a panel's series by MASE's own scale
#: (``seasonal_naive``): on the quarterly panels of the M3 and tourism competitions it beat
#: ``standard`` by 3.8 % and 4.2 %, on M1's it was level; on the monthly panels it lost
#: 2.6 % (M3) and 0.4 % (M1) and was level on tourism's (docs/mcomp.md).
SHORT_SEASON = 4

#: Bounds of ``window="auto"`` (2 seasons): no fewer input steps than this ...
MIN_AUTO_WINDOW = 8
#: ... and no more (one year of weekly data; longer seasons get this many steps). On the
#: weekly CO2 record 52 steps scored as 104 did (test MASE 0.270 vs 0.273) in less time.
MAX_AUTO_WINDOW = 52
#: ``window="auto"`` without a season (season 1).
NO_SEASON_WINDOW = 10

#: ``season_window="auto"`` for a panel: each series' seasonal pattern is fitted on its last
#: 10 seasons of training rows. On the global model (3 seeds) it lowered tourism's mean MASE
#: from 1.605 to 1.453 (monthly) and from 1.591 to 1.471 (quarterly), whose seasons drifted
#: over up to 25 years, and left M1's and M3's within 0.3 % (docs/mcomp.md); one series
#: keeps every row.
PANEL_SEASON_WINDOW = 10

#: What the budget's ``"auto"`` starts from: the fixed defaults older versions had.
BASE_EPOCHS, BASE_BATCH_SIZE, BASE_PATIENCE = 60, 32, 15
#: The smallest batch ``batch_size="auto"`` lowers to.
MIN_AUTO_BATCH = 8

# --------------------------------------------------------------------------- the data's


def season_of_freq(freq: str | None) -> int:
    """``season="auto"``: the usual season of a time step given as a pandas offset alias
    (``Series.freq``).

    12 for months (``"MS"``, ``"ME"``), 4 for quarters, 52 for weeks (``"7D"``, ``"W-SUN"``),
    7 for days, 5 for business days, 24 for hours; 1 for years, whole-number stamps, other
    steps (multiples of a month divide 12: two-monthly data gets 6) and None.

    Example:
        >>> season_of_freq("MS"), season_of_freq("7D"), season_of_freq("YS"), season_of_freq(None)
        (12, 52, 1, 1)
        >>> season_of_freq("QS"), season_of_freq("D"), season_of_freq("h"), season_of_freq("1")
        (4, 7, 24, 1)
    """
    import pandas as pd  # only where a time step is read: the settings import without it

    if freq is None or freq.lstrip("-").isdigit():  # no stamps, or whole-number stamps
        return 1
    try:
        offset = pd.tseries.frequencies.to_offset(freq)
    except ValueError:
        return 1
    code = offset.rule_code.split("-")[0].upper()
    n = abs(int(offset.n))
    months = {"MS": 1, "ME": 1, "M": 1, "BMS": 1, "BME": 1, "BM": 1, "QS": 3, "QE": 3, "Q": 3,
              "BQS": 3, "BQE": 3, "BQ": 3}  # fmt: skip
    if code in months:
        step = months[code] * n
        return 12 // step if step < 12 and 12 % step == 0 else 1
    if code == "W":
        return 52 if n == 1 else 1
    if code == "B":
        return 5 if n == 1 else 1
    try:
        delta = pd.Timedelta(offset)
    except ValueError:  # years and other calendar steps
        return 1
    return {pd.Timedelta(days=7): 52, pd.Timedelta(days=1): 7, pd.Timedelta(hours=1): 24}.get(
        delta, 1
    )


def window_for_season(season: int) -> int:
    """``window="auto"``: 2 seasons, clipped to ``[MIN_AUTO_WINDOW, MAX_AUTO_WINDOW]``;
    :data:`NO_SEASON_WINDOW` for season 1.

    Example:
        >>> [window_for_season(s) for s in (12, 4, 52, 1)]
        [24, 8, 52, 10]
    """
    if season < 2:
        return NO_SEASON_WINDOW
    return int(min(max(2 * season, MIN_AUTO_WINDOW), MAX_AUTO_WINDOW))


def padding_of(cfg: DataConfig) -> bool:
    """Whether windows may start before their series' first row: ``start_padding`` given,
    or for ``"auto"`` whether the data is a panel (``id_column``)."""
    if cfg.start_padding == AUTO:
        return cfg.id_column is not None
    return cfg.start_padding == "repeat"


def season_window_of(cfg: DataConfig) -> int | None:
    """The seasons each series' pattern is fitted on: ``season_window`` given (None: every
    training row), or for ``"auto"`` :data:`PANEL_SEASON_WINDOW` for a panel
    (``id_column``) and None for one series."""
    if cfg.season_window == AUTO:
        return PANEL_SEASON_WINDOW if cfg.id_column is not None else None
    return cfg.season_window  # type: ignore[return-value]


def scaler_of(cfg: DataConfig) -> str:
    """The scaler fitted: ``scaler`` given, or for ``"auto"`` (the season resolved) MASE's
    own scale for a panel whose season is short (``"naive"`` for season 1,
    ``"seasonal_naive"`` for seasons 2 to :data:`SHORT_SEASON`), ``"standard"`` otherwise."""
    if cfg.scaler != AUTO:
        return cfg.scaler
    if cfg.id_column is None or cfg.season == AUTO or int(cfg.season) > SHORT_SEASON:
        return "standard"
    return "naive" if cfg.season == 1 else "seasonal_naive"


def transform_of(cfg: DataConfig) -> str:
    """The target transform: ``target_transform`` given, or for ``"seasonal_panel"`` (the
    season resolved) ``"per_series"`` for a panel whose season is at least 2, else
    ``"none"``. (``"auto"`` needs the data: :func:`stacklstm.train.resolve.prepare_resolved`.)"""
    if cfg.target_transform != "seasonal_panel":
        return cfg.target_transform
    seasonal = cfg.season != AUTO and int(cfg.season) >= 2
    return "per_series" if cfg.id_column is not None and seasonal else "none"


def resolve_data_config(cfg: DataConfig, freq: str | None) -> DataConfig:
    """``cfg`` with ``season``, ``window``, ``start_padding``, ``season_window`` and
    ``scaler`` given as ``"auto"`` (and ``target_transform`` given as ``"seasonal_panel"``)
    replaced by their values for data whose time step is ``freq``; ``cfg`` itself when
    nothing is auto.

    Example:
        >>> from stacklstm.config import DataConfig
        >>> resolve_data_config(DataConfig(season=4, window=5), "MS").window
        5
        >>> resolve_data_config(DataConfig(id_column="id"), "QS").scaler
        'seasonal_naive'
    """
    changes: dict[str, int | str | None] = {}
    season = cfg.season
    if season == AUTO:
        season = changes["season"] = season_of_freq(freq)
    if cfg.window == AUTO:
        changes["window"] = window_for_season(int(season))
    if cfg.start_padding == AUTO:
        changes["start_padding"] = "repeat" if padding_of(cfg) else "none"
    if cfg.season_window == AUTO:
        changes["season_window"] = season_window_of(cfg)
    seasoned = dataclasses.replace(cfg, season=season)
    if cfg.scaler == AUTO:
        changes["scaler"] = scaler_of(seasoned)
    if cfg.target_transform == "seasonal_panel":
        changes["target_transform"] = transform_of(seasoned)
    return dataclasses.replace(cfg, **changes) if changes else cfg


# --------------------------------------------------------------------------- the training's


def auto_batch_size(n_windows: int) -> int:
    """``batch_size="auto"`` for ``n_windows`` training windows (at least 1)."""
    return max(1, min(BASE_BATCH_SIZE, max(MIN_AUTO_BATCH, n_windows // 8), n_windows))


def resolve_train_config(tcfg: TrainConfig, n_windows: int, multiple: int = 1) -> TrainConfig:
    """``tcfg`` with its ``"auto"`` budget (``batch_size``, ``epochs``, ``patience``)
    resolved for ``n_windows`` training windows.

    Args:
        tcfg: The training settings.
        n_windows: Training windows.
        multiple: An automatic batch size is rounded up to a multiple of this (the number
            of devices the batch is sharded over).

    Returns:
        ``tcfg`` itself when nothing is ``"auto"``, else a copy with integers in place.
    """
    changes: dict[str, int] = {}
    batch = tcfg.batch_size
    if batch == AUTO:
        batch = auto_batch_size(n_windows)
        batch = changes["batch_size"] = -(-batch // multiple) * multiple
    epochs = tcfg.epochs
    if epochs == AUTO:
        per_epoch = n_windows // int(batch)  # full batches only, as training draws them
        epochs = BASE_EPOCHS
        if per_epoch and tcfg.min_steps > BASE_EPOCHS * per_epoch:
            epochs = math.ceil(tcfg.min_steps / per_epoch)
        changes["epochs"] = epochs
    if tcfg.patience == AUTO:
        factor = epochs / BASE_EPOCHS if tcfg.epochs == AUTO else 1.0
        changes["patience"] = math.ceil(BASE_PATIENCE * factor)
    return dataclasses.replace(tcfg, **changes) if changes else tcfg


def retrain_of(retrain: str, n_val_windows: int) -> str:
    """``retrain="auto"``: ``"all"`` where the splits give validation windows to choose the
    epochs on (one series or a panel), else ``"off"``; other values as given."""
    if retrain == AUTO:
        return "all" if n_val_windows else "off"
    return retrain


def fold_retrain_of(retrain: str, panel: bool, n_val_rows: int) -> str:
    """A backtest fold's ``retrain``: never on the rows after its cut-off, which it is
    scored on. ``"all"`` becomes ``"on"`` (every row up to the cut-off), and ``"auto"`` is
    ``"on"`` for a panel with validation rows, else ``"off"``, as a backtest always trained.

    Example:
        >>> fold_retrain_of("all", False, 0), fold_retrain_of("auto", True, 6)
        ('on', 'on')
        >>> fold_retrain_of("auto", False, 6), fold_retrain_of("off", True, 6)
        ('off', 'off')
    """
    if retrain == "all" or (retrain == AUTO and panel and n_val_rows):
        return "on"
    return "off" if retrain == AUTO else retrain


def loss_weight_of(tcfg: TrainConfig, dcfg: DataConfig, n_series: int) -> str:
    """``loss_weight="auto"``: ``"mase"`` for a panel (``n_series`` > 1) trained with the
    squared error whose scaler is not already MASE's own (:attr:`DataConfig.mase_scaled
    <stacklstm.config.DataConfig.mase_scaled>`: every series' weight would be 1), else
    ``"none"``; other values as given."""
    if tcfg.loss_weight != AUTO:
        return tcfg.loss_weight
    return "mase" if n_series > 1 and tcfg.loss == "mse" and not dcfg.mase_scaled else "none"


__all__ = [
    "BASE_BATCH_SIZE",
    "BASE_EPOCHS",
    "BASE_PATIENCE",
    "MAX_AUTO_WINDOW",
    "MIN_AUTO_BATCH",
    "MIN_AUTO_WINDOW",
    "NO_SEASON_WINDOW",
    "PANEL_SEASON_WINDOW",
    "SHORT_SEASON",
    "auto_batch_size",
    "fold_retrain_of",
    "loss_weight_of",
    "padding_of",
    "resolve_data_config",
    "resolve_train_config",
    "retrain_of",
    "scaler_of",
    "season_of_freq",
    "season_window_of",
    "transform_of",
    "window_for_season",
]
