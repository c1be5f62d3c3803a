"""Decoding crops: each sample's image is decoded, cropped and resized in one
native call (``slip_jpeg_decode_crop_resize``: only the crop's region is
decoded, at the coarsest DCT scale that still covers the output), or, for
raw stored images, cropped and resized in one ``slip_resize`` call.

The user-facing operations follow torchvision.transforms.v2 and are
descriptions; the loader binds them to the image field they start the
pipeline of (``bind``) and folds a directly following
``RandomHorizontalFlip`` into the decode call (``fold``)::

    [RandomResizedCrop(224), RandomHorizontalFlip(), ToTensor(), Normalize(mean, std)]
    [Resize(256), CenterCrop(224), ToTensor(), Normalize(mean, std)]      # ImageNet evaluation

Each operation is a :class:`Crop`: it gives its decoder (a
:class:`CropDecoder`) a compiled region function, which picks the part of
each stored image to keep.  Crop parameters are drawn per sample from the
counter-based random keys of :mod:`slipstream.compiler.random`, so they are
the same for any thread count, batch order or resume point.
"""

from __future__ import annotations

import abc
import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
from numba import njit, uint64

from slipstream import native
from slipstream.compiler import random as rnd
from slipstream.compiler.jit import cached_njit, uncached_njit
from slipstream.compiler.params import (PROBABILITY, Bool, Choice, Custom, Declares, Float, Int, OrNone, Pair,
                                        Size, enum_name, param)
from slipstream.compiler.frames import MakesWindows
from slipstream.compiler.rewrites import FieldOperation, Foldable
from slipstream.errors import ArgumentError
from slipstream.fields import geometry
from slipstream.fields.decoders import DecodeSource, GeometricImageDecoder
from slipstream.ops.augment import RandomHorizontalFlip

INTERPOLATIONS = {"bilinear": native.Interp.BILINEAR, "bicubic": native.Interp.BICUBIC, "area": native.Interp.AREA}

CROP_DRAWS = rnd.named_draws("area", "aspect", "top", "left", "flip")
"""The draws of a sample's key the crops take: attempt a's area and aspect
ratio (``area + a``, ``aspect + a``), the position, and the flip a
``RandomHorizontalFlip`` folded into the crop becomes (the GPU decode's
planner draws it too, :mod:`slipstream.ops.device_decode`)."""

ATTEMPTS = 10
"""Tries of RandomResizedCrop's rejection sampling before the central crop (torchvision's)."""


# ---------------------------------------------------------------- crop parameters (compiled)


@cached_njit
def random_resized_crop_params(key, height, width, scale_lo, scale_hi, log_ratio_lo, log_ratio_hi, attempts):
    """torchvision's RandomResizedCrop sampling: up to ``attempts`` draws of
    an area fraction (uniform in [scale_lo, scale_hi)) and an aspect ratio
    (log-uniform) whose crop fits, at a uniform position; else the largest
    central crop with an aspect ratio in range.  Returns (top, left, h, w)."""
    area = height * width
    for attempt in range(attempts):
        target_area = area * rnd.uniform_range(key, CROP_DRAWS.area + attempt, scale_lo, scale_hi)
        aspect = math.exp(rnd.uniform_range(key, CROP_DRAWS.aspect + attempt, log_ratio_lo, log_ratio_hi))
        w = int(np.rint(math.sqrt(target_area * aspect)))
        h = int(np.rint(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            top, left = _position(key, height, width, h, w)
            return top, left, h, w
    return central_params(height, width, math.exp(log_ratio_lo), math.exp(log_ratio_hi))


@cached_njit
def _position(key, height, width, h, w):
    """A uniform (top, left) of an h x w region in a height x width image."""
    top = rnd.integers(key, CROP_DRAWS.top, 0, height - h + 1)
    return top, rnd.integers(key, CROP_DRAWS.left, 0, width - w + 1)


@cached_njit
def central_params(height, width, ratio_lo, ratio_hi):
    """The largest central crop whose aspect ratio lies in [ratio_lo, ratio_hi]."""
    in_ratio = width / height
    if in_ratio < ratio_lo:
        w, h = width, int(np.rint(width / ratio_lo))
    elif in_ratio > ratio_hi:
        h, w = height, int(np.rint(height * ratio_hi))
    else:
        h, w = height, width
    h, w = max(1, min(h, height)), max(1, min(w, width))
    return (height - h) // 2, (width - w) // 2, h, w


@cached_njit
def analytic_crop_params(key, height, width, scale_lo, scale_hi, log_ratio_lo, log_ratio_hi):
    """One draw, no rejection: the area as in torchvision, then the aspect
    ratio log-uniform over the part of the range where that area fits; the
    central fallback only when no ratio in range fits."""
    area = height * width
    target_area = area * rnd.uniform_range(key, CROP_DRAWS.area, scale_lo, scale_hi)
    lo = max(log_ratio_lo, math.log(target_area / (height * height)))
    hi = min(log_ratio_hi, math.log(width * width / target_area))
    if lo > hi:
        return central_params(height, width, math.exp(log_ratio_lo), math.exp(log_ratio_hi))
    aspect = math.exp(rnd.uniform_range(key, CROP_DRAWS.aspect, lo, hi))
    w = min(width, max(1, int(np.rint(math.sqrt(target_area * aspect)))))
    h = min(height, max(1, int(np.rint(math.sqrt(target_area / aspect)))))
    top, left = _position(key, height, width, h, w)
    return top, left, h, w


@cached_njit
def center_crop_params(height, width, out_h, out_w, fraction):
    """The centered region that becomes an out_h x out_w output when the
    image is scaled so that the output covers ``fraction`` of its shorter
    extent (ImageNet evaluation: fraction 224/256)."""
    scale = fraction * min(height / out_h, width / out_w)
    h = max(1, min(height, int(np.rint(out_h * scale))))
    w = max(1, min(width, int(np.rint(out_w * scale))))
    return (height - h) // 2, (width - w) // 2, h, w


@cached_njit
def resized_center_crop_params(height, width, out_h, out_w, shorter):
    """The centered region of an out_h x out_w crop of the image resized so
    that its shorter side is ``shorter``."""
    scale = min(height, width) / shorter
    h = max(1, min(height, int(np.rint(out_h * scale))))
    w = max(1, min(width, int(np.rint(out_w * scale))))
    return (height - h) // 2, (width - w) // 2, h, w


@cached_njit
def whole_image_region(key, height, width, values):
    """The whole image: (0, 0, height, width)."""
    return 0, 0, height, width


@cached_njit
def resized_random_crop_params(key, height, width, out_h, out_w, shorter):
    """The region of an out_h x out_w crop at a uniform position of the image
    resized so that its shorter side is ``shorter``."""
    scale = min(height, width) / shorter
    h = max(1, min(height, int(np.rint(out_h * scale))))
    w = max(1, min(width, int(np.rint(out_w * scale))))
    top, left = _position(key, height, width, h, w)
    return top, left, h, w


# ---------------------------------------------------------------- the bound decoder


@dataclasses.dataclass(frozen=True, eq=False)
class CropDecoder(GeometricImageDecoder):
    """Decodes one region per sample of an image field into (h, w, 3) uint8:
    ``crop``, the operation that was bound (a :class:`Crop`), gives the
    region function, the output size, the flip probability and the
    interpolation.  Raw stored pixels are cropped and resized with
    ``slip_resize``, JPEGs with ``slip_jpeg_decode_crop_resize``, planes
    with ``slip_planes_crop_resize``.  Its
    output ``transform`` says where the stored pixels went
    (:mod:`slipstream.fields.geometry`)."""

    source: DecodeSource = dataclasses.field(repr=False)
    field: str
    crop: Crop

    @property
    def size(self) -> tuple[int, int]:
        """The output (height, width): the crop's."""
        return self.crop.output_size

    def runtime_values(self) -> tuple[float, tuple[Any, ...]]:
        """The crop's flip probability and the values of its region function."""
        return (float(self.crop.flip_p), self.crop.region_values())

    def generate_code(self):
        region, decode_region = self.crop.region(), self.region_decoder()

        def decode(storage, offsets, sizes, heights, widths, modes, failed, decodes, index, out, transform, status,
                   key, values):
            flip_p, region_values = values
            y, x, h, w = region(key, heights[index], widths[index], region_values)
            return decode_region(storage, offsets, sizes, heights, widths, modes, failed, decodes, index, out,
                                 transform, status, key, y, x, h, w, flip_p)

        return decode

    def region_decoder(self) -> Callable[..., Any]:
        """The compiled ``decode_region(storage, offsets, sizes, heights,
        widths, modes, failed, decodes, index, out, transform, status, key, y,
        x, h, w, flip_p) -> out``: decodes the region (``y``, ``x``, ``h``,
        ``w``) of sample ``index`` into ``out``, flipped with probability
        ``flip_p``, writes where the pixels went into ``transform`` and the
        outcome into ``status``.  Decoders whose region needs more than the
        image's size (:class:`RandomIoUCrop` reads the boxes) build on it."""
        # The output size is the out array's: a crop whose size is a value decodes at any size within its
        # largest (the memory), with the same machine code.
        interp, flip_flag = int(INTERPOLATIONS[self.crop.interpolation]), int(native.DecodeFlags.FLIP_X)
        decode_crop, resize, set_region = native.slip_jpeg_decode_crop_resize, native.slip_resize, geometry.set_region
        convert_crop = native.slip_planes_crop_resize

        @njit(nogil=True, inline="always")
        def from_pixels(data, out, args):
            height, width, y, x, h, w, flip = args
            return resize(data, height, width, 3, width * 3, y, x, h, w, out, out.shape[0], out.shape[1],
                          out.strides[0], interp, 1 if flip else 0)

        @njit(nogil=True, inline="always")
        def from_jpeg(data, out, args):
            _, _, y, x, h, w, flip = args
            return decode_crop(data, uint64(data.size), y, x, h, w, out.shape[0], out.shape[1],
                               flip_flag if flip else 0, interp, out, out.size, out.strides[0])

        @njit(nogil=True, inline="always")
        def from_planes(data, out, args):
            height, width, y, x, h, w, flip = args
            return convert_crop(data, uint64(data.size), height, width, y, x, h, w, out.shape[0], out.shape[1],
                                flip_flag if flip else 0, interp, out, out.size, out.strides[0])

        decode_sample = self.sample_decoder(from_pixels, from_jpeg, from_planes)

        @njit(nogil=True, inline="always")
        def decode_region(storage, offsets, sizes, heights, widths, modes, failed, decodes, index, out, transform,
                          status, key, y, x, h, w, flip_p):
            flip = flip_p > 0.0 and rnd.uniform(key, CROP_DRAWS.flip) < flip_p
            set_region(transform, y, x, h, w, out.shape[0], out.shape[1], flip)
            return decode_sample(storage, offsets, sizes, modes, failed, decodes, index, out, status,
                                 (heights[index], widths[index], y, x, h, w, flip))

        return decode_region


# ---------------------------------------------------------------- what users write


RegionFunction = Callable[[Any, int, int, tuple[Any, ...]], tuple[int, int, int, int]]
"""A compiled ``(key, height, width, values) -> (top, left, h, w)``: the
region of a height x width stored image that a crop keeps for the sample
whose random key is ``key``; ``values`` are the crop's
(:meth:`Crop.region_values`)."""


class Crop(Declares, FieldOperation, Foldable):
    """Base of the operations that decode one region of each image, resized
    to one output size: bound to a field, each becomes a
    :class:`CropDecoder` that calls its :meth:`region` function, and a
    ``RandomHorizontalFlip`` right after it folds into its ``flip_p``.
    Subclasses are frozen dataclasses that declare their arguments
    (:mod:`slipstream.compiler.params`), with ``flip_p`` and
    ``interpolation`` fields (or properties): the structural ones shape the
    decoder's code, its compile-cache fingerprint; the values reach the
    region function through :meth:`region_values`."""

    flip_p: float
    interpolation: str

    @property
    def output_size(self) -> tuple[int, int]:
        """The (height, width) of the decoded samples."""
        raise NotImplementedError(f"{type(self).__name__} must define output_size")

    def region(self) -> RegionFunction:
        """This operation's compiled region function (see :data:`RegionFunction`),
        made from its structure alone."""
        raise NotImplementedError(f"{type(self).__name__} must define region()")

    def region_values(self) -> tuple[Any, ...]:
        """The values the region function takes (none by default)."""
        return ()

    def bind(self, source: DecodeSource, field: str) -> CropDecoder:
        """The decoder this operation becomes when it is the first of ``field``'s pipeline."""
        return CropDecoder(source, field, self)

    def fold(self, following: Any) -> Any:
        """This operation joined with the one that follows it (e.g. a flip becomes the
        crop's ``flip_p``), or None when the two stay separate."""
        if isinstance(following, RandomHorizontalFlip) and self.flip_p == 0.0:
            return dataclasses.replace(self, flip_p=float(following.p))
        return None


class CroppableWindow(MakesWindows):
    """A window of frames (:class:`~slipstream.ops.VideoWindow`,
    :class:`~slipstream.ops.SequenceWindow`) that a crop after it folds
    into: :class:`WindowCrop` binds the pair through :meth:`bind_cropped`."""

    @abc.abstractmethod
    def bind_cropped(self, source: DecodeSource, field: str, crop: Crop) -> Any:
        """The decoder of ``field``'s windows, every frame cropped by ``crop``
        with one draw per window."""


@dataclasses.dataclass(frozen=True)
class WindowCrop(FieldOperation, Foldable, MakesWindows):
    """A window of frames with the crop that followed it, folded; what folds
    into the crop (a flip, a crop after ``Resize(s)``) folds into it here."""

    window: CroppableWindow
    crop: Crop

    def bind(self, source: DecodeSource, field: str) -> Any:
        """The window's decoder of cropped frames.

        Raises:
            ArgumentError: a ``Resize(s)`` that no crop follows: frames of
                different sizes.
        """
        if isinstance(self.crop, Resize) and isinstance(self.crop.size, int):
            raise ArgumentError(f"Resize({self.crop.size}) after {self.window!r} gives frames of different sizes; "
                                f"follow it with CenterCrop(size) or RandomCrop(size), or give (height, width)")
        return self.window.bind_cropped(source, field, self.crop)

    def fold(self, following: Any) -> WindowCrop | None:
        joined = self.crop.fold(following)
        return None if joined is None else dataclasses.replace(self, crop=joined)


def _size(size: int | Sequence[int]) -> tuple[int, int]:
    return SIZE.accept(size)


SIZE = Size()


@dataclasses.dataclass(frozen=True)
class ResolutionSchedule(Declares):
    """Progressive resizing, as FFCV's ImageNet recipe schedules it
    (``train_imagenet.py``'s ``get_resolution``): ``min_res`` up to epoch
    ``start_ramp``, ``max_res`` from epoch ``end_ramp``, and in between the
    linear ramp rounded to the nearest multiple of ``step``.  The defaults
    are FFCV's ResNet-50 configurations (160 to 192 px, ramped over epochs
    65 to 76 of 88).

    Given as a crop's size (``RandomResizedCrop(ResolutionSchedule())``),
    it sizes the crop's memory for ``max_res`` and the loader sets each
    epoch's size from it (:meth:`slipstream.Loader.set_epoch` or the epoch
    count), which compiles nothing; ``schedule(epoch)`` is that size.
    """

    min_res: int = param(Int(1, 1 << 16), "the side before the ramp", default=160)
    max_res: int = param(Int(1, 1 << 16), "the side after the ramp", default=192)
    start_ramp: int = param(Int(0), "the last epoch at min_res", default=65)
    end_ramp: int = param(Int(0), "the first epoch at max_res", default=76)
    step: int = param(Int(1, 1 << 16), "the ramp's sides are multiples of it", default=32)

    def __post_init__(self) -> None:
        if self.min_res > self.max_res or self.start_ramp > self.end_ramp:
            raise ArgumentError(f"ResolutionSchedule: needs min_res <= max_res and start_ramp <= end_ramp, got "
                                f"{self.min_res}, {self.max_res}, {self.start_ramp}, {self.end_ramp}")

    def __call__(self, epoch: int) -> int:
        """The side at ``epoch``."""
        if epoch <= self.start_ramp:
            return self.min_res
        if epoch >= self.end_ramp:
            return self.max_res
        fraction = (epoch - self.start_ramp) / (self.end_ramp - self.start_ramp)
        ramp = self.min_res + (self.max_res - self.min_res) * fraction
        return min(self.max_res, max(self.min_res, int(round(ramp / self.step)) * self.step))


def _crop_size(value: Any) -> tuple[int, int] | ResolutionSchedule:
    """A crop's size: an int or (height, width) (kept as a pair), or a :class:`ResolutionSchedule`."""
    return value if isinstance(value, ResolutionSchedule) else SIZE.accept(value)


CROP_SIZE = Custom(_crop_size, f"{SIZE.describe()}, or a ResolutionSchedule",
                   bad=SIZE.invalid(), good=(8, 8))
"""A crop's output size: a value, within the crop's largest size."""

_MAX_SIZE_DOC = ("the largest size the crop will be set to (`Loader.set_resolution`, a schedule): its memory; "
                 "None: `size` (a `ResolutionSchedule`'s `max_res`)")


class Resizable(Crop):
    """A crop whose output size is a value: its memory is planned for
    :attr:`largest`, and a loader can change its size up to that between
    epochs (:meth:`slipstream.Loader.set_resolution`, or a
    :class:`ResolutionSchedule` as its ``size``) with the machine code it
    has.  Subclasses have the fields ``size`` and ``max_size``."""

    size: tuple[int, int] | ResolutionSchedule
    max_size: tuple[int, int] | None

    def __post_init__(self) -> None:
        largest = self.largest
        if any(s > m for s, m in zip(self.output_size, largest)):
            raise ArgumentError(f"{type(self).__name__}: size {self.output_size} is larger than max_size {largest}")

    @property
    def output_size(self) -> tuple[int, int]:
        """The (height, width) of the decoded samples (a schedule's at epoch 0)."""
        return (self.size(0),) * 2 if isinstance(self.size, ResolutionSchedule) else self.size

    @property
    def largest(self) -> tuple[int, int]:
        """The largest (height, width) the crop may be set to: the memory its samples have."""
        if self.max_size is not None:
            return self.max_size
        return (self.size.max_res,) * 2 if isinstance(self.size, ResolutionSchedule) else self.size

    @property
    def resizable(self) -> bool:
        """Whether its size can change: a schedule, or a ``max_size`` above the size."""
        return isinstance(self.size, ResolutionSchedule) or self.largest != self.output_size

    def size_at(self, epoch: int) -> tuple[int, int]:
        """Its size at ``epoch``: its schedule's, or its size."""
        return (self.size(epoch),) * 2 if isinstance(self.size, ResolutionSchedule) else self.output_size

    def at(self, size: Any) -> Resizable:
        """This crop decoding at ``size`` (an int or (height, width)), with the same largest size.

        Raises:
            ArgumentError: ``size`` is larger than :attr:`largest`.
        """
        return dataclasses.replace(self, size=SIZE.accept(size), max_size=self.largest)

INTERPOLATION = Choice(tuple(INTERPOLATIONS), normalize=enum_name)
_SIZE_DOC = "output (height, width) in pixels; an int gives a square"
_INTERPOLATION_DOC = "how the region is resampled to the output size"
_FLIP_DOC = "probability of a left-right mirror in the decode (a following `RandomHorizontalFlip` folds in here)"


@dataclasses.dataclass(frozen=True)
class RandomResizedCrop(Resizable):
    """A random crop of random area and aspect ratio, resized to ``size``
    (torchvision's ``RandomResizedCrop``: area fraction uniform in ``scale``,
    aspect ratio log-uniform in ``ratio``, 10 tries, then a central crop).
    ``analytic=True`` samples a fitting crop in one draw instead (see
    :func:`analytic_crop_params`).  Starts an image field's pipeline."""

    size: int | tuple[int, int] | ResolutionSchedule = param(CROP_SIZE, _SIZE_DOC)
    scale: tuple[float, float] = param(Pair(Float(0.0, 1.0, low_open=True)),
                                       "range of the crop's area, as a fraction of the image's", default=(0.08, 1.0))
    ratio: tuple[float, float] = param(Pair(Float(0.0, low_open=True)),
                                       "range of the crop's aspect ratio, width / height, drawn log-uniformly",
                                       default=(3 / 4, 4 / 3))
    interpolation: str = param(INTERPOLATION, _INTERPOLATION_DOC, default="bilinear", structural=True)
    analytic: bool = param(Bool(), "one draw of a crop that fits instead of torchvision's 10 tries",
                           default=False, structural=True)
    flip_p: float = param(PROBABILITY, _FLIP_DOC, default=0.0)
    max_size: int | tuple[int, int] | None = param(OrNone(SIZE), _MAX_SIZE_DOC, default=None, structural=True)

    def region(self) -> RegionFunction:
        """torchvision's sampling (:func:`random_resized_crop_params`), or
        with ``analytic`` :func:`analytic_crop_params`."""
        if self.analytic:
            @uncached_njit
            def analytic(key, height, width, values):
                scale_lo, scale_hi, log_lo, log_hi = values
                return analytic_crop_params(key, height, width, scale_lo, scale_hi, log_lo, log_hi)

            return analytic

        @uncached_njit
        def rejection(key, height, width, values):
            scale_lo, scale_hi, log_lo, log_hi = values
            return random_resized_crop_params(key, height, width, scale_lo, scale_hi, log_lo, log_hi, ATTEMPTS)

        return rejection

    def region_values(self) -> tuple[float, float, float, float]:
        """The area range and the logarithms of the ratio range."""
        return (self.scale[0], self.scale[1], math.log(self.ratio[0]), math.log(self.ratio[1]))


@dataclasses.dataclass(frozen=True)
class CenterCrop(Resizable):
    """The central crop covering ``ratio`` of the shorter side, resized to
    ``size``: ImageNet evaluation's "resize to 256, center crop 224" is
    ``CenterCrop(224, ratio=224/256)``.  After ``Resize(s)``, it is
    torchvision's ``CenterCrop(size)`` of the resized image, for a size
    whose sides are at most ``s`` (a larger one, which torchvision pads, is
    refused)."""

    size: int | tuple[int, int] | ResolutionSchedule = param(CROP_SIZE, _SIZE_DOC)
    ratio: float = param(Float(0.0, 1.0, low_open=True), "fraction of the shorter side the crop covers",
                         default=224 / 256)
    interpolation: str = param(INTERPOLATION, _INTERPOLATION_DOC, default="bilinear", structural=True)
    flip_p: float = param(PROBABILITY, _FLIP_DOC, default=0.0)
    max_size: int | tuple[int, int] | None = param(OrNone(SIZE), _MAX_SIZE_DOC, default=None, structural=True)

    def region(self) -> RegionFunction:
        """:func:`center_crop_params` with ``ratio`` as the fraction."""

        @uncached_njit
        def center(key, height, width, values):
            fraction, out_h, out_w = values
            return center_crop_params(height, width, out_h, out_w, fraction)

        return center

    def region_values(self) -> tuple[float, int, int]:
        """The fraction of the shorter side, and the output size."""
        return (self.ratio, *self.output_size)


@dataclasses.dataclass(frozen=True)
class RandomCrop(Declares, FieldOperation):
    """A ``size`` crop at a uniform position; only after ``Resize`` (which
    fixes the scale), as in ``[Resize(256), RandomCrop(224)]``."""

    size: int | tuple[int, int] = param(SIZE, "crop (height, width) in pixels of the image resized by the preceding "
                                        "`Resize(s)`", structural=True)

    def bind(self, source: DecodeSource, field: str) -> Any:
        """Refused: the crop's scale is set by the ``Resize`` before it, with which it folds."""
        raise ValueError(f"{self!r} in the pipeline of {field!r} must follow Resize(shorter side), as in "
                         f"[Resize(256), RandomCrop(224)]; RandomResizedCrop(size) crops at random scales")


def _resize_size(value: Any) -> int | tuple[int, int]:
    """``Resize``'s size: an int (the shorter side) kept as an int, or an
    (height, width) pair."""
    if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
        return Int(1).accept(value)
    return SIZE.accept(value)


@dataclasses.dataclass(frozen=True)
class Resize(Crop):
    """As torchvision's ``Resize``: ``Resize((h, w))`` scales the whole image
    to h x w; ``Resize(s)`` scales it so that its shorter side is ``s`` and
    must be followed by ``CenterCrop(c)`` or ``RandomCrop(c)``, with which it
    becomes one decode of just the region the crop keeps."""

    size: int | tuple[int, int] = param(
        Custom(_resize_size, "an int s >= 1 (the shorter side) or an (height, width) pair of ints >= 1",
               bad=(0, -1, 1.5, True, (0, 3), (3,), math.nan, None), good=(8, 8)),
        "`(height, width)`: the output size in pixels; an int `s`: the length of the shorter side, in pixels, that "
        "the following crop is taken at", structural=True)
    interpolation: str = param(INTERPOLATION, _INTERPOLATION_DOC, default="bilinear", structural=True)
    flip_p: float = param(PROBABILITY, _FLIP_DOC, default=0.0)

    @property
    def output_size(self) -> tuple[int, int]:
        """The (height, width) of the decoded samples, for ``Resize((h, w))``."""
        if isinstance(self.size, int):
            raise ValueError(f"Resize({self.size}) gives images of different sizes")  # noqa: TRY004  (as bind)
        return self.size

    def region(self) -> RegionFunction:
        """The whole image."""
        return whole_image_region

    def bind(self, source: DecodeSource, field: str) -> CropDecoder:
        """The decoder this operation becomes when it is the first of ``field``'s pipeline."""
        if isinstance(self.size, int):
            raise ValueError(f"Resize({self.size}) gives images of different sizes; follow it with "
                             f"CenterCrop(size) or RandomCrop(size) in the pipeline of {field!r}, or give "
                             f"(height, width)")
        return super().bind(source, field)

    def fold(self, following: Any) -> Any:
        """This operation joined with the one that follows it (e.g. a flip becomes the
        crop's ``flip_p``), or None when the two stay separate."""
        if not isinstance(self.size, int):
            return super().fold(following)
        if isinstance(following, (CenterCrop, RandomCrop)):
            if isinstance(following, Resizable) and following.resizable:
                raise ArgumentError(f"{following!r} after Resize({self.size}) cannot change its size: give it no "
                                    f"max_size or schedule (the crop of a Resize(s) is one fixed size)")
            out_h, out_w = following.output_size if isinstance(following, Resizable) else following.size
            if max(out_h, out_w) > self.size:
                # torchvision pads such a crop (CenterCrop) or refuses it (RandomCrop); the fused decode can do
                # neither, and clipping the region would stretch the image.
                raise ArgumentError(f"{type(following).__name__}({following.size!r}) after Resize({self.size}) "
                                    f"is larger than the resized image's shorter side {self.size}: the crop must "
                                    f"fit in the image (a crop side at most {self.size}, or a larger Resize)")
            # Two independent flips (the resize's, the crop's) leave the image flipped when exactly one fires.
            p, q = self.flip_p, float(getattr(following, "flip_p", 0.0))
            return _ResizedCrop(self, out_h, out_w, random=isinstance(following, RandomCrop),
                                flip_p=p * (1 - q) + q * (1 - p))
        return None


@dataclasses.dataclass(frozen=True)
class _ResizedCrop(Crop):
    """``Resize(s)`` followed by ``CenterCrop`` or ``RandomCrop``, folded."""

    resize: Resize
    out_h: int
    out_w: int
    random: bool
    flip_p: float = param(PROBABILITY, _FLIP_DOC, default=0.0)

    @property
    def interpolation(self) -> str:
        """The interpolation of the ``Resize``."""
        return self.resize.interpolation

    @property
    def output_size(self) -> tuple[int, int]:
        """The (height, width) of the decoded samples: the crop's size."""
        return self.out_h, self.out_w

    def region(self) -> RegionFunction:
        """:func:`resized_random_crop_params` or :func:`resized_center_crop_params`
        with the ``Resize``'s shorter side."""
        out_h, out_w, shorter = self.out_h, self.out_w, int(self.resize.size)
        if self.random:
            @uncached_njit
            def resized_random(key, height, width, values):
                return resized_random_crop_params(key, height, width, out_h, out_w, shorter)

            return resized_random

        @uncached_njit
        def resized_center(key, height, width, values):
            return resized_center_crop_params(height, width, out_h, out_w, shorter)

        return resized_center
