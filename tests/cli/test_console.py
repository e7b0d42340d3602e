"""The console: log lines held back until the work starts, the one-line error, the words of
an interruption."""

import logging
import signal

from stacklstm.cli import console


def _record(name, message):
    return logging.LogRecord(name, logging.INFO, __file__, 1, message, None, None)


def test_held_lines_wait_for_the_training_loop_or_are_dropped(capsys):
    handler = console._HeldLogs()
    handler.emit(_record("stacklstm.data.rows", "filled 59 rows"))
    handler.emit(_record("stacklstm.train.plan", "season 12"))
    assert capsys.readouterr().err == ""  # held while the inputs are checked
    handler.emit(_record("stacklstm.run.loop", "epoch 1"))
    assert capsys.readouterr().err == "filled 59 rows\nseason 12\nepoch 1\n"
    handler.emit(_record("stacklstm.data.rows", "later"))  # released: written at once
    assert capsys.readouterr().err == "later\n"
    dropped = console._HeldLogs()
    dropped.emit(_record("stacklstm.data.rows", "filled 59 rows"))
    dropped.drop_held()  # a check failed: the error stays the only line
    dropped.flush_held()
    assert capsys.readouterr().err == ""


def test_an_error_is_one_line_and_an_interruption_says_how_to_continue(
    capsys, monkeypatch, tmp_path
):
    console._fail("the column 'y'\n   is empty")
    assert capsys.readouterr().err == "stacklstm: error: the column 'y' is empty\n"
    monkeypatch.setattr(console, "_RUNNING", {})  # what the command now running set
    assert console._interrupted_words(signal.SIGINT) == "interrupted"
    assert console._interrupted_words(signal.SIGTERM) == "terminated (SIGTERM)"
    console._RUNNING["backtest_out"] = tmp_path
    assert console._interrupted_words(signal.SIGINT) == "interrupted"  # no plan.json yet
    (tmp_path / "plan.json").write_text("{}")
    assert console._interrupted_words(signal.SIGINT) == (
        f"interrupted; continue with: stacklstm backtest --out {tmp_path} --resume"
    )
    console._RUNNING["train_out"] = tmp_path / "run"  # not a run folder: no resume offered
    assert "stacklstm train" not in console._interrupted_words(signal.SIGINT)
