"""Backtest scoring: per fold, per series and pooled, against statsforecast on each series alone."""

import numpy as np
import pytest

from helpers import SEASON, _cfg, _panel_table, seasonal_values
from stacklstm import backtest as bt
from stacklstm.data import make_splits, prepare_series, read_table


@pytest.mark.slow  # a panel's backtest: about 23 s
def test_a_panel_is_cut_series_by_series_and_scored_per_series_and_pooled(tmp_path):
    from stacklstm import baselines
    from stacklstm.rundir import read_run_info

    data = _panel_table(tmp_path / "panel.csv")
    cfg = _cfg("all").replace({"data": {"id_column": "id"}})
    out = tmp_path / "bt"
    result = bt.backtest(cfg, out, folds=2, step=3, data_path=data, quiet=True)
    # cut-offs from each series' end: b (50 rows) at 50 - 3 - 3 * 2 = 41, 44; a 10 rows later
    assert result.data["cutoffs"] == [51, 54] and result.data["n_series"] == 2
    series = prepare_series(read_table(data), read_run_info(out / "fold_00").config.data)
    for k, fold in enumerate(result.data["folds"]):
        assert {n: s["cutoff"] for n, s in fold["per_series"].items()} == {
            "a": 51 + 3 * k,
            "b": 41 + 3 * k,
        }
        # the fold's training and validation rows end at the cut-off of every series
        run_data = read_run_info(out / f"fold_{k:02d}").config.data
        splits, _ = make_splits(series, run_data)
        assert (splits.rows[:, 0] + splits.rows[:, 1]).tolist() == [52 + 3 * k, 42 + 3 * k]
        assert splits.val.target_index.max() == 60 + 41 + 3 * k  # b's last validation row
        forecasts = result.forecasts[k]
        assert forecasts["origin"].tolist() == [51 + 3 * k + j for j in range(3)] + [
            60 + 41 + 3 * k + j for j in range(3)
        ]
        for name, pooled in fold["scores"].items():
            each = [fold["per_series"][s]["scores"][name] for s in "ab"]
            # the pooled MASE is the mean of the series' MASE; MAE the mean over all targets
            assert pooled["mase"] == pytest.approx(np.mean([m["mase"] for m in each]), rel=1e-12)
            assert pooled["mae"] == pytest.approx(np.mean([m["mae"] for m in each]), rel=1e-12)
            steps = fold["by_step"][name]
            assert np.mean([s["mae"] for s in steps]) == pytest.approx(pooled["mae"], rel=1e-12)
    # the statistical baselines of each series: statistical_forecasts on that series alone
    for i, (name, start, n) in enumerate((("a", 0, 60), ("b", 60, 50))):
        y = series.values[start : start + n, :1]
        cuts = [n - 9, n - 6]
        origins = np.concatenate([np.arange(c, c + 3) for c in cuts])
        alone = baselines.statistical_forecasts(y, origins, 3, SEASON, cuts)
        for k, fold in enumerate(result.data["folds"]):
            o = origins[3 * k : 3 * k + 3]
            actual = y[o[:, None] + np.arange(1, 4), 0]
            scale = np.mean(np.abs(y[4 : cuts[k] + 1, 0] - y[: cuts[k] - 3, 0]))
            scores = fold["per_series"][name]["scores"]
            for model in ("auto_ets", "auto_arima", "auto_theta"):
                mine = result.forecasts[k][model][3 * i : 3 * i + 3]
                np.testing.assert_allclose(mine, alone[model][3 * k : 3 * k + 3], rtol=1e-12)
                mae = np.mean(np.abs(alone[model][3 * k : 3 * k + 3, :, 0] - actual))
                assert scores[model]["mae"] == pytest.approx(mae, rel=1e-12)
                assert scores[model]["mase"] == pytest.approx(mae / scale, rel=1e-12)
            last = np.mean(np.abs(y[o, :1] - actual))
            assert scores["last_value"]["mae"] == pytest.approx(last, rel=1e-12)
    summary = result.data["per_series"]["b"]["auto_ets"]["mean"]["mae"]
    folds = result.data["folds"]
    assert summary == pytest.approx(
        np.mean([f["per_series"]["b"]["scores"]["auto_ets"]["mae"] for f in folds]), rel=1e-12
    )
    assert "2 series scored together" in result.table


def test_the_backtest_plot_shows_each_forecasters_mase_by_fold_and_by_step_on_a_log_scale():
    from stacklstm.backtest.scoring import _fold_scores, backtest_figure

    y = seasonal_values(60)
    day0, horizon, forecasts, folds, scales = np.datetime64("2021-01-01"), 3, [], [], []
    for k, cut in enumerate((40, 44, 48)):
        origins = cut + np.arange(3)
        actual = y[origins[:, None] + np.arange(1, horizon + 1)][..., None]  # (3, horizon, 1)
        made = {
            "model": actual + 0.05 * (1 + np.arange(horizon))[None, :, None],
            "last_value": np.repeat(y[origins][:, None, None], horizon, axis=1),
            "seasonal_naive": y[origins[:, None] + np.arange(1, horizon + 1) - SEASON][..., None],
            "auto_ets": None,  # no forecasts: left out
        }
        scale = np.mean(np.abs(y[SEASON : cut + 1] - y[: cut + 1 - SEASON]))  # rows 0..cut
        scores, by_step, _ = _fold_scores(actual, made, [(slice(None), np.array([scale]))])
        folds.append(
            {
                "fold": k,
                "cutoff": cut,
                "cutoff_time": str(day0 + cut),
                "scores": scores,
                "by_step": by_step,
            }
        )
        forecasts.append((actual, made))
        scales.append(scale)
    by_fold, by_step = backtest_figure({"folds": folds, "horizon": horizon}).axes
    for name in ("model", "last_value", "seasonal_naive"):
        errors = [
            np.abs(made[name] - actual)[..., 0] / scale  # (3, horizon) scaled errors
            for (actual, made), scale in zip(forecasts, scales, strict=True)
        ]
        (line,) = [ln for ln in by_fold.get_lines() if ln.get_label() == name]
        np.testing.assert_allclose(line.get_ydata(), [e.mean() for e in errors], rtol=1e-12)
        (line,) = [ln for ln in by_step.get_lines() if ln.get_label() == name]
        np.testing.assert_allclose(
            line.get_ydata(), np.mean([e.mean(axis=0) for e in errors], axis=0), rtol=1e-12
        )
        np.testing.assert_array_equal(line.get_xdata(), [1, 2, 3])
    assert not [ln for ln in by_fold.get_lines() if ln.get_label() == "auto_ets"]
    labels = [t.get_text() for t in by_fold.get_xticklabels()]
    assert labels == ["2021-02-10", "2021-02-14", "2021-02-18"]  # day0 + the cut-off rows
    assert by_fold.get_yscale() == by_step.get_yscale() == "log"
    assert by_fold.get_ylabel() == "MASE"
