"""Every script in examples/ runs (quick mode) and prints what it promises."""

import subprocess
import sys
from pathlib import Path

import pytest

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXPECTED = {
    "quickstart.py": "prediction shape: (32, 1)",
    "forecast_co2.py": "last_value",
    "forecast_panel.py": "per-series MASE",
    "train_on_csv.py": "last_value",
    "nnx_regressor.py": "prediction shape: (32, 1)",
    "dataframe_api.py": "cross-validation MAE",
}


def test_every_example_is_checked():
    assert {p.name for p in EXAMPLES.glob("*.py")} == set(EXPECTED)


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_example_runs(name, tmp_path):
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert EXPECTED[name] in done.stdout
    if name in ("quickstart.py", "nnx_regressor.py"):  # "MSE first step A -> last step B"
        words = done.stdout.split()
        first, last = float(words[3]), float(words[7])
        assert last < first / 5, done.stdout
    if name == "nnx_regressor.py":  # the NNX model and the linen model agree
        assert float(done.stdout.split("max |nnx - linen|: ")[1].split()[0]) < 1e-6
