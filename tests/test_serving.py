"""``stacklstm.serving``: loading an exported forecaster with jax and numpy only."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from helpers import cache_env
from stacklstm import serving
from stacklstm.train.export import export_run

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
