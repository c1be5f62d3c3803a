"""The determinism guard: SHA-256 hashes of the first batches of a fixed
generated dataset, for a fixed set of seeds, orders and pipelines, against
the committed table tests/fixtures/determinism.json.

Any change to the random streams, the sampling of crops, the resampling
filters or the order of samples changes a hash and fails here, so that it
is made on purpose: regenerate the table with

    python tests/test_determinism.py --update

and say in the change why the batches differ.

The images are stored raw (generated pixels, no JPEG codec), so the hashes
do not depend on the libjpeg-turbo version; one JPEG case covers the
decoder and is keyed by libjpeg-turbo's version.  uint8 outputs are hashed
bit for bit; float outputs (normalized images, soft labels) are rounded to
4 decimals first, because the last bits of a float result may depend on
the CPU's vector width (fused multiply-add).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

HERE = Path(__file__).resolve().parent
TABLE = HERE / "fixtures" / "determinism.json"
BATCHES = 2  # first batches of epoch 0; plus the first batch of epoch 1


def picture(index: int) -> np.ndarray:
    """A textured image made with integer arithmetic only (no random
    generator whose stream a NumPy release could change): gradients, and a
    multiplicative hash as noise."""
    height, width = 48 + 8 * (index % 3), 64 - 8 * (index % 2)
    y, x, c = np.ogrid[0:height, 0:width, 0:3]
    noise = ((x * 7919 + y * 104729 + c * 13 + index * 31) * 2654435761 % 2**32) >> 26  # 0..63
    return ((x * (3 + c) + y * (5 - c) + index * 17 + noise) % 256).astype(np.uint8)


def dataset(folder: Path, raw: bool) -> Path:
    import slipstream as ss

    path = folder / ("raw.slip" if raw else "jpeg.slip")
    if not path.exists():
        field = ss.RGBImageField("raw" if raw else "jpeg", jpeg_quality=85)
        ss.write(path, [(picture(i), i % 6) for i in range(40)], {"image": field, "label": ss.IntField()},
                 page_size=4096, workers=0, verbose=False)
    return path


def cases() -> dict[str, dict[str, Any]]:
    """Name -> loader arguments (pipelines are built fresh for each use)."""
    from slipstream.ops import (
        CenterCrop,
        ColorJitter,
        Cutout,
        GaussianBlur,
        MixLabels,
        MixUp,
        Normalize,
        RandomErasing,
        RandomGrayscale,
        RandomHorizontalFlip,
        RandomResizedCrop,
        RandomSolarize,
        RandomTranslate,
        RandomVerticalFlip,
        presets,
    )

    import slipstream as ss

    mix = MixUp(0.4)
    return {
        "train uint8, random": dict(pipelines={"image": [RandomResizedCrop(32), RandomHorizontalFlip()]},
                                    order=ss.Order("random", seed=7)),
        "train float16, quasi_random": dict(pipelines=presets.imagenet_train(32),
                                            order=ss.Order("quasi_random", seed=8)),
        "val uint8, sequential": dict(pipelines={"image": [CenterCrop(32, ratio=0.875)]}, order="sequential"),
        "augmentations uint8": dict(pipelines={"image": [
            RandomResizedCrop(32), RandomVerticalFlip(), RandomTranslate(4), ColorJitter(0.4, 0.4, 0.4, 0.1),
            RandomGrayscale(0.3), RandomSolarize(100, 0.3), GaussianBlur(3), Cutout(8), RandomErasing(0.5)]},
            order=ss.Order("random", seed=9)),
        "simclr views": dict(pipelines=presets.simclr(24, dtype=np.float32), order=ss.Order("random", seed=10)),
        "multi-crop": dict(pipelines=presets.multi_crop(2, 32, (0.3, 1.0), 3, 16, (0.05, 0.3)),
                           order=ss.Order("random", seed=11)),
        "mixup soft labels": dict(pipelines={"image": [RandomResizedCrop(32), mix, Normalize(dtype=np.float32)],
                                             "label": [MixLabels(mix, num_classes=6)]},
                                  order=ss.Order("random", seed=12)),
        "random, rank 1 of 2": dict(pipelines={"image": [RandomResizedCrop(32)]}, order=ss.Order("random", seed=13),
                                    sharding=ss.Sharding(distributed=True, rank=1, world_size=2)),
    }


def digest(value: Any) -> str:
    array = value.numpy() if hasattr(value, "numpy") else np.asarray(value)
    if array.dtype.kind == "f":
        array = np.round(array.astype(np.float64), 4) + 0.0  # + 0.0: -0.0 and 0.0 hash alike
    header = f"{array.dtype.str}{array.shape}".encode()
    return hashlib.sha256(header + np.ascontiguousarray(array).tobytes()).hexdigest()


def hashes(folder: Path) -> dict[str, list[dict[str, str]]]:
    """Case name -> per batch, output name -> hash."""
    import slipstream as ss
    from slipstream.ops import RandomResizedCrop

    table = {}
    raw = dataset(folder, raw=True)
    for name, kwargs in cases().items():
        with ss.Loader(raw, 8, as_dict=True, verbose=False, **kwargs) as loader:
            table[name] = _first_batches(loader)
    jpeg = dataset(folder, raw=False)
    with ss.Loader(jpeg, 8, {"image": [RandomResizedCrop(32)]}, order=ss.Order(seed=14), as_dict=True,
                   verbose=False) as loader:
        table[f"jpeg decode, libjpeg-turbo {libjpeg_version()}"] = _first_batches(loader)
    with ss.Loader(detection_dataset(folder), 8, detection_pipelines(), order=ss.Order("random", seed=15),
                   as_dict=True, verbose=False) as loader:
        table["detection: IoU crop, flip, boxes, labels, keypoints, instance masks"] = _first_batches(loader)
    return table


def detection_dataset(folder: Path) -> Path:
    """The pictures (raw) with 0 to 3 boxes each, a label and two keypoints
    per box, and each box's rectangle as its instance mask."""
    import slipstream as ss

    path = folder / "detection.slip"
    if not path.exists():
        samples = []
        for i in range(40):
            image = picture(i)
            height, width = image.shape[:2]
            boxes = np.array([[(7 * i + 5 * k) % (width // 2), (3 * i + 11 * k) % (height // 2),
                               width // 2 + (5 * i + k) % (width // 2), height // 2 + (i + 7 * k) % (height // 2)]
                              for k in range(i % 4)], np.float32).reshape(-1, 4)
            masks = np.zeros((len(boxes), height, width), np.uint8)
            for mask, (x1, y1, x2, y2) in zip(masks, boxes.astype(int)):
                mask[y1:y2, x1:x2] = 1
            points = np.stack([boxes[:, :2], boxes[:, 2:]], 1)
            points = np.concatenate([points, np.ones((len(boxes), 2, 1), np.float32)], -1)
            samples.append((image, boxes, np.arange(1, len(boxes) + 1), points, masks))
        fields = {"image": ss.RGBImageField("raw"), "boxes": ss.RaggedField(np.float32, (4,)),
                  "labels": ss.RaggedField(np.int64), "points": ss.RaggedField(np.float32, (2, 3)),
                  "masks": ss.InstanceMasksField()}
        ss.write(path, samples, fields, page_size=4096, workers=0, verbose=False)
    return path


def detection_pipelines() -> dict[str, Any]:
    from slipstream.ops import Keypoints, presets

    return {**presets.detection_train(32, masks="masks", dtype=np.float32),
            "points": [Keypoints(follow="image", boxes="boxes", flip_indices=(1, 0))]}


def _first_batches(loader: Any) -> list[dict[str, str]]:
    rows = []
    for k, batch in enumerate(loader):
        if k == BATCHES:
            break
        rows.append({name: digest(value) for name, value in batch.items()})
    batch = next(iter(loader))  # the epoch left early starts again: the first batch of epoch 0 once more
    assert {name: digest(value) for name, value in batch.items()} == rows[0]
    for _ in loader:
        pass
    rows.append({name: digest(value) for name, value in next(iter(loader)).items()})  # epoch 1
    return rows


def libjpeg_version() -> str:
    """The installed libjpeg-turbo's version, from pkg-config."""
    import subprocess

    try:
        return subprocess.run(["pkg-config", "--modversion", "libjpeg"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def test_first_batches_match_the_committed_hashes(tmp_path):
    committed = json.loads(TABLE.read_text())
    now = hashes(tmp_path)
    for name, rows in now.items():
        if name.startswith("jpeg decode") and name not in committed:
            continue  # another libjpeg-turbo than the table's: the raw cases still guard the pipelines
        assert name in committed, f"new case {name!r}: run python tests/test_determinism.py --update"
        assert rows == committed[name], (f"the batches of {name!r} changed; if on purpose, run "
                                         f"python tests/test_determinism.py --update and say why in the change")
    assert sum(name in committed for name in now) >= len(cases())


def test_the_hashes_do_not_depend_on_the_thread_count(tmp_path):
    import numba

    import slipstream as ss

    name = "augmentations uint8"
    raw = dataset(tmp_path, raw=True)
    results = []
    for threads in (1, numba.config.NUMBA_NUM_THREADS):
        with ss.Loader(raw, 8, as_dict=True, verbose=False, num_threads=threads, **cases()[name]) as loader:
            results.append(_first_batches(loader))
    assert results[0] == results[1] == json.loads(TABLE.read_text())[name]


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python tests/test_determinism.py --update")
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        table = hashes(Path(tmp))
    old = json.loads(TABLE.read_text()) if TABLE.exists() else {}
    TABLE.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    changed = sorted(name for name in table if table[name] != old.get(name))
    print(f"wrote {TABLE}: {len(table)} cases; changed: {', '.join(changed) or 'none'}")
