"""The run folder's plots: what forecast.png and loss.png draw, read from the figures; a
torn metrics line is skipped and named, never a crash."""

import dataclasses
import json
import logging
import shutil
import warnings

import matplotlib.dates as mdates
import numpy as np
import pandas as pd
import pytest

from helpers import _main, _panel
from stacklstm.data import DataConfig, make_splits, prepare_series
from stacklstm.intervals import Forecast
from stacklstm.plots import loss as loss_plot
from stacklstm.plots.forecast import FutureForecast, forecast_figure, plot_forecast
from stacklstm.plots.loss import loss_figure, plot_loss, read_metric_records


def test_a_torn_metrics_line_is_skipped_and_named(tmp_path, caplog):
    path = tmp_path / "metrics.jsonl"
    whole = [{"kind": "train", "step": 10, "train_loss": 0.5},
             {"kind": "epoch", "step": 24, "train_loss": None, "val_loss": 0.4}]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in whole) + '[1]\n{"kind": "train", "st')
    with caplog.at_level(logging.WARNING):
        assert read_metric_records(path) == whole
    assert [r.getMessage() for r in caplog.records] == [
        f"skipping line 3 of {path}: not a whole metrics record",
        f"skipping line 4 of {path}: not a whole metrics record",
    ]
    assert read_metric_records(tmp_path / "absent.jsonl") == []


def test_evaluate_with_a_torn_last_metrics_line_names_it_and_succeeds(trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained_run.out_dir, run)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    with (run / "metrics.jsonl").open("a") as handle:
        handle.write('{"kind": "train", "step": 4')  # a crash mid-write
    code, _, err = _main("evaluate", run, "--quiet")
    assert code == 0, err
    metrics = run / "metrics.jsonl"
    assert err == f"skipping line {len(lines) + 1} of {metrics}: not a whole metrics record\n"
    assert (run / "loss.png").stat().st_size > 0


# --------------------------------------------------------------------------- forecast.png

DAILY = DataConfig(
    target=("y",),
    time_column="ds",
    id_column="unique_id",
    window=7,
    horizon=3,
    season=7,
    test_size=6,
    val_size=6,
)


def _daily_panel(n_ids=3, n=60):
    """Splits of a daily panel (``test_size=6``, horizon 3: 4 test windows per series) and the
    forecasts of its test windows: the model's ``y_true + 0.5`` with a band of +-1 and +-2."""
    ids = tuple(f"s{i}" for i in range(n_ids))
    series = prepare_series(_panel(ids, n=n), DAILY)
    splits, _ = make_splits(series, DAILY)
    test = splits.test
    model = test.y_true + 0.5
    quantiles = model[..., None] + np.array([-2.0, -1.0, 0.0, 1.0, 2.0])
    forecasts = {"model": model, "last_value": test.last_value, "auto_ets": None}
    return splits, forecasts, Forecast(model, quantiles, (0.025, 0.1, 0.5, 0.9, 0.975))


def _lines(ax, label):
    return [line for line in ax.get_lines() if line.get_label() == label]


def _future(series, ids=None, horizon=2):
    """A future forecast of every series of ``series`` (or of ``ids``): row ``r`` forecasts
    ``100 r + k`` at step ``k``, its 80% interval +-(k + 1)."""
    names = series.ids if ids is None else ids
    rows = [series.ids.index(name) for name in names]
    ends = series.times[series.bounds[1:] - 1][rows]
    times = ends[:, None] + np.arange(1, horizon + 1) * np.timedelta64(1, "D")
    point = (100.0 * np.arange(len(names))[:, None] + np.arange(1, horizon + 1))[..., None]
    spread = np.arange(2, horizon + 2)[None, :, None]
    return FutureForecast(times, point, {0.8: (point - spread, point + spread)}, ids=ids)


def test_a_panel_gets_one_subplot_per_series_titled_by_its_id_the_first_ones_shown():
    splits, forecasts, bands = _daily_panel(n_ids=8)
    fig = forecast_figure(splits.series, splits.test, forecasts, ("y",), bands, max_series=6)
    assert [ax.get_title() for ax in fig.axes] == ["s0", "s1", "s2", "s3", "s4", "s5"]
    assert "6 of 8 series shown (the first by order)" in fig.get_suptitle()
    splits, forecasts, bands = _daily_panel(n_ids=3)
    three = forecast_figure(splits.series, splits.test, forecasts, ("y",), bands)
    assert [ax.get_title() for ax in three.axes] == ["s0", "s1", "s2"]
    assert three.get_suptitle() == "Test forecasts, 1 to 3 steps ahead"


def test_each_series_shows_its_recent_rows_and_its_test_forecast_at_every_step():
    splits, forecasts, bands = _daily_panel()
    series, test = splits.series, splits.test
    fig = forecast_figure(series, test, forecasts, ("y",), bands, history=10)
    for i, ax in enumerate(fig.axes):
        start, stop = series.bounds[i], series.bounds[i + 1]
        origins = test.origin[test.series == i]  # 4 windows: each one's path is drawn
        (actual,) = _lines(ax, "actual")
        np.testing.assert_array_equal(actual.get_xdata(), series.times[origins[0] - 10 : stop])
        np.testing.assert_array_equal(actual.get_ydata(), series.values[origins[0] - 10 : stop, 0])
        paths = _lines(ax, "model")
        assert len(paths) == len(origins) == 4 and start < origins[0]
        for path, origin in zip(paths, origins, strict=True):
            rows = origin + np.arange(4)  # the origin, then steps 1..3
            np.testing.assert_array_equal(path.get_xdata(), series.times[rows])
            expected = np.concatenate(
                [series.values[[origin], 0], series.values[rows[1:], 0] + 0.5]
            )
            np.testing.assert_allclose(path.get_ydata(), expected, rtol=1e-12)
        assert len(_lines(ax, "last_value")) == 4 and not _lines(ax, "auto_ets")


def test_many_test_windows_are_thinned_to_paths_that_tile_the_test_rows_from_the_last():
    cfg = dataclasses.replace(DAILY, test_size=13)  # 11 windows per series, horizon 3
    series = prepare_series(_panel(("a",), n=60), cfg)
    splits, _ = make_splits(series, cfg)
    test = splits.test
    fig = forecast_figure(series, test, {"model": test.y_true}, ("y",))
    starts = [path.get_xdata()[0] for path in _lines(fig.axes[0], "model")]
    np.testing.assert_array_equal(starts, series.times[test.origin[[1, 4, 7, 10]]])


def test_the_future_line_and_fan_are_the_given_numbers_matched_by_id():
    splits, forecasts, bands = _daily_panel()
    series = splits.series
    future = _future(series, ids=("s2", "s0"))  # s1 has none
    fig = forecast_figure(series, splits.test, forecasts, ("y",), bands, future=future)
    for ax, row in zip(fig.axes, (1, None, 0), strict=True):
        lines = _lines(ax, "future forecast")
        if row is None:
            assert lines == []
            continue
        last = series.bounds[series.ids.index(future.ids[row]) + 1] - 1
        (line,) = lines
        np.testing.assert_array_equal(line.get_xdata(), [series.times[last], *future.times[row]])
        expected = [series.values[last, 0], 100.0 * row + 1, 100.0 * row + 2]
        np.testing.assert_array_equal(line.get_ydata(), expected)
        fan = [c for c in ax.collections if c.get_label() == "80% interval"][-1]
        band = fan.get_paths()[0].vertices[:, 1]
        lo, hi = (b[row, :, 0] for b in future.intervals[0.8])
        assert band.min() == pytest.approx(min(lo.min(), series.values[last, 0]))
        assert band.max() == pytest.approx(max(hi.max(), series.values[last, 0]))
        assert set(np.round(band, 9)) >= set(np.round([*lo, *hi], 9))


def test_daily_dates_get_day_ticks_never_hours_and_the_legend_lies_outside_the_axes():
    splits, forecasts, bands = _daily_panel()
    for history in (1, 20):  # 3 days shown, and weeks
        fig = forecast_figure(
            splits.series,
            splits.test,
            forecasts,
            ("y",),
            bands,
            history=history,
            future=_future(splits.series),
        )
        fig.draw_without_rendering()
        for ax in fig.axes:
            assert isinstance(ax.xaxis.get_major_formatter(), mdates.ConciseDateFormatter)
            ticks = mdates.num2date(ax.get_xticks())
            assert len(ticks) >= 3 and all(t.hour == t.minute == 0 for t in ticks), ticks
        legend = fig.legends[0].get_window_extent()
        assert all(legend.y1 < ax.get_window_extent().y0 for ax in fig.axes)  # below them all
    labels = [t.get_text() for t in fig.legends[0].get_texts()]
    assert labels == [
        "actual",
        "test period",
        "95% interval",
        "80% interval",
        "last_value",
        "model",
        "future forecast",
    ]


def test_the_y_axis_names_the_target_and_its_units_and_one_series_is_titled_by_it():
    cfg = DataConfig(
        target=("co2",), time_column="date", window=4, horizon=2, season=52, test_size=4, val_size=4
    )
    frame = pd.DataFrame(
        {
            "date": pd.date_range("2000-01-01", periods=60, freq="W-SAT"),
            "co2": 350 + np.arange(60.0),
        }
    )
    series = prepare_series(frame, cfg)
    splits, _ = make_splits(series, cfg)
    fig = forecast_figure(series, splits.test, {"model": splits.test.y_true}, ("co2",), units="ppm")
    (ax,) = fig.axes
    assert (ax.get_ylabel(), ax.get_title()) == ("co2 (ppm)", "co2")
    assert (
        forecast_figure(
            series, splits.test, {"model": splits.test.y_true}, ("co2",), units={"co2": "ppm"}
        )
        .axes[0]
        .get_ylabel()
        == "co2 (ppm)"
    )


def test_several_targets_get_a_row_per_series_each_labelled_with_its_own_units():
    frame = _panel(("a", "b"), n=60)
    frame["z"] = 2 * frame["y"]
    cfg = dataclasses.replace(DAILY, target=("y", "z"))
    series = prepare_series(frame, cfg)
    splits, _ = make_splits(series, cfg)
    test = splits.test
    fig = forecast_figure(
        series, test, {"model": test.y_true}, cfg.target, units={"y": "kg", "z": "lb"}
    )
    assert [ax.get_title() for ax in fig.axes] == ["a · y", "a · z", "b · y", "b · z"]
    assert [ax.get_ylabel() for ax in fig.axes] == ["y (kg)", "z (lb)"] * 2
    rows = [ax.get_subplotspec().rowspan.start for ax in fig.axes]
    assert rows == [0, 0, 1, 1]
    (path, *_) = _lines(fig.axes[3], "model")  # b's z: the second target's forecasts
    origin = test.origin[test.series == 1][0]
    np.testing.assert_allclose(path.get_ydata(), series.values[origin + np.arange(4), 1])


def test_a_table_without_time_stamps_is_drawn_on_its_row_numbers():
    cfg = DataConfig(
        target=("y",), time_column=None, window=4, horizon=1, season=6, test_size=5, val_size=5
    )
    series = prepare_series(pd.DataFrame({"y": np.sin(np.arange(40.0))}), cfg)
    splits, _ = make_splits(series, cfg)
    test = splits.test
    future = FutureForecast(np.array([[40]]), np.array([[[7.0]]]))
    fig = forecast_figure(series, test, {"model": test.y_true + 1}, ("y",), future=future)
    ax = fig.axes[0]
    (step1,) = _lines(ax, "model")  # horizon 1: one line through the step-1 forecasts
    np.testing.assert_array_equal(step1.get_xdata(), test.origin + 1)
    np.testing.assert_allclose(step1.get_ydata(), series.values[test.origin + 1, 0] + 1)
    np.testing.assert_array_equal(_lines(ax, "future forecast")[0].get_xdata(), [39, 40])
    assert ax.get_xlabel() == "row"


def test_plot_forecast_keeps_its_positional_call_and_writes_a_png(tmp_path):
    splits, forecasts, bands = _daily_panel()
    plot_forecast(tmp_path / "f.png", splits.series, splits.test, forecasts, ("y",), bands)
    assert (tmp_path / "f.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("times", "point", "intervals", "match"),
    [
        (np.zeros(2), np.zeros((1, 2, 1)), {}, r"times \(n_series, horizon\)"),
        (np.zeros((1, 2)), np.zeros((1, 3, 1)), {}, r"point \(1, 3, 1\)"),
        (np.zeros((1, 2)), np.zeros((1, 2, 1)), {80: (np.zeros((1, 2, 1)),) * 2}, "in \\(0, 1\\)"),
        (np.zeros((1, 2)), np.zeros((1, 2, 1)), {0.8: (np.zeros((1, 2)),) * 2}, "shapes"),
    ],
)
def test_a_future_forecast_of_the_wrong_shape_is_refused(times, point, intervals, match):
    with pytest.raises(ValueError, match=match):
        FutureForecast(times, point, intervals)


# --------------------------------------------------------------------------- loss.png


def _write_metrics(path, val_losses, steps_per_epoch=10):
    """Train records every 5 steps (loss 1 / step) and an epoch record per validation loss."""
    lines = []
    for e, val in enumerate(val_losses, 1):
        for step in range((e - 1) * steps_per_epoch + 5, e * steps_per_epoch + 1, 5):
            lines.append({"kind": "train", "step": step, "epoch": e, "train_loss": 1 / step})
        lines.append(
            {
                "kind": "epoch",
                "step": e * steps_per_epoch,
                "epoch": e,
                "train_loss": 0.1,
                "val_loss": val,
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in lines))
    return path


def test_the_loss_plot_marks_the_chosen_epoch_on_an_epoch_axis(tmp_path):
    metrics = _write_metrics(tmp_path / "m.jsonl", [0.5, 0.3, 0.2, 0.25, 0.2, None])
    with metrics.open("a") as handle:  # half of a 7th epoch, at the pace of the 6th
        handle.write(json.dumps({"kind": "train", "step": 65, "train_loss": 1 / 65}) + "\n")
    fig = loss_figure(metrics)
    (ax,) = fig.axes
    assert ax.get_title() == "Training loss by epoch" and ax.get_xlabel() == "epoch"
    (mark,) = [line for line in ax.get_lines() if line.get_label().startswith("chosen epoch")]
    assert list(mark.get_xdata()) == [3, 3]  # the first of the two lowest losses
    assert mark.get_label() == "chosen epoch 3 (validation loss 0.2)"
    (train,) = _lines(ax, "train")
    np.testing.assert_allclose(train.get_xdata(), np.arange(5, 66, 5) / 10)
    np.testing.assert_allclose(train.get_ydata(), 1 / np.arange(5, 66, 5))
    (val,) = _lines(ax, "validation")
    np.testing.assert_array_equal(val.get_xdata(), [1, 2, 3, 4, 5])
    assert ax.get_yscale() == "log"


def test_the_loss_plot_shows_the_retrained_run_from_its_metrics_or_its_losses(tmp_path):
    selection = _write_metrics(tmp_path / "sel.jsonl", [0.5, 0.3, 0.4])
    again = _write_metrics(tmp_path / "re.jsonl", [None, None], steps_per_epoch=20)
    for retrained, x, y in (
        (again, np.arange(5, 41, 5) / 20, 1 / np.arange(5, 41, 5)),
        ([0.4, 0.0, 0.2], [1, 3], [0.4, 0.2]),  # a loss of 0 cannot be on a log scale
    ):
        fig = loss_figure(selection, retrained=retrained)
        (line,) = _lines(fig.axes[0], "train, retrained on all rows")
        np.testing.assert_allclose(line.get_xdata(), x)
        np.testing.assert_allclose(line.get_ydata(), y)
        labels = [t.get_text() for t in fig.legends[0].get_texts()]
        assert "chosen epoch 2 (validation loss 0.3)" in labels
    plot_loss(tmp_path / "loss.png", selection, retrained=again)
    assert (tmp_path / "loss.png").read_bytes()[:4] == b"\x89PNG"


def test_a_run_without_validation_marks_its_last_epoch_and_zero_losses_say_why(tmp_path):
    fig = loss_figure(_write_metrics(tmp_path / "m.jsonl", [None, None]))
    marks = [line.get_label() for line in fig.axes[0].get_lines() if "epoch" in line.get_label()]
    assert marks == ["last epoch 2 (kept: no validation loss)"]
    zero = tmp_path / "zero.jsonl"
    zero.write_text(json.dumps({"kind": "train", "step": 5, "train_loss": 0.0}) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig = loss_figure(zero)
    assert fig.axes[0].get_title() == "no positive finite loss to show on a log scale"
    assert fig.axes[0].get_xlabel() == "step" and not fig.legends


def test_a_loss_plot_of_negative_likelihood_losses_is_written_without_a_log_scale(tmp_path):
    """A distribution loss (student_t) may be negative: nothing to show on a log scale, for
    the selection's curve or the retrained one, and the plot is still written."""
    lines = [
        {"kind": "train", "step": 5 * k, "epoch": k, "train_loss": -1.0 - k, "val_loss": None}
        for k in (1, 2)
    ]
    lines += [{"kind": "epoch", "step": 10, "epoch": 2, "train_loss": -2.0, "val_loss": -3.0}]
    selection, retrained = tmp_path / "s.jsonl", tmp_path / "r.jsonl"
    for path in (selection, retrained):
        path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    loss_plot.plot_loss(tmp_path / "loss.png", selection, retrained=retrained)
    assert (tmp_path / "loss.png").stat().st_size > 0
    fig = loss_plot.loss_figure(selection, retrained=[-1.0, -2.0])
    assert fig.axes[0].get_yscale() == "linear"
    assert fig.axes[0].get_title() == "no positive finite loss to show on a log scale"
