"""How small segmentation masks are stored, and how fast they decode:
slipstream's row run-length format against PNG and COCO's RLE.

Usage::

    python benchmarks/masks.py [--count N] [--size WxH ...] [--repeats R] [--json PATH]

Masks are generated, seeded, to resemble real annotations:

``semantic``
    One class id per pixel: 4 to 9 large "stuff" regions (a Voronoi
    partition warped by smooth noise, so that borders are irregular) and 5
    to 30 polygon "things" painted over them, 10 to 40 classes in all, ids
    below 151 (ADE20K-like).
``instances``
    5 to 30 binary instance masks per image, each an irregular polygon of
    log-uniform size (6 pixels to a third of the image), free to overlap.

Each is stored three ways, and for each the median over masks of bytes per
mask, of the encode time and of the decode time (itself the median of
``--repeats`` runs per mask, on the calling thread, data in memory) is
shown:

``slipstream``
    :func:`slipstream.fields.masks.encode_mask` / ``encode_instances``;
    decoded by the compiled ``decode_mask`` / ``decode_instances`` at the
    identity transform (``decode``) and onto a 512 x 512 RandomResizedCrop
    grid (scale 0.08-1, ratio 3/4-4/3, random flip: ``decode rrc``), both
    into preallocated outputs.
``png``
    Pillow, default compression (level 6): the semantic mask as one 8-bit
    greyscale PNG, each instance as its own 1-bit PNG.  Decoded with
    ``Image.open(...).load()`` and ``np.asarray``.
``coco-rle``
    ``pycocotools.mask.encode`` of each instance, or of each class present
    in a semantic mask (bytes: the compressed ``counts`` strings); decoded
    with ``pycocotools.mask.decode`` (for semantic masks this gives one
    binary mask per class, not yet the class-id image).  Left out when
    pycocotools is not installed.

PNG and COCO's RLE are decoded whole: neither can decode a crop alone.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
from PIL import Image, ImageDraw

import slipstream as ss
from slipstream.fields import masks
from common import write_json  # noqa: E402  (benchmarks/, next to this file)

REPO_ROOT = Path(__file__).resolve().parent.parent
RRC_SIZE = 512


# ---------------------------------------------------------------- generated masks


def smooth_noise(rng: np.random.Generator, height: int, width: int, cell: int) -> np.ndarray:
    """Gaussian noise on a grid of ``cell`` pixels, interpolated bicubically."""
    grid = rng.normal(size=(height // cell + 2, width // cell + 2)).astype(np.float32)
    image = Image.fromarray(grid, mode="F").resize((grid.shape[1] * cell, grid.shape[0] * cell), Image.BICUBIC)
    return np.asarray(image)[:height, :width]


def polygon(rng: np.random.Generator, height: int, width: int, smallest: float, largest: float) -> list[tuple]:
    """An irregular star-shaped polygon of log-uniform radius somewhere in the image."""
    radius = np.exp(rng.uniform(np.log(smallest), np.log(largest)))
    cy, cx = rng.uniform(0, height), rng.uniform(0, width)
    corners = int(rng.integers(6, 24))
    angles = np.sort(rng.uniform(0, 2 * np.pi, corners))
    radii = radius * rng.uniform(0.45, 1.0, corners)
    return [(float(cx + r * np.cos(a)), float(cy + r * np.sin(a))) for a, r in zip(angles, radii)]


def semantic_mask(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A (height, width) uint8 class-id mask (see the module docstring)."""
    classes = rng.permutation(np.arange(1, 151))[: rng.integers(10, 41)]
    stuff = int(rng.integers(4, 10))
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    amplitude = 0.08 * max(height, width)
    warped_y = yy + amplitude * (smooth_noise(rng, height, width, 64) + 0.3 * smooth_noise(rng, height, width, 16))
    warped_x = xx + amplitude * (smooth_noise(rng, height, width, 64) + 0.3 * smooth_noise(rng, height, width, 16))
    seeds = rng.uniform([0, 0], [height, width], (stuff, 2))
    distance = np.stack([(warped_y - sy) ** 2 + (warped_x - sx) ** 2 for sy, sx in seeds])
    image = Image.fromarray(classes[:stuff][np.argmin(distance, 0)].astype(np.uint8))
    draw = ImageDraw.Draw(image)
    for _ in range(rng.integers(5, 31)):
        draw.polygon(polygon(rng, height, width, 8, 0.3 * min(height, width)),
                     fill=int(classes[rng.integers(stuff, len(classes))]))
    return np.asarray(image).copy()


def instance_masks(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """An (n, height, width) uint8 0/1 stack of 5 to 30 instances."""
    count = int(rng.integers(5, 31))
    out = np.zeros((count, height, width), np.uint8)
    for n in range(count):
        image = Image.new("L", (width, height))
        ImageDraw.Draw(image).polygon(polygon(rng, height, width, 6, 0.35 * min(height, width)), fill=1)
        out[n] = np.asarray(image)
    return out


def rrc_transform(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A RandomResizedCrop (scale 0.08-1, ratio 3/4-4/3, random flip) onto RRC_SIZE x RRC_SIZE."""
    area = height * width
    for _ in range(10):
        target = area * rng.uniform(0.08, 1.0)
        ratio = np.exp(rng.uniform(np.log(3 / 4), np.log(4 / 3)))
        w, h = round(np.sqrt(target * ratio)), round(np.sqrt(target / ratio))
        if 0 < w <= width and 0 < h <= height:
            top, left = int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1))
            break
    else:
        top, left, h, w = 0, 0, height, width
    return masks.crop_transform(top, left, h, w, RRC_SIZE, RRC_SIZE, flip=bool(rng.integers(2)))


# ---------------------------------------------------------------- formats


class Codec:
    """One storage format: ``encode(value) -> stored`` and ``size(stored)``
    for the bytes, and ``decoders``: name -> ``(stored, value) -> callable``
    making the timed zero-argument decode of one stored value."""

    def __init__(self, name: str, encode: Callable[[np.ndarray], Any], size: Callable[[Any], int],
                 decoders: dict[str, Callable[[Any, np.ndarray], Callable[[], Any]]]) -> None:
        self.name, self.encode, self.size, self.decoders = name, encode, size, decoders


def png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, "PNG")
    return buffer.getvalue()


def png_decode(data: bytes) -> np.ndarray:
    with Image.open(io.BytesIO(data)) as image:
        image.load()
        return np.asarray(image)


def slipstream_codecs(kind: str, rng: np.random.Generator) -> Codec:
    """slipstream's format, decoded whole and onto a RandomResizedCrop grid."""
    if kind == "semantic":
        def decoder(rrc: bool):
            def make(stored: bytes, value: np.ndarray) -> Callable[[], Any]:
                data, (height, width) = np.frombuffer(stored, np.uint8), value.shape
                transform = rrc_transform(rng, height, width) if rrc else \
                    masks.crop_transform(0, 0, height, width, height, width)
                out = np.empty((int(transform[4]), int(transform[5])), np.uint8)
                return lambda: masks.decode_mask(data, height, width, transform, out, 255)
            return make
        encode = masks.encode_mask
    else:
        def decoder(rrc: bool):
            def make(stored: bytes, value: np.ndarray) -> Callable[[], Any]:
                data, (count, height, width) = np.frombuffer(stored, np.uint8), value.shape
                transform = rrc_transform(rng, height, width) if rrc else \
                    masks.crop_transform(0, 0, height, width, height, width)
                out = np.empty((count, int(transform[4]), int(transform[5])), np.uint8)
                select = np.arange(count, dtype=np.int64)
                return lambda: masks.decode_instances(data, height, width, count, select, count, transform, out)
            return make
        encode = masks.encode_instances
    return Codec("slipstream", encode, len, {"decode": decoder(False), "decode rrc": decoder(True)})


def png_codec(kind: str) -> Codec:
    if kind == "semantic":
        return Codec("png", lambda m: png_bytes(Image.fromarray(m)), len,
                     {"decode": lambda stored, value: lambda: png_decode(stored)})
    return Codec("png", lambda ms: [png_bytes(Image.fromarray(m * 255).convert("1")) for m in ms],
                 lambda stored: sum(map(len, stored)),
                 {"decode": lambda stored, value: lambda: [png_decode(s) for s in stored]})


def coco_codec(kind: str) -> Codec | None:
    try:
        from pycocotools import mask as coco
    except ImportError:
        return None
    if kind == "semantic":
        def encode(m: np.ndarray) -> list[dict]:
            classes = np.unique(m)
            return coco.encode(np.asfortranarray((m[:, :, None] == classes).astype(np.uint8)))
    else:
        def encode(ms: np.ndarray) -> list[dict]:
            return coco.encode(np.asfortranarray(ms.transpose(1, 2, 0)))
    return Codec("coco-rle", encode, lambda stored: sum(len(r["counts"]) for r in stored),
                 {"decode": lambda stored, value: lambda: coco.decode(stored)})


# ---------------------------------------------------------------- measuring


def median_seconds(run: Callable[[], Any], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(kind: str, values: list[np.ndarray], codecs: list[Codec], repeats: int) -> list[dict[str, Any]]:
    """Per codec: bytes, encode and decode times (medians over the values)."""
    rows = []
    for codec in codecs:
        sizes, encodes, decodes = [], [], {name: [] for name in codec.decoders}
        for value in values:
            stored = codec.encode(value)
            encodes.append(median_seconds(lambda c=codec, v=value: c.encode(v), max(1, repeats // 2)))
            sizes.append(codec.size(stored))
            for name, make in codec.decoders.items():
                run = make(stored, value)
                run()  # compiles the decoders on first use, warms caches
                decodes[name].append(median_seconds(run, repeats))
        rows.append({"kind": kind, "format": codec.name, "bytes_median": statistics.median(sizes),
                     "bytes_mean": statistics.fmean(sizes), "encode_ms_median": statistics.median(encodes) * 1e3,
                     **{f"{name.replace(' ', '_')}_us_median": statistics.median(times) * 1e6
                        for name, times in decodes.items()}})
    return rows


def parse_size(text: str) -> tuple[int, int]:
    """``WIDTHxHEIGHT`` -> (height, width)."""
    try:
        width, height = (int(v) for v in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"a size is WIDTHxHEIGHT (like 1024x768), got {text!r}") from None
    return height, width


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20, help="masks (or instance sets) per kind and size "
                                                              "(default: 20)")
    parser.add_argument("--size", type=parse_size, action="append", default=None,
                        help="mask size WIDTHxHEIGHT, repeatable (default: 512x512 and 1024x768)")
    parser.add_argument("--repeats", type=int, default=9, help="timed runs per mask and decoder (default: 9)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the generated masks and crops (default: 0)")
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    args = parser.parse_args(argv)
    sizes = args.size or [(512, 512), (768, 1024)]

    results = []
    for height, width in sizes:
        for kind, make in (("semantic", semantic_mask), ("instances", instance_masks)):
            rng = np.random.default_rng(args.seed)
            values = [make(rng, height, width) for _ in range(args.count)]
            codecs = [slipstream_codecs(kind, rng), png_codec(kind), coco_codec(kind)]
            for row in measure(kind, values, [c for c in codecs if c is not None], args.repeats):
                row["size"] = f"{width}x{height}"
                row["instances_mean"] = statistics.fmean(len(v) for v in values) if kind == "instances" else None
                results.append(row)

    print(f"{args.count} masks per row, median per mask; decode times: median of {args.repeats} runs, one thread")
    print(f"{'kind':<10} {'size':>9} {'format':<11} {'bytes':>8} {'vs png':>7} {'encode ms':>10} "
          f"{'decode us':>10} {'rrc512 us':>10}")
    for row in results:
        png = next(r for r in results if (r["kind"], r["size"], r["format"]) == (row["kind"], row["size"], "png"))
        rrc = row.get("decode_rrc_us_median")
        print(f"{row['kind']:<10} {row['size']:>9} {row['format']:<11} {row['bytes_median']:>8,.0f} "
              f"{row['bytes_median'] / png['bytes_median']:>7.2f} {row['encode_ms_median']:>10.2f} "
              f"{row['decode_us_median']:>10,.0f} {'-' if rrc is None else f'{rrc:,.0f}':>10}")

    now = datetime.now().astimezone()
    path = args.json or REPO_ROOT / "benchmarks" / "results" / f"masks-{now.date().isoformat()}.json"
    try:
        import pycocotools
        coco_version = getattr(pycocotools, "__version__", "installed")
    except ImportError:
        coco_version = None
    report = {
        "count": args.count, "repeats": args.repeats, "seed": args.seed, "rrc_size": RRC_SIZE,
        "results": results,
        "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
        "versions": {"python": platform.python_version(), "numpy": np.__version__,
                     "pillow": Image.__version__, "pycocotools": coco_version, "slipstream": ss.__version__},
        "command": shlex.join([sys.executable, *sys.argv]), "timestamp": now.isoformat(timespec="seconds"),
    }
    write_json(path, report)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
