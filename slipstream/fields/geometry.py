"""Where pixels go: the transform every geometric operation exposes, so that
boxes, keypoints and masks follow the image they belong to.

Coordinates are continuous pixel coordinates, as in
``torchvision.tv_tensors``: pixel (row r, column c) covers [r, r + 1) x
[c, c + 1), so a box ``(x1, y1, x2, y2) = (0, 0, W, H)`` covers a whole
W x H image.

Every operation that moves pixels (a decoding crop, a flip, a translation)
and every image decoder is :class:`Geometric`: it has a named output
``transform``, a float64 array of :data:`SIZE` values per sample::

    (scale_y, scale_x, offset_y, offset_x, out_h, out_w)

that maps a point ``(y, x)`` of the operation's input to
``(scale_y * y + offset_y, scale_x * x + offset_x)`` in its output, an
``out_h`` x ``out_w`` image; a negative scale is a flip.  Such axis-aligned
maps compose (:func:`compose`), so the operations that follow an image
(:mod:`slipstream.ops.detection`) apply the whole chain at once.

Image pixels are resampled on the same grid: output pixel (i, j) is
centred on input point ``((i + 0.5 - offset_y) / scale_y, (j + 0.5 -
offset_x) / scale_x)``.  A mask resampled with nearest neighbour takes the
input pixel containing that point, so that it stays aligned with the image.
"""

from __future__ import annotations

import abc

import numpy as np
from numba import njit

TRANSFORM = "transform"
"""The name of the output that holds a geometric operation's transform."""

SIZE = 6
"""Values per transform: scale_y, scale_x, offset_y, offset_x, out_h, out_w."""

SCALE_Y, SCALE_X, OFFSET_Y, OFFSET_X, OUT_H, OUT_W = range(SIZE)


class Geometric(abc.ABC):  # a marker: what it promises is an output, not a method
    """An operation that moves pixels and says where: it declares an
    allocation named :data:`TRANSFORM` of shape ``(SIZE,)`` float64 and
    writes each sample's transform (see the module docstring) into it."""


@njit(cache=True, nogil=True)
def set_region(t, top, left, h, w, out_h, out_w, flip):
    """Write into ``t`` the transform of cropping the region (``top``,
    ``left``, ``h``, ``w``) of an image, resizing it to ``out_h`` x ``out_w``
    and, with ``flip``, mirroring it left-right."""
    sy, sx = out_h / h, out_w / w
    t[SCALE_Y], t[OFFSET_Y] = sy, -top * sy
    if flip:
        t[SCALE_X], t[OFFSET_X] = -sx, out_w + left * sx
    else:
        t[SCALE_X], t[OFFSET_X] = sx, -left * sx
    t[OUT_H], t[OUT_W] = out_h, out_w


@njit(cache=True, nogil=True)
def set_shift(t, height, width, dy, dx, flip_y, flip_x):
    """Write into ``t`` the transform of a ``height`` x ``width`` image
    mirrored (top-bottom with ``flip_y``, left-right with ``flip_x``) and then
    shifted by (``dy``, ``dx``) pixels, keeping its size."""
    t[SCALE_Y], t[OFFSET_Y] = (-1.0, height + dy) if flip_y else (1.0, dy)
    t[SCALE_X], t[OFFSET_X] = (-1.0, width + dx) if flip_x else (1.0, dx)
    t[OUT_H], t[OUT_W] = height, width


@njit(cache=True, nogil=True)
def compose(transforms, out):
    """Write into ``out`` the transform of applying ``transforms`` (a tuple
    of transform arrays) in order; returns ``out``."""
    sy, sx, ty, tx = 1.0, 1.0, 0.0, 0.0
    out_h, out_w = 0.0, 0.0
    for t in transforms:
        sy, ty = t[SCALE_Y] * sy, t[SCALE_Y] * ty + t[OFFSET_Y]
        sx, tx = t[SCALE_X] * sx, t[SCALE_X] * tx + t[OFFSET_X]
        out_h, out_w = t[OUT_H], t[OUT_W]
    out[SCALE_Y], out[SCALE_X], out[OFFSET_Y], out[OFFSET_X] = sy, sx, ty, tx
    out[OUT_H], out[OUT_W] = out_h, out_w
    return out


def identity(height: int, width: int) -> np.ndarray:
    """The transform that leaves a ``height`` x ``width`` image as it is."""
    return np.array([1.0, 1.0, 0.0, 0.0, height, width])


def apply_to_points(transform: np.ndarray, xy: np.ndarray) -> np.ndarray:
    """Points ``(..., 2)`` as ``(x, y)`` moved by ``transform`` (NumPy, for
    checks and plain-Python use)."""
    t = np.asarray(transform, np.float64)
    out = np.array(xy, np.float64, copy=True)
    out[..., 0] = t[SCALE_X] * out[..., 0] + t[OFFSET_X]
    out[..., 1] = t[SCALE_Y] * out[..., 1] + t[OFFSET_Y]
    return out
