"""The scaler registry: every scaling is declared once (stacklstm.scalers) and the config's
choices, its help and Scaler.fit read it. A new scaler is one entry there and one row in HAND
below."""

from typing import get_args

import numpy as np
import pytest

from helpers import check_registry_setting
from stacklstm.config import DataConfig, ScalerKind, ScalerSetting
from stacklstm.data import Scaler
from stacklstm.scalers import SCALERS

# one column of 6 rows, season 2
VALUES = np.array([[2.0], [4.0], [6.0], [5.0], [1.0], [12.0]])
#: Each scaler's (center, spread) of VALUES, by hand.
HAND = {
    "standard": (5.0, np.sqrt(((VALUES - 5.0) ** 2).mean())),
    "minmax": (1.0, 11.0),
    "robust": (4.5, 5.75 - 2.5),  # numpy's linear percentiles: 2.5, 4.5, 5.75
    "mean": (0.0, 5.0),
    "naive": (5.0, (2 + 2 + 1 + 4 + 11) / 5),  # mean absolute step, lag 1
    "seasonal_naive": (5.0, (4 + 1 + 5 + 7) / 4),  # lag 2 (the season)
    "none": (0.0, 1.0),
}


def test_every_scaler_is_in_the_registry_the_config_and_the_help():
    assert tuple(SCALERS) == get_args(ScalerKind) == tuple(HAND)
    assert get_args(ScalerSetting) == ("auto", *SCALERS)
    check_registry_setting(DataConfig, "data", "scaler", SCALERS, "zscore")


@pytest.mark.parametrize("name", sorted(HAND))
def test_a_scaler_fits_its_hand_computed_statistics(name):
    center, spread = HAND[name]
    scaler = Scaler.fit(VALUES, name, ("y",), 1, season=2)
    np.testing.assert_allclose(scaler.center, [center], rtol=1e-12)
    np.testing.assert_allclose(scaler.scale, [spread], rtol=1e-12)
    np.testing.assert_allclose(scaler.transform(VALUES), (VALUES - center) / spread, rtol=1e-12)
    flat = Scaler.fit(np.full((4, 1), 3.0), name, ("y",), 1, season=2)
    assert flat.scale.tolist() == [1.0] or name in ("mean", "none")  # zero spread: 1
