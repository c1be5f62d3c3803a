"""Ready-made loader pipelines for the common recipes.  Each returns the
``pipelines`` argument of :class:`slipstream.Loader`; combine it with your
own entries (``{**imagenet_train(), "caption": None}``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from slipstream.loader.outputs import View
from slipstream.ops.augment import RandomHorizontalFlip
from slipstream.ops.crops import CenterCrop, RandomResizedCrop
from slipstream.ops.detection import BoundingBoxes, Count, InstanceMasks, KeptWithBoxes, RandomIoUCrop, SegmentationMask
from slipstream.ops.multicrop import multi_crop_pipelines
from slipstream.ops.pack import Normalize

IMAGENET_MEAN = (0.485, 0.456, 0.406)
IMAGENET_STD = (0.229, 0.224, 0.225)


def imagenet_train(size: int = 224, field: str = "image", dtype: Any = np.float16, mean: Any = IMAGENET_MEAN,
                   std: Any = IMAGENET_STD) -> dict[str, list[Any]]:
    """RandomResizedCrop(size), RandomHorizontalFlip(), normalize to
    (3, size, size) ``dtype``: one decode and one pack per sample."""
    return {field: [RandomResizedCrop(size), RandomHorizontalFlip(), Normalize(mean, std, dtype)]}


def imagenet_val(size: int = 224, ratio: float = 224 / 256, field: str = "image", dtype: Any = np.float16,
                 mean: Any = IMAGENET_MEAN, std: Any = IMAGENET_STD) -> dict[str, list[Any]]:
    """The central crop of ``ratio`` of the shorter side, at ``size``, normalized."""
    return {field: [CenterCrop(size, ratio=ratio), Normalize(mean, std, dtype)]}


def simclr(size: int = 224, field: str = "image", second: str = "view_2", dtype: Any = np.float16,
           mean: Any = IMAGENET_MEAN, std: Any = IMAGENET_STD) -> dict[str, Any]:
    """Two independently augmented views of each image, as outputs ``field``
    and ``second`` (a :class:`~slipstream.loader.outputs.View` of ``field``):
    RandomResizedCrop(size) and a flip each, normalized."""
    view = [RandomResizedCrop(size), RandomHorizontalFlip(), Normalize(mean, std, dtype)]
    return {field: list(view), second: View(field, list(view))}


def detection_train(size: int = 300, image: str = "image", boxes: str = "boxes", labels: str = "labels",
                    counts: str = "counts", masks: str | None = None, per_box: tuple[str, ...] = (),
                    dtype: Any = np.float16, mean: Any = IMAGENET_MEAN, std: Any = IMAGENET_STD) -> dict[str, Any]:
    """SSD's training augmentation: a random crop with a minimum IoU against
    the boxes (:class:`~slipstream.ops.detection.RandomIoUCrop`), a
    horizontal flip, resized to ``size`` x ``size`` and normalized to
    (3, size, size) ``dtype``; the boxes follow (XYXY, the boxes whose
    centre the crop left out dropped together with their labels), padded to
    the dataset's most boxes per image, with their number in ``counts``.
    With ``masks``, that field's instance masks follow too, and so do the
    rows of the fields ``per_box`` names (crowd flags, areas)."""
    pipelines: dict[str, Any] = {
        image: [RandomIoUCrop(size, boxes=boxes), RandomHorizontalFlip(), Normalize(mean, std, dtype)],
        boxes: [BoundingBoxes(follow=image, center_inside=True)],
        labels: [KeptWithBoxes(boxes)],
        counts: [Count(boxes)],
    }
    if masks is not None:
        pipelines[masks] = [InstanceMasks(follow=image, boxes=boxes)]
    for field in per_box:
        pipelines[field] = [KeptWithBoxes(boxes)]
    return pipelines


def segmentation_train(size: int = 512, scale: tuple[float, float] = (0.25, 1.0), image: str = "image",
                       mask: str = "mask", fill: int | None = None, dtype: Any = np.float16, mean: Any = IMAGENET_MEAN,
                       std: Any = IMAGENET_STD) -> dict[str, list[Any]]:
    """A random crop of ``scale`` of the image's area (aspect ratio 3/4 to
    4/3) resized to ``size``, a horizontal flip, normalized; the mask
    follows on the same pixels (nearest neighbour, ``fill`` outside the
    image: see :class:`~slipstream.ops.detection.SegmentationMask`)."""
    return {image: [RandomResizedCrop(size, scale=scale), RandomHorizontalFlip(), Normalize(mean, std, dtype)],
            mask: [SegmentationMask(follow=image, fill=fill)]}


multi_crop = multi_crop_pipelines
