"""Numba's threading layer, for parallel Numba code of the user's.

slipstream's own stages run on threads of their own
(:mod:`slipstream.compiler.threads`), but a user's parallel Numba code may
call the native kernels (:mod:`slipstream.native`) from threads of the
user's.  Numba's default ``workqueue`` layer aborts the process when two
threads launch parallel code at once, so slipstream asks for a thread-safe
layer: TBB (from the ``tbb`` package on PyPI) or OpenMP.  The pip ``tbb``
wheel installs its shared library into the environment's ``lib`` folder,
which is not on the dynamic loader's path, so it is loaded here by absolute
path first; Numba's TBB extension then finds it by name.

A fork while Numba's pool runs leaves the child a pool whose threads are
gone: :func:`fork_is_safe` says whether one runs.
"""

from __future__ import annotations

import ctypes
import os
import sys
import warnings

from slipstream._numba_internals import pool_started, threading_layer_loads


TBB_LIBRARIES = ("libtbb.so.12", "libtbb.12.dylib", "tbb12.dll")


def _pip_tbb_library() -> str | None:
    """Where the pip ``tbb`` wheel put its library: the environment's data
    folder, looked at directly first (importing ``importlib.metadata`` to
    ask takes longer than everything else at import)."""
    for folder in (os.path.join(sys.prefix, "lib"), os.path.join(sys.prefix, "Library", "bin")):
        for name in TBB_LIBRARIES:
            if os.path.exists(os.path.join(folder, name)):
                return os.path.join(folder, name)
    import importlib.metadata

    try:
        files = importlib.metadata.files("tbb") or []
    except importlib.metadata.PackageNotFoundError:
        return None
    return next((str(f.locate()) for f in files if f.name in TBB_LIBRARIES), None)


def _preload_pip_tbb() -> bool:
    path = _pip_tbb_library()
    if path is None:
        return False
    try:
        ctypes.CDLL(path, mode=getattr(ctypes, "RTLD_GLOBAL", 0))
    except OSError:
        return False
    return True


def configure() -> None:
    """Make Numba pick a thread-safe threading layer, unless the user chose one
    with ``NUMBA_THREADING_LAYER`` or Numba has already started its threads.
    Warns when no thread-safe layer can be loaded."""
    import numba

    _preload_pip_tbb()
    if "NUMBA_THREADING_LAYER" in os.environ or pool_started():
        return
    if threading_layer_loads("tbb") or threading_layer_loads("omp"):
        numba.config.THREADING_LAYER = "threadsafe"
        return
    warnings.warn(
        "slipstream: neither TBB nor OpenMP is available to Numba, so parallel Numba code launched from two "
        "threads at once can abort the process; install the `tbb` package",
        RuntimeWarning,
        stacklevel=3,
    )


def fork_is_safe() -> bool:
    """Whether a fork from the calling thread now hands the child no live
    Numba thread pool.  slipstream starts none (its stages run on threads of
    its own, which a forked child forgets: :mod:`slipstream.compiler.threads`),
    so one runs only where other code of the process ran parallel Numba
    code; a fork then would hand the children a pool in an undefined state."""
    return not pool_started()
