"""Numba's thread pool: its layer, its owner, and forks while it runs.

Numba's default ``workqueue`` layer aborts the process when two threads launch
parallel code at once, which a loader thread and a training thread (or two
loaders) do.  slipstream therefore asks for a thread-safe layer: TBB (from the
``tbb`` package on PyPI) or OpenMP.  The pip ``tbb`` wheel installs its shared
library into the environment's ``lib`` folder, which is not on the dynamic
loader's path, so it is loaded here by absolute path first; Numba's TBB
extension then finds it by name.

A fork while the pool runs leaves the child a pool whose threads are gone.
Numba's TBB layer avoids that by joining the pool's threads before a fork and
starting them again after, but only when the forking thread is the one that
started the pool and no other live thread has run parallel code (TBB keeps
such a thread registered until it exits).  So the main thread starts the
pool before a loader's thread first runs parallel code (:func:`start_pool`),
the loaders' threads say that they run parallel code
(:func:`runs_parallel_code`), and :func:`fork_is_safe` says whether a fork
from the calling thread now meets both conditions.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import sys
import threading
import warnings
import weakref


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


def _loads(layer: str) -> bool:
    """Whether Numba's extension for a threading layer ("tbb", "omp") loads."""
    try:
        importlib.import_module(f"numba.np.ufunc.{layer}pool")
    except ImportError:
        return False
    return True


def one_cpu() -> bool:
    """Whether this process may run on one CPU only (its affinity mask, as
    ``taskset -c 0``, a one-CPU container or a one-core SLURM job set it).

    There, compiled stages are built without parallel loops: a parallel
    region that a non-main thread (the loader's) launches through Numba's
    TBB layer under a one-CPU mask leaves TBB's shutdown waiting forever
    when the interpreter exits, and one CPU gains nothing from a pool."""
    try:
        return len(os.sched_getaffinity(0)) == 1
    except (AttributeError, OSError):  # not Linux: no affinity masks to meet
        return (os.cpu_count() or 1) == 1


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


_started_by_main = False
"""Whether :func:`start_pool` started Numba's pool from the main thread."""


def start_pool() -> None:
    """Start Numba's thread pool now when the calling thread is the main
    thread and the pool has not started, so that the main thread owns it.

    Called before a loader's thread first runs parallel code: a pool started
    by that thread could not be shut down around a fork from the main thread
    (Numba's TBB layer prints "Attempted to fork from a non-main thread"
    and leaves the child's pool in an undefined state)."""
    global _started_by_main
    from numba.np.ufunc import parallel

    if parallel._is_initialized or threading.current_thread() is not threading.main_thread():
        return
    import numba

    numba.get_num_threads()  # starts the pool (and fixes its layer)
    _started_by_main = True


_parallel_threads: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
"""Threads other than the main thread that have run parallel code."""


def runs_parallel_code() -> None:
    """Note that the calling thread runs parallel code (a loader's thread,
    once per epoch): while it lives, a fork cannot join the pool's threads
    (see :func:`fork_is_safe`)."""
    if threading.current_thread() is not threading.main_thread() and not one_cpu():
        _parallel_threads.add(threading.current_thread())


def fork_is_safe() -> bool:
    """Whether a fork from the calling thread now hands the child no live
    Numba thread pool: the pool has not started, or it is TBB's, the main
    thread started it, this is the main thread, and no other thread that
    ran parallel code is alive (Numba then joins the pool's threads before
    the fork and restarts them after)."""
    from numba.np.ufunc import parallel

    if not parallel._is_initialized:
        return True
    import numba

    return (threading.current_thread() is threading.main_thread() and _started_by_main
            and numba.threading_layer() == "tbb" and not any(t.is_alive() for t in _parallel_threads))
