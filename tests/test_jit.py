"""The library's compiled functions: internal ones (no wrappers, one
overload per argument type) stay callable from Python and from compiled
code, in this process and from the disk cache in another."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numba
import numpy as np

from slipstream.compiler.jit import InternalDispatcher, uncached_njit


def _scale(x, k):
    return x * k


def test_an_internal_function_compiles_once_for_every_constant_it_is_called_with():
    scale = uncached_njit(_scale)

    @numba.njit
    def caller(x):
        return scale(x, 2) + scale(x, 3) + scale(x, 40)

    assert isinstance(scale, InternalDispatcher)
    assert caller(1.5) == 1.5 * 45
    # Numba would type each constant as a literal and compile three overloads.
    assert [tuple(map(str, sig)) for sig in scale.signatures] == [("float64", "int64")]


def test_an_internal_function_called_from_python_runs_a_twin_with_a_wrapper():
    scale = uncached_njit(_scale)
    assert scale(2.0, 3) == 6.0
    assert scale(np.arange(3), 2).tolist() == [0, 2, 4]
    assert not scale.signatures  # the internal dispatcher itself compiled nothing: the twin did
    assert scale.targetoptions["no_cpython_wrapper"]


def test_an_entry_function_keeps_its_own_wrapper():
    scale = uncached_njit(_scale, entry=True)
    assert not isinstance(scale, InternalDispatcher)
    assert scale(2.0, 3) == 6.0 and len(scale.signatures) == 1


def test_a_cached_internal_function_loaded_in_another_process_is_callable_from_python(tmp_path):
    """The first process compiles the library's random functions for
    compiled callers only and keeps them in the disk cache; the next loads
    them and calls them from Python and from compiled code alike, with the
    values of the first (a wrapper-less function called through its
    missing entry point would crash the interpreter)."""
    script = textwrap.dedent("""
        import sys
        import numba
        from slipstream.compiler import random as rnd

        @numba.njit
        def compiled(key):
            return rnd.uniform(key, 7), rnd.integers(key, 3, 0, 1000)

        print(*compiled(12345), *(["-", rnd.uniform(12345, 7), rnd.integers(12345, 3, 0, 1000)]
                                   if sys.argv[1] == "python" else []))
    """)
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "numba")}

    def run(mode: str) -> list[str]:
        done = subprocess.run([sys.executable, "-c", script, mode], capture_output=True, text=True, env=env,
                              cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    first = run("compiled")
    assert any((tmp_path / "numba").rglob("*uniform*.nbi"))  # the first process kept it
    again = run("python")
    assert again == first + ["-"] + first

