"""The benchmark harness: FLOP count, summary arithmetic, worker protocol (its end-to-end run
is tests/e2e/test_bench.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from stacklstm.bench.harness import render_markdown, summarize
from stacklstm.bench.worker import serve
from stacklstm.bench.workloads import (
    WORKLOADS,
    forward_flops,
    gemm_flops,
    head_forward_flops,
    lstm_forward_flops,
    train_flops,
)

ROOT = Path(__file__).resolve().parents[2]


def test_flops_workload_m_matches_hand_count():
    # M: batch 64, time 100, features 8, hidden 256, 2 layers; 4 * hidden = 1024.
    layer0 = 2 * 64 * 100 * (8 + 256) * 1024  # 3_460_300_800
    layer1 = 2 * 64 * 100 * (256 + 256) * 1024  # 6_710_886_400
    head = 2 * 64 * (256 * 32 + 32 * 16 + 16 * 1)  # 1_116_160
    assert lstm_forward_flops(WORKLOADS["M"]) == 10_171_187_200 == layer0 + layer1
    assert head_forward_flops(WORKLOADS["M"]) == head
    assert forward_flops(WORKLOADS["M"]) == 10_172_303_360
    assert train_flops(WORKLOADS["M"]) == 30_516_910_080
    assert gemm_flops() == 2 * 2048 * 1024 * 1024


def _fake_run() -> dict:
    return {
        "command": "benchmarks/run.py --workloads tiny",
        "machine": {"cpu_model": "cpu", "cores": 2, "versions": {}},
        "settings": {"repeats": 1, "iters": 3, "threads": 2},
        "workloads": {
            "tiny": {
                "peers": {
                    "stacklstm": {
                        "status": "ok",
                        "notes": "ours",
                        "samples": {"train": [0.002, 0.004, 0.003], "forward": [0.001]},
                        "memory": {"rss_peak_growth_bytes": 2 * 2**20, "device_peak_bytes": None},
                    },
                    "torch": {
                        "status": "ok",
                        "notes": "theirs",
                        "samples": {"train": [0.006], "forward": [0.0005]},
                        "memory": {"rss_peak_growth_bytes": 2**20, "device_peak_bytes": None},
                    },
                    "keras": {"status": "skipped", "reason": "ImportError: no keras"},
                    "gemm": {
                        "status": "ok",
                        "notes": "gemm",
                        "samples": {"gemm_xla": [0.2, 0.1, 0.3], "gemm_torch": [0.05]},
                    },
                }
            }
        },
    }


def test_summarize_ratio_median_and_roofline():
    s = summarize(_fake_run())
    assert s["gemm"]["backend"] == "gemm_torch"
    rate = gemm_flops() / 0.05
    assert s["gemm"]["flops_per_s"] == pytest.approx(rate)
    t = s["workloads"]["tiny"]
    assert t["median_ms"]["stacklstm"]["train"] == pytest.approx(3.0)
    assert t["ratio_to_stacklstm"]["torch"]["train"] == pytest.approx(2.0)
    assert t["ratio_to_stacklstm"]["torch"]["forward"] == pytest.approx(0.5)
    assert t["ratio_to_stacklstm"]["torch"]["rss_mb"] == pytest.approx(0.5)
    roof_ms = 1e3 * train_flops(WORKLOADS["tiny"]) / rate
    assert t["train_pct_of_roofline"]["stacklstm"] == pytest.approx(100 * roof_ms / 3.0)
    assert t["train_pct_of_roofline"]["torch"] == pytest.approx(100 * roof_ms / 6.0)
    assert "gemm" not in t["median_ms"] and "keras" not in t["median_ms"]


def test_render_markdown_lists_ratios_and_skipped_peers():
    run = _fake_run()
    md = render_markdown(run, summarize(run))
    assert "| measure | stacklstm | torch |" in md
    assert "| train step (ms) | 3 | 6 (2.00x) |" in md
    assert "**keras** skipped: ImportError: no keras" in md


def test_worker_serve_reports_errors_and_skips_without_dying(monkeypatch):
    monkeypatch.setenv("KERAS_BACKEND", "torch")
    commands = [
        {"cmd": "train", "n": 1},
        {"cmd": "setup", "peer": "nope", "workload": "tiny"},
        {"cmd": "setup", "peer": "keras", "workload": "tiny"},
        {"cmd": "quit"},
        {"cmd": "never read"},
    ]
    out = io.StringIO()
    serve(io.StringIO("".join(json.dumps(c) + "\n" for c in commands)), out)
    replies = [json.loads(line) for line in out.getvalue().splitlines()]
    assert len(replies) == 4
    assert "before a successful setup" in replies[0]["error"]
    assert "unknown peer 'nope'" in replies[1]["error"]
    assert "KERAS_BACKEND='torch'" in replies[2]["skipped"]
    assert replies[3] == {"ok": True}


def test_baseline_runs_the_stacklstm_peer_of_another_package(monkeypatch, tmp_path):
    """``--baseline DIR``: a worker whose PYTHONPATH starts with DIR is asked for the
    ``stacklstm`` peer; its row is ``stacklstm@baseline``, next to ``stacklstm``."""
    from stacklstm.bench import harness

    with pytest.raises(SystemExit):  # not a directory holding a stacklstm package
        harness.parse_args(["--baseline", str(tmp_path)])
    (tmp_path / "stacklstm").mkdir()
    (tmp_path / "stacklstm" / "__init__.py").write_text("")
    args = harness.parse_args(["--baseline", str(tmp_path), "--repeats", "1", "--iters", "1"])
    env, baseline_env = harness.worker_env(1), harness.worker_env(1, args.baseline)
    assert baseline_env["PYTHONPATH"].split(":")[0] == str(tmp_path)
    assert env["PYTHONPATH"].split(":")[0] == str(ROOT / "src")

    started = []

    class FakeWorker:
        def __init__(self, env, timeout):
            self.env = env
            started.append(self)

        def request(self, msg):
            if msg["cmd"] == "setup":
                self.peer = msg["peer"]
                return {"measures": ["train"], "compile": False, "notes": "", "info": {},
                        "first_calls": {}}  # fmt: skip
            if msg["cmd"] == "memory":
                return {"rss_peak_growth_bytes": 0}
            return {"times": [0.002 if self.env is baseline_env else 0.001]}

        def close(self):
            pass

    monkeypatch.setattr(harness, "WorkerProcess", FakeWorker)
    peers = ["stacklstm", harness.BASELINE]
    result = harness.run_workload(WORKLOADS["tiny"], peers, args, env, baseline_env)
    assert [(w.peer, w.env is baseline_env) for w in started] == [
        ("stacklstm", False),
        ("stacklstm", True),
    ]
    assert result["stacklstm"]["samples"]["train"] == [0.001]
    assert result[harness.BASELINE]["samples"]["train"] == [0.002]
