"""The benchmark worker's protocol: errors and skips reported, never dying."""

from __future__ import annotations

import io
import json

from stacklstm.bench.worker import serve


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
