"""Per-sample augmentations on (height, width, channels) uint8 images,
fused into the stage's sample loop.  Pixel loops index flat views with
unsigned integers so that LLVM vectorizes them (see
:mod:`slipstream.compiler.operation`)."""

from __future__ import annotations

import dataclasses
import math
from numbers import Real
from typing import Any, ClassVar

import numpy as np
from numba import types, uint64
from numba.extending import overload

from slipstream.compiler import Allocation, Geometry, Operation, State
from slipstream.compiler import random as rnd
from slipstream.compiler.codegen import copy_sample
from slipstream.compiler.params import PROBABILITY, Custom, Float, Int, Numbers, Pair, Refused, Spread, param
from slipstream.compiler.jit import cached_njit
from slipstream.compiler.rewrites import LooksAhead
from slipstream.errors import ArgumentError
from slipstream.fields import geometry
from slipstream.ops import warps


_FLIP_DRAWS = rnd.named_draws("flip")
_JITTER_DRAWS = rnd.named_draws("order", "brightness", "contrast", "saturation", "hue")  # order + k: factor k's rank
_COIN_DRAWS = rnd.named_draws("apply")  # the operations that apply with probability p and draw nothing else
_BLUR_DRAWS = rnd.named_draws("sigma")
# RandomErasing: try t draws area + t and aspect + t; pixel i of a noise box (channel-major) is normal(noise + i).
_ERASE_DRAWS = rnd.named_draws("apply", "area", "aspect", "top", "left", "noise")
_CUTOUT_DRAWS = rnd.named_draws("center_y", "center_x")
_TRANSLATE_DRAWS = rnd.named_draws("shift_y", "shift_x")


def _is_number(value: Any) -> bool:
    """Whether ``value`` is a real number (NumPy's too), not a bool."""
    return isinstance(value, Real) and not isinstance(value, bool)


def _check_probability(p: Any) -> None:
    if not _is_number(p) or not 0.0 <= p <= 1.0:
        raise ArgumentError(f"p must be a number in [0, 1], got {p!r}")


def _real_pair(value: Any) -> tuple[float, float] | None:
    """``value`` as two floats when it is a pair of real numbers, else None."""
    if not isinstance(value, (tuple, list, np.ndarray)) or len(value) != 2 or \
            not all(_is_number(v) for v in value):
        return None
    return (float(value[0]), float(value[1]))


def _sigma_range(sigma: Any) -> tuple[float, float]:
    """A Gaussian blur's ``sigma`` (:data:`SIGMA`), or an ArgumentError."""
    try:
        return _sigma(sigma)
    except Refused:
        raise ArgumentError(f"sigma must be a number or a (low, high) pair with 0 < low <= high, got {sigma!r}") \
            from None


def _erasing_ranges(name: str, scale: Any, ratio: Any) -> tuple[tuple[float, float], tuple[float, float]]:
    """A random erasing's ``scale`` and ``ratio`` as float pairs, refused
    unless 0 <= scale's low <= high <= 1 and 0 < ratio's low <= high
    (torchvision's rules)."""
    area, aspect = _real_pair(scale), _real_pair(ratio)
    if area is None or not 0.0 <= area[0] <= area[1] <= 1.0:
        raise ArgumentError(f"{name}: scale must be a pair satisfying 0 <= low <= high <= 1, got {scale!r}")
    if aspect is None or not 0.0 < aspect[0] <= aspect[1] < math.inf:
        raise ArgumentError(f"{name}: ratio must be a pair satisfying 0 < low <= high, got {ratio!r}")
    return area, aspect


def _check_image(op: Operation, state: State) -> None:
    if len(state.shape) != 3 or state.dtype != np.uint8:
        raise ValueError(f"{type(op).__name__} takes (height, width, channels) uint8 images, got "
                         f"{state.shape} {state.dtype}")


def _moved(state: State) -> tuple[State, list[Allocation]]:
    """The declaration of a geometric operation that keeps the image's shape:
    the moved image, and where its pixels went (:mod:`slipstream.fields.geometry`)."""
    return state, [Allocation(state.shape, state.dtype),
                   Allocation((geometry.SIZE,), np.float64, name=geometry.TRANSFORM)]


@dataclasses.dataclass(frozen=True)
class _RandomFlip(Operation):
    """A mirror applied with probability ``p``, into its own output; its
    output ``transform`` says whether it was."""

    geometry: ClassVar[Geometry] = Geometry.MAPPED

    p: float = param(PROBABILITY, "probability of mirroring a sample", default=0.5)

    def declare(self, state):
        _check_image(self, state)
        return _moved(state)


@dataclasses.dataclass(frozen=True)
class RandomHorizontalFlip(_RandomFlip):
    """Mirror left-right with probability ``p``.  Directly after a decoding
    crop it costs nothing: the loader folds it into the decode call."""

    def generate_code(self):
        one, set_shift = uint64(1), geometry.set_shift

        def flip(x, out, transform, key, values):
            (p,) = values
            flipped = rnd.uniform(key, _FLIP_DRAWS.flip) < p
            set_shift(transform, x.shape[0], x.shape[1], 0, 0, False, flipped)
            if not flipped:  # the output is always ``out``: the compiler relies on it
                return copy_sample(out, x)
            height, width, channels = uint64(x.shape[0]), uint64(x.shape[1]), uint64(x.shape[2])
            src, dst = x.reshape(-1), out.reshape(-1)
            row = width * channels
            for r in range(height):
                base = r * row
                for c in range(width):
                    s, d = base + (width - one - c) * channels, base + c * channels
                    for k in range(channels):
                        dst[d + k] = src[s + k]
            return out

        return flip


@dataclasses.dataclass(frozen=True)
class RandomVerticalFlip(_RandomFlip):
    """Mirror top-bottom with probability ``p``."""

    def generate_code(self):
        one, set_shift = uint64(1), geometry.set_shift

        def flip(x, out, transform, key, values):
            (p,) = values
            flipped = rnd.uniform(key, _FLIP_DRAWS.flip) < p
            set_shift(transform, x.shape[0], x.shape[1], 0, 0, flipped, False)
            if not flipped:
                return copy_sample(out, x)
            height = uint64(x.shape[0])
            row = uint64(x.shape[1] * x.shape[2])
            src, dst = x.reshape(-1), out.reshape(-1)
            for r in range(height):
                s, d = (height - one - r) * row, r * row
                for j in range(row):
                    dst[d + j] = src[s + j]
            return out

        return flip


# ---------------------------------------------------------------- colour
#
# As torchvision's tensor functions on uint8 images: arithmetic in float32,
# clamped to [0, 255], truncated back to uint8; grayscale is
# 0.2989 R + 0.587 G + 0.114 B.

LUMA = (0.2989, 0.587, 0.114)
"""torchvision's grayscale weights of R, G and B (ITU-R BT.601, rounded)."""
_LUMA_R, _LUMA_G, _LUMA_B = (np.float32(w) for w in LUMA)


@cached_njit
def _gray(r, g, b):
    return _LUMA_R * r + _LUMA_G * g + _LUMA_B * b


@cached_njit
def _to_u8(v):
    return np.uint8(min(max(v, np.float32(0.0)), np.float32(255.0)))


@cached_njit
def adjust_brightness(x, factor):
    flat = x.reshape(-1)
    f = np.float32(factor)
    for j in range(uint64(flat.size)):
        flat[j] = _to_u8(np.float32(flat[j]) * f)


@cached_njit
def adjust_contrast(x, factor):
    """Blend with the mean of the grayscale image (torchvision rounds nothing
    here: the mean is a float)."""
    flat = x.reshape(-1)
    pixels = uint64(flat.size // 3)
    total = 0.0
    for p in range(pixels):
        total += np.uint8(_gray(np.float32(flat[3 * p]), np.float32(flat[3 * p + 1]), np.float32(flat[3 * p + 2])))
    mean = np.float32(total / max(pixels, uint64(1)))
    f = np.float32(factor)
    rest = (np.float32(1.0) - f) * mean
    for j in range(uint64(flat.size)):
        flat[j] = _to_u8(f * np.float32(flat[j]) + rest)


@cached_njit
def adjust_saturation(x, factor):
    """Blend each pixel with its own gray value."""
    flat = x.reshape(-1)
    f = np.float32(factor)
    g = np.float32(1.0) - f
    for p in range(uint64(flat.size // 3)):
        r, gr, b = np.float32(flat[3 * p]), np.float32(flat[3 * p + 1]), np.float32(flat[3 * p + 2])
        gray = np.float32(np.uint8(_gray(r, gr, b))) * g
        flat[3 * p] = _to_u8(f * r + gray)
        flat[3 * p + 1] = _to_u8(f * gr + gray)
        flat[3 * p + 2] = _to_u8(f * b + gray)


@cached_njit
def adjust_hue(x, shift):
    """Rotate the hue by ``shift`` turns (-0.5 .. 0.5): RGB -> HSV -> RGB."""
    flat = x.reshape(-1)
    for p in range(uint64(flat.size // 3)):
        r, g, b = flat[3 * p] / 255.0, flat[3 * p + 1] / 255.0, flat[3 * p + 2] / 255.0
        hi, lo = max(r, g, b), min(r, g, b)
        chroma = hi - lo
        if chroma == 0.0:
            continue
        if hi == r:
            h = ((g - b) / chroma) % 6.0
        elif hi == g:
            h = (b - r) / chroma + 2.0
        else:
            h = (r - g) / chroma + 4.0
        h = (h / 6.0 + shift) % 1.0
        s, v = chroma / hi, hi
        i = int(h * 6.0) % 6
        f = h * 6.0 - int(h * 6.0)
        pp, q, t = v * (1.0 - s), v * (1.0 - s * f), v * (1.0 - s * (1.0 - f))
        if i == 0:
            r, g, b = v, t, pp
        elif i == 1:
            r, g, b = q, v, pp
        elif i == 2:
            r, g, b = pp, v, t
        elif i == 3:
            r, g, b = pp, q, v
        elif i == 4:
            r, g, b = t, pp, v
        else:
            r, g, b = v, pp, q
        flat[3 * p] = _to_u8(np.float32(r * 255.0))
        flat[3 * p + 1] = _to_u8(np.float32(g * 255.0))
        flat[3 * p + 2] = _to_u8(np.float32(b * 255.0))


def _factor_range(name: str, value: Any, center: float = 1.0, bound: float | None = None) -> tuple[float, float]:
    """torchvision's parameter forms: ``v`` means [center - v, center + v]
    (clipped at 0), a pair is the range itself."""
    if value is None:
        return (center, center)
    if _is_number(value):
        if not value >= 0:
            raise ArgumentError(f"{name} must be non-negative, got {value}")
        low, high = center - float(value), center + float(value)
        if bound is None:
            low = max(low, 0.0)
    else:
        pair = _real_pair(value)
        if pair is None:
            raise ArgumentError(f"{name} must be a number v >= 0 or a (low, high) pair of numbers, got {value!r}")
        low, high = pair
    finite = math.isfinite(low) and math.isfinite(high)
    within = -bound <= low <= high <= bound if bound is not None else 0 <= low <= high
    if not (finite and within):
        raise ArgumentError(f"{name} range {(low, high)} is not valid")
    return (float(low), float(high))


FACTOR = Spread(none=True)
"""A colour factor's range: ``v`` for [max(0, 1 - v), 1 + v], or (low, high); None: none (torchvision's default)."""
HUE = Spread(center=0.0, floor=-0.5, ceiling=0.5, none=True)
"""A hue shift's range in turns: ``h`` for [-h, h], or (low, high), within [-0.5, 0.5]."""


@dataclasses.dataclass(frozen=True)
class ColorJitter(Operation):
    """torchvision's ``ColorJitter``: brightness, contrast and saturation
    factors drawn uniformly from [1 - v, 1 + v] (or a given range), a hue
    shift from [-hue, hue] (at most 0.5), applied in a random order per
    sample.  Works in place on (height, width, 3) uint8 images."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    brightness: tuple[float, float] = param(FACTOR, "multiplicative factor, drawn uniformly from the range (`1 - v` "
                                            "clipped at 0)", default=0.0)
    contrast: tuple[float, float] = param(FACTOR, "factor of the blend with the image's mean gray, drawn as for "
                                          "`brightness`", default=0.0)
    saturation: tuple[float, float] = param(FACTOR, "factor of the blend with each pixel's gray, drawn as for "
                                            "`brightness`", default=0.0)
    hue: tuple[float, float] = param(HUE, "hue shift in turns (1 = 360°), drawn uniformly from the range; `v` at "
                                     "most 0.5", default=0.0)

    def declare(self, state):
        _check_image(self, state)
        if state.shape[2] != 3:
            raise ValueError(f"ColorJitter takes RGB images, got {state.shape[2]} channels")
        return state, None

    def runtime_values(self) -> tuple[tuple[bool, float, float], ...]:
        """Per step (brightness, contrast, saturation, hue): whether it
        applies (its range is more than the neutral value: 1, or 0 for hue)
        and its range."""
        steps = ((self.brightness, 1.0), (self.contrast, 1.0), (self.saturation, 1.0), (self.hue, 0.0))
        return tuple((low != high or low != neutral, low, high) for (low, high), neutral in steps)

    def generate_code(self):
        def jitter(x, key, values):
            (use_b, b_lo, b_hi), (use_c, c_lo, c_hi), (use_s, s_lo, s_hi), (use_h, h_lo, h_hi) = values
            order = np.argsort(np.array([rnd.uniform(key, _JITTER_DRAWS.order + k) for k in range(4)]))
            for step in order:
                if step == 0 and use_b:
                    adjust_brightness(x, rnd.uniform_range(key, _JITTER_DRAWS.brightness, b_lo, b_hi))
                elif step == 1 and use_c:
                    adjust_contrast(x, rnd.uniform_range(key, _JITTER_DRAWS.contrast, c_lo, c_hi))
                elif step == 2 and use_s:
                    adjust_saturation(x, rnd.uniform_range(key, _JITTER_DRAWS.saturation, s_lo, s_hi))
                elif step == 3 and use_h:
                    adjust_hue(x, rnd.uniform_range(key, _JITTER_DRAWS.hue, h_lo, h_hi))
            return x

        return jitter


def RandomBrightness(brightness: Any) -> ColorJitter:  # noqa: N802  (a ColorJitter of one factor)
    """Brightness factor from [1 - b, 1 + b] (or the range given)."""
    return ColorJitter(brightness=brightness)


def RandomContrast(contrast: Any) -> ColorJitter:  # noqa: N802
    """Contrast factor from [1 - c, 1 + c] (or the range given)."""
    return ColorJitter(contrast=contrast)


def RandomSaturation(saturation: Any) -> ColorJitter:  # noqa: N802
    """Saturation factor from [1 - s, 1 + s] (or the range given)."""
    return ColorJitter(saturation=saturation)


def RandomHue(hue: Any) -> ColorJitter:  # noqa: N802
    """Hue shift from [-h, h] (or the range given), in turns."""
    return ColorJitter(hue=hue)


@dataclasses.dataclass(frozen=True)
class RandomGrayscale(Operation):
    """Replace the image by its grayscale, in all three channels, with
    probability ``p``.  Takes (height, width, 3) uint8 images."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    p: float = param(PROBABILITY, "probability of replacing the sample by its grayscale", default=0.1)

    def declare(self, state):
        _check_image(self, state)
        if state.shape[2] != 3:
            raise ArgumentError(f"RandomGrayscale takes RGB images (3 channels), got {state.shape[2]} channels")
        return state, None

    def generate_code(self):
        def grayscale(x, key, values):
            (p,) = values
            if rnd.uniform(key, _COIN_DRAWS.apply) < p:
                flat = x.reshape(-1)
                for q in range(uint64(flat.size // 3)):
                    v = np.uint8(_gray(np.float32(flat[3 * q]), np.float32(flat[3 * q + 1]),
                                       np.float32(flat[3 * q + 2])))
                    flat[3 * q] = v
                    flat[3 * q + 1] = v
                    flat[3 * q + 2] = v
            return x

        return grayscale


@dataclasses.dataclass(frozen=True)
class RandomSolarize(Operation):
    """With probability ``p``, every value ``v >= threshold`` becomes ``255 -
    v``; ``threshold`` is a number in [0, 255] (a float too: 127.5 inverts
    128 and up)."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    threshold: float = param(Float(0.0, 255.0), "uint8 value from which values are inverted", default=128)
    p: float = param(PROBABILITY, "probability of solarizing the sample", default=0.5)

    def declare(self, state):
        _check_image(self, state)
        return state, None

    def runtime_values(self) -> tuple[float, np.uint8]:
        """The probability, and the smallest uint8 value inverted: for an
        integer v, v >= threshold exactly when v >= ceil(threshold), which
        lies in 0..255."""
        return (self.p, np.uint8(math.ceil(self.threshold)))

    def generate_code(self):
        top = np.uint8(255)

        def solarize(x, key, values):
            p, cut = values
            if rnd.uniform(key, _COIN_DRAWS.apply) < p:
                flat = x.reshape(-1)
                for j in range(uint64(flat.size)):
                    v = flat[j]
                    flat[j] = top - v if v >= cut else v
            return x

        return solarize


# ---------------------------------------------------------------- geometry and occlusion


def _odd_kernel(value: Any) -> int:
    """A blur's ``kernel_size``: an odd int in [1, 1023]."""
    size = Int(1, 1023).accept(value)
    if size % 2 == 0:
        raise Refused()
    return size


KERNEL_SIZE = Custom(_odd_kernel, "an odd int in [1, 1023]", bad=(0, 4, -3, 1025, 3.0, 2.5, math.nan, True, None, "3"),
                     good=3)
"""A blur kernel's width and height in pixels."""

_SIGMA = Float(0.0, low_open=True)


def _sigma(value: Any) -> tuple[float, float]:
    """A blur's ``sigma``: a number s > 0 (meaning (s, s)) or a (low, high)
    pair of them, kept as a float pair."""
    if isinstance(value, Real):
        s = _SIGMA.accept(value)
        return (s, s)
    return Pair(_SIGMA).accept(value)


SIGMA = Custom(_sigma, "a number s > 0 (meaning (s, s)) or a (low, high) pair of numbers > 0, low <= high",
               bad=(0, -1.0, math.nan, math.inf, True, (2.0, 0.1), (0.0, 1.0), (1.0, math.inf), (1.0,), "1", None),
               good=(0.5, 1.0))
"""The range a blur's standard deviation is drawn from."""


@dataclasses.dataclass(frozen=True)
class GaussianBlur(Operation):
    """torchvision's ``GaussianBlur``: a ``kernel_size`` Gaussian kernel
    (odd) with sigma drawn uniformly from ``sigma`` per sample, separable,
    reflecting at the borders, rounded to uint8."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    kernel_size: int = param(KERNEL_SIZE, "kernel width and height in pixels", structural=True)
    sigma: tuple[float, float] = param(SIGMA, "range of the standard deviation in pixels, drawn uniformly per sample",
                                       default=(0.1, 2.0))

    def declare(self, state):
        _check_image(self, state)
        return state, [Allocation(state.shape, state.dtype), Allocation(state.shape, np.float32)]

    def generate_code(self):
        radius = self.kernel_size // 2

        def blur(x, out, rows, key, values):
            ((lo, hi),) = values
            sigma = rnd.uniform_range(key, _BLUR_DRAWS.sigma, lo, hi)
            weights = np.empty(2 * radius + 1, np.float32)
            total = 0.0
            for t in range(-radius, radius + 1):
                w = np.exp(-0.5 * (t / sigma) ** 2)
                weights[t + radius] = w
                total += w
            for t in range(2 * radius + 1):
                weights[t] = weights[t] / total
            height, width, channels = x.shape
            for r in range(height):  # along rows, into float
                for c in range(width):
                    for k in range(channels):
                        acc = np.float32(0.0)
                        for t in range(-radius, radius + 1):
                            cc = _reflect(c + t, width)
                            acc += weights[t + radius] * np.float32(x[r, cc, k])
                        rows[r, c, k] = acc
            for r in range(height):  # along columns, rounded
                for c in range(width):
                    for k in range(channels):
                        acc = np.float32(0.0)
                        for t in range(-radius, radius + 1):
                            acc += weights[t + radius] * rows[_reflect(r + t, height), c, k]
                        out[r, c, k] = np.uint8(min(max(np.rint(acc), 0.0), 255.0))
            return out

        return blur


@cached_njit
def _reflect(i, n):
    """Index i reflected into [0, n) without repeating the edge (torch's "reflect")."""
    if n == 1:
        return 0
    period = 2 * n - 2
    i = abs(i) % period
    return period - i if i >= n else i


def _erase_value(value: Any) -> Any:
    """RandomErasing's ``value``: None, ``"random"``, or a number or one
    per channel (finite), kept as a float or a tuple of floats."""
    if value is None or value == "random":
        return value
    if isinstance(value, str):
        raise Refused()
    numbers = _fill_numbers(value)
    if not numbers or not all(math.isfinite(v) for v in numbers):
        raise Refused()
    return numbers[0] if _is_number(value) else numbers


ERASE_VALUE = Custom(_erase_value, 'None, a number, one number per channel or `"random"`',
                     bad=("noise", math.nan, (1.0, math.inf), (), True), good=0.0)


@dataclasses.dataclass(frozen=True)
class RandomErasing(Operation, LooksAhead):
    """torchvision's ``RandomErasing``: with probability ``p``, a rectangle
    of area fraction in ``scale`` and aspect ratio (log-uniform) in ``ratio``
    is set to ``value`` (one number or one per channel); up to 10 tries.

    Takes (height, width, channels) uint8 images, or the (channels, height,
    width) float samples ``Normalize`` makes.  ``value=None`` (the default)
    is torchvision's: zero after normalization.  After ``Normalize`` that is
    0; before it, the colour the ``Normalize`` that follows turns into 0
    (its mean x 255, rounded: within half a level of 0), or black when none
    follows.  ``value="random"`` (torchvision's, and timm's ``mode="pixel"``)
    fills each pixel of each channel with its own standard normal draw; it
    takes the float samples only."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    p: float = param(PROBABILITY, "probability of erasing a rectangle", default=0.5)
    scale: tuple[float, float] = param(Pair(Float(0.0, 1.0)), "range of the rectangle's area as a fraction of the "
                                       "image's", default=(0.02, 0.33))
    ratio: tuple[float, float] = param(Pair(Float(0.0, low_open=True)), "range of the rectangle's aspect ratio, "
                                       "height / width, drawn log-uniformly", default=(0.3, 3.3))
    value: Any = param(ERASE_VALUE, "what the rectangle is set to; `None`: zero after normalization, as "
                       "torchvision's; `\"random\"`: a standard normal draw per pixel and channel", default=None)

    def settled(self, following: list[Any]) -> RandomErasing:
        if self.value is not None:
            return self
        from slipstream.ops.pack import Normalize  # imported here: pack's module is the later one

        mean = next((entry.mean for entry in following if isinstance(entry, Normalize)), None)
        if mean is None:  # black; spelt 0, as before, which keeps the operation's random keys
            return dataclasses.replace(self, value=0)
        return dataclasses.replace(self, value=tuple(int(np.rint(m * 255.0)) for m in mean))

    def declare(self, state):
        if state.dtype in (np.float32, np.float16) and len(state.shape) == 3 and state.shape[0] in (1, 3):
            self._check_value(state.shape[0])
            return state, None
        if len(state.shape) != 3 or state.dtype != np.uint8:
            raise ValueError(f"RandomErasing takes (height, width, channels) uint8 images or the (channels, height, "
                             f"width) float samples of Normalize, got {state.shape} {state.dtype}")
        if self.value == "random":
            raise ValueError("RandomErasing(value='random') fills with standard normal values, which only the float "
                             "samples of Normalize hold: place it after Normalize")
        if self.value is not None:
            warps.fill_values(self.value, "RandomErasing's value on uint8 images")
        self._check_value(state.shape[2])
        return state, None

    def _check_value(self, channels: int) -> None:
        """Refuse a value of other than 1 or ``channels`` numbers."""
        if isinstance(self.value, str) or self.value is None:
            return
        count = len(_fill_numbers(self.value))
        if count not in (1, channels):
            raise ArgumentError(f"RandomErasing's value has {count} numbers for images of {channels} channels: give "
                                f"one number, or one per channel ({channels})")

    def runtime_values(self) -> tuple[float, float, float, float, float, bool, np.ndarray, np.ndarray]:
        """The probability, the area range, the logarithms of the ratio
        range, whether to fill with noise, and the fill (its float16 bits
        too: compiled code holds float16 samples as their bits)."""
        noise = self.value == "random"
        fill = np.zeros(1) if noise else np.array(_fill_numbers(0 if self.value is None else self.value), np.float64)
        return (self.p, self.scale[0], self.scale[1], math.log(self.ratio[0]), math.log(self.ratio[1]), noise, fill,
                fill.astype(np.float16).view(np.uint16))

    def generate_code(self):
        def erase(x, key, values):
            p, s_lo, s_hi, log_lo, log_hi, noise, fill, fill_bits = values
            if not rnd.uniform(key, _ERASE_DRAWS.apply) < p:
                return x
            height, width = _image_size(x)
            area = height * width
            for attempt in range(10):
                target = area * rnd.uniform_range(key, _ERASE_DRAWS.area + attempt, s_lo, s_hi)
                aspect = np.exp(rnd.uniform_range(key, _ERASE_DRAWS.aspect + attempt, log_lo, log_hi))
                h = int(np.rint(np.sqrt(target * aspect)))
                w = int(np.rint(np.sqrt(target / aspect)))
                if h < height and w < width:
                    top = rnd.integers(key, _ERASE_DRAWS.top, 0, height - h + 1)
                    left = rnd.integers(key, _ERASE_DRAWS.left, 0, width - w + 1)
                    if noise:
                        _fill_noise(x, top, left, h, w, key)
                    else:
                        _fill_box(x, top, left, h, w, fill, fill_bits)
                    return x
            return x

        return erase


def _fill_numbers(value: Any) -> tuple[float, ...]:
    """A fill given as a number or a sequence of them, as floats; ``()``
    when it is neither (or holds something that is not a real number)."""
    values = (value,) if isinstance(value, Real) else tuple(value) if isinstance(value, (tuple, list, np.ndarray)) \
        else ()
    if not all(_is_number(v) for v in values):
        return ()
    return tuple(float(v) for v in values)


def _image_size(x: np.ndarray) -> tuple[int, int]:
    """(height, width) of a (height, width, channels) uint8 image or a
    (channels, height, width) float sample (compiled: see the overload)."""
    return (x.shape[0], x.shape[1]) if x.dtype == np.uint8 else (x.shape[1], x.shape[2])


@overload(_image_size)
def _image_size_compiled(x):  # noqa: ANN001  (Numba reads annotations of overloads as types)
    if x.dtype == types.uint8:
        return lambda x: (x.shape[0], x.shape[1])
    return lambda x: (x.shape[1], x.shape[2])


def _fill_box(x: np.ndarray, top: int, left: int, h: int, w: int, fill: np.ndarray, fill_bits: np.ndarray) -> None:
    """Set the box (top, left, h, w) of ``x`` (laid out as :func:`_image_size`
    reads it) to ``fill``, one value per channel; float16 samples, which
    compiled code holds as uint16 bits, to ``fill_bits`` (compiled: see the
    overload)."""
    if x.dtype == np.uint8:
        x[top:top + h, left:left + w] = fill[np.arange(x.shape[2]) % fill.size]
    else:
        x[:, top:top + h, left:left + w] = fill[np.arange(x.shape[0]) % fill.size, None, None]


@overload(_fill_box)
def _fill_box_compiled(x, top, left, h, w, fill, fill_bits):  # noqa: ANN001
    if x.dtype == types.uint8:
        def fill_channels_last(x, top, left, h, w, fill, fill_bits):
            for r in range(top, top + h):
                for c in range(left, left + w):
                    for k in range(x.shape[2]):
                        x[r, c, k] = np.uint8(fill[k % fill.size])
        return fill_channels_last
    if x.dtype == types.uint16:
        return lambda x, top, left, h, w, fill, fill_bits: _fill_planes(x, top, left, h, w, fill_bits)
    return lambda x, top, left, h, w, fill, fill_bits: _fill_planes(x, top, left, h, w, fill)


def _fill_noise(x: np.ndarray, top: int, left: int, h: int, w: int, key: int) -> None:
    """Set the box (top, left, h, w) of the (channels, height, width) float
    sample ``x`` to standard normal draws of ``key``, one per pixel and
    channel; float16 samples, held as uint16 bits, to their nearest float16
    (compiled only: see the overload)."""
    raise NotImplementedError("compiled code only")


@overload(_fill_noise)
def _fill_noise_compiled(x, top, left, h, w, key):  # noqa: ANN001
    bits = x.dtype == types.uint16

    def fill(x, top, left, h, w, key):
        for k in range(x.shape[0]):
            for r in range(h):
                for c in range(w):
                    value = rnd.normal(key, _ERASE_DRAWS.noise + (k * h + r) * w + c)
                    if bits:
                        x[k, top + r, left + c] = half_bits(value)
                    else:
                        x[k, top + r, left + c] = value
    return fill


@cached_njit
def half_bits(value):
    """The bits of the float16 nearest ``value`` (ties to even; beyond
    float16's range, infinity): what compiled code, which has no float16,
    stores in a float16 sample."""
    sign = np.uint16(0x8000) if math.copysign(1.0, value) < 0 else np.uint16(0)
    a = abs(value)
    if a == 0.0:
        return sign
    if not a < 65520.0:  # rounds past the largest float16, 65504; NaN too
        return np.uint16(sign | (0x7E00 if a != a else 0x7C00))
    mantissa, exponent = math.frexp(a)  # a = mantissa * 2**exponent, mantissa in [0.5, 1)
    biased = exponent + 14  # float16's exponent field of a: a = (2 * mantissa) * 2**(biased - 15)
    if biased >= 1:
        fraction = np.int64(np.rint((2.0 * mantissa - 1.0) * 1024.0))  # a carry into the exponent is right
        return np.uint16(sign | ((np.int64(biased) << 10) + fraction))
    return np.uint16(sign | np.int64(np.rint(a * 16777216.0)))  # subnormal: multiples of 2**-24


@cached_njit
def _fill_planes(x, top, left, h, w, values):
    """Set the box of each channel plane ``k`` of ``x`` to ``values[k]``."""
    for k in range(x.shape[0]):
        value = values[k % values.size]
        for r in range(top, top + h):
            for c in range(left, left + w):
                x[k, r, c] = value


PIXELS = Int(0, 1 << 16)
"""A length in pixels (a square's side, a largest shift)."""

FILL = Numbers(Float(0.0, 255.0), 3, broadcast=True)
"""A uint8 colour: one value, or R, G and B (fractions truncated)."""


def fill_bytes(fill: tuple[float, ...]) -> np.ndarray:
    """A :data:`FILL` as the 3 uint8 values written (fractions truncated)."""
    return np.array(fill, np.float64).astype(np.uint8)


@dataclasses.dataclass(frozen=True)
class Cutout(Operation):
    """A ``size`` x ``size`` square at a uniformly random center (cut off at
    the image's edges) set to ``fill``, on every sample."""

    geometry: ClassVar[Geometry] = Geometry.IDENTITY

    size: int = param(PIXELS, "side of the square in pixels")
    fill: tuple[float, ...] = param(FILL, "uint8 value (one, or R, G, B) written into the square", default=(0, 0, 0))

    def declare(self, state):
        _check_image(self, state)
        return state, None

    def runtime_values(self) -> tuple[int, np.ndarray]:
        """The side, and the fill as 3 uint8 values (truncated)."""
        return (self.size, fill_bytes(self.fill))

    def generate_code(self):
        def cutout(x, key, values):
            size, fill = values
            height, width, channels = x.shape
            cy = rnd.integers(key, _CUTOUT_DRAWS.center_y, 0, height)
            cx = rnd.integers(key, _CUTOUT_DRAWS.center_x, 0, width)
            for r in range(max(0, cy - size // 2), min(height, cy - size // 2 + size)):
                for c in range(max(0, cx - size // 2), min(width, cx - size // 2 + size)):
                    for k in range(channels):
                        x[r, c, k] = fill[k % 3]
            return x

        return cutout


@dataclasses.dataclass(frozen=True)
class RandomTranslate(Operation):
    """Shift the image by a random offset in [-padding, padding] on each
    axis, filling the uncovered border with ``fill`` (a crop of the image
    padded by ``padding``, as FFCV's RandomTranslate); its output
    ``transform`` holds the shift."""

    geometry: ClassVar[Geometry] = Geometry.MAPPED

    padding: int = param(PIXELS, "largest shift in pixels, on each axis")
    fill: tuple[float, ...] = param(FILL, "uint8 value (one, or R, G, B) of the uncovered border", default=(0, 0, 0))

    def declare(self, state):
        _check_image(self, state)
        return _moved(state)

    def runtime_values(self) -> tuple[int, np.ndarray]:
        """The padding, and the fill as 3 uint8 values (truncated)."""
        return (self.padding, fill_bytes(self.fill))

    def generate_code(self):
        set_shift = geometry.set_shift

        def translate(x, out, transform, key, values):
            pad, fill = values
            dy = rnd.integers(key, _TRANSLATE_DRAWS.shift_y, -pad, pad + 1)
            dx = rnd.integers(key, _TRANSLATE_DRAWS.shift_x, -pad, pad + 1)
            height, width, channels = x.shape
            # out[r, c] = x[r + dy, c + dx]: the content moves by (-dy, -dx)
            set_shift(transform, height, width, -dy, -dx, False, False)
            for r in range(height):
                sr = r + dy
                for c in range(width):
                    sc = c + dx
                    inside = 0 <= sr < height and 0 <= sc < width
                    for k in range(channels):
                        out[r, c, k] = x[sr, sc, k] if inside else fill[k % 3]
            return out

        return translate
