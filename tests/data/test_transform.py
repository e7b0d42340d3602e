"""``target_transform="auto"``: Guerrero's lambda against statsforecast's (coreforecast's),
the choice on the training rows, and a run that records it and equals the explicit one."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pandas as pd
import pytest

from helpers import monthly
from stacklstm.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from stacklstm.data import make_splits, prepare_series
from stacklstm.data.transform import choose_target_transform, guerrero_lambda, logged_series

T = np.arange(120)
GROWING = 10 * 1.03**T * (1 + 0.2 * np.sin(2 * np.pi * T / 12))  # swings grow with the level
STEADY = 10 + 0.5 * T + 2 * np.sin(2 * np.pi * T / 12)  # swings of one size


def _series():
    rng = np.random.default_rng(0)
    t = np.arange(96)
    return [
        (GROWING[:96] * np.exp(rng.normal(0, 0.02, 96)), 12),
        (STEADY[:96] + rng.normal(0, 0.5, 96), 12),
        (10 * np.exp(np.cumsum(rng.normal(0, 0.1, 40))), 1),
        (100 + np.cumsum(rng.normal(size=41)), 1),
        (20 + np.abs(rng.normal(size=60)).cumsum() + np.tile([0, 3, -2, 1], 15), 4),
        (5 + t * 0.1 + rng.gamma(2.0, 0.1 + 0.02 * t), 1),
    ]


@pytest.mark.parametrize("case", range(6))
def test_guerrero_lambda_equals_statsforecasts(case):
    pytest.importorskip("coreforecast")
    from coreforecast.scalers import boxcox_lambda

    x, season = _series()[case]
    want = boxcox_lambda(x, "guerrero", season_length=max(season, 2))
    assert guerrero_lambda(x, season) == pytest.approx(want, abs=1e-3)


def test_guerrero_lambda_is_log_for_growing_swings_and_none_for_steady_ones():
    assert abs(guerrero_lambda(GROWING, 12)) < 0.05
    assert guerrero_lambda(STEADY, 12) > 0.9
    assert np.isnan(guerrero_lambda(GROWING[:13], 12))  # one whole period only


def _cfg(**kw) -> DataConfig:
    return DataConfig(target=("y",), time_column="date", season=12, window=12, horizon=2, **kw)


def test_the_choice_reads_the_training_rows_only():
    c = _cfg(target_transform="auto")
    assert choose_target_transform(prepare_series(monthly(GROWING), c), c)[0] == "log1p"
    assert choose_target_transform(prepare_series(monthly(STEADY), c), c)[0] == "none"
    # a negative value among the training rows: no log
    assert choose_target_transform(prepare_series(monthly(GROWING - 15), c), c)[0] == "none"
    # the same value in the test rows only does not count: they are not read
    late = GROWING.copy()
    late[-3] = -1.0
    assert choose_target_transform(prepare_series(monthly(late), c), c)[0] == "log1p"


def test_a_panel_takes_the_median_lambda_of_its_series():
    c = _cfg(target_transform="auto", id_column="id")
    frames = [
        monthly(v).assign(id=name)
        for name, v in [("a", GROWING), ("b", GROWING * 2), ("c", STEADY)]
    ]
    chosen, median = choose_target_transform(prepare_series(pd.concat(frames), c), c)
    assert chosen == "log1p" and abs(median) < 0.05  # two of three grow with their level
    frames[1] = monthly(STEADY * 3).assign(id="b")
    assert choose_target_transform(prepare_series(pd.concat(frames), c), c)[0] == "none"


def test_unresolved_auto_is_refused_by_make_splits():
    c = _cfg(target_transform="auto")
    with pytest.raises(ValueError, match="target_transform='auto'"):
        make_splits(prepare_series(monthly(GROWING), c), c)


@pytest.mark.slow  # two fits: about 14 s
def test_an_auto_run_records_its_choice_and_equals_the_explicit_run(tmp_path):
    from stacklstm.forecasting import predict
    from stacklstm.run import fit

    path = tmp_path / "m.csv"
    monthly(GROWING).to_csv(path, index=False)
    model = ModelConfig(lstm_hidden_size=4, num_lstm_layers=1, linear_layer_sizes=())
    train = TrainConfig(epochs=2, batch_size=16, baselines="naive")
    runs = {}
    for kind in ("auto", "per_series", "log1p"):  # per_series of one series: its choice
        cfg = RunConfig(_cfg(target_transform=kind), model, train)
        fit(cfg, tmp_path / kind, data_path=path, quiet=True)
        runs[kind] = predict(tmp_path / kind, path)
    for kind in ("auto", "per_series"):
        saved = json.loads((tmp_path / kind / "config.json").read_text())
        assert saved["config"]["data"]["target_transform"] == "log1p"
        pd.testing.assert_frame_equal(runs[kind], runs["log1p"])


# --------------------------------------------------------------------- each series on its own


def _panel(*values):
    return pd.concat([monthly(v).assign(id=name) for name, v in zip("abc", values, strict=False)])


def test_a_panel_chooses_the_log_for_each_series_on_its_training_rows():
    c = _cfg(target_transform="per_series", id_column="id")
    series = prepare_series(_panel(GROWING, STEADY, GROWING - 15), c)
    assert logged_series(series, c, [100, 100, 100]).tolist() == [True, False, False]
    # only the training rows are read: a negative value after them does not count
    late = GROWING.copy()
    late[110] = -1.0
    series = prepare_series(_panel(late, STEADY), c)
    assert logged_series(series, c, [100, 100]).tolist() == [True, False]
    assert logged_series(series, c, [111, 100]).tolist() == [False, False]


def _windows(kind, *values):
    c = _cfg(target_transform=kind, id_column="id")
    splits, scaler = make_splits(prepare_series(_panel(*values), c), c)
    return splits, scaler


def test_per_series_windows_are_the_logged_runs_for_one_series_and_the_plain_ones_for_the_other():
    mixed, scaler = _windows("per_series", GROWING, STEADY)
    assert scaler.logged.tolist() == [True, False]
    logged, _ = _windows("log1p", GROWING, STEADY)
    plain, _ = _windows("none", GROWING, STEADY)
    for split in ("train", "val", "test"):
        got, want_a, want_b = (getattr(s, split) for s in (mixed, logged, plain))
        a, b = got.series == 0, got.series == 1
        np.testing.assert_array_equal(got.x[a], want_a.x[want_a.series == 0])
        np.testing.assert_array_equal(got.x[b], want_b.x[want_b.series == 1])
        assert np.abs(got.x[a] - want_b.x[want_b.series == 0]).max() > 0.1  # not the plain one
        # back to the original units: each series' own inverse
        np.testing.assert_allclose(got.to_original(got.y), got.y_true, rtol=1e-5)


def test_the_log_flags_round_trip_through_the_saved_scaler_and_select_by_name():
    from stacklstm.data.scale import PanelScaler, scaler_from_dict

    _, scaler = _windows("per_series", GROWING, STEADY)
    again = scaler_from_dict(json.loads(json.dumps(scaler.to_dict())))
    assert isinstance(again, PanelScaler) and again.logged.tolist() == [True, False]
    assert scaler.select(["b", "a"]).logged.tolist() == [False, True]
    with pytest.raises(ValueError, match="'log1p' must be one true or false per series"):
        scaler_from_dict({**scaler.to_dict(), "log1p": [True]})


def test_per_series_needs_a_panel():
    c = _cfg(target_transform="per_series")
    with pytest.raises(ValueError, match="per_series' chooses the log for each series of a panel"):
        make_splits(prepare_series(monthly(GROWING), c), c)


def test_a_panels_auto_run_is_per_series_and_equals_the_logged_run_when_every_series_grows(
    tmp_path,
):
    from stacklstm.forecasting import predict
    from stacklstm.run import fit

    path = tmp_path / "p.csv"
    _panel(GROWING, GROWING * 3 + 1).to_csv(path, index=False)
    model = ModelConfig(lstm_hidden_size=4, num_lstm_layers=1, linear_layer_sizes=())
    train = TrainConfig(epochs=2, batch_size=16, baselines="naive", retrain="off")
    runs = {}
    for kind in ("auto", "log1p"):
        cfg = RunConfig(_cfg(target_transform=kind, id_column="id"), model, train)
        fit(cfg, tmp_path / kind, data_path=path, quiet=True)
        runs[kind] = predict(tmp_path / kind, path)
    saved = json.loads((tmp_path / "auto" / "config.json").read_text())
    assert saved["config"]["data"]["target_transform"] == "per_series"
    pd.testing.assert_frame_equal(runs["auto"], runs["log1p"])


# ------------------------------------------------------------ the default: seasonal_panel


def test_the_default_logs_each_series_of_a_seasonal_panel_and_nothing_else():
    # a panel with a season: the windows of per_series, bit for bit
    default, scaler = _windows("seasonal_panel", GROWING, STEADY)
    assert scaler.logged.tolist() == [True, False]
    mixed, _ = _windows("per_series", GROWING, STEADY)
    for split in ("train", "val", "test"):
        np.testing.assert_array_equal(getattr(default, split).x, getattr(mixed, split).x)
    # a panel without a season, and one series: the plain windows
    for kw in ({"id_column": "id", "season": 1, "window": 6}, {"window": 12}):
        c = dataclasses.replace(_cfg(), **kw)
        data = _panel(GROWING, STEADY) if "id_column" in kw else monthly(GROWING)
        got, _ = make_splits(prepare_series(data, c), c)
        plain = dataclasses.replace(c, target_transform="none")
        want, _ = make_splits(prepare_series(data, plain), plain)
        np.testing.assert_array_equal(got.train.x, want.train.x)
        logged = dataclasses.replace(c, target_transform="log1p")  # what a log would give
        other, _ = make_splits(prepare_series(data, logged), logged)
        assert np.abs(got.train.x - other.train.x).max() > 0.1


def test_a_default_panel_run_records_per_series_and_equals_the_per_series_run(tmp_path):
    from stacklstm.forecasting import predict
    from stacklstm.run import fit

    path = tmp_path / "p.csv"
    _panel(GROWING, STEADY).to_csv(path, index=False)
    model = ModelConfig(lstm_hidden_size=4, num_lstm_layers=1, linear_layer_sizes=())
    train = TrainConfig(epochs=2, batch_size=16, baselines="naive", retrain="off")
    runs = {}
    for kind in ("seasonal_panel", "per_series"):
        data = dataclasses.replace(_cfg(id_column="id"), season="auto", target_transform=kind)
        fit(RunConfig(data, model, train), tmp_path / kind, data_path=path, quiet=True)
        runs[kind] = predict(tmp_path / kind, path)
    saved = json.loads((tmp_path / "seasonal_panel" / "config.json").read_text())
    assert saved["config"]["data"]["target_transform"] == "per_series"
    assert saved["config"]["data"]["season"] == 12
    pd.testing.assert_frame_equal(runs["seasonal_panel"], runs["per_series"])
