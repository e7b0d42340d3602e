"""FitResult and EnsembleResult: what fit returns, frozen, with the documented fields."""

import dataclasses
from pathlib import Path

import pytest

from stacklstm.run import FitResult
from stacklstm.run.ensemble_fit import EnsembleResult


def test_fit_results_hold_the_documented_fields_and_are_frozen():
    fields = [f.name for f in dataclasses.fields(FitResult)]
    assert fields == [
        "out_dir",
        "step",
        "epochs",
        "best_val_loss",
        "best_step",
        "stop_reason",
        "skipped",
        "report",
    ]
    one = FitResult(Path("run"), 48, 2, 0.25, 24, "epochs", 0, None)
    with pytest.raises(dataclasses.FrozenInstanceError):
        one.step = 49
    both = EnsembleResult(Path("ens"), 96, 4, None, None, "epochs", 0, None, members=(one, one))
    assert isinstance(both, FitResult) and sum(m.step for m in both.members) == both.step
    assert EnsembleResult(Path("e"), 0, 0, None, None, "stop_after_steps", 0, None).members == ()
