"""ExportedForecaster: what it takes and gives, the windows it cuts, the inputs it refuses."""

import numpy as np
import pytest

from stacklstm import serving

pytest.importorskip("flatbuffers", reason="jax.export serialisation needs flatbuffers")


def test_forecaster_describes_its_input_and_output(forecaster_file):
    f = serving.load(forecaster_file)
    assert (f.columns, f.targets) == (("co2",), ("co2",))
    assert (f.window, f.horizon, f.input_steps) == (6, 1, 6)
    assert (f.input_shape, f.output_shape) == (("batch", 6, 1), ("batch", 1, 1))
    assert f.forecast_columns == ["co2_h1"]
    assert f.metadata["layout_version"] == serving.LAYOUT_VERSION
    assert f.metadata["checkpoint"]["kind"] == "best"
    assert f.predict(np.zeros((0, 6, 1))).shape == (0, 1, 1)


def test_windows_cut_every_window_of_a_series_oldest_row_first(forecaster_file):
    f = serving.load(forecaster_file)
    w = f.windows(np.arange(8.0)[:, None])
    expected = np.array([[0, 1, 2, 3, 4, 5], [1, 2, 3, 4, 5, 6], [2, 3, 4, 5, 6, 7]], float)
    np.testing.assert_array_equal(w, expected[:, :, None])
    with pytest.raises(ValueError, match=r"has 5 rows but one input window needs 6"):
        f.windows(np.zeros((5, 1)))
    with pytest.raises(ValueError, match=r"series of shape \(time, 1\) holding the columns"):
        f.windows(np.zeros((8, 2)))


def test_predict_refuses_windows_of_another_shape(forecaster_file):
    f = serving.load(forecaster_file)
    for bad in (np.zeros((2, 5, 1)), np.zeros((2, 6, 2)), np.zeros((6, 1))):
        with pytest.raises(ValueError, match=r"expected windows of shape .* = \(batch, 6, 1\)"):
            f.predict(bad)


def test_window_normalisation_is_inside_the_artifact(forecaster_file):
    """The run normalises by window: shifting a window by a constant shifts its forecast by
    the same constant (to float64 rounding of the scaling), which a model fed scaled levels
    would not do."""
    f = serving.load(forecaster_file)
    window = 330 + np.random.default_rng(2).normal(0, 3, (1, 6, 1))
    shifted = f.predict(window + 25.0) - f.predict(window)
    np.testing.assert_allclose(shifted, 25.0, rtol=0, atol=1e-9)


def test_a_forecaster_of_one_series_refuses_inputs_it_does_not_take(forecaster_file):
    f = serving.load(forecaster_file)
    x = np.zeros((2, 6, 1))
    with pytest.raises(ValueError, match="trained on one series: it takes no ids"):
        f.predict(x, ids=["a", "b"])
    with pytest.raises(ValueError, match="no known-future columns: it takes no future"):
        f.predict(x, future=np.zeros((2, 1, 1)))
    with pytest.raises(ValueError, match="no static columns: it takes no static"):
        f.predict(x, static=np.zeros((2, 1)))
    with pytest.raises(ValueError, match="gives point forecasts only"):
        f.predict_quantiles(x)
    point, quantiles = f.forecast(x)
    assert quantiles is None
    np.testing.assert_array_equal(point, f.predict(x))


def test_infinite_values_are_refused_and_nan_gives_nan(forecaster_file):
    f = serving.load(forecaster_file)
    window = np.full((2, 6, 1), 330.0)
    window[1, 3, 0] = np.inf
    with pytest.raises(ValueError, match=r"windows hold 1 infinite value\(s\), .* \(1, 3, 0\)"):
        f.predict(window)
    window[1, 3, 0] = np.nan  # a missing value: NaN out for that window only
    out = f.predict(window)
    assert np.isfinite(out[0]).all() and np.isnan(out[1]).all()
