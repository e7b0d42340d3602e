"""Shared test set-up."""

import jax
import pytest

from helpers import CACHE_SETTINGS


@pytest.fixture(scope="session", autouse=True)
def _compilation_cache(tmp_path_factory):
    """Share compiled programs between the many small runs of the suite (the same model and
    settings compile to the same program); restores JAX's settings afterwards."""
    names = [name for name, _ in CACHE_SETTINGS]
    old = {name: getattr(jax.config, name) for name in names}
    values = (str(tmp_path_factory.getbasetemp() / "jax_cache"), 0.3, 0)
    for name, value in zip(names, values, strict=True):
        jax.config.update(name, value)
    yield
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
