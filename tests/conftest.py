"""Shared test set-up."""

import os

import jax
import pytest

from helpers import (
    CACHE_SETTINGS,
    CRASH_FLAGS,
    CRASH_RUN,
    ENSEMBLE_RUN,
    STEPS_PER_EPOCH,
    TINY_RUN,
    _main,
    _saved,
)
from stacklstm.run import fit
from stacklstm.rundir import read_run_info


@pytest.fixture(scope="session", autouse=True)
def _compilation_cache(tmp_path_factory):
    """Share compiled programs between the many small runs of the suite (the same model and
    settings compile to the same program), across pytest-xdist's worker processes too;
    restores JAX's settings afterwards."""
    names = [name for name, _ in CACHE_SETTINGS]
    old = {name: getattr(jax.config, name) for name in names}
    base = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):  # one cache for all the worker processes
        base = base.parent
    values = (str(base / "jax_cache"), 0.3, 0)
    for name, value in zip(names, values, strict=True):
        jax.config.update(name, value)
    # the command lines the tests start use the same cache (stacklstm.compile_cache), never
    # the user's own
    old_env = os.environ.get("STACKLSTM_CACHE_DIR")
    os.environ["STACKLSTM_CACHE_DIR"] = values[0]
    yield
    if old_env is None:
        os.environ.pop("STACKLSTM_CACHE_DIR", None)
    else:
        os.environ["STACKLSTM_CACHE_DIR"] = old_env
    for name, value in old.items():
        jax.config.update(name, value)


@pytest.fixture(params=["native", "xla"])
def kernel(request, monkeypatch):
    """Runs a test on each implementation of the recurrence: the compiled CPU kernel and the
    pure-JAX scan (the choice is made when a function is traced, so the caches are cleared)."""
    from stacklstm.kernels import native

    if request.param == "native" and not native.available():
        pytest.skip("the compiled CPU kernel is not built on this platform")
    monkeypatch.setenv("STACKLSTM_KERNEL", request.param)
    jax.clear_caches()
    yield request.param
    jax.clear_caches()


@pytest.fixture(scope="session")
def trained_run(tmp_path_factory):
    """One finished tiny run on the bundled data (2 epochs of 24 steps)."""
    out = tmp_path_factory.mktemp("fit") / "run"
    return fit(TINY_RUN, out, quiet=True)


@pytest.fixture(scope="session")
def reference(tmp_path_factory):
    """One uninterrupted ``stacklstm train`` with CRASH_FLAGS: (run folder, its contents)."""
    run = tmp_path_factory.mktemp("reference") / "run"
    code, _, err = _main("train", "--out", run, "--quiet", *CRASH_FLAGS)
    assert code == 0, err
    assert read_run_info(run).config == CRASH_RUN
    saved = _saved(run)
    assert saved["latest"][0] == 2 * STEPS_PER_EPOCH
    return run, saved


@pytest.fixture(scope="session")
def ensemble(tmp_path_factory):
    """A finished 2-member ensemble of the tiny run (seeds 3 and 4): (run folder, FitResult)."""
    out = tmp_path_factory.mktemp("ensemble") / "run"
    result = fit(ENSEMBLE_RUN, out, quiet=True)
    return out, result
