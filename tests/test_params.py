"""Declared parameters (slipstream.compiler.params): every operation's
arguments refuse hostile values by name, the docs' tables follow the
declarations, and a value reaches the compiled stage as data, so that
changing it compiles nothing."""

from __future__ import annotations

import dataclasses
import inspect
import math
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from slipstream import ops
from slipstream.compiler import ArraySource, Operation, Pipeline, params
from slipstream.compiler.rewrites import FieldOperation
from slipstream.errors import ArgumentError, PipelineError

DOCS = Path(__file__).resolve().parent.parent / "docs"


def operation_classes() -> dict[str, type]:
    """Every class of ``slipstream.ops`` a pipeline entry is made of: its
    operations, decoding operations and a crop's ResolutionSchedule (not
    the torch batch modules, which take their arguments as torch modules do)."""
    found = {}
    for name in ops.__all__:
        obj = getattr(ops, name)
        if isinstance(obj, type) and issubclass(obj, (Operation, FieldOperation, params.Declares)):
            found[name] = obj
    return found


CLASSES = operation_classes()


def test_every_operation_declares_its_arguments():
    undeclared = sorted(name for name, cls in CLASSES.items() if not params.declares(cls))
    assert not undeclared, f"operations whose arguments are not declared: {undeclared}"
    for name, cls in CLASSES.items():
        taken = set(inspect.signature(cls).parameters)
        declared = {entry.name for entry in params.declared(cls)}
        assert taken == declared, f"{name}: arguments {sorted(taken - declared)} are not declared"


ALL_ARGUMENTS = [(name, entry) for name, cls in sorted(CLASSES.items()) for entry in params.declared(cls)]


def required(cls: type) -> dict[str, object]:
    """The arguments ``cls`` must be given, each a value its domain accepts."""
    return {entry.name: entry.param.domain.example() for entry in params.declared(cls)
            if entry.default is params.REQUIRED}


@pytest.mark.parametrize(("name", "entry"), ALL_ARGUMENTS, ids=[f"{n}.{e.name}" for n, e in ALL_ARGUMENTS])
def test_every_argument_refuses_hostile_values_by_name(name, entry):
    """NaN, infinities, values out of range, bools for numbers and wrong
    types: each an ArgumentError naming the operation and the argument."""
    cls = CLASSES[name]
    base = required(cls)
    cls(**base)  # the examples make a valid operation
    hostile = entry.param.domain.invalid()
    assert hostile, f"{name}.{entry.name} lists no values it refuses"
    for bad in hostile:
        with pytest.raises(ArgumentError) as refused:
            cls(**{**base, entry.name: bad})
        message = str(refused.value)
        assert message.startswith(f"{name}: {entry.name}") or f"{name}: {entry.name} " in message, message


@pytest.mark.parametrize("domain", [
    params.Float(), params.Float(0, 1), params.Float(0, low_open=True), params.Float(high=3, high_open=True),
    params.Int(), params.Int(1, 8), params.Bool(), params.Choice(("a", "b")), params.Pair(params.Float(0, 1)),
    params.Spread(), params.Size(), params.Numbers(params.Float(), 3, broadcast=True), params.Many(params.Int(1)),
    params.OrNone(params.Float(0, 1)), params.Text()])
def test_a_domain_accepts_its_example_and_refuses_its_invalid_values(domain):
    domain.accept(domain.example())
    for bad in domain.invalid():
        with pytest.raises(params.Refused):
            domain.accept(bad)


def test_numbers_are_kept_in_one_type_whatever_their_spelling():
    """An int, a NumPy scalar and a float give the same kept value, so that
    the compiled stage sees one type (float64) for every spelling."""
    for given in (1, np.int64(1), np.float32(1.0), 1.0):
        kept = params.Float(0, 2).accept(given)
        assert type(kept) is float and kept == 1.0
    assert params.Pair(params.Float()).accept(np.array([1, 2])) == (1.0, 2.0)
    assert type(params.Int().accept(np.int8(3))) is int


def test_the_parameter_tables_of_the_docs_follow_the_declarations():
    sys.path.insert(0, str(DOCS))
    try:
        import tables
    finally:
        sys.path.remove(str(DOCS))
    text = tables.PAGE.read_text(encoding="utf-8")
    assert tables.regenerate(text) == text, "docs/operations.md's tables differ: run python docs/tables.py"
    assert text.count(tables.MARK) == len(tables.declared_classes())


@dataclasses.dataclass(frozen=True)
class Brighter(Operation):
    """Adds ``amount`` to every value (saturating), in place."""

    amount: int = params.param(params.Int(0, 255), "what is added", default=10)

    def declare(self, state):
        return state, None

    def generate_code(self):
        def brighter(x, key, values):
            (amount,) = values
            flat = x.reshape(-1)
            for j in range(flat.size):
                flat[j] = min(255, int(flat[j]) + amount)
            return x

        return brighter


@dataclasses.dataclass(frozen=True)
class CompilesItsValue(Operation):
    """Reads its value while its code is made: compiled into the machine code."""

    amount: int = params.param(params.Int(0, 255), "what is added", default=10)

    def declare(self, state):
        return state, None

    def generate_code(self):
        amount = int(self.amount)

        def add(x, key, values):
            x[...] = x + amount
            return x

        return add


def images() -> np.ndarray:
    return np.arange(4 * 5 * 6 * 3, dtype=np.uint8).reshape(4, 5, 6, 3)


def test_changing_a_value_reuses_the_compiled_stage():
    first = Pipeline([ArraySource(images()), Brighter(10)]).compile(4)
    second = Pipeline([ArraySource(images()), Brighter(200)]).compile(4)
    np.testing.assert_array_equal(first(np.arange(4)), np.minimum(images().astype(int) + 10, 255))
    np.testing.assert_array_equal(second(np.arange(4)), np.minimum(images().astype(int) + 200, 255))
    assert first.functions[0] is second.functions[0]  # one dispatcher ...
    assert sum(first.functions[0].stats.cache_misses.values()) <= 1  # ... compiled once, for both values
    assert first.sources[0].source == second.sources[0].source


def test_code_that_reads_a_value_is_refused_by_name():
    with pytest.raises(PipelineError, match=r"CompilesItsValue.generate_code\(\) reads its value 'amount'"):
        Pipeline([ArraySource(images()), CompilesItsValue(3)]).compile(4)(np.arange(4))


def test_a_value_changed_in_another_process_loads_the_stage_from_the_disk_cache(tmp_path):
    """A fresh process with another value finds the stage the first one
    compiled: no compile, the right pixels."""
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        sys.path.insert(0, sys.argv[1])
        from test_params import Brighter, images
        from slipstream.compiler import ArraySource, Pipeline
        compiled = Pipeline([ArraySource(images()), Brighter(int(sys.argv[2]))]).compile(4)
        batch = compiled(np.arange(4))
        stats = compiled.functions[0].stats
        print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()), int(batch.astype(np.int64).sum()))
    """))
    env = {**os.environ, "SLIPSTREAM_COMPILE_CACHE_DIR": str(tmp_path / "cache")}
    tests = str(Path(__file__).parent)

    def run(amount: int) -> list[int]:
        done = subprocess.run([sys.executable, str(script), tests, str(amount)], capture_output=True, text=True,
                              env=env, cwd=tmp_path)
        assert done.returncode == 0, done.stderr
        return [int(v) for v in done.stdout.split()]

    assert run(10)[:2] == [0, 1]  # compiled
    hits, misses, total = run(77)
    assert (hits, misses) == (1, 0)
    assert total == int(np.minimum(images().astype(np.int64) + 77, 255).sum())


def test_an_argument_that_shapes_the_code_is_part_of_the_key_and_a_value_is_not():
    from slipstream.ops import Normalize, RandomResizedCrop

    assert RandomResizedCrop(224, scale=(0.2, 1)).fingerprint() == RandomResizedCrop(224).fingerprint()
    assert RandomResizedCrop(160, max_size=192).fingerprint() == RandomResizedCrop(176, max_size=192).fingerprint()
    assert RandomResizedCrop(160, max_size=192).fingerprint() != RandomResizedCrop(160, max_size=224).fingerprint()
    assert RandomResizedCrop(224, interpolation="area").fingerprint() != RandomResizedCrop(224).fingerprint()
    assert Normalize(0.5, 0.2).fingerprint() == Normalize().fingerprint()
    assert Normalize(dtype=np.float16).fingerprint() != Normalize().fingerprint()


def test_a_refused_argument_is_named_with_what_it_must_be():
    from slipstream.ops import AugMix, MixUp, RandomRotation, TrivialAugmentWide

    with pytest.raises(ArgumentError, match=r"^MixUp: alpha must be a number > 0, got inf$"):
        MixUp(alpha=math.inf)
    with pytest.raises(ArgumentError, match=r"^AugMix: mixture_width must be an int in \[1, 32\], got 100000000$"):
        AugMix(mixture_width=10**8)
    with pytest.raises(ArgumentError, match=r"^TrivialAugmentWide: num_magnitude_bins must be an int in "
                                            r"\[2, 1024\], got 1000000000$"):
        TrivialAugmentWide(num_magnitude_bins=10**9)
    with pytest.raises(ArgumentError, match=r"^RandomRotation: degrees"):
        RandomRotation(math.nan)
