"""The pretrained models (stacklstm.pretrained): the shipped weights forecast their check
series with the numbers recorded at training time, the zero-shot path equals ``predict``'s
forecast of unseen series from the run folder the weights came from, the intervals' pieces
against hand values, and every refusal in one line."""

import json

import numpy as np
import pandas as pd
import pytest

from helpers import _main, load_benchmark, raises_one_line
from stacklstm import LSTMForecaster
from stacklstm.forecasting import zeroshot
from stacklstm.forecasting.zeroshot import own_errors, series_scales
from stacklstm.forecasting.zeroshot_intervals import scaled_halfwidths
from stacklstm.pretrained import FAMILIES, available, family_of, forecast, store


def _quarterly(n=40, start="2001-01-01", level=100.0, seed=0):
    rng = np.random.default_rng(seed)
    season = np.tile([3.0, -1.0, -4.0, 2.0], n // 4 + 1)[:n]
    values = level + 0.5 * np.arange(n) + season + rng.normal(0, 0.5, n)
    return pd.DataFrame({"ds": pd.date_range(start, periods=n, freq="QS"), "y": values})


def test_every_family_ships_within_five_megabytes():
    assert available() == list(FAMILIES)
    files = [p for f in FAMILIES for p in store.weights_paths(f)]
    for family in FAMILIES:  # a seed ensemble's other members
        meta = json.loads(store.weights_paths(family)[1].read_text())
        files += [store.weights_dir() / m["file"] for m in meta.get("members", [])]
    assert all(p.is_file() for p in files)
    assert sum(p.stat().st_size for p in files) <= 5_000_000


@pytest.mark.parametrize("family", list(FAMILIES))
def test_shipped_weights_forecast_the_check_series_as_recorded(family):
    meta = json.loads(store.weights_paths(family)[1].read_text())
    got = forecast(store.check_frame(family), level=(80, 95), calibrate="weights")
    assert len(got) == len(meta["check"]["forecast"]["stacklstm"])
    for column, values in meta["check"]["forecast"].items():
        np.testing.assert_allclose(got[column], values, rtol=2e-5, atol=1e-6 * np.abs(values).max())
    # the intervals: the point plus and minus the recorded half-widths times the series'
    # seasonal naive MAE, by hand
    season = FAMILIES[family].season
    for name, rows in store.check_frame(family).groupby("unique_id", sort=False):
        y = rows["y"].to_numpy()
        scale = np.mean(np.abs(y[season:] - y[:-season]))
        mine = got[got["unique_id"] == name]
        for level in ("80", "95"):
            half = scale * np.asarray(meta["intervals"]["halfwidths"][level])
            np.testing.assert_allclose(mine[f"stacklstm-hi-{level}"] - mine["stacklstm"], half)
            np.testing.assert_allclose(mine["stacklstm"] - mine[f"stacklstm-lo-{level}"], half)


def test_zero_shot_equals_predict_of_the_run_the_weights_came_from(tmp_path):
    pretrain = load_benchmark("pretrain", "pretrain_bench")
    pretrain.train_family("quarterly", tmp_path / "w", 0, quick=True, keep=tmp_path / "k")
    frame = pd.concat(
        [
            _quarterly(40).assign(unique_id="a"),
            _quarterly(13, level=5.0, seed=1).assign(unique_id="b"),
        ]
    )
    got = forecast(frame, level=(80,), weights=tmp_path / "w")
    table = tmp_path / "new.csv"
    frame.to_csv(table, index=False)
    from stacklstm.forecasting import predict

    want = predict(tmp_path / "k" / "run", table, format="long", unseen="model")
    np.testing.assert_allclose(got["stacklstm"], want["stacklstm"], rtol=1e-6)
    assert got["ds"].tolist() == want["ds"].tolist()
    assert got["unique_id"].tolist() == ["a"] * 8 + ["b"] * 8
    # the recorded check forecast is the one these weights give
    meta = json.loads((tmp_path / "w" / "quarterly.json").read_text())
    check = forecast(store.check_frame("quarterly"), weights=tmp_path / "w", level=())
    np.testing.assert_allclose(check["stacklstm"], meta["check"]["forecast"]["stacklstm"])


def test_a_seed_ensembles_weights_forecast_the_median_of_its_members(tmp_path, monkeypatch):
    """A family trained with ``ensemble=2`` ships each member's weights; the zero-shot
    forecast is the median of the members' (for two, their mean), as ``predict`` of the
    ensemble's run folder gives it, and each member alone forecasts as its own run."""
    pretrain = load_benchmark("pretrain", "pretrain_bench")
    monkeypatch.setitem(pretrain.SETTINGS, "quarterly", {"season_window": "6", "ensemble": "2"})
    pretrain.train_family("quarterly", tmp_path / "w", 3, quick=True, keep=tmp_path / "k")
    meta = json.loads((tmp_path / "w" / "quarterly.json").read_text())
    assert [(m["file"], m["seed"]) for m in meta["members"]] == [("quarterly-1.npz", 4)]
    second = _quarterly(30, level=9.0, seed=2).assign(unique_id="b")
    frame = pd.concat([_quarterly(40).assign(unique_id="a"), second])
    got = forecast(frame, level=(), weights=tmp_path / "w")
    table = tmp_path / "new.csv"
    frame.to_csv(table, index=False)
    from stacklstm.forecasting import predict
    from stacklstm.forecasting.inference import member_dir

    each = [
        predict(member_dir(tmp_path / "k" / "run", k), table, format="long", unseen="model")
        for k in range(2)
    ]
    assert not np.allclose(each[0]["stacklstm"], each[1]["stacklstm"])  # two seeds differ
    mean = (each[0]["stacklstm"].to_numpy() + each[1]["stacklstm"].to_numpy()) / 2
    np.testing.assert_allclose(got["stacklstm"], mean, rtol=1e-6)
    whole = predict(tmp_path / "k" / "run", table, format="long", unseen="model")
    np.testing.assert_allclose(got["stacklstm"], whole["stacklstm"], rtol=1e-6)
    # a member's file damaged or gone: refused, naming it
    member = tmp_path / "w" / "quarterly-1.npz"
    member.write_bytes(member.read_bytes()[:-1] + b"x")
    with pytest.raises(ValueError, match=r"quarterly-1\.npz differs from the SHA-256"):
        store.read_members("quarterly", tmp_path / "w")
    member.unlink()
    with pytest.raises(ValueError, match=r"quarterly-1\.npz of the quarterly weights is missing"):
        store.read_members("quarterly", tmp_path / "w")


def test_each_series_is_forecast_on_its_own_rows():
    a, b = _quarterly(40), _quarterly(3, start="2005-01-01", level=7.0, seed=3)
    both = forecast(pd.concat([a.assign(unique_id="long"), b.assign(unique_id="short")]), h=4)
    alone = forecast(b, h=4, target="y")
    np.testing.assert_allclose(both["stacklstm"].iloc[4:], alone["stacklstm"], rtol=1e-6)
    np.testing.assert_allclose(both["stacklstm-hi-95"].iloc[4:], alone["stacklstm-hi-95"])
    assert np.isfinite(both["stacklstm"]).all()
    assert alone["unique_id"].unique().tolist() == ["y"]  # one series: named by its target
    stamps = pd.date_range("2005-10-01", periods=4, freq="QS")
    assert pd.DatetimeIndex(alone["ds"]).equals(stamps)


def test_scales_and_halfwidths_against_hand_values():
    values = np.array([1.0, 2.0, 4.0, 7.0, 5.0, 8.0, 9.0])
    # season 2: [1, 2, 4, 7]: |4 - 1|, |7 - 2| -> 4; [5, 8] (no more than a season): lag 1,
    # |8 - 5| -> 3; [9], one row: no scale
    np.testing.assert_allclose(series_scales(values, np.array([0, 4, 6, 7]), 2), [4.0, 3.0, np.nan])
    errors = np.array([[1.0, 10.0], [2.0, np.nan], [3.0, 30.0], [4.0, 40.0]])
    out = scaled_halfwidths(errors, [50, 80])
    # step 1: n=4, ceil(5 * 0.5) = 3rd -> 3; ceil(5 * 0.8) = 4th -> 4
    # step 2: the NaN left out, n=3, ceil(4 * 0.5) = 2nd -> 30; ceil(4 * 0.8) = 4 -> 3rd, 40
    np.testing.assert_allclose(out["50"], [3.0, 30.0])
    np.testing.assert_allclose(out["80"], [4.0, 40.0])


@pytest.mark.parametrize(
    ("freq", "family"),
    [("YS", "yearly"), ("YE-DEC", "yearly"), ("QE", "quarterly"), ("QS-OCT", "quarterly"),
     ("MS", "monthly"), ("ME", "monthly"), ("W-SUN", "weekly"), ("D", "daily"), ("B", "daily"),
     ("h", "hourly")],
)  # fmt: skip
def test_family_of_each_step(freq, family):
    assert family_of(freq) == family


def _panel_of_three():
    return pd.concat(
        [
            _quarterly(40).assign(unique_id="a"),
            _quarterly(30, level=20.0, seed=1).assign(unique_id="b"),
            _quarterly(13, level=5.0, seed=2).assign(unique_id="c"),
        ]
    )


def test_own_errors_are_each_series_forecast_from_its_earlier_rows_by_hand():
    frame, h = _panel_of_three(), 4
    model = zeroshot.load("quarterly")
    # 3 series of 7 rows or more give 3 windows a round: ceil(50 / 3) = 17 rounds, at most
    # h = 4; c (13 rows) keeps 3 rows or more before each of them
    want = []
    for back in range(4):
        for _, rows in frame.groupby("unique_id", sort=True):
            cut = len(rows) - h - back
            before = rows.iloc[:cut]
            point = forecast(before.drop(columns="unique_id"), h, level=())["stacklstm"]
            scale = series_scales(before["y"].to_numpy(), np.array([0, cut]), 4)[0]
            actual = rows["y"].to_numpy()[cut : cut + h]
            want.append(np.abs(actual - point.to_numpy()) / scale)
    got = own_errors(model, frame.sample(frac=1.0, random_state=0), h)  # rows in any order
    assert got.shape == (12, h)
    np.testing.assert_allclose(got, np.stack(want), rtol=1e-5)


def test_own_intervals_are_the_conformal_quantile_of_the_own_errors(monkeypatch):
    frame, h = _panel_of_three(), 4
    errors = own_errors(zeroshot.load("quarterly"), frame, h)
    got = forecast(frame, h, level=(80, 50), calibrate="own")
    n = len(errors)  # 12 windows: ceil(13 * 0.8) = 11th and ceil(13 * 0.5) = 7th smallest
    for level, rank in (("80", 11), ("50", 7)):
        half = np.sort(errors, axis=0)[rank - 1]
        assert rank == int(np.ceil((n + 1) * int(level) / 100))
        for name, rows in frame.groupby("unique_id"):
            y = rows["y"].to_numpy()
            scale = np.mean(np.abs(y[4:] - y[:-4]))
            mine = got[got["unique_id"] == name]
            np.testing.assert_allclose(mine[f"stacklstm-hi-{level}"] - mine["stacklstm"],
                                       scale * half, rtol=1e-5)  # fmt: skip
            np.testing.assert_allclose(mine["stacklstm"] - mine[f"stacklstm-lo-{level}"],
                                       scale * half, rtol=1e-5)  # fmt: skip
    # "auto": the table's 12 windows are fewer than 50, so the weights' half-widths; with a
    # lower bar, the table's own
    weights = forecast(frame, h, level=(80,), calibrate="weights")
    pd.testing.assert_frame_equal(forecast(frame, h, level=(80,)), weights)
    assert not np.allclose(weights["stacklstm-hi-80"], got["stacklstm-hi-80"])
    monkeypatch.setattr(zeroshot, "MIN_OWN_WINDOWS", 12)
    pd.testing.assert_frame_equal(forecast(frame, h, level=(80,), blend="none"), got.drop(
        columns=["stacklstm-lo-50", "stacklstm-hi-50"]))  # fmt: skip
    # no intervals asked and too few windows to blend: the table's windows are not forecast
    monkeypatch.setattr(zeroshot, "MIN_OWN_WINDOWS", 50)
    monkeypatch.setattr(zeroshot, "own_windows", None)
    assert forecast(frame, h, level=(), calibrate="own").columns.tolist() == [
        "unique_id", "ds", "stacklstm"]  # fmt: skip


def _trending_panel(n=20, length=24):
    """Quarterly series of a steady trend and season and a little noise: the seasonal naive
    forecast with drift all but exact on them."""
    rng = np.random.default_rng(5)
    frames = []
    for i in range(n):
        t = np.arange(length)
        season = np.tile([4.0, -2.0, -5.0, 3.0], length // 4) * (1 + i % 3)
        values = 50.0 + (1.0 + 0.3 * i) * t + season + rng.normal(0, 0.2, length)
        frames.append(pd.DataFrame({"unique_id": f"s{i}", "ds": pd.date_range(
            "2000", periods=length, freq="QS"), "y": values}))  # fmt: skip
    return pd.concat(frames, ignore_index=True)


def _benchmarks_by_hand(y, h, season=4):
    k = np.arange(1, h + 1)
    naive = np.resize(y[-season:], h)
    change = np.mean(y[season:] - y[:-season])
    return {"seasonal_naive": naive, "seasonal_drift": naive + change * np.ceil(k / season)}


def test_the_blend_is_the_candidate_of_the_lowest_own_window_error_by_hand():
    frame, h = _trending_panel(), 4
    # 20 series of 24 rows: ceil(50 / 20) = 3 origins each, 60 windows, each series forecast
    # alone from its rows before the origin, by the model and by the benchmarks by hand
    rows = {c: [] for c in ("point", "seasonal_naive", "seasonal_drift", "actual", "scale")}
    for back in range(3):
        for _, series in frame.groupby("unique_id", sort=False):
            y = series["y"].to_numpy()
            cut = len(y) - h - back
            before = series.iloc[:cut].drop(columns="unique_id")
            rows["point"].append(forecast(before, h, level=(), blend="none")["stacklstm"])
            for name, values in _benchmarks_by_hand(y[:cut], h).items():
                rows[name].append(values)
            rows["actual"].append(y[cut : cut + h])
            rows["scale"].append(np.mean(np.abs(y[4:cut] - y[: cut - 4])))
    hand = {c: np.asarray(v, np.float64) for c, v in rows.items()}
    errors = {}
    for weight in (1.0, 0.75, 0.5, 0.25, 0.0):
        for name in ("seasonal_naive", "seasonal_drift"):
            blend = weight * hand["point"] + (1 - weight) * hand[name]
            errors[(weight, name)] = np.abs(hand["actual"] - blend) / hand["scale"][:, None]
    weight, name = min(errors, key=lambda key: errors[key].mean())  # the first of the lowest
    assert weight < 1.0  # the drift beats the model on these series: the test can tell
    got = forecast(frame, h, level=(80,))
    alone = forecast(frame, h, level=(), blend="none")
    assert got.attrs["blend"] == f"{weight:g} x the model + {1 - weight:g} x {name}"
    for i, (_, series) in enumerate(frame.groupby("unique_id", sort=False)):
        y = series["y"].to_numpy()
        mine = slice(i * h, (i + 1) * h)
        want = weight * alone["stacklstm"].to_numpy()[mine] + (1 - weight) * _benchmarks_by_hand(
            y, h)[name]  # fmt: skip
        np.testing.assert_allclose(got["stacklstm"].to_numpy()[mine], want, rtol=1e-5)
        # the intervals: the conformal quantile of the chosen blend's own-window errors
        rank = int(np.ceil(61 * 0.8))  # 60 windows: the 49th smallest
        half = np.sort(errors[(weight, name)], axis=0)[rank - 1]
        scale = np.mean(np.abs(y[4:] - y[:-4]))
        np.testing.assert_allclose(got["stacklstm-hi-80"].to_numpy()[mine] - want,
                                   scale * half, rtol=1e-4)  # fmt: skip


def test_a_table_of_too_few_windows_or_blend_none_forecasts_the_model_alone():
    frame, h = _trending_panel(n=4), 4  # 4 series: 16 windows, fewer than 50
    alone = forecast(frame, h, level=(), blend="none")
    got = forecast(frame, h, level=())
    pd.testing.assert_frame_equal(got, alone)
    assert got.attrs["blend"] == alone.attrs["blend"] == "the model alone"


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("15min", "no pretrained model for a time step of '15min'"),
        ("calibrate", "calibrate must be one of 'auto', 'own', 'weights', got 'mine'"),
        ("blend", "blend must be one of 'auto', 'none', got 'mine'"),
        ("own", "calibrate='own' needs a series with a scale and at least 11 rows"),
        ("percent", r"an interval level is a percentage in \(0, 100\), got 100"),
        ("h", "h must be a whole number of steps in 1..8"),
        ("column", "the table has no column 'sales'"),
        ("level", "no interval at level 50: the pretrained model is calibrated at 80, 95"),
        ("text", "the target column 'y' must hold numbers"),
        ("few", "cannot tell the time step"),
        ("years", "the time column 'ds' holds numbers"),
    ],
)
def test_forecast_refuses_in_one_line(change, message):
    frame, kwargs = _quarterly(12), {}
    if change == "15min":
        frame["ds"] = pd.date_range("2020", periods=12, freq="15min")
    elif change == "h":
        kwargs["h"] = 9
    elif change == "column":
        kwargs["target"] = "sales"
    elif change == "level":
        kwargs["level"] = (50,)
    elif change == "calibrate":
        kwargs["calibrate"] = "mine"
    elif change == "blend":
        kwargs["blend"] = "mine"
    elif change == "own":
        frame, kwargs["calibrate"] = frame.head(10), "own"
    elif change == "percent":
        kwargs["level"] = (80, 100)
    elif change == "text":
        frame["y"] = frame["y"].astype(str)
    elif change == "few":
        frame = frame.head(2)
    elif change == "years":
        frame["ds"] = np.arange(2000, 2012)
    raises_one_line(message, forecast, frame, error=ValueError, **kwargs)


def test_forecast_refuses_what_is_no_frame():
    raises_one_line("df must be a pandas DataFrame", forecast, [1, 2], error=TypeError)


def test_estimator_pretrained_is_the_forecast_under_its_column_names():
    frame = _quarterly(30).rename(columns={"ds": "when", "y": "sales"}).assign(store=1)
    model = LSTMForecaster.pretrained(id_col="store", time_col="when", target_col="sales")
    got = model.predict(frame, h=3, level=[80])
    want = forecast(frame, 3, target="sales", time_column="when", id_column="store", level=(80,))
    assert got.columns.tolist() == [
        "store",
        "when",
        "stacklstm",
        "stacklstm-lo-80",
        "stacklstm-hi-80",
    ]
    assert got["store"].tolist() == [1, 1, 1]  # the ids in their dtype
    np.testing.assert_array_equal(got["stacklstm"], want["stacklstm"])
    assert model.predict(frame, h=1).columns.tolist() == ["store", "when", "stacklstm"]
    own = model.predict(frame, h=3, level=[80], calibrate="own")
    want = forecast(frame, 3, target="sales", time_column="when", id_column="store", level=(80,),
                    calibrate="own")  # fmt: skip
    np.testing.assert_array_equal(own["stacklstm-hi-80"], want["stacklstm-hi-80"])
    assert not np.allclose(own["stacklstm-hi-80"], got["stacklstm-hi-80"])


def test_cli_forecast_writes_the_library_forecast(tmp_path):
    table = tmp_path / "sales.csv"
    frame = pd.concat([_quarterly(30).assign(shop="x"), _quarterly(20, seed=2).assign(shop="y")])
    frame.to_csv(table, index=False)
    out = tmp_path / "future.csv"
    flags = ["--target", "y", "--time-column", "ds", "--id-column", "shop", "--horizon", "5"]
    code, stdout, stderr = _main("forecast", "--data", table, *flags, "--output", out)
    assert code == 0, stderr
    assert "wrote 10 forecasts" in stdout
    written = pd.read_csv(out)
    want = forecast(frame, 5, id_column="shop")
    np.testing.assert_allclose(written["stacklstm"], want["stacklstm"])
    assert written.columns.tolist() == want.columns.tolist()
    code, _, stderr = _main("forecast", "--data", table, *flags, "--calibrate", "own",
                            "--output", out)  # fmt: skip
    assert code == 0, stderr
    own = forecast(frame, 5, id_column="shop", calibrate="own")
    np.testing.assert_allclose(pd.read_csv(out)["stacklstm-hi-95"], own["stacklstm-hi-95"])
    assert not np.allclose(own["stacklstm-hi-95"], want["stacklstm-hi-95"])


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--horizon", "99"], "--horizon must be a whole number of steps in 1..13"),
        (["--target", "sales"], "the table has no column 'sales'"),
        (["--level", "x"], "expected percentages such as 80,95"),
        (["--freq", "15min"], "no pretrained model for a time step of '15min'"),
        (["--calibrate", "mine"], "--calibrate: invalid choice: 'mine'"),
        (["--blend", "mine"], "--blend: invalid choice: 'mine'"),
    ],
)
def test_cli_forecast_refuses_in_one_line(argv, message):
    code, _, stderr = _main("forecast", *argv)
    assert code == 2
    assert message in stderr and stderr.count("\n") == 1


def test_cli_forecast_never_overwrites_its_table(tmp_path):
    table = tmp_path / "t.csv"
    _quarterly(20).to_csv(table, index=False)
    before = table.read_bytes()
    flags = ["--target", "y", "--time-column", "ds"]
    code, _, stderr = _main("forecast", "--data", table, *flags, "--output", table)
    assert code == 2 and table.read_bytes() == before
    assert "would replace the table" in stderr or "table" in stderr


def test_benchmark_forecasts_of_short_series_by_hand():
    from stacklstm.forecasting.zeroshot_blend import benchmark_forecasts

    # season 4: [1..6] has more than a season: the last four repeated, plus the mean change
    # over a season (4) each season ahead; [10, 13] (a season or less): the last value and
    # the mean change over one step (3); [7] (one row): the value, no change
    values = np.array([1.0, 2, 3, 4, 5, 6, 10, 13, 7])
    out = benchmark_forecasts(values, np.array([0, 6, 8, 9]), 4, 5)
    np.testing.assert_allclose(out["seasonal_naive"], [[3, 4, 5, 6, 3], [13] * 5, [7] * 5])
    np.testing.assert_allclose(
        out["seasonal_drift"],
        [[7, 8, 9, 10, 11], [16, 19, 22, 25, 28], [7] * 5],
    )
