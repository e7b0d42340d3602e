"""``stacklstm.serving``: loading an exported forecaster with jax and numpy only."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest

from helpers import cache_env
from stacklstm import serving
from stacklstm.data.season import SeasonalPattern, _steps_between
from stacklstm.train.export import export_run, seasonal_metadata

pytest.importorskip("flatbuffers", reason="jax.export serialisation needs flatbuffers")

HEAVY = ("flax", "optax", "orbax", "torch", "pandas", "matplotlib", "tqdm", "yaml")


@pytest.fixture(scope="module")
def forecaster_file(trained_run, tmp_path_factory):
    path = tmp_path_factory.mktemp("serving") / "co2.stacklstm"
    export_run(trained_run.out_dir, path)
    return path


def test_load_and_predict_import_only_jax_and_numpy_in_a_fresh_process(forecaster_file, tmp_path):
    rng = np.random.default_rng(1)
    windows = 330 + rng.normal(0, 5, (9, 6, 1))  # ppm
    np.save(tmp_path / "windows.npy", windows)
    script = textwrap.dedent(f"""
        import json, sys
        import numpy as np
        from stacklstm import serving
        forecaster = serving.load({str(forecaster_file)!r})
        y = forecaster.predict(np.load({str(tmp_path / "windows.npy")!r}))
        np.save({str(tmp_path / "y.npy")!r}, y)
        months = {{"reference": "2001-01-01", "freq": "MS",
                   "step": {{"kind": "months", "every": 1, "anchor": "start"}}}}
        assert serving.origin_steps(["2002-03-01"], months).tolist() == [14]
        heavy = sorted({{m.split(".")[0] for m in sys.modules}} & set({HEAVY!r}))
        ours = sorted(m for m in sys.modules if m.startswith("stacklstm"))
        print(json.dumps({{"heavy": heavy, "ours": ours}}))
    """)
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=cache_env(), timeout=300
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout.splitlines()[-1])
    assert loaded["heavy"] == []
    assert not [m for m in loaded["ours"] if m.split(".")[1:2] in (["train"], ["data"], ["model"])]
    # the same program gives the same numbers here as in the child
    np.testing.assert_array_equal(
        np.load(tmp_path / "y.npy"), serving.load(forecaster_file).predict(windows)
    )


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


def test_the_runtime_has_one_name_and_keeps_its_older_one_as_an_alias():
    import stacklstm

    assert serving.Forecaster is serving.ExportedForecaster
    assert serving.ExportedForecaster is not stacklstm.Forecaster  # that one is the Flax module
