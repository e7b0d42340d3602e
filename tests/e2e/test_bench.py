"""The benchmarks end to end: ``stacklstm bench`` on the tiny workload, and the accuracy
benchmark's score of one fit against the run's own report."""

import importlib.util
import json
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from helpers import ROOT, load_benchmark

acc = load_benchmark("accuracy", "accuracy_bench")


def _spec(frame: pd.DataFrame, season: int, name: str = "toy"):
    return acc.SeriesSpec(name, season, "monthly", "test", lambda: frame.copy())


def _monthly(y) -> pd.DataFrame:
    y = np.asarray(y, dtype=float)
    return pd.DataFrame({"date": pd.date_range("2000-01-01", periods=len(y), freq="MS"), "y": y})


@pytest.mark.slow
def test_harness_tiny_end_to_end(tmp_path):
    peers = ["stacklstm", "flax_rnn"]
    if importlib.util.find_spec("torch") is not None:
        peers.append("torch")
    # Through the command line (`stacklstm bench`); benchmarks/run.py calls the same main.
    cmd = [sys.executable, "-m", "stacklstm", "bench", "--workloads", "tiny"]
    cmd += ["--peers", ",".join([*peers, "gemm"]), "--repeats", "1", "--iters", "2"]
    cmd += ["--threads", "1", "--out", str(tmp_path)]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]

    (json_path,) = tmp_path.glob("bench-*.json")
    (md_path,) = tmp_path.glob("bench-*.md")
    run = json.loads(json_path.read_text())
    assert run["argv"][:2] == ["--workloads", "tiny"]
    assert run["machine"]["cores"] >= 1 and run["machine"]["versions"]["jax"]
    tiny = run["workloads"]["tiny"]["peers"]
    medians = run["summary"]["workloads"]["tiny"]["median_ms"]
    for peer in peers:
        assert tiny[peer]["status"] == "ok", tiny[peer].get("reason")
        expected = {"train", "forward", "stream"} | ({"compile"} if peer != "torch" else set())
        assert expected <= set(tiny[peer]["samples"])
        for measure in expected:
            assert len(tiny[peer]["samples"][measure]) == (1 if measure == "compile" else 2)
            assert medians[peer][measure] > 0
        assert tiny[peer]["memory"]["rss_peak_growth_bytes"] >= 0
    assert run["summary"]["workloads"]["tiny"]["ratio_to_stacklstm"]["stacklstm"]["train"] == 1
    assert all(p > 0 for p in run["summary"]["workloads"]["tiny"]["train_pct_of_roofline"].values())

    md = md_path.read_text()
    header = next(line for line in md.splitlines() if line.startswith("| measure |"))
    assert header == "| measure | " + " | ".join(peers) + " |"
    assert md in proc.stdout


@pytest.mark.slow
def test_fit_one_scores_like_the_library_report(tmp_path):
    """The benchmark's score of a model equals the MASE of the run's own report.json: the
    same targets, the same scale, and the forecasts mapped back to original units."""
    t = np.arange(120)
    y = 50 + 0.2 * t + 5 * np.sin(2 * np.pi * t / 12) + np.random.default_rng(2).normal(0, 1, 120)
    task = acc.make_task(_spec(_monthly(y), 12), horizon=3)
    recipe = acc.Recipe("tiny", {"epochs": 2, "lstm_hidden_size": 4, "linear_layer_sizes": []})
    out = acc.fit_one(task, recipe, seed=0, work=tmp_path)
    (run,) = (tmp_path / "runs").iterdir()
    report = json.loads((run / "report.json").read_text())
    assert acc.score(task, out["forecast"])["mase"] == pytest.approx(
        report["test"]["model"]["mase"], rel=1e-9
    )
    again = acc.fit_one(task, recipe, seed=0, work=tmp_path)  # from the cache
    np.testing.assert_array_equal(again["forecast"], out["forecast"])
