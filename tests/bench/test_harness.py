"""The harness: --baseline runs the stacklstm peer of another package beside this one."""

from __future__ import annotations

from pathlib import Path

import pytest

from stacklstm.bench.workloads import (
    WORKLOADS,
)

ROOT = Path(__file__).resolve().parents[2]


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
                return {
                    "measures": ["train"],
                    "compile": False,
                    "notes": "",
                    "info": {},
                    "first_calls": {},
                }
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
