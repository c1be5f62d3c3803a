"""What fusing a stage into one compiled function buys, and how fast a fresh
process gets its first batch.

Usage::

    python benchmarks/compiler.py [--batches N] [--json PATH] [--check]

The pipeline is four per-sample operations on in-memory 224 x 224 x 3 uint8
images, written here as a user would write them: random crop to 192, random
horizontal flip, random brightness, normalize to float16 CHW (with the
native ``slip_pack`` kernel).  Two executions of exactly the same operation
code are compared, batch 256, all cores:

``fused``
    slipstream's compiler: one ``numba.njit(parallel=True)`` function with a
    single ``prange`` loop that runs the four operations on each sample in
    turn, while the sample is in cache.
``per_operation``
    FFCV v1's model: each operation compiled on its own as a batch function
    with its own ``prange`` loop, called one after the other from Python,
    each pass writing a whole batch to memory and the next reading it back
    (the flip pass copies the samples it does not flip, as FFCV's does, since
    a pass has one output array).

Both read the same samples (a gather into pipeline memory), produce the same
bytes (checked), and are timed over the same batches after a warm-up; the
table shows images/s and the ratio.

Time to first batch runs this script in a fresh process with ``--first-batch``
(imports, graph building, code generation, compilation or cache load, one
batch), first with an empty cache directory, then five times with the cache
the first run left; the time from starting the interpreter to the batch being
ready is reported (the median of the five for the warm cache).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path

import numba
import numpy as np
from numba import njit, prange, uint64

from slipstream import native
from slipstream.compiler import Allocation, ArraySource, Operation, Pipeline, RandomApply, State
from slipstream.compiler import random as rnd
from slipstream.compiler.codegen import copy_sample
from common import write_json  # noqa: E402  (benchmarks/, next to this file)

REPO_ROOT = Path(__file__).resolve().parent.parent
SIZE, CROP, BATCH, SAMPLES = 224, 192, 256, 1024
MEAN = np.array([123.675, 116.28, 103.53])
STD = np.array([58.395, 57.12, 57.375])
FUSED_MIN_SPEEDUP = 1.2
WARM_FIRST_BATCH_MAX_S = 1.0
WARM_RUNS = 5


# ---------------------------------------------------------------- the four operations
#
# Written as an operation author should write per-sample loops: flat
# C-contiguous views indexed with unsigned integers.  Numba wraps negative
# signed indices around, and that check on every access keeps LLVM from
# vectorizing a loop whose index it cannot prove non-negative; unsigned
# indices have no such check.


@dataclasses.dataclass(frozen=True)
class RandomCrop(Operation):
    size: int

    def declare(self, state):
        shape = (self.size, self.size, state.shape[2])
        return state.replace(shape=shape), Allocation(shape, state.dtype)

    def generate_code(self):
        size = self.size
        integers = rnd.integers

        def crop(x, out, key):
            top = uint64(integers(key, 0, 0, x.shape[0] - size + 1))
            left = uint64(integers(key, 1, 0, x.shape[1] - size + 1))
            channels = uint64(x.shape[2])
            src_row, dst_row = uint64(x.shape[1]) * channels, uint64(size) * channels
            src, dst = x.reshape(-1), out.reshape(-1)
            for r in range(uint64(size)):  # each output row is one contiguous run of an input row
                s, d = (top + r) * src_row + left * channels, r * dst_row
                for j in range(dst_row):
                    dst[d + j] = src[s + j]
            return out

        return crop


@dataclasses.dataclass(frozen=True)
class FlipX(Operation):
    def declare(self, state):
        if len(state.shape) != 3 or state.shape[2] != 3:
            raise ValueError(f"needs height x width x 3 pixels, got shape {state.shape}")
        return state, Allocation(state.shape, state.dtype)

    def generate_code(self):
        one, three = uint64(1), uint64(3)

        def flip(x, out, key):
            width = uint64(x.shape[1])
            src, dst = x.reshape(-1), out.reshape(-1)
            for r in range(uint64(x.shape[0])):
                row = r * width * three
                for c in range(width):
                    s, d = row + (width - one - c) * three, row + c * three
                    dst[d], dst[d + one], dst[d + one + one] = src[s], src[s + one], src[s + one + one]
            return out

        return flip


@dataclasses.dataclass(frozen=True)
class RandomBrightness(Operation):
    delta: int

    def declare(self, state):
        return state, None

    def generate_code(self):
        delta = self.delta
        integers = rnd.integers

        def brightness(x, key):
            shift = np.int16(integers(key, 0, -delta, delta + 1))
            flat = x.reshape(-1)
            for j in range(uint64(flat.size)):  # saturating add, in 16-bit lanes
                v = np.int16(flat[j]) + shift
                flat[j] = np.uint8(min(max(v, 0), 255))
            return x

        return brightness


@dataclasses.dataclass(frozen=True)
class NormalizeFloat16(Operation):
    def declare(self, state):
        h, w, c = state.shape
        return State(shape=(c, h, w), dtype=np.float16), Allocation((c, h, w), np.float16)

    def generate_code(self):
        mean, std = MEAN.copy(), STD.copy()

        def normalize(x, out, key):
            h, w, c = x.shape
            native.slip_pack(x, h, w, c, x.strides[0], out, native.Dtype.FLOAT16, out.strides[0], out.strides[1],
                             out.strides[2], mean, std)
            return out

        return normalize


def operations(images: np.ndarray) -> list:
    return [ArraySource(images), RandomCrop(CROP), RandomApply(FlipX(), 0.5), RandomBrightness(32),
            NormalizeFloat16()]


# ---------------------------------------------------------------- FFCV v1's execution model


def per_operation_runner(images: np.ndarray, seed: int, streams: list[int]):
    """The same operation code, one compiled batch loop per operation,
    called in turn from Python; ``streams`` are the random streams the
    compiler gives the five nodes (see slipstream.compiler.random)."""
    ops = operations(images)
    read = njit(nogil=True)(ops[0].generate_code())
    crop = njit(nogil=True)(ops[1].generate_code())
    flip = njit(nogil=True)(ops[2].op.generate_code())
    brightness = njit(nogil=True)(ops[3].generate_code())
    normalize = njit(nogil=True)(ops[4].generate_code())
    key, uniform = rnd.sample_key, rnd.uniform
    read_id, crop_id, flip_id, brightness_id, normalize_id = streams
    coin_id = flip_id + 1  # RandomApply's coin: the node's second stream

    @njit(nogil=True, parallel=True)
    def gather(data, indices, n, out, seed, epoch):
        for i in prange(n):
            read(data, indices[i], out[i], key(seed, epoch, indices[i], read_id))

    @njit(nogil=True, parallel=True)
    def crop_batch(xs, indices, n, out, seed, epoch):
        for i in prange(n):
            crop(xs[i], out[i], key(seed, epoch, indices[i], crop_id))

    @njit(nogil=True, parallel=True)
    def flip_batch(xs, indices, n, out, seed, epoch):
        for i in prange(n):  # a batch pass has one output array: unflipped samples are copied, as in FFCV
            if uniform(key(seed, epoch, indices[i], coin_id), 0) < 0.5:
                flip(xs[i], out[i], key(seed, epoch, indices[i], flip_id))
            else:
                copy_sample(out[i], xs[i])

    @njit(nogil=True, parallel=True)
    def brightness_batch(xs, indices, n, seed, epoch):
        for i in prange(n):
            brightness(xs[i], key(seed, epoch, indices[i], brightness_id))

    @njit(nogil=True, parallel=True)
    def normalize_batch(xs, indices, n, out, seed, epoch):
        for i in prange(n):
            normalize(xs[i], out[i], key(seed, epoch, indices[i], normalize_id))

    read_buf = np.zeros((BATCH, SIZE, SIZE, 3), np.uint8)
    crop_buf = np.zeros((BATCH, CROP, CROP, 3), np.uint8)
    flip_buf = np.zeros((BATCH, CROP, CROP, 3), np.uint8)
    out_buf = np.zeros((BATCH, 3, CROP, CROP), np.float16)
    seed64 = np.uint64(seed)

    def run(indices: np.ndarray, epoch: int = 0) -> np.ndarray:
        n = len(indices)
        e = np.int64(epoch)
        gather(images, indices, n, read_buf, seed64, e)
        crop_batch(read_buf, indices, n, crop_buf, seed64, e)
        flip_batch(crop_buf, indices, n, flip_buf, seed64, e)
        brightness_batch(flip_buf, indices, n, seed64, e)
        normalize_batch(flip_buf, indices, n, out_buf.view(np.uint16), seed64, e)
        return out_buf[:n]

    return run


# ---------------------------------------------------------------- measurements


def make_images(count: int) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (count, SIZE, SIZE, 3), dtype=np.uint8)


def throughput(batches: int, passes: int = 8, seed: int = 0) -> dict[str, float]:
    """images/s of both models over the same batches: the fastest of
    `passes` interleaved passes each (machine noise only ever slows a pass)."""
    images = make_images(SAMPLES)
    fused = Pipeline(operations(images)).compile(BATCH, seed=seed)
    per_op = per_operation_runner(images, seed, [node.stream for node in fused.graph.nodes])
    rng = np.random.default_rng(1)
    plan = [rng.integers(0, SAMPLES, BATCH) for _ in range(batches)]
    for indices in plan[:2]:  # compile and check identical output
        a, b = fused(indices), per_op(indices)
        if not np.array_equal(a.view(np.uint16), b.view(np.uint16)):
            raise AssertionError("the two execution models disagree")
    rates: dict[str, float] = {}
    for name, run in (("fused", fused), ("per_operation", per_op)) * passes:
        start = time.perf_counter()
        for indices in plan:
            run(indices)
        rate = batches * BATCH / (time.perf_counter() - start)
        rates[name] = max(rates.get(name, 0.0), rate)
    return rates


def first_batch() -> None:
    """Everything a fresh process does before its first batch (the images
    are zeros: making random test data is not the pipeline's work); prints
    the system-wide monotonic clock when the batch is ready."""
    images = np.zeros((BATCH, SIZE, SIZE, 3), np.uint8)
    compiled = Pipeline(operations(images)).compile(BATCH)
    compiled(np.arange(BATCH))
    print(time.monotonic())


def time_fresh_process(cache: Path) -> float:
    """Seconds from starting a fresh interpreter to its first batch (the
    interpreter's exit is not part of it).  CLOCK_MONOTONIC is one clock for
    every process of the machine, so the child's reading is comparable."""
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(cache)}
    start = time.monotonic()
    child = subprocess.run([sys.executable, __file__, "--first-batch"], check=True, env=env, capture_output=True,
                           text=True)
    return float(child.stdout.split()[-1]) - start


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batches", type=int, default=10, help=f"batches of {BATCH} per timed pass (default: 10)")
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--first-batch", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.first_batch:
        first_batch()
        return 0

    rates = throughput(args.batches)
    with tempfile.TemporaryDirectory(prefix="slipstream-cache-") as tmp:
        cold = time_fresh_process(Path(tmp))
        warm_runs = [time_fresh_process(Path(tmp)) for _ in range(WARM_RUNS)]
    warm = statistics.median(warm_runs)
    ratio = rates["fused"] / rates["per_operation"]
    print(f"crop {SIZE}->{CROP} + flip + brightness + normalize to float16, batch {BATCH}, "
          f"{numba.get_num_threads()} threads")
    print(f"{'model':<16} {'images/s':>10}")
    for name, rate in rates.items():
        print(f"{name:<16} {rate:>10.0f}")
    print(f"fused / per_operation: {ratio:.2f} (target >= {FUSED_MIN_SPEEDUP})")
    print(f"time to first batch in a fresh process: cold cache {cold:.2f} s, warm cache {warm:.2f} s "
          f"(median of {WARM_RUNS}: {', '.join(f'{t:.2f}' for t in warm_runs)}; target <= {WARM_FIRST_BATCH_MAX_S} s)")
    failures = []
    if ratio < FUSED_MIN_SPEEDUP:
        failures.append(f"fused is {ratio:.2f}x the per-operation model, below {FUSED_MIN_SPEEDUP}x")
    if warm > WARM_FIRST_BATCH_MAX_S:
        failures.append(f"warm-cache time to first batch is {warm:.2f} s, above {WARM_FIRST_BATCH_MAX_S} s")
    for failure in failures:
        print(f"EXPECTATION FAILED: {failure}")

    now = datetime.now().astimezone()
    path = args.json or REPO_ROOT / "benchmarks" / "results" / f"compiler-{now.date().isoformat()}.json"
    report = {
        "images_per_s": rates, "fused_over_per_operation": ratio,
        "first_batch_seconds": {"cold_cache": cold, "warm_cache": warm, "warm_cache_runs": warm_runs},
        "batch_size": BATCH, "threads": numba.get_num_threads(), "expectations_met": not failures,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
        "versions": {"python": platform.python_version(), "numba": numba.__version__, "numpy": np.__version__},
        "command": shlex.join([sys.executable, *sys.argv]), "timestamp": now.isoformat(timespec="seconds"),
    }
    write_json(path, report)
    print(f"wrote {path}")
    return 1 if args.check and failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
