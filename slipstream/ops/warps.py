"""Rotation, affine and perspective warps of (height, width, channels) uint8
images, with the pixels Pillow computes, fused into the stage's sample loop.

torchvision's transforms on PIL images call Pillow: ``RandomRotation``
calls ``Image.rotate`` (which builds an inverse affine matrix and calls
``Image.transform``), ``RandomAffine`` builds the inverse matrix with
``_get_inverse_affine_matrix`` (torchvision/transforms/functional.py) and
calls ``Image.transform(size, AFFINE, ...)``, and ``RandomPerspective``
solves ``_get_perspective_coeffs`` and calls ``Image.transform(size,
PERSPECTIVE, ...)``.  The kernels (C ``slip_warp_affine`` and
``slip_warp_perspective``, which :func:`affine` and :func:`perspective`
call) repeat Pillow's arithmetic (src/libImaging/Geometry.c): output pixel
(x, y) is centred on ``(x + 0.5, y + 0.5)``, mapped to input coordinates by
the inverse matrix; nearest neighbour takes the pixel containing that
point, bilinear blends the four pixel centres around it (edges clamped) in
float64 and truncates.
Nearest affine warps take Pillow's fast paths: step-by-step sums for pure
scales, 16.16 fixed point when every coordinate fits, else incremental
float64 sums, so that the same pixels are picked.

Each operation is ``Geometry.MAPPED`` (:mod:`slipstream.fields.geometry`): its output
``transform`` is the forward map (the inverse of Pillow's matrix), so boxes,
keypoints and masks follow the image.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import Any, ClassVar

import numpy as np
from numba import int64

from slipstream.compiler import Allocation, Geometry, Operation, State
from slipstream.compiler import random as rnd
from slipstream.compiler.codegen import copy_sample
from slipstream.compiler.jit import cached_njit
from slipstream.compiler.params import (PROBABILITY, Choice, Custom, Float, Numbers, OrNone, Pair, Refused, Spread,
                                        enum_name, param)
from slipstream.errors import ArgumentError
from slipstream.fields import geometry
from slipstream.native import slip_warp_affine, slip_warp_perspective

__all__ = ["RandomAffine", "RandomPerspective", "RandomRotation", "affine", "affine_inverse", "image_bytes",
           "perspective", "perspective_coefficients", "perspective_corners", "rotation_inverse",
           "rotation_inverse_about", "round15"]

ROTATION_DRAWS = rnd.named_draws("angle")
AFFINE_DRAWS = rnd.named_draws("angle", "shift_x", "shift_y", "scale", "shear_x", "shear_y")
PERSPECTIVE_DRAWS = rnd.named_draws("apply", "corner")  # corner + k: coordinate k of the four (x, y) end points
_DEGREE = math.pi / 180.0  # CPython's math.radians multiplies by this constant

# ---------------------------------------------------------------- the C kernels' entry points

_WARP_REFUSED = ("takes (height, width, channels) C-contiguous uint8 images of 1 to 65500 pixels a side and 1 to 4 "
                 "channels, apart from each other, and a fill of at least one value per channel "
                 "(slipstream.native.last_error() says what was wrong)")
_AFFINE_REFUSED, _PERSPECTIVE_REFUSED = "affine " + _WARP_REFUSED, "perspective " + _WARP_REFUSED


@cached_njit(inline="always")
def image_bytes(image):
    """The bytes of a C-contiguous image (or sample), as the C kernels take
    its size; 0 for any other layout, which they refuse."""
    return image.nbytes if image.flags.c_contiguous else 0


@cached_njit
def affine(src, dst, inverse, nearest, fill):
    """``dst`` as Pillow's ``Image.transform(dst size, AFFINE, inverse,
    NEAREST if nearest else BILINEAR, fillcolor=fill)`` of ``src`` computes it
    (C ``slip_warp_affine``).

    Args:
        src: (height, width, channels) uint8.
        dst: (out_height, out_width, channels) uint8, written whole.
        inverse: (6,) float64, Pillow's AFFINE data: output point (x, y)
            comes from input point (a0 x + a1 y + a2, a3 x + a4 y + a5).
        nearest: nearest neighbour, else bilinear.
        fill: uint8 array of at least ``channels`` values, the colour where
            no input pixel lands (its first ``channels`` values are used),
            and where a point is not a number (NaN in ``inverse``).
    """
    height, width, channels = src.shape
    if slip_warp_affine(src, image_bytes(src), height, width, channels, src.strides[0], dst, image_bytes(dst),
                        dst.shape[0], dst.shape[1], dst.strides[0], inverse, nearest, fill, fill.size):
        raise ValueError(_AFFINE_REFUSED)


@cached_njit
def perspective(src, dst, coefficients, nearest, fill):
    """``dst`` as Pillow's ``Image.transform(dst size, PERSPECTIVE,
    coefficients, NEAREST if nearest else BILINEAR, fillcolor=fill)`` of
    ``src`` computes it (C ``slip_warp_perspective``): output point (x, y)
    comes from input point ``((a0 x + a1 y + a2) / d, (a3 x + a4 y + a5) /
    d)``, ``d = a6 x + a7 y + 1``.  Where ``d`` is 0 the output is ``fill``.
    Arguments as :func:`affine`'s, ``coefficients`` (8,) float64."""
    height, width, channels = src.shape
    if slip_warp_perspective(src, image_bytes(src), height, width, channels, src.strides[0], dst,
                             image_bytes(dst), dst.shape[0], dst.shape[1], dst.strides[0], coefficients, nearest,
                             fill, fill.size):
        raise ValueError(_PERSPECTIVE_REFUSED)


# ---------------------------------------------------------------- the matrices, as torchvision and Pillow make them


@cached_njit
def _product_error(a, b, p):
    """The exact rounding error of ``p = a * b`` (Dekker's two-product, with
    Veltkamp's split: no fused multiply-add needed)."""
    split = 134217729.0  # 2**27 + 1
    c = split * a
    a_hi = c - (c - a)
    a_lo = a - a_hi
    c = split * b
    b_hi = c - (c - b)
    b_lo = b - b_hi
    return a_lo * b_lo - (((p - a_hi * b_hi) - a_lo * b_hi) - a_hi * b_lo)


@cached_njit
def round15(v):
    """Python's ``round(v, 15)`` for ``|v| <= 1``: the exact value rounded
    half to even at the 15th decimal, as Pillow rounds its rotation matrix."""
    magnitude = abs(v)
    p = magnitude * 1e15
    error = _product_error(magnitude, 1e15, p)
    n = np.floor(p)
    fraction = p - n  # exact: n and p are within a factor of two, or n is 0
    if fraction > 0.5 or (fraction == 0.5 and (error > 0.0 or (error == 0.0 and n % 2.0 == 1.0))):
        n += 1.0
    return math.copysign(n / 1e15, v)


@cached_njit
def rotation_inverse_about(center_x, center_y, angle):
    """Pillow's ``Image.rotate`` matrix (AFFINE data) for ``angle`` degrees
    counter-clockwise about (``center_x``, ``center_y``), without expand or
    translate."""
    theta = -((angle % 360.0) * _DEGREE)
    cos, sin = round15(math.cos(theta)), round15(math.sin(theta))
    a = np.empty(6)
    a[0], a[1], a[3], a[4] = cos, sin, round15(-math.sin(theta)), cos
    a[2] = a[0] * -center_x + a[1] * -center_y + 0.0 + center_x
    a[5] = a[3] * -center_x + a[4] * -center_y + 0.0 + center_y
    return a


@cached_njit
def rotation_inverse(height, width, angle):
    """Pillow's ``Image.rotate(angle, expand=False, center=None)`` matrix
    (AFFINE data, (6,) float64) for a ``height`` x ``width`` image, as
    torchvision's ``F.rotate`` on a PIL image asks for it."""
    return rotation_inverse_about(width / 2, height / 2, angle)


@cached_njit
def affine_inverse(center_x, center_y, angle, translate_x, translate_y, scale, shear_x, shear_y):
    """torchvision's ``_get_inverse_affine_matrix(center, angle, translate,
    scale, shear)`` (torchvision/transforms/functional.py), (6,) float64:
    the inverse of translate * centre * rotate(angle, clockwise in image
    coordinates) * scale * shear_y * shear_x * centre^-1, in its order of
    float64 operations.  torchvision's ``F.affine`` on a PIL image takes the
    centre ``(width * 0.5, height * 0.5)`` unless one is given."""
    rot, sx, sy = angle * _DEGREE, shear_x * _DEGREE, shear_y * _DEGREE
    a = math.cos(rot - sy) / math.cos(sy)
    b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
    c = math.sin(rot - sy) / math.cos(sy)
    d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
    m = np.empty(6)
    m[0], m[1], m[2], m[3], m[4], m[5] = d / scale, -b / scale, 0.0 / scale, -c / scale, a / scale, 0.0 / scale
    m[2] += m[0] * (-center_x - translate_x) + m[1] * (-center_y - translate_y)
    m[5] += m[3] * (-center_x - translate_x) + m[4] * (-center_y - translate_y)
    m[2] += center_x
    m[5] += center_y
    return m


@cached_njit
def _solve(a, b):
    """``a x = b`` for a square float64 system, Gaussian elimination with
    partial pivoting (``a`` and ``b`` are overwritten); NaNs if singular."""
    n = b.shape[0]
    for col in range(n):
        pivot = col
        for r in range(col + 1, n):
            if abs(a[r, col]) > abs(a[pivot, col]):
                pivot = r
        if a[pivot, col] == 0.0:
            b[:] = np.nan
            return b
        for c in range(n):
            a[col, c], a[pivot, c] = a[pivot, c], a[col, c]
        b[col], b[pivot] = b[pivot], b[col]
        for r in range(col + 1, n):
            f = a[r, col] / a[col, col]
            for c in range(col, n):
                a[r, c] -= f * a[col, c]
            b[r] -= f * b[col]
    for r in range(n - 1, -1, -1):
        s = b[r]
        for c in range(r + 1, n):
            s -= a[r, c] * b[c]
        b[r] = s / a[r, r]
    return b


@cached_njit
def perspective_coefficients(startpoints, endpoints):
    """torchvision's ``_get_perspective_coeffs(startpoints, endpoints)``:
    the 8 coefficients of Pillow's PERSPECTIVE map that sends each of the 4
    ``endpoints`` ((4, 2), x and y) to its start point, solved in float64
    and rounded to float32 as torchvision rounds them; (8,) float64."""
    a = np.zeros((8, 8))
    b = np.empty(8)
    for i in range(4):
        ex, ey = float(endpoints[i, 0]), float(endpoints[i, 1])
        sx, sy = float(startpoints[i, 0]), float(startpoints[i, 1])
        a[2 * i, 0], a[2 * i, 1], a[2 * i, 2], a[2 * i, 6], a[2 * i, 7] = ex, ey, 1.0, -sx * ex, -sx * ey
        a[2 * i + 1, 3], a[2 * i + 1, 4], a[2 * i + 1, 5] = ex, ey, 1.0
        a[2 * i + 1, 6], a[2 * i + 1, 7] = -sy * ex, -sy * ey
        b[2 * i], b[2 * i + 1] = sx, sy
    return _solve(a, b).astype(np.float32).astype(np.float64)


@cached_njit
def set_inverse(transform, coefficients, out_h, out_w):
    """Write into ``transform`` the forward map of Pillow's inverse map
    (6 affine or 8 perspective ``coefficients``)."""
    # Element by element: an array assignment compiles Numba's broadcasting checks and their messages.
    m = np.zeros(geometry.SIZE)
    for k in range(6):
        m[k] = coefficients[k]
    if coefficients.shape[0] == 8:
        m[6], m[7] = coefficients[6], coefficients[7]
    m[8] = 1.0
    forward = geometry.inverse(m, np.empty(geometry.MATRIX))
    for k in range(geometry.MATRIX):
        transform[k] = forward[k]
    transform[geometry.OUT_H], transform[geometry.OUT_W] = out_h, out_w


# ---------------------------------------------------------------- operations

INTERPOLATIONS = ("nearest", "bilinear")
INTERPOLATION = Choice(INTERPOLATIONS, normalize=enum_name)
"""How a warp resamples: ``"nearest"`` or ``"bilinear"``, or torchvision's
``InterpolationMode`` (or its text, ``"InterpolationMode.BILINEAR"``)."""
_INTERPOLATION_DOC = ("how the input is resampled; torchvision's `InterpolationMode.NEAREST` / `BILINEAR` (also "
                      "as text) are taken too")


def interpolation_name(value: Any) -> str:
    """``"nearest"`` or ``"bilinear"``, from those names or torchvision's
    ``InterpolationMode`` (or its text, ``"InterpolationMode.BILINEAR"``)."""
    try:
        return INTERPOLATION.accept(value)
    except Refused:
        raise ArgumentError(f"interpolation must be one of {', '.join(INTERPOLATIONS)} (or torchvision's "
                            f"InterpolationMode.NEAREST / BILINEAR), got {value!r}: Pillow's warps offer no other "
                            f"filter torchvision passes here") from None


ANGLES = Spread(center=0.0, floor=-1e6, ceiling=1e6)
"""torchvision's ``_setup_angle``: a number v >= 0 is (-v, v), a pair is the
range; bounded so that a draw from the range stays finite."""


def fill_values(value: Any, name: str = "fill") -> tuple[int, ...]:
    """torchvision's ``_parse_fill`` for uint8 images: a number or one per
    channel, truncated to int, each in 0..255 (``name`` is the parameter's,
    for the error)."""
    values = (value,) if isinstance(value, (int, float, np.integer, np.floating)) else tuple(value)
    if not values or not all(isinstance(v, (int, float, np.integer, np.floating)) and 0 <= v < 256 for v in values):
        raise ArgumentError(f"{name} must be a number or one number per channel, each in [0, 255], got {value!r}")
    return tuple(int(v) for v in values)


_LEVEL = Float(0.0, 256.0, high_open=True)


def _fill(value: Any) -> tuple[int, ...]:
    """A warp's ``fill`` as :func:`fill_values` keeps it: one number, or one
    per channel of a 1- or 3-channel image, truncated to ints."""
    many = (isinstance(value, Sequence) and not isinstance(value, (str, bytes))) or \
        (isinstance(value, np.ndarray) and value.ndim == 1)
    given = tuple(value) if many else (value,)
    if len(given) not in (1, 3):
        raise Refused()
    return tuple(int(_LEVEL.accept(v)) for v in given)


FILL = Custom(_fill, "a number or one number per channel (1 or 3), each in [0, 256)",
              bad=(300, 256, -1, math.nan, math.inf, True, (1, 2), (0, 0, 256), (0, math.nan, 0), (0, True, 0), (),
                   np.zeros((1, 3)), "black", None, {1: 2}), good=(1, 2, 3))
"""The uint8 colour where no input pixel lands."""
_FILL_DOC = "uint8 colour where no input pixel lands (truncated to integers)"


def _center(value: Any) -> tuple[float, float] | None:
    """None, or an (x, y) point in pixels, kept as two floats."""
    return None if value is None else Pair(Float(), ordered=False).accept(value)


CENTER = Custom(_center, "None or an (x, y) pair of numbers", bad=((1.0, math.nan), (math.inf, 0.0), (True, 1.0),
                                                                     (1.0,), (1.0, 2.0, 3.0), 3.0, "xy"))
"""A point in pixels, origin at the top-left corner; None: the image's centre."""


def _centre_or_image_centre(center: tuple[float, float] | None) -> tuple[bool, tuple[float, float]]:
    """(whether the image's own centre is meant, the given centre or (0, 0)), for compiled code."""
    return center is None, (center if center is not None else (0.0, 0.0))


def _no_expand(value: Any) -> bool:
    """``expand``: False only (a bool, Python's or NumPy's), with the reason
    when True is given."""
    if isinstance(value, (bool, np.bool_)) and not value:
        return False
    reason = ("an expanded rotation changes the image size with the angle, and a batch holds images of one size: "
              "rotate with expand=False and crop or resize before the rotation") \
        if isinstance(value, (bool, np.bool_)) else ""
    raise Refused(reason)


NO_EXPAND = Custom(_no_expand, "False", bad=(True, np.bool_(True), 0, 1, None, "False", math.nan), good=False)


@dataclasses.dataclass(frozen=True)
class _Warp(Operation):
    """A warp of (height, width, channels) uint8 images into their own
    output of the same shape, and its ``transform``.  Subclasses declare
    the fields ``interpolation`` (structural) and ``fill``."""

    geometry: ClassVar[Geometry] = Geometry.MAPPED

    def declare(self, state: State) -> Any:
        if len(state.shape) != 3 or state.dtype != np.uint8 or state.shape[2] not in (1, 3):
            raise ArgumentError(f"{type(self).__name__} takes (height, width, channels) uint8 images of 1 or 3 "
                                f"channels (Pillow's L and RGB), got {state.shape} {state.dtype}")
        if len(self.fill) not in (1, state.shape[2]):
            raise ArgumentError(f"{type(self).__name__}: fill {self.fill} has {len(self.fill)} values for images of "
                                f"{state.shape[2]} channels (give one, or one per channel)")
        return state, [Allocation(state.shape, state.dtype),
                       Allocation((geometry.SIZE,), np.float64, name=geometry.TRANSFORM)]

    @property
    def nearest(self) -> bool:
        """Whether the interpolation is nearest neighbour (else bilinear)."""
        return self.interpolation == "nearest"

    def fill_table(self) -> np.ndarray:
        """The fill colour as 3 uint8 values, of which an image of c channels
        takes the first c (:meth:`declare` checked that they fit)."""
        return np.broadcast_to(np.array(self.fill, np.uint8), (3,)).copy() if len(self.fill) == 1 else \
            np.array(self.fill, np.uint8)


@dataclasses.dataclass(frozen=True)
class RandomRotation(_Warp):
    """torchvision's ``RandomRotation`` on PIL images: an angle drawn
    uniformly from ``degrees`` (a number d means (-d, d)), counter-clockwise,
    about ``center`` ((x, y) in pixels; None: the image's centre), the output
    the input's size, ``fill`` where no input pixel lands; the pixels of
    Pillow's ``Image.rotate``."""

    degrees: Any = param(ANGLES, "angle range in degrees, counter-clockwise")
    interpolation: Any = param(INTERPOLATION, _INTERPOLATION_DOC, default="nearest", structural=True)
    expand: bool = param(NO_EXPAND, "must be False: an expanded rotation changes the image size with the angle, and "
                         "a batch holds one size", default=False, structural=True)
    center: Any = param(CENTER, "centre of rotation in pixels, origin at the top-left corner; None: the image's "
                        "centre", default=None)
    fill: Any = param(FILL, _FILL_DOC, default=0)

    def runtime_values(self) -> tuple[Any, ...]:
        """The angle range, whether the centre is the image's and the centre
        given, and the fill as 3 uint8 values."""
        return (self.degrees, _centre_or_image_centre(self.center), self.fill_table())

    def generate_code(self):
        nearest = self.nearest

        def rotate(x, out, transform, key, values):
            (lo, hi), (centred, (cx, cy)), fill = values
            height, width, channels = x.shape
            angle = rnd.uniform_range(key, ROTATION_DRAWS.angle, lo, hi)
            if centred:
                inverse = rotation_inverse(height, width, angle)
            else:
                inverse = rotation_inverse_about(cx, cy, angle)
            affine(x, out, inverse, nearest, fill[:channels])
            set_inverse(transform, inverse, height, width)
            return out

        return rotate


def _shear(value: Any) -> tuple[float, ...] | None:
    """torchvision's shear forms: a number s is (-s, s) along x, a pair an
    x range, four values an x range then a y range."""
    if value is None:
        return None
    if isinstance(value, (Sequence, np.ndarray)) and not isinstance(value, (str, bytes)) and len(value) == 4:
        return ANGLES.accept(tuple(value[:2])) + ANGLES.accept(tuple(value[2:]))
    return ANGLES.accept(value)


SHEAR = Custom(_shear, "None, an x range as `degrees` is one (a number v >= 0 meaning [-v, v], or a (low, high) "
                      "pair, low <= high), or 4 numbers (x_low, x_high, y_low, y_high), lows first; each in "
                      "[-1000000, 1000000]",
               bad=(-1.0, math.nan, math.inf, True, (2.0, 1.0), (1, 2, 3), (0.0, 1.0, 3.0, 2.0), (0.0, math.nan),
                    (0.0, 1.0, 0.0, math.inf), (1e7, 1e7 + 1), "ab"), good=(-5.0, 5.0))
"""torchvision's ``shear`` of ``RandomAffine``."""


@dataclasses.dataclass(frozen=True)
class RandomAffine(_Warp):
    """torchvision's ``RandomAffine`` on PIL images: an angle from
    ``degrees``, a shift of up to ``translate`` (fractions of the width and
    height, rounded to whole pixels), a scale from ``scale`` and shears from
    ``shear`` (x only for a number or a pair; x then y for four values), drawn
    per sample as torchvision draws them, about ``center`` (None: the
    image's centre); the pixels of Pillow's ``Image.transform(AFFINE)``
    with torchvision's inverse matrix."""

    degrees: Any = param(ANGLES, "rotation range in degrees (clockwise, as torchvision's affine)")
    translate: Any = param(OrNone(Numbers(Float(0.0, 1.0), 2)), "largest shift as fractions of the width and the "
                           "height; the shift is drawn uniformly and rounded to whole pixels", default=None)
    scale: Any = param(OrNone(Pair(Float(0.0, low_open=True))), "scale factor range", default=None)
    shear: Any = param(SHEAR, "shear ranges in degrees: a number or a pair shears along x only; four values add a y "
                       "shear range", default=None)
    interpolation: Any = param(INTERPOLATION, _INTERPOLATION_DOC, default="nearest", structural=True)
    fill: Any = param(FILL, _FILL_DOC, default=0)
    center: Any = param(CENTER, "centre of the map in pixels; None: `(width * 0.5, height * 0.5)`", default=None)

    def runtime_values(self) -> tuple[Any, ...]:
        """The angle range; whether each of translate, scale, x shear and y
        shear is drawn, each with its range ((0, 0) or (1, 1) when not);
        whether the centre is the image's and the centre given; the fill as
        3 uint8 values."""
        shear = self.shear if self.shear is not None else (0.0, 0.0)
        return (self.degrees,
                (self.translate is not None, self.translate if self.translate is not None else (0.0, 0.0)),
                (self.scale is not None, self.scale if self.scale is not None else (1.0, 1.0)),
                (self.shear is not None, shear[:2]), (len(shear) == 4, shear[2:] if len(shear) == 4 else (0.0, 0.0)),
                _centre_or_image_centre(self.center), self.fill_table())

    def generate_code(self):
        nearest = self.nearest

        def transform_affine(x, out, transform, key, values):
            degrees, (moves, (move_x, move_y)), (scales, (s_lo, s_hi)), shear_x, shear_y, centre, fill = values
            (d_lo, d_hi), (shears_x, (x_lo, x_hi)), (shears_y, (y_lo, y_hi)) = degrees, shear_x, shear_y
            centred, (cx, cy) = centre
            height, width, channels = x.shape
            angle = rnd.uniform_range(key, AFFINE_DRAWS.angle, d_lo, d_hi)
            tx = ty = 0.0
            if moves:
                max_dx, max_dy = move_x * width, move_y * height
                # np.rint rounds half to even, as Python's round
                tx = np.rint(rnd.uniform_range(key, AFFINE_DRAWS.shift_x, -max_dx, max_dx))
                ty = np.rint(rnd.uniform_range(key, AFFINE_DRAWS.shift_y, -max_dy, max_dy))
            s = rnd.uniform_range(key, AFFINE_DRAWS.scale, s_lo, s_hi) if scales else 1.0
            sx = rnd.uniform_range(key, AFFINE_DRAWS.shear_x, x_lo, x_hi) if shears_x else 0.0
            sy = rnd.uniform_range(key, AFFINE_DRAWS.shear_y, y_lo, y_hi) if shears_y else 0.0
            px, py = (width * 0.5, height * 0.5) if centred else (cx, cy)
            inverse = affine_inverse(px, py, angle, tx, ty, s, sx, sy)
            affine(x, out, inverse, nearest, fill[:channels])
            set_inverse(transform, inverse, height, width)
            return out

        return transform_affine


@dataclasses.dataclass(frozen=True)
class RandomPerspective(_Warp):
    """torchvision's ``RandomPerspective`` on PIL images: with probability
    ``p``, each corner moved inwards by a random whole number of pixels up
    to ``distortion_scale`` of half the width and height, drawn as
    torchvision draws them; the pixels of Pillow's
    ``Image.transform(PERSPECTIVE)`` with torchvision's coefficients."""

    distortion_scale: float = param(Float(0.0, 1.0), "how far the corners may move, as a fraction of half the width "
                                    "and height", default=0.5)
    p: float = param(PROBABILITY, "probability of warping the sample", default=0.5)
    interpolation: Any = param(INTERPOLATION, _INTERPOLATION_DOC, default="bilinear", structural=True)
    fill: Any = param(FILL, _FILL_DOC, default=0)

    def runtime_values(self) -> tuple[float, float, np.ndarray]:
        """The probability, the distortion scale and the fill as 3 uint8 values."""
        return (self.p, self.distortion_scale, self.fill_table())

    def generate_code(self):
        nearest, set_shift = self.nearest, geometry.set_shift

        def distort(x, out, transform, key, values):
            p, scale, fill = values
            height, width, channels = x.shape
            if not rnd.uniform(key, PERSPECTIVE_DRAWS.apply) < p:
                set_shift(transform, height, width, 0, 0, False, False)
                return copy_sample(out, x)
            ends = perspective_corners(key, height, width, scale)
            starts = np.zeros((4, 2), np.int64)  # torchvision's start points: the corner pixels
            starts[1, 0], starts[2, 0], starts[2, 1], starts[3, 1] = width - 1, width - 1, height - 1, height - 1
            coefficients = perspective_coefficients(starts, ends)
            perspective(x, out, coefficients, nearest, fill[:channels])
            set_inverse(transform, coefficients, height, width)
            return out

        return distort


@cached_njit
def perspective_corners(key, height, width, distortion_scale):
    """torchvision's ``RandomPerspective`` end points, (4, 2) int64 (x, y):
    top-left, top-right, bottom-right, bottom-left, each moved inwards by a
    whole number of pixels below ``int(distortion_scale * half) + 1`` on
    each axis (draws ``corner`` to ``corner + 7`` of ``key``)."""
    bound_w = int64(distortion_scale * (width // 2)) + 1
    bound_h = int64(distortion_scale * (height // 2)) + 1
    ends = np.empty((4, 2), np.int64)
    corner = PERSPECTIVE_DRAWS.corner
    ends[0, 0], ends[0, 1] = rnd.integers(key, corner, 0, bound_w), rnd.integers(key, corner + 1, 0, bound_h)
    ends[1, 0] = rnd.integers(key, corner + 2, width - bound_w, width)
    ends[1, 1] = rnd.integers(key, corner + 3, 0, bound_h)
    ends[2, 0] = rnd.integers(key, corner + 4, width - bound_w, width)
    ends[2, 1] = rnd.integers(key, corner + 5, height - bound_h, height)
    ends[3, 0] = rnd.integers(key, corner + 6, 0, bound_w)
    ends[3, 1] = rnd.integers(key, corner + 7, height - bound_h, height)
    return ends
