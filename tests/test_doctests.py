"""The docstring examples of the package run as tests.

The modules are found, not listed: every module under ``src/stacklstm`` whose source holds an
example (a ``>>>`` line) is collected, so a new module's examples run without being registered.
"""

import doctest
import importlib
from pathlib import Path

import pytest

import stacklstm

PACKAGE = Path(stacklstm.__file__).parent


def _modules_with_examples() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if ">>> " not in path.read_text(encoding="utf-8"):
            continue
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


MODULES = _modules_with_examples()


def test_the_modules_are_found():
    assert {
        "stacklstm",
        "stacklstm.kernels.lstm",
        "stacklstm.data.splits",
        "stacklstm.nnx",
    } <= set(MODULES)


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    found = sum(len(test.examples) for test in doctest.DocTestFinder().find(module))
    assert found > 0, f"{name} has a '>>>' line but no docstring example"
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
