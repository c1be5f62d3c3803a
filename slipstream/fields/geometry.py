"""Where pixels go: the transform every geometric operation exposes, so that
boxes, keypoints and masks follow the image they belong to.

Coordinates are continuous pixel coordinates, as in
``torchvision.tv_tensors``: pixel (row r, column c) covers [r, r + 1) x
[c, c + 1), so a box ``(x1, y1, x2, y2) = (0, 0, W, H)`` covers a whole
W x H image.

Every operation that moves pixels (a decoding crop, a flip, a translation,
a rotation, an affine or perspective warp) and every image decoder
declares ``geometry = Geometry.MAPPED``
(:class:`slipstream.compiler.Geometry`): it has a named output
``transform``, a float64 array of :data:`SIZE` values per sample::

    (m00, m01, m02, m10, m11, m12, m20, m21, m22, out_h, out_w)

the 3 x 3 matrix ``M`` (row-major) of a projective map from the operation's
input to its ``out_h`` x ``out_w`` output: a point ``(x, y)`` (x the column
coordinate) goes to ``(u / w, v / w)`` with ``(u, v, w) = M @ (x, y, 1)``.
Crops, resizes, flips and shifts are *axis-aligned*: only ``m00`` (the
scale along x, negative for a mirror), ``m02`` (the offset along x),
``m11`` and ``m12`` (the same along y) differ from the identity, and their
arithmetic is kept exactly as it is written below (:data:`SCALE_X`,
:data:`OFFSET_X`, :data:`SCALE_Y`, :data:`OFFSET_Y` name those entries).
Such maps compose (:func:`compose`), so the operations that follow an image
(:mod:`slipstream.ops.detection`) apply the whole chain at once.  Where a
chain holds a map that is not axis-aligned, they also apply what each stage
cut off: a box is clipped stage by stage (:func:`box_through`), a point
must stay on every stage's output (:func:`point_survives`) and a mask is
``fill`` where an earlier stage's output held no pixel (:func:`uncovered`),
as the image holds its warp's fill there.

Image pixels are resampled on the same grid: output pixel (i, j) is centred
on the input point that ``M``'s inverse sends ``(j + 0.5, i + 0.5)`` to,
which for an axis-aligned map is ``((i + 0.5 - offset_y) / scale_y, (j +
0.5 - offset_x) / scale_x)`` as (y, x).  A mask resampled with nearest
neighbour takes the input pixel containing that point, so that it stays
aligned with the image.  A box follows as the smallest box holding its four
moved corners; a point behind the projective map's horizon (``w <= 0``)
has no image.
"""

from __future__ import annotations

import numpy as np

from slipstream.compiler.jit import cached_njit

TRANSFORM = "transform"
"""The name of the output that holds a geometric operation's transform."""

SIZE = 11
"""Values per transform: the 3 x 3 matrix, row-major, then out_h, out_w."""

MATRIX = 9
"""How many of a transform's values are its matrix (they come first)."""

SCALE_X, OFFSET_X, SCALE_Y, OFFSET_Y = 0, 2, 4, 5
"""The matrix entries an axis-aligned map uses: x' = scale_x * x + offset_x, y' = scale_y * y + offset_y."""

OUT_H, OUT_W = 9, 10


@cached_njit
def _set_axes(t, sx, tx, sy, ty, out_h, out_w):
    """Write the axis-aligned map x' = sx x + tx, y' = sy y + ty into ``t``."""
    t[0], t[1], t[2] = sx, 0.0, tx
    t[3], t[4], t[5] = 0.0, sy, ty
    t[6], t[7], t[8] = 0.0, 0.0, 1.0
    t[OUT_H], t[OUT_W] = out_h, out_w


@cached_njit
def set_region(t, top, left, h, w, out_h, out_w, flip):
    """Write into ``t`` the transform of cropping the region (``top``,
    ``left``, ``h``, ``w``) of an image, resizing it to ``out_h`` x ``out_w``
    and, with ``flip``, mirroring it left-right."""
    sy, sx = out_h / h, out_w / w
    if flip:
        _set_axes(t, -sx, out_w + left * sx, sy, -top * sy, out_h, out_w)
    else:
        _set_axes(t, sx, -left * sx, sy, -top * sy, out_h, out_w)


@cached_njit
def set_shift(t, height, width, dy, dx, flip_y, flip_x):
    """Write into ``t`` the transform of a ``height`` x ``width`` image
    mirrored (top-bottom with ``flip_y``, left-right with ``flip_x``) and then
    shifted by (``dy``, ``dx``) pixels, keeping its size."""
    sy, ty = (-1.0, height + dy) if flip_y else (1.0, dy)
    sx, tx = (-1.0, width + dx) if flip_x else (1.0, dx)
    _set_axes(t, sx, tx, sy, ty, height, width)


@cached_njit
def set_matrix(t, m, out_h, out_w):
    """Write into ``t`` the transform of the projective map ``m`` ((3, 3)
    float64, input to output, see the module docstring) onto an ``out_h`` x
    ``out_w`` output."""
    for r in range(3):
        for c in range(3):
            t[3 * r + c] = m[r, c]
    t[OUT_H], t[OUT_W] = out_h, out_w


@cached_njit
def is_axis_aligned(t):
    """Whether transform ``t`` only scales, mirrors and shifts each axis."""
    return t[1] == 0.0 and t[3] == 0.0 and t[6] == 0.0 and t[7] == 0.0 and t[8] == 1.0


@cached_njit
def _follow(t, acc):
    """``acc``'s matrix becomes ``t``'s matrix times it: the map ``acc``,
    then the map ``t``."""
    if is_axis_aligned(t) and is_axis_aligned(acc):  # the arithmetic axis-aligned chains have always had
        sy, sx = t[SCALE_Y], t[SCALE_X]
        acc[SCALE_Y], acc[OFFSET_Y] = sy * acc[SCALE_Y], sy * acc[OFFSET_Y] + t[OFFSET_Y]
        acc[SCALE_X], acc[OFFSET_X] = sx * acc[SCALE_X], sx * acc[OFFSET_X] + t[OFFSET_X]
        return
    a00, a01, a02, a10, a11, a12, a20, a21, a22 = acc[0], acc[1], acc[2], acc[3], acc[4], acc[5], acc[6], \
        acc[7], acc[8]
    for r in range(3):
        b0, b1, b2 = t[3 * r], t[3 * r + 1], t[3 * r + 2]
        acc[3 * r] = b0 * a00 + b1 * a10 + b2 * a20
        acc[3 * r + 1] = b0 * a01 + b1 * a11 + b2 * a21
        acc[3 * r + 2] = b0 * a02 + b1 * a12 + b2 * a22


@cached_njit
def compose(transforms, out):
    """Write into ``out`` the transform of applying ``transforms`` (a tuple
    of transform arrays) in order; returns ``out``."""
    _set_axes(out, 1.0, 0.0, 1.0, 0.0, 0.0, 0.0)
    for t in transforms:
        _follow(t, out)
        out[OUT_H], out[OUT_W] = t[OUT_H], t[OUT_W]
    return out


@cached_njit
def determinant(t):
    """The determinant of ``t``'s matrix: negative when the map mirrors the
    image (where ``w > 0``), zero when it has no inverse."""
    if is_axis_aligned(t):
        return t[SCALE_X] * t[SCALE_Y]
    return (t[0] * (t[4] * t[8] - t[5] * t[7]) - t[1] * (t[3] * t[8] - t[5] * t[6])
            + t[2] * (t[3] * t[7] - t[4] * t[6]))


@cached_njit
def inverse(t, out):
    """Write into ``out`` (9 float64 values) the inverse of ``t``'s matrix,
    row-major (the adjugate over the determinant); returns ``out``."""
    det = determinant(t)
    out[0] = (t[4] * t[8] - t[5] * t[7]) / det
    out[1] = (t[2] * t[7] - t[1] * t[8]) / det
    out[2] = (t[1] * t[5] - t[2] * t[4]) / det
    out[3] = (t[5] * t[6] - t[3] * t[8]) / det
    out[4] = (t[0] * t[8] - t[2] * t[6]) / det
    out[5] = (t[2] * t[3] - t[0] * t[5]) / det
    out[6] = (t[3] * t[7] - t[4] * t[6]) / det
    out[7] = (t[1] * t[6] - t[0] * t[7]) / det
    out[8] = (t[0] * t[4] - t[1] * t[3]) / det
    return out


@cached_njit
def _project(m, x, y):
    """Point (``x``, ``y``) through the matrix ``m`` (9 values, row-major);
    NaNs behind the horizon (``w <= 0``)."""
    w = m[6] * x + m[7] * y + m[8]
    if not w > 0.0:
        return np.nan, np.nan
    return (m[0] * x + m[1] * y + m[2]) / w, (m[3] * x + m[4] * y + m[5]) / w


@cached_njit
def map_point(t, x, y):
    """Point (``x``, ``y``) moved by ``t``, as (x, y); NaNs for a point
    behind the horizon (``w <= 0``)."""
    if is_axis_aligned(t):
        return t[SCALE_X] * x + t[OFFSET_X], t[SCALE_Y] * y + t[OFFSET_Y]
    return _project(t, x, y)


@cached_njit
def map_box(t, x1, y1, x2, y2):
    """The box (``x1``, ``y1``, ``x2``, ``y2``) moved by ``t``: the smallest
    box holding its four moved corners, as (x1, y1, x2, y2) with x1 <= x2
    and y1 <= y2; NaNs when a corner is behind the horizon."""
    if is_axis_aligned(t):
        sx, tx, sy, ty = t[SCALE_X], t[OFFSET_X], t[SCALE_Y], t[OFFSET_Y]
        x1, x2 = sx * x1 + tx, sx * x2 + tx
        y1, y2 = sy * y1 + ty, sy * y2 + ty
        return min(x1, x2), min(y1, y2), max(x1, x2), max(y1, y2)
    ax, ay = map_point(t, x1, y1)
    bx, by = map_point(t, x2, y1)
    cx, cy = map_point(t, x2, y2)
    dx, dy = map_point(t, x1, y2)
    if np.isnan(ax) or np.isnan(bx) or np.isnan(cx) or np.isnan(dx):
        return np.nan, np.nan, np.nan, np.nan
    return min(ax, bx, cx, dx), min(ay, by, cy, dy), max(ax, bx, cx, dx), max(ay, by, cy, dy)


@cached_njit
def is_axis_aligned_chain(transforms):
    """Whether every transform of the tuple ``transforms`` is axis-aligned."""
    for t in transforms:
        if not is_axis_aligned(t):
            return False
    return True


@cached_njit
def _within(x, y, t):
    """Whether (x, y) lies on the closed output rectangle of ``t``."""
    return 0.0 <= x <= t[OUT_W] and 0.0 <= y <= t[OUT_H]


@cached_njit
def point_survives(transforms, x, y):
    """Whether point (``x``, ``y``) of the chain's input stays on every
    stage's output as ``transforms`` move it (a rotation after a crop, say,
    brings back no point the crop cut off)."""
    for t in transforms:
        x, y = map_point(t, x, y)
        if not _within(x, y, t):
            return False
    return True


@cached_njit
def box_through(transforms, x1, y1, x2, y2):
    """The box moved by each stage of ``transforms`` in turn and clipped to
    that stage's output (as torchvision clamps boxes after each transform);
    NaNs once a corner goes behind a horizon."""
    for t in transforms:
        x1, y1, x2, y2 = map_box(t, x1, y1, x2, y2)
        x1, x2 = min(max(x1, 0.0), t[OUT_W]), min(max(x2, 0.0), t[OUT_W])
        y1, y2 = min(max(y1, 0.0), t[OUT_H]), min(max(y2, 0.0), t[OUT_H])
    return x1, y1, x2, y2


@cached_njit
def uncovered(transforms):
    """(out_h, out_w) bool array of the chain's last output: True where the
    pixel's centre, walked back through the stages, leaves the output of an
    earlier stage; there the image holds a fill, not a moved pixel, and so
    must a mask."""
    n = len(transforms)
    inverses = np.empty((n, MATRIX))
    for k in range(n):
        inverse(transforms[k], inverses[k])
    last = transforms[n - 1]
    out = np.zeros((int(last[OUT_H]), int(last[OUT_W])), np.bool_)
    for i in range(out.shape[0]):
        for j in range(out.shape[1]):
            x, y = j + 0.5, i + 0.5
            for k in range(n - 1, 0, -1):
                x, y = _project(inverses[k], x, y)
                before = transforms[k - 1]
                if not (x >= 0.0 and x < before[OUT_W] and y >= 0.0 and y < before[OUT_H]):
                    out[i, j] = True
                    break
    return out


def identity(height: int, width: int) -> np.ndarray:
    """The transform that leaves a ``height`` x ``width`` image as it is."""
    return np.array([1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, height, width])


def apply_to_points(transform: np.ndarray, xy: np.ndarray) -> np.ndarray:
    """Points ``(..., 2)`` as ``(x, y)`` moved by ``transform`` (NumPy, for
    checks and plain-Python use); NaN for a point behind the horizon."""
    t = np.asarray(transform, np.float64)
    out = np.array(xy, np.float64, copy=True)
    x, y = out[..., 0].copy(), out[..., 1].copy()
    if is_axis_aligned(t):
        out[..., 0] = t[SCALE_X] * x + t[OFFSET_X]
        out[..., 1] = t[SCALE_Y] * y + t[OFFSET_Y]
        return out
    w = t[6] * x + t[7] * y + t[8]
    w = np.where(w > 0, w, np.nan)
    out[..., 0] = (t[0] * x + t[1] * y + t[2]) / w
    out[..., 1] = (t[3] * x + t[4] * y + t[5]) / w
    return out
