"""Windows that start before their series' first row (``start_padding``): a panel's series
shorter than ``window`` are trained on and forecast by the model, their missing inputs
repeating the series' first row in model space; the export takes them as NaN rows."""

import logging

import numpy as np
import pandas as pd
import pytest

from helpers import TINY, _panel
from stacklstm import serving
from stacklstm.config import DataConfig
from stacklstm.config.auto import resolve_data_config
from stacklstm.data import prepare_series
from stacklstm.data.windows import make_inference_windows, make_splits
from stacklstm.forecasting.export import export_run
from stacklstm.rundir.info import read_run_info

# exact values: no scaling, no window normalisation, no seasonal pattern
EXACT = {
    "target": ("v",),
    "time_column": None,
    "id_column": "id",
    "scaler": "none",
    "normalize": "none",
    "deseasonalize": False,
    "season": 1,
    "window": 8,
    "horizon": 2,
    "val_size": 2,
    "test_size": 0,
}


def _frame(lengths, seed=0):
    rng = np.random.default_rng(seed)
    return pd.concat(
        [
            pd.DataFrame({"id": name, "v": rng.normal(10.0 * (i + 1), 1.0, n)})
            for i, (name, n) in enumerate(lengths.items())
        ],
        ignore_index=True,
    )


def _splits(frame, **overrides):
    cfg = DataConfig(**{**EXACT, **overrides})
    return make_splits(prepare_series(frame, cfg), cfg)[0], cfg


def test_a_padded_window_repeats_its_series_first_row():
    frame = _frame({"a": 6, "b": 30})
    splits, _ = _splits(frame, start_padding="repeat")
    train = splits.train
    values = {name: frame[frame["id"] == name]["v"].to_numpy() for name in ("a", "b")}
    # a's training rows 0..3 (2 for validation), so origins 0 and 1 (targets 1-2 and 2-3)
    assert train.local_origin[train.series == 0].tolist() == [0, 1]
    assert train.local_origin[train.series == 1].tolist() == list(range(26))
    x, y = train.gather()
    for i in range(len(train)):
        v = values["ab"[train.series[i]]]
        o = int(train.local_origin[i])
        rows = [max(0, o - 7 + k) for k in range(8)]  # by hand: the first row, repeated
        np.testing.assert_array_equal(x[i, :, 0], v[rows].astype(np.float32))
        np.testing.assert_array_equal(y[i, :, 0], v[o + 1 : o + 3].astype(np.float32))


def test_padding_leaves_every_full_window_as_it_was():
    frame = _frame({"a": 6, "b": 30, "c": 14})
    padded, _ = _splits(frame, start_padding="repeat")
    plain, _ = _splits(frame, start_padding="none", strict=False)
    # without padding a (6 rows) is skipped; the others' full windows are the same windows
    for split in ("train", "val"):
        p, q = getattr(padded, split), getattr(plain, split)
        keep = p.series > 0  # b and c: positions 1, 2 padded, 0, 1 plain
        full = keep & (p.local_origin >= 7)
        assert (p.series[full] - 1).tolist() == q.series.tolist()
        assert p.local_origin[full].tolist() == q.local_origin.tolist()
        np.testing.assert_array_equal(p.gather(np.flatnonzero(full))[0], q.gather()[0])


def test_a_padded_window_of_differences_repeats_the_first_difference():
    frame = _frame({"a": 7, "b": 20})
    splits, _ = _splits(frame, start_padding="repeat", difference=True)
    v = frame[frame["id"] == "a"]["v"].to_numpy()
    train = splits.train
    first = np.flatnonzero(train.series == 0)[0]  # origin 1: the first with a difference
    assert train.local_origin[first] == 1
    x = train.gather(np.array([first]))[0][0, :, 0]
    np.testing.assert_allclose(x, np.full(8, v[1] - v[0]), rtol=1e-6)
    assert np.isfinite(train.gather()[0]).all()


def test_inference_windows_of_a_padded_panel_start_at_every_row():
    frame = _frame({"a": 6, "b": 30})
    cfg = DataConfig(**EXACT, start_padding="repeat")
    series = prepare_series(frame, cfg)
    _, scaler = make_splits(series, cfg)
    windows = make_inference_windows(series, cfg, scaler)
    assert windows.local_origin[windows.series == 0].tolist() == list(range(6))
    assert len(windows) == 6 + 30


def test_auto_pads_a_panel_and_not_one_series():
    panel = resolve_data_config(DataConfig(id_column="id"), "D")
    single = resolve_data_config(DataConfig(), "D")
    assert (panel.start_padding, panel.padded) == ("repeat", True)
    assert (single.start_padding, single.padded) == ("none", False)
    assert DataConfig(window=8, horizon=3, start_padding="repeat").window_rows == 4


def test_a_series_too_short_even_padded_is_named(caplog):
    frame = _frame({"a": 2, "b": 30})  # a: no training row, even with its validation rows
    splits, _ = _splits(frame, start_padding="repeat")
    assert splits.series.ids == ("b",)
    assert "one input row (start_padding) + horizon (2) = 3" in caplog.text


@pytest.fixture(scope="module")
def padded_run(tmp_path_factory):
    from stacklstm.estimator import LSTMForecaster

    df = _panel(ids=("a", "b", "c"), n=60)
    df = df[~((df["unique_id"] == "c") & (df["ds"] < df["ds"].iloc[0] + pd.Timedelta(days=51)))]
    assert (df["unique_id"] == "c").sum() == 9  # shorter than the window (8) + horizon (3)
    settings = {**TINY, "test_size": 0, "val_size": 3}
    model = LSTMForecaster(**settings).fit(df)
    return model, df


def test_a_padded_panel_trains_on_and_forecasts_its_short_series(padded_run):
    from stacklstm.forecasting import predict

    model, _ = padded_run
    assert read_run_info(model.run_dir).config.data.start_padding == "repeat"
    frame = predict(model.run_dir)
    assert "forecaster" not in frame  # no fallback: the model forecasts every series
    assert (frame["id"] == "c").sum() == 9  # an origin at each of c's rows
    out = model.predict()
    assert set(out["unique_id"]) == {"a", "b", "c"}


def test_the_export_of_a_padded_run_takes_the_missing_rows_as_nan(padded_run, tmp_path):
    pytest.importorskip("flatbuffers")
    from stacklstm.forecasting import predict

    model, df = padded_run
    path = tmp_path / "padded.stacklstm"
    export_run(model.run_dir, path)
    forecaster = serving.load(path)
    frame = predict(model.run_dir)
    for name in ("b", "c"):
        y = df[df["unique_id"] == name]["y"].to_numpy()
        padded = np.concatenate([np.full(7, np.nan), y])[:, None]  # 7 missing rows before
        windows = forecaster.windows(padded)  # one per row of the series
        got = forecaster.predict(windows, ids=[name] * len(windows))
        rows = frame[frame["id"] == name]
        want = rows[forecaster.forecast_columns].to_numpy().reshape(got.shape)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # a NaN after the first complete row still gives NaN out
    y = df[df["unique_id"] == "b"]["y"].to_numpy()[:8].copy()
    y[5] = np.nan
    assert np.isnan(forecaster.predict(y[None, :, None], ids=["b"])).all()


def test_a_series_too_short_for_its_validation_rows_trains_on_them(caplog):
    frame = _frame({"a": 5, "b": 30})  # a: 2 training rows before its 3 of validation
    with caplog.at_level(logging.INFO, logger="stacklstm.data"):
        splits, _ = _splits(frame, start_padding="repeat", val_size=3)
    assert splits.series.ids == ("a", "b") and splits.rows.tolist() == [[5, 0, 0], [27, 3, 0]]
    assert splits.train.local_origin[splits.train.series == 0].tolist() == [0, 1, 2]
    assert (splits.val.series == 1).all()  # no validation window of a
    assert "train on their validation rows too (padded windows): 'a'" in caplog.text
    plain, _ = _splits(frame, start_padding="none", val_size=3, window=2)
    assert plain.series.ids == ("b",)  # without padding a short series is skipped
