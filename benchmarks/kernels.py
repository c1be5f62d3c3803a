"""Single-thread throughput of slipstream's JPEG kernels against Pillow.

Usage::

    python benchmarks/kernels.py [IMAGE_DIR] [--rounds N] [--json PATH] [--check]

What is measured, in images per second on the calling thread:

``pillow_full_decode``
    ``PIL.Image.open`` + decode to an RGB NumPy array: the baseline a
    torchvision ``ImageFolder`` pipeline pays for every sample.
``pillow_decode_internal``
    The same decode without the array: Pillow keeps RGB images as 4 bytes
    per pixel, so this row shows how much of the first is conversion.
``slipstream_full_decode``
    ``slipstream.native.jpeg_decode``: the full image as RGB, accurate IDCT.
``slipstream_fused_rrc224`` / ``slipstream_fused_rrc224_area``
    ``slipstream.native.jpeg_decode_crop_resize`` with a RandomResizedCrop
    crop, resized to 224 x 224 (bilinear, resp. area): the loader's fused
    per-sample kernel, which decodes only the crop at the coarsest DCT scale
    that still covers the output.
``slipstream_fused_rrc224_tiled``
    The same fused kernel and crops on each JPEG re-coded losslessly into
    32-pixel restart-marker tiles (``RGBImageField(tile_width=32)``, done
    before any timing): the crop entropy-decodes only the tiles it touches.
``pillow_rrc224``
    Pillow full decode, then ``Image.resize`` of the crop box to 224 x 224
    (bilinear): what torchvision's RandomResizedCrop does on PIL images.

Why it is measured this way:

* every system gets the same compressed bytes, read into memory before any
  timing, so disk and page-cache effects are excluded and only decoding
  (plus cropping/resizing where the row says so) is measured;
* the RandomResizedCrop parameters are drawn once per image from a seeded
  generator before any timing, so the random sampling costs nothing and
  every crop row works on the same crops;
* everything runs on one thread, the calling one: the ratios compare the
  per-core cost of the kernels, independent of how a loader parallelises.

Two ratios are the headline: ``slipstream_full_decode / pillow_full_decode``
should be at least 0.95 (both decode with libjpeg-turbo; Pillow also pays for
turning its 4-byte RGBX rows into the RGB array a training step needs) and
``slipstream_fused_rrc224 / slipstream_full_decode`` should be at least 1.3
(the fused kernel decodes less).  ``--check`` exits with status 1 when either
fails.
"""

from __future__ import annotations

import argparse
import math
import io
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import PIL
from PIL import Image, features

import slipstream.native as native
from slipstream.compiler import random as rnd
from common import write_json  # noqa: E402  (benchmarks/, next to this file)
from slipstream.ops.crops import random_resized_crop_params
from slipstream.sources import find_jpegs

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_IMAGE_DIR = REPO_ROOT.parent / "shared" / "data" / "imagenet-sample"
OUTPUT_SIZE = 224
SEED = 0
SYNTHETIC_COUNT = 64
SYNTHETIC_SHAPE = (375, 500)  # height, width
FULL_DECODE_MIN_RATIO = 0.95
FUSED_MIN_SPEEDUP = 1.3


class Crop(NamedTuple):
    """A crop rectangle in source pixels."""

    top: int
    left: int
    height: int
    width: int


class Row(NamedTuple):
    """One measured row of the table: the duration of every timed pass."""

    name: str
    images: int  # per pass
    pass_seconds: tuple[float, ...]

    @property
    def images_per_s(self) -> float:
        """Throughput of the fastest pass: interference from the rest of the
        machine only ever adds time, so the minimum is the most repeatable."""
        return self.images / min(self.pass_seconds)


# ---------------------------------------------------------------- inputs


def write_synthetic_jpegs(folder: Path, count: int, seed: int) -> None:
    """Write `count` smooth random RGB JPEGs of SYNTHETIC_SHAPE into folder."""
    rng = np.random.default_rng(seed)
    height, width = SYNTHETIC_SHAPE
    for i in range(count):
        coarse = rng.integers(0, 256, size=(12, 16, 3), dtype=np.uint8)
        smooth = native.resize(coarse, 0, 0, 12, 16, height, width, native.Interp.BILINEAR)
        (folder / f"synthetic-{i:03d}.jpg").write_bytes(bytes(native.jpeg_encode(smooth, quality=90)))


def load_jpegs(folder: Path) -> list[bytes]:
    """The bytes of every JPEG file under folder, in path order."""
    return [p.read_bytes() for p in find_jpegs(folder)]


# ---------------------------------------------------------------- crops


def sample_crops(jpegs: Sequence[bytes], seed: int) -> list[Crop]:
    """One RandomResizedCrop rectangle per image (torchvision's default scale
    and ratio ranges), from the header sizes, drawn as the loader draws them."""
    crops = []
    for index, data in enumerate(jpegs):
        info = native.jpeg_info(data)
        key = np.uint64(rnd.sample_key(np.uint64(seed), 0, index, 0))
        crops.append(Crop(*map(int, random_resized_crop_params(key, info.height, info.width, 0.08, 1.0,
                                                                 math.log(3 / 4), math.log(4 / 3), 10))))
    return crops


# ---------------------------------------------------------------- per-image work


def pillow_rgb(data: bytes) -> Image.Image:
    """Decode data with Pillow into a loaded RGB image."""
    img = Image.open(io.BytesIO(data))
    if img.mode != "RGB":
        return img.convert("RGB")
    img.load()
    return img


def pillow_full_decode(data: bytes, crop: Crop) -> np.ndarray:
    return np.asarray(pillow_rgb(data))


def pillow_decode_internal(data: bytes, crop: Crop) -> Image.Image:
    """Pillow's decode alone, into its own 4-bytes-per-pixel buffer: not what a
    training step can use, shown to separate decoding from array conversion."""
    return pillow_rgb(data)


def pillow_rrc(data: bytes, crop: Crop) -> np.ndarray:
    box = (crop.left, crop.top, crop.left + crop.width, crop.top + crop.height)
    resized = pillow_rgb(data).resize((OUTPUT_SIZE, OUTPUT_SIZE), Image.Resampling.BILINEAR, box=box)
    return np.asarray(resized)


def slipstream_full_decode(data: bytes, crop: Crop) -> np.ndarray:
    return native.jpeg_decode(data)


def slipstream_fused(interp: native.Interp) -> Callable[[bytes, Crop], np.ndarray]:
    """The fused decode+crop+resize of one image with the given filter."""

    def decode(data: bytes, crop: Crop) -> np.ndarray:
        return native.jpeg_decode_crop_resize(
            data, crop.top, crop.left, crop.height, crop.width, OUTPUT_SIZE, OUTPUT_SIZE, interp=interp
        )

    return decode


TILE_WIDTH = 32
TILED: dict[bytes, bytes] = {}  # each JPEG re-coded into tiles, filled by measure() before any timing


def slipstream_fused_tiled(data: bytes, crop: Crop) -> np.ndarray:
    """The bilinear fused kernel on the tiled copy of ``data``."""
    return native.jpeg_decode_crop_resize(
        TILED[data], crop.top, crop.left, crop.height, crop.width, OUTPUT_SIZE, OUTPUT_SIZE,
        interp=native.Interp.BILINEAR,
    )


BENCHMARKS: dict[str, Callable[[bytes, Crop], object]] = {
    "pillow_full_decode": pillow_full_decode,
    "pillow_decode_internal": pillow_decode_internal,
    "slipstream_full_decode": slipstream_full_decode,
    "slipstream_fused_rrc224": slipstream_fused(native.Interp.BILINEAR),
    "slipstream_fused_rrc224_area": slipstream_fused(native.Interp.AREA),
    "slipstream_fused_rrc224_tiled": slipstream_fused_tiled,
    "pillow_rrc224": pillow_rrc,
}


# ---------------------------------------------------------------- timing


def one_pass(work: Callable[[bytes, Crop], object], jpegs: Sequence[bytes], crops: Sequence[Crop]) -> None:
    for data, crop in zip(jpegs, crops):
        work(data, crop)


def measure(jpegs: Sequence[bytes], crops: Sequence[Crop], rounds: int) -> dict[str, Row]:
    """Time every benchmark over the whole image list, interleaved: one
    warm-up pass each, then `rounds` rounds in which each benchmark makes one
    pass.  Interleaving exposes every row to the same machine conditions, so
    that drift in clock speed or background load does not bias the ratios."""
    TILED.update((data, native.jpeg_add_restart_markers(data, TILE_WIDTH)) for data in jpegs)
    for work in BENCHMARKS.values():
        one_pass(work, jpegs, crops)
    times: dict[str, list[float]] = {name: [] for name in BENCHMARKS}
    for _ in range(rounds):
        for name, work in BENCHMARKS.items():
            start = time.perf_counter()
            one_pass(work, jpegs, crops)
            times[name].append(time.perf_counter() - start)
    return {name: Row(name, len(jpegs), tuple(seconds)) for name, seconds in times.items()}


# ---------------------------------------------------------------- report


def headline_ratios(rows: dict[str, Row]) -> dict[str, float]:
    def ratio(a: str, b: str) -> float:
        return rows[a].images_per_s / rows[b].images_per_s

    return {
        "slipstream_full_decode/pillow_full_decode": ratio("slipstream_full_decode", "pillow_full_decode"),
        "slipstream_fused_rrc224/slipstream_full_decode": ratio("slipstream_fused_rrc224", "slipstream_full_decode"),
        "slipstream_fused_rrc224_tiled/slipstream_full_decode": ratio("slipstream_fused_rrc224_tiled",
                                                                      "slipstream_full_decode"),
    }


def check_failures(ratios: dict[str, float]) -> list[str]:
    """The headline expectations that the ratios miss, as sentences."""
    failures = []
    full = ratios["slipstream_full_decode/pillow_full_decode"]
    if full < FULL_DECODE_MIN_RATIO:
        failures.append(f"slipstream_full_decode/pillow_full_decode = {full:.3f}: more than "
                        f"{1 - FULL_DECODE_MIN_RATIO:.0%} slower than Pillow")
    fused = ratios["slipstream_fused_rrc224/slipstream_full_decode"]
    if fused < FUSED_MIN_SPEEDUP:
        failures.append(f"slipstream_fused_rrc224/slipstream_full_decode = {fused:.3f} is below {FUSED_MIN_SPEEDUP}")
    return failures


def format_table(rows: dict[str, Row]) -> str:
    pillow = rows["pillow_full_decode"].images_per_s
    ours = rows["slipstream_full_decode"].images_per_s
    name_width = max(len(name) for name in rows)
    header = f"{'row':<{name_width}}  {'images/s':>10}  {'/pillow_full':>12}  {'/slipstream_full':>16}"
    lines = [header, "-" * len(header)]
    for name, row in rows.items():
        ips = row.images_per_s
        lines.append(f"{name:<{name_width}}  {ips:>10.1f}  {ips / pillow:>12.3f}  {ips / ours:>16.3f}")
    return "\n".join(lines)


def processor_name() -> str | None:
    """The CPU model from /proc/cpuinfo, where there is one."""
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        if key.strip() == "model name":
            return value.strip()
    return None


def system_libjpeg_version() -> str | None:
    """`pkg-config --modversion libjpeg`, or None when that fails."""
    try:
        result = subprocess.run(
            ["pkg-config", "--modversion", "libjpeg"], capture_output=True, text=True, check=True
        )
    except (OSError, subprocess.CalledProcessError):
        return None
    return result.stdout.strip()


def versions() -> dict[str, str | None]:
    return {
        "python": platform.python_version(),
        "numpy": np.__version__,
        "pillow": PIL.__version__,
        "pillow_jpg": features.version("jpg"),
        "pillow_libjpeg_turbo": features.version("libjpeg_turbo"),
        "slipstream_native": native.version(),
        "system_libjpeg": system_libjpeg_version(),
    }


def machine() -> dict[str, Any]:
    return {"platform": platform.platform(), "processor": processor_name(), "cpu_count": os.cpu_count()}


# ---------------------------------------------------------------- main


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Single-thread images/s of slipstream's JPEG kernels against Pillow, on in-memory JPEG bytes."
    )
    parser.add_argument(
        "image_dir", nargs="?", type=Path, default=None,
        help=f"folder searched recursively for .jpg/.jpeg files (default: {DEFAULT_IMAGE_DIR} when it exists, "
        f"else {SYNTHETIC_COUNT} synthetic {SYNTHETIC_SHAPE[1]}x{SYNTHETIC_SHAPE[0]} JPEGs in a temporary folder)",
    )
    parser.add_argument(
        "--rounds", type=int, default=5,
        help="timed passes over the images per row, interleaved across rows; the fastest counts (default: 5)",
    )
    parser.add_argument(
        "--json", type=Path, default=None,
        help="where to write the results (default: benchmarks/results/kernels-<YYYY-MM-DD>.json in the repository)",
    )
    parser.add_argument(
        "--check", action="store_true",
        help="exit with status 1 if slipstream_full_decode is more than 5%% slower than pillow_full_decode "
        "or slipstream_fused_rrc224 is below 1.3x slipstream_full_decode",
    )
    return parser.parse_args(argv)


def run(image_dir: Path, jpegs: Sequence[bytes], synthetic: bool, args: argparse.Namespace) -> int:
    """Measure every row on jpegs, print and save the report; the exit status."""
    if not jpegs:
        print(f"no JPEG files found under {image_dir}", file=sys.stderr)
        return 2
    now = datetime.now().astimezone()
    crops = sample_crops(jpegs, SEED)
    print(f"{len(jpegs)} JPEGs from {image_dir}, fastest of {args.rounds} interleaved passes per row, 1 thread")
    rows = measure(jpegs, crops, args.rounds)
    ratios = headline_ratios(rows)
    print(format_table(rows))
    print()
    for name, value in ratios.items():
        print(f"{name}: {value:.3f}")
    failures = check_failures(ratios)
    for failure in failures:
        print(f"EXPECTATION FAILED: {failure}")

    path = args.json or REPO_ROOT / "benchmarks" / "results" / f"kernels-{now.date().isoformat()}.json"
    write_json(path, {
        "rows": {name: {"images_per_s": row.images_per_s, "images_per_pass": row.images,
                        "pass_seconds": list(row.pass_seconds)}
                 for name, row in rows.items()},
        "ratios": ratios,
        "expectations_met": not failures,
        "image_dir": str(image_dir),
        "synthetic_images": synthetic,
        "num_images": len(jpegs),
        "rounds": args.rounds,
        "threads": 1,
        "seed": SEED,
        "machine": machine(),
        "versions": versions(),
        "command": shlex.join([sys.executable, *sys.argv]),
        "timestamp": now.isoformat(timespec="seconds"),
    })
    print(f"\nwrote {path}")
    return 1 if args.check and failures else 0


def main(argv: Sequence[str]) -> int:
    args = parse_args(argv)
    if args.image_dir is not None:
        return run(args.image_dir, load_jpegs(args.image_dir), False, args)
    if DEFAULT_IMAGE_DIR.is_dir():
        return run(DEFAULT_IMAGE_DIR, load_jpegs(DEFAULT_IMAGE_DIR), False, args)
    with tempfile.TemporaryDirectory(prefix="slipstream-kernels-") as tmp:
        folder = Path(tmp)
        write_synthetic_jpegs(folder, SYNTHETIC_COUNT, SEED)
        return run(folder, load_jpegs(folder), True, args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
