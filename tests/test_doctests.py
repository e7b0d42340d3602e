"""The docstring examples of the public API run as tests."""

import doctest
import importlib

import pytest

MODULES = [
    "stacklstm",
    "stacklstm.checks",
    "stacklstm.config",
    "stacklstm.kernels.lstm",
    "stacklstm.layers",
    "stacklstm.model",
    "stacklstm.forecaster",
    "stacklstm.data",
    "stacklstm.data.calendar",
    "stacklstm.data.covariates",
    "stacklstm.data.clean",
    "stacklstm.data.scale",
    "stacklstm.data.table",
    "stacklstm.data.windows",
    "stacklstm.data.season",
    "stacklstm.train.budget",
    "stacklstm.data.batches",
    "stacklstm.metrics",
    "stacklstm.baselines",
    "stacklstm.intervals",
    "stacklstm.intervals.heads",
    "stacklstm.intervals.conformal",
    "stacklstm.intervals.scores",
    "stacklstm.train.calibration",
    "stacklstm.backtest",
    "stacklstm.distributed",
    "stacklstm.train",
    "stacklstm.train.checkpoint",
    "stacklstm.train.ensemble",
    "stacklstm.train.lock",
    "stacklstm.train.memory",
    "stacklstm.train.outputs",
    "stacklstm.train.rundir",
    "stacklstm.train.step",
    "stacklstm.cli",
    "stacklstm.signals",
    "stacklstm.tune",
    "stacklstm.serving",
    "stacklstm.train.export",
]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name):
    module = importlib.import_module(name)
    result = doctest.testmod(module, optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    assert result.attempted > 0, f"{name} has no docstring example"
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name}"
