"""What lossless compression of the yuv420 planes would store and cost:
for each coder, the disk against the JPEG bytes and the time to get the
planes back, beside the JPEG path's crop and the planes' crop.

Usage::

    python benchmarks/lossless.py [FOLDER] [--images N] [--size S] [--rounds R]

Needs ``imagecodecs`` (``pip install imagecodecs``: CharLS, libjxl, libpng,
zstd) besides slipstream.  The first ``--images`` (default 200) JPEGs of
FOLDER (default ``../shared/data/imagenet-sample``) are stored as
``RGBImageField(max_resolution=S)`` stores them (default 256, FFCV's usual
ImageNet setting: shrunk and re-encoded at quality 90), and each JPEG's
YCbCr 4:2:0 planes are what ``write_mode="yuv420"`` stores.  Each coder
compresses the Y, Cb and Cr planes of every image separately, as a page
of planes would be:

* ``zlib-6`` and ``zstd-19`` over the planes' bytes;
* ``MED + zlib-6`` and ``MED + zstd-19``: over the residuals of the
  median edge detector (JPEG-LS's predictor) taken modulo 256; decoding
  inflates and then undoes the prediction (a compiled loop, as a kernel
  would);
* ``PNG-9``: libpng, its per-row filters chosen by libpng;
* ``JPEG-LS (CharLS)``: near-lossless 0 (lossless);
* ``JPEG XL lossless, effort 1`` and ``effort 7`` (libjxl's default), one
  thread.

Times are one thread, per image, the median of ``--rounds`` passes over
all images: the coder's decode of the three planes, against
``native.jpeg_decode_crop_resize`` (the JPEG path's RandomResizedCrop to
224 x 224) and ``native.planes_crop_resize`` (the planes' crop of the same
boxes) on the same images.  A compressed planes file loads at the decode
plus the planes' crop.  Writes ``benchmarks/results/lossless-<date>.json``.
"""

from __future__ import annotations

import argparse
import math
import statistics
import sys
import time
import zlib
from pathlib import Path
from typing import Any, Callable

import numba
import numpy as np

import slipstream as ss
from slipstream import native
from slipstream.sources import find_jpegs
from common import record  # noqa: E402  (benchmarks/, next to this file)

try:
    import imagecodecs
except ImportError:
    sys.exit("benchmarks/lossless.py needs imagecodecs: pip install imagecodecs")

REPO = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = REPO.parent / "shared" / "data" / "imagenet-sample"
OUT = 224


@numba.njit(cache=True, nogil=True)
def _med_residuals(plane: np.ndarray) -> np.ndarray:
    """Each sample minus the median edge detector's prediction from its
    left, upper and upper-left neighbours, modulo 256."""
    out = np.empty_like(plane)
    for y in range(plane.shape[0]):
        for x in range(plane.shape[1]):
            out[y, x] = (np.int32(plane[y, x]) - _prediction(plane, y, x)) & 255
    return out


@numba.njit(cache=True, nogil=True)
def _med_undo(residuals: np.ndarray) -> np.ndarray:
    """The plane whose residuals ``_med_residuals`` gave."""
    plane = np.empty_like(residuals)
    for y in range(plane.shape[0]):
        for x in range(plane.shape[1]):
            plane[y, x] = (np.int32(residuals[y, x]) + _prediction(plane, y, x)) & 255
    return plane


@numba.njit(inline="always")
def _prediction(plane: np.ndarray, y: int, x: int) -> int:
    """The median edge detector's prediction of ``plane[y, x]`` (JPEG-LS,
    ITU-T T.87 A.4.3): the neighbours missing at an edge are replaced by
    the nearest one present, and the first sample is predicted as 0."""
    a = np.int32(plane[y, x - 1]) if x else (np.int32(plane[y - 1, x]) if y else np.int32(0))
    b = np.int32(plane[y - 1, x]) if y else a
    c = np.int32(plane[y - 1, x - 1]) if x and y else b
    if c >= max(a, b):
        return min(a, b)
    if c <= min(a, b):
        return max(a, b)
    return a + b - c


def _bytes_coder(encode: Callable[[bytes], bytes], decode: Callable[[bytes], bytes]) -> tuple[Callable, Callable]:
    return (lambda plane: encode(plane.tobytes()),
            lambda data, shape: np.frombuffer(decode(data), np.uint8).reshape(shape))


def _med_coder(encode: Callable[[bytes], bytes], decode: Callable[[bytes], bytes]) -> tuple[Callable, Callable]:
    return (lambda plane: encode(_med_residuals(plane).tobytes()),
            lambda data, shape: _med_undo(np.frombuffer(decode(data), np.uint8).reshape(shape)))


def _image_coder(encode: Callable[[np.ndarray], bytes],
                 decode: Callable[[bytes], np.ndarray]) -> tuple[Callable, Callable]:
    return encode, lambda data, shape: decode(data)


def _jpegxl_coder(effort: int) -> tuple[Callable, Callable]:
    return _image_coder(lambda p: imagecodecs.jpegxl_encode(p, lossless=True, effort=effort, numthreads=1),
                        lambda d: imagecodecs.jpegxl_decode(d, numthreads=1))


CODERS: dict[str, tuple[Callable, Callable]] = {
    "zlib-6": _bytes_coder(lambda b: zlib.compress(b, 6), zlib.decompress),
    "zstd-19": _bytes_coder(lambda b: imagecodecs.zstd_encode(b, 19), imagecodecs.zstd_decode),
    "MED + zlib-6": _med_coder(lambda b: zlib.compress(b, 6), zlib.decompress),
    "MED + zstd-19": _med_coder(lambda b: imagecodecs.zstd_encode(b, 19), imagecodecs.zstd_decode),
    "PNG-9": _image_coder(lambda p: imagecodecs.png_encode(p, 9), imagecodecs.png_decode),
    "JPEG-LS (CharLS)": _image_coder(imagecodecs.jpegls_encode, imagecodecs.jpegls_decode),
    "JPEG XL lossless, effort 1": _jpegxl_coder(1),
    "JPEG XL lossless, effort 7": _jpegxl_coder(7),
}


def split_planes(planes: np.ndarray, height: int, width: int) -> list[np.ndarray]:
    """The Y, Cb and Cr planes of ``planes`` (``native.jpeg_decode_planes``'s layout)."""
    ch, cw = (height + 1) // 2, (width + 1) // 2
    y = planes[:height * width].reshape(height, width)
    cb = planes[height * width:height * width + ch * cw].reshape(ch, cw)
    cr = planes[height * width + ch * cw:height * width + 2 * ch * cw].reshape(ch, cw)
    return [y, cb, cr]


def random_resized_crop(rng: np.random.Generator, height: int, width: int) -> tuple[int, int, int, int]:
    """torchvision's RandomResizedCrop box (scale 0.08-1, ratio 3/4-4/3), as (y, x, h, w)."""
    for _ in range(10):
        area = height * width * rng.uniform(0.08, 1.0)
        ratio = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        w, h = round(math.sqrt(area * ratio)), round(math.sqrt(area / ratio))
        if 0 < w <= width and 0 < h <= height:
            return int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1)), h, w
    side = min(height, width)
    return (height - side) // 2, (width - side) // 2, side, side


def per_image_ms(work: Callable[[int], Any], count: int, rounds: int) -> list[float]:
    """Milliseconds per image of ``work(i)`` over ``count`` images, for each of ``rounds`` passes."""
    passes = []
    for _ in range(rounds):
        start = time.perf_counter()
        for i in range(count):
            work(i)
        passes.append((time.perf_counter() - start) * 1000 / count)
    return passes


def measure(folder: Path, images: int, size: int, rounds: int) -> dict[str, Any]:
    field = ss.RGBImageField(max_resolution=size, tile_width=None)
    jpegs, shapes, planes = [], [], []
    for path in find_jpegs(folder)[:images]:
        encoded = field.encode(str(path))
        jpeg = bytes(encoded.data)
        height, width = int(encoded.record["height"]), int(encoded.record["width"])
        jpegs.append(jpeg)
        shapes.append((height, width))
        planes.append(split_planes(native.jpeg_decode_planes(jpeg), height, width))
    count = len(jpegs)
    jpeg_bytes = sum(len(j) for j in jpegs)
    rng = np.random.default_rng(0)
    boxes = [random_resized_crop(rng, h, w) for h, w in shapes]
    flat = [np.concatenate([p.ravel() for p in image]) for image in planes]
    print(f"{count} images at {size} px: {jpeg_bytes / count / 1000:.1f} kB of JPEG, "
          f"{sum(f.size for f in flat) / count / 1000:.1f} kB of planes per image", flush=True)

    coded: dict[str, list[list[bytes]]] = {}
    for name, (encode, decode) in CODERS.items():
        coded[name] = [[encode(np.ascontiguousarray(p)) for p in image] for image in planes]
        for image, blobs in zip(planes, coded[name]):  # lossless, or it is not a candidate
            for plane, blob in zip(image, blobs):
                if not np.array_equal(np.asarray(decode(blob, plane.shape)).reshape(plane.shape), plane):
                    raise AssertionError(f"{name} does not give the planes back")
        print(f"  {name}: {sum(map(len, sum(coded[name], []))) / jpeg_bytes:.2f}x the JPEG bytes", flush=True)

    def jpeg_crop(i: int) -> None:
        native.jpeg_decode_crop_resize(jpegs[i], *boxes[i], OUT, OUT, interp=native.Interp.BILINEAR)

    def planes_crop(i: int) -> None:
        native.planes_crop_resize(flat[i], *shapes[i], *boxes[i], OUT, OUT, interp=native.Interp.BILINEAR)

    def decoder(name: str) -> Callable[[int], None]:
        decode = CODERS[name][1]
        return lambda i: [decode(blob, plane.shape) for blob, plane in zip(coded[name][i], planes[i])]

    times: dict[str, list[float]] = {"JPEG crop": [], "planes crop": [], **{name: [] for name in CODERS}}
    work = {"JPEG crop": jpeg_crop, "planes crop": planes_crop, **{name: decoder(name) for name in CODERS}}
    for r in range(rounds):  # interleaved: each round times everything once
        for name in (list(work) if r % 2 == 0 else list(work)[::-1]):
            times[name] += per_image_ms(work[name], count, 1)
    return {"folder": str(folder), "images": count, "size": size, "rounds": rounds, "jpeg_bytes": jpeg_bytes,
            "planes_bytes": int(sum(f.size for f in flat)),
            "coded_bytes": {name: int(sum(map(len, sum(blobs, [])))) for name, blobs in coded.items()},
            "ms_per_image": times}


def table(result: dict[str, Any]) -> str:
    jpeg, times = result["jpeg_bytes"], result["ms_per_image"]
    crop_jpeg, crop_planes = statistics.median(times["JPEG crop"]), statistics.median(times["planes crop"])
    rows = ["| stored as | bytes (x the JPEG) | decode, ms per image | decode + planes' crop, ms | "
            "against the JPEG crop |", "|---|---:|---:|---:|---:|",
            f"| JPEG (byte for byte) | 1.00x | – | {crop_jpeg:.3f} (the JPEG crop) | 1.00x |",
            f"| planes, uncompressed | {result['planes_bytes'] / jpeg:.2f}x | – | {crop_planes:.3f} | "
            f"{crop_jpeg / crop_planes:.2f}x faster |"]
    for name, size in result["coded_bytes"].items():
        decode = statistics.median(times[name])
        total = decode + crop_planes
        verdict = f"{crop_jpeg / total:.2f}x faster" if total < crop_jpeg else f"{total / crop_jpeg:.2f}x slower"
        rows.append(f"| planes, {name} | {size / jpeg:.2f}x | {decode:.3f} [{min(times[name]):.3f}-"
                    f"{max(times[name]):.3f}] | {total:.3f} | {verdict} |")
    return "\n".join(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER)
    parser.add_argument("--images", type=int, default=200)
    parser.add_argument("--size", type=int, default=256)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    result = measure(args.folder, args.images, args.size, args.rounds)
    print()
    print(table(result))
    print(f"\nwrote {record(result, 'lossless')}")


if __name__ == "__main__":
    main()
