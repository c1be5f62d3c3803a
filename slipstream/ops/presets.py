"""Ready-made loader pipelines for the common recipes.  Each returns the
``pipelines`` argument of :class:`slipstream.Loader`; combine it with your
own entries (``{**imagenet_train(), "caption": None}``)."""

from __future__ import annotations

from typing import Any

import numpy as np

from slipstream.loader.outputs import View
from slipstream.ops.augment import RandomHorizontalFlip
from slipstream.ops.crops import CenterCrop, RandomResizedCrop
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


multi_crop = multi_crop_pipelines
