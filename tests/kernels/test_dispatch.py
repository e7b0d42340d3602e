"""kernels.info(): which path runs and why, under kernels.use and STACKLSTM_KERNEL."""

from helpers import ON_KERNEL_PLATFORM
from stacklstm import kernels


def test_info_says_which_path_runs_and_why(monkeypatch):
    monkeypatch.delenv("STACKLSTM_KERNEL", raising=False)
    if not ON_KERNEL_PLATFORM:
        assert kernels.info().path == "xla"
        return
    info = kernels.info()
    assert (info.path, info.choice, info.source, info.kernel_loaded) == (
        "native", "auto", "default", True
    )  # fmt: skip
    assert info.ffi_api_built is not None and info.ffi_api_running is not None
    assert info.ffi_api_built[0] == info.ffi_api_running[0]
    assert info.ffi_api_built[1] <= info.ffi_api_running[1]
    with kernels.use("xla"):
        assert kernels.info()[:4] == (
            "xla", "kernels.use('xla') turns the compiled kernel off", "xla", "kernels.use('xla')"
        )  # fmt: skip
    monkeypatch.setenv("STACKLSTM_KERNEL", "xla")
    assert kernels.info().path == "xla"
    assert kernels.info().source == "STACKLSTM_KERNEL=xla"
    with kernels.use("auto"):  # use() wins over the environment
        assert kernels.info().path == "native"
