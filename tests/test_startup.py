"""The import-time guard: only the ``stacklstm`` command is guarded, and a signal while jax
loads is one line and exit 128 + the signal's number."""

import signal
import subprocess
import sys

from stacklstm import _startup


def test_only_the_command_line_is_recognised(monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/usr/lib/python3/site-packages/pytest"])
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "stacklstm", "train"])
    assert _startup._is_command_line()
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m", "pytest", "-m", "stacklstm"])
    assert not _startup._is_command_line()  # "-m stacklstm" here selects pytest's marks
    monkeypatch.setattr(sys, "orig_argv", ["python", "-m"])
    assert not _startup._is_command_line()
    monkeypatch.setattr(sys, "argv", ["/home/u/.venv/bin/stacklstm", "train"])
    assert _startup._is_command_line()


def test_the_guard_takes_only_default_handlers(monkeypatch):
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    mine = lambda signum, frame: None  # noqa: E731
    try:
        signal.signal(signal.SIGINT, signal.default_int_handler)
        signal.signal(signal.SIGTERM, mine)
        monkeypatch.setattr(_startup, "_is_command_line", lambda: False)
        _startup.guard_imports()
        assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
        monkeypatch.setattr(_startup, "_is_command_line", lambda: True)
        _startup.guard_imports()
        assert signal.getsignal(signal.SIGINT) is _startup._leave
        assert signal.getsignal(signal.SIGTERM) is mine  # a handler of the user's own stays
    finally:
        for signum, handler in before.items():
            signal.signal(signum, handler)


def test_leave_writes_one_line_and_exits_128_plus_the_signal():
    code = "import signal; from stacklstm import _startup; _startup._leave(signal.SIGTERM, None)"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert (done.returncode, done.stderr, done.stdout) == (
        143,
        "stacklstm: terminated (SIGTERM)\n",
        "",
    )
