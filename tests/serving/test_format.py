"""The artifact's format: older layouts still load, and origin phases are counted in steps as
the training counts them."""

import numpy as np
import pandas as pd
import pytest

from stacklstm import serving
from stacklstm.data.season import SeasonalPattern, _steps_between
from stacklstm.forecasting.export import seasonal_metadata

pytest.importorskip("flatbuffers", reason="jax.export serialisation needs flatbuffers")

# the run's time step -> the step rule export writes and stamps on that grid
STEP_RULES = {
    "MS": ({"kind": "months", "every": 1, "anchor": "start"}, "2001-03-01"),
    "ME": ({"kind": "months", "every": 1, "anchor": "end"}, "2001-02-28"),
    "QS-JAN": ({"kind": "months", "every": 3, "anchor": "start"}, "1999-04-01"),
    "2MS": ({"kind": "months", "every": 2, "anchor": "start"}, "2000-03-01"),
    "W-SUN": ({"kind": "fixed", "ns": 7 * 86400 * 10**9}, "2001-01-07"),
    "D": ({"kind": "fixed", "ns": 86400 * 10**9}, "2001-01-03"),
    "h": ({"kind": "fixed", "ns": 3600 * 10**9}, "2001-01-03 05:00"),
    "B": ({"kind": "business_days"}, "2001-01-03"),
}


@pytest.mark.parametrize("freq", sorted(STEP_RULES))
def test_phases_from_time_stamps_count_the_steps_as_the_training_does(freq):
    rule, start = STEP_RULES[freq]
    pattern = SeasonalPattern(5, np.zeros((1, 5, 1)), (str(pd.Timestamp(start).asm8),), freq)
    meta = seasonal_metadata(pattern)
    assert meta["step"] == rule
    reference = pd.Timestamp(start)
    stamps = pd.date_range(end=reference, periods=40, freq=freq).append(
        pd.date_range(reference, periods=300, freq=freq)[1:]
    )
    want = [_steps_between(meta["reference"], t, freq) for t in stamps[::7]]
    assert want[0] == -39 and want[-1] == 297  # pandas' count, to compare with numpy's
    got = serving.origin_steps(stamps[::7].to_numpy(), meta)
    np.testing.assert_array_equal(got, want)
    assert serving.origin_steps([str(reference)], meta).tolist() == [0]
    off = reference + (pd.Timedelta(minutes=30) if freq == "h" else pd.Timedelta(hours=12))
    with pytest.raises(ValueError, match=rf"is not on the {freq} grid of"):
        serving.origin_steps([off.asm8], meta)


def test_phases_from_whole_number_stamps_and_row_numbers():
    meta = seasonal_metadata(SeasonalPattern(4, np.zeros((1, 4, 1)), (1990,), "5"))
    assert meta["step"] == {"kind": "integer", "every": 5}
    assert serving.origin_steps([1990, 2000, 1985, 2025.0], meta).tolist() == [0, 2, -1, 7]
    with pytest.raises(ValueError, match="time stamp 1993 is not on the grid of step 5 from 1990"):
        serving.origin_steps([1993], meta)
    rows = seasonal_metadata(SeasonalPattern(4, np.zeros((1, 4, 1)), (None,), None))
    assert serving.origin_steps(np.arange(3, 6), rows).tolist() == [3, 4, 5]
    with pytest.raises(ValueError, match=r"expected whole-number time stamps \(row numbers\)"):
        serving.origin_steps([2.5], rows)
    with pytest.raises(ValueError, match=r"cannot count time steps of 'YS-FEB'.*phase="):
        serving.origin_steps(["2001-02-01"], {"freq": "YS-FEB", "step": None})


def test_an_old_layout_file_still_loads_and_forecasts_alike(forecaster_file):
    """Layout 1 (before the ``seasonal`` key): read as a forecaster without a season."""
    metadata, program = serving.unpack(forecaster_file.read_bytes())
    assert metadata["seasonal"] is None
    old = {k: v for k, v in metadata.items() if k != "seasonal"} | {"layout_version": 1}
    f = serving.from_bytes(serving.pack(old, program, version=1), "old.stacklstm")
    assert f.seasonal is None and f.season == 1 and f.metadata["seasonal"] is None
    windows = 330 + np.random.default_rng(4).normal(0, 3, (4, 6, 1))
    want = serving.load(forecaster_file).predict(windows)
    np.testing.assert_array_equal(f.predict(windows), want)
    np.testing.assert_array_equal(f.predict(windows, last_time="2001-01-01"), want)  # no season
    with pytest.raises(ValueError, match=r"lacks the keys \['seasonal'\]"):
        serving.from_bytes(serving.pack(old, program))  # a version 2 file needs the key


NEW_IN_3 = ("inputs", "ids", "future_columns", "static_columns", "conformal")


def test_a_layout_2_file_still_loads_as_a_point_forecaster_of_windows(forecaster_file):
    """Layout 2 (before the keys of panels, covariates and intervals): read as a program of
    the windows (and phases) giving point forecasts."""
    metadata, program = serving.unpack(forecaster_file.read_bytes())
    assert metadata["inputs"] == ["windows"] and metadata["ids"] is None
    old = {k: v for k, v in metadata.items() if k not in NEW_IN_3} | {"layout_version": 2}
    f = serving.from_bytes(serving.pack(old, program, version=2), "old.stacklstm")
    assert f.inputs == ("windows",) and f.ids is None and f.quantiles == ()
    assert (f.future_columns, f.static_columns, f.conformal) == ((), (), False)
    windows = 330 + np.random.default_rng(5).normal(0, 3, (4, 6, 1))
    np.testing.assert_array_equal(
        f.predict(windows), serving.load(forecaster_file).predict(windows)
    )
    with pytest.raises(ValueError, match=r"lacks the keys \['conformal', 'future_columns'"):
        serving.from_bytes(serving.pack(old, program))  # a version 3 file needs them
    with pytest.raises(ValueError, match=r"names the inputs \['windows', 'ids'\] but its other"):
        serving.from_bytes(serving.pack({**metadata, "inputs": ["windows", "ids"]}, program))
