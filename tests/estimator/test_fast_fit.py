"""A fit in a temporary folder, which nobody can resume, writes its checkpoints at the end of
training only (a save of a small model costs more than its epoch); the numbers are those of a
run that checkpoints every epoch."""

import pandas as pd
import pytest

from helpers import TINY, _panel
from stacklstm.estimator import LSTMForecaster


def _steps(folder):
    return sorted(int(p.name) for p in folder.iterdir() if p.name.isdigit())


@pytest.mark.slow  # two fits: about 15 s
def test_a_temporary_run_checkpoints_at_its_end_with_the_same_numbers(tmp_path):
    settings = {**TINY, "epochs": 3}
    temporary = LSTMForecaster(**settings).fit(_panel())
    kept = LSTMForecaster(**settings, run_dir=tmp_path / "run").fit(_panel())
    pd.testing.assert_frame_equal(temporary.predict(), kept.predict())
    for run in ("", "selection"):
        mine, theirs = temporary.run_dir / run, kept.run_dir / run
        last = _steps(theirs / "checkpoints")[-1]
        # every epoch end in the folder that can be resumed, the newest two kept
        assert len(_steps(theirs / "checkpoints")) == 2
        # the temporary one: the step-0 checkpoint and the last
        assert _steps(mine / "checkpoints") == [0, last]
        assert _steps(mine / "checkpoints_best") == _steps(theirs / "checkpoints_best")
