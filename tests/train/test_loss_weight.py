"""``loss_weight``: each series of a panel weighed in the training loss by the inverse of
its seasonal naive error on its training rows (squared for mse), resolved from ``auto``,
computed on the training rows only, and entering the updates."""

import dataclasses

import numpy as np
import pandas as pd
import pytest

from helpers import _leaves
from stacklstm.config import RunConfig
from stacklstm.data.windowset import HeldSeries, WindowSet
from stacklstm.forecasting import load_run
from stacklstm.run.loop import fit
from stacklstm.train.plan import make_plan


def _panel(path, scale_b=5.0, swing_b=0.3):
    """Two daily series of 100 rows: ``a`` a weekly swing with noise around 10, ``b`` the
    same shape with its swing ``swing_b`` and everything times ``scale_b``."""
    rng = np.random.default_rng(0)
    t = np.arange(100)
    frames = []
    for store, scale, swing in (("a", 1.0, 0.3), ("b", scale_b, swing_b)):
        noise = rng.normal(size=100) if store == "a" else frames[0]["noise"].to_numpy()
        sales = scale * (10 + swing * np.sin(2 * np.pi * t / 7) + 0.2 * noise)
        frames.append(
            pd.DataFrame(
                {
                    "day": pd.date_range("2021-01-01", periods=100, freq="D"),
                    "store": store,
                    "sales": sales,
                    "noise": noise,
                }
            )
        )
    pd.concat(frames).drop(columns="noise").to_csv(path, index=False)
    return path


SETTINGS = {
    "data": {
        "id_column": "store",
        "target": ("sales",),
        "time_column": "day",
        "window": 6,
        "horizon": 2,
        "season": 7,
        "test_size": 10,
        "val_size": 10,
        "start_padding": "none",
        "deseasonalize": False,
        "target_transform": "none",  # scaled copies stay alike
    },
    "model": {"lstm_hidden_size": 8, "num_lstm_layers": 1, "linear_layer_sizes": (8,)},
    "train": {"epochs": 3, "batch_size": 16, "baselines": "naive", "retrain": "off"},
}


def _cfg(**train):
    return RunConfig().replace(SETTINGS).replace({"train": train})


def _by_hand(values, season, power):
    lag = season if len(values) > season else 1
    return np.mean(np.abs(values[lag:] - values[:-lag])) ** -power


def test_mase_weights_by_hand_from_the_training_rows_only():
    rng = np.random.default_rng(1)
    a, b = rng.normal(size=12), 3 * rng.normal(size=9)
    model = np.concatenate([a, b])[:, None]
    model[10:12] = 1e6  # series a's rows after its windows' last target: not read
    held = HeldSeries(
        model=model,
        original=np.zeros((21, 1)),
        times=None,
        offsets=np.array([0, 12, 21]),
        ids=("a", "b"),
        center=np.zeros((2, 1)),
        scale=np.ones((2, 1)),
    )
    # a: origins 3..7 (targets up to row 9); b: origins 15, 16 (targets up to row 18 of 21)
    origin = np.array([3, 4, 5, 6, 7, 15, 16])
    series = np.array([0, 0, 0, 0, 0, 1, 1])
    ws = WindowSet(
        held,
        origin,
        series,
        np.zeros((7, 1)),
        np.zeros((7, 1)),
        window=3,
        horizon=2,
        difference=False,
    )
    got = ws.mase_weights(season=4, power=2.0)
    wa, wb = _by_hand(a[:10], 4, 2.0), _by_hand(b[:7], 4, 2.0)
    expected = np.array([wa] * 5 + [wb] * 2)
    np.testing.assert_allclose(got, expected / expected.mean(), rtol=1e-6)
    assert got.dtype == np.float32 and got.mean() == pytest.approx(1.0)
    # power 1 (absolute losses); a series shorter than its season falls back to lag 1
    got1 = ws.take(np.arange(5, 7)).mase_weights(season=8, power=1.0)
    np.testing.assert_array_equal(got1, np.ones(2, np.float32))  # one series: all alike
    short = ws.mase_weights(season=12, power=1.0)
    wa, wb = _by_hand(a[:10], 12, 1.0), _by_hand(b[:7], 12, 1.0)
    expected = np.array([wa] * 5 + [wb] * 2)
    np.testing.assert_allclose(short, expected / expected.mean(), rtol=1e-6)
    with pytest.raises(ValueError, match="season"):
        ws.mase_weights(season=0, power=2.0)
    tiny = WindowSet(
        dataclasses.replace(held, model=model * 1e-300),
        origin,
        series,
        np.zeros((7, 1)),
        np.zeros((7, 1)),
        window=3,
        horizon=2,
        difference=False,
    )
    got = tiny.mase_weights(season=4, power=2.0)  # s ** -2 overflows: capped, never NaN
    assert np.isfinite(got).all() and got.mean() == pytest.approx(1.0)


def test_auto_is_mase_for_a_panel_with_mse_and_none_otherwise(tmp_path):
    table = _panel(tmp_path / "sales.csv", swing_b=1.5)
    plan = make_plan(_cfg(), tmp_path / "run", False, table)
    assert plan.cfg.train.loss_weight == "mase"
    np.testing.assert_array_equal(plan.train_weight, plan.train.mase_weights(7, 2.0))
    # b's season swings five times a's: it dominates b's standard deviation, and seasonal
    # naive forecasts it, so b's MASE scale in scaled units is smaller and b weighs more
    b = plan.train.series == 1
    assert plan.train_weight[b].min() > 5 * plan.train_weight[~b].max()
    for train, data in (
        ({"loss": "mae"}, {}),
        ({}, {"scaler": "seasonal_naive"}),
        ({"loss_weight": "none"}, {}),
    ):
        cfg = _cfg(**train).replace({"data": data})
        plan = make_plan(cfg, tmp_path / "other", False, table)
        assert plan.cfg.train.loss_weight == "none" and plan.train_weight is None
    # naive scales by the change over one row: MASE's own only without a season
    plan = make_plan(_cfg().replace({"data": {"scaler": "naive"}}), tmp_path / "nv", False, table)
    assert plan.cfg.train.loss_weight == "mase"
    np.testing.assert_array_equal(plan.train_weight, plan.train.mase_weights(7, 2.0))
    cfg = _cfg().replace({"data": {"scaler": "naive", "season": 1}})
    plan = make_plan(cfg, tmp_path / "nv1", False, table)
    assert plan.cfg.train.loss_weight == "none" and plan.train_weight is None
    # asked for with an absolute loss: the inverse scale, not squared
    plan = make_plan(_cfg(loss="mae", loss_weight="mase"), tmp_path / "mae", False, table)
    np.testing.assert_array_equal(plan.train_weight, plan.train.mase_weights(7, 1.0))
    # one series: every window alike, nothing to weigh
    one = RunConfig().replace(SETTINGS).replace({"data": {"id_column": None}})
    frame = pd.read_csv(table)
    frame[frame.store == "a"].drop(columns="store").to_csv(tmp_path / "a.csv", index=False)
    plan = make_plan(one, tmp_path / "single", False, tmp_path / "a.csv")
    assert plan.cfg.train.loss_weight == "none" and plan.train_weight is None


def test_the_weights_enter_the_updates(tmp_path):
    # b is a times 5: scaled alike, the same weight, so "mase" is the unweighted run exactly
    alike = _panel(tmp_path / "alike.csv", scale_b=5.0, swing_b=0.3)
    runs = {}
    for weight in ("mase", "none"):
        fit(_cfg(loss_weight=weight), tmp_path / f"alike_{weight}", quiet=True, data_path=alike)
        runs[weight] = _leaves(load_run(tmp_path / f"alike_{weight}").params)
    assert all(np.array_equal(x, y) for x, y in zip(runs["mase"], runs["none"], strict=True))
    # b's season swings more: the weights differ, and so do the trained parameters
    apart = _panel(tmp_path / "apart.csv", scale_b=5.0, swing_b=1.5)
    for weight in ("mase", "none"):
        fit(_cfg(loss_weight=weight), tmp_path / f"apart_{weight}", quiet=True, data_path=apart)
        runs[weight] = _leaves(load_run(tmp_path / f"apart_{weight}").params)
    assert not all(np.allclose(x, y) for x, y in zip(runs["mase"], runs["none"], strict=True))
    saved = load_run(tmp_path / "apart_mase").info.config.train.loss_weight
    assert saved == "mase"  # config.json holds the resolved value
