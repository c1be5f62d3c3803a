"""Colour and tone operations computed as Pillow computes them, the
reference of torchvision's PIL path and of its augmentation policies.

The kernels work on (height, width, channels) uint8 C-contiguous arrays.
Each is called ``name(src, dst, ...)``: it reads ``src`` and writes ``dst``,
an array of the same shape, which may be ``src`` itself (in place) for every
kernel but :func:`sharpness`.  Their arithmetic is Pillow's, step for step,
so that their output equals Pillow's bit for bit:

* ``ImageOps`` (``PIL/ImageOps.py``: ``posterize``, ``solarize``,
  ``invert``, ``autocontrast``, ``equalize``) builds a 256-entry table per
  channel and maps every value through it (``Image.point``, whose integer
  tables are clipped to 0..255 when they are handed to the C side);
* ``ImageEnhance`` (``PIL/ImageEnhance.py``) blends a "degenerate" image
  towards the input: ``Image.blend(degenerate, image, factor)``, which
  ``src/libImaging/Blend.c`` (``ImagingBlend``) computes in float32 as
  ``d + factor * (x - d)`` with the factor rounded to float32, clips to
  [0, 255] and truncates;
* grayscale is ``src/libImaging/Convert.c``'s fixed-point ITU-R 601-2 luma,
  ``(19595 R + 38470 G + 7471 B + 0x8000) >> 16`` (``rgb2l``), rounded,
  unlike torchvision's tensor kernels, which truncate
  ``0.2989 R + 0.587 G + 0.114 B``;
* ``ImageFilter.SMOOTH`` is ``src/libImaging/Filter.c``'s
  ``ImagingFilter3x3`` with the weights ``(1, 1, 1, 1, 5, 1, 1, 1, 1) / 13``
  in float32 (divided in ``src/_imaging.c``'s ``_filter``), summed row by row
  onto 0.5 and truncated; the outermost rows and columns keep their values,
  and an image narrower or lower than 3 pixels is left as it is.

The operations (:class:`RandomPosterize`, :class:`RandomEqualize`,
:class:`RandomAutocontrast`, :class:`RandomAdjustSharpness`,
:class:`RandomInvert`) are torchvision's transforms of the same names, each
applied with probability ``p`` drawn from the sample's random key.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np
from numba import uint64

from slipstream.compiler import Allocation, Operation, State
from slipstream.compiler import random as rnd
from slipstream.compiler.codegen import copy_sample
from slipstream.compiler.jit import cached_njit
from slipstream.compiler.params import PROBABILITY, Float, Int, param
from slipstream.ops.augment import _check_image

__all__ = ["RandomAdjustSharpness", "RandomAutocontrast", "RandomEqualize", "RandomInvert", "RandomPosterize",
           "autocontrast", "brightness", "color", "contrast", "equalize", "invert", "posterize", "sharpness",
           "solarize"]

_ONE = uint64(1)
_COIN_DRAWS = rnd.named_draws("apply")  # the operations that apply with probability p
_TOP = np.uint8(255)

# ---------------------------------------------------------------- shared arithmetic


@cached_njit
def _clip8(t):
    """A float32 as uint8, as Blend.c and Filter.c's ``clip8`` store one:
    0 at or below 0, 255 at or above 255, else truncated."""
    if t <= np.float32(0.0):
        return np.uint8(0)
    if t >= np.float32(255.0):
        return _TOP
    return np.uint8(t)


@cached_njit
def _blend(degenerate, value, alpha):
    """``ImagingBlend`` on one value: ``degenerate + alpha * (value -
    degenerate)`` in float32 (``alpha`` is a float32), clipped, truncated.
    Blend.c interpolates without clipping when 0 <= alpha <= 1, but there the
    result already lies in [0, 255], so one clipped formula serves both of
    its branches, and its shortcuts for alpha 0 and 1 too (the formula is
    exact there)."""
    return _clip8(np.float32(np.int32(degenerate)) + alpha * np.float32(np.int32(value) - np.int32(degenerate)))


@cached_njit
def _luma(r, g, b):
    """Pillow's RGB -> L value (Convert.c, ``L24 >> 16``): 601-2 weights in
    16-bit fixed point, rounded half up."""
    return np.uint8((np.uint32(r) * np.uint32(19595) + np.uint32(g) * np.uint32(38470)
                     + np.uint32(b) * np.uint32(7471) + np.uint32(0x8000)) >> np.uint32(16))


@cached_njit
def _histograms(src):
    """The (channels, 256) histogram of each channel, as ``Image.histogram``."""
    channels = src.shape[2]
    flat = src.reshape(-1)
    counts = np.zeros((channels, 256), np.int64)
    for c in range(channels):  # channel by channel: one flat row of bins, strided reads
        bins = counts[c]
        for j in range(uint64(c), uint64(flat.size), uint64(channels)):
            bins[flat[j]] += 1
    return counts


@cached_njit
def _map(src, dst, tables):
    """``dst[..., c] = tables[c, src[..., c]]``: ``Image.point`` with one table per channel."""
    channels = src.shape[2]
    s, d = src.reshape(-1), dst.reshape(-1)
    for c in range(channels):
        table = tables[c]
        for j in range(uint64(c), uint64(s.size), uint64(channels)):
            d[j] = table[s[j]]


@cached_njit
def _identity(tables, c):
    """Channel ``c``'s table leaves every value as it is."""
    for v in range(256):
        tables[c, v] = v


# ---------------------------------------------------------------- ImageOps


@cached_njit
def posterize(src, dst, bits):
    """``ImageOps.posterize(img, bits)``: keep the top ``bits`` bits of every
    value (``bits`` in 0..8, clamped there).  0 gives a black image, as
    torchvision's tensor ``posterize`` does (Pillow 13 refuses 0)."""
    keep = min(max(np.int64(bits), 0), 8)
    mask = np.uint8((0xFF00 >> keep) & 0xFF)
    s, d = src.reshape(-1), dst.reshape(-1)
    for j in range(uint64(s.size)):
        d[j] = s[j] & mask


@cached_njit
def solarize(src, dst, threshold):
    """``ImageOps.solarize(img, threshold)``: every value ``v >= threshold``
    becomes ``255 - v`` (``threshold`` may be a float; 0 inverts everything,
    above 255 nothing; NaN inverts everything, as Pillow's ``v < nan`` is false)."""
    if not threshold > 0:
        cut = 0
    elif threshold > 255:
        cut = 256
    else:
        cut = int(np.ceil(np.float64(threshold)))  # v >= threshold exactly when v >= ceil(threshold), v an integer
    s, d = src.reshape(-1), dst.reshape(-1)
    for j in range(uint64(s.size)):
        v = s[j]
        d[j] = _TOP - v if np.int64(v) >= cut else v


@cached_njit
def invert(src, dst):
    """``ImageOps.invert(img)``: ``255 - v``."""
    s, d = src.reshape(-1), dst.reshape(-1)
    for j in range(uint64(s.size)):
        d[j] = _TOP - s[j]


@cached_njit
def autocontrast(src, dst):
    """``ImageOps.autocontrast(img)`` (``cutoff=0, ignore=None``), per
    channel: the channel's lowest value ``lo`` maps to 0 and its highest
    ``hi`` to 255, by ``int(v * scale + offset)`` in double precision with
    ``scale = 255 / (hi - lo)`` and ``offset = -lo * scale``, clipped; a
    channel of one value is left as it is."""
    counts = _histograms(src)
    channels = src.shape[2]
    tables = np.empty((channels, 256), np.uint8)
    for c in range(channels):
        lo, hi = 0, 255
        while lo < 256 and counts[c, lo] == 0:
            lo += 1
        while hi >= 0 and counts[c, hi] == 0:
            hi -= 1
        if hi <= lo:
            _identity(tables, c)
            continue
        scale = 255.0 / (hi - lo)
        offset = -lo * scale
        for v in range(256):
            tables[c, v] = min(max(int(v * scale + offset), 0), 255)
    _map(src, dst, tables)


@cached_njit
def equalize(src, dst):
    """``ImageOps.equalize(img)``, per channel: with ``step`` the channel's
    pixel count less that of its highest value, divided by 255 (integer
    division), value ``v`` maps to ``(step // 2 + (number of pixels below v))
    // step``, clipped to 255; a channel of one value, or whose ``step`` is
    0, is left as it is."""
    counts = _histograms(src)
    channels = src.shape[2]
    tables = np.empty((channels, 256), np.uint8)
    for c in range(channels):
        present, total, last = 0, 0, 0
        for v in range(256):
            if counts[c, v]:
                present += 1
                total += counts[c, v]
                last = counts[c, v]
        step = (total - last) // 255
        if present <= 1 or step == 0:
            _identity(tables, c)
            continue
        below = step // 2
        for v in range(256):
            tables[c, v] = min(below // step, 255)
            below += counts[c, v]
    _map(src, dst, tables)


# ---------------------------------------------------------------- ImageEnhance


@cached_njit
def brightness(src, dst, factor):
    """``ImageEnhance.Brightness(img).enhance(factor)``: a blend with black."""
    alpha = np.float32(factor)
    s, d = src.reshape(-1), dst.reshape(-1)
    for j in range(uint64(s.size)):
        d[j] = _blend(np.uint8(0), s[j], alpha)


@cached_njit
def color(src, dst, factor):
    """``ImageEnhance.Color(img).enhance(factor)`` on RGB: a blend with the
    pixel's gray (``img.convert("L")``) in all three channels.  One channel
    is copied unchanged, as Pillow's ``Color`` leaves an L image."""
    channels = src.shape[2]
    s, d = src.reshape(-1), dst.reshape(-1)
    if channels == 1:
        for j in range(uint64(s.size)):
            d[j] = s[j]
        return
    if channels != 3:
        raise ValueError("color takes RGB images (3 channels)")
    alpha = np.float32(factor)
    for p in range(uint64(s.size // 3)):
        j = p * uint64(3)
        r, g, b = s[j], s[j + _ONE], s[j + uint64(2)]
        gray = _luma(r, g, b)
        d[j] = _blend(gray, r, alpha)
        d[j + _ONE] = _blend(gray, g, alpha)
        d[j + uint64(2)] = _blend(gray, b, alpha)


@cached_njit
def _mean_gray(src):
    """``int(ImageStat.Stat(img.convert("L")).mean[0] + 0.5)``: the mean of
    the gray values (the value itself for one channel), rounded half up."""
    channels = src.shape[2]
    flat = src.reshape(-1)
    pixels = uint64(flat.size // channels)
    if pixels == 0:
        return np.uint8(0)
    total = np.int64(0)
    if channels == 1:
        for p in range(pixels):
            total += np.int64(flat[p])
    elif channels == 3:
        for p in range(pixels):
            j = p * uint64(3)
            total += np.int64(_luma(flat[j], flat[j + _ONE], flat[j + uint64(2)]))
    else:
        raise ValueError("contrast takes RGB or one-channel images")
    return np.uint8(int(np.float64(total) / np.float64(pixels) + 0.5))


@cached_njit
def contrast(src, dst, factor):
    """``ImageEnhance.Contrast(img).enhance(factor)``: a blend with the
    image's mean gray value, rounded to an integer (RGB or one channel)."""
    mean = _mean_gray(src)
    alpha = np.float32(factor)
    s, d = src.reshape(-1), dst.reshape(-1)
    for j in range(uint64(s.size)):
        d[j] = _blend(mean, s[j], alpha)


_W1 = np.float32(1.0) / np.float32(13.0)  # SMOOTH's weights, divided in float32 as _imaging.c's _filter does
_W5 = np.float32(5.0) / np.float32(13.0)
_HALF = np.float32(0.5)


@cached_njit
def _row(a, b, c, middle):
    """One kernel row of ``ImagingFilter3x3`` (Filter.c's KERNEL1x3): three
    float32 products summed left to right."""
    return np.float32(a) * _W1 + np.float32(b) * middle + np.float32(c) * _W1


@cached_njit
def _smoothed(s, i, row, step):
    """SMOOTH at flat index ``i`` (``row`` values per image row, ``step`` per
    pixel), as ``ImagingFilter3x3`` adds it: 0.5, then the row below, the row
    itself and the row above, stored by ``clip8``."""
    below, above = i + row, i - row
    total = _HALF + _row(s[below - step], s[below], s[below + step], _W1)
    total = total + _row(s[i - step], s[i], s[i + step], _W5)
    return _clip8(total + _row(s[above - step], s[above], s[above + step], _W1))


@cached_njit
def sharpness(src, dst, factor):
    """``ImageEnhance.Sharpness(img).enhance(factor)``: a blend with the
    image smoothed by ``ImageFilter.SMOOTH``, whose outermost rows and
    columns are the image's own, so they keep their values.  ``dst`` must
    not be ``src`` (a ``ValueError`` says so): the filter reads the
    neighbours of each pixel."""
    height, width, channels = src.shape
    if src.ctypes.data == dst.ctypes.data:
        raise ValueError("sharpness reads the neighbours of each pixel: dst must be another array than src")
    s, d = src.reshape(-1), dst.reshape(-1)
    if height < 3 or width < 3:  # ImagingFilter copies an image smaller than its kernel
        for j in range(uint64(s.size)):
            d[j] = s[j]
        return
    alpha = np.float32(factor)
    step = uint64(channels)
    row = uint64(width) * step
    last = (uint64(height) - _ONE) * row
    for j in range(row):  # first and last rows
        d[j] = s[j]
        d[last + j] = s[last + j]
    for y in range(_ONE, uint64(height) - _ONE):
        start = y * row
        for k in range(step):  # first and last columns
            d[start + k] = s[start + k]
            d[start + row - step + k] = s[start + row - step + k]
        for i in range(start + step, start + row - step):
            d[i] = _blend(_smoothed(s, i, row, step), s[i], alpha)


# ---------------------------------------------------------------- operations


def _in_place(op: Operation, state: State) -> tuple[State, None]:
    """The declaration of an operation that changes the image's values in place."""
    _check_image(op, state)
    return state, None


def _apply_p(doc: str) -> Any:
    """The declared ``p`` of an operation applied with probability ``p``, meaning ``doc``."""
    return param(PROBABILITY, doc, default=0.5)


@dataclasses.dataclass(frozen=True)
class RandomPosterize(Operation):
    """torchvision's ``RandomPosterize``: with probability ``p``, keep the top
    ``bits`` bits of every value (``ImageOps.posterize``; 0 bits give black)."""

    bits: int = param(Int(0, 8), "bits kept of each 8-bit value")
    p: float = _apply_p("probability of posterizing the sample")

    def declare(self, state):
        return _in_place(self, state)

    def generate_code(self):
        def apply(x, key, values):
            bits, p = values
            if rnd.uniform(key, _COIN_DRAWS.apply) < p:
                posterize(x, x, bits)
            return x

        return apply


@dataclasses.dataclass(frozen=True)
class _WholeImage(Operation):
    """A kernel without parameters, applied in place with probability ``p``:
    subclasses name it as ``_kernel``."""

    p: float = _apply_p("probability of applying the kernel to the sample")
    _kernel: ClassVar[Callable[..., None]]

    def declare(self, state):
        return _in_place(self, state)

    def generate_code(self):
        kernel = self._kernel

        def apply(x, key, values):
            (p,) = values
            if rnd.uniform(key, _COIN_DRAWS.apply) < p:
                kernel(x, x)
            return x

        return apply


@dataclasses.dataclass(frozen=True)
class RandomEqualize(_WholeImage):
    """torchvision's ``RandomEqualize``: with probability ``p``, equalize the
    histogram of each channel (``ImageOps.equalize``)."""

    p: float = _apply_p("probability of equalizing the sample")
    _kernel = staticmethod(equalize)


@dataclasses.dataclass(frozen=True)
class RandomAutocontrast(_WholeImage):
    """torchvision's ``RandomAutocontrast``: with probability ``p``, stretch
    each channel so that its lowest value becomes 0 and its highest 255
    (``ImageOps.autocontrast``)."""

    p: float = _apply_p("probability of stretching the sample's contrast")
    _kernel = staticmethod(autocontrast)


@dataclasses.dataclass(frozen=True)
class RandomInvert(_WholeImage):
    """torchvision's ``RandomInvert``: with probability ``p``, every value
    ``v`` becomes ``255 - v`` (``ImageOps.invert``)."""

    p: float = _apply_p("probability of inverting the sample")
    _kernel = staticmethod(invert)


@dataclasses.dataclass(frozen=True)
class RandomAdjustSharpness(Operation):
    """torchvision's ``RandomAdjustSharpness``: with probability ``p``,
    ``ImageEnhance.Sharpness(img).enhance(sharpness_factor)`` (0 blurs, 1
    keeps, 2 sharpens); into its own output, since the filter reads each
    pixel's neighbours."""

    sharpness_factor: float = param(Float(0.0), "blend factor: 0 gives the smoothed image, 1 the image, 2 a "
                                    "sharpened one")
    p: float = _apply_p("probability of adjusting the sample")

    def declare(self, state):
        _check_image(self, state)
        return state, Allocation(state.shape, state.dtype)

    def generate_code(self):
        def sharpen(x, out, key, values):
            factor, p = values
            if rnd.uniform(key, _COIN_DRAWS.apply) < p:
                sharpness(x, out, factor)
                return out
            return copy_sample(out, x)  # the output is always ``out``: the compiler relies on it

        return sharpen
