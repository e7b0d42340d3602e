"""The ``[data]`` section: how a table becomes windows, and what the series is."""

# The fields' `setting(default, help=...)` returns an immutable dataclasses.field.

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import get_args

from ..checks import (
    SettingError,
    SettingTypeError,
    check_bool,
    check_choice,
    check_fraction,
    check_int,
    check_names,
    check_positive_int,
)
from ..scalers import SCALERS, scaler_help
from ..transforms import RULES, TRANSFORMS, transform_help
from .auto import padding_of, scaler_of, season_window_of, transform_of
from .schema import (
    AUTO,
    CALENDAR_PREFIX,
    Auto,
    CalendarKind,
    GapPolicy,
    NormalizeKind,
    PaddingKind,
    ScalerKind,
    ScalerSetting,
    TargetTransform,
    _Section,
    setting,
)


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
        0.15,
        help="share of the rows (the latest before test) for validation, in [0, 1); at least "
        "`horizon` rows unless 0",
    )
    test_fraction: float = setting(
        0.15, help="share of the rows (the latest) for test, in [0, 1); at least `horizon` rows"
    )
    scaler: ScalerSetting = setting(
        "auto",
        help=scaler_help(),
    )
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
    season_test: bool = setting(
        False,
        help="deseasonalise only the series whose season is significant (the autocorrelation "
        "at lag `season` of its training rows, the one-sided 90-percent test of the Theta "
        "method and of the M4 benchmarks; at least 3 seasons of rows), not the others; off "
        "by default (better on M3 monthly, worse on M1: docs/mcomp.md)",
        legacy=False,
    )
    season_window: int | Auto | None = setting(
        "auto",
        help="fit each series' seasonal pattern on its last `season_window` seasons of "
        "training rows only (at least 2), so that a pattern that drifted over the years is "
        "the recent one; 'none': every training row; 'auto': 10 seasons for a panel, every "
        "row for one series",
        legacy=None,
    )
    target_transform: TargetTransform = setting(
        "seasonal_panel",
        help=transform_help(),
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

    start_padding: PaddingKind = setting(
        "auto",
        help="'repeat': windows may start before a series' first row, the missing inputs "
        "repeating its first value (in model space), so a series shorter than `window` is "
        "trained on and forecast by the model (it needs `horizon` + 1 training rows; a panel's "
        "series too short for those and its validation rows trains on both); 'none': "
        "such a series is skipped and gets the fallback forecast; 'auto': repeat for a panel "
        "(id_column), none for one series",
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
    def input_steps(self) -> int:
        """Rows one input window reads: ``window``, plus the row before it with ``difference``
        (to difference its first step). Needs a resolved ``window``.

        Example:
            >>> DataConfig(window=8, difference=True).input_steps
            9
        """
        return int(self.window) + int(self.difference)

    @property
    def scaler_kind(self) -> ScalerKind:
        """The scaler fitted (``scaler``; ``"auto"``, the season resolved: for a panel, MASE's
        own scale where the season is short, ``"naive"`` for season 1 and ``"seasonal_naive"``
        for seasons 2 to :data:`~stacklstm.config.auto.SHORT_SEASON` (quarters);
        ``"standard"`` otherwise).

        Example:
            >>> DataConfig(season=1).scaler_kind, DataConfig(season=1, id_column="id").scaler_kind
            ('standard', 'naive')
            >>> DataConfig(season=4, id_column="id").scaler_kind
            'seasonal_naive'
            >>> DataConfig(season=12, id_column="id").scaler_kind
            'standard'
        """
        return scaler_of(self)  # the rule of "auto": stacklstm.config.auto

    @property
    def mase_scaled(self) -> bool:
        """Whether the scaler divides each series by MASE's own scale, its mean absolute change
        over one season: ``seasonal_naive``, or ``naive`` without a season (season 1, where a
        change over one row is a season's). ``naive`` with a season is not.

        Example:
            >>> DataConfig(scaler="naive", season=1).mase_scaled
            True
            >>> DataConfig(scaler="naive", season=4).mase_scaled
            False
            >>> DataConfig(season=4, id_column="id").mase_scaled  # auto: seasonal_naive
            True
        """
        kind = self.scaler_kind
        return kind == "seasonal_naive" or (kind == "naive" and self.season == 1)

    @property
    def transform_kind(self) -> str:
        """The target transform applied (``target_transform``; ``"seasonal_panel"``:
        ``"per_series"`` for a panel whose season is at least 2, ``"none"`` otherwise, the
        season resolved).

        Example:
            >>> DataConfig(season=12).transform_kind
            'none'
            >>> DataConfig(season=12, id_column="id").transform_kind
            'per_series'
            >>> DataConfig(season=1, id_column="id").transform_kind
            'none'
        """
        return transform_of(self)  # the rule of "seasonal_panel": stacklstm.config.auto

    @property
    def padded(self) -> bool:
        """Whether windows may start before their series' first row (``start_padding``;
        ``"auto"``: for a panel).

        Example:
            >>> DataConfig().padded, DataConfig(id_column="unique_id").padded
            (False, True)
        """
        return padding_of(self)  # the rule of "auto": stacklstm.config.auto

    @property
    def seasons_fitted(self) -> int | None:
        """The seasons of training rows each series' seasonal pattern is fitted on
        (``season_window``; ``"auto"``: :data:`~stacklstm.config.auto.PANEL_SEASON_WINDOW`
        for a panel), or None for every training row.

        Example:
            >>> DataConfig().seasons_fitted, DataConfig(id_column="unique_id").seasons_fitted
            (None, 10)
            >>> DataConfig(season_window=6).seasons_fitted
            6
        """
        return season_window_of(self)  # the rule of "auto": stacklstm.config.auto

    @property
    def min_input_rows(self) -> int:
        """The fewest rows of a series before a window's origin (inclusive) that one window
        needs: ``input_steps``, or with :attr:`padded` one row (two with ``difference``).

        Example:
            >>> padded = DataConfig(window=8, start_padding="repeat")
            >>> DataConfig(window=8).min_input_rows, padded.min_input_rows
            (8, 1)
        """
        return 1 + int(self.difference) if self.padded else self.input_steps

    @property
    def window_rows(self) -> int:
        """The fewest rows one training window spans, inputs and targets:
        ``min_input_rows + horizon`` (``window + horizon`` without padding).

        Example:
            >>> DataConfig(window=8, horizon=3).window_rows
            11
        """
        return self.min_input_rows + self.horizon

    @property
    def has_covariates(self) -> bool:
        """Whether the model needs known-future or static inputs (a ``Forecaster``)."""
        return bool(self.future_features or self.static_features or self.calendar != "none")

    def _check(self) -> None:
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
        check_choice("scaler", self.scaler, ("auto", *SCALERS))
        check_choice("normalize", self.normalize, get_args(NormalizeKind))
        check_choice("start_padding", self.start_padding, get_args(PaddingKind))
        check_choice("gaps", self.gaps, get_args(GapPolicy))
        check_bool("difference", self.difference)
        if self.season != AUTO:  # larger ones overflow the indexing
            check_int("season", self.season, 1, 2**31 - 1)
        check_bool("deseasonalize", self.deseasonalize)
        check_bool("season_test", self.season_test)
        if self.season_window not in (None, AUTO):
            check_int("season_window", self.season_window, 2, 2**20)
        check_choice("target_transform", self.target_transform, (*RULES, *TRANSFORMS))
