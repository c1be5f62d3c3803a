"""``slipstream demo``: write a dataset and stream it through the ImageNet
training pipeline.

Takes an image folder (or generates one), writes its JPEGs into a dataset
file with a progress bar, then for a few epochs loads it with
``RandomResizedCrop(224)``, ``RandomHorizontalFlip()`` and normalization to
float16 (one fused decode per image, straight from the mapped file) and
prints the throughput of each epoch.
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

import numba
import numpy as np
from tqdm import tqdm

from slipstream import native
from slipstream.convert import write
from slipstream.fields import IntField, RGBImageField
from slipstream.format import Reader
from slipstream.loader import Loader
from slipstream.ops import presets
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


def run(reader: Reader, epochs: int = 3, batch_size: int = 64) -> list[float]:
    """Stream the dataset through the ImageNet training pipeline for a few
    epochs; returns images/s per epoch."""
    loader = Loader(reader, batch_size, presets.imagenet_train(224), order="random", seed=0)
    rates = []
    for epoch in range(epochs):
        start = time.perf_counter()
        count = 0
        for images, labels in loader:
            count += len(labels)
        rates.append(count / (time.perf_counter() - start))
        print(f"epoch {epoch + 1}: {count} images in {count / rates[-1]:.2f} s = {rates[-1]:,.0f} images/s "
              f"(RandomResizedCrop 224 + flip + normalize to float16, {numba.get_num_threads()} threads; "
              f"batches of {tuple(images.shape)})")
    loader.close()
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
        write(dataset, [(str(p), k % 10) for k, p in enumerate(paths)], {"image": RGBImageField(),
                                                                          "label": IntField()})
        print(f"wrote {dataset.name}: {len(paths)} images, {dataset.stat().st_size / 1e6:.1f} MB, "
              f"in {time.perf_counter() - start:.1f} s")
        print(f"libslipstream {native.version()} on {os.cpu_count()} cores; the first epoch includes compilation")
        with Reader(dataset) as reader:
            rates = run(reader, epochs=epochs)
        print(f"best epoch: {max(rates):,.0f} images/s (Numba threading layer: {numba.threading_layer()})")
    return 0
