"""``stacklstm export`` for every kind of single run: a panel (deseasonalised too), known-future
and static covariates, the calendar, quantile and distribution losses, conformal intervals.
Each exported file forecasts, points and quantiles, what ``stacklstm predict`` does on the
same rows."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from stacklstm import serving
from stacklstm.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from stacklstm.forecasting import predict
from stacklstm.forecasting.export import export_run
from stacklstm.forecasting.inference import load_series
from stacklstm.intervals import level_key
from stacklstm.run import fit
from stacklstm.rundir.info import read_run_info

pytest.importorskip("flatbuffers", reason="jax.export serialisation needs flatbuffers")

TINY_MODEL = ModelConfig(lstm_hidden_size=4, num_lstm_layers=1, linear_layer_sizes=())
LEVELS = {"a": 100.0, "b": 5.0, "c": -30.0}  # a panel's series: each its own scale
SEASON = np.array([4.0, -2.0, 1.0, 3.0, -5.0, 0.5, 2.5, -1.5, -3.0, 1.5, 0.0, -0.5])


def _panel(n=60, freq="D", static=False, start_gap=0, growing=False):
    """Three series of ``n`` rows at very different levels; with ``start_gap`` series ``k``
    starts ``k * start_gap`` steps later (so its phase 0 differs from the first series');
    with ``growing``, series ``a``'s season grows with its level (the others' do not, and
    they reach negative values)."""
    rng = np.random.default_rng(7)
    blocks = []
    for k, (name, level) in enumerate(LEVELS.items()):
        t = np.arange(n)
        dates = pd.date_range("2001-01-01", periods=n + k * start_gap, freq=freq)[k * start_gap :]
        phase = (t + k * start_gap) % 12
        y = level + (1 + k) * (0.05 * t + SEASON[phase]) + rng.normal(0, 0.2 * (1 + k), n)
        if growing and name == "a":
            y = level * 1.03**t * (1 + 0.04 * SEASON[phase]) * np.exp(rng.normal(0, 0.01, n))
        block = pd.DataFrame({"id": name, "date": dates, "y": y})
        if static:
            block["size"] = 10.0 * (k + 1) ** 2
        blocks.append(block)
    return pd.concat(blocks, ignore_index=True)


def _future_table(n=80, horizon=3):
    """One daily series driven by a known-future ``promo``, with ``horizon`` future rows."""
    rng = np.random.default_rng(8)
    promo = rng.integers(0, 2, n + horizon).astype(float)
    y = 50 + 0.1 * np.arange(n + horizon) + 4 * promo + rng.normal(0, 0.3, n + horizon)
    y[n:] = np.nan  # the future rows: target empty, promo known
    dates = pd.date_range("2002-03-01", periods=n + horizon, freq="D")
    return pd.DataFrame({"date": dates, "y": y, "promo": promo})


def _calendar_table(n=90):
    rng = np.random.default_rng(9)
    dates = pd.date_range("2003-01-01", periods=n, freq="D")
    y = 20 + 3 * (dates.dayofweek.to_numpy() >= 5) + rng.normal(0, 0.3, n)
    return pd.DataFrame({"date": dates, "y": y})


def _single(n=80):
    rng = np.random.default_rng(10)
    t = np.arange(n)
    y = 200 + 0.3 * t + 2 * np.sin(t / 4) + rng.normal(0, 0.5, n)
    return pd.DataFrame({"date": pd.date_range("2004-01-01", periods=n, freq="D"), "y": y})


def _train(loss="mse", conformal=False, levels=(0.8,)):
    return TrainConfig(
        epochs=2,
        batch_size=16,
        baselines="naive",
        loss=loss,
        conformal=conformal,
        interval_levels=levels,
    )


PANEL = {"id_column": "id", "window": 6, "horizon": 2, "deseasonalize": False}
SINGLE = DataConfig(window=6, horizon=2, deseasonalize=False)
FUTURE = DataConfig(
    future_features=("promo",), window=6, horizon=3, difference=True, deseasonalize=False
)
KINDS = {
    "panel": (_panel(), DataConfig(**PANEL), _train()),
    "panel_deseasonalised": (
        _panel(84, "MS", start_gap=5),
        DataConfig(**{**PANEL, "deseasonalize": True}, season=12, difference=True),
        _train(),
    ),
    # each series on its own scale: a on log1p (its season grows with its level), b, c not
    "panel_per_series": (
        _panel(84, "MS", start_gap=5, growing=True),
        DataConfig(**{**PANEL, "deseasonalize": True}, season=12, target_transform="auto"),
        _train(),
    ),
    "future_covariates": (_future_table(), FUTURE, _train()),
    "static_covariates": (
        _panel(static=True),
        DataConfig(**PANEL, static_features=("size",), normalize="none"),
        _train(),
    ),
    "calendar": (
        _calendar_table(),
        DataConfig(calendar="auto", window=7, horizon=2, deseasonalize=False),
        _train(),
    ),
    "quantile": (_single(), SINGLE, _train("quantile", levels=(0.5, 0.8))),
    "normal": (_single(), SINGLE, _train("normal")),
    "student_t": (_single(), SINGLE, _train("student_t")),
    "conformal": (_single(), SINGLE, _train(conformal=True, levels=(0.8, 0.95))),
    # calibrated quantiles of a quantile head, of a panel with covariates
    "quantile_conformal": (
        _panel(static=True),
        DataConfig(**PANEL, static_features=("size",)),
        _train("quantile", conformal=True),
    ),
}
#: The kinds whose forecasters give quantiles, and the calibrated ones.
WITH_QUANTILES = ("quantile", "normal", "student_t", "conformal", "quantile_conformal")
CALIBRATED = ("conformal", "quantile_conformal")


@pytest.fixture(scope="module", params=sorted(KINDS))
def exported_run(request, tmp_path_factory):
    """A tiny run of one kind and its exported file: (kind, run folder, forecaster)."""
    kind = request.param
    table, data, train = KINDS[kind]
    folder = tmp_path_factory.mktemp(kind)
    table.to_csv(folder / "table.csv", index=False)
    data = dataclasses.replace(data, target=("y",), time_column="date")
    fit(
        RunConfig(data, TINY_MODEL, train),
        folder / "run",
        quiet=True,
        data_path=folder / "table.csv",
    )
    export_run(folder / "run", folder / "m.stacklstm", platforms=("cpu",))
    return kind, folder / "run", serving.from_bytes((folder / "m.stacklstm").read_bytes())


def _inputs(run_dir, forecaster):
    """The program's inputs for every origin ``stacklstm predict`` forecasts, in its order:
    windows, series names, known-future values over the horizon (the table's future rows
    past a series' end) and static values, cut from the table as predict reads it; a padded
    run's windows (a panel's) start at its first origin, NaN rows before the series."""
    info = read_run_info(run_dir)
    _, series = load_series(info, None, forecast_only=True)
    steps, h, nf = forecaster.input_steps, forecaster.horizon, len(forecaster.future_columns)
    first = info.config.data.min_input_rows - 1  # the first origin predict forecasts from
    pad = steps - 1 - first  # rows missing before the first origin's window
    windows, ids, future, static = [], [], [], []
    for i in range(series.n_series):
        start, stop = series.bounds[i], series.bounds[i + 1]
        values = series.values[start:stop]
        ahead = values[:, values.shape[1] - nf :]
        if series.tail is not None:
            ahead = np.concatenate([ahead, series.tail[i]])
        padded = np.concatenate([np.full((pad, values.shape[1]), np.nan), values])
        for o in range(first, stop - start):
            windows.append(padded[o + pad - steps + 1 : o + pad + 1])
            future.append(ahead[o + 1 : o + 1 + h])
            ids.append(None if series.ids is None else series.ids[i])
            static.append(None if series.static is None else series.static[i])
    return {
        "windows": np.stack(windows),
        "ids": None if series.ids is None else ids,
        "future": np.stack(future) if nf else None,
        "static": np.stack(static) if series.static is not None else None,
    }


def _predicted(frame, forecaster):
    """``stacklstm predict``'s frame as ``(n, horizon, n_targets)`` points and ``(n, horizon,
    n_targets, Q)`` quantiles (None without)."""
    n, h, nt = len(frame), forecaster.horizon, len(forecaster.targets)
    point = frame[forecaster.forecast_columns].to_numpy().reshape(n, nt, h).transpose(0, 2, 1)
    if not forecaster.quantiles:
        return point, None
    names = [
        f"{t}_h{k}_q{level_key(q)}"
        for t in forecaster.targets
        for k in range(1, h + 1)
        for q in forecaster.quantiles
    ]
    q = frame[names].to_numpy().reshape(n, nt, h, len(forecaster.quantiles))
    return point, q.transpose(0, 2, 1, 3)


def _frame_levels(frame, forecaster):
    """The quantile levels of predict's columns of the first target's first step."""
    prefix = f"{forecaster.targets[0]}_h1_q"
    return tuple(float(c[len(prefix) :]) for c in frame.columns if c.startswith(prefix))


@pytest.mark.slow
def test_every_kind_of_run_exports_forecasts_equal_to_predict(exported_run):
    kind, run, forecaster = exported_run
    frame = predict(run)
    given = _inputs(run, forecaster)
    assert len(given["windows"]) == len(frame)
    phase = {"last_time": frame["origin"].to_numpy()} if forecaster.seasonal else {}
    point, quantiles = forecaster.forecast(
        given["windows"], ids=given["ids"], future=given["future"], static=given["static"], **phase
    )
    want_point, want_q = _predicted(frame, forecaster)
    assert point.shape == want_point.shape and point.dtype == np.float64
    np.testing.assert_allclose(point, want_point, rtol=0, atol=1e-5)
    assert forecaster.quantiles == _frame_levels(frame, forecaster)
    assert bool(forecaster.quantiles) == (kind in WITH_QUANTILES)
    if want_q is None:
        assert quantiles is None
    else:
        assert quantiles.shape == want_q.shape == (*point.shape, len(forecaster.quantiles))
        np.testing.assert_allclose(quantiles, want_q, rtol=0, atol=1e-5)
        assert (np.diff(quantiles, axis=-1) >= 0).all()
        np.testing.assert_array_equal(
            forecaster.predict_quantiles(
                given["windows"],
                ids=given["ids"],
                future=given["future"],
                static=given["static"],
                **phase,
            ),
            quantiles,
        )
    assert forecaster.conformal == (kind in CALIBRATED)


@pytest.mark.slow
def test_a_panels_auto_transform_logs_the_series_whose_season_grows(exported_run):
    kind, run, _ = exported_run
    if kind != "panel_per_series":
        pytest.skip("one kind")
    info = read_run_info(run)
    assert info.config.data.target_transform == "per_series"
    assert info.scaler.logged.tolist() == [True, False, False]


@pytest.mark.slow
def test_each_input_moves_the_forecast_and_bad_inputs_are_clear_errors(exported_run):
    """The inputs a kind adds matter (another series, other future or static values give
    other forecasts), and a missing, misshapen or unknown one is a ValueError saying what
    was expected."""
    kind, run, f = exported_run
    given = _inputs(run, f)
    frame = predict(run)
    phase = {"last_time": frame["origin"].to_numpy()} if f.seasonal else {}
    x = given["windows"]
    args = {key: given[key] for key in ("ids", "future", "static")}
    base = f.predict(x, **args, **phase)
    info = read_run_info(run)
    assert f.inputs == tuple(
        ["windows"]
        + ["phase"] * bool(f.seasonal)
        + ["ids"] * (given["ids"] is not None)
        + ["future"] * (given["future"] is not None)
        + ["static"] * (given["static"] is not None)
    )
    empty = {
        k: v if v is None or (np.ndim(v) == 1 and k == "static") else v[:0] for k, v in args.items()
    }
    stamps = {"last_time": phase["last_time"][:0]} if phase else {}
    assert f.predict(x[:0], **empty, **stamps).shape == (0, *base.shape[1:])  # no windows
    if given["ids"] is not None:
        assert f.ids == tuple(info.scaler.ids) == ("a", "b", "c")
        other = f.predict(x, **{**args, "ids": ["c"] * len(x)}, **phase)
        assert np.abs(other - base).max() > 1.0  # another series' scaler
        with pytest.raises(ValueError, match=r"no series 'zz' in the run: it was trained on 'a'"):
            f.predict(x, **{**args, "ids": ["a", "zz", *given["ids"][2:]]}, **phase)
        with pytest.raises(ValueError, match=r"pass the series of each window \(ids="):
            f.predict(x, **{**args, "ids": None}, **phase)
        with pytest.raises(ValueError, match=r"got 2 ids for \d+ windows"):
            f.predict(x, **{**args, "ids": ["a", "b"]}, **phase)
    else:
        assert f.ids is None
        with pytest.raises(ValueError, match="trained on one series: it takes no ids"):
            f.predict(x, **{**args, "ids": "a"}, **phase)
    if f.seasonal is not None and f.ids is not None:  # phases count from the first series'
        assert f.seasonal["reference"] == "2001-01-01T00:00:00.000000000"
        np.testing.assert_array_equal(f.phases(["2001-06-01"]), [5])
    if given["future"] is not None:
        assert f.future_columns == (("promo",) if kind == "future_covariates" else f.columns[1:])
        assert f.columns[-len(f.future_columns) :] == f.future_columns
        moved = f.predict(x, **{**args, "future": given["future"] + 1.0}, **phase)
        assert np.abs(moved - base).max() > 1e-4
        with pytest.raises(ValueError, match=r"knows \[.*\] in advance: pass their values"):
            f.predict(x, **{**args, "future": None}, **phase)
        with pytest.raises(ValueError, match=r"expected future of shape \(batch, horizon, n_fut"):
            f.predict(x, **{**args, "future": given["future"][:, :1]}, **phase)
    else:
        assert f.future_columns == ()
    if given["static"] is not None:
        assert f.static_columns == ("size",)
        moved = f.predict(x, **{**args, "static": given["static"] * 2.0}, **phase)
        assert np.abs(moved - base).max() > 1e-4
        first = given["static"][0]  # one row of static values for every window of a series
        np.testing.assert_allclose(  # another batch size: float32 rounding only
            f.predict(x[:3], ids=given["ids"][:3], static=first), base[:3], rtol=0, atol=1e-6
        )
        with pytest.raises(ValueError, match=r"has the static columns \['size'\]: pass"):
            f.predict(x, **{**args, "static": None}, **phase)
        with pytest.raises(ValueError, match=r"expected static of shape \(batch, n_static\)"):
            f.predict(x, **{**args, "static": np.zeros((len(x), 2))}, **phase)
    if not f.quantiles:
        with pytest.raises(ValueError, match="point forecasts only"):
            f.predict_quantiles(x, **args, **phase)
