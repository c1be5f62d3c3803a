"""``slipstream demo``: write a dataset and stream it through the ImageNet
training pipeline.

Takes an image folder (or generates one: pictures of six shapes, one class
each), writes it into a dataset file with a progress bar, then for a few
epochs loads it with ``RandomResizedCrop(224)``, ``RandomHorizontalFlip()``
and normalization to float16 (one fused decode per image, straight from the
mapped file), prints the throughput of each epoch and saves one augmented
batch as a labelled grid of pictures (PNG).
"""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from slipstream import native
from slipstream.convert import write
from slipstream.fields import IntField, RGBImageField
from slipstream.format import Reader
from slipstream.loader import Loader, Order
from slipstream.loader.options import _integer
from slipstream.ops import presets
from slipstream.sources import ImageFolder, synthetic_folder


def _source(data: str | None, tmp: Path, count: int) -> tuple[Any, str]:
    """What to write, and a line saying what it is."""
    if data is None:
        folder = synthetic_folder(tmp / "images", count)
        return ImageFolder(folder), f"{count} generated JPEGs (shapes, 6 classes) in {folder}"
    folder = ImageFolder(data)  # root/<class>/<image>, or a flat folder: label 0
    if folder.flat:
        return folder, f"{len(folder)} images from {data} (no class folders: label 0)"
    return folder, f"{len(folder)} images in {len(folder.classes)} classes from {data}"


def run(reader: Reader, epochs: int = 3, batch_size: int = 64) -> tuple[list[float], Any, Any]:
    """Stream the dataset through the ImageNet training pipeline for a few
    epochs; returns images/s per epoch and the first batch of the last
    epoch (images, labels)."""
    loader = Loader(reader, batch_size, presets.imagenet_train(224), order=Order("random", seed=0))
    rates = []
    for epoch in range(epochs):
        start = time.perf_counter()
        count = 0
        for images, labels in loader:
            if count == 0:  # the first batch of each epoch; the last epoch's is kept
                first = (images.clone(), labels.clone())
            count += len(labels)
        rates.append(count / (time.perf_counter() - start))
        print(f"epoch {epoch + 1}: {count} images in {count / rates[-1]:.2f} s = {rates[-1]:,.0f} images/s "
              f"(RandomResizedCrop 224 + flip + normalize to float16, {loader.compiled.threads} threads; "
              f"{_batches(tuple(first[0].shape), len(labels))})")
    loader.close()
    return rates, *first


def _batches(shape: tuple[int, ...], last: int) -> str:
    """The batches of an epoch in words: the shape of a full one, and the
    size of the last when it is partial."""
    return f"batches of {shape}" + (f", the last of {last}" if last != shape[0] else "")


def save_grid(images: Any, labels: Any, names: list[str], path: Path, columns: int = 8, limit: int = 32) -> tuple:
    """Save up to ``limit`` normalized CHW images as a PNG grid, each with its
    class name under it; returns the PNG's (width, height)."""
    from PIL import Image, ImageDraw

    mean = np.array(presets.IMAGENET_MEAN, np.float32)[:, None, None]
    std = np.array(presets.IMAGENET_STD, np.float32)[:, None, None]
    count = min(limit, len(images))
    rows = (count + columns - 1) // columns
    size = images.shape[-1]
    caption = 18
    grid = Image.new("RGB", (columns * size, rows * (size + caption)), "white")
    draw = ImageDraw.Draw(grid)
    for k in range(count):
        pixels = (images[k].float().numpy() * std + mean).clip(0, 1) * 255
        tile = Image.fromarray(pixels.round().astype(np.uint8).transpose(1, 2, 0))
        x, y = (k % columns) * size, (k // columns) * (size + caption)
        grid.paste(tile, (x, y))
        label = int(labels[k])
        draw.text((x + 4, y + size + 3), f"{label}: {names[label] if label < len(names) else label}", fill="black")
    path.parent.mkdir(parents=True, exist_ok=True)
    grid.save(path)
    return grid.size


def main(data: str | None = None, epochs: int = 3, count: int = 240, grid: str | None = "demo-batch.png") -> int:
    """Entry point of ``slipstream demo``.

    Raises:
        ArgumentError: ``epochs`` or ``count`` is not a positive integer.
    """
    _integer(epochs, "epochs", 1)
    _integer(count, "count", 1)
    with tempfile.TemporaryDirectory(prefix="slipstream-demo-") as tmp:
        source, what = _source(data, Path(tmp), count)
        print(what)
        dataset = Path(tmp) / "demo.slip"
        start = time.perf_counter()
        write(dataset, source, {"image": RGBImageField(), "label": IntField()})
        print(f"wrote {dataset}: {len(source)} images, {dataset.stat().st_size / 1e6:.1f} MB, "
              f"in {time.perf_counter() - start:.1f} s (a temporary file, removed when the demo ends)")
        print(f"libslipstream {native.version()} on {os.cpu_count()} cores; the first epoch includes compilation")
        with Reader(dataset) as reader:
            rates, images, labels = run(reader, epochs=epochs)
            names = source.classes
        print(f"best epoch: {max(rates):,.0f} images/s")
        if grid:
            width, height = save_grid(images, labels, names, Path(grid))
            print(f"saved {grid}: {width}x{height} PNG, the first {min(32, len(images))} augmented images of the "
                  f"last epoch's first batch, each with its label")
    return 0
