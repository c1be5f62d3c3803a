"""The pipeline compiler on in-memory arrays, with operations defined here."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
import textwrap

import numba
import numpy as np
import pytest
import torch

from slipstream.compiler import (
    Allocation,
    ArraySource,
    Graph,
    Internal,
    Kind,
    Node,
    Operation,
    Pipeline,
    RandomApply,
    RefNode,
    State,
)
from slipstream import native
from slipstream.compiler import random as rnd
from slipstream.compiler import symbols
from slipstream.errors import ArgumentError, CompileError, PipelineError
from slipstream.ops import Convert, ToDevice


@pytest.fixture(autouse=True)
def private_cache(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("SLIPSTREAM_CACHE_DIR", str(tmp_path_factory.getbasetemp() / "slipstream-cache"))


# ---------------------------------------------------------------- operations written as a user would


@dataclasses.dataclass(frozen=True)
class CenterCrop(Operation):
    """Per-sample crop of an (H, W, C) image to (size, size, C)."""

    size: int

    def declare(self, state):
        if len(state.shape) != 3:
            raise ValueError(f"needs (height, width, channels) samples, got shape {state.shape}")
        h, w, c = state.shape
        if self.size > min(h, w):
            raise ValueError(f"crop of {self.size} does not fit in {h} x {w}")
        out = (self.size, self.size, c)
        return state.replace(shape=out), Allocation(out, state.dtype)

    def generate_code(self):
        size = self.size

        def crop(x, out, key):
            top, left = (x.shape[0] - size) // 2, (x.shape[1] - size) // 2
            for r in range(size):
                for c in range(size):
                    for k in range(x.shape[2]):
                        out[r, c, k] = x[top + r, left + c, k]
            return out

        return crop


@dataclasses.dataclass(frozen=True)
class Invert(Operation):
    """255 - x, in place."""

    def declare(self, state):
        return state, None

    def generate_code(self):
        def invert(x, key):
            flat = x.reshape(-1)
            for j in range(flat.size):
                flat[j] = 255 - flat[j]
            return x

        return invert


@dataclasses.dataclass(frozen=True)
class FlipX(Operation):
    """Mirror horizontally, in place."""

    def declare(self, state):
        return state, None

    def generate_code(self):
        def flip(x, key):
            w = x.shape[1]
            for r in range(x.shape[0]):
                for c in range(w // 2):
                    for k in range(x.shape[2]):
                        a = x[r, c, k]
                        x[r, c, k] = x[r, w - 1 - c, k]
                        x[r, w - 1 - c, k] = a
            return x

        return flip


@dataclasses.dataclass(frozen=True)
class RandomBrightness(Operation):
    """Add a random integer in [-delta, delta] to every pixel, saturating."""

    delta: int

    def declare(self, state):
        return state, Allocation(state.shape, state.dtype)

    def generate_code(self):
        delta = self.delta
        integers = rnd.integers

        def brightness(x, out, key):
            shift = integers(key, 0, -delta, delta + 1)
            src, dst = x.reshape(-1), out.reshape(-1)
            for j in range(src.size):
                dst[j] = min(255, max(0, np.int64(src[j]) + shift))
            return out

        return brightness


@dataclasses.dataclass(frozen=True)
class ToFloat16(Operation):
    """Normalize to float16 in CHW layout with the native slip_pack kernel
    (compiled code sees float16 memory as uint16 bit patterns)."""

    mean: float = 127.5
    std: float = 64.0

    def declare(self, state):
        h, w, c = state.shape
        return State(shape=(c, h, w), dtype=np.float16), Allocation((c, h, w), np.float16)

    def generate_code(self):
        mean = np.full(3, self.mean)
        std = np.full(3, self.std)

        def normalize(x, out, key):
            h, w, c = x.shape
            native.slip_pack(x, h, w, c, x.strides[0], out, native.Dtype.FLOAT16, out.strides[0], out.strides[1],
                             out.strides[2], mean, std)
            return out

        return normalize


@dataclasses.dataclass(frozen=True)
class DrawUniform(Operation):
    """Replace the sample by one random float (a per-sample parameter)."""

    def declare(self, state):
        return State(shape=(), dtype=np.float64), Allocation((), np.float64)

    def generate_code(self):
        uniform = rnd.uniform

        def draw(x, out, key):
            out[0] = uniform(key, 0)
            return out

        return draw


@dataclasses.dataclass(frozen=True)
class BatchMeanCenter(Operation):
    """Batch operation: subtract the batch mean of each sample's scalar."""

    kind = Kind.BATCH

    def declare(self, state):
        return state, Allocation(state.shape, np.float64)

    def generate_code(self):
        def center(xs, out, keys):
            mean = xs.mean()
            for j in range(xs.shape[0]):
                out[j] = xs[j] - mean
            return out

        return center


@dataclasses.dataclass(frozen=True)
class Untypable(Operation):
    """Code Numba cannot type: calls a Python object method on an array."""

    def declare(self, state):
        return state, None

    def generate_code(self):
        def broken(x, key):
            return x.no_such_method()

        return broken


def images(count=37, size=16, seed=0):
    return np.random.default_rng(seed).integers(0, 256, (count, size, size + 2, 3), dtype=np.uint8)


# ---------------------------------------------------------------- graph


def test_states_and_allocations_propagate():
    data = images()
    graph = Graph({"image": [ArraySource(data), CenterCrop(8), FlipX(), ToFloat16()]})
    states = [n.state for n in graph.pipelines["image"]]
    assert [s.shape for s in states] == [(16, 18, 3), (8, 8, 3), (8, 8, 3), (3, 8, 8)]
    assert [s.dtype for s in states] == [np.uint8, np.uint8, np.uint8, np.float16]
    sizes = [(b.node.describe(), b.allocation.shape, b.allocation.nbytes) for b in graph.buffers()]
    assert [s[1:] for s in sizes] == [((16, 18, 3), 864), ((8, 8, 3), 192), ((3, 8, 8), 384)]
    compiled = Pipeline({"image": [ArraySource(data), CenterCrop(8), FlipX(), ToFloat16()]}).compile(5, slots=3)
    plan = compiled.memory_plan()
    # Values that never leave the sample loop get one slot per thread; the
    # stage's output gets slots x batch_size.
    threads = numba.config.NUMBA_NUM_THREADS
    assert compiled.scratch[symbols.buffer(0, 0)].shape == (threads, 16, 18, 3) and compiled.scratch[symbols.buffer(1, 0)].shape == (threads, 8, 8, 3)
    assert compiled.buffers[symbols.buffer(3, 0)].shape == (3, 5, 3, 8, 8) and set(compiled.buffers) == {symbols.buffer(3, 0)}
    assert "per thread: ArraySource" in plan and f"{threads * (864 + 192) + 3 * 5 * 384:,}" in plan


def test_output_matches_numpy_reference_and_partial_batch():
    data = images()
    compiled = Pipeline([ArraySource(data), CenterCrop(8), FlipX(), ToFloat16()]).compile(8)
    for indices in (np.arange(8), np.array([36, 0, 5])):  # a full and a last, partial batch
        out = compiled(indices)
        crop = data[indices][:, 4:12, 5:13][:, :, ::-1]
        expected = ((crop.astype(np.float64) - 127.5) / 64.0).astype(np.float16).transpose(0, 3, 1, 2)
        assert out.shape == (len(indices), 3, 8, 8)
        np.testing.assert_array_equal(out, expected)


def test_stages_alternate_jit_torch_jit():
    data = images()
    pipeline = Pipeline([ArraySource(data), CenterCrop(8), torch.nn.Identity(), FlipX(), ToFloat16()])
    compiled = pipeline.compile(4)
    assert [s.jit for s in compiled.sources] == [True, False, True]
    assert [n.stage for n in compiled.graph.pipelines["output"]] == [0, 0, 1, 2, 2]
    out = compiled(np.arange(4))
    direct = Pipeline([ArraySource(data), CenterCrop(8), FlipX(), ToFloat16()]).compile(4)(np.arange(4))
    np.testing.assert_array_equal(out, direct)


def test_conversions_and_device_moves_form_a_torch_stage():
    data = images()
    compiled = Pipeline([ArraySource(data), CenterCrop(8), Convert(np.float32), ToDevice("cpu"),
                         torch.nn.Flatten()]).compile(4)
    assert [s.jit for s in compiled.sources] == [True, False]
    states = [n.state for n in compiled.graph.pipelines["output"]]
    assert [(s.tensor, s.dtype, s.device) for s in states[2:]] == [
        (True, torch.float32, "cpu"), (True, torch.float32, "cpu"), (True, torch.float32, "cpu")]
    assert not states[1].tensor
    assert states[-1].shape == (8 * 8 * 3,)
    out = compiled(np.array([3, 1, 4]))
    assert isinstance(out, torch.Tensor) and out.dtype == torch.float32
    expected = data[[3, 1, 4], 4:12, 5:13].reshape(3, -1).astype(np.float32)
    np.testing.assert_array_equal(out.numpy(), expected)


def test_convert_names_what_is_not_a_dtype():
    with pytest.raises(ArgumentError, match=r"^Convert: dtype must be a torch dtype, or a NumPy dtype torch has "
                                            r"\(or its name\), got 'pixels'$"):
        Convert("pixels")


@pytest.mark.cuda
def test_asynchronous_device_copies_never_read_a_later_batch():
    data = images(count=64, size=64)
    compiled = Pipeline([ArraySource(data), ToDevice("cuda")]).compile(64, slots=2)
    received = []
    for step in range(8):  # each call rewrites the host slot of the call two before
        indices = np.roll(np.arange(64), step)
        out = compiled(indices)
        assert out.is_cuda
        received.append((indices, out))
    for indices, out in received:
        np.testing.assert_array_equal(out.cpu().numpy(), data[indices])


def test_compiled_stage_is_one_dispatcher():
    compiled = Pipeline([ArraySource(images()), CenterCrop(8), FlipX(), ToFloat16()]).compile(4)
    compiled(np.arange(4))
    (dispatcher,) = compiled.dispatchers
    assert isinstance(dispatcher, numba.core.registry.CPUDispatcher)
    assert dispatcher.targetoptions.get("nogil") and not dispatcher.targetoptions.get("parallel")
    assert len(dispatcher.signatures) == 1
    source = compiled.explain()
    assert source.count("while i < n:") == 1 and source.count("i = claim(claims)") == 2
    assert source.count("def stage_") == 1
    for op_call in ("op0(", "op1(", "op2(", "op3("):  # every operation inside the one loop
        assert op_call in source


def test_batch_operation_runs_after_the_loop():
    values = np.arange(10, dtype=np.float64)
    compiled = Pipeline([ArraySource(values), BatchMeanCenter()]).compile(4)
    np.testing.assert_allclose(compiled(np.array([1, 2, 6])), [-2, -1, 3])


# ---------------------------------------------------------------- randomness and references


def test_reference_carries_a_random_parameter_to_another_pipeline():
    draw = DrawUniform()
    compiled = Pipeline({
        "param": [ArraySource(np.zeros(50)), draw],
        "copy": [RefNode("param", draw)],
    }).compile(16)
    out = compiled(np.arange(16))
    assert len(set(out["param"].tolist())) == 16  # really random per sample
    np.testing.assert_array_equal(out["copy"], out["param"])


def test_a_reference_finds_the_operation_object_it_is_given_wherever_it_stands():
    draw = DrawUniform()
    compiled = Pipeline({
        "param": [ArraySource(np.zeros(50)), draw],
        "copy": [RefNode(op=draw)],
    }).compile(16)
    out = compiled(np.arange(16))
    np.testing.assert_array_equal(out["copy"], out["param"])
    assert "Ref(DrawUniform" in compiled.explain()
    twice = {"a": [ArraySource(np.zeros(50)), draw], "b": [ArraySource(np.zeros(50)), draw],
             "copy": [RefNode(op=draw)]}
    with pytest.raises(PipelineError, match=r"reads DrawUniform\(\), which 2 entries of the pipelines hold "
                                            r"\(pipelines: 'a', 'b'\): place that object once, or name its pipeline"):
        Pipeline(twice).compile(4)
    out = Pipeline({**twice, "copy": [RefNode("b", draw)]}).compile(16)(np.arange(16))
    np.testing.assert_array_equal(out["copy"], out["b"])
    with pytest.raises(PipelineError, match=r"reads DrawUniform\(\), which 0 entries"):
        Pipeline({"a": [ArraySource(np.zeros(50))], "copy": [RefNode(op=DrawUniform())]}).compile(4)
    with pytest.raises(ValueError, match="RefNode reads a pipeline"):
        RefNode()


def test_an_internal_pipeline_is_read_but_not_an_output():
    draw = DrawUniform()
    pipeline = Pipeline({
        "param": Internal([ArraySource(np.zeros(50)), draw]),
        "copy": [RefNode("param", draw)],
        "_named_like_a_private_one": [RefNode("param", draw)],
    })
    compiled = pipeline.compile(16)
    out = compiled(np.arange(16))
    assert list(out) == ["copy", "_named_like_a_private_one"]  # a leading underscore is only a name
    assert len(set(out["copy"].tolist())) == 16
    np.testing.assert_array_equal(out["_named_like_a_private_one"], out["copy"])
    assert list(compiled.graph.outputs) == ["copy", "_named_like_a_private_one"]
    assert [node.pipeline for node in compiled.graph.nodes][0] == "param"
    with pytest.raises(PipelineError, match="every pipeline given is Internal"):
        Pipeline({"param": Internal([ArraySource(np.zeros(50)), draw])}).compile(4)


def test_random_apply_fraction_and_determinism():
    data = images(count=4000, size=4)
    pipeline = Pipeline([ArraySource(data), RandomApply(FlipX(), p=0.3)])
    first = pipeline.compile(4000, seed=7)(np.arange(4000)).copy()
    flipped = np.array([not np.array_equal(first[i], data[i]) for i in range(4000)])
    assert (first[flipped] == data[flipped][:, :, ::-1]).all()
    assert abs(flipped.mean() - 0.3) < 0.03
    again = pipeline.compile(4000, seed=7)(np.arange(4000))
    np.testing.assert_array_equal(again, first)
    other = pipeline.compile(4000, seed=8)(np.arange(4000))
    assert not np.array_equal(other, first)


def test_same_result_for_any_batch_size_order_and_thread_count():
    data = images(count=64)
    ops = [ArraySource(data), RandomApply(FlipX(), 0.5), RandomBrightness(40), CenterCrop(10)]
    reference = Pipeline(ops).compile(64, seed=3)(np.arange(64)).copy()
    for threads in (1, 3, 7):
        np.testing.assert_array_equal(Pipeline(ops).compile(64, seed=3, threads=threads)(np.arange(64)), reference)
    for threads in (0, -1, 1025, 2.0, True, "2"):
        with pytest.raises(ArgumentError, match="threads must be None or an integer from 1 to 1024"):
            Pipeline(ops).compile(64, threads=threads)
    small = Pipeline(ops).compile(7, seed=3)
    order = np.random.default_rng(0).permutation(64)
    for start in range(0, 64, 7):
        chunk = order[start:start + 7]
        np.testing.assert_array_equal(small(chunk), reference[chunk])


def test_same_result_in_two_processes(tmp_path):
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        sys.path.insert(0, sys.argv[1])
        from test_compiler import FlipX, RandomBrightness, images
        from slipstream.compiler import ArraySource, Pipeline, RandomApply
        out = Pipeline([ArraySource(images()), RandomApply(FlipX(), 0.5), RandomBrightness(40)]).compile(37, seed=11)
        batch = out(np.arange(37))
        (stage,) = out.dispatchers
        sys.stdout.write(f"{sum(stage.stats.cache_hits.values())} {batch.tobytes().hex()}")
    """))
    tests_dir = str(__import__("pathlib").Path(__file__).parent)
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(tmp_path / "cache"),
           "SLIPSTREAM_COMPILE_CACHE_DIR": str(tmp_path / "cache" / "stages")}
    runs = [subprocess.run([sys.executable, str(script), tests_dir], capture_output=True, text=True, check=True,
                           cwd=tmp_path, env=env).stdout.split() for _ in range(2)]
    assert [hits for hits, _ in runs] == ["0", "1"]  # compiled, then loaded from Numba's disk cache
    runs = [data for _, data in runs]
    assert runs[0] == runs[1] and len(runs[0]) == 37 * 16 * 18 * 3 * 2
    here = Pipeline([ArraySource(images()), RandomApply(FlipX(), 0.5), RandomBrightness(40)]).compile(37, seed=11)
    assert here(np.arange(37)).tobytes().hex() == runs[0]


def test_a_truncated_stage_source_in_the_cache_is_written_again(tmp_path):
    """A stage file of the cache cut short (a disk error, a copy stopped
    halfway) is written again and the stage compiled, where its import
    failed with a SyntaxError on every run until the cache was removed."""
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        sys.path.insert(0, sys.argv[1])
        from test_compiler import FlipX, images
        from slipstream.compiler import ArraySource, Pipeline
        sys.stdout.write(Pipeline([ArraySource(images()), FlipX()]).compile(4)(np.arange(4)).tobytes().hex())
    """))
    tests_dir = str(__import__("pathlib").Path(__file__).parent)
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(tmp_path / "cache"),
           "SLIPSTREAM_COMPILE_CACHE_DIR": str(tmp_path / "cache" / "stages")}

    def run():
        return subprocess.run([sys.executable, str(script), tests_dir], capture_output=True, text=True, cwd=tmp_path,
                              env=env)

    first = run()
    assert first.returncode == 0, first.stderr
    (stage,) = (tmp_path / "cache" / "stages").glob("stage_*.py")
    stage.write_bytes(stage.read_bytes()[:100])
    again = run()
    assert again.returncode == 0, again.stderr
    assert again.stdout == first.stdout


@pytest.mark.parametrize("entry", ["nbi", "nbc"], ids=["index", "machine-code"])
def test_a_truncated_numba_cache_entry_is_compiled_again(tmp_path, entry):
    """Numba's index or machine code of a stage cut short is a CacheWarning
    and a compile, saved over it, where the unpickling error ended the run."""
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent("""
        import sys, warnings
        import numpy as np
        sys.path.insert(0, sys.argv[1])
        from test_compiler import FlipX, images
        from slipstream.compiler import ArraySource, Pipeline
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            batch = Pipeline([ArraySource(images()), FlipX()]).compile(4)(np.arange(4))
        print(len([w for w in caught if "could not be read" in str(w.message)]), batch.tobytes().hex())
    """))
    tests_dir = str(__import__("pathlib").Path(__file__).parent)
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(tmp_path / "cache"),
           "SLIPSTREAM_COMPILE_CACHE_DIR": str(tmp_path / "cache" / "stages")}

    def run():
        done = subprocess.run([sys.executable, str(script), tests_dir], capture_output=True, text=True, cwd=tmp_path,
                              env=env)
        assert done.returncode == 0, done.stderr
        return done.stdout.split()

    first = run()
    for path in (tmp_path / "cache" / "stages" / "__pycache__").glob(f"stage_*.{entry}"):
        path.write_bytes(path.read_bytes()[:30])
    again, third = run(), run()
    assert first[0] == "0" and again == ["1", first[1]] and third == first  # warned once, then saved whole


def test_stages_cached_by_different_processes_keep_their_own_code(tmp_path):
    """Two processes each compile a crop pipeline (same closures, other
    constants) into one cache; a third loads both and must run each one's
    own code (Numba's per-process symbol numbers once made them collide)."""
    import slipstream as ss

    images = [np.full((30 + 2 * i, 40 - i, 3), 10 * i, np.uint8) for i in range(12)]
    data = tmp_path / "crops.slip"
    ss.write(data, [(img, i) for i, img in enumerate(images)], {"image": ss.RGBImageField(), "label": ss.IntField()},
             workers=0, verbose=False)
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent("""
        import hashlib, json, sys
        import slipstream as ss
        from slipstream.ops import RandomHorizontalFlip, RandomResizedCrop
        pipelines = {"a": {"image": [RandomResizedCrop(32), RandomHorizontalFlip()]},
                     "b": {"image": [RandomResizedCrop(24)]}}
        out = {}
        for name in sys.argv[2:]:
            order = ss.Order("sequential", seed=1)
            with ss.Loader(sys.argv[1], 4, pipelines[name], order=order, verbose=False) as loader:
                out[name] = [hashlib.sha256(images.numpy().tobytes()).hexdigest() for images, _ in loader]
        print(json.dumps(out))
    """))
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(tmp_path / "cache"),
           "SLIPSTREAM_COMPILE_CACHE_DIR": str(tmp_path / "cache" / "stages")}

    def run(*names):
        done = subprocess.run([sys.executable, str(script), str(data), *names], capture_output=True, text=True,
                              cwd=tmp_path, env=env, timeout=300)
        assert done.returncode == 0, done.stderr[-2000:]
        return json.loads(done.stdout)

    alone = {**run("a"), **run("b")}
    assert run("a", "b") == alone == run("b", "a")


def test_random_keys_are_counter_based():
    keys = {int(rnd.sample_key(1, e, i, o)) for e in range(3) for i in range(50) for o in range(4)}
    assert len(keys) == 600
    # Numba returns uint64 as a Python int; Python callers pass it back as np.uint64.
    u = np.array([rnd.uniform(np.uint64(rnd.sample_key(0, 0, i, 0)), 0) for i in range(20000)])
    assert 0 <= u.min() and u.max() < 1 and abs(u.mean() - 0.5) < 0.01
    key = np.uint64(rnd.sample_key(0, 0, 5, 0))
    assert rnd.uniform(key, 0) == rnd.uniform(key, 0) != rnd.uniform(key, 1)


# ---------------------------------------------------------------- errors


def test_shapes_that_do_not_chain_name_both_operations():
    with pytest.raises(PipelineError, match=r"ToFloat16\(mean=127.5, std=64.0\) produces .*shape \(3, 8, 8\)"
                                            r".*which CenterCrop\(size=4\) cannot take") as err:
        Pipeline([ArraySource(images()), CenterCrop(8), ToFloat16(), CenterCrop(4)]).compile(4)
    assert "crop of 4 does not fit in 3 x 8" in str(err.value)
    with pytest.raises(PipelineError, match=r"CenterCrop\(size=8\) produces .*\(8, 8, 3\).*CenterCrop\(size=9\)"
                                            r" cannot take: crop of 9 does not fit"):
        Pipeline([ArraySource(images()), CenterCrop(8), CenterCrop(9)]).compile(4)


def test_untypable_operation_is_named_with_its_generated_line():
    compiled = Pipeline([ArraySource(images()), CenterCrop(8), Untypable()]).compile(4)
    with pytest.raises(CompileError) as err:
        compiled(np.arange(4))
    message = str(err.value)
    assert "Untypable()" in message and "pipeline 'output'" in message
    stream = compiled.graph.pipelines["output"][2].stream
    assert f"`v2 = op2(v1, sample_key(seed, epoch, draw, {stream}))`" in message
    assert "no_such_method" in message  # Numba's own explanation is kept


def test_malformed_pipelines_are_rejected():
    with pytest.raises(PipelineError, match="must start with a decoder"):
        Pipeline([CenterCrop(8)]).compile(4)
    with pytest.raises(PipelineError, match="does not exist"):
        Pipeline({"a": [RefNode("b")]}).compile(4)
    with pytest.raises(PipelineError, match="only be the first entry"):
        Pipeline([ArraySource(images()), ArraySource(images())]).compile(4)
    with pytest.raises(ValueError, match="RandomApply"):
        RandomApply(FlipX(), p=1.5)


def test_sample_loop_allocates_nothing(tmp_path):
    """Numba's allocation counters (NUMBA_NRT_STATS, read in a fresh process)
    grow by the same amount per batch whatever its size: nothing is allocated
    per sample, only the few arrays each of the stage's calls is handed."""
    script = tmp_path / "count.py"
    script.write_text(textwrap.dedent("""
        import sys
        import numpy as np
        sys.path.insert(0, sys.argv[1])
        from numba.core.runtime import rtsys
        from test_compiler import CenterCrop, FlipX, RandomBrightness, ToFloat16, images
        from slipstream.compiler import ArraySource, Pipeline, RandomApply
        compiled = Pipeline([ArraySource(images()), CenterCrop(8), RandomApply(FlipX(), 0.5), RandomBrightness(9),
                             ToFloat16()]).compile(32)
        compiled(np.arange(32))
        counts = []
        for n in (2, 32):
            before = rtsys.get_allocation_stats().alloc
            compiled(np.arange(n))
            counts.append(rtsys.get_allocation_stats().alloc - before)
        print(*counts, compiled.threads)
    """))
    env = {**os.environ, "NUMBA_NRT_STATS": "1", "SLIPSTREAM_CACHE_DIR": str(tmp_path / "cache"),
           "SLIPSTREAM_COMPILE_CACHE_DIR": str(tmp_path / "cache" / "stages")}
    tests_dir = str(__import__("pathlib").Path(__file__).parent)
    small, large, threads = map(int, subprocess.run([sys.executable, str(script), tests_dir], capture_output=True,
                                                    text=True, check=True, env=env).stdout.split())
    assert small == large < 16 * (min(threads, 2) + 1)  # the calls sharing a batch of 2, and the one finishing it


def test_one_operation_object_in_two_pipelines_shares_nothing():
    draw = DrawUniform()
    compiled = Pipeline({"a": [ArraySource(np.zeros(8)), draw], "b": [ArraySource(np.zeros(8)), draw]}).compile(8)
    out = compiled(np.arange(8))
    assert not np.array_equal(out["a"], out["b"])  # each place draws with its own random keys
    assert len(compiled.buffers) == 2  # and writes to its own memory


def test_jit_and_torch_nodes_of_different_pipelines_never_share_a_stage():
    """Pipeline "a": jit, torch, jit.  Pipeline "b": a jit batch operation,
    then a per-sample jit operation, which starts the second stage of its
    own pipeline while "a" is in its torch stage: the two must not be
    compiled into one function."""
    data = images()
    a = [ArraySource(data), CenterCrop(8), torch.nn.Identity(), FlipX()]
    b = [ArraySource(data), DrawUniform(), BatchMeanCenter(), DrawUniform()]
    compiled = Pipeline({"a": a, "b": b}).compile(4)
    for stage in compiled.graph.stages:
        assert len({node.kind.compiled for node in compiled.graph.nodes_in(stage)}) == 1, stage
    assert [n.stage for n in compiled.graph.pipelines["a"]] == [0, 0, 1, 2]
    assert [n.stage for n in compiled.graph.pipelines["b"]] == [0, 0, 0, 2]
    out = compiled(np.arange(4))
    np.testing.assert_array_equal(out["a"], Pipeline(a).compile(4)(np.arange(4)))
    assert out["b"].shape == (4,) and ((0 <= out["b"]) & (out["b"] < 1)).all()


def test_the_booleans_that_kind_replaced_are_refused_when_the_class_is_defined():
    with pytest.raises(TypeError, match=r"LegacyBatchCenter sets batch = True, which nothing reads: set kind = "):
        @dataclasses.dataclass(frozen=True)
        class LegacyBatchCenter(BatchMeanCenter):
            batch = True

    with pytest.raises(TypeError, match=r"sets jit = False, which nothing reads.*Kind.TORCH \(Python, on tensors\)"):
        class LegacyTorch(Operation):
            jit = False

    with pytest.raises(TypeError, match="jit"):
        State(jit=True, shape=(2,), dtype=np.uint8)

    @dataclasses.dataclass(frozen=True)
    class Tiles(Operation):  # a field or a method of either name is the class's own business
        batch: int = 4

        def jit(self):
            return "mine"

    assert Tiles().batch == 4 and Tiles.kind is Kind.SAMPLE


class _EitherOf(Node):
    """Per sample, ``first`` with probability ``p``, else ``second`` (both in place): a node with control flow
    that holds a second operation besides its ``op``."""

    def __init__(self, first: Operation, second: Operation, p: float) -> None:
        super().__init__(first)
        self.choices, self.p = {"second": second}, float(p)  # kept in a dict: the key finds it all the same

    def declare(self, inputs):
        return inputs[0].state, ()

    def emit(self, ctx):
        from slipstream.compiler import astgen as A

        def apply(op):
            return [A.assign(ctx.target, ctx.call(ctx.value(), ctx.key(), op=op))]

        coin = A.call(ctx.helper("uniform"), ctx.key(stream=1), A.const(0))
        return [A.if_else(A.less(coin, A.const(self.p)), apply(self.op), apply(self.choices["second"]))]


@dataclasses.dataclass(frozen=True)
class _MeanOfTwo(Operation):
    """Per sample, the element-wise mean of two values of one shape, as float32."""

    def declare(self, state):
        return State(shape=state.shape, dtype=np.float32), Allocation(state.shape, np.float32)

    def generate_code(self):
        def mean(a, b, out, key):
            x, y, o = a.reshape(-1), b.reshape(-1), out.reshape(-1)
            for j in range(o.size):
                o[j] = (np.float32(x[j]) + np.float32(y[j])) / 2
            return out

        return mean


class _Mean(Node):
    """The mean of the values of two pipelines: a node with two inputs, found by the pipelines' names."""

    def __init__(self, first: str, second: str) -> None:
        super().__init__(_MeanOfTwo())
        self.first, self.second = first, second

    def reads(self, find):
        return (find.last(self.first).output(), find.last(self.second).output())

    def declare(self, inputs):
        if inputs[0].state.shape != inputs[1].state.shape:
            raise ValueError(f"the two values differ in shape: {inputs[0].state.shape} and {inputs[1].state.shape}")
        return super().declare(inputs)

    def emit(self, ctx):
        from slipstream.compiler import astgen as A

        return [A.assign(ctx.target, A.call(ctx.code(), ctx.value(0), ctx.value(1), *ctx.outs(), ctx.key()))]


def test_a_node_reads_two_pipelines_as_its_inputs_and_the_graph_records_them():
    a = np.random.default_rng(4).integers(0, 256, (8, 5, 3), dtype=np.uint8)
    b = np.random.default_rng(5).integers(0, 256, (8, 5, 3), dtype=np.uint8)
    compiled = Pipeline({"a": Internal([ArraySource(a)]), "b": Internal([ArraySource(b)]),
                         "mean": [_Mean("a", "b")]}).compile(batch_size=8)
    np.testing.assert_array_equal(compiled(np.arange(8))["mean"], (a.astype(np.float32) + b) / 2)
    mean = compiled.graph.outputs["mean"]
    assert [(i.node.pipeline, i.output) for i in mean.inputs] == [("a", None), ("b", None)]
    assert mean.dependencies() == (compiled.graph.pipelines["a"][0], compiled.graph.pipelines["b"][0])
    with pytest.raises(dataclasses.FrozenInstanceError):
        mean.stage = 1  # a record of the lowered graph is never changed
    with pytest.raises(PipelineError, match=r"pipeline 'mean': .*the two values differ in shape: \(5, 3\) and \(2,\)"):
        Pipeline({"a": Internal([ArraySource(a)]), "b": Internal([ArraySource(b[:, 0, :2])]),
                  "mean": [_Mean("a", "b")]}).compile(batch_size=8)


def test_a_reference_to_a_named_output_of_a_torch_operation_is_refused():
    images = np.zeros((4, 2), np.uint8)
    cast = Convert(np.float32)
    with pytest.raises(PipelineError, match=r"pipeline 'a': Convert\(.*\) runs in torch, where operations have no "
                                            r"named outputs: read its value"):
        Pipeline({"a": [ArraySource(images), cast], "b": [RefNode(op=cast, output="scaled")]}).compile(batch_size=4)
    with pytest.raises(PipelineError, match=r"pipeline 'a': ArraySource\(.*\) has no output 'range' \(its named "
                                            r"outputs: none\)"):
        Pipeline({"a": [ArraySource(images)], "b": [RefNode("a", output="range")]}).compile(batch_size=4)


def test_pipelines_that_read_each_other_in_a_cycle_are_refused():
    images = np.zeros((4, 2), np.uint8)
    with pytest.raises(PipelineError, match=r"pipelines refer to each other in a cycle through _MeanOfTwo\(\)"):
        Pipeline({"a": [ArraySource(images), _Mean("a", "b")],
                  "b": [ArraySource(images), _Mean("b", "a")]}).compile(batch_size=4)


class _FirstEntryOf(_Mean):
    """The mean of one pipeline's entry ``position`` with itself: a node that reads an entry by its position."""

    def __init__(self, pipeline: str, position: int) -> None:
        super().__init__(pipeline, pipeline)
        self.position = position

    def reads(self, find):
        value = find.node(self.first, self.position).output()
        return (value, value)


def test_a_reference_to_an_entry_a_pipeline_does_not_have_is_refused():
    images = np.arange(8, dtype=np.uint8).reshape(4, 2)
    compiled = Pipeline({"a": Internal([ArraySource(images)]), "m": [_FirstEntryOf("a", 0)]}).compile(batch_size=4)
    np.testing.assert_array_equal(compiled(np.arange(4))["m"], images.astype(np.float32))
    for position in (1, -1):
        with pytest.raises(PipelineError, match=rf"pipeline 'm' refers to entry {position} of pipeline 'a', which has "
                                                r"entries 0 to 0"):
            Pipeline({"a": Internal([ArraySource(images)]), "m": [_FirstEntryOf("a", position)]}).compile(batch_size=4)


def test_a_stage_is_the_same_whatever_the_number_of_samples_of_its_arrays():
    """The code does not depend on how many samples an array holds: a
    dataset of another length must not compile another stage."""
    from slipstream.compiler.codegen import fingerprint

    def compiled(count):
        return Pipeline([ArraySource(np.zeros((count, 3), np.uint8)), Convert(np.float32)]).compile(batch_size=4)

    few, many = compiled(4), compiled(9)
    assert [s.source for s in few.sources] == [s.source for s in many.sources]
    assert [fingerprint(few.graph, s) for s in few.sources] == [fingerprint(many.graph, s) for s in many.sources]
    assert "samples of shape (3,)" in few.sources[0].source


def test_the_compile_cache_key_covers_every_operation_a_node_holds():
    from slipstream.ops import RandomGrayscale, RandomSolarize

    images = np.random.default_rng(3).integers(0, 256, (4, 8, 8, 3), dtype=np.uint8)

    def run(threshold):  # p=0: the second operation, a solarization at `threshold`, always runs
        pipeline = Pipeline([ArraySource(images), _EitherOf(RandomGrayscale(1.0), RandomSolarize(threshold, 1.0), 0.0)])
        return pipeline.compile(4)(np.arange(4)).copy()

    # Two pipelines differing only in the second operation: each compiles its own stage (a key that left the
    # second operation out would load the first pipeline's stage for the second and solarize at 100 again).
    np.testing.assert_array_equal(run(100), np.where(images >= 100, 255 - images, images))
    np.testing.assert_array_equal(run(200), np.where(images >= 200, 255 - images, images))


@dataclasses.dataclass(frozen=True, eq=False)
class _Lookup(Operation):
    """x -> table[x]: an operation whose parameter is an array its code holds as a constant."""

    table: np.ndarray

    def declare(self, state):
        return state.replace(dtype=np.dtype(np.float64)), Allocation(state.shape, np.float64)

    def generate_code(self):
        table = self.table

        def look(x, out, key):
            flat, into = x.reshape(-1), out.reshape(-1)
            for j in range(flat.size):
                into[j] = table[flat[j]]
            return out

        return look


def test_the_compile_cache_key_covers_the_whole_of_an_array_parameter():
    """NumPy's repr drops the middle of an array of over 1000 entries and
    rounds floats to 8 digits: operations differing there must not share a
    stage (the second pipeline ran the first's table)."""
    indices = np.full((4, 2), 1500, np.uint16)
    table = np.zeros(2000)
    changed_inside, changed_in_the_ninth_digit = table.copy(), table.copy()
    changed_inside[1500] = 7.0
    changed_in_the_ninth_digit[1500] = 1e-9
    fingerprints = {_Lookup(t).fingerprint() for t in (table, changed_inside, changed_in_the_ninth_digit)}
    assert len(fingerprints) == 3
    for t in (table, changed_inside):
        np.testing.assert_array_equal(Pipeline([ArraySource(indices), _Lookup(t)]).compile(4)(np.arange(4)), t[indices])


@dataclasses.dataclass(frozen=True)
class _Shaken(Operation):
    """Adds noise from a generator given by name: NumPy's or Python's global one (no seed reaches them)."""

    source: str = "numpy"

    def declare(self, state):
        return state, None

    def generate_code(self):
        import random

        if self.source == "numpy":
            def shake(x, key):
                x[0] += np.random.random()
                return x
        else:
            def shake(x, key):
                x[0] += random.random()
                return x
        return shake


@dataclasses.dataclass(frozen=True)
class _DeclaresAState(Operation):
    """Returns the outgoing state alone from declare(), without its allocations."""

    def declare(self, state):
        return state

    def generate_code(self):
        def keep(x, key):
            return x
        return keep


@dataclasses.dataclass(frozen=True)
class _ReturnsItsInput(Operation):
    """Declares an output allocation, then returns its input instead of filling it."""

    def declare(self, state):
        return state, Allocation(state.shape, state.dtype)

    def generate_code(self):
        def double(x, out, key):
            x *= 2
            return x
        return double


@dataclasses.dataclass(frozen=True)
class _DoublesInPlace(Operation):
    def declare(self, state):
        return state, None

    def generate_code(self):
        def double(x, key):
            x *= 2
            return x
        return double


def test_authoring_mistakes_are_refused_when_the_pipeline_is_built_naming_the_operation():
    data = np.zeros((4, 3), np.float64)
    for source, drawn in (("numpy", "np.random"), ("python", "random")):
        with pytest.raises(PipelineError, match=rf"the code of _Shaken\(source='{source}'\) draws from {drawn}, "
                                                r"whose numbers follow no seed.*uniform\(key, k\)"):
            Pipeline([ArraySource(data), _Shaken(source)]).compile(4)(np.arange(4))
    with pytest.raises(PipelineError, match=r"_DeclaresAState\(\): declare\(\) must return \(state, allocations\): "
                                            r"the outgoing State, and an Allocation, a list of them or None; it "
                                            r"returned State\("):
        Pipeline([ArraySource(data), _DeclaresAState()]).compile(4)
    with pytest.raises(PipelineError, match=r"_ReturnsItsInput\(\): it declares an output allocation but its code "
                                            r"returns its input 'x', so the allocation would stay zeros: write the "
                                            r"result into the allocation"):
        Pipeline([ArraySource(data), _ReturnsItsInput()]).compile(4)
    # Code that declares no allocation and returns its input changes it in place, as it should.
    np.testing.assert_array_equal(Pipeline([ArraySource(data + 1), _DoublesInPlace()]).compile(4)(np.arange(4)),
                                  np.full((4, 3), 2.0))
