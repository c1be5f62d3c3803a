"""The data of the GPU check (``benchmarks/gpu_check.py``): JPEGs of
ImageNet sizes generated on the spot, and the sample photos when present,
each as a folder of files and a slipstream file holding the same bytes.

Usage::

    python benchmarks/gpu_data.py generate WORKDIR [--images N] [--photos FOLDER] [--workers W]
    python benchmarks/gpu_data.py bundle [--megabytes 32]

``bundle`` copies the first sample photos (``../shared/data/imagenet-sample``),
in name order, up to ``--megabytes``, into ``build/gpu-photos``: the GPU
machine has no ``../shared``, and what travels there is limited in size.

``generate`` writes, under WORKDIR, one folder per data set:

``synthetic/``
    ``--images`` JPEGs (default 4,096) of the sizes ImageNet's training
    photos come in (mostly 500 x 375, 375 x 500, 500 x 333 and 500 x 500,
    one in eight larger, up to 1,600 px), quality 90, 4:2:0, with the
    detail of a photo at three scales plus sensor-like noise (about
    100 KB each at 500 x 375, as the sample photos), generated from a
    seed: the same bytes on every machine with the same Pillow.
``photos/``
    the JPEGs of ``--photos`` (default: ``build/gpu-photos`` when present,
    else ``../shared/data/imagenet-sample``), repeated up to at least
    ``--images`` samples; left out when there are none.

``photos-4x/``
    each of those photos enlarged to twice its width and height (four
    times its pixels; Lanczos, quality 90, 4:2:0), repeated up to at least
    half of ``--images`` samples: where a decode costs four times as much.

Each folder holds ``data.slip`` (the JPEG bytes unchanged, with labels)
and ``samples.json``: the ``[path, label]`` of every sample in the file's
order, which the DataLoader side reads, so that both systems decode the
same bytes.  Labels are the sample's position modulo 1,000 (ImageNet's
class count, which the model's last layer expects).
"""

from __future__ import annotations

import argparse
import io
import json
import multiprocessing
import os
import sys
import time
from pathlib import Path

import numpy as np
from PIL import Image

REPO_ROOT = Path(__file__).resolve().parent.parent
CARRIED_PHOTOS = REPO_ROOT / "build" / "gpu-photos"
SHARED_PHOTOS = REPO_ROOT.parent / "shared" / "data" / "imagenet-sample"
CLASSES = 1000
COMMON_SIZES = ((500, 375), (375, 500), (500, 333), (333, 500), (500, 500), (500, 400))
QUALITY = 90


def image_size(seed: int) -> tuple[int, int]:
    """(width, height) of synthetic image ``seed``: one of ImageNet's common
    sizes, or one time in eight a larger photo (longer side 600-1,600 px,
    aspect 0.6-0.85, either orientation)."""
    rng = np.random.default_rng([seed, 1])
    if rng.random() >= 1 / 8:
        return COMMON_SIZES[int(rng.integers(len(COMMON_SIZES)))]
    longer = int(rng.integers(600, 1601))
    shorter = int(longer * rng.uniform(0.6, 0.85))
    return (longer, shorter) if rng.random() < 0.5 else (shorter, longer)


def synthetic_pixels(width: int, height: int, seed: int) -> np.ndarray:
    """An RGB image with a photo's mix of detail: smooth random fields at
    three scales (bicubic upsampling of Gaussian noise) and per-pixel noise."""
    rng = np.random.default_rng([seed, 2])
    out = np.full((height, width, 3), 128.0, np.float32)
    for cells, amplitude in ((6, 90.0), (24, 45.0), (96, 45.0)):
        grid = (max(2, height * cells // max(width, height)), max(2, width * cells // max(width, height)))
        for c in range(3):
            small = Image.fromarray(rng.normal(0.0, 1.0, grid).astype(np.float32))
            out[..., c] += amplitude * np.asarray(small.resize((width, height), Image.Resampling.BICUBIC))
    out += rng.normal(0.0, 14.0, out.shape).astype(np.float32)
    return np.clip(out, 0, 255).astype(np.uint8)


def write_synthetic(args: tuple[Path, int]) -> int:
    """Write synthetic JPEG number ``seed`` to ``path``; its size in bytes."""
    path, seed = args
    width, height = image_size(seed)
    buffer = io.BytesIO()
    Image.fromarray(synthetic_pixels(width, height, seed)).save(buffer, "JPEG", quality=QUALITY)
    path.write_bytes(buffer.getvalue())
    return len(buffer.getvalue())


def write_enlarged(args: tuple[str, str]) -> int:
    """Write the photo ``source`` at twice its width and height to
    ``destination``; its size in bytes."""
    source, destination = args
    with Image.open(source) as image:
        rgb = image.convert("RGB")
    enlarged = rgb.resize((2 * rgb.width, 2 * rgb.height), Image.Resampling.LANCZOS)
    buffer = io.BytesIO()
    enlarged.save(buffer, "JPEG", quality=QUALITY)
    Path(destination).write_bytes(buffer.getvalue())
    return len(buffer.getvalue())


def find_photos(folder: Path | None) -> list[Path]:
    """The JPEGs of ``folder`` (or of the first of the default folders that
    has any), sorted; empty when there are none."""
    from slipstream.sources import find_jpegs  # here: the generating workers need no slipstream

    candidates = [folder] if folder is not None else [CARRIED_PHOTOS, SHARED_PHOTOS]
    for candidate in candidates:
        if candidate.is_dir():
            paths = find_jpegs(candidate)
            if paths:
                return paths
    return []


def write_dataset(folder: Path, samples: list[tuple[str, int]], workers: int) -> dict:
    """``data.slip`` and ``samples.json`` of ``samples`` in ``folder``."""
    import slipstream as ss

    # The JPEGs as they are: what the device decoders read, byte for byte, in every earlier run of the check.
    fields = {"image": ss.RGBImageField(tile_width=None), "label": ss.IntField()}
    ss.write(folder / "data.slip", samples, fields, workers=workers, overwrite=True, verbose=False)
    (folder / "samples.json").write_text(json.dumps(samples))
    sizes = [os.path.getsize(p) for p in {p for p, _ in samples}]
    return {"folder": str(folder), "file": str(folder / "data.slip"), "samples": len(samples),
            "distinct_images": len(sizes), "mean_bytes": round(float(np.mean(sizes)))}


def generate(workdir: Path, images: int, photos: Path | None = None, workers: int | None = None) -> dict:
    """Write the data sets under ``workdir`` (module docstring); what was
    written, by data set name."""
    workers = workers or os.cpu_count() or 1
    made = {}
    synthetic = workdir / "synthetic"
    (synthetic / "images").mkdir(parents=True, exist_ok=True)
    jobs = [(synthetic / "images" / f"{k:06d}.jpg", k) for k in range(images)]
    start = time.perf_counter()
    with multiprocessing.get_context("spawn").Pool(workers) as pool:
        pool.map(write_synthetic, jobs, chunksize=16)
    samples = [(str(path), k % CLASSES) for path, k in jobs]
    made["synthetic"] = {**write_dataset(synthetic, samples, workers), "seconds": round(time.perf_counter() - start, 1)}
    paths = find_photos(photos)
    if paths:
        start = time.perf_counter()
        repeat = -(-images // len(paths))
        samples = [(str(paths[k % len(paths)]), k % CLASSES) for k in range(len(paths) * repeat)]
        (workdir / "photos").mkdir(parents=True, exist_ok=True)
        made["photos"] = {**write_dataset(workdir / "photos", samples, workers), "source": str(paths[0].parent),
                          "repeat": repeat, "seconds": round(time.perf_counter() - start, 1)}
        start = time.perf_counter()
        enlarged = workdir / "photos-4x"
        (enlarged / "images").mkdir(parents=True, exist_ok=True)
        jobs = [(str(path), str(enlarged / "images" / path.name)) for path in paths]
        with multiprocessing.get_context("spawn").Pool(workers) as pool:
            pool.map(write_enlarged, jobs, chunksize=4)
        repeat = -(-images // (2 * len(paths)))
        samples = [(jobs[k % len(jobs)][1], k % CLASSES) for k in range(len(jobs) * repeat)]
        made["photos-4x"] = {**write_dataset(enlarged, samples, workers), "repeat": repeat,
                             "seconds": round(time.perf_counter() - start, 1)}
    return made


def bundle_photos(source: Path, destination: Path, budget_bytes: int) -> list[Path]:
    """Copy the JPEGs of ``source``, in name order, into ``destination``
    (emptied first) while their total stays within ``budget_bytes``."""
    import shutil

    shutil.rmtree(destination, ignore_errors=True)
    destination.mkdir(parents=True)
    copied, total = [], 0
    for path in find_photos(source):
        size = path.stat().st_size
        if total + size > budget_bytes:
            break
        shutil.copy2(path, destination / path.name)
        copied.append(destination / path.name)
        total += size
    return copied


def load_samples(folder: Path) -> list[tuple[str, int]]:
    """The ``[path, label]`` list a data set folder records."""
    return [(path, int(label)) for path, label in json.loads((Path(folder) / "samples.json").read_text())]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("generate", help="write the data sets")
    make.add_argument("workdir", type=Path, help="where the data sets go")
    make.add_argument("--images", type=int, default=4096, help="synthetic images, and photos samples at least")
    make.add_argument("--photos", type=Path, default=None, help="a folder of JPEG photos (default: see above)")
    make.add_argument("--workers", type=int, default=None, help="processes (default: all cores)")
    make.add_argument("--json", type=Path, default=None, help="also write what was made here")
    bundle = commands.add_parser("bundle", help=f"copy sample photos into {CARRIED_PHOTOS.relative_to(REPO_ROOT)}")
    bundle.add_argument("--photos", type=Path, default=SHARED_PHOTOS, help="the photos (default: %(default)s)")
    bundle.add_argument("--megabytes", type=float, default=32.0, help="at most this many MB (default: 32)")
    args = parser.parse_args(argv)
    if args.command == "bundle":
        copied = bundle_photos(args.photos, CARRIED_PHOTOS, int(args.megabytes * 1e6))
        size = sum(p.stat().st_size for p in copied)
        print(f"{len(copied)} photos ({size / 1e6:.1f} MB) from {args.photos} in {CARRIED_PHOTOS}")
        return 0
    made = generate(args.workdir, args.images, args.photos, args.workers)
    for name, info in made.items():
        print(f"{name}: {info['samples']:,} samples ({info['distinct_images']:,} distinct JPEGs, "
              f"{info['mean_bytes']:,} bytes on average) in {info['file']}, {info['seconds']} s")
    if args.json:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(made, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
