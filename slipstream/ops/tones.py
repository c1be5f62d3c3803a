"""Colour and tone operations computed as Pillow computes them, the
reference of torchvision's PIL path and of its augmentation policies.

The kernels work on (height, width, channels) uint8 C-contiguous arrays.
Each is called ``name(src, dst, ...)``: it reads ``src`` and writes ``dst``,
an array of the same shape, which may be ``src`` itself (in place) for every
kernel but :func:`sharpness`; arrays it cannot take are a ``ValueError``.
Each calls the C kernel of its name (``slip_posterize`` ... ``slip_sharpness``
in ``native/include/slipstream.h``), whose arithmetic is Pillow's, step for
step, so that their output equals Pillow's bit for bit:

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

from slipstream.compiler import Allocation, Geometry, Operation, State
from slipstream.compiler import random as rnd
from slipstream.compiler.codegen import copy_sample
from slipstream.compiler.jit import cached_njit
from slipstream.compiler.params import PROBABILITY, Float, Int, param
from slipstream.native import (slip_autocontrast, slip_brightness, slip_color, slip_contrast, slip_equalize,
                               slip_invert, slip_posterize, slip_sharpness, slip_solarize)
from slipstream.ops.augment import _check_image
from slipstream.ops.warps import image_bytes

__all__ = ["RandomAdjustSharpness", "RandomAutocontrast", "RandomEqualize", "RandomInvert", "RandomPosterize",
           "autocontrast", "brightness", "color", "contrast", "equalize", "invert", "posterize", "sharpness",
           "solarize"]

_COIN_DRAWS = rnd.named_draws("apply")  # the operations that apply with probability p


def _refused(what: str) -> str:
    """The message of a kernel's ``ValueError`` when the C kernel refuses its arrays: ``what`` it takes, then what
    every kernel takes (a constant, as compiled code raises it)."""
    return (f"{what} (height, width, channels) C-contiguous uint8 images of 1 to 65500 pixels a side, dst of src's "
            f"shape (slipstream.native.last_error() says what was wrong)")


_POSTERIZE, _SOLARIZE, _INVERT, _AUTOCONTRAST, _EQUALIZE, _BRIGHTNESS = (
    _refused(f"{name} takes") for name in ("posterize", "solarize", "invert", "autocontrast", "equalize", "brightness"))
_COLOR = _refused("color takes RGB images (3 channels) or one channel:")
_CONTRAST = _refused("contrast takes RGB or one-channel images:")
_SHARPNESS = _refused("sharpness reads the neighbours of each pixel: dst must be another array than src, apart from "
                      "it; it takes")

# ---------------------------------------------------------------- the C kernels' entry points


@cached_njit
def posterize(src, dst, bits):
    """``ImageOps.posterize(img, bits)``: keep the top ``bits`` bits of every
    value (``bits`` in 0..8, clamped there).  0 gives a black image, as
    torchvision's tensor ``posterize`` does (Pillow 13 refuses 0)."""
    height, width, channels = src.shape
    if slip_posterize(src, image_bytes(src), height, width, channels, src.strides[0], dst, image_bytes(dst),
                      dst.strides[0], bits):
        raise ValueError(_POSTERIZE)


@cached_njit
def solarize(src, dst, threshold):
    """``ImageOps.solarize(img, threshold)``: every value ``v >= threshold``
    becomes ``255 - v`` (``threshold`` may be a float; 0 inverts everything,
    above 255 nothing; NaN inverts everything, as Pillow's ``v < nan`` is false)."""
    height, width, channels = src.shape
    if slip_solarize(src, image_bytes(src), height, width, channels, src.strides[0], dst, image_bytes(dst),
                     dst.strides[0], threshold):
        raise ValueError(_SOLARIZE)


@cached_njit
def invert(src, dst):
    """``ImageOps.invert(img)``: ``255 - v``."""
    height, width, channels = src.shape
    if slip_invert(src, image_bytes(src), height, width, channels, src.strides[0], dst, image_bytes(dst),
                   dst.strides[0]):
        raise ValueError(_INVERT)


@cached_njit
def autocontrast(src, dst):
    """``ImageOps.autocontrast(img)`` (``cutoff=0, ignore=None``), per
    channel: the channel's lowest value ``lo`` maps to 0 and its highest
    ``hi`` to 255, by ``int(v * scale + offset)`` in double precision with
    ``scale = 255 / (hi - lo)`` and ``offset = -lo * scale``, clipped; a
    channel of one value is left as it is."""
    height, width, channels = src.shape
    if slip_autocontrast(src, image_bytes(src), height, width, channels, src.strides[0], dst, image_bytes(dst),
                         dst.strides[0]):
        raise ValueError(_AUTOCONTRAST)


@cached_njit
def equalize(src, dst):
    """``ImageOps.equalize(img)``, per channel: with ``step`` the channel's
    pixel count less that of its highest value, divided by 255 (integer
    division), value ``v`` maps to ``(step // 2 + (number of pixels below v))
    // step``, clipped to 255; a channel of one value, or whose ``step`` is
    0, is left as it is."""
    height, width, channels = src.shape
    if slip_equalize(src, image_bytes(src), height, width, channels, src.strides[0], dst, image_bytes(dst),
                     dst.strides[0]):
        raise ValueError(_EQUALIZE)


@cached_njit
def brightness(src, dst, factor):
    """``ImageEnhance.Brightness(img).enhance(factor)``: a blend with black."""
    height, width, channels = src.shape
    if slip_brightness(src, image_bytes(src), height, width, channels, src.strides[0], dst, image_bytes(dst),
                       dst.strides[0], factor):
        raise ValueError(_BRIGHTNESS)


@cached_njit
def color(src, dst, factor):
    """``ImageEnhance.Color(img).enhance(factor)`` on RGB: a blend with the
    pixel's gray (``img.convert("L")``) in all three channels.  One channel
    is copied unchanged, as Pillow's ``Color`` leaves an L image."""
    height, width, channels = src.shape
    if slip_color(src, image_bytes(src), height, width, channels, src.strides[0], dst, image_bytes(dst),
                  dst.strides[0], factor):
        raise ValueError(_COLOR)


@cached_njit
def contrast(src, dst, factor):
    """``ImageEnhance.Contrast(img).enhance(factor)``: a blend with the
    image's mean gray value, rounded to an integer (RGB or one channel)."""
    height, width, channels = src.shape
    if slip_contrast(src, image_bytes(src), height, width, channels, src.strides[0], dst, image_bytes(dst),
                     dst.strides[0], factor):
        raise ValueError(_CONTRAST)


@cached_njit
def sharpness(src, dst, factor):
    """``ImageEnhance.Sharpness(img).enhance(factor)``: a blend with the
    image smoothed by ``ImageFilter.SMOOTH``, whose outermost rows and
    columns are the image's own, so they keep their values (for a finite
    factor).  ``dst`` must
    not be ``src`` (a ``ValueError`` says so): the filter reads the
    neighbours of each pixel."""
    height, width, channels = src.shape
    if slip_sharpness(src, image_bytes(src), height, width, channels, src.strides[0], dst, image_bytes(dst),
                      dst.strides[0], factor):
        raise ValueError(_SHARPNESS)


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

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

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

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

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

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

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
