"""``target_transform="auto"``: Guerrero's lambda against statsforecast's (coreforecast's),
the choice on the training rows, and a run that records it and equals the explicit one."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from helpers import monthly
from stacklstm.config import DataConfig, ModelConfig, RunConfig, TrainConfig
from stacklstm.data import make_splits, prepare_series
from stacklstm.data.transform import choose_target_transform, guerrero_lambda

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
    frames = [monthly(v).assign(id=name) for name, v in
              [("a", GROWING), ("b", GROWING * 2), ("c", STEADY)]]  # fmt: skip
    chosen, median = choose_target_transform(prepare_series(pd.concat(frames), c), c)
    assert chosen == "log1p" and abs(median) < 0.05  # two of three grow with their level
    frames[1] = monthly(STEADY * 3).assign(id="b")
    assert choose_target_transform(prepare_series(pd.concat(frames), c), c)[0] == "none"


def test_unresolved_auto_is_refused_by_make_splits():
    c = _cfg(target_transform="auto")
    with pytest.raises(ValueError, match="target_transform='auto'"):
        make_splits(prepare_series(monthly(GROWING), c), c)


def test_an_auto_run_records_its_choice_and_equals_the_explicit_run(tmp_path):
    from stacklstm.train import fit, predict

    path = tmp_path / "m.csv"
    monthly(GROWING).to_csv(path, index=False)
    model = ModelConfig(lstm_hidden_size=4, num_lstm_layers=1, linear_layer_sizes=())
    train = TrainConfig(epochs=2, batch_size=16, baselines="naive")
    runs = {}
    for kind in ("auto", "log1p"):
        cfg = RunConfig(_cfg(target_transform=kind), model, train)
        fit(cfg, tmp_path / kind, data_path=path, quiet=True)
        runs[kind] = predict(tmp_path / kind, path)
    saved = json.loads((tmp_path / "auto" / "config.json").read_text())
    assert saved["config"]["data"]["target_transform"] == "log1p"
    pd.testing.assert_frame_equal(runs["auto"], runs["log1p"])
