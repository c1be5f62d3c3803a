"""The torch parts of the ``recipe`` scenario for the peers without them:
RandomErasing on one normalized image and MixUp or CutMix on a batch, as
``torchvision.transforms.v2`` defines them (``RandomErasing``, ``MixUp``,
``CutMix``, and the reference recipe's ``RandomChoice([MixUp, CutMix])`` in
``references/classification/train.py``).  torch and the standard library
only: imported from the peers' own environments, which hold no torchvision.
"""

from __future__ import annotations

import math
import random

import torch

ERASE_SCALE = (0.02, 0.33)
ERASE_RATIO = (0.3, 3.3)


def random_erasing(image: torch.Tensor, p: float = 0.1) -> torch.Tensor:
    """With probability ``p`` zero one rectangle of a (C, H, W) image, in
    place: area uniform in 2-33% of the image, aspect ratio log-uniform in
    (0.3, 3.3), up to 10 draws for one that fits (none fits: unchanged);
    zero is torchvision's default fill, the mean after Normalize."""
    if random.random() >= p:
        return image
    height, width = image.shape[-2:]
    low, high = math.log(ERASE_RATIO[0]), math.log(ERASE_RATIO[1])
    for _ in range(10):
        area = height * width * random.uniform(*ERASE_SCALE)
        aspect = math.exp(random.uniform(low, high))
        h, w = round(math.sqrt(area * aspect)), round(math.sqrt(area / aspect))
        if h < height and w < width:
            top, left = random.randint(0, height - h), random.randint(0, width - w)
            image[..., top:top + h, left:left + w] = 0
            return image
    return image


def mix_batch(images: torch.Tensor, labels: torch.Tensor, num_classes: int, mixup_alpha: float = 0.2,
              cutmix_alpha: float = 1.0) -> tuple[torch.Tensor, torch.Tensor]:
    """One batch mixed by MixUp(``mixup_alpha``) or CutMix(``cutmix_alpha``),
    the two chosen with equal probability: each image with the batch's
    previous one (``roll(1, 0)``), the labels one-hot and mixed by the same
    weight (CutMix's: the share of the image left uncovered)."""
    one_hot = torch.nn.functional.one_hot(labels.reshape(-1).long(), num_classes).to(images.dtype)
    rolled = images.roll(1, 0)
    if random.random() < 0.5:
        lam = float(torch.distributions.Beta(mixup_alpha, mixup_alpha).sample(()))
        mixed = rolled.mul_(1.0 - lam).add_(images.mul(lam))
    else:
        lam = float(torch.distributions.Beta(cutmix_alpha, cutmix_alpha).sample(()))
        height, width = images.shape[-2:]
        cx, cy = random.randrange(width), random.randrange(height)
        half = 0.5 * math.sqrt(1.0 - lam)
        half_w, half_h = int(half * width), int(half * height)
        x0, x1 = max(cx - half_w, 0), min(cx + half_w, width)
        y0, y1 = max(cy - half_h, 0), min(cy + half_h, height)
        mixed = images.clone()
        mixed[..., y0:y1, x0:x1] = rolled[..., y0:y1, x0:x1]
        lam = 1.0 - (x1 - x0) * (y1 - y0) / (width * height)
    return mixed, one_hot.roll(1, 0).mul_(1.0 - lam).add_(one_hot.mul(lam))
