"""PyTorch DataLoader + Pillow detection runner (system ``dataloader``),
implementing the "Detection" section of ``benchmarks/peers/RUNNERS.md``.

Run with the DataLoader peer's interpreter (``bash
benchmarks/peers/install-dataloader.sh`` creates it)::

    benchmarks/.venvs/dataloader/bin/python benchmarks/peers/dataloader_detection_runner.py --spec SPEC.json

The SSD-style training pipeline a torchvision ``transforms.v2`` user writes
(``RandomIoUCrop``, ``RandomHorizontalFlip``, ``Resize``, ``Normalize``),
written out with Pillow, numpy and torch only, since this environment has
no torchvision:

* ``Image.open(path).convert('RGB')``; the boxes and labels come from the
  COCO instances file (``peer_common.read_coco``);
* :func:`iou_crop`: RandomIoUCrop's sampling: a minimum IoU drawn from
  {0, 0.1, 0.3, 0.5, 0.7, 0.9, no crop}, up to 40 trials of a window whose
  sides are ``int(side * U(0.3, 1))`` with a width/height ratio in
  [0.5, 2], placed at ``int((side - crop) * U(0, 1))``, valid when some box
  has its centre strictly inside it and, among those boxes, one has an IoU
  of at least the option with it; after 40 failed trials a new option is
  drawn.  Boxes whose centres are outside are dropped with their labels,
  the others are shifted and clipped to the window;
* crop and resize to ``size`` x ``size`` in one Pillow ``resize(BILINEAR,
  box=window)``, boxes scaled with it;
* horizontal flip with p = 0.5, of the image and of the boxes;
* ImageNet mean/std into float16 CHW (numpy, then ``torch.from_numpy``:
  ``dataloader_runner.normalize``, as in the classification scenarios);
* :class:`PadCollate` stacks the images and pads the boxes to
  ``(B, max_boxes, 4)`` float32 and the labels to ``(B, max_boxes)`` int64
  (zeros past each image's count), with ``counts`` ``(B,)`` int64.

DataLoader: ``num_workers=threads``, ``pin_memory=False`` (CPU training),
``persistent_workers=True``, ``prefetch_factor`` default, ``shuffle=True``,
``drop_last=False``, ``worker_init_fn`` = ``torch.set_num_threads(1)``.  The
random draws use Python's ``random``, which the DataLoader seeds in every
worker.  The timed loop only counts images (the length of ``counts``).
"""

import time

_T0 = time.monotonic()  # first statement: as RUNNERS.md asks

import os
import random
import sys
from importlib import metadata

import numpy as np
import torch

# dataloader_runner and peer_common live next to this file, on sys.path as the script's folder.
from dataloader_runner import normalize, shutdown_workers, worker_init
from peer_common import (
    detection_check,
    detection_spec,
    emit,
    live_children_hwm_mb,
    peak_rss_mb,
    read_coco,
    read_spec,
    timed_epochs,
)
from PIL import Image
from torch.utils.data import DataLoader, Dataset

SYSTEM = "dataloader"
BILINEAR = Image.Resampling.BILINEAR
IOU_OPTIONS = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, None)  # None: leave the image uncropped
SCALE = (0.3, 1.0)
ASPECT = (0.5, 2.0)
TRIALS = 40


# ---------------------------------------------------------------- transforms


def iou_crop(width: int, height: int, boxes: np.ndarray) -> tuple[tuple[int, int, int, int], np.ndarray] | None:
    """torchvision v2 ``RandomIoUCrop``'s window for a ``width`` x
    ``height`` image holding ``boxes`` (``(n, 4)`` XYXY): ``((left, top,
    right, bottom), keep)`` with ``keep`` the boxes whose centres lie
    strictly inside the window, or None when the drawn option is "no crop".

    Like torchvision, an image whose boxes can never satisfy an option keeps
    drawing options until "no crop" comes up, so this always returns."""
    cx = 0.5 * (boxes[:, 0] + boxes[:, 2])
    cy = 0.5 * (boxes[:, 1] + boxes[:, 3])
    areas = (boxes[:, 2] - boxes[:, 0]) * (boxes[:, 3] - boxes[:, 1])
    while True:
        min_iou = IOU_OPTIONS[random.randrange(len(IOU_OPTIONS))]
        if min_iou is None:
            return None
        for _ in range(TRIALS):
            new_w = int(width * random.uniform(*SCALE))
            new_h = int(height * random.uniform(*SCALE))
            if new_h == 0 or not ASPECT[0] <= new_w / new_h <= ASPECT[1]:
                continue
            left = int((width - new_w) * random.random())
            top = int((height - new_h) * random.random())
            right, bottom = left + new_w, top + new_h
            if left == right or top == bottom:
                continue
            keep = (left < cx) & (cx < right) & (top < cy) & (cy < bottom)
            if not keep.any():
                continue
            # As torchvision does, the IoU test only looks at the boxes that stay.
            inside = boxes[keep]
            iw = np.clip(np.minimum(inside[:, 2], right) - np.maximum(inside[:, 0], left), 0, None)
            ih = np.clip(np.minimum(inside[:, 3], bottom) - np.maximum(inside[:, 1], top), 0, None)
            overlap = iw * ih
            iou = overlap / (areas[keep] + new_w * new_h - overlap)
            if iou.max() < min_iou:
                continue
            return (left, top, right, bottom), keep


def transform(img: Image.Image, boxes: np.ndarray, labels: np.ndarray,
              size: int) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
    """IoU crop, resize to ``size`` x ``size``, flip with p = 0.5, normalize:
    the image as float16 CHW, the kept boxes (XYXY, output pixels) and labels."""
    width, height = img.size
    drawn = iou_crop(width, height, boxes)
    if drawn is None:
        window = (0, 0, width, height)
    else:
        window, keep = drawn
        boxes, labels = boxes[keep], labels[keep]
    left, top, right, bottom = window
    crop_w, crop_h = right - left, bottom - top
    boxes = boxes - np.array([left, top, left, top], np.float32)
    np.clip(boxes[:, 0::2], 0, crop_w, out=boxes[:, 0::2])
    np.clip(boxes[:, 1::2], 0, crop_h, out=boxes[:, 1::2])
    boxes *= np.array([size / crop_w, size / crop_h, size / crop_w, size / crop_h], np.float32)
    out = img.resize((size, size), BILINEAR, box=window)
    if random.random() < 0.5:
        out = out.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        boxes = np.stack([size - boxes[:, 2], boxes[:, 1], size - boxes[:, 0], boxes[:, 3]], axis=1)
    return normalize(out), boxes, labels


# ---------------------------------------------------------------- dataset


class CocoDetection(Dataset):
    """The images of a COCO instances file with their boxes (XYXY, float32)
    and labels (int64), through :func:`transform`."""

    def __init__(self, root: str, annotations: str, size: int) -> None:
        self.size = size
        self.samples = [
            (os.path.join(root, name), np.array(boxes, np.float32).reshape(-1, 4), np.array(labels, np.int64))
            for name, boxes, labels in read_coco(annotations)
        ]

    def __len__(self) -> int:
        return len(self.samples)

    def __getitem__(self, i: int) -> tuple[torch.Tensor, np.ndarray, np.ndarray]:
        path, boxes, labels = self.samples[i]
        with Image.open(path) as im:
            img = im.convert("RGB")
        return transform(img, boxes, labels, self.size)


class PadCollate:
    """Stacks the images and pads every sample's boxes and labels to
    ``max_boxes`` rows (zeros past its count): ``(images, boxes, labels,
    counts)``.  A class rather than a closure, so that it pickles for
    workers started with spawn."""

    def __init__(self, max_boxes: int) -> None:
        self.max_boxes = max_boxes

    def __call__(self, samples: list[tuple[torch.Tensor, np.ndarray, np.ndarray]]):
        n = len(samples)
        images = torch.stack([image for image, _, _ in samples])
        boxes = torch.zeros((n, self.max_boxes, 4), dtype=torch.float32)
        labels = torch.zeros((n, self.max_boxes), dtype=torch.int64)
        counts = torch.empty(n, dtype=torch.int64)
        for i, (_, b, lab) in enumerate(samples):
            k = len(lab)
            boxes[i, :k] = torch.from_numpy(b)
            labels[i, :k] = torch.from_numpy(lab)
            counts[i] = k
        return images, boxes, labels, counts


# ---------------------------------------------------------------- main


def main(argv: list[str]) -> int:
    spec = detection_spec(read_spec(argv, "PyTorch DataLoader + Pillow detection runner (see RUNNERS.md)", _T0))
    version = f"torch {torch.__version__}, pillow {metadata.version('pillow')}, numpy {np.__version__}"
    base = {"system": SYSTEM, "version": version, "scenario": "detection"}
    batch_size, threads, size = spec["batch_size"], spec["threads"], spec["size"]

    dataset = CocoDetection(spec["images"], spec["annotations"], size)
    settings = {
        "data": spec["images"],
        "annotations": spec["annotations"],
        "order": "shuffle=True (RandomSampler)",
        "num_workers": threads,
        "batch_size": batch_size,
        "drop_last": False,
        "pin_memory": False,
        "persistent_workers": threads > 0,
        "prefetch_factor": 2,
        "worker_torch_threads": 1,
        "multiprocessing_start_method": torch.multiprocessing.get_start_method(),
        "decoder": "PIL Image.open(path).convert('RGB') (full image)",
        "crop": f"RandomIoUCrop semantics (options {list(IOU_OPTIONS)}, scale {SCALE}, aspect {ASPECT}, "
                f"{TRIALS} trials), Python random",
        "resize": f"Pillow BILINEAR to {size}x{size} (Image.resize with box= the crop window)",
        "flip": "p=0.5, image and boxes",
        "output": f"image float16 (B, 3, {size}, {size}); boxes float32 (B, {spec['max_boxes']}, 4) XYXY output "
                  f"pixels; labels int64 (B, {spec['max_boxes']}); counts int64 (B,) (PadCollate in the workers)",
        "cpu_accounting": "getrusage SELF+CHILDREN + utime/stime of live worker processes from /proc",
        "peak_rss": "ru_maxrss SELF + ru_maxrss CHILDREN (largest worker, read after the workers exit)",
    }
    loader = DataLoader(
        dataset,
        batch_size=batch_size,
        shuffle=True,
        num_workers=threads,
        collate_fn=PadCollate(spec["max_boxes"]),
        pin_memory=False,
        drop_last=False,
        persistent_workers=threads > 0,
        worker_init_fn=worker_init if threads > 0 else None,
    )

    if spec["check"]:
        check = detection_check(loader, lambda batch: batch, size, spec["check_epochs"])
        shutdown_workers(loader)
        emit({**base, "check": check, "settings": settings})
        return 0

    measured = timed_epochs(loader, lambda batch: len(batch[3]), spec["warmup_epochs"], spec["epochs"])
    settings["workers_peak_rss_sum_mb"] = live_children_hwm_mb()
    shutdown_workers(loader)
    emit({**base, **measured, "peak_rss_mb": peak_rss_mb(), "settings": settings})
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
