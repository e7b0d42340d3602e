"""Prints the build inputs of the CPU kernel as a CMake list, or a reason and exit code 1.

``xla_ffi_include;mkl_include;mkl_lib;jaxlib_version``: the XLA FFI headers shipped in the
``jaxlib`` wheel, oneMKL's headers and static libraries from the ``mkl-include``/``mkl-static``
wheels (all build requirements in ``pyproject.toml``), and the version of that jaxlib (recorded
in the extension, see ``build_info`` in ``lstm_cpu.cc``).
"""

import os
import sys
from importlib import metadata


def locate(dist: str, suffix: str) -> str:
    for f in metadata.files(dist) or ():
        path = os.path.realpath(f.locate()).replace("\\", "/")
        if path.endswith("/" + suffix):
            return path[: -len(suffix) - 1]
    raise LookupError(f"{suffix} not in {dist}")


try:
    inputs = [
        locate("jaxlib", "xla/ffi/api/ffi.h"),
        locate("mkl-include", "mkl.h"),
        locate("mkl-static", "libmkl_core.a"),
        metadata.version("jaxlib"),
    ]
except (metadata.PackageNotFoundError, LookupError) as e:
    print(f"missing build input: {e}")
    sys.exit(1)
print(";".join(inputs))
