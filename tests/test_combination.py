"""The combination forecaster in the report and in ``predict --combine``, against numbers
computed by hand from the run's own forecasts: the weights are 1/MAE on the validation
windows, normalised; the combination is the weighted mean of the model's and the baselines'
forecasts from the same origins."""

import json
import shutil

import numpy as np
import pandas as pd
import pytest

from helpers import _main
from stacklstm import baselines
from stacklstm.data import bundled_dataset_path, make_splits, prepare_series, read_table
from stacklstm.forecasting import predict
from stacklstm.forecasting.inference import load_series
from stacklstm.rundir.info import read_run_info


def _co2(run_dir):
    """The run's config, its series, the split windows and the target's values (n,)."""
    cfg = read_run_info(run_dir).config.data
    series = prepare_series(read_table(bundled_dataset_path()), cfg)
    splits, _ = make_splits(series, cfg)
    return cfg, series, splits, series.values[:, 0]


def _seasonal_naive(values, origins, season):
    """Step 1 of the seasonal naive forecast from ``origins``: the value a season before the
    target, or the last value where the series is shorter than a season."""
    back = origins + 1 - season
    return np.where(back >= 0, values[np.maximum(back, 0)], values[origins])


def _hand_weights(errors):
    inverse = {name: 1.0 / e for name, e in errors.items()}
    return {name: v / sum(inverse.values()) for name, v in inverse.items()}


def test_report_weights_and_combination_equal_a_hand_computation(trained_run):
    out = trained_run.out_dir
    report = json.loads((out / "report.json").read_text())
    cfg, series, splits, values = _co2(out)
    assert cfg.horizon == 1 and cfg.season == 52
    model = predict(out).set_index("origin")["co2_h1"]  # the model from every origin
    at = lambda origins: model.loc[series.times[origins]].to_numpy()  # noqa: E731
    val = splits.val.origin
    errors = {
        "model": np.mean(np.abs(values[val + 1] - at(val))),
        "seasonal_naive": np.mean(np.abs(values[val + 1] - values[val + 1 - 52])),
    }
    entry = report["combination"]
    assert entry["forecasters"] == ["model", "seasonal_naive"]
    assert entry["val_mae"] == pytest.approx(errors, rel=1e-9)
    weights = _hand_weights(errors)
    assert entry["weights"] == pytest.approx(weights, rel=1e-9)
    assert 0.0 < weights["model"] < 1.0
    # the test forecasts: the weighted mean of the model's and the seasonal naive's
    test = splits.test.origin
    mixed = weights["model"] * at(test) + weights["seasonal_naive"] * values[test + 1 - 52]
    actual = values[test + 1]
    scores = report["test"]["combination"]
    assert scores["mae"] == pytest.approx(np.mean(np.abs(actual - mixed)), rel=1e-9)
    assert scores["rmse"] == pytest.approx(np.sqrt(np.mean((actual - mixed) ** 2)), rel=1e-9)
    # the Report's own forecasts: the same weighted mean of its model and baseline forecasts
    forecasts = trained_run.report.test_forecasts
    np.testing.assert_allclose(
        forecasts["combination"],
        weights["model"] * forecasts["model"]
        + weights["seasonal_naive"] * forecasts["seasonal_naive"],
        rtol=1e-12,
    )
    # the table prints it as another forecaster; the validation scores stay without it
    assert any(
        line.startswith("test  combination") for line in trained_run.report.table.split("\n")
    )
    assert "combination" not in report["val"]


def test_predict_combine_is_the_weighted_mean_from_the_same_origins(trained_run, tmp_path):
    out = trained_run.out_dir
    weights = json.loads((out / "report.json").read_text())["combination"]["weights"]
    _, series, _, values = _co2(out)
    frame = predict(out, combine=True)
    bands = [f"co2_h1_combination_q{q}" for q in ("0.025", "0.1", "0.9", "0.975")]
    assert list(frame.columns) == ["origin", "co2_h1", "co2_h1_combination", *bands]
    origins = pd.Index(series.times).get_indexer(frame["origin"])
    assert (origins >= 0).all()
    hand = weights["model"] * frame["co2_h1"].to_numpy() + weights[
        "seasonal_naive"
    ] * _seasonal_naive(values, origins, 52)
    np.testing.assert_allclose(frame["co2_h1_combination"], hand, rtol=1e-12)
    # the model's column is unchanged by --combine
    pd.testing.assert_series_equal(frame["co2_h1"], predict(out)["co2_h1"])
    # the command line: the same column in the CSV; in the long format a column combination
    wide, long = tmp_path / "wide.csv", tmp_path / "long.csv"
    code, _, err = _main("predict", out, "--combine", "--output", wide, "--history")
    assert code == 0, err
    np.testing.assert_allclose(pd.read_csv(wide)["co2_h1_combination"], hand, rtol=1e-12)
    code, _, err = _main("predict", out, "--combine", "--format", "long", "--output", long)
    assert code == 0, err
    table = pd.read_csv(long)
    bands = [f"combination-{side}-{level}" for level in (80, 95) for side in ("lo", "hi")]
    assert list(table.columns) == ["unique_id", "ds", "stacklstm", "combination", *bands]
    assert table["combination"].tolist() == pytest.approx([hand[-1]], rel=1e-12)


def _scale(values, origin, season):
    """MASE's scale of the rows up to ``origin``: their mean absolute seasonal difference
    (lag 1 where they are ``season`` rows or fewer)."""
    rows = np.asarray(values[: origin + 1], dtype=float)
    lag = season if len(rows) > season else 1
    return np.mean(np.abs(rows[lag:] - rows[:-lag]), axis=0)


def _conformal(scaled, level):
    """The split-conformal quantile: the ``ceil((n + 1) level)``-th smallest of ``n``."""
    kept = np.sort(scaled)
    return kept[min(len(kept), int(np.ceil((len(kept) + 1) * level))) - 1]


def test_combination_intervals_are_split_conformal_on_its_scaled_validation_errors(
    trained_run,
):
    """The report's half-widths: the conformal quantile of the combination's validation
    errors over each origin's MASE scale; predict's interval: the combination plus and minus
    that half-width times the scale of the series up to the forecast's origin."""
    out = trained_run.out_dir
    entry = json.loads((out / "report.json").read_text())["combination"]
    _, series, splits, values = _co2(out)
    model = predict(out).set_index("origin")["co2_h1"]
    val = splits.val.origin
    w = entry["weights"]
    mixed = w["model"] * model.loc[series.times[val]].to_numpy()
    mixed = mixed + w["seasonal_naive"] * values[val + 1 - 52]
    scales = np.array([_scale(values, o, 52) for o in val])
    scaled = np.abs(values[val + 1] - mixed) / scales
    half = {name: _conformal(scaled, level) for name, level in (("80", 0.8), ("95", 0.95))}
    assert entry["halfwidths"] == {k: [[pytest.approx(v, rel=1e-9)]] for k, v in half.items()}
    assert half["80"] < half["95"]
    frame = predict(out, combine=True)
    origins = pd.Index(series.times).get_indexer(frame["origin"])
    at = np.array([_scale(values, o, 52) for o in origins])
    point = frame["co2_h1_combination"].to_numpy()
    for name, (lo, hi) in {"80": ("0.1", "0.9"), "95": ("0.025", "0.975")}.items():
        np.testing.assert_allclose(frame[f"co2_h1_combination_q{lo}"], point - half[name] * at)
        np.testing.assert_allclose(frame[f"co2_h1_combination_q{hi}"], point + half[name] * at)
    # the report scores them on the test windows, as it scores the model's and baselines'
    test = splits.test.origin
    mixed = w["model"] * model.loc[series.times[test]].to_numpy()
    mixed = mixed + w["seasonal_naive"] * values[test + 1 - 52]
    width = half["80"] * np.array([_scale(values, o, 52) for o in test])
    inside = np.abs(values[test + 1] - mixed) <= width
    scores = json.loads((out / "report.json").read_text())["test"]["combination"]
    assert scores["coverage"]["0.8"] == pytest.approx(np.mean(inside), rel=1e-12)
    assert scores["width"]["0.8"] == pytest.approx(np.mean(2 * width), rel=1e-9)


def _copy_without_weights(run, tmp_path, change):
    copy = tmp_path / "run"
    shutil.copytree(run, copy)
    path = copy / "report.json"
    report = json.loads(path.read_text())
    change(report)
    path.write_text(json.dumps(report))
    return copy


def test_predict_combine_without_weights_is_a_clear_error(trained_run, tmp_path, monkeypatch):
    old = _copy_without_weights(trained_run.out_dir, tmp_path, lambda r: r.pop("combination"))
    with pytest.raises(ValueError, match=r"holds no combination weights.*stacklstm evaluate"):
        predict(old, combine=True)
    code, _, err = _main("predict", old, "--combine", "--output", tmp_path / "x.csv")
    assert code == 2
    assert "no combination weights" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "x.csv").exists()
    predict(old)  # without --combine the run forecasts as before
    (old / "report.json").unlink()
    with pytest.raises(ValueError, match=r"report\.json, which is missing"):
        predict(old, combine=True)
    # weights that need the statistical baselines, without statsforecast
    (tmp_path / "b").mkdir()

    def statistical(report):
        report["combination"]["weights"] = {"model": 0.5, "auto_ets": 0.5}

    other = _copy_without_weights(trained_run.out_dir, tmp_path / "b", statistical)
    monkeypatch.setattr(baselines, "statsforecast_available", lambda: False)
    with pytest.raises(
        ValueError, match=r"auto_ets\); they need statsforecast, which is not installed"
    ):
        predict(other, combine=True)


@pytest.mark.parametrize(
    "weights",
    [
        {"model": 5, "seasonal_naive": -4},
        {"model": 0, "seasonal_naive": 0},
        {"model": float("nan")},
        {"model": "1"},
        ["model"],
    ],
)
def test_edited_or_broken_weights_are_refused_with_the_files_name(trained_run, tmp_path, weights):
    def edit(report):
        report["combination"]["weights"] = weights

    run = _copy_without_weights(trained_run.out_dir, tmp_path, edit)
    with pytest.raises(ValueError, match=r"report\.json: the combination's weights must map"):
        predict(run, combine=True)
    (run / "report.json").write_text('{"combination": {"weights": {"mod')  # cut short
    with pytest.raises(ValueError, match=r"report\.json is not valid JSON"):
        predict(run, combine=True)


def _panel(n_rows=48):
    rng = np.random.default_rng(7)
    t = np.arange(n_rows)
    frames = []
    for name, level in (("a", 10.0), ("b", 30.0)):
        y = level + 3.0 * np.sin(2 * np.pi * t / 4) + 0.1 * t + rng.normal(0, 0.5, n_rows)
        frames.append(pd.DataFrame({"unique_id": name, "ds": t, "y": y}))
    return pd.concat(frames, ignore_index=True)


def test_a_panel_with_the_statistical_baselines(tmp_path):
    """``baselines="all"``: per series weights from that series' validation windows, the
    statistical forecasts those of ``baselines.statistical_forecasts`` from the same
    origins (one fit at the series' first validation origin)."""
    pytest.importorskip("statsforecast")
    from stacklstm.estimator import LSTMForecaster

    model = LSTMForecaster(
        horizon=2,
        window=6,
        season=4,
        lstm_hidden_size=4,
        epochs=1,
        batch_size=8,
        baselines="all",
        test_size=6,
        val_size=8,
        run_dir=tmp_path / "run",
        retrain="off",
    ).fit(_panel())
    run = model.run_dir
    report = json.loads((run / "report.json").read_text())
    info = read_run_info(run)
    cfg = info.config.data
    _, series = load_series(info, None)
    splits, _ = make_splits(series, cfg, scaler=info.scaler)
    frame = predict(run, combine=True)
    entry = report["combination"]
    assert entry["forecasters"] == ["model", *baselines.STATISTICAL]
    scaled = []  # each validation window's errors of the combination over its origin's scale
    for i, name in enumerate(splits.val.ids):
        held = splits.val.held.offsets
        history = splits.val.history[held[i] : held[i + 1]]
        mine = frame[frame["id"] == name]
        rows = np.arange(len(history))  # every origin: a panel's windows are padded
        assert cfg.padded and len(mine) == len(rows)
        model_at = {h: mine[f"y_h{h + 1}"].to_numpy() for h in range(2)}
        model_all = np.stack([model_at[0], model_at[1]], axis=1)[:, :, None]  # (n, 2, 1)

        def origins(windows, i=i):
            return windows.local_origin[windows.series == i]

        val = origins(splits.val)
        y_val = np.stack([history[val + 1], history[val + 2]], axis=1)  # (n, 2, 1)
        stat_val = baselines.statistical_forecasts(history, val, 2, 4)
        errors = {"model": np.mean(np.abs(y_val - model_all[val - rows[0]]))}
        errors.update({k: np.mean(np.abs(y_val - v)) for k, v in stat_val.items()})
        weights = _hand_weights(errors)
        assert entry["per_series"][name]["pooled"] is False
        assert entry["per_series"][name]["weights"] == pytest.approx(weights, rel=1e-9)
        mixed_val = weights["model"] * model_all[val - rows[0]]
        mixed_val = mixed_val + sum(weights[k] * v for k, v in stat_val.items())
        scales = np.array([_scale(history, o, 4) for o in val])  # (n, 1)
        scaled.append(np.abs(y_val - mixed_val) / scales[:, None, :])
        # the report's test combination of this series
        test = origins(splits.test)
        y_test = np.stack([history[test + 1], history[test + 2]], axis=1)
        # one fit at the first validation origin forecasts the validation and the test
        both = baselines.statistical_forecasts(history, np.concatenate([val, test]), 2, 4)
        stat_test = {k: v[len(val) :] for k, v in both.items()}
        mixed = weights["model"] * model_all[test - rows[0]]
        mixed = mixed + sum(weights[k] * v for k, v in stat_test.items())
        scores = report["per_series"][name]["test"]["combination"]
        assert scores["mae"] == pytest.approx(np.mean(np.abs(y_test - mixed)), rel=1e-9)
        # predict: the statistical baselines fitted at the series' first origin with a full
        # window (row 5), and the padded origins before it by a fit at its first row; a
        # model that cannot fit on so few rows is left out, the others' weights renormalised
        hand = np.zeros_like(model_all)
        for part in (rows < cfg.window - 1, rows >= cfg.window - 1):
            stat_all = baselines.statistical_forecasts(history, rows[part], 2, 4)
            used = {
                "model": model_all[part],
                **{k: v for k, v in stat_all.items() if v is not None},
            }
            total = sum(weights[k] for k in used)
            hand[part] = sum(weights[k] / total * v for k, v in used.items())
        for h in range(2):
            np.testing.assert_allclose(mine[f"y_h{h + 1}_combination"], hand[:, h, 0], rtol=1e-9)
    # the intervals' half-widths: both series' scaled errors pooled, per horizon step
    scaled = np.concatenate(scaled)
    for level, name in ((0.8, "80"), (0.95, "95")):
        half = [[_conformal(scaled[:, k, 0], level)] for k in range(2)]
        np.testing.assert_allclose(entry["halfwidths"][name], half, rtol=1e-9)
    _future_combination_fits_every_row(run, entry, frame)
    # the estimator: the combination's intervals at the levels asked for (the model, trained
    # with the mean squared error and without `conformal`, has none of its own)
    future = predict(run, combine=True, format="long")
    got = model.predict(combine=True, level=[80])
    assert list(got.columns) == [
        "unique_id", "ds", "stacklstm", "stacklstm-combination",
        "stacklstm-combination-lo-80", "stacklstm-combination-hi-80",
    ]  # fmt: skip
    for side in ("lo", "hi"):
        np.testing.assert_allclose(
            got[f"stacklstm-combination-{side}-80"], future[f"combination-{side}-80"]
        )
    with pytest.raises(ValueError, match="no interval at level 90"):
        model.predict(combine=True, level=[90])


def _future_combination_fits_every_row(run, entry, frame):
    """The future (the long format): the statistical models of the combination fitted on
    each series' every row, as statsforecast's own ``forecast`` fits them, and weighed with
    the model's forecast from the series' last row."""
    from statsforecast.models import AutoARIMA, AutoETS, AutoTheta

    future = predict(run, combine=True, format="long")
    models = {"auto_ets": AutoETS, "auto_arima": AutoARIMA, "auto_theta": AutoTheta}
    for name, rows in _panel().groupby("unique_id"):
        y = rows["y"].to_numpy()
        theirs = {k: m(season_length=4).forecast(y=y, h=2)["mean"] for k, m in models.items()}
        last = frame[frame["id"] == name].iloc[-1]
        weights = entry["per_series"][name]["weights"]
        hand = weights["model"] * last[["y_h1", "y_h2"]].to_numpy(float)
        hand = hand + sum(weights[k] * v for k, v in theirs.items())
        mine = future[future["unique_id"] == name]
        np.testing.assert_allclose(mine["combination"], hand, rtol=1e-6)
        # its intervals: the half-widths times the series' scale over its every row
        width = np.ravel(entry["halfwidths"]["80"]) * _scale(y, len(y) - 1, 4)
        np.testing.assert_allclose(mine["combination-lo-80"], mine["combination"] - width)
        np.testing.assert_allclose(mine["combination-hi-80"], mine["combination"] + width)
        np.testing.assert_allclose(mine["stacklstm"], last[["y_h1", "y_h2"]].to_numpy(float))


class _Windows:
    """The parts of a panel's WindowSet the combination reads: series "a" has 2 windows,
    "b" none, "c" 1 (horizon 1, one target)."""

    def __init__(self, y_true, series):
        self.y_true, self.series = np.asarray(y_true, dtype=float), np.asarray(series)
        self.ids, self.horizon, self.n_targets = ("a", "b", "c"), 1, 1
        self.held = type("Held", (), {"offsets": np.array([0, 10, 20, 30])})()

    def __len__(self):
        return len(self.series)


def test_panel_weights_per_series_fall_back_to_the_pooled_ones():
    from stacklstm.forecasting.combination import combined, fit_weights

    val = _Windows(np.array([10.0, 12.0, 20.0]).reshape(3, 1, 1), [0, 0, 2])
    model = np.array([11.0, 13.0, 24.0]).reshape(3, 1, 1)  # errors 1, 1 | 4
    ets = np.array([12.0, 14.0, 21.0]).reshape(3, 1, 1)  # errors 2, 2 | 1
    forecasts = {"model": model, "auto_ets": ets, "auto_arima": None, "auto_theta": None}
    entry = fit_weights(val, forecasts, "all", 4)
    assert entry["val_mae"] == pytest.approx(
        {"model": 2.0, "auto_ets": 5 / 3, "auto_arima": None, "auto_theta": None}
    )
    # pooled: 1/2 : 3/5 -> 5/11, 6/11
    assert entry["weights"] == pytest.approx({"model": 5 / 11, "auto_ets": 6 / 11})
    per = entry["per_series"]
    assert per["a"] == {
        "val_mae": {"model": 1.0, "auto_ets": 2.0, "auto_arima": None, "auto_theta": None},
        "weights": pytest.approx({"model": 2 / 3, "auto_ets": 1 / 3}),
        "pooled": False,
    }
    assert per["b"]["pooled"] is True and per["b"]["weights"] == entry["weights"]
    assert per["c"]["weights"] == pytest.approx({"model": 0.2, "auto_ets": 0.8})
    # the test windows: a series' own weights, the pooled ones for "b"
    test = _Windows(np.zeros((3, 1, 1)), [0, 1, 2])
    points = {"model": np.array([1.0, 1.0, 1.0]).reshape(3, 1, 1),
              "auto_ets": np.array([4.0, 12.0, 6.0]).reshape(3, 1, 1)}  # fmt: skip
    out = combined(test, points, entry)
    np.testing.assert_allclose(out.ravel(), [2 / 3 + 4 / 3, 5 / 11 + 12 * 6 / 11, 0.2 + 0.8 * 6.0])


def test_median_and_weighted_takes_each_series_own_weights():
    """``"median_and_weighted"``: per series, the mean of the median of the forecasters its
    weights name and the weighted mean with those weights (the pooled ones for "b")."""
    from stacklstm.forecasting.combination import combined, fit_weights

    val = _Windows(np.array([10.0, 12.0, 20.0]).reshape(3, 1, 1), [0, 0, 2])
    forecasts = {
        "model": np.array([11.0, 13.0, 24.0]).reshape(3, 1, 1),  # errors 1, 1 | 4
        "auto_ets": np.array([12.0, 14.0, 21.0]).reshape(3, 1, 1),  # errors 2, 2 | 1
        "auto_arima": np.array([13.0, 15.0, 23.0]).reshape(3, 1, 1),  # errors 3, 3 | 3
        "auto_theta": None,
    }
    entry = fit_weights(val, forecasts, "all", 4, method="median_and_weighted")
    assert entry["method"] == "median_and_weighted"
    test = _Windows(np.zeros((3, 1, 1)), [0, 1, 2])
    points = {"model": np.array([1.0, 1.0, 1.0]).reshape(3, 1, 1),
              "auto_ets": np.array([4.0, 12.0, 6.0]).reshape(3, 1, 1),
              "auto_arima": np.array([2.0, 3.0, 9.0]).reshape(3, 1, 1)}  # fmt: skip
    out = combined(test, points, entry).ravel()
    # "a": errors 1, 2, 3 -> weights 6/11, 3/11, 2/11; median of (1, 4, 2) is 2
    a = 0.5 * (2.0 + (6 * 1.0 + 3 * 4.0 + 2 * 2.0) / 11)
    # "b" pooled: errors 2, 5/3, 3 -> 1/2 : 3/5 : 1/3 = 15 : 18 : 10; median of (1, 12, 3): 3
    b = 0.5 * (3.0 + (15 * 1.0 + 18 * 12.0 + 10 * 3.0) / 43)
    # "c": errors 4, 1, 3 -> 1/4 : 1 : 1/3 = 3 : 12 : 4; median of (1, 6, 9): 6
    c = 0.5 * (6.0 + (3 * 1.0 + 12 * 6.0 + 4 * 9.0) / 19)
    np.testing.assert_allclose(out, [a, b, c], rtol=1e-12)


def _two_series_windows():
    """A real WindowSet over two series (12 and 10 rows), horizon 2: 3 windows of "a", 2 of
    "b", the last 1-2 targets of "b"'s last window past its end (NaN)."""
    from stacklstm.data.windowset import HeldSeries, WindowSet

    rng = np.random.default_rng(3)
    values = np.concatenate([10 + np.cumsum(rng.normal(size=12)), 50 + 5 * rng.normal(size=10)])
    held = HeldSeries(
        model=values[:, None], original=values[:, None], times=None,
        offsets=np.array([0, 12, 22]), ids=("a", "b"),
        center=np.zeros((2, 1)), scale=np.ones((2, 1)),
    )  # fmt: skip
    origin, series = np.array([7, 8, 9, 19, 21]), np.array([0, 0, 0, 1, 1])
    return WindowSet(held, origin, series, np.zeros((5, 1)), values[origin][:, None],
                     window=3, horizon=2, difference=False)  # fmt: skip


def test_stacked_fits_one_set_of_weights_on_every_series_windows():
    """``"stacked"``: one set of weights for the panel, of the lowest mean MASE on every
    validation window (the seasonal naive forecast weighed too): here the targets are 0.4 x
    the model + 0.6 x AutoETS exactly, and every series takes those weights."""
    from stacklstm import combine
    from stacklstm.forecasting.combination import combined, fit_weights, origin_scales

    val = _two_series_windows()
    y, d = val.y_true, np.random.default_rng(4).normal(size=(5, 2, 1))
    forecasts = {"model": y + d, "auto_ets": y - d * 0.4 / 0.6,
                 "auto_arima": y + 3.0, "auto_theta": None}  # fmt: skip
    entry = fit_weights(val, forecasts, "all", 4, method="stacked")
    assert entry["method"] == "stacked"
    assert entry["forecasters"] == ["model", *baselines.STATISTICAL, "seasonal_naive"]
    weights = {"model": 0.4, "auto_ets": 0.6, "auto_arima": 0.0, "seasonal_naive": 0.0}
    assert entry["weights"] == pytest.approx(weights, abs=1e-7)
    for name in ("a", "b"):
        own = entry["per_series"][name]
        assert own["pooled"] is True and own["weights"] == entry["weights"]
    assert entry["per_series"]["a"]["val_mae"]["auto_arima"] == pytest.approx(3.0)
    # the combination from other origins: the weighted mean with those weights
    points = {"model": np.full((5, 2, 1), 1.0), "auto_ets": np.full((5, 2, 1), 6.0),
              "auto_arima": np.full((5, 2, 1), 100.0),
              "seasonal_naive": np.full((5, 2, 1), 100.0)}  # fmt: skip
    np.testing.assert_allclose(combined(val, points, entry), 0.4 + 0.6 * 6.0, rtol=1e-6)
    # no exact mix: the weights are the lowest mean MASE's, each window scaled by its
    # series' rows up to its origin, the seasonal naive forecast among the forecasters
    forecasts["auto_ets"] = y + np.random.default_rng(5).normal(size=(5, 2, 1))
    entry = fit_weights(val, forecasts, "all", 4, method="stacked")
    naive = val.seasonal_naive(4)
    hand = combine.stacked_weights(
        {**forecasts, "seasonal_naive": naive}, y, origin_scales(val, 4)[:, None, :]
    )
    assert entry["weights"] == pytest.approx(hand, abs=1e-9)
    assert hand != pytest.approx(
        combine.stacked_weights({**forecasts, "seasonal_naive": naive}, y, 1.0), abs=1e-3
    )
    # the naive baselines: the model and the seasonal naive forecast alone
    entry = fit_weights(val, {"model": y + d}, "naive", 4, method="stacked")
    assert set(entry["weights"]) == {"model", "seasonal_naive"}


def test_combination_median_is_the_median_of_the_weighed_forecasters(trained_run, tmp_path):
    """``combination="median"``: the report's and predict's combination is the median of the
    model and the baselines (with the naive baselines, the mean of the model and the
    seasonal naive), the weights still fitted and saved."""
    from helpers import TINY
    from helpers import _panel as panel
    from stacklstm.estimator import LSTMForecaster
    from stacklstm.report import evaluate_run

    model = LSTMForecaster(**TINY, combination="median", run_dir=tmp_path / "fit").fit(panel())
    report = evaluate_run(model.run_dir)
    entry = report.data["combination"]
    assert entry["method"] == "median" and set(entry["weights"]) == {"model", "seasonal_naive"}
    forecasts = report.test_forecasts
    half = 0.5 * (forecasts["model"] + forecasts["seasonal_naive"])
    np.testing.assert_allclose(forecasts["combination"], half, rtol=1e-12)
    # predict --combine: the method saved in report.json, from every origin
    copy = _copy_without_weights(
        trained_run.out_dir, tmp_path, lambda r: r["combination"].update(method="median")
    )
    _, series, _, values = _co2(copy)
    frame = predict(copy, combine=True)
    origins = pd.Index(series.times).get_indexer(frame["origin"])
    hand = 0.5 * (frame["co2_h1"].to_numpy() + _seasonal_naive(values, origins, 52))
    np.testing.assert_allclose(frame["co2_h1_combination"], hand, rtol=1e-12)


def test_combination_stacked_runs_from_the_estimator_to_predict(tmp_path):
    """``combination="stacked"`` through a fit of a panel: the report saves one set of
    weights that every series takes, its test combination is their weighted mean of the
    model's and the seasonal naive forecasts, and ``predict(combine=True)`` forecasts the
    future with them."""
    from helpers import TINY
    from helpers import _panel as panel
    from stacklstm.estimator import LSTMForecaster
    from stacklstm.report import evaluate_run

    model = LSTMForecaster(**TINY, combination="stacked", run_dir=tmp_path / "fit").fit(panel())
    entry = evaluate_run(model.run_dir).data["combination"]
    assert entry["method"] == "stacked" and set(entry["weights"]) == {"model", "seasonal_naive"}
    assert sum(entry["weights"].values()) == pytest.approx(1.0)
    assert all(s["weights"] == entry["weights"] for s in entry["per_series"].values())
    report = evaluate_run(model.run_dir)
    forecasts, w = report.test_forecasts, entry["weights"]
    mix = w["model"] * forecasts["model"] + w["seasonal_naive"] * forecasts["seasonal_naive"]
    np.testing.assert_allclose(forecasts["combination"], mix, rtol=1e-9)
    # the future: the model's forecast and each series' last season repeated (season 7)
    future = model.predict(combine=True)
    for name, rows in panel().groupby("unique_id"):
        mine = future[future["unique_id"] == name]
        naive = rows["y"].to_numpy()[-7:][:3]
        hand = w["model"] * mine["stacklstm"].to_numpy() + w["seasonal_naive"] * naive
        np.testing.assert_allclose(mine["stacklstm-combination"], hand, rtol=1e-9)


@pytest.mark.slow  # a training run and the statistical baselines' fits: about 25 s
def test_the_accurate_preset_forecasts_the_median_and_weighted_of_the_model_and_statsforecast(
    tmp_path,
):
    """``preset="accurate"``: the future combination is the mean of the median (four
    forecasts: the mean of the middle two) and the weighted mean (each series' weights, the
    inverse of the validation MAEs its report saved) of the model's forecast and
    statsforecast's AutoETS, AutoARIMA and AutoTheta, each fitted on the series' every row."""
    pytest.importorskip("statsforecast")
    from statsforecast.models import AutoARIMA, AutoETS, AutoTheta

    from helpers import TINY
    from stacklstm.estimator import LSTMForecaster

    settings = {k: v for k, v in TINY.items() if k != "baselines"}
    model = LSTMForecaster(preset="accurate", **settings, run_dir=tmp_path / "run")
    data = _panel()
    out = model.fit(data).predict(combine=True)
    assert model.config.train.baselines == "all"
    assert model.config.train.combination == "median_and_weighted"
    horizon, season = model.config.data.horizon, model.config.data.season
    report = json.loads((model.run_dir / "report.json").read_text())["combination"]
    for name, rows in data.groupby("unique_id"):
        y = rows["y"].to_numpy()
        mine = out[out["unique_id"] == name]
        theirs = [
            m(season_length=season).forecast(y=y, h=horizon)["mean"]
            for m in (AutoETS, AutoARIMA, AutoTheta)
        ]
        members = [mine["stacklstm"].to_numpy(), *theirs]
        errors = report["per_series"][name]["val_mae"]
        inverse = [1 / errors[n] for n in ("model", "auto_ets", "auto_arima", "auto_theta")]
        weighted = sum(w * m for w, m in zip(inverse, members, strict=True)) / sum(inverse)
        hand = 0.5 * (np.median(members, axis=0) + weighted)
        np.testing.assert_allclose(mine["stacklstm-combination"], hand, rtol=1e-6)
