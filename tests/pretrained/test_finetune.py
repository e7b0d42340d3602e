"""``init="pretrained"``: a run that starts from the shipped weights. With a learning rate too
small to move them it forecasts what the zero-shot path forecasts; it resumes bit-identically;
what the weights cannot read is refused in one line."""

import json
import re

import numpy as np
import pandas as pd
import pytest

from helpers import raises_one_line
from stacklstm.checks import DataError, SettingError
from stacklstm.config import DataConfig, RunConfig, TrainConfig
from stacklstm.data import prepare_series
from stacklstm.data.transform import choose_target_transform
from stacklstm.forecasting import predict
from stacklstm.forecasting.zeroshot import forecast
from stacklstm.run import fit
from stacklstm.rundir.info import read_metrics, read_run_info


def _quarterly_table(tmp_path, n=60, seed=0, wider_last_year=False):
    rng = np.random.default_rng(seed)
    season = np.tile([3.0, -1.0, -4.0, 2.0], n // 4 + 1)[:n]
    y = 100 + 0.5 * np.arange(n) + season + rng.normal(0, 0.5, n)
    if wider_last_year:  # the log on every row, not on the training rows alone
        y[-4:] += 5 * season[-4:]
    frame = pd.DataFrame({"ds": pd.date_range("2001-01-01", periods=n, freq="QS"), "y": y})
    path = tmp_path / "q.csv"
    frame.to_csv(path, index=False)
    return frame, path


def _cfg(**train):
    data = DataConfig(target=("y",), time_column="ds", horizon=4, test_size=0)
    return RunConfig(data, train=TrainConfig(init="pretrained", baselines="naive", **train))


@pytest.mark.parametrize("wider_last_year", [False, True])
def test_a_run_that_barely_moves_the_weights_forecasts_as_the_zero_shot_path(
    tmp_path, wider_last_year
):
    frame, path = _quarterly_table(tmp_path, wider_last_year=wider_last_year)
    if wider_last_year:  # the transform chosen on every row, as the zero-shot path chooses
        data = DataConfig(target=("y",), time_column="ds", horizon=4, test_size=0, season=4)
        series = prepare_series(frame, data)
        on_training_rows = choose_target_transform(series, data)[0]
        assert (on_training_rows, choose_target_transform(series, data, True)[0]) == (
            "none",
            "log1p",
        )
    # retrain="all": the model that forecasts trained on every row, scaled on every row, as
    # the zero-shot path scales a new series on all its rows
    cfg = _cfg(lr=1e-30, weight_decay=0.0, epochs=1, retrain="all")
    fit(cfg, tmp_path / "r", data_path=path, quiet=True)
    tuned = predict(tmp_path / "r", path, format="long")
    zero = forecast(frame, h=4, level=())
    np.testing.assert_allclose(tuned["stacklstm"], zero["stacklstm"], rtol=1e-5)
    # the window, season, scaling and padding of the quarterly weights, on one series
    saved = read_run_info(tmp_path / "r").config.data
    assert (saved.window, saved.season, saved.scaler) == (8, 4, "seasonal_naive")
    assert saved.start_padding == "repeat"


def test_a_fine_tune_that_validates_worse_keeps_the_pretrained_weights(tmp_path):
    frame, path = _quarterly_table(tmp_path)
    # a learning rate that wrecks the weights: no epoch validates better than "epoch 0"
    cfg = _cfg(lr=3.0, weight_decay=0.0, epochs=2, patience=5, retrain="all")
    result = fit(cfg, tmp_path / "r", data_path=path, quiet=True)
    assert result.selection.best_step == 0 and result.selection.step > 0
    assert result.epochs == 0 and result.step == result.selection.step  # no epoch after it
    tuned = predict(tmp_path / "r", path, format="long")
    zero = forecast(frame, h=4, level=())
    np.testing.assert_allclose(tuned["stacklstm"], zero["stacklstm"], rtol=1e-5)


def test_a_fine_tune_keeps_the_epoch_that_validates_best(tmp_path):
    _, path = _quarterly_table(tmp_path)
    result = fit(_cfg(lr=3.0, epochs=2, retrain="off"), tmp_path / "r", data_path=path, quiet=True)
    assert result.best_step == 0  # the weights it started from
    lines = [json.loads(x) for x in read_metrics(tmp_path / "r" / "metrics.jsonl", result.step)]
    epochs = [line["val_loss"] for line in lines if line["kind"] == "epoch"]
    assert len(epochs) == 2 and min(epochs) > result.best_val_loss


def test_a_pretrained_run_resumes_bit_identically(tmp_path):
    _, path = _quarterly_table(tmp_path)
    cfg = _cfg(epochs=3, retrain="off")
    whole = fit(cfg, tmp_path / "a", data_path=path, quiet=True)
    part = fit(cfg, tmp_path / "b", data_path=path, quiet=True, stop_after_steps=5)
    assert part.report is None
    resumed = fit(cfg, tmp_path / "b", data_path=path, quiet=True, resume=True)
    assert resumed.step == whole.step and resumed.best_step == whole.best_step
    np.testing.assert_array_equal(resumed.report.test_forecast, whole.report.test_forecast)


@pytest.mark.parametrize(
    ("change", "message", "error"),
    [
        ({"train": {"loss": "quantile"}}, "loss='quantile' needs an output layer", SettingError),
        ({"data": {"horizon": 9}}, "the quarterly weights forecast at most 8 steps", SettingError),
        ({"data": {"window": 5}}, "trained with window=8, got window=5", SettingError),
        ({"model": {"lstm_hidden_size": 16}}, "lstm_hidden_size=64, got", SettingError),
        ({"data": {"features": ("x",)}}, "weights that read one target and nothing", SettingError),
    ],
)
def test_what_the_weights_cannot_read_is_refused_in_one_line(tmp_path, change, message, error):
    frame, path = _quarterly_table(tmp_path)
    frame.assign(x=1.0).to_csv(path, index=False)
    cfg = _cfg(epochs=1).replace(change)
    raises_one_line(message, fit, cfg, tmp_path / "r", data_path=path, quiet=True, error=error)
    assert not (tmp_path / "r").exists()


def test_a_series_too_short_to_fine_tune_is_pointed_to_the_zero_shot_forecast(tmp_path):
    frame, path = _quarterly_table(tmp_path, n=16)
    cfg = _cfg(epochs=1).replace({"data": {"horizon": 8}})
    raises_one_line(
        re.escape(
            "the series needs at least 17 rows; the pretrained weights forecast it without "
            "fine-tuning: `stacklstm forecast` or LSTMForecaster.pretrained()"
        ),
        fit, cfg, tmp_path / "r", data_path=path, quiet=True, error=DataError,
    )  # fmt: skip
    assert len(forecast(frame, h=8, level=())) == 8


def test_a_fine_tune_takes_its_own_training_defaults_and_keeps_what_is_given(tmp_path):
    _, path = _quarterly_table(tmp_path)
    fit(_cfg(retrain="off"), tmp_path / "a", data_path=path, quiet=True)
    train = read_run_info(tmp_path / "a").config.train
    assert (train.lr, train.epochs, train.min_steps) == (1e-4, 20, 0)
    # 20 epochs of the windows' batches, no more (the floor of 1,000 steps is gone)
    lines = [json.loads(x) for x in (tmp_path / "a" / "metrics.jsonl").read_text().splitlines()]
    assert max(line["epoch"] for line in lines if line["kind"] == "epoch") <= 20
    fit(_cfg(retrain="off", lr=1e-3, epochs=2), tmp_path / "b", data_path=path, quiet=True)
    train = read_run_info(tmp_path / "b").config.train
    assert (train.lr, train.epochs, train.min_steps) == (1e-3, 2, 0)


def _series(freq, n, horizon=4, **data):
    t = np.arange(n)
    frame = pd.DataFrame(
        {"ds": pd.date_range("2001-01-01", periods=n, freq=freq), "y": 50 + t + np.sin(t)}
    )
    cfg = DataConfig(target=("y",), time_column="ds", horizon=horizon, **data)
    return frame, RunConfig(cfg, train=TrainConfig(init="auto"))


@pytest.mark.parametrize(
    ("freq", "n", "horizon", "data", "init", "window"),
    [
        ("QS", 60, 4, {}, "pretrained", 8),  # the quarterly weights' window
        ("MS", 40, 4, {}, "pretrained", 24),
        ("YS", 30, 4, {}, "pretrained", 10),
        ("W-SUN", 120, 4, {}, "random", None),  # weights of synthetic series: not by default
        ("QS", 60, 9, {}, "random", None),  # longer than the weights' horizon of 8
        ("QS", 60, 4, {"window": 5}, "random", 5),  # a window of its own
        ("QS", 12, 4, {}, "random", None),  # too short for the fine-tune's windows
        ("2MS", 60, 4, {}, "random", None),  # a step no weights cover
    ],
)
def test_init_auto_fine_tunes_one_series_the_weights_can_read_and_else_starts_random(
    freq, n, horizon, data, init, window
):
    from stacklstm.train.resolve import prepare_resolved

    frame, cfg = _series(freq, n, horizon, **data)
    _, resolved = prepare_resolved(frame, cfg)
    assert resolved.train.init == init
    if window is not None:
        assert resolved.data.window == window
    if init == "pretrained":  # exactly what init="pretrained" resolves to
        _, explicit = prepare_resolved(frame, cfg.replace({"train": {"init": "pretrained"}}))
        assert resolved == explicit


def test_init_auto_trains_a_panel_from_random_parameters():
    from stacklstm.train.resolve import prepare_resolved

    frame, cfg = _series("QS", 60)
    panel = pd.concat([frame.assign(id="a"), frame.assign(id="b")])
    _, resolved = prepare_resolved(panel, cfg.replace({"data": {"id_column": "id"}}))
    assert resolved.train.init == "random"


def test_a_weekly_series_fine_tunes_the_weekly_weights():
    """A run's weekly step is "7D" (Series.freq), the weekly weights' family."""
    from stacklstm.train.resolve import prepare_resolved

    frame, cfg = _series("W-SUN", 120)
    _, resolved = prepare_resolved(frame, cfg.replace({"train": {"init": "pretrained"}}))
    assert (resolved.train.init, resolved.data.window, resolved.data.season) == (
        "pretrained",
        52,
        52,
    )


def test_a_first_estimator_fit_on_one_quarterly_series_fine_tunes_the_weights(tmp_path):
    """LSTMForecaster's defaults (init="auto"): one quarterly series starts from the
    quarterly weights; from a learning rate too small to move them it forecasts the
    zero-shot forecast."""
    from stacklstm import LSTMForecaster

    frame, _ = _quarterly_table(tmp_path)
    model = LSTMForecaster(horizon=4, test_size=0, lr=1e-30, weight_decay=0.0, epochs=1)
    tuned = model.fit(frame.assign(unique_id="s")).predict()
    assert read_run_info(model.run_dir).config.train.init == "pretrained"
    zero = forecast(frame, h=4, level=())
    np.testing.assert_allclose(tuned["stacklstm"], zero["stacklstm"], rtol=1e-5)


def test_init_auto_without_weights_to_read_trains_from_random_parameters(tmp_path, monkeypatch):
    """Another weights folder without the quarterly family: the default trains as before."""
    from stacklstm.pretrained.store import WEIGHTS_ENV
    from stacklstm.train.resolve import prepare_resolved

    monkeypatch.setenv(WEIGHTS_ENV, str(tmp_path))
    frame, cfg = _series("QS", 60)
    assert prepare_resolved(frame, cfg)[1].train.init == "random"


def test_a_resume_keeps_the_init_its_run_chose(tmp_path):
    """A folder that trained from random parameters (saved before init="auto", or chosen
    so) resumes from them under the default, not as a fine-tune refused for its settings."""
    _, path = _quarterly_table(tmp_path)
    cfg = _cfg(epochs=2, retrain="off").replace({"train": {"init": "random"}})
    fit(cfg, tmp_path / "r", data_path=path, quiet=True, stop_after_steps=2)
    resumed = fit(cfg.replace({"train": {"init": "auto"}}), tmp_path / "r", resume=True, quiet=True)
    assert read_run_info(tmp_path / "r").config.train.init == "random"
    assert resumed.report is not None
