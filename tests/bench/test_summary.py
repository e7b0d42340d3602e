"""The benchmark summary: ratios, medians and the roofline; the markdown table."""

from __future__ import annotations

import pytest

from stacklstm.bench.harness import render_markdown, summarize
from stacklstm.bench.workloads import (
    WORKLOADS,
    gemm_flops,
    train_flops,
)


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
