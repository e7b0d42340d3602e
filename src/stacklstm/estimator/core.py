""":class:`LSTMForecaster`: fit, predict and cross-validate from pandas DataFrames in the long
format of statsforecast and neuralforecast (``unique_id, ds, y`` and covariate columns).

It trains and forecasts through the same calls as the command line: the frame, cut to the
run's columns, is written as a Parquet table and handed to :func:`stacklstm.run.fit` and
:func:`stacklstm.forecasting.predict` (``format="long"``,
:func:`stacklstm.forecasting.prediction.to_long`), so its run folder is an ordinary one
that ``stacklstm evaluate``, ``predict`` and ``export`` read, and
:meth:`LSTMForecaster.load` loads a folder the command line trained.

Where the files go: the run folder holds its training table as ``data.parquet``, and its
``config.json`` names the table relative to the folder, so the folder is self-contained:
``stacklstm evaluate/predict/export`` read it without ``--data``, and it can be moved or
copied. Without ``run_dir`` the run folder is ``run/`` in a temporary folder, removed when
the estimator is garbage collected or at exit; with ``run_dir`` it is ``run_dir``, kept.
:meth:`~LSTMForecaster.save` copies the run folder, table included.
"""

from __future__ import annotations

import shutil
import tempfile
import weakref
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

import pandas as pd

from ..config import RunConfig
from ..config.presets import with_preset
from ..forecasting.inference import table_path
from ..forecasting.prediction import predict, to_long
from ..run.loop import fit
from ..rundir.info import read_run_info
from ..train.trainer import intermediate_checkpoints
from .crossval import cross_validate
from .frames import (
    as_pandas,
    check_frame,
    check_name,
    is_polars,
    merge_statics,
    run_columns,
    statics_of,
    to_polars,
    write_table,
)
from .output import check_h, history_table, in_frame_order, user_frame
from .pickling import TABLE_FILE, SaveLoad
from .pretrained import PretrainedForecaster
from .progress import progress_logs
from .settings import levels_as_fractions, section_overrides
from .staging import check_target, staged


class LSTMForecaster(SaveLoad):
    """A stacked-LSTM forecaster with the conventions of statsforecast and neuralforecast.

    ``fit(df)`` trains the model that forecasts on every row of every series (the epochs
    chosen first on a validation tail, ``retrain="all"``), and ``predict()`` gives the
    future: ``h`` rows per series after its last row. Measuring is
    :meth:`cross_validation`'s job (and ``report=True``'s, which also scores the
    statistical baselines on held-out rows).

    Frames may be pandas or polars (converted through pyarrow); the output is of the same
    kind, ids keep their dtype and the order in which the frame first names them.

    Args:
        alias: Name of the forecast column (and the prefix of its interval columns).
        id_col: Column naming the series (absent from a frame of one series).
        time_col: Column of time stamps (absent: the row order, and whole-number steps).
        target_col: Column to forecast.
        run_dir: Where to keep the run folder, its table inside as ``data.parquet`` (absent
            or empty; None: a temporary folder, removed at exit).
        level: Interval levels in percent (``[80, 95]``, as statsforecast's), learnt with a
            quantile or distribution ``loss`` or calibrated with ``conformal=True`` (the
            run's ``interval_levels``; default: 80 and 95).
        verbose: Log the run's progress on stderr (one line per epoch, and a progress bar
            where stderr is a terminal or a notebook).
        preset: A named bundle of settings (:mod:`stacklstm.config.presets`), under those
            given here: ``"accurate"`` combines the model with AutoETS, AutoARIMA and
            AutoTheta by their median (read with ``predict(combine=True)``).
        **settings: The settings of ``stacklstm train`` under their config names
            (``horizon``, ``window``, ``season``, ``lstm_hidden_size``, ``epochs``, ``loss``,
            ``conformal``, ``features``, ``future_features``, ``static_features``, ``seed``,
            ...); the defaults are the command line's, but ``baselines`` (see :meth:`fit`).

    Raises:
        TypeError: An unknown keyword (the message suggests the near name, ``h`` ->
            ``horizon``, and lists the accepted ones), a setting that comes from a column
            argument (``target``), or a column name that is no text.
        ValueError: A bad setting (:class:`~stacklstm.checks.SettingError`).

    Example:
        >>> model = LSTMForecaster(horizon=7, window=28, epochs=5)  # doctest: +SKIP
        >>> model.fit(df).predict(level=[80]).columns.tolist()  # doctest: +SKIP
        ['unique_id', 'ds', 'stacklstm', 'stacklstm-lo-80', 'stacklstm-hi-80']
    """

    def __init__(
        self,
        *,
        alias: str = "stacklstm",
        id_col: str = "unique_id",
        time_col: str = "ds",
        target_col: str = "y",
        run_dir: str | Path | None = None,
        level: Sequence[float] | None = None,
        verbose: bool = False,
        preset: str | None = None,
        **settings: Any,
    ) -> None:
        self.alias = check_name("alias", alias)
        self.id_col = check_name("id_col", id_col)
        self.time_col = check_name("time_col", time_col)
        self.target_col = check_name("target_col", target_col)
        taken = {
            id_col: "id_col",
            time_col: "time_col",
            target_col: "target_col",
            "cutoff": "cross_validation's cutoff column",
        }
        if alias in taken:
            raise ValueError(
                f"alias {alias!r} is also {taken[alias]}: the forecast column would clash "
                "with it; choose another alias"
            )
        # a column named other than the default must be in the frame (a missing time column
        # would otherwise train on the row order)
        defaults = {id_col: "unique_id", time_col: "ds"}
        self._named = {name for name, default in defaults.items() if name != default}
        if not isinstance(verbose, bool):
            raise TypeError(f"verbose must be True or False, got {verbose!r}")
        self.verbose = verbose
        self.settings = dict(settings)
        self.preset = preset
        self._overrides = with_preset(preset, section_overrides(settings))
        if level is not None:
            self.settings["level"] = list(level)
            self._overrides["train"]["interval_levels"] = levels_as_fractions(level)
        #: The run's report (:class:`~stacklstm.report.Report`) after ``fit(df, report=True)``.
        self.report_: Any = None
        self._out_dir = None if run_dir is None else Path(run_dir)
        self._base_config(time=True, ids=True, statics=())  # a bad setting: refused now
        self._run_dir: Path | None = None
        self._table: Path | None = None  # None: the run's own table (config.json's)
        self._info: Any = None
        self._cleanup: weakref.finalize | None = None
        self._id_values: dict[str, Any] = {}
        self._id_dtype: Any = None
        self._time_dtype: Any = None
        self._statics: pd.DataFrame | None = None

    @classmethod
    def pretrained(
        cls,
        *,
        alias: str = "stacklstm",
        id_col: str = "unique_id",
        time_col: str = "ds",
        target_col: str = "y",
        freq: str | None = None,
    ) -> PretrainedForecaster:
        """The pretrained model of the data's frequency family, forecasting any series
        without training: ``LSTMForecaster.pretrained().predict(df, h=12, level=[80])``
        (:class:`~stacklstm.estimator.pretrained.PretrainedForecaster`,
        :mod:`stacklstm.pretrained`)."""
        return PretrainedForecaster(
            alias=alias, id_col=id_col, time_col=time_col, target_col=target_col, freq=freq
        )

    # ------------------------------------------------------------------ settings and state

    def _base_config(
        self, *, time: bool, ids: bool, statics: Sequence[str], report: bool = False
    ) -> RunConfig:
        """The run's settings for a frame with (or without) a time and an id column; the
        statistical baselines only for a ``report`` (unless ``baselines`` is given)."""
        data = {
            "target": (self.target_col,),
            "time_column": self.time_col if time else None,
            "id_column": self.id_col if ids else None,
        }
        if statics and "static_features" not in self._overrides["data"]:
            data["static_features"] = tuple(statics)
        train = dict(self._overrides["train"])
        if not report:
            train.setdefault("baselines", "naive")
        overrides = {**self._overrides, "data": {**self._overrides["data"], **data}, "train": train}
        return RunConfig().replace(overrides)

    @property
    def run_dir(self) -> Path:
        """The run folder (``stacklstm evaluate/predict/export`` read it).

        Raises:
            ValueError: Not fitted yet.
        """
        if self._run_dir is None:
            raise ValueError("the LSTMForecaster is not fitted yet: call fit(df) or load(path)")
        return self._run_dir

    @property
    def config(self) -> RunConfig:
        """The run's settings with every ``"auto"`` resolved (its ``config.json``)."""
        self.run_dir  # noqa: B018  (refuses an unfitted estimator)
        return self._info.config

    def _release(self) -> None:
        """Remove the temporary folder of the previous fit, if any."""
        if self._cleanup is not None:
            self._cleanup()
            self._cleanup = None
        self._run_dir = self._table = self._info = None
        self._id_values, self._id_dtype, self._time_dtype, self._statics = {}, None, None, None

    def _adopt(self, run_dir: Path, table: Path | None) -> None:
        """Point at a run folder and its table; read its settings and series names."""
        self._run_dir, self._table = run_dir, table
        self._info = read_run_info(run_dir)
        data = self._info.config.data
        if len(data.target) != 1:
            raise ValueError(
                f"{run_dir} forecasts {len(data.target)} targets ({', '.join(data.target)}); "
                "LSTMForecaster forecasts one target_col: use stacklstm.forecasting.predict"
            )

    # ------------------------------------------------------------------ fit

    def _run_frame(
        self, df: pd.DataFrame, static_df: pd.DataFrame | None, report: bool = False
    ) -> tuple[pd.DataFrame, RunConfig]:
        """``(the table the run reads, its settings)`` of a user's frame."""
        df = check_frame(as_pandas(df, "df"), "df", (self.target_col, *sorted(self._named)))
        static_df = None if static_df is None else as_pandas(static_df, "static_df")
        ids = self.id_col in df.columns
        df, statics = merge_statics(df, static_df, self.id_col if ids else None)
        cfg = self._base_config(
            time=self.time_col in df.columns, ids=ids, statics=statics, report=report
        )
        needed = run_columns(cfg.data)
        check_frame(df, "df", needed)
        return df[needed].reset_index(drop=True), cfg

    def fit(self, df: Any, static_df: Any = None, *, report: bool = False) -> LSTMForecaster:
        """Train on ``df``: one series (no ``id_col``) or a panel (``id_col`` becomes the run's
        ``id_column``), with the covariate columns its settings name.

        The model that forecasts trains on every row: the epochs are chosen on a validation
        tail first (that run is kept in the run folder's ``selection/``), then a fresh model
        is trained on all rows for them (``retrain="all"``, the default where a series is
        long enough for validation windows).

        Args:
            df: ``(rows, columns)``: ``[id_col,] [time_col,] target_col`` and the columns of
                ``features``, ``future_features`` and ``static_features``; other columns are
                left out. Rows after a series' last target (target empty) are its future rows.
            static_df: One row per id (one row without ``id_col``): ``id_col`` and the static
                columns, merged into ``df``; they are the ``static_features`` unless those
                are given.
            report: Also score statsforecast's AutoETS, AutoARIMA and AutoTheta beside the
                model in the run's report (as ``stacklstm train`` does; slower), in
                :attr:`report_`. Without it the report scores the naive baselines only
                (unless ``baselines`` was given).

        Returns:
            ``self``, fitted.

        Raises:
            TypeError: ``df`` or ``static_df`` is not a DataFrame.
            ValueError: A missing column, a bad setting or data problem (``DataError``), or a
                ``run_dir`` that is not free.
        """
        if not isinstance(report, bool):
            raise TypeError(f"report must be True or False, got {report!r}")
        frame, cfg = self._run_frame(df, static_df, report)
        self._fit_run(frame, cfg)
        return self

    def _fit_run(self, frame: pd.DataFrame, cfg: RunConfig) -> LSTMForecaster:
        """Write ``frame`` (the run's columns) as the run's table and train on it.

        With ``run_dir``, the run is made in a private folder beside it and moved there when
        complete (:mod:`.staging`): an interrupted or failed fit leaves ``run_dir`` as it was,
        and two processes fitting into one ``run_dir`` never mix their files. A refused fit
        leaves a fitted estimator as it was.
        """
        if self._out_dir is None:
            self._release()
            workspace = Path(tempfile.mkdtemp(prefix="stacklstm-"))
            self._cleanup = weakref.finalize(self, shutil.rmtree, workspace, ignore_errors=True)
            try:
                result = self._train(frame, cfg, workspace / "run", temporary=True)
            except BaseException:
                self._release()
                raise
            self._adopt(workspace / "run", workspace / "run" / TABLE_FILE)
        else:
            target = check_target(
                self._out_dir,
                what="fit",
                hint="load the run in it with LSTMForecaster.load(path), or choose another run_dir",
            )
            with staged(target, what="fit") as work:
                result = self._train(frame, cfg, work, temporary=False)
            self._release()
            self._adopt(target, target / TABLE_FILE)
        self._remember(frame)
        self.report_ = result.report
        return self

    def _train(self, frame: pd.DataFrame, cfg: RunConfig, run_dir: Path, *, temporary: bool):
        """Train in the new folder ``run_dir``, which keeps its table inside (a movable
        folder); a temporary folder, gone at exit, is never resumed: checkpoints at the end
        only."""
        run_dir.mkdir(parents=True)
        table = run_dir / TABLE_FILE
        write_table(frame, table)
        with progress_logs(self.verbose), intermediate_checkpoints(not temporary):
            return fit(cfg, run_dir, quiet=not self.verbose, data_path=table)

    def _remember(self, frame: pd.DataFrame) -> None:
        """The id values as given (the run names series by their text) and the time dtype."""
        data = self._info.config.data
        if data.id_column is not None and data.id_column in frame.columns:
            column = frame[data.id_column]
            self._id_values = {str(v): v for v in pd.unique(column)}  # the frame's order
            self._id_dtype = column.dtype
        if data.time_column is not None and data.time_column in frame.columns:
            self._time_dtype = frame[data.time_column].dtype
        self._statics = statics_of(frame, data)

    # ------------------------------------------------------------------ predict

    def _user_frame(self, long: pd.DataFrame, level: Sequence[float] | None) -> pd.DataFrame:
        """The long frame under the estimator's column names, with the levels asked for."""
        names = (self.alias, self.id_col, self.time_col)
        return user_frame(long, level, names, self._id_values, self._time_dtype)

    def _forecast(
        self,
        table: pd.DataFrame | None,
        every_origin: bool = False,
        combine: bool = False,
        unseen: str = "fallback",
    ) -> pd.DataFrame:
        """The run's long forecasts of ``table`` (None: the run's own table)."""
        with tempfile.TemporaryDirectory(prefix="stacklstm-predict-") as scratch:
            path = self._table
            if table is not None:
                path = Path(scratch) / "table.parquet"
                write_table(table, path)
            if not every_origin:
                return predict(self.run_dir, path, format="long", combine=combine, unseen=unseen)
            wide = predict(self.run_dir, path, fallback=False)  # forecasts at the cut-offs only
        data = self._info.config.data
        return to_long(wide, data.target, data.horizon, wide.attrs["freq"], every_origin=True)

    def predict(
        self,
        df: Any = None,
        futr_df: Any = None,
        level: Sequence[float] | None = None,
        combine: bool = False,
        *,
        h: int | None = None,
        X_df: Any = None,
        unseen: Literal["fallback", "model"] = "fallback",
    ) -> Any:
        """Forecast the next ``h`` (default ``horizon``) steps after each series' last row.

        Args:
            df: The history to forecast from (None: the training frame), with the columns
                of :meth:`fit`; static columns it lacks come from the training frame.
            futr_df: The known-future covariates of the horizon: ``horizon`` rows per series
                with ``[id_col,] time_col`` and the ``future_features``.
            level: Interval levels in percent (``[80, 95]``), each among the model's (or
                with ``combine`` among the combination's: ``interval_levels``).
            combine: Also the report's combination of the model with the baselines
                (:mod:`stacklstm.combine`, the run's saved weights), as
                ``<alias>-combination``, with its split-conformal intervals
                (:mod:`stacklstm.forecasting.combination`) at the levels of ``level``.
            h: The first ``h`` steps of the horizon (``1 <= h <= horizon``; None: all).
            X_df: statsforecast's name of ``futr_df`` (give one of them).
            unseen: The series of ``df`` the model was not trained on: ``"fallback"`` (the
                seasonal naive forecast) or ``"model"`` (the model's, each series scaled on
                its own rows: :func:`stacklstm.forecasting.predict`).

        Returns:
            ``(n_series * h)`` rows (a polars frame for a polars ``df``): ``id_col`` (in its
            dtype, the series in the order the training frame named them), ``time_col`` (the
            steps' stamps, following the series' time step; whole-number steps without a
            time column), the
            forecast ``alias``, per level ``<alias>-lo-<level>``, ``<alias>-hi-<level>``,
            and with ``combine`` ``<alias>-combination`` and its
            ``<alias>-combination-lo-<level>``, ``<alias>-combination-hi-<level>``. Where a
            series is too short for one input window (or was left out of training), its
            rows hold the seasonal naive forecast instead, and a column ``forecaster``
            after ``time_col`` names each row's (``"model"`` or ``"seasonal_naive"``; no
            intervals on the fallback's rows).

        Raises:
            ValueError: Not fitted; a level the model has no interval for (trained without
                intervals, or at other levels); the data problems of
                :func:`stacklstm.forecasting.predict` (too few future rows, say).
        """
        self.run_dir  # noqa: B018  (refuses an unfitted estimator)
        if X_df is not None:
            if futr_df is not None:
                raise TypeError("futr_df and X_df are two names of one argument; give one")
            futr_df = X_df
        steps = check_h(h, self.config.data.horizon)
        polars = is_polars(df) or (df is None and is_polars(futr_df))
        df = None if df is None else as_pandas(df, "df")
        futr_df = None if futr_df is None else as_pandas(futr_df, "futr_df")
        table = None  # the training table
        if df is not None or futr_df is not None:  # the history given, and the future rows
            source = self._table or table_path(self._info, None)
            table = history_table(df, futr_df, self.config.data, source, self._statics)
        long = self._forecast(table, combine=bool(combine), unseen=unseen)
        out = self._user_frame(long, level)
        out = in_frame_order(out, self.id_col, self._id_values, self._id_dtype, steps)
        return to_polars(out) if polars else out

    # ------------------------------------------------------------------ cross-validation

    def cross_validation(
        self,
        df: pd.DataFrame,
        n_windows: int = 1,
        step_size: int = 1,
        refit: bool = False,
        static_df: pd.DataFrame | None = None,
    ) -> pd.DataFrame:
        """Forecasts from the cut-offs of statsforecast's ``cross_validation(df, h=horizon,
        n_windows, step_size)``, with the actual values: the same rows, so the two frames
        merge on ``id_col, time_col, cutoff``.

        The cut-offs of each series are its last ``n_windows`` rows spaced ``step_size``, the
        last one ``horizon`` rows before its end. ``refit=False`` trains this estimator once,
        on each series' rows up to its first cut-off, and forecasts from every cut-off with
        the rows up to it; ``refit=True`` trains it again for every window, on the rows up
        to that cut-off. These runs are the cross-validation's own, in temporary folders:
        the estimator is left as it was (its fitted model, ``run_dir`` and ``predict``
        unchanged, or still unfitted).

        Args:
            df: The frame of :meth:`fit`, sorted or not (ordered by series and time here).
            n_windows: Cut-offs per series.
            step_size: Rows between cut-offs.
            refit: Train once (False) or at every cut-off (True).
            static_df: As in :meth:`fit`.

        Returns:
            ``(n_series * n_windows * horizon)`` rows ``id_col, time_col, cutoff, target_col,
            alias``, ordered by series, cut-off and time.

        Raises:
            ValueError: A series too short for the windows, or for one input window up to
                its first cut-off (one row with padded windows, ``start_padding``); the
                errors of :meth:`fit`.
        """

        return cross_validate(self, df, n_windows, step_size, refit, static_df)

    def __repr__(self) -> str:
        given = {**({"preset": self.preset} if self.preset is not None else {}), **self.settings}
        shown = ", ".join(f"{key}={value!r}" for key, value in given.items())
        where = "not fitted" if self._run_dir is None else f"run_dir={str(self._run_dir)!r}"
        return f"LSTMForecaster({shown}{', ' if shown else ''}alias={self.alias!r}) [{where}]"
