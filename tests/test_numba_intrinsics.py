"""The kernels called from Numba-compiled parallel code."""

from __future__ import annotations

import threading

import numba
import numpy as np
import pytest
from numba import njit, prange

import jpeg_corpus
from slipstream import native


@njit(nogil=True, parallel=True)
def decode_batch(storage, starts, sizes, crops, flips, out):
    """The fused decode + crop + resize + flip of every sample of a batch, in
    prange, reading each JPEG in place; returns each sample's C status."""
    n = crops.shape[0]
    status = np.empty(n, np.int32)
    for i in prange(n):
        jpeg = storage[starts[i]:starts[i] + sizes[i]]
        flags = native.DecodeFlags.FLIP_X if flips[i] else native.DecodeFlags.DEFAULT
        status[i] = native.slip_jpeg_decode_crop_resize(
            jpeg, jpeg.size, crops[i, 0], crops[i, 1], crops[i, 2], crops[i, 3], out.shape[1], out.shape[2],
            flags, native.Interp.BILINEAR, out[i], out[i].size, out.strides[1])
    return status


@njit(nogil=True, parallel=True)
def pack_batch(images, mean, std, out):
    n = images.shape[0]
    status = np.empty(n, np.int32)
    for i in prange(n):
        img = images[i]
        status[i] = native.slip_pack(img, img.shape[0], img.shape[1], img.shape[2], img.strides[0], out[i],
                                     native.Dtype.FLOAT32, out.strides[1], out.strides[2], out.strides[3], mean, std)
    return status


@njit(nogil=True)
def info_of(data, info):
    return native.slip_jpeg_info(data, data.size, info)


@pytest.fixture(scope="module")
def batch():
    samples = [jpeg_corpus.make_sample(h, w, mode, ss, seed=i)
               for i, (h, w, mode, ss) in enumerate([(375, 500, "RGB", 2), (333, 251, "RGB", 0), (64, 64, "L", None),
                                                     (120, 90, "CMYK", None), (500, 375, "RGB", 1)] * 4)]
    data = np.frombuffer(b"".join(s.data for s in samples), np.uint8)
    offsets = np.cumsum([0] + [len(s.data) for s in samples]).astype(np.int64)
    rng = np.random.default_rng(0)
    crops = []
    for s in samples:
        y, x = int(rng.integers(0, s.height // 2)), int(rng.integers(0, s.width // 2))
        crops.append((y, x, int(rng.integers(1, s.height - y + 1)), int(rng.integers(1, s.width - x + 1))))
    crops = np.array(crops, np.int32)
    flips = rng.random(len(samples)) < 0.5
    expected = np.stack([
        native.jpeg_decode_crop_resize(s.data, *map(int, c), 96, 112,
                                       native.DecodeFlags.FLIP_X if f else 0, native.Interp.BILINEAR)
        for s, c, f in zip(samples, crops, flips)])
    return data, offsets, crops, flips, expected


@pytest.mark.parametrize("threads", [1, 2])
def test_parallel_batch_matches_python_path(batch, threads):
    data, offsets, crops, flips, expected = batch
    numba.set_num_threads(threads)
    try:
        out = np.zeros_like(expected)
        status = decode_batch(data, offsets[:-1], np.diff(offsets), crops, flips, out)
    finally:
        numba.set_num_threads(numba.config.NUMBA_NUM_THREADS)
    assert (status == 0).all()
    np.testing.assert_array_equal(out, expected)


def test_concurrent_launches_from_two_python_threads(batch):
    """A loader thread and a training thread running parallel code at once:
    needs a thread-safe threading layer, and per-thread decoder state."""
    data, offsets, crops, flips, expected = batch
    decode_batch(data, offsets[:-1], np.diff(offsets), crops, flips, np.zeros_like(expected))  # compile first
    errors: list[str] = []

    def worker():
        for _ in range(15):
            out = np.zeros_like(expected)
            status = decode_batch(data, offsets[:-1], np.diff(offsets), crops, flips, out)
            if not (status == 0).all() or not np.array_equal(out, expected):
                errors.append("mismatch")

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    worker()
    for t in threads:
        t.join()
    assert not errors
    assert numba.threading_layer() in ("tbb", "omp")


def test_errors_are_reported_per_sample(batch):
    data, offsets, crops, flips, expected = batch
    broken = data.copy()
    broken[offsets[3]:offsets[3] + 2] = 0  # sample 3 loses its SOI marker
    bad_crops = crops.copy()
    bad_crops[5] = (0, 0, 10**6, 10)  # sample 5 asks for a crop outside the image
    status = decode_batch(broken, offsets[:-1], np.diff(offsets), bad_crops, flips, np.zeros_like(expected))
    assert status[3] == native.Status.ENOTJPEG
    assert status[5] == native.Status.EINVAL
    assert (np.delete(status, [3, 5]) == 0).all()


def test_pack_and_struct_intrinsics():
    rng = np.random.default_rng(1)
    images = rng.integers(0, 256, (6, 20, 24, 3), dtype=np.uint8)
    mean, std = np.array([10.0, 20.0, 30.0]), np.array([2.0, 4.0, 8.0])
    out = np.zeros((6, 3, 20, 24), np.float32)
    assert (pack_batch(images, mean, std, out) == 0).all()
    for i in range(6):
        np.testing.assert_array_equal(out[i], native.pack(images[i], np.float32, mean, std))

    jpeg = np.frombuffer(jpeg_corpus.make_sample(37, 101, "RGB", 1).data, np.uint8)
    info = np.zeros(1, native.JPEG_INFO_DTYPE)
    assert info_of(jpeg, info) == 0
    assert (info[0]["height"], info[0]["width"], info[0]["subsampling"]) == (37, 101, native.Subsampling.S422)


def test_intrinsic_rejects_wrong_array_types():
    @njit
    def bad(data):
        return native.slip_jpeg_info(data, data.size, data)

    with pytest.raises(numba.core.errors.TypingError, match="info"):
        bad(np.zeros(4, np.uint8))


def test_functions_calling_intrinsics_are_cached_on_disk(tmp_path):
    """Intrinsics name their C symbol instead of embedding its address, so a
    compiled caller is saved by Numba's cache and loaded by a new process."""
    import os
    import subprocess
    import sys

    module = tmp_path / "uses_kernel.py"
    module.write_text(
        "import numpy as np\n"
        "from numba import njit\n"
        "from slipstream import native\n"
        "@njit(cache=True, nogil=True)\n"
        "def scale(h, w):\n"
        "    return native.slip_jpeg_scale_for(h, w, 224, 224)\n"
        "print(scale(1000, 900), sum(scale.stats.cache_hits.values()))\n"
    )
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path / "cache")}
    runs = [subprocess.run([sys.executable, str(module)], capture_output=True, text=True, env=env, cwd=tmp_path,
                           check=True).stdout.split() for _ in range(2)]
    assert runs[0] == ["4", "0"]  # compiled and saved
    assert runs[1] == ["4", "1"]  # loaded from the cache, symbol resolved in the new process
