"""Every use slipstream makes of Numba's internals, in one place.

slipstream relies on a few things Numba does not document: whether its
thread pool has started, the counter that names compiled closures, the
disk cache a dispatcher holds and that cache's index file, the name of a
native intrinsic, and the modules of its threading layers.  They can
change in any Numba release, so they are reached only through the
functions here, ``pyproject.toml`` bounds numba and llvmlite to the
releases they were tested with (:data:`TESTED`), and
``tests/test_numba_internals.py`` checks each one against the installed
Numba: a release that moves one fails there, naming it, and nowhere else.
"""

from __future__ import annotations

import importlib
import itertools
from typing import Any

TESTED = {"numba": "0.68", "llvmlite": "0.50"}
"""The release series of numba and llvmlite the internals below were
tested with: ``pyproject.toml`` allows these and no other."""


def pool_started() -> bool:
    """Whether Numba's thread pool (of ``parallel=True`` code) has started
    in this process."""
    from numba.np.ufunc import parallel

    return bool(parallel._is_initialized)


def threading_layer_loads(layer: str) -> bool:
    """Whether Numba's threading layer ``layer`` (``"tbb"``, ``"omp"``,
    ``"workqueue"``) can be loaded here (its library is installed)."""
    try:
        importlib.import_module(f"numba.np.ufunc.{layer}pool")
    except ImportError:
        return False
    return True


def spread_function_ids(start: int) -> None:
    """Number the functions Numba compiles from now on from ``start``: the
    counter its unique names (and the symbols of cached machine code) take
    their numbers from.  Left as it is where Numba keeps it otherwise."""
    from numba.core.bytecode import FunctionIdentity

    if isinstance(getattr(FunctionIdentity, "_unique_ids", None), itertools.count):
        FunctionIdentity._unique_ids = itertools.count(start)


def install_cache(dispatcher: Any, cache: Any) -> None:
    """Make ``cache`` (a ``numba.core.caching.FunctionCache``) the disk
    cache of ``dispatcher``: what ``Dispatcher.enable_caching`` does with
    Numba's own."""
    dispatcher._cache = cache


def installed_cache(dispatcher: Any) -> Any:
    """The disk cache of ``dispatcher`` (None without one)."""
    return getattr(dispatcher, "_cache", None)


def cache_index_path(cache: Any) -> str:
    """The index file of a ``FunctionCache``: it exists once machine code
    of the function is saved; removing it makes the cache empty."""
    return cache._cache_file._index_path


def intrinsic_parts(obj: Any) -> tuple[str, Any] | None:
    """The name and the Python definition (the typing function) of ``obj``
    when it is a Numba intrinsic (made by ``numba.extending.intrinsic``),
    else None."""
    from numba.core.extending import _Intrinsic

    return (obj._name, obj._defn) if isinstance(obj, _Intrinsic) else None
