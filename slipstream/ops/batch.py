"""Batch augmentations in torch, for after ``ToDevice``: each works on a
whole (batch, channels, height, width) float batch in [0, 1] (uint8 batches
are scaled in and out) on any device, in a few vectorized calls, with
per-image random parameters.

Every one of them separates drawing from applying, so that two views can
share an augmentation or mirror it::

    jitter = BatchColorJitter(0.4, 0.4, 0.4, 0.1)
    params = jitter.sample(view_1)              # per-image parameters
    view_1 = jitter.apply(view_1, params)
    view_2 = jitter.apply(view_2, params)       # the same jitter on the other view

``forward(x)`` is ``apply(x, sample(x))``, so each is a ``torch.nn.Module``
that pipelines take as a torch-side operation.

In a pipeline, the draws come from the loader's counter-based random keys
(each is a :class:`~slipstream.compiler.TakesKeys`): they depend on the
seed, the epoch and the batch's samples only, so a loader resumed from
``state_dict()`` repeats them exactly, like those of the compiled
operations.  Outside a pipeline, ``sample(x)`` draws from ``generator`` (a
``torch.Generator`` on the batch's device), or from torch's global generator.

The geometric ones are written in :mod:`slipstream.ops.batch_warps`, those
that change values in place (torchvision's tone operations with Pillow's
arithmetic, colour spaces, masks) in :mod:`slipstream.ops.batch_tones`, on
the base of :mod:`slipstream.ops.batch_base`; all are imported from here.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch

from slipstream.errors import ArgumentError
from slipstream.compiler import random as rnd
from slipstream.compiler.kinds import Geometry
from slipstream.ops.augment import _erasing_ranges, _factor_range, _fill_numbers, _sigma_range
from slipstream.ops.batch_base import (COIN_DRAWS, Params, _back, _BatchAugmentation, _Draws, _float, _gray,
                                       _probability)
from slipstream.ops.batch_tones import (BatchCircularMask, BatchRandomAdjustSharpness, BatchRandomAutocontrast,
                                        BatchRandomEqualize, BatchRandomInvert, BatchRandomPosterize, BatchSRGBToLMS,
                                        BatchYIQColorJitter, _rgb)
from slipstream.ops.batch_warps import (BatchFixedOpticalDistortion, BatchPatchShuffle, BatchRandomAffine,
                                        BatchRandomPerspective, BatchRandomRotation, BatchRandomZoom, BatchRotateObject)

_JITTER_DRAWS = rnd.named_draws("brightness", "contrast", "saturation", "hue", "order")  # order + j: step j's rank
_BLUR_DRAWS = rnd.named_draws("sigma", "apply")
_ERASE_DRAWS = rnd.named_draws("area", "aspect", "top", "left", "apply")

__all__ = ["BatchCircularMask", "BatchColorJitter", "BatchFixedOpticalDistortion", "BatchGaussianBlur",
           "BatchPatchShuffle", "BatchRandomAdjustSharpness", "BatchRandomAffine", "BatchRandomAutocontrast",
           "BatchRandomEqualize", "BatchRandomErasing", "BatchRandomGrayscale", "BatchRandomInvert",
           "BatchRandomPerspective", "BatchRandomPosterize", "BatchRandomRotation", "BatchRandomSolarize",
           "BatchRandomZoom", "BatchRotateObject", "BatchSRGBToLMS", "BatchYIQColorJitter", "Params"]


class BatchColorJitter(_BatchAugmentation):
    """Per-image brightness, contrast and saturation factors from [max(0, 1
    - v), 1 + v] (or a given (low, high) range) and a hue shift from [-hue,
    hue] (or a range within [-0.5, 0.5]), applied in an order drawn per
    batch (torchvision draws it per call too).  Takes RGB batches (3
    channels)."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    def __init__(self, brightness: Any = 0.0, contrast: Any = 0.0, saturation: Any = 0.0, hue: Any = 0.0,
                 generator: torch.Generator | None = None) -> None:
        super().__init__(generator)
        self.ranges = {name: _factor_range(name, factor) for name, factor in
                       (("brightness", brightness), ("contrast", contrast), ("saturation", saturation))}
        self.ranges["hue"] = _factor_range("hue", hue, center=0.0, bound=0.5)

    def draw(self, x: torch.Tensor, draws: _Draws) -> Params:
        named = _JITTER_DRAWS
        params = {name: draws.uniform(getattr(named, name), lo, hi) for name, (lo, hi) in self.ranges.items()}
        params["order"] = draws.permutation(named.order, 4)
        return params

    def apply(self, x: torch.Tensor, params: Params) -> torch.Tensor:
        y, was_uint8 = _float(_rgb(x, type(self).__name__))
        for step in params["order"].tolist():
            if step == 0:
                y = (y * params["brightness"].view(-1, 1, 1, 1)).clamp(0, 1)
            elif step == 1:
                f = params["contrast"].view(-1, 1, 1, 1)
                y = (f * y + (1 - f) * _gray(y).mean(dim=(1, 2, 3), keepdim=True)).clamp(0, 1)
            elif step == 2:
                f = params["saturation"].view(-1, 1, 1, 1)
                y = (f * y + (1 - f) * _gray(y)).clamp(0, 1)
            elif bool((params["hue"] != 0).any()):
                y = _shift_hue(y, params["hue"])
        return _back(y, was_uint8)


def _shift_hue(x: torch.Tensor, shift: torch.Tensor) -> torch.Tensor:
    """RGB -> HSV, rotate hue by ``shift`` turns per image, -> RGB."""
    r, g, b = x.unbind(1)
    high, _ = x.max(1)
    low, _ = x.min(1)
    chroma = high - low
    safe = torch.where(chroma > 0, chroma, torch.ones_like(chroma))
    h = torch.where(high == r, ((g - b) / safe) % 6, torch.where(high == g, (b - r) / safe + 2, (r - g) / safe + 4))
    h = torch.where(chroma > 0, h / 6, torch.zeros_like(h))
    h = (h + shift.view(-1, 1, 1)) % 1.0
    s = torch.where(high > 0, chroma / torch.where(high > 0, high, torch.ones_like(high)), torch.zeros_like(high))
    v = high
    n = torch.tensor([5.0, 3.0, 1.0], device=x.device, dtype=x.dtype).view(1, 3, 1, 1)
    kk = (n + h.unsqueeze(1) * 6) % 6
    out = v.unsqueeze(1) - v.unsqueeze(1) * s.unsqueeze(1) * torch.clamp(torch.minimum(kk, 4 - kk), 0, 1)
    return out.clamp(0, 1)


class BatchRandomGrayscale(_BatchAugmentation):
    """Each image replaced by its luma in every channel with probability
    ``p``.  Takes RGB batches (3 channels)."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    def __init__(self, p: float = 0.1, generator: torch.Generator | None = None) -> None:
        super().__init__(generator)
        self.p = _probability(p)

    def draw(self, x: torch.Tensor, draws: _Draws) -> Params:
        return {"apply": draws.rand(COIN_DRAWS.apply) < self.p}

    def apply(self, x: torch.Tensor, params: Params) -> torch.Tensor:
        y, was_uint8 = _float(_rgb(x, type(self).__name__))
        y = torch.where(params["apply"].view(-1, 1, 1, 1), _gray(y).expand_as(y), y)
        return _back(y, was_uint8)


class BatchRandomSolarize(_BatchAugmentation):
    """Each image, with probability ``p``: values at or above ``threshold``
    (on the 0..1 scale) become ``1 - value``."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    def __init__(self, threshold: float = 0.5, p: float = 0.5, generator: torch.Generator | None = None) -> None:
        super().__init__(generator)
        self.threshold, self.p = threshold, _probability(p)

    def draw(self, x: torch.Tensor, draws: _Draws) -> Params:
        return {"apply": draws.rand(COIN_DRAWS.apply) < self.p}

    def apply(self, x: torch.Tensor, params: Params) -> torch.Tensor:
        y, was_uint8 = _float(x)
        solarized = torch.where(y >= self.threshold, 1 - y, y)
        return _back(torch.where(params["apply"].view(-1, 1, 1, 1), solarized, y), was_uint8)


class BatchGaussianBlur(_BatchAugmentation):
    """Each image blurred with a ``kernel_size`` Gaussian of sigma drawn from
    ``sigma``, with probability ``p``: one grouped convolution per axis for
    the whole batch, reflecting at the borders."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    def __init__(self, kernel_size: int, sigma: tuple[float, float] = (0.1, 2.0), p: float = 1.0,
                 generator: torch.Generator | None = None) -> None:
        super().__init__(generator)
        if kernel_size < 1 or kernel_size % 2 == 0:
            raise ArgumentError(f"kernel_size must be a positive odd int, got {kernel_size}")
        self.kernel_size, self.sigma, self.p = kernel_size, _sigma_range(sigma), _probability(p)

    def draw(self, x: torch.Tensor, draws: _Draws) -> Params:
        return {"sigma": draws.uniform(_BLUR_DRAWS.sigma, *self.sigma), "apply": draws.rand(_BLUR_DRAWS.apply) < self.p}

    def apply(self, x: torch.Tensor, params: Params) -> torch.Tensor:
        y, was_uint8 = _float(x)
        n, c, h, w = y.shape
        radius = self.kernel_size // 2
        if radius >= min(h, w):  # reflecting needs a pad smaller than the side
            raise ArgumentError(f"BatchGaussianBlur: kernel_size {self.kernel_size} needs images of at least "
                                f"{radius + 1}x{radius + 1} pixels (kernel_size // 2 + 1 on each side), got {h}x{w}")
        t = torch.arange(-radius, radius + 1, device=y.device, dtype=y.dtype)
        kernels = torch.exp(-0.5 * (t.view(1, -1) / params["sigma"].view(-1, 1).to(y.dtype)) ** 2)
        kernels = (kernels / kernels.sum(1, keepdim=True)).repeat_interleave(c, dim=0)  # (n * c, k)
        flat = torch.nn.functional.pad(y.reshape(1, n * c, h, w), (radius,) * 4, mode="reflect")
        flat = torch.nn.functional.conv2d(flat, kernels.view(n * c, 1, 1, -1), groups=n * c)
        flat = torch.nn.functional.conv2d(flat, kernels.view(n * c, 1, -1, 1), groups=n * c)
        blurred = flat.view(n, c, h, w)
        return _back(torch.where(params["apply"].view(-1, 1, 1, 1), blurred, y), was_uint8)


class BatchRandomErasing(_BatchAugmentation):
    """torchvision's RandomErasing per image, with probability ``p``: a
    rectangle of area fraction in ``scale`` and log-uniform aspect ratio in
    ``ratio`` (one draw; rectangles that do not fit are shrunk to fit) set to
    ``value`` (one number, or one per channel)."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    def __init__(self, p: float = 0.5, scale: tuple[float, float] = (0.02, 0.33),
                 ratio: tuple[float, float] = (0.3, 3.3), value: Any = 0.0,
                 generator: torch.Generator | None = None) -> None:
        super().__init__(generator)
        self.scale, self.ratio = _erasing_ranges("BatchRandomErasing", scale, ratio)
        self.p, self.value = _probability(p), _fill_numbers(value)
        if not self.value or not all(math.isfinite(v) for v in self.value):
            raise ArgumentError(f"BatchRandomErasing: value must be a finite number or one per channel, got {value!r}")

    def draw(self, x: torch.Tensor, draws: _Draws) -> Params:
        _, _, h, w = x.shape
        # float64 whatever the batch's dtype: a float16 area overflows past 65504 pixels (a 256x256 box)
        area = draws.uniform64(_ERASE_DRAWS.area, *self.scale) * h * w
        aspect = torch.exp(draws.uniform64(_ERASE_DRAWS.aspect, math.log(self.ratio[0]), math.log(self.ratio[1])))
        eh = torch.sqrt(area * aspect).round().clamp(1, h)
        ew = torch.sqrt(area / aspect).round().clamp(1, w)
        top = (draws.rand(_ERASE_DRAWS.top) * (h - eh + 1)).floor()  # rand < 1, so top <= h - eh
        left = (draws.rand(_ERASE_DRAWS.left) * (w - ew + 1)).floor()
        return {"box": torch.stack([top, left, eh, ew], 1).long(), "apply": draws.rand(_ERASE_DRAWS.apply) < self.p}

    def apply(self, x: torch.Tensor, params: Params) -> torch.Tensor:
        y, was_uint8 = _float(x)
        _, _, h, w = y.shape
        top, left, eh, ew = params["box"].unbind(1)
        rows = torch.arange(h, device=y.device).view(1, h, 1)
        cols = torch.arange(w, device=y.device).view(1, 1, w)
        inside = ((rows >= top.view(-1, 1, 1)) & (rows < (top + eh).view(-1, 1, 1))
                  & (cols >= left.view(-1, 1, 1)) & (cols < (left + ew).view(-1, 1, 1)))
        mask = (inside & params["apply"].view(-1, 1, 1)).unsqueeze(1)
        if len(self.value) not in (1, y.shape[1]):
            raise ArgumentError(f"BatchRandomErasing: value has {len(self.value)} numbers for images of {y.shape[1]} "
                                f"channels: give one number, or one per channel ({y.shape[1]})")
        fill = torch.tensor(self.value, dtype=y.dtype, device=y.device).view(1, -1, 1, 1)
        return _back(torch.where(mask, fill, y), was_uint8)
