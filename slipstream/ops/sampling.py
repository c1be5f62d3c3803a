"""Random parameter sampling of the crop operations.

Follows torchvision's semantics so that pipelines ported from torchvision
see the same distribution of crops.
"""

from __future__ import annotations

import math

import numpy as np


def random_resized_crop_params(
    rng: np.random.Generator,
    height: int,
    width: int,
    scale: tuple[float, float] = (0.08, 1.0),
    ratio: tuple[float, float] = (3 / 4, 4 / 3),
    attempts: int = 10,
) -> tuple[int, int, int, int]:
    """Sample the crop of ``RandomResizedCrop`` for a height x width image.

    Up to ``attempts`` times: draw an area fraction uniformly from ``scale``
    and an aspect ratio log-uniformly from ``ratio``; accept the first crop
    that fits, at a uniformly random position.  Otherwise fall back to the
    largest central crop whose aspect ratio lies within ``ratio``.

    Returns:
        ``(top, left, crop_height, crop_width)`` in pixels.
    """
    area = height * width
    log_lo, log_hi = math.log(ratio[0]), math.log(ratio[1])
    for _ in range(attempts):
        target_area = area * rng.uniform(scale[0], scale[1])
        aspect = math.exp(rng.uniform(log_lo, log_hi))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            top = int(rng.integers(0, height - h + 1))
            left = int(rng.integers(0, width - w + 1))
            return top, left, h, w
    in_ratio = width / height
    if in_ratio < min(ratio):
        w, h = width, int(round(width / min(ratio)))
    elif in_ratio > max(ratio):
        h, w = height, int(round(height * max(ratio)))
    else:
        h, w = height, width
    h, w = max(1, min(h, height)), max(1, min(w, width))
    return (height - h) // 2, (width - w) // 2, h, w
