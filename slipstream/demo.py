"""``slipstream demo``: write a dataset and stream it through the fused kernel.

Takes an image folder (or generates one), writes its JPEGs into a dataset
file, then for a few epochs decodes every image straight from the mapped
file with an ImageNet-style random-resized crop to 224 x 224 and a random
flip, a batch at a time, in Numba-compiled parallel code that calls the C
kernel once per image, and prints the throughput of each epoch.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import numba
import numpy as np
from numba import njit, prange
from tqdm import tqdm

from slipstream import native
from slipstream.convert import write
from slipstream.errors import ArgumentError, DecodeError
from slipstream.fields import RGBImageField
from slipstream.fields.image import JPEG_MODE
from slipstream.format import Reader
from slipstream.ops.sampling import random_resized_crop_params
from slipstream.sources import find_jpegs


def generate_images(folder: Path, count: int, height: int = 375, width: int = 500, seed: int = 0) -> list[Path]:
    """Write ``count`` synthetic photo-sized JPEGs (smooth colour fields with
    texture) into folder, with a progress bar."""
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    paths = []
    for i in tqdm(range(count), desc="generating images", unit="img", disable=None):
        fx, fy, phase = rng.uniform(0.005, 0.05, 2).tolist() + [rng.uniform(0, 6.28)]
        base = rng.uniform(40, 215, 3)
        wave = 40 * np.sin(xx * fx + phase)[..., None] + 40 * np.cos(yy * fy)[..., None]
        img = np.clip(base + wave + rng.normal(0, 8, (height, width, 3)), 0, 255).astype(np.uint8)
        path = folder / f"image_{i:05d}.jpg"
        path.write_bytes(native.jpeg_encode(img, quality=90))
        paths.append(path)
    return paths


@njit(nogil=True, parallel=True, cache=True)
def decode_batch(storage, starts, sizes, crops, flips, out):
    """Decode, crop, resize and flip every sample of a batch in parallel,
    reading each JPEG in place from the mapped file; returns the C status of
    each sample."""
    n = crops.shape[0]
    status = np.empty(n, np.int32)
    for i in prange(n):
        jpeg = storage[starts[i]:starts[i] + sizes[i]]
        flags = native.DecodeFlags.FLIP_X if flips[i] else native.DecodeFlags.DEFAULT
        status[i] = native.slip_jpeg_decode_crop_resize(
            jpeg, jpeg.size, crops[i, 0], crops[i, 1], crops[i, 2], crops[i, 3], out.shape[1], out.shape[2],
            flags, native.Interp.BILINEAR, out[i], out[i].size, out.strides[1])
    return status


def run(reader: Reader, epochs: int = 3, batch_size: int = 64, size: int = 224, seed: int = 0) -> list[float]:
    """Stream the dataset's images for a few epochs; returns images/s per epoch.
    Image sizes come from the file's metadata: no JPEG header is parsed."""
    images = reader.metadata["image"]
    if np.any(images["mode"] != JPEG_MODE):
        raise ArgumentError(f"{reader.path}: the demo streams JPEG-stored images only")
    starts, sizes = images["offset"].astype(np.int64), images["size"].astype(np.int64)
    heights, widths = images["height"].astype(int), images["width"].astype(int)
    rng = np.random.default_rng(seed)
    out = np.empty((batch_size, size, size, 3), np.uint8)
    rates = []
    for epoch in range(epochs):
        order = rng.permutation(len(reader))
        start = time.perf_counter()
        for first in range(0, len(order), batch_size):
            members = order[first:first + batch_size]
            crops = np.array([random_resized_crop_params(rng, heights[i], widths[i]) for i in members], np.int32)
            flips = rng.random(len(members)) < 0.5
            status = decode_batch(reader.storage, starts[members], sizes[members], crops, flips, out[:len(members)])
            bad = np.flatnonzero(status)
            if bad.size:
                i = int(members[bad[0]])
                raise DecodeError(f"{reader.path}: sample {i}: {native.strerror(int(status[bad[0]]))}",
                                  status=int(status[bad[0]]))
        elapsed = time.perf_counter() - start
        rates.append(len(order) / elapsed)
        print(f"epoch {epoch + 1}: {len(order)} images in {elapsed:.2f} s = {rates[-1]:,.0f} images/s "
              f"(RandomResizedCrop 224 + flip, {numba.get_num_threads()} threads)")
    return rates


def main(data: str | None = None, epochs: int = 3, count: int = 256) -> int:
    """Entry point of ``slipstream demo``."""
    with tempfile.TemporaryDirectory(prefix="slipstream-demo-") as tmp:
        if data:
            paths = find_jpegs(data)
            if not paths:
                print(f"no JPEG files under {data}")
                return 1
            print(f"{len(paths)} JPEGs from {data}")
        else:
            paths = generate_images(Path(tmp) / "images", count)
            print(f"{len(paths)} synthetic JPEGs in {tmp}")
        dataset = Path(tmp) / "demo.slip"
        start = time.perf_counter()
        write(dataset, [(str(p),) for p in paths], {"image": RGBImageField()})
        print(f"wrote {dataset.name}: {len(paths)} images, {dataset.stat().st_size / 1e6:.1f} MB, "
              f"in {time.perf_counter() - start:.1f} s")
        print(f"libslipstream {native.version()} on {os.cpu_count()} cores; the first epoch includes compilation")
        with Reader(dataset) as reader:
            rates = run(reader, epochs=epochs)
        print(f"best epoch: {max(rates):,.0f} images/s (Numba threading layer: {numba.threading_layer()})")
    return 0
