"""fit_ensemble: members trained as runs of their own seeds, reported against the best and
worst member."""

import numpy as np
import pytest

from helpers import _report
from stacklstm.data import make_splits
from stacklstm.forecasting.inference import load_series
from stacklstm.report import evaluate_run
from stacklstm.rundir import read_run_info

STEPS = 48  # per member: 2 epochs of 24 steps


def test_ensemble_trains_members_and_reports_best_and_worst(ensemble):
    out, result = ensemble
    assert [m.step for m in result.members] == [STEPS, STEPS] and result.step == 2 * STEPS
    assert read_run_info(out).config.train.ensemble == 2
    data = _report(out)
    ens = data["ensemble"]
    assert ens["size"] == 2 and ens["combine"] == "median"
    assert [m["seed"] for m in ens["members"]] == [3, 4]
    for k, member in enumerate(ens["members"]):
        own = _report(out / "members" / str(k))
        assert read_run_info(out / "members" / str(k)).config.train.seed == 3 + k
        # the member's figures are its own report's, exactly
        assert member["test"] == {key: own["test"]["model"][key] for key in member["test"]}
        assert member["val"] == {key: own["val"]["model"][key] for key in member["val"]}
    mases = [m["test"]["mase"] for m in ens["members"]]
    assert mases[0] != mases[1]  # different seeds, different models
    assert ens["best"] == int(np.argmin(mases)) and ens["worst"] == int(np.argmax(mases))
    # the ensemble's forecast: the median (for 2, the mean) of the members' own test forecasts
    forecasts = np.stack([evaluate_run(out / "members" / str(k)).test_forecast for k in range(2)])
    np.testing.assert_array_equal(result.report.test_forecast, np.median(forecasts, axis=0))
    info = read_run_info(out)
    _, series = load_series(info, None)
    y_true = make_splits(series, info.config.data, scaler=info.scaler)[0].test.y_true
    mae = np.mean(np.abs(y_true - np.median(forecasts, axis=0)))
    assert data["test"]["model"]["mae"] == pytest.approx(mae, rel=1e-12)
    assert data["test"]["model"]["mae"] != ens["members"][0]["test"]["mae"]
    lines = result.report.table.splitlines()
    best = next(line for line in lines if line.startswith("test  best member"))
    assert f"{mases[ens['best']]:.4f}" in best
    worst = next(line for line in lines if line.startswith("test  worst member"))
    assert f"{mases[ens['worst']]:.4f}" in worst
