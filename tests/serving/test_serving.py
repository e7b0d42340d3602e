"""``stacklstm.serving``: loading an exported forecaster with jax and numpy only."""

import json
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from helpers import cache_env
from stacklstm import serving

pytest.importorskip("flatbuffers", reason="jax.export serialisation needs flatbuffers")

HEAVY = ("flax", "optax", "orbax", "torch", "pandas", "matplotlib", "tqdm", "yaml")


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
    training = ("train", "run", "forecasting", "report", "rundir", "plots", "data", "model")
    assert not [m for m in loaded["ours"] if m.split(".")[1:2] and m.split(".")[1] in training]
    # the same program gives the same numbers here as in the child
    np.testing.assert_array_equal(
        np.load(tmp_path / "y.npy"), serving.load(forecaster_file).predict(windows)
    )


def test_the_runtime_has_one_name_and_keeps_its_older_one_as_an_alias():
    import stacklstm

    assert serving.Forecaster is serving.ExportedForecaster
    assert serving.ExportedForecaster is not stacklstm.Forecaster  # that one is the Flax module
