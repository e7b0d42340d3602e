"""The baseline registry: every baseline is declared once (stacklstm.baselines.registry) and
the report, the backtest, the plots and the help read it. A new baseline is one entry there
and one row in NAIVE_NAMES or MODELS below. (The naive baselines' numbers are checked against
statsforecast's Naive and SeasonalNaive in tests/test_baselines.py, through the report that
reads this registry.)"""

import pytest

from stacklstm.baselines.registry import BASELINES, NAIVE, STATISTICAL
from stacklstm.config import TrainConfig
from stacklstm.plots.style import COLORS

SEASON = 4
NAIVE_NAMES = ("last_value", "seasonal_naive")
#: Each statistical baseline's statsforecast model.
MODELS = {"auto_ets": "AutoETS", "auto_arima": "AutoARIMA", "auto_theta": "AutoTheta"}


def test_every_baseline_is_declared_once_and_read_everywhere():
    assert NAIVE == NAIVE_NAMES and set(STATISTICAL) == set(MODELS)
    assert tuple(BASELINES) == NAIVE + STATISTICAL
    colours = [COLORS[name] for name in BASELINES]
    assert len(set(colours)) == len(colours) and "tab:red" not in colours  # the model's
    text = TrainConfig.__dataclass_fields__["baselines"].metadata["help"]
    for name, baseline in BASELINES.items():
        assert baseline.label in text, name


@pytest.mark.parametrize("name", sorted(MODELS))
def test_a_statistical_baseline_is_its_statsforecast_model(name):
    pytest.importorskip("statsforecast")
    model = BASELINES[name].model(SEASON, 40)
    assert type(model).__name__ == MODELS[name] and model.season_length == SEASON
