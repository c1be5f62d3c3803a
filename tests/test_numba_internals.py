"""The Numba internals slipstream uses (slipstream/_numba_internals.py),
checked against the installed Numba, and the versions pyproject.toml
allows checked against those the internals were tested with: a Numba
release that moves one fails here, naming it."""

from __future__ import annotations

import itertools
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import numba
import pytest
from numba.core.caching import FunctionCache

from slipstream import _numba_internals as internals
from slipstream.compiler.jit import cache_state, cached_njit

ROOT = Path(__file__).resolve().parent.parent


def requirement(name: str) -> str:
    """What pyproject.toml's dependencies say of ``name`` (its specifiers)."""
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    return next(re.sub(r"\s", "", d[len(name):]) for d in dependencies if re.match(rf"{name}\b", d))


@pytest.mark.parametrize("name", sorted(internals.TESTED))
def test_pyproject_allows_only_the_tested_series_and_it_is_the_installed_one(name):
    series = internals.TESTED[name]
    major, minor = map(int, series.split("."))
    assert requirement(name) == f">={series},<{major}.{minor + 1}", \
        f"pyproject.toml must allow {name} {series}.x, the series slipstream/_numba_internals.py was tested with"
    assert version(name).startswith(series + "."), f"installed {name} {version(name)} is not the tested {series}"


def test_the_pool_state_and_the_threading_layers_are_read():
    import importlib.util

    assert isinstance(internals.pool_started(), bool)
    for layer in ("tbb", "omp", "workqueue"):  # where the layers' modules are, whether or not their libraries load
        assert importlib.util.find_spec(f"numba.np.ufunc.{layer}pool") is not None or layer == "workqueue"
    assert internals.threading_layer_loads("tbb") or internals.threading_layer_loads("omp")
    assert not internals.threading_layer_loads("no-such-layer")


def test_the_function_id_counter_is_found_and_moved():
    from numba.core.bytecode import FunctionIdentity

    assert isinstance(FunctionIdentity._unique_ids, itertools.count), "Numba no longer numbers functions so"
    internals.spread_function_ids(10 ** 12)
    assert next(FunctionIdentity._unique_ids) == 10 ** 12


def test_a_dispatchers_disk_cache_and_its_index_are_found(tmp_path, monkeypatch):
    monkeypatch.setattr(numba.config, "CACHE_DIR", str(tmp_path))

    def twice(x):
        return 2 * x

    compiled = cached_njit(twice, entry=True)
    cache = internals.installed_cache(compiled)
    assert isinstance(cache, FunctionCache)
    index = Path(internals.cache_index_path(cache))
    assert not index.exists() and "not compiled yet" in cache_state(compiled)
    assert compiled(21) == 42
    assert index.exists(), "the index path is not where Numba saves its index"


def test_an_intrinsic_gives_its_name_and_definition():
    from slipstream import _native

    name = next(iter(_native.FUNCTIONS))
    intrinsic = getattr(_native, name)
    found = internals.intrinsic_parts(intrinsic)
    assert found is not None and found[0] == name and callable(found[1])
    assert internals.intrinsic_parts(len) is None
