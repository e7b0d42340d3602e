"""Interval scores: coverage, width and the weighted quantile loss, by hand."""

import numpy as np
import pytest

from stacklstm.intervals import Forecast, interval_scores


def test_interval_scores_match_hand_computed_coverage_width_and_wql():
    y = np.array([1.0, 2.0, 5.0]).reshape(3, 1, 1)
    q = np.tile([0.0, 1.0, 2.0], (3, 1)).reshape(3, 1, 1, 3)
    scores = interval_scores(y, Forecast(q[..., 1], q, (0.1, 0.5, 0.9)))
    assert scores["coverage"] == {"0.8": pytest.approx(2 / 3)}
    assert scores["width"] == {"0.8": 2.0}
    # pinball sums: q0.1 -> 0.1 + 0.2 + 0.5 = 0.8; q0.5 -> 0 + 0.5 + 2 = 2.5;
    # q0.9 -> 0.1 + 0 + 2.7 = 2.8; each times 2 / sum|y| = 2 / 8, then averaged
    assert scores["wql"] == pytest.approx((0.8 + 2.5 + 2.8) * 2 / 8 / 3)
    zero = interval_scores(np.zeros((3, 1, 1)), Forecast(q[..., 1], q, (0.1, 0.5, 0.9)))
    assert zero["wql"] is None
