"""Torch batch augmentations that change each pixel's values where it
stands: torchvision's tone operations with Pillow's arithmetic, the
original slipstream's YIQ colour jitter, sRGB to LMS conversion and
circular mask.  Import them from :mod:`slipstream.ops.batch`.

``BatchRandomPosterize``, ``BatchRandomEqualize``, ``BatchRandomAutocontrast``
and ``BatchRandomAdjustSharpness`` compute on 8-bit levels as Pillow does
(the compiled operations of :mod:`slipstream.ops.tones` repeat its
arithmetic, and these repeat theirs, in integers or float32 as Pillow
computes each step): a float batch is taken to 256 levels first (times
255, rounded; exact for the values ``ToTensor`` makes), and the result is
divided by 255, so a float batch and its uint8 twin give the same values.
Each draws whether to act on an image as the compiled operation of the same
name does: draw 0 of the image's key below ``p``.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import torch
import torch.nn.functional as F

from slipstream.compiler import random as rnd
from slipstream.compiler.kinds import Geometry
from slipstream.compiler.params import checked_for
from slipstream.errors import ArgumentError
from slipstream.ops import tones
from slipstream.ops.augment import _factor_range
from slipstream.ops.batch_base import (Params, _back, _BatchAugmentation, _Chance, _checked, _Draws, _float,
                                       _from_levels, _is_number, _levels, _probability)

# ---------------------------------------------------------------- Pillow's tone operations on levels


def _lookup(levels: torch.Tensor, tables: torch.Tensor) -> torch.Tensor:
    """``Image.point`` per image and channel: uint8 ``levels`` (B, C, H, W)
    mapped through ``tables`` (B, C, 256) of values in 0..255."""
    n, c, h, w = levels.shape
    flat = levels.reshape(n, c, h * w).long()
    return tables.to(torch.uint8).gather(2, flat).view(n, c, h, w)


def _identity_tables(levels: torch.Tensor) -> torch.Tensor:
    """(B, C, 256) int64 tables that leave every value as it is."""
    n, c = levels.shape[:2]
    return torch.arange(256, device=levels.device).expand(n, c, 256)


def equalize_tables(levels: torch.Tensor) -> torch.Tensor:
    """``ImageOps.equalize``'s table of each image and channel, (B, C, 256)
    int64, as :func:`slipstream.ops.tones.equalize` builds one: with
    ``step`` the channel's pixel count less that of its highest value,
    integer-divided by 255, value ``v`` maps to ``(step // 2 + pixels below
    v) // step``, at most 255; a channel of one value, or whose ``step`` is
    0, keeps its values."""
    n, c, h, w = levels.shape
    rows = levels.reshape(n * c, h * w).long() + torch.arange(n * c, device=levels.device).view(-1, 1) * 256
    counts = torch.bincount(rows.reshape(-1), minlength=n * c * 256).view(n, c, 256)
    present = counts > 0
    highest = 255 - present.flip(2).int().argmax(2, keepdim=True)
    step = (h * w - counts.gather(2, highest)) // 255
    below = counts.cumsum(2) - counts
    tables = ((step // 2 + below) // step.clamp(min=1)).clamp(max=255)
    keep = (present.sum(2, keepdim=True) <= 1) | (step == 0)
    return torch.where(keep, _identity_tables(levels), tables)


def autocontrast_tables(levels: torch.Tensor) -> torch.Tensor:
    """``ImageOps.autocontrast``'s table of each image and channel, (B, C,
    256) int64, as :func:`slipstream.ops.tones.autocontrast` builds one: the
    lowest value ``lo`` to 0, the highest ``hi`` to 255, ``int(v * scale +
    offset)`` in float64 with ``scale = 255 / (hi - lo)``, ``offset = -lo *
    scale``, clipped; a channel of one value keeps its values."""
    lo = levels.amin(dim=(2, 3)).double().unsqueeze(2)
    hi = levels.amax(dim=(2, 3)).double().unsqueeze(2)
    span = (hi - lo).clamp(min=1.0)
    scale = torch.full_like(span, 255.0) / span  # not 255.0 / span: torch computes that as 255 * (1 / span)
    offset = -lo * scale
    values = torch.arange(256, dtype=torch.float64, device=levels.device)
    tables = torch.trunc(values * scale + offset).clamp(0, 255).long()
    return torch.where(hi <= lo, _identity_tables(levels), tables)


def posterize(levels: torch.Tensor, bits: int) -> torch.Tensor:
    """``ImageOps.posterize``: the top ``bits`` bits of every uint8 level (0 gives black)."""
    return levels & ((0xFF00 >> bits) & 0xFF)


_YIQ_DRAWS = rnd.named_draws("apply", "brightness", "contrast", "saturation", "value", "hue")
_SMOOTH = torch.tensor([[1.0, 1.0, 1.0], [1.0, 5.0, 1.0], [1.0, 1.0, 1.0]])


def sharpness(levels: torch.Tensor, factor: float) -> torch.Tensor:
    """``ImageEnhance.Sharpness(img).enhance(factor)`` of uint8 ``levels``,
    as :func:`slipstream.ops.tones.sharpness` computes it: the blend
    ``s + f * (x - s)`` in float32 (``f`` rounded to float32), clipped to
    [0, 255] and truncated, with ``s`` the image under Pillow's SMOOTH
    filter.  The filter's weighted sum (``(8 neighbours + 5 centre) / 13``)
    is computed here in exact integers, then rounded half up, which gives
    Pillow's float32 result: the sum is a multiple of 1/13, never within
    1/26 of a half.  The outermost rows and columns keep their values, and
    an image under 3 pixels high or wide is left as it is."""
    n, c, h, w = levels.shape
    if h < 3 or w < 3:
        return levels
    x = levels.float()
    kernel = _SMOOTH.to(x.device).view(1, 1, 3, 3)
    weighted = F.conv2d(x.reshape(n * c, 1, h, w), kernel).view(n, c, h - 2, w - 2)  # exact: integers < 2**24
    smooth = x.clone()
    smooth[:, :, 1:-1, 1:-1] = torch.floor(weighted / 13.0 + 0.5)
    blended = smooth + torch.tensor(factor, dtype=torch.float32) * (x - smooth)
    return blended.clamp(0, 255).trunc().to(torch.uint8)


class BatchRandomPosterize(_Chance):
    """torchvision's ``RandomPosterize`` per image: with probability ``p``,
    keep the top ``bits`` bits of every 8-bit value (Pillow's
    ``ImageOps.posterize``; 0 bits give black)."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    def __init__(self, bits: int, p: float = 0.5, generator: torch.Generator | None = None) -> None:
        spec = checked_for(type(self).__name__, lambda: tones.RandomPosterize(bits, p))  # checks them
        super().__init__(spec.p, generator)
        self.bits = int(spec.bits)

    def change(self, x: torch.Tensor) -> torch.Tensor:
        return _from_levels(posterize(_levels(x), self.bits), x)


class BatchRandomEqualize(_Chance):
    """torchvision's ``RandomEqualize`` per image: with probability ``p``,
    each channel's histogram equalized as Pillow's ``ImageOps.equalize``
    does it."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    def change(self, x: torch.Tensor) -> torch.Tensor:
        levels = _levels(x)
        return _from_levels(_lookup(levels, equalize_tables(levels)), x)


class BatchRandomAutocontrast(_Chance):
    """torchvision's ``RandomAutocontrast`` per image: with probability
    ``p``, each channel stretched so that its lowest value becomes 0 and
    its highest 255, as Pillow's ``ImageOps.autocontrast`` does it."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    def change(self, x: torch.Tensor) -> torch.Tensor:
        levels = _levels(x)
        return _from_levels(_lookup(levels, autocontrast_tables(levels)), x)


class BatchRandomAdjustSharpness(_Chance):
    """torchvision's ``RandomAdjustSharpness`` per image: with probability
    ``p``, Pillow's ``ImageEnhance.Sharpness(img).enhance(sharpness_factor)``
    (0 blurs, 1 keeps, 2 sharpens)."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    def __init__(self, sharpness_factor: float, p: float = 0.5, generator: torch.Generator | None = None) -> None:
        spec = checked_for(type(self).__name__, lambda: tones.RandomAdjustSharpness(sharpness_factor, p))
        super().__init__(spec.p, generator)
        self.sharpness_factor = float(spec.sharpness_factor)

    def change(self, x: torch.Tensor) -> torch.Tensor:
        return _from_levels(sharpness(_levels(x), self.sharpness_factor), x)


class BatchRandomInvert(_Chance):
    """torchvision's ``RandomInvert`` per image: with probability ``p``,
    every value ``v`` becomes ``1 - v`` (``255 - v`` in a uint8 batch)."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    def change(self, x: torch.Tensor) -> torch.Tensor:
        return 255 - x if x.dtype == torch.uint8 else 1.0 - x


# ---------------------------------------------------------------- colour spaces

# NTSC's RGB -> YIQ matrix (FCC, 1953), and its inverse computed in float64.
_RGB_TO_YIQ = torch.tensor([[0.299, 0.587, 0.114], [0.596, -0.274, -0.321], [0.211, -0.523, 0.311]],
                           dtype=torch.float64)
_YIQ_TO_RGB = torch.linalg.inv(_RGB_TO_YIQ)


def _color_matrices(params: Params, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(B, 3, 3) float32 matrices and (B, 3, 1) offsets of
    :class:`BatchYIQColorJitter`: identity and zero for the images not drawn."""
    hue = torch.deg2rad(params["hue"].double())
    cos, sin = torch.cos(hue) * params["saturation"].double(), torch.sin(hue) * params["saturation"].double()
    yiq = torch.zeros(len(hue), 3, 3, dtype=torch.float64, device=hue.device)
    yiq[:, 0, 0] = params["value"].double()
    yiq[:, 1, 1], yiq[:, 1, 2], yiq[:, 2, 1], yiq[:, 2, 2] = cos, sin, -sin, cos  # DALI's hue_mat signs
    gain = (params["brightness"] * params["contrast"]).double().view(-1, 1, 1)
    matrices = gain * (_YIQ_TO_RGB.to(hue.device) @ yiq @ _RGB_TO_YIQ.to(hue.device))
    offsets = (params["brightness"] * (1.0 - params["contrast"]) * 0.5).double().view(-1, 1, 1).expand(-1, 3, 1)
    apply = params["apply"].view(-1, 1, 1)
    matrices = torch.where(apply, matrices, torch.eye(3, dtype=torch.float64, device=hue.device))
    offsets = torch.where(apply, offsets, torch.zeros_like(offsets))
    return matrices.float().to(like.device), offsets.float().to(like.device)


def _rgb(x: torch.Tensor, name: str) -> torch.Tensor:
    """``x`` itself, refused unless its images have 3 channels."""
    if _checked(x).shape[1] != 3:
        raise ArgumentError(f"{name} takes RGB batches (3 channels), got {tuple(x.shape)}")
    return x


def _mix(matrices: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Each pixel of ``y`` (B, 3, H, W) through its image's (B or 1, 3, 3)
    matrix, in float32 at least."""
    flat = y.reshape(y.shape[0], 3, -1)
    flat = flat if flat.dtype in (torch.float32, torch.float64) else flat.float()
    return (matrices.to(device=flat.device, dtype=flat.dtype) @ flat).view(y.shape)


class BatchYIQColorJitter(_BatchAugmentation):
    """The original slipstream's ``RandomColorJitterYIQ`` (DALI's
    ``color_twist``, in its manner): with probability ``p``, each image's colours moved by
    one 3x3 matrix in YIQ space: the luma Y scaled by ``value``, the chroma
    (I, Q) scaled by ``saturation`` and rotated by ``hue`` degrees, then
    ``contrast`` about mid-gray 0.5 and ``brightness`` as a gain, clamped to
    [0, 1].  Factors are drawn per image from [max(0, 1 - v), 1 + v] (or a
    given range), the hue from [-hue, hue] (at most 180)."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    def __init__(self, brightness: Any = 0.0, contrast: Any = 0.0, saturation: Any = 0.0, hue: Any = 0.0,
                 value: Any = 0.0, p: float = 1.0, generator: torch.Generator | None = None) -> None:
        super().__init__(generator)
        try:
            self.ranges = {name: _factor_range(name, factor) for name, factor in
                           (("brightness", brightness), ("contrast", contrast), ("saturation", saturation),
                            ("value", value))}
            self.ranges["hue"] = _factor_range("hue", hue, center=0.0, bound=180.0)
        except (TypeError, ValueError) as exc:
            raise ArgumentError(f"BatchYIQColorJitter: {exc} (a factor is a number v >= 0, meaning "
                                f"[max(0, 1 - v), 1 + v], or a (low, high) pair; hue at most 180 degrees)") from exc
        self.p = _probability(p)

    def draw(self, x: torch.Tensor, draws: _Draws) -> Params:
        params = {name: draws.uniform64(getattr(_YIQ_DRAWS, name), *span) for name, span in self.ranges.items()}
        params["apply"] = draws.rand(_YIQ_DRAWS.apply) < self.p
        return params

    def apply(self, x: torch.Tensor, params: Params) -> torch.Tensor:
        y, was_uint8 = _float(_rgb(x, type(self).__name__))
        matrices, offsets = _color_matrices(params, y)
        out = _mix(matrices, y) + offsets.unsqueeze(3)
        return _back(out.clamp(0, 1).to(y.dtype), was_uint8)


# sRGB's linear RGB -> CIE XYZ (IEC 61966-2-1, D65), then CIECAM02's CAT02 XYZ -> LMS.
_LINEAR_TO_XYZ = torch.tensor([[0.412453, 0.357580, 0.180423], [0.212671, 0.715160, 0.072169],
                               [0.019334, 0.119193, 0.950227]], dtype=torch.float64)
_XYZ_TO_LMS = torch.tensor([[0.7328, 0.4296, -0.1624], [-0.7036, 1.6975, 0.0061], [0.0030, 0.0136, 0.9834]],
                           dtype=torch.float64)
SRGB_TO_LMS = _XYZ_TO_LMS @ _LINEAR_TO_XYZ
"""The 3x3 matrix from linear sRGB to CAT02 LMS, float64."""


class BatchSRGBToLMS(_BatchAugmentation):
    """The original slipstream's ``SRGBToLMS``: sRGB values in [0, 1] to
    CAT02 cone responses (L, M, S): sRGB's transfer function undone
    (``v / 12.92`` up to 0.04045, else ``((v + 0.055) / 1.055) ** 2.4``),
    then linear RGB to XYZ to LMS by one 3x3 matrix.  Draws nothing; a uint8
    batch gives float32 (LMS values leave [0, 1])."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    def __init__(self) -> None:
        super().__init__(None)

    def draw(self, x: torch.Tensor, draws: _Draws) -> Params:
        return {}

    def apply(self, x: torch.Tensor, params: Params) -> torch.Tensor:
        y, _ = _float(_rgb(x, type(self).__name__))
        linear = torch.where(y > 0.04045, ((y + 0.055) / 1.055) ** 2.4, y / 12.92)
        return _mix(SRGB_TO_LMS.view(1, 3, 3), linear).to(y.dtype)


# ---------------------------------------------------------------- masks


class BatchCircularMask(_BatchAugmentation):
    """The original slipstream's ``CircularMask``: every image multiplied by
    a disc with a soft edge, centred on the image: 1 within ``radius =
    min(height, width) / 2 - blur_span`` of the centre, then a Gaussian
    falloff that reaches ``tol`` at ``blur_span`` pixels beyond it (its
    sigma is ``blur_span / sqrt(2 ln(1 / tol))``).  Draws nothing."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    def __init__(self, blur_span: float = 8.0, tol: float = 0.0005) -> None:
        super().__init__(None)
        if not _is_number(blur_span) or not 0 <= blur_span < math.inf:
            raise ArgumentError(f"blur_span must be a finite number of pixels >= 0, got {blur_span!r}")
        if not _is_number(tol) or not 0 < tol < 1:
            raise ArgumentError(f"tol must be a number in (0, 1), the mask's value blur_span pixels past its "
                                f"radius, got {tol!r}")
        self.blur_span, self.tol = float(blur_span), float(tol)

    def draw(self, x: torch.Tensor, draws: _Draws) -> Params:
        return {}

    def mask(self, height: int, width: int, device: torch.device) -> torch.Tensor:
        """The (1, 1, height, width) float32 mask."""
        ys = torch.arange(height, dtype=torch.float32, device=device).view(-1, 1) - (height - 1) / 2
        xs = torch.arange(width, dtype=torch.float32, device=device).view(1, -1) - (width - 1) / 2
        beyond = (torch.sqrt(xs * xs + ys * ys) - (min(height, width) / 2 - self.blur_span)).clamp(min=0)
        if self.blur_span == 0:
            return (beyond == 0).float().view(1, 1, height, width)
        sigma = self.blur_span / math.sqrt(2 * math.log(1 / self.tol))
        return torch.exp(-beyond * beyond / (2 * sigma * sigma)).view(1, 1, height, width)

    def apply(self, x: torch.Tensor, params: Params) -> torch.Tensor:
        y, was_uint8 = _float(x)
        return _back(y * self.mask(y.shape[2], y.shape[3], y.device).to(y.dtype), was_uint8)
