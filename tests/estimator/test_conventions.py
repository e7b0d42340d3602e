"""LSTMForecaster speaks Nixtla's language: ``h``, levels in percent, ``X_df``, polars in and
out, ids in their dtype and order, near names for unknown keywords, no statistical baselines
unless a report is asked for, and no warning of the package's own."""

import logging
import warnings

import numpy as np
import pandas as pd
import pytest

from helpers import TINY, _panel
from stacklstm.estimator import LSTMForecaster
from stacklstm.estimator.progress import progress_logs
from stacklstm.estimator.settings import levels_as_fractions, suggestion

# the settings of TINY but the baselines: fit decides them
SETTINGS = {k: v for k, v in TINY.items() if k != "baselines"}


@pytest.fixture(scope="module")
def fitted():
    return LSTMForecaster(**SETTINGS, conformal=True, level=[80]).fit(_panel())


def test_fit_scores_only_the_naive_baselines_unless_a_report_is_asked(fitted):
    assert fitted.config.train.baselines == "naive"
    assert set(fitted.report_.data["test"]) == {
        "model",
        "last_value",
        "seasonal_naive",
        "combination",
    }
    asked = LSTMForecaster(**SETTINGS, baselines="naive")._base_config(
        time=True, ids=True, statics=(), report=True
    )
    assert asked.train.baselines == "naive"  # a setting given wins
    reported = LSTMForecaster(**SETTINGS)._base_config(time=True, ids=True, statics=(), report=True)
    assert reported.train.baselines != "naive" or not _statsforecast()


def _statsforecast():
    try:
        import statsforecast  # noqa: F401
    except ImportError:
        return False
    return True


def test_the_model_that_forecasts_trained_on_every_row(fitted):
    assert fitted.config.train.retrain == "all"
    assert fitted.report_.data["retrain"]["rows"] == "all"
    assert (fitted.run_dir / "selection" / "config.json").is_file()


def test_intervals_calibrated_again_come_from_the_selection_as_the_kept_ones(fitted, tmp_path):
    # a copy of the run without its calibration.json calibrates again on the validation
    # windows, with the selection's model (the saved one trained on them): the same offsets
    import shutil

    copy = tmp_path / "run"
    shutil.copytree(fitted.run_dir, copy)
    (copy / "calibration.json").unlink()
    again = LSTMForecaster.load(copy).predict(level=[80])
    pd.testing.assert_frame_equal(again, fitted.predict(level=[80]), rtol=1e-12)


def test_h_gives_the_first_steps_of_the_horizon(fitted):
    whole = fitted.predict()
    first = fitted.predict(h=2)
    expected = whole.groupby("unique_id", sort=False).head(2).reset_index(drop=True)
    pd.testing.assert_frame_equal(first, expected)
    for bad in (0, 4, 1.5, True):
        with pytest.raises(ValueError, match=r"h must be an integer in 1\.\.3"):
            fitted.predict(h=bad)


def test_levels_are_percent_at_fit_and_predict(fitted):
    assert fitted.config.train.interval_levels == (0.8,)
    out = fitted.predict(level=[80])
    assert (out["stacklstm-lo-80"] < out["stacklstm"]).all()
    assert (out["stacklstm"] < out["stacklstm-hi-80"]).all()
    assert levels_as_fractions([95, 80, 95]) == (0.8, 0.95)
    pd.testing.assert_frame_equal(fitted.predict(level=[80, 80.0]), out)  # once each
    with pytest.raises(TypeError, match=r"level=\[80, 95\] instead of interval_levels"):
        LSTMForecaster(interval_levels=(0.8,))
    with pytest.raises(ValueError, match=r"percentages in \(1, 100\), such as \[80, 95\]"):
        LSTMForecaster(level=[0.8])


def test_an_unknown_keyword_names_the_near_one():
    with pytest.raises(TypeError, match=r"'h' \(did you mean 'horizon'\?\)"):
        LSTMForecaster(h=7)
    with pytest.raises(TypeError, match=r"'input_size' \(did you mean 'window'\?\)"):
        LSTMForecaster(input_size=28)
    assert suggestion("lstm_hiden_size") == " (did you mean 'lstm_hidden_size'?)"
    assert suggestion("zzz") == ""


def test_x_df_is_futr_dfs_other_name(fitted):
    with pytest.raises(TypeError, match="two names of one argument"):
        fitted.predict(futr_df=_panel(), X_df=_panel())


def test_ids_keep_their_dtype_and_the_frames_order():
    df = _panel(ids=tuple(range(12)), n=40)
    df["unique_id"] = df["unique_id"].astype("category")
    df = df.sample(frac=1.0, random_state=0)  # ids in the order of first mention
    settings = {**SETTINGS, "test_size": 0, "val_size": 6}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no FutureWarning from the package's pandas calls
        out = LSTMForecaster(**settings).fit(df).predict()
    assert out["unique_id"].dtype == df["unique_id"].dtype  # categorical, int64 categories
    # as the frame names them, never the text order 0, 1, 10, 11, 2, ...
    assert out["unique_id"].drop_duplicates().tolist() == pd.unique(df["unique_id"]).tolist()


def test_a_polars_frame_in_gives_a_polars_frame_out(fitted):
    polars = pytest.importorskip("polars")
    out = fitted.predict(df=polars.from_pandas(_panel()))
    assert isinstance(out, polars.DataFrame)
    pd.testing.assert_frame_equal(out.to_pandas(), fitted.predict(df=_panel()))
    again = LSTMForecaster(**SETTINGS, conformal=True, level=[80])
    pd.testing.assert_frame_equal(
        again.fit(polars.from_pandas(_panel())).predict(), fitted.predict()
    )


def test_verbose_logs_each_epoch_and_nothing_about_intervals_not_asked(capsys, caplog):
    with caplog.at_level(logging.WARNING, logger="stacklstm"):
        LSTMForecaster(**SETTINGS, verbose=True).fit(_panel())
    assert not [r for r in caplog.records if "conformal" in r.getMessage()]
    err = capsys.readouterr().err
    epochs = [line for line in err.splitlines() if "epoch" in line and "train loss" in line]
    assert len(epochs) == 2 + 2  # the selection's two epochs, then the final run's
    assert "conformal" not in err
    with progress_logs(False):  # quiet by default: no handler of the package's
        assert not logging.getLogger("stacklstm").handlers
    with pytest.raises(TypeError, match="verbose must be True or False"):
        LSTMForecaster(verbose="yes")


def test_the_future_follows_each_series_last_stamp(fitted):
    out = fitted.predict()
    last = _panel()["ds"].max()
    assert out["ds"].min() == last + pd.Timedelta(days=1)
    assert out.groupby("unique_id")["ds"].apply(list).map(len).eq(3).all()
    assert np.isfinite(out["stacklstm"]).all()


def test_utilsforecasts_plot_series_draws_the_forecast_and_its_fan(fitted):
    pytest.importorskip("utilsforecast")
    from utilsforecast.plotting import plot_series

    out = fitted.predict(level=[80])
    fig = plot_series(_panel(), out, level=[80], engine="matplotlib")
    axes = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in axes] == ["unique_id=a", "unique_id=b", "unique_id=c"]
    for ax, (_, mine) in zip(axes, out.groupby("unique_id", sort=False), strict=True):
        (line,) = [line for line in ax.get_lines() if line.get_label() == "stacklstm"]
        y = np.asarray(line.get_ydata(), float)  # NaN over the history, then the forecast
        np.testing.assert_allclose(y[~np.isnan(y)], mine["stacklstm"], rtol=1e-12)


def test_a_series_the_model_never_saw_is_forecast_by_it_with_unseen_model(fitted):
    panel = _panel()
    copy = panel[panel["unique_id"] == "a"].assign(unique_id="new")  # a, under a new name
    both = pd.concat([panel, copy], ignore_index=True)
    out = fitted.predict(both, level=[80], unseen="model")
    rows = {
        k: g.drop(columns="unique_id").reset_index(drop=True) for k, g in out.groupby("unique_id")
    }
    assert list(out["unique_id"].unique()) == ["a", "b", "c", "new"]  # the frame's order
    pd.testing.assert_frame_equal(rows["new"], rows["a"])  # scaled on every row, as a was
    default = fitted.predict(both)
    assert default.loc[default["unique_id"] == "new", "forecaster"].eq("seasonal_naive").all()
