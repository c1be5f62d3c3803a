"""How long a recipe's first batch takes: with empty compile caches, warm,
and after a value of the recipe changed.

Usage::

    python benchmarks/compile.py [--rounds 3] [--recipes imagenet_train ...] [--json PATH]

Each measurement is a fresh interpreter that builds a
:class:`slipstream.Loader` with one of the presets over a small generated
dataset and takes its first batch; it reports the seconds from
``Loader(...)`` to the batch in hand (imports not counted).  Per recipe and
round, in this order:

``cold``
    empty compile caches (slipstream's stage cache and Numba's cache of the
    library's functions, both in a fresh folder of their own);
``warm``
    the same recipe again, the caches as the cold run left them;
``value``
    the recipe with one value changed (a probability, a magnitude, a mixing
    alpha, a crop size within its ``max_size``), the caches warm.

The table gives medians and ranges over the rounds, the cold compile
(``cold - warm``) and the value change as a ratio to ``warm``.  The recipes
run interleaved, round after round.  2-core timings drift by 10-40% from
run to run: compare figures of one run.  Writes
``benchmarks/results/compile-<date>.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import textwrap
from pathlib import Path

from common import record, seconds_printed, summary  # noqa: E402  (benchmarks/, next to this file)

RECIPES: dict[str, tuple[str, str]] = {
    # name: (the pipelines, the same with a value changed); DATA: the dataset, CLASSES: its number of classes
    "imagenet_train": ("presets.imagenet_train(224)",
                       "{'image': [RandomResizedCrop(224, scale=(0.35, 1.0)), RandomHorizontalFlip(0.3), "
                       "Normalize(presets.IMAGENET_MEAN, presets.IMAGENET_STD, np.float16)]}"),
    "imagenet_val": ("presets.imagenet_val(224)", "presets.imagenet_val(224, ratio=0.9)"),
    "multi_crop": ("presets.multi_crop()", "presets.multi_crop(global_scale=(0.3, 1.0), flip=0.3)"),
    "detection_train": ("presets.detection_train(300)",
                        "{**presets.detection_train(300), 'image': [RandomIoUCrop(300, min_scale=0.5), "
                        "RandomHorizontalFlip(0.3), Normalize(presets.IMAGENET_MEAN, presets.IMAGENET_STD, "
                        "np.float16)]}"),
    "torchvision_train": ("presets.torchvision_train(num_classes=CLASSES)",
                          "presets.torchvision_train(num_classes=CLASSES, random_erase=0.2, mixup_alpha=0.5)"),
    "timm_train": ("presets.timm_train()", "presets.timm_train('rand-m7-mstd0.5-inc1', hflip=0.3)"),
    "deit_train": ("presets.deit_train(num_classes=CLASSES)",
                   "presets.timm_train('rand-m9-mstd0.5-inc1', interpolation='bicubic', re_prob=0.4, mixup=0.6, "
                   "cutmix=1.0, num_classes=CLASSES)"),
}
"""Each recipe, and the same with values changed (no structure: the changed pipeline compiles nothing)."""

SNIPPET = """
import time, sys
import numpy as np
import slipstream as ss
from slipstream.ops import presets, RandomResizedCrop, RandomHorizontalFlip, Normalize, RandomIoUCrop
DATA, CLASSES = {data!r}, {classes}
start = time.monotonic()
loader = ss.Loader(DATA, 64, {pipelines}, order=ss.Order("random", seed=0))
batch = next(iter(loader))
print(time.monotonic() - start)
loader.close()
"""


def write_data(folder: Path) -> tuple[Path, Path, int]:
    """A classification dataset (256 synthetic JPEGs of 375 x 500, 6
    classes) and a detection one (the same images with 1 to 8 random boxes
    each)."""
    import io

    import numpy as np
    from PIL import Image

    import slipstream as ss
    from slipstream.sources import CLASSES, synthetic_image

    rng = np.random.default_rng(0)
    images, labels, boxes = [], [], []
    for k in range(256):
        encoded = io.BytesIO()
        Image.fromarray(synthetic_image(CLASSES[k % len(CLASSES)], rng, 375, 500)).save(encoded, "JPEG", quality=90)
        images.append(encoded.getvalue())
        labels.append(k % len(CLASSES))
        n = int(rng.integers(1, 9))
        corner = rng.uniform([0, 0], [400, 300], (n, 2))
        boxes.append(np.concatenate([corner, corner + rng.uniform(20, 100, (n, 2))], 1).astype(np.float32))
    classification, detection = folder / "classes.slip", folder / "boxes.slip"
    ss.write(classification, list(zip(images, labels)), {"image": ss.RGBImageField(), "label": ss.IntField()},
             verbose=False)
    ss.write(detection, [(image, box, rng.integers(0, 80, len(box))) for image, box in zip(images, boxes)],
             {"image": ss.RGBImageField(), "boxes": ss.RaggedField(np.float32, (4,)),
              "labels": ss.RaggedField(np.int64)}, verbose=False)
    return classification, detection, len(CLASSES)


def first_batch(pipelines: str, data: Path, classes: int, caches: Path) -> float:
    """Seconds from ``Loader(...)`` to the first batch, in a fresh interpreter with the compile caches ``caches``."""
    script = textwrap.dedent(SNIPPET).format(data=str(data), classes=classes, pipelines=pipelines)
    env = {**os.environ, "SLIPSTREAM_COMPILE_CACHE_DIR": str(caches / "stages"),
           "NUMBA_CACHE_DIR": str(caches / "numba")}
    return seconds_printed(script, env, caches, f"the recipe {pipelines}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="interleaved rounds (default 3)")
    parser.add_argument("--recipes", nargs="+", choices=sorted(RECIPES), default=list(RECIPES))
    parser.add_argument("--json", type=Path, default=None, help="output JSON (default: benchmarks/results/)")
    args = parser.parse_args(argv)
    times = {name: {"cold": [], "warm": [], "value": []} for name in args.recipes}
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        classification, detection, classes = write_data(folder)
        for r in range(args.rounds):
            for name in args.recipes:
                pipelines, changed = RECIPES[name]
                data = detection if name == "detection_train" else classification
                caches = folder / f"caches-{name}-{r}"
                caches.mkdir()
                for kind, spec in (("cold", pipelines), ("warm", pipelines), ("value", changed)):
                    times[name][kind].append(first_batch(spec, data, classes, caches))
                print(f"round {r + 1}: {name}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times[name].items()),
                      flush=True)
    print(f"\n{'recipe':18} {'cold s':>20} {'warm s':>20} {'value change s':>20} {'compile s':>10} {'value/warm':>10}")
    report: dict[str, object] = {"rounds": args.rounds, "seconds": times, "recipes": {}}
    for name, kinds in times.items():
        cold, warm, value = (statistics.median(kinds[k]) for k in ("cold", "warm", "value"))
        report["recipes"][name] = {"cold_s": cold, "warm_s": warm, "value_s": value, "compile_s": cold - warm,
                                   "value_over_warm": value / warm}
        print(f"{name:18} {summary(kinds['cold'], 2):>20} {summary(kinds['warm'], 2):>20} "
              f"{summary(kinds['value'], 2):>20} {cold - warm:>10.2f} {value / warm:>10.2f}")
    print(f"wrote {record(report, 'compile', args.json)}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
