"""Choice of a thread-safe Numba threading layer.

Numba's default ``workqueue`` layer aborts the process when two threads launch
parallel code at once, which a loader thread and a training thread (or two
loaders) do.  slipstream therefore asks for a thread-safe layer: TBB (from the
``tbb`` package on PyPI) or OpenMP.  The pip ``tbb`` wheel installs its shared
library into the environment's ``lib`` folder, which is not on the dynamic
loader's path, so it is loaded here by absolute path first; Numba's TBB
extension then finds it by name.
"""

from __future__ import annotations

import ctypes
import importlib
import importlib.metadata
import os
import warnings


def _preload_pip_tbb() -> bool:
    try:
        files = importlib.metadata.files("tbb") or []
    except importlib.metadata.PackageNotFoundError:
        return False
    for file in files:
        if file.name in ("libtbb.so.12", "libtbb.12.dylib", "tbb12.dll"):
            try:
                ctypes.CDLL(str(file.locate()), mode=getattr(ctypes, "RTLD_GLOBAL", 0))
                return True
            except OSError:
                return False
    return False


def _loads(layer: str) -> bool:
    """Whether Numba's extension for a threading layer ("tbb", "omp") loads."""
    try:
        importlib.import_module(f"numba.np.ufunc.{layer}pool")
    except ImportError:
        return False
    return True


def configure() -> None:
    """Make Numba pick a thread-safe threading layer, unless the user chose one
    with ``NUMBA_THREADING_LAYER`` or Numba has already started its threads.
    Warns when no thread-safe layer can be loaded."""
    import numba
    from numba.np.ufunc import parallel

    _preload_pip_tbb()
    if "NUMBA_THREADING_LAYER" in os.environ or parallel._is_initialized:
        return
    if _loads("tbb") or _loads("omp"):
        numba.config.THREADING_LAYER = "threadsafe"
        return
    warnings.warn(
        "slipstream: neither TBB nor OpenMP is available to Numba, so parallel code from two threads at once "
        "(a loader thread and a training thread) can abort the process; install the `tbb` package",
        RuntimeWarning,
        stacklevel=3,
    )
