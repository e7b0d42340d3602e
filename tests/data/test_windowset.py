"""WindowSet: the held series and the windows gathered per batch."""

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from helpers import series_of
from stacklstm.data import make_inference_windows, make_splits


def _cut_oracle(series, origins, cfg, scaler):
    """The windows as they were cut up front before they were gathered per batch: every
    window of ``origins`` materialised at once from the padded float64 model-space series."""
    w, h, nt = cfg.window, cfg.horizon, series.n_targets
    steps = series.values
    if cfg.difference:
        steps = np.full_like(series.values, np.nan)
        steps[1:] = np.diff(series.values, axis=0)
    model = scaler.transform(steps)
    pad = np.full((h, model.shape[1]), np.nan)
    model_padded = np.concatenate([model, pad])
    original_padded = np.concatenate([series.values[:, :nt], pad[:, :nt]])
    inputs = origins[:, None] + np.arange(1 - w, 1)
    targets = origins[:, None] + np.arange(1, h + 1)
    x = model_padded[inputs]
    anchor = model[origins, :nt] if cfg.normalize == "window" else np.zeros((origins.size, nt))
    x[:, :, :nt] -= anchor[:, None, :]
    y = model_padded[targets, :nt] - anchor[:, None, :]
    return x.astype(np.float32), y.astype(np.float32), original_padded[targets], anchor


@settings(max_examples=30, deadline=None)
@given(
    n_rows=st.integers(30, 90),
    window=st.integers(1, 7),
    horizon=st.integers(1, 4),
    stride=st.integers(1, 3),
    kind=st.sampled_from(["standard", "minmax", "robust", "none"]),
    normalize=st.sampled_from(["none", "window"]),
    difference=st.booleans(),
    features=st.integers(0, 2),
)
def test_gathered_windows_are_exactly_the_windows_cut_up_front(
    n_rows, window, horizon, stride, kind, normalize, difference, features
):
    # arange columns, so that a window off by one row shows in every number
    values = np.arange(n_rows, dtype=np.float64)[:, None] * (1.0 + np.arange(features + 1))
    values[:, 1:] += 1000.0
    series, cfg = series_of(
        values,
        window=window,
        horizon=horizon,
        stride=stride,
        scaler=kind,
        normalize=normalize,
        difference=difference,
        val_fraction=0.2,
        test_fraction=0.2,
    )
    splits, scaler = make_splits(series, cfg)
    inference = make_inference_windows(series, cfg, scaler)
    for ws in (splits.train, splits.val, splits.test, inference):
        x, y, y_true, anchor = _cut_oracle(series, ws.origin, cfg, scaler)
        assert np.array_equal(ws.x, x) and np.array_equal(ws.y, y, equal_nan=True)
        assert np.array_equal(ws.y_true, y_true, equal_nan=True)
        assert np.array_equal(ws.anchor, anchor)
        # per batch, in any order: the same windows
        rows = np.random.default_rng(n_rows).permutation(len(ws))[:5]
        xb, yb = ws.gather(rows)
        assert np.array_equal(xb, x[rows]) and np.array_equal(yb, y[rows], equal_nan=True)
        assert ws.gather(rows, targets=False)[1] is None


def test_gathered_windows_by_hand_on_arange():
    series, cfg = series_of(np.arange(12.0), window=3, horizon=2)
    _, scaler = make_splits(series, cfg)
    inference = make_inference_windows(series, cfg, scaler)
    x, y = inference.gather(np.array([8, 0]))  # origins 10 and 2
    assert x[..., 0].tolist() == [[8, 9, 10], [0, 1, 2]]
    assert y[0, 0, 0] == 11 and np.isnan(y[0, 1, 0])  # row 12 is past the end
    assert y[1, :, 0].tolist() == [3, 4]
