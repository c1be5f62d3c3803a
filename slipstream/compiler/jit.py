"""``numba.njit`` with Numba's disk cache, whose saving never fails a compile.

Every compiled function of the library (the kernels of the operations and
the generated stages) keeps its machine code in Numba's disk cache, so that
the next process loads it instead of compiling again.  Numba writes the
cache as it compiles, and a write that fails (a full disk, a quota, a file
size limit, a cache folder that became read-only) raises its ``OSError``
from the compile itself: from inside the type inference of the stage that
calls the function, which then cannot be built.  Here such a write is a
:class:`~slipstream.CacheWarning` instead (once per cache folder and
process), and the function, compiled, runs: the next process compiles it
again.  An entry that cannot be read back (cut short, damaged) is a
:class:`~slipstream.CacheWarning` too, and the function is compiled again
and saved over it, where Numba's unpickling error failed the compile.

Most of the library's compiled functions are called only from other
compiled code, so they are compiled as Numba compiles its own internal
functions: without the CPython wrapper that unboxes Python arguments and
without the C-callable wrapper, whose lowering, optimisation and machine
code each function would otherwise pay for (BENCHMARKS.md, "Compile
time"), and without a separate compile for each constant an argument is
called with (Numba types a constant argument as a literal and would
compile a function once per distinct constant).  Such a function called
from Python runs a twin compiled with its wrapper on that first call (in
memory only), so every function stays callable from Python; the few that
Python calls in the running loader (the stages, the orders' draws, the
batch operations' keys) are compiled with ``entry=True``.
"""

from __future__ import annotations

import contextlib
import os
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numba
from numba.core import types
from numba.core.caching import FunctionCache
from numba.core.registry import CPUDispatcher

from slipstream._numba_internals import cache_index_path, install_cache, installed_cache
from slipstream.errors import CacheWarning

_warned: set[str] = set()
_warned_lock = threading.Lock()


def warn_once(folder: str, what: str, error: BaseException) -> None:
    """A :class:`~slipstream.CacheWarning` that ``what`` could not be kept
    in the compile cache at ``folder`` (``error``), once per folder."""
    with _warned_lock:
        if folder in _warned:
            return
        _warned.add(folder)
    warnings.warn(f"{what} could not be kept in the compile cache at {folder} ({error}): it is compiled again by "
                  f"each process until there is room (free space there, or set SLIPSTREAM_CACHE_DIR and "
                  f"NUMBA_CACHE_DIR to a folder with room); further failures there are not reported",
                  CacheWarning, stacklevel=3)


class _SavingCache(FunctionCache):
    """Numba's disk cache of one function, whose failed saves are warnings."""

    def __init__(self, py_func: Callable[..., Any]) -> None:
        super().__init__(py_func)
        self.function = py_func.__qualname__

    def load_overload(self, sig: Any, target_context: Any) -> Any:
        try:
            return super().load_overload(sig, target_context)
        except Exception as exc:  # a damaged entry (cut short, overwritten): compiled again and saved afresh
            warnings.warn(f"the compile cache entry of {self.function} at {self.cache_path} could not be read "
                          f"({type(exc).__name__}: {exc}): it is compiled again and saved over it",
                          CacheWarning, stacklevel=2)
            with contextlib.suppress(OSError):
                os.unlink(cache_index_path(self))
            return None

    def holds_entries(self) -> bool:
        """Whether the cache on disk holds machine code of this function (its index exists)."""
        return os.path.exists(cache_index_path(self))

    def save_overload(self, sig: Any, data: Any) -> None:
        try:
            super().save_overload(sig, data)
        except OSError as exc:
            warn_once(str(self.cache_path), f"the machine code of {self.function}", exc)


def cache_state(dispatcher: Any) -> str:
    """Where a compiled function's machine code stands, in words: compiled
    (or loaded) in this process, in the compile cache on disk (loaded on
    its first call), or still to be compiled on its first call."""
    if dispatcher.signatures:
        return "in this process (compiled or loaded from the compile cache)"
    cache = installed_cache(dispatcher)
    if isinstance(cache, _SavingCache) and cache.holds_entries():
        return f"in the compile cache at {cache.cache_path} (loaded on the first batch)"
    return "not compiled yet: compiled on the first batch" + (
        f" and kept in the compile cache at {cache.cache_path}" if isinstance(cache, _SavingCache) else "")


class InternalDispatcher(CPUDispatcher):
    """A Numba dispatcher compiled for calls from compiled code only (see
    the module docstring): no wrappers, and arguments typed by their types,
    never by their constant values.  A call from Python goes to a twin
    dispatcher compiled with the CPython wrapper, made on the first such
    call."""

    _twin_lock = threading.Lock()

    def get_call_template(self, args: Any, kws: Any) -> Any:
        # What Numba asks when compiled code calls this function: one overload per argument *type*.
        return super().get_call_template(tuple(types.unliteral(a) for a in args),
                                         {k: types.unliteral(v) for k, v in kws.items()})

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        twin = self.__dict__.get("_twin")
        if twin is None:
            with self._twin_lock:
                twin = self.__dict__.get("_twin")
                if twin is None:
                    options = {k: v for k, v in self.targetoptions.items()
                               if k not in ("nopython", "no_cpython_wrapper", "no_cfunc_wrapper")}
                    twin = self.__dict__["_twin"] = numba.njit(**options)(self.py_func)
        return twin(*args, **kwargs)


def _dispatcher(function: Callable[..., Any], entry: bool, options: dict[str, Any]) -> Any:
    """``function`` compiled with ``numba.njit(nogil=True, **options)``:
    with its CPython wrapper (``entry``), or as an :class:`InternalDispatcher`."""
    if entry:  # Python calls it: the CPython wrapper, and no C-callable one (nothing takes its address)
        return numba.njit(nogil=True, no_cfunc_wrapper=True, **options)(function)
    internal = {"nopython": True, "nogil": True, "no_cpython_wrapper": True, "no_cfunc_wrapper": True}
    return InternalDispatcher(function, locals={}, targetoptions={**internal, **options})


def cached_njit(fn: Callable[..., Any] | None = None, /, *, entry: bool = False, **options: Any) -> Any:
    """``numba.njit(fn, nogil=True, cache=True, **options)``, whose cache
    saves never fail the compile, compiled for calls from compiled code
    unless ``entry`` (see the module docstring).  As a decorator:
    ``@cached_njit`` or ``@cached_njit(inline="always")``."""

    def compiled(function: Callable[..., Any]) -> Any:
        dispatcher = _dispatcher(function, entry, options)
        try:
            # What Dispatcher.enable_caching (cache=True) installs, with saves that cannot fail.
            install_cache(dispatcher, _SavingCache(function))
        except RuntimeError as exc:  # Numba found no folder it can write its cache to
            warn_once("(no writable folder)", f"the machine code of {function.__qualname__}", exc)
        return dispatcher

    return compiled if fn is None else compiled(fn)


def uncached_njit(fn: Callable[..., Any] | None = None, /, *, entry: bool = False, **options: Any) -> Any:
    """``numba.njit(fn, nogil=True, **options)`` for code made at run time
    (closures over an operation's values, generated code), which Numba's
    disk cache cannot find again by name: compiled for calls from compiled
    code unless ``entry``, like :func:`cached_njit`."""
    return (lambda function: _dispatcher(function, entry, options)) if fn is None else _dispatcher(fn, entry, options)


__all__ = ["InternalDispatcher", "cache_state", "cached_njit", "uncached_njit", "warn_once"]
