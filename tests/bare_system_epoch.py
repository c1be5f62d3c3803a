"""What a user of the wheel does first, run by tests/test_wheel_debootstrap.py
with the interpreter of a bare system's virtual environment: generate a few
JPEGs in two class folders, ``ss.write`` them into a dataset, stream one epoch
of the ImageNet-train preset, and print one JSON line describing what came
out.  It imports only what installing the wheel installed (it runs where the
repository is not), and asserts what the test cannot see from outside."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
from PIL import Image

import slipstream as ss
from slipstream.ops import presets

PER_CLASS = 5
BATCH = 4
SIZE = 224


def main(folder: Path) -> None:
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        (folder / "images" / name).mkdir(parents=True)
        for index in range(PER_CLASS):
            # Random sizes, some smaller than the crop, so that the crop both shrinks and enlarges.
            height, width = (int(side) for side in rng.integers(120, 400, size=2))
            pixels = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
            Image.fromarray(pixels).save(folder / "images" / name / f"{index}.jpg", quality=90)
    dataset = folder / "train.slip"
    ss.write(dataset, folder / "images", verbose=False)
    loader = ss.Loader(dataset, batch_size=BATCH, pipelines=presets.imagenet_train(SIZE))
    shapes, labels = [], []
    for images, batch_labels in loader:
        assert images.dtype == torch.float16, images.dtype
        assert batch_labels.dtype == torch.int64, batch_labels.dtype
        assert torch.isfinite(images).all(), "the epoch produced non-finite pixels"
        shapes.append(list(images.shape))
        labels += batch_labels.tolist()
    # The libslipstream this process mapped, as the loader found it: the wheel's, not one built elsewhere.
    mapped = sorted({line.split()[-1] for line in Path("/proc/self/maps").read_text().splitlines()
                     if line.rstrip().endswith("libslipstream.so")})
    print(json.dumps({"package": ss.__file__, "library": mapped, "shapes": shapes, "labels": sorted(labels)}))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
