"""kernels.info(): which path runs and why, under kernels.use and STACKLSTM_KERNEL."""

import pytest

from helpers import ON_KERNEL_PLATFORM
from stacklstm import kernels


def test_info_says_which_path_runs_and_why(monkeypatch):
    monkeypatch.delenv("STACKLSTM_KERNEL", raising=False)
    if not ON_KERNEL_PLATFORM:
        assert kernels.info().path == "xla"
        return
    info = kernels.info()
    assert (info.path, info.choice, info.source, info.kernel_loaded) == (
        "native",
        "auto",
        "default",
        True,
    )
    assert info.ffi_api_built is not None and info.ffi_api_running is not None
    assert info.ffi_api_built[0] == info.ffi_api_running[0]
    assert info.ffi_api_built[1] <= info.ffi_api_running[1]
    with kernels.use("xla"):
        assert kernels.info()[:4] == (
            "xla",
            "kernels.use('xla') turns the compiled kernel off",
            "xla",
            "kernels.use('xla')",
        )
    monkeypatch.setenv("STACKLSTM_KERNEL", "xla")
    assert kernels.info().path == "xla"
    assert kernels.info().source == "STACKLSTM_KERNEL=xla"
    with kernels.use("auto"):  # use() wins over the environment
        assert kernels.info().path == "native"


def _intel_cpu() -> bool:
    """Whether this CPU is Intel's (oneMKL chooses its code path by vendor: on an AMD EPYC it
    reports its generic one, "Intel(R) Architecture processors", with or without
    MKL_ENABLE_INSTRUCTIONS)."""
    from pathlib import Path

    try:
        return "GenuineIntel" in Path("/proc/cpuinfo").read_text()
    except OSError:
        return False


_DISPATCHED = """
import json, sys
import jax, jax.numpy as jnp, numpy as np
sys.path.insert(0, {tests!r})
from helpers import _case
from stacklstm import kernels
from stacklstm.kernels.lstm import lstm_layer
from stacklstm.kernels.native import blas_info
from stacklstm.kernels.reference import lstm_layer_reference

p, x, s0 = _case(9, 16, 12, 5, 64)
p = jax.tree.map(lambda a: a * 0.3, p)
loss = lambda p, x: jnp.sum(jnp.sin(3 * lstm_layer(p, x, s0)[0]))
y, s = jax.jit(lambda p, x: lstm_layer(p, x, s0))(p, x)  # the path the dispatch picks
grads = jax.jit(jax.grad(loss, argnums=(0, 1)))(p, x)
y_ref, h_ref, c_ref = lstm_layer_reference(p, x, s0.h, s0.c)
with kernels.use("xla"):
    grads_xla = jax.jit(jax.grad(loss, argnums=(0, 1)))(p, x)
diff = lambda a, b: float(np.max(np.abs(np.asarray(a, np.float64) - np.asarray(b, np.float64))))
print(json.dumps({{
    "path": kernels.info().path, "blas": blas_info(),
    "values": max(diff(y, y_ref), diff(s.h, h_ref), diff(s.c, c_ref)),
    "grads": max(jax.tree.leaves(jax.tree.map(diff, grads, grads_xla))),
}}))
"""


@pytest.mark.parametrize(("instructions", "packed"), [(None, None), ("AVX2", None), (None, "0")])
def test_the_dispatched_path_gives_the_oracles_numbers_on_each_blas_code_path(instructions, packed):
    """Whatever CPU the tests run on, the path the dispatch picks (no kernels.use) has the
    oracle's values and the pure-JAX path's gradients; with oneMKL held to its AVX2 code
    path (MKL_ENABLE_INSTRUCTIONS=AVX2, what an AVX2-only CPU such as AMD's EPYC gets) as
    well as on the one it chose for this CPU, and with plain sgemm in place of the packed
    GEMM (STACKLSTM_PACKED_GEMM=0)."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = {k: v for k, v in os.environ.items() if k not in ("STACKLSTM_KERNEL",)}
    if instructions is not None:
        env["MKL_ENABLE_INSTRUCTIONS"] = instructions
    if packed is not None:
        env["STACKLSTM_PACKED_GEMM"] = packed
    tests = str(Path(__file__).resolve().parents[1])
    done = subprocess.run(
        [sys.executable, "-c", _DISPATCHED.format(tests=tests)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["path"] == ("native" if ON_KERNEL_PLATFORM else "xla")
    if ON_KERNEL_PLATFORM:
        assert got["blas"]["blas"].startswith("Intel(R) oneAPI Math Kernel Library")
        if instructions == "AVX2" and _intel_cpu():  # oneMKL obeys it on Intel CPUs only:
            assert "AVX2" in got["blas"]["code_path"], got["blas"]  # on AMD's it stays generic
        assert got["blas"]["packed_gemm"] is (packed is None)
    assert got["values"] < 2e-5 and got["grads"] < 1e-4, got
