"""The parser: the help's worked example, usage errors without a command."""

import pytest

from helpers import _run
from stacklstm.cli import main
from stacklstm.data import bundled_dataset_path, read_table


def test_help_shows_a_worked_example(capsys):
    for argv in (["--help"], ["train", "--help"]):
        with pytest.raises(SystemExit) as info:
            main(argv)
        assert info.value.code == 0
        out = capsys.readouterr().out
        assert "examples:" in out and "stacklstm train --data sales.csv --target units" in out
    assert "--linear-layer-sizes N,M" in out and "(default: 32,16)" in out


def test_usage_errors_without_a_command(capsys):
    code, _, err = _run(capsys)
    assert code == 2 and err.strip() == (
        "stacklstm: error: the following arguments are required: COMMAND"
    )
    code, _, err = _run(capsys, "fly")
    assert code == 2 and len(err.splitlines()) == 1 and "invalid choice: 'fly'" in err
    assert read_table(bundled_dataset_path()).shape == (2284, 2)
