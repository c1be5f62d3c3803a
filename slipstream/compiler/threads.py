"""The threads that run a compiled stage's samples.

A compiled stage is a serial function that takes the samples of a batch one
at a time from a shared counter (:func:`claim`, an atomic increment) until
none is left, so that several calls of it at once, each in its own thread,
share the batch's samples between them as the samples' costs fall (a large
JPEG takes many times a small one).  :func:`run_parts` makes those calls: one
in the calling thread, the others on a pool of threads kept by the process.
The compiled code releases the GIL, so the calls run on as many cores.

These are plain Python threads rather than Numba's parallel loops: Numba
outlines a ``prange`` loop's body into a kernel that it types a second time
and wraps with its own scheduling code, the larger part of a stage's cold
compile (BENCHMARKS.md, "Compile time"), where taking the next sample from a
counter is one atomic instruction; and the pool is this module's own, with
no threading layer to choose and no layer's pool to keep alive across a
fork.
"""

from __future__ import annotations

import concurrent.futures
import os
import threading
from collections.abc import Callable
from typing import Any

from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

_pool: concurrent.futures.ThreadPoolExecutor | None = None
_pool_size = 0
_pool_lock = threading.Lock()


@intrinsic
def claim(typingctx: Any, claims: Any) -> Any:
    """In compiled code: the value of ``claims[0]`` (an int64 array), which
    this call increments atomically: each position of a batch goes to
    exactly one of the calls that share it."""
    if not (isinstance(claims, types.Array) and claims.dtype == types.int64):
        return None

    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        counter = context.make_array(signature.args[0])(context, builder, args[0])
        return builder.atomic_rmw("add", counter.data, ir.Constant(ir.IntType(64), 1), "monotonic")

    return types.int64(claims), codegen


def _pool_of(workers: int) -> concurrent.futures.ThreadPoolExecutor:
    """The process's pool, with at least ``workers`` threads."""
    global _pool, _pool_size
    with _pool_lock:
        if _pool is None or _pool_size < workers:
            if _pool is not None:
                _pool.shutdown(wait=False)  # its threads end once their parts are done
            _pool = concurrent.futures.ThreadPoolExecutor(workers, thread_name_prefix="slipstream-stage")
            _pool_size = workers
        return _pool


def _forget_pool() -> None:
    """In a forked child: the parent's pool threads are not there."""
    global _pool, _pool_size
    _pool, _pool_size = None, 0


os.register_at_fork(after_in_child=_forget_pool)


def run_parts(part: Callable[[int], Any], parts: int) -> None:
    """Run ``part(0)``, ..., ``part(parts - 1)`` at once: ``part(0)`` in the
    calling thread, the others on the process's pool.  Returns when every
    part has returned (they share memory that the caller reads next); an
    exception of a part is raised then, the first part's first."""
    if parts <= 1:
        part(0)
        return
    futures = [_pool_of(parts - 1).submit(part, k) for k in range(1, parts)]
    failure: BaseException | None = None
    try:
        part(0)
    except BaseException as exc:  # the other parts still write the batch's memory: wait for them first
        failure = exc
    for future in futures:
        try:
            future.result()
        except BaseException as exc:
            failure = failure or exc
    if failure is not None:
        raise failure


@intrinsic
def cycles(typingctx: Any) -> Any:
    """In compiled code: the processor's cycle counter (LLVM's
    ``readcyclecounter``: ``rdtsc`` on x86-64), a few cycles to read; the
    differences of two readings in one thread measure the code between
    them, in the counter's units, which shares of a stage compare."""
    def codegen(context: Any, builder: Any, signature: Any, args: Any) -> Any:
        counter = builder.module.declare_intrinsic("llvm.readcyclecounter", fnty=ir.FunctionType(ir.IntType(64), []))
        return builder.call(counter, [])

    return types.int64(), codegen


__all__ = ["claim", "cycles", "run_parts"]
