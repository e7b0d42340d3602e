"""The target-transform registry: every transform is declared once (stacklstm.transforms),
and the config's choices, its help, the windows and the exported program read it. A new
transform is one entry there and one row in HAND below."""

from __future__ import annotations

import dataclasses
from typing import get_args

import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from helpers import check_registry_setting
from stacklstm import transforms
from stacklstm.checks import DataError
from stacklstm.config import DataConfig, TargetTransform
from stacklstm.data import make_splits, prepare_series
from stacklstm.data.season import forward_targets, inverse_targets
from stacklstm.transforms import RULES, TRANSFORMS, Transform, applied

VALUES = np.array([0.0, 1.0, 3.0, 99.0])
#: Each transform of VALUES, by hand.
HAND = {
    "none": [0.0, 1.0, 3.0, 99.0],
    "log1p": [0.0, np.log(2.0), np.log(4.0), np.log(100.0)],
}


def test_every_transform_is_in_the_registry_the_config_and_the_help():
    assert tuple(TRANSFORMS) == tuple(HAND)
    assert set(get_args(TargetTransform)) == {*TRANSFORMS, *RULES}
    check_registry_setting(DataConfig, "data", "target_transform", [*TRANSFORMS, *RULES], "sqrt")
    assert applied("per_series").name == transforms.PER_SERIES == "log1p"


@pytest.mark.parametrize("name", sorted(HAND))
def test_a_transform_maps_hand_computed_values_and_back_in_numpy_and_jax(name):
    t = TRANSFORMS[name]
    np.testing.assert_allclose(t.forward(VALUES, np), HAND[name], rtol=1e-12)
    np.testing.assert_allclose(t.forward(jnp.asarray(VALUES), jnp), HAND[name], rtol=1e-6)
    np.testing.assert_allclose(t.inverse(np.asarray(HAND[name]), np), VALUES, rtol=1e-12)
    np.testing.assert_allclose(t.inverse(jnp.asarray(HAND[name]), jnp), VALUES, rtol=1e-5)


def test_the_windows_apply_the_named_transform_to_the_rows_it_covers():
    rows = np.array([[1.0], [3.0], [7.0]])
    out = forward_targets(rows, np.array([True, False, True]), "log1p")
    np.testing.assert_allclose(out[:, 0], [np.log(2.0), 3.0, np.log(8.0)], rtol=1e-12)
    back = inverse_targets(out, np.array([True, False, True]), "log1p")
    np.testing.assert_allclose(back, rows, rtol=1e-12)
    with pytest.raises(
        DataError,
        match=r"target_transform='log1p' needs non-negative targets, "
        r"got values from -2 to 7",
    ):
        forward_targets(np.array([[1.0], [-2.0], [7.0]]), True, "log1p")


def test_a_new_transform_is_one_entry(monkeypatch):
    """A transform added to the registry alone is a valid setting, and a run's windows are
    built on its scale and map back to the values exactly."""
    sqrt = Transform(
        "sqrt",
        "the square root of non-negative targets",
        lambda x, xp: xp.sqrt(x),
        lambda x, xp: xp.square(x),
        lambda x: bool((x >= 0).all()),
        "non-negative targets",
    )
    monkeypatch.setitem(TRANSFORMS, "sqrt", sqrt)
    t = np.arange(60)
    frame = pd.DataFrame({"y": (5 + t % 7 + 0.1 * t) ** 2})
    cfg = DataConfig(
        target=("y",),
        time_column=None,
        window=8,
        horizon=2,
        season=7,
        scaler="none",
        normalize="none",
        deseasonalize=False,
        target_transform="sqrt",
    )
    cfg.validate()
    splits, _ = make_splits(prepare_series(frame, cfg), cfg)
    train = splits.train
    assert train.held.transform == "sqrt" and train.held.transformed is True
    np.testing.assert_allclose(train.x[0, :, 0], np.sqrt(frame["y"].to_numpy()[:8]), rtol=1e-6)
    np.testing.assert_allclose(train.to_original(train.y), train.y_true, rtol=1e-5)
    seasonal = dataclasses.replace(cfg, deseasonalize=True)  # the pattern on its scale
    train = make_splits(prepare_series(frame, seasonal), seasonal)[0].train
    assert train.held.pattern is not None
    np.testing.assert_allclose(train.to_original(train.y), train.y_true, rtol=1e-5)
