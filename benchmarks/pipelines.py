"""Training pipelines through the loader, in images/s.

Usage::

    python benchmarks/pipelines.py [FOLDER] [--repeat N] [--epochs E] [--json PATH] [--check]

The dataset is FOLDER's JPEGs (default ``../shared/data/imagenet-sample``,
800 ImageNet photos) repeated ``--repeat`` times (default 2), stored byte for
byte and written once through ``slipstream.cached``.  Every scenario runs one
warm-up epoch (compilation included), then ``--epochs`` timed epochs; the
table shows the best epoch's images/s.  Batch 128, all cores, the page cache
warm, labels loaded too: what a training step receives.

Scenarios:

``full decode``
    every image decoded whole, at full resolution (into per-thread memory
    that never leaves the loop): the yardstick for the fused crops.
``decode to 224x224``
    ``Resize((224, 224))``: the whole image decoded and resized, uint8.
``ImageNet train``
    ``RandomResizedCrop(224)``, ``RandomHorizontalFlip()``, ``Normalize`` to
    float16 NCHW: one fused decode per image.
``ImageNet val``
    ``CenterCrop(224, ratio=224/256)``, ``Normalize`` to float16.
``SimCLR, 2 views``
    two independent RandomResizedCrop + flip + Normalize views.
``multi-crop, one decode`` / ``multi-crop, per crop``
    2 x 224 + 6 x 96 crops (flip, Normalize each): decoded once for all
    crops, against each crop decoding its own region.
``train 176`` / ``torchvision recipe 176``
    ``RandomResizedCrop(176)``, flip, ``Normalize`` to float32, against
    torchvision's reference recipe at the same size
    (``presets.torchvision_train(176)``: TrivialAugmentWide, RandomErasing
    0.1, MixUp or CutMix per batch with soft labels).

Besides images/s, the CPU time per image of the best epoch (all threads).
Expectations checked: ImageNet train at least 1.3x the full-decode rate;
the recipe at most 1.3x the CPU time per image of ``train 176``.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import platform
import shlex
import sys
import time
from datetime import datetime
from pathlib import Path
from typing import Any, ClassVar

import numba
import numpy as np

import slipstream as ss
from slipstream import native
from slipstream.compiler import Allocation, Decoder, State
from slipstream.compiler.rewrites import FieldOperation
from slipstream.ops import (Normalize, RandomHorizontalFlip, RandomResizedCrop, Resize, multi_crop_pipelines,
                            presets)
from slipstream.sources import find_jpegs
from common import Repeated, write_json  # noqa: E402  (benchmarks/, next to this file)

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_FOLDER = REPO_ROOT.parent / "shared" / "data" / "imagenet-sample"
BATCH = 128
TRAIN_OVER_FULL_DECODE = 1.3


@dataclasses.dataclass(frozen=True, eq=False)
class _FullDecoder(Decoder):
    """Every image decoded whole at full resolution into a buffer of the
    dataset's largest size (kept per thread: nothing is copied out)."""

    source: Any = dataclasses.field(repr=False)
    field: str
    can_fail: ClassVar[bool] = True

    def inputs(self):
        return self.source.image_inputs(self.field)

    def declare(self, state):
        records = self.source.reader.metadata[self.field]
        shape = (int(records["height"].max()), int(records["width"].max()), 3)
        return State(shape=shape, dtype=np.uint8), Allocation(shape, np.uint8)

    def generate_code(self):
        decode = native.slip_jpeg_decode

        def full(storage, offsets, sizes, heights, widths, modes, known, decodes, index, out, status, key):
            data = storage[offsets[index]:offsets[index] + sizes[index]]
            status[0] = decode(data, data.size, 0, 0, heights[index], widths[index], 1, 0, out, out.size,
                               out.strides[0])
            decodes[index] += 1
            return out

        return full


@dataclasses.dataclass(frozen=True)
class FullDecode(FieldOperation):
    """Decode the image field's images whole (the first entry of its pipeline)."""

    def bind(self, source: Any, field: str) -> _FullDecoder:
        return _FullDecoder(source, field)


def per_crop_pipelines() -> dict[str, Any]:
    """The multi-crop outputs, each crop decoding its own region."""
    normalize = Normalize(presets.IMAGENET_MEAN, presets.IMAGENET_STD, np.float16)
    pipelines = {f"global_{k}": ss.View("image", [RandomResizedCrop(224, scale=(0.4, 1.0)), RandomHorizontalFlip(),
                                                   normalize]) for k in range(2)}
    pipelines.update({f"local_{k}": ss.View("image", [RandomResizedCrop(96, scale=(0.05, 0.4)), RandomHorizontalFlip(),
                                                       normalize]) for k in range(6)})
    return pipelines


SCENARIOS = {
    "full decode": {"_full": ss.View("image", [FullDecode()])},
    "decode to 224x224": {"image": [Resize((224, 224))]},
    "ImageNet train": presets.imagenet_train(224),
    "ImageNet val": presets.imagenet_val(224),
    "SimCLR, 2 views": presets.simclr(224),
    "multi-crop, one decode": multi_crop_pipelines(),
    "multi-crop, per crop": per_crop_pipelines(),
    "train 176": {"image": [RandomResizedCrop(176), RandomHorizontalFlip(),
                            Normalize(presets.IMAGENET_MEAN, presets.IMAGENET_STD, np.float32)]},
    # Its soft labels have one class per image: the images are labelled with their index.
    "torchvision recipe 176": lambda reader: presets.torchvision_train(176, num_classes=len(reader)),
}
RECIPE_OVER_TRAIN_CPU = 1.3


def measure(reader: ss.Reader, pipelines: dict[str, list[Any]], epochs: int) -> tuple[float, float]:
    """The best epoch's images/s and its CPU milliseconds per image."""
    loader = ss.Loader(reader, BATCH, pipelines, order=ss.Order("random", seed=0))
    for _ in loader:  # warm-up: compilation, page cache
        pass
    best, cpu_ms = 0.0, 0.0
    for _ in range(epochs):
        start, cpu = time.perf_counter(), time.process_time()
        count = 0
        for batch in loader:
            count += len(batch[-1])  # the labels
        rate = count / (time.perf_counter() - start)
        if rate > best:
            best, cpu_ms = rate, 1e3 * (time.process_time() - cpu) / count
    loader.close()
    return best, cpu_ms


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", nargs="?", type=Path, default=DEFAULT_FOLDER, help="folder of JPEGs")
    parser.add_argument("--repeat", type=int, default=2, help="times the folder is repeated (default: 2)")
    parser.add_argument("--epochs", type=int, default=2, help="timed epochs per scenario (default: 2)")
    parser.add_argument("--only", nargs="*", default=None, help="run only these scenarios")
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    parser.add_argument("--check", action="store_true", help="exit 1 when the expectation is missed")
    args = parser.parse_args(argv)
    paths = find_jpegs(args.folder)
    if not paths:
        print(f"no JPEGs under {args.folder}")
        return 1
    fields = {"image": ss.RGBImageField(), "label": ss.IntField()}
    path = ss.cached(Repeated(paths, args.repeat), fields, name=f"pipelines-{args.folder.name}-x{args.repeat}",
                     version=2)
    reader = ss.Reader(path)
    rates, cpu_ms = {}, {}
    for name, pipelines in SCENARIOS.items():
        if args.only and name not in args.only:
            continue
        if callable(pipelines):
            pipelines = pipelines(reader)
        rates[name], cpu_ms[name] = measure(reader, {"label": [], **pipelines}, args.epochs)
        print(f"  {name}: {rates[name]:,.0f} images/s, {cpu_ms[name]:.2f} CPU ms/image", flush=True)

    print(f"{len(reader):,} JPEGs from {args.folder}, batch {BATCH}, {numba.config.NUMBA_NUM_THREADS} threads")
    print(f"{'scenario':<26} {'images/s':>10} {'CPU ms/image':>13}")
    for name, rate in rates.items():
        print(f"{name:<26} {rate:>10,.0f} {cpu_ms[name]:>13.2f}")
    ratios = {}
    if "torchvision recipe 176" in cpu_ms and "train 176" in cpu_ms:
        ratios["recipe_cpu_over_train_176"] = cpu_ms["torchvision recipe 176"] / cpu_ms["train 176"]
    if "ImageNet train" in rates and "full decode" in rates:
        ratios["imagenet_train_over_full_decode"] = rates["ImageNet train"] / rates["full decode"]
    if "multi-crop, one decode" in rates and "multi-crop, per crop" in rates:
        ratios["multi_crop_once_over_per_crop"] = rates["multi-crop, one decode"] / rates["multi-crop, per crop"]
    for name, value in ratios.items():
        print(f"{name}: {value:.2f}")
    met = ratios.get("imagenet_train_over_full_decode", TRAIN_OVER_FULL_DECODE) >= TRAIN_OVER_FULL_DECODE
    if not met:
        print(f"EXPECTATION FAILED: ImageNet train is {ratios['imagenet_train_over_full_decode']:.2f}x the full "
              f"decode rate, below {TRAIN_OVER_FULL_DECODE}x")
    if ratios.get("recipe_cpu_over_train_176", 0) > RECIPE_OVER_TRAIN_CPU:
        met = False
        print(f"EXPECTATION FAILED: the recipe costs {ratios['recipe_cpu_over_train_176']:.2f}x the CPU per image "
              f"of train 176, above {RECIPE_OVER_TRAIN_CPU}x")

    now = datetime.now().astimezone()
    out = args.json or REPO_ROOT / "benchmarks" / "results" / f"pipelines-{now.date().isoformat()}.json"
    report = {
        "dataset": {"path": str(path), "images": len(reader), "folder": str(args.folder)},
        "batch_size": BATCH, "threads": numba.config.NUMBA_NUM_THREADS, "images_per_s": rates,
        "cpu_ms_per_image": cpu_ms,
        "ratios": ratios,
        "expectations_met": met, "machine": {"platform": platform.platform(), "cpu_count": os.cpu_count()},
        "versions": {"python": platform.python_version(), "slipstream": ss.__version__,
                     "libslipstream": native.version(), "numba": numba.__version__},
        "command": shlex.join([sys.executable, *sys.argv]), "timestamp": now.isoformat(timespec="seconds"),
    }
    write_json(out, report)
    print(f"wrote {out}")
    return 1 if args.check and not met else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
