"""The run folder's plots: a torn metrics line is skipped and named, never a crash."""

import json
import logging
import shutil

from helpers import _main
from stacklstm.train.plots import read_metric_records


def test_a_torn_metrics_line_is_skipped_and_named(tmp_path, caplog):
    path = tmp_path / "metrics.jsonl"
    whole = [{"kind": "train", "step": 10, "train_loss": 0.5},
             {"kind": "epoch", "step": 24, "train_loss": None, "val_loss": 0.4}]  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in whole) + '[1]\n{"kind": "train", "st')
    with caplog.at_level(logging.WARNING):
        assert read_metric_records(path) == whole
    assert [r.getMessage() for r in caplog.records] == [
        f"skipping line 3 of {path}: not a whole metrics record",
        f"skipping line 4 of {path}: not a whole metrics record",
    ]
    assert read_metric_records(tmp_path / "absent.jsonl") == []


def test_evaluate_with_a_torn_last_metrics_line_names_it_and_succeeds(trained_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(trained_run.out_dir, run)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    with (run / "metrics.jsonl").open("a") as handle:
        handle.write('{"kind": "train", "step": 4')  # a crash mid-write
    code, _, err = _main("evaluate", run, "--quiet")
    assert code == 0, err
    metrics = run / "metrics.jsonl"
    assert err == f"skipping line {len(lines) + 1} of {metrics}: not a whole metrics record\n"
    assert (run / "loss.png").stat().st_size > 0
