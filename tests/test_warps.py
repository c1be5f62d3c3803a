"""Projective geometry and the warps: transforms that compose as matrices
(axis-aligned chains with the arithmetic they always had), points, boxes
and masks moved through any projective map, and rotation, affine and
perspective warps whose pixels are Pillow's own, with boxes, keypoints and
masks following them."""

from __future__ import annotations

import math
from typing import Any

import numba
import numpy as np
import pytest
from PIL import Image

import real_photos
import slipstream as ss
from slipstream.compiler import ArraySource, Pipeline, RefNode
from slipstream.compiler import random as rnd
from slipstream.errors import ArgumentError, SlipstreamError
from slipstream.fields import geometry
from slipstream.fields import masks as M
from slipstream.ops import (BoundingBoxes, Count, InstanceMasks, KeptWithBoxes, Keypoints, RandomAffine,
                            RandomHorizontalFlip, RandomPerspective, RandomResizedCrop, RandomRotation,
                            RandomVerticalFlip, Resize, SegmentationMask, warps)
from test_detection import FIELDS, Shapes, half_shape_pixels
from test_masks import blobs

# ---------------------------------------------------------------- geometry


def old_compose(steps: list[tuple[float, float, float, float, float, float]]) -> tuple[float, ...]:
    """The axis-aligned composition of six-value transforms (scale_y, scale_x,
    offset_y, offset_x, out_h, out_w), as slipstream computed it before
    transforms became matrices."""
    sy, sx, ty, tx, out_h, out_w = 1.0, 1.0, 0.0, 0.0, 0.0, 0.0
    for s_y, s_x, o_y, o_x, h, w in steps:
        sy, ty = s_y * sy, s_y * ty + o_y
        sx, tx = s_x * sx, s_x * tx + o_x
        out_h, out_w = h, w
    return sy, sx, ty, tx, out_h, out_w


def random_region(rng: np.random.Generator) -> np.ndarray:
    t = np.empty(geometry.SIZE)
    geometry.set_region(t, rng.uniform(-20, 300), rng.uniform(-20, 300), rng.uniform(1, 400), rng.uniform(1, 400),
                        int(rng.integers(1, 300)), int(rng.integers(1, 300)), bool(rng.integers(2)))
    return t


def random_shift(rng: np.random.Generator) -> np.ndarray:
    t = np.empty(geometry.SIZE)
    geometry.set_shift(t, int(rng.integers(1, 300)), int(rng.integers(1, 300)), int(rng.integers(-30, 30)),
                       int(rng.integers(-30, 30)), bool(rng.integers(2)), bool(rng.integers(2)))
    return t


def six(t: np.ndarray) -> tuple[float, ...]:
    return tuple(float(t[k]) for k in (geometry.SCALE_Y, geometry.SCALE_X, geometry.OFFSET_Y, geometry.OFFSET_X,
                                       geometry.OUT_H, geometry.OUT_W))


def random_projective(rng: np.random.Generator, height: int, width: int, perspective: bool) -> np.ndarray:
    """A rotation, shear, scale and shift about the image's centre, with a
    mild perspective part when asked, onto a random output size."""
    angle, shear = rng.uniform(-np.pi, np.pi), rng.uniform(-0.5, 0.5)
    scale = np.exp(rng.uniform(-1, 1))
    linear = scale * np.array([[np.cos(angle), -np.sin(angle)], [np.sin(angle), np.cos(angle)]]) @ \
        np.array([[1, np.tan(shear)], [0, 1]])
    m = np.eye(3)
    m[:2, :2] = linear
    centre = np.array([width / 2, height / 2])
    m[:2, 2] = centre - linear @ centre + rng.uniform(-10, 10, 2)
    if perspective:
        m[2, :2] = rng.uniform(-0.4, 0.4, 2) / np.array([width, height])
    t = np.empty(geometry.SIZE)
    geometry.set_matrix(t, m, int(rng.integers(1, 60)), int(rng.integers(1, 60)))
    return t


def test_axis_aligned_chains_compose_bit_for_bit_as_six_values_did():
    rng = np.random.default_rng(0)
    for _ in range(300):
        steps = [random_region(rng) if rng.integers(2) else random_shift(rng) for _ in range(rng.integers(1, 5))]
        composed = geometry.compose(tuple(steps), np.empty(geometry.SIZE))
        assert geometry.is_axis_aligned(composed)
        assert six(composed) == old_compose([six(t) for t in steps])  # exact, not close
        corners = rng.uniform(-50, 400, (4, 2)).astype(np.float32)
        sy, sx, ty, tx, _, _ = six(composed)
        wide = corners.astype(np.float64)
        expected = np.stack([sx * wide[:, 0] + tx, sy * wide[:, 1] + ty], axis=-1)
        assert np.array_equal(geometry.apply_to_points(composed, corners), expected)
        x1, y1, x2, y2 = geometry.map_box(composed, corners[0, 0], corners[0, 1], corners[1, 0], corners[1, 1])
        assert (x1, x2) == (min(expected[:2, 0]), max(expected[:2, 0]))
        assert (y1, y2) == (min(expected[:2, 1]), max(expected[:2, 1]))


def test_compose_multiplies_the_matrices_in_order():
    rng = np.random.default_rng(1)
    for _ in range(100):
        steps = [random_projective(rng, 80, 60, bool(rng.integers(2))) if rng.integers(2) else random_region(rng)
                 for _ in range(rng.integers(1, 5))]
        composed = geometry.compose(tuple(steps), np.empty(geometry.SIZE))
        expected = np.eye(3)
        for t in steps:
            expected = t[:9].reshape(3, 3) @ expected
        np.testing.assert_allclose(composed[:9].reshape(3, 3), expected, rtol=1e-12, atol=1e-9)
        assert (composed[geometry.OUT_H], composed[geometry.OUT_W]) == (steps[-1][geometry.OUT_H],
                                                                        steps[-1][geometry.OUT_W])


def test_points_boxes_and_the_inverse_follow_the_matrix():
    rng = np.random.default_rng(2)
    for _ in range(100):
        t = random_projective(rng, 50, 70, True)
        m = t[:9].reshape(3, 3)
        xy = rng.uniform(0, 70, (5, 2))
        h = np.c_[xy, np.ones(5)] @ m.T
        np.testing.assert_allclose(geometry.apply_to_points(t, xy), h[:, :2] / h[:, 2:], rtol=1e-12)
        for (x, y), expected in zip(xy, h[:, :2] / h[:, 2:]):
            np.testing.assert_allclose(geometry.map_point(t, x, y), expected, rtol=1e-12)
        inverse = geometry.inverse(t, np.empty(geometry.MATRIX)).reshape(3, 3)
        np.testing.assert_allclose(inverse @ m, np.eye(3), atol=1e-12)
        assert np.sign(geometry.determinant(t)) == np.sign(np.linalg.det(m))
        x1, y1, x2, y2 = sorted(xy[:2, 0]) + sorted(xy[:2, 1])
        box = geometry.map_box(t, x1, y1, x2, y2)
        corners = geometry.apply_to_points(t, np.array([[x1, y1], [x2, y1], [x2, y2], [x1, y2]]))
        np.testing.assert_allclose(box, [*corners.min(0), *corners.max(0)], rtol=1e-12)


def test_a_point_behind_the_horizon_has_no_image():
    t = np.empty(geometry.SIZE)
    geometry.set_matrix(t, np.array([[1.0, 0, 0], [0, 1, 0], [-0.1, 0, 1]]), 20, 20)  # w = 1 - x / 10
    assert np.isnan(geometry.map_point(t, 10.0, 3.0)).all() and np.isnan(geometry.map_point(t, 12.0, 3.0)).all()
    assert np.isnan(geometry.map_box(t, 2.0, 2.0, 12.0, 4.0)).all()
    assert np.isnan(geometry.apply_to_points(t, np.array([[11.0, 0.0]]))).all()
    assert np.allclose(geometry.map_point(t, 5.0, 3.0), (10.0, 6.0))


def naive_nearest(mask: np.ndarray, t: np.ndarray, fill: int) -> np.ndarray:
    """The rule of slipstream.fields.geometry, pixel by pixel: each output
    pixel takes the stored pixel containing its centre's inverse image."""
    out_h, out_w = int(t[geometry.OUT_H]), int(t[geometry.OUT_W])
    inverse = np.linalg.inv(t[:9].reshape(3, 3))
    out = np.full((out_h, out_w), fill, mask.dtype)
    for i in range(out_h):
        for j in range(out_w):
            u, v, w = inverse @ (j + 0.5, i + 0.5, 1.0)
            if w > 0 and 0 <= u / w < mask.shape[1] and 0 <= v / w < mask.shape[0]:
                out[i, j] = mask[int(np.floor(v / w)), int(np.floor(u / w))]
    return out


def test_masks_through_projective_maps_equal_the_reference_and_the_rule():
    rng = np.random.default_rng(3)
    for trial in range(40):
        height, width = (int(v) for v in rng.integers(5, 90, 2))
        mask = blobs(rng, height, width, 300 if trial % 4 == 0 else 9, np.uint16 if trial % 4 == 0 else np.uint8)
        t = random_projective(rng, height, width, trial % 2 == 1)
        reference = M.resample_nearest(mask, t, 250)
        out = np.full(t[9:].astype(int), 77, mask.dtype)
        assert M.decode_mask(np.frombuffer(M.encode_mask(mask), np.uint8), height, width, t, out, 250) == 0
        np.testing.assert_array_equal(out, reference)
        # the reference is the rule, up to the last bit of a point on a pixel edge
        assert (reference != naive_nearest(mask, t, 250)).mean() < 0.01


def test_instance_masks_through_projective_maps_equal_the_reference():
    rng = np.random.default_rng(4)
    for trial in range(30):
        height, width = (int(v) for v in rng.integers(5, 90, 2))
        stack = np.stack([blobs(rng, height, width, 2) for _ in range(4)])
        stack[1] = 0  # an empty mask
        t = random_projective(rng, height, width, trial % 2 == 1)
        select = np.array([3, 1, 0, 3], np.int64)
        out = np.full((5, *t[9:].astype(int)), 9, np.uint8)
        data = np.frombuffer(M.encode_instances(stack), np.uint8)
        assert M.decode_instances(data, height, width, 4, select, 4, t, out) == 0
        for k, index in enumerate(select):
            np.testing.assert_array_equal(out[k], M.resample_nearest(stack[index], t, 0))
        assert not out[4].any()


def test_what_an_earlier_stage_cut_off_stays_cut_off():
    rng = np.random.default_rng(5)
    for _ in range(20):
        crop = random_region(rng)
        h, w = int(crop[geometry.OUT_H]), int(crop[geometry.OUT_W])
        warp = random_projective(rng, h, w, bool(rng.integers(2)))
        chain = (crop, warp)
        gone = geometry.uncovered(chain)
        inverse = np.linalg.inv(warp[:9].reshape(3, 3))
        yy, xx = np.mgrid[0:gone.shape[0], 0:gone.shape[1]] + 0.5
        u, v, z = np.tensordot(inverse, np.stack([xx, yy, np.ones_like(xx)]), 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            inside = (z > 0) & (u / z >= 0) & (u / z < w) & (v / z >= 0) & (v / z < h)
        assert (gone == ~inside).mean() > 0.99  # the same rule, up to the last bit on an edge
        for x, y in rng.uniform(-100, 500, (50, 2)):
            cx, cy = geometry.map_point(crop, x, y)
            wx, wy = geometry.map_point(warp, cx, cy)
            on = 0 <= cx <= w and 0 <= cy <= h and 0 <= wx <= warp[geometry.OUT_W] and 0 <= wy <= warp[geometry.OUT_H]
            assert geometry.point_survives(chain, x, y) == on
        x1, y1 = rng.uniform(0, 200, 2)
        box = geometry.box_through(chain, x1, y1, x1 + 80.0, y1 + 60.0)
        clipped = np.clip(geometry.map_box(crop, x1, y1, x1 + 80.0, y1 + 60.0), 0, [w, h, w, h])
        moved = np.clip(geometry.map_box(warp, *clipped), 0, [warp[10], warp[9]] * 2)
        if not np.isnan(moved).any():
            np.testing.assert_allclose(box, moved, rtol=1e-12)


# ---------------------------------------------------------------- the kernels against Pillow

PHOTO_SIZE = (500, 375)  # (width, height), ImageNet's most common
FILL = (200, 30, 90)
FILTERS = {True: Image.Resampling.NEAREST, False: Image.Resampling.BILINEAR}


def photos() -> list[np.ndarray]:
    """Small crops of real photos (odd sizes, one grayscale), each a C-contiguous (h, w, c) uint8 array."""
    crops = [real_photos.centre(name, h, w, PHOTO_SIZE)
             for name, (h, w) in zip(real_photos.COLOUR, [(45, 61), (64, 48), (37, 37)])]
    crops.append(np.ascontiguousarray(np.asarray(Image.fromarray(crops[0]).convert("L"))[..., None]))
    return crops


PHOTO_CROPS = photos()


def pil(image: np.ndarray) -> Image.Image:
    return Image.fromarray(image[..., 0] if image.shape[2] == 1 else image)


def as_array(image: Image.Image) -> np.ndarray:
    array = np.asarray(image)
    return array[..., None] if array.ndim == 2 else array


def fill_for(image: np.ndarray, fill: tuple[int, ...]) -> tuple[int, ...]:
    return fill[:image.shape[2]]


def pillow_fill(image: np.ndarray, fill: tuple[int, ...]) -> Any:
    """The fillcolor torchvision's _parse_fill hands Pillow: an int for one band, a tuple for several."""
    return fill[0] if image.shape[2] == 1 else fill


def warped(kernel: Any, image: np.ndarray, data: np.ndarray, nearest: bool, fill: tuple[int, ...]) -> np.ndarray:
    out = np.full_like(image, 7)
    kernel(image, out, np.asarray(data, np.float64), nearest, np.array(fill_for(image, fill), np.uint8))
    return out


def differing(ours: np.ndarray, theirs: np.ndarray) -> str:
    wrong = np.argwhere(ours != theirs)
    return f"{len(wrong)} values differ, first at {wrong[:3].tolist()}"


@pytest.mark.parametrize("nearest", [True, False])
@pytest.mark.parametrize("angle", [0.0, 7.5, -33.0, 90.0, 180.0, -90.0, 123.4, 359.9, 1e-9, 45.0])
def test_rotation_equals_pillows_rotate(angle, nearest):
    for image in PHOTO_CROPS:
        for fill in ((0, 0, 0), FILL):
            h, w = image.shape[:2]
            ours = warped(warps.affine, image, warps.rotation_inverse(h, w, angle), nearest, fill)
            theirs = as_array(pil(image).rotate(angle, FILTERS[nearest], fillcolor=pillow_fill(image, fill)))
            assert np.array_equal(ours, theirs), (image.shape, fill, differing(ours, theirs))
            about = warps.rotation_inverse_about(w * 0.3, h * 0.8, angle)
            ours = warped(warps.affine, image, about, nearest, fill)
            theirs = as_array(pil(image).rotate(angle, FILTERS[nearest], center=(w * 0.3, h * 0.8),
                                                fillcolor=pillow_fill(image, fill)))
            assert np.array_equal(ours, theirs), ("about a point", image.shape, differing(ours, theirs))


AFFINES = [  # angle, (tx, ty), scale, (shear_x, shear_y)
    (0.0, (0, 0), 1.0, (0.0, 0.0)), (17.0, (3, -4), 1.0, (0.0, 0.0)), (-40.0, (0, 0), 0.7, (12.0, 0.0)),
    (0.0, (5, 2), 1.6, (0.0, 0.0)), (0.0, (0, 0), 1.0, (-25.0, 8.0)), (95.0, (-7, 11), 1.2, (5.0, -15.0)),
    (0.0, (0, 0), 0.35, (0.0, 0.0)), (180.0, (2, 2), 2.5, (30.0, 0.0)), (-3.3, (40000, -40000), 1.0, (0.0, 0.0)),
]


@pytest.mark.parametrize("nearest", [True, False])
@pytest.mark.parametrize("angle, translate, scale, shear", AFFINES)
def test_affine_equals_pillows_transform_with_torchvisions_matrix(angle, translate, scale, shear, nearest):
    for image in PHOTO_CROPS:
        h, w = image.shape[:2]
        inverse = warps.affine_inverse(w * 0.5, h * 0.5, angle, *translate, scale, *shear)
        ours = warped(warps.affine, image, inverse, nearest, FILL)
        theirs = as_array(pil(image).transform((w, h), Image.Transform.AFFINE, inverse.tolist(), FILTERS[nearest],
                                               fillcolor=pillow_fill(image, FILL)))
        assert np.array_equal(ours, theirs), (image.shape, differing(ours, theirs))


def test_the_affine_paths_of_pillow_are_each_taken():
    """A pure scale (the column table), a rotation (fixed point), a map
    whose coordinates pass 32768 (float sums) and whole-pixel shifts (row
    copies), inside, across and beyond the edges, all match, including a
    scale with a fraction that accumulates."""
    image = PHOTO_CROPS[0]
    h, w = image.shape[:2]
    shifts = [[1.0, 0.0, float(dx), 0.0, 1.0, float(dy)]
              for dx, dy in ((5, 0), (0, -7), (-3, 9), (w - 1, 0), (0, h), (-w, 2), (w + 40, -h - 3))]
    for data in ([0.37, 0.0, 3.1, 0.0, 0.61, -2.2], [-1.0, 0.0, w, 0.0, 1.0, 0.0],
                 [0.8, 0.3, -1.0, -0.2, 0.9, 4.0], [1.0, 0.001, 40000.0, 0.0, 1.0, -39990.0],
                 [1.0, 0.2, -33000.0, 0.1, 1.0, 33010.0], *shifts):
        for nearest in (True, False):
            ours = warped(warps.affine, image, data, nearest, FILL)
            theirs = as_array(pil(image).transform((w, h), Image.Transform.AFFINE, data, FILTERS[nearest],
                                                   fillcolor=FILL))
            assert np.array_equal(ours, theirs), (data, nearest, differing(ours, theirs))
    assert (warped(warps.affine, image, [1.0, 0.0, 1e6, 0.0, 1.0, 0.0], True, FILL) == FILL).all()


@pytest.mark.parametrize("nearest", [True, False])
def test_perspective_equals_pillows_transform_with_torchvisions_coefficients(nearest):
    rng = np.random.default_rng(7)
    for image in PHOTO_CROPS:
        h, w = image.shape[:2]
        starts = np.array([[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]])
        for scale in (0.0, 0.3, 0.6, 1.0):
            ends = warps.perspective_corners(np.uint64(rng.integers(2**63)), h, w, scale)
            coefficients = warps.perspective_coefficients(starts, ends)
            ours = warped(warps.perspective, image, coefficients, nearest, FILL)
            theirs = as_array(pil(image).transform((w, h), Image.Transform.PERSPECTIVE, coefficients.tolist(),
                                                   FILTERS[nearest], fillcolor=pillow_fill(image, FILL)))
            assert np.array_equal(ours, theirs), (image.shape, scale, differing(ours, theirs))


# ---------------------------------------------------------------- the matrices


def test_round15_is_pythons_round():
    rng = np.random.default_rng(8)
    values = np.concatenate([rng.uniform(-1, 1, 20000), np.cos(rng.uniform(-7, 7, 20000)),
                             np.arange(-2000, 2001) / 2000, [0.0, -0.0, 1e-16, -4.9e-16, 5e-16, 2.5e-15, 1.0, -1.0],
                             (np.arange(1, 2000) + 0.5) / 1e15])
    for v in values:
        ours, theirs = warps.round15(v), round(float(v), 15)
        assert ours == theirs and math.copysign(1, ours) == math.copysign(1, theirs), (v, ours, theirs)


def move(x: float, y: float) -> np.ndarray:
    """The 3 x 3 matrix of a shift by (x, y)."""
    return np.array([[1, 0, x], [0, 1, y], [0, 0, 1.0]])


def test_affine_inverse_is_torchvisions_formula_and_inverts_the_documented_map():
    rng = np.random.default_rng(9)
    for _ in range(500):
        cx, cy, angle, scale = rng.uniform(0, 300), rng.uniform(0, 300), rng.uniform(-180, 180), rng.uniform(0.2, 3)
        tx, ty = (float(v) for v in rng.integers(-50, 50, 2))
        shear_x, shear_y = rng.uniform(-40, 40, 2)
        ours = warps.affine_inverse(cx, cy, angle, tx, ty, scale, shear_x, shear_y)
        # torchvision's expression, in its order of operations (transforms/functional.py)
        rot, sx, sy = math.radians(angle), math.radians(shear_x), math.radians(shear_y)
        a = math.cos(rot - sy) / math.cos(sy)
        b = -math.cos(rot - sy) * math.tan(sx) / math.cos(sy) - math.sin(rot)
        c = math.sin(rot - sy) / math.cos(sy)
        d = -math.sin(rot - sy) * math.tan(sx) / math.cos(sy) + math.cos(rot)
        m = [x / scale for x in (d, -b, 0.0, -c, a, 0.0)]
        m[2] += m[0] * (-cx - tx) + m[1] * (-cy - ty)
        m[5] += m[3] * (-cx - tx) + m[4] * (-cy - ty)
        m[2] += cx
        m[5] += cy
        assert ours.tolist() == m
        # ... which inverts translate * centre * rotate * scale * shear_y * shear_x * centre^-1
        rotation = np.array([[math.cos(rot), -math.sin(rot), 0], [math.sin(rot), math.cos(rot), 0], [0, 0, 1]])
        shears = np.array([[1, 0, 0], [-math.tan(sy), 1, 0], [0, 0, 1]]) @ \
            np.array([[1, -math.tan(sx), 0], [0, 1, 0], [0, 0, 1]])
        forward = move(tx, ty) @ move(cx, cy) @ rotation @ np.diag([scale, scale, 1]) @ shears @ move(-cx, -cy)
        np.testing.assert_allclose(np.r_[ours, 0, 0, 1].reshape(3, 3) @ forward, np.eye(3), atol=1e-9)


def test_perspective_coefficients_send_the_end_points_to_the_start_points():
    rng = np.random.default_rng(10)
    for _ in range(300):
        h, w = (int(v) for v in rng.integers(8, 500, 2))
        starts = np.array([[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]])
        ends = warps.perspective_corners(np.uint64(rng.integers(2**63)), h, w, rng.uniform(0, 1))
        ours = warps.perspective_coefficients(starts, ends)
        system = np.zeros((8, 8))
        for i, ((ex, ey), (sx, sy)) in enumerate(zip(ends, starts)):
            system[2 * i] = [ex, ey, 1, 0, 0, 0, -sx * ex, -sx * ey]
            system[2 * i + 1] = [0, 0, 0, ex, ey, 1, -sy * ex, -sy * ey]
        exact = np.linalg.lstsq(system, starts.reshape(8).astype(float), rcond=None)[0]
        assert np.array_equal(ours, ours.astype(np.float32).astype(np.float64))  # float32 values, as torchvision's
        np.testing.assert_allclose(ours, exact.astype(np.float32), rtol=2**-22, atol=1e-9)  # QR leaves 1e-12 where 0 is exact
        a = ours
        for (ex, ey), (sx, sy) in zip(ends, starts):
            d = a[6] * ex + a[7] * ey + 1
            assert abs((a[0] * ex + a[1] * ey + a[2]) / d - sx) < 1e-2
            assert abs((a[3] * ex + a[4] * ey + a[5]) / d - sy) < 1e-2


# ---------------------------------------------------------------- the operations against Pillow

SEED = 14


def same_size_crops(height: int = 40, width: int = 52) -> np.ndarray:
    """Crops of one size from the photos, several per photo."""
    crops = []
    for name in list(real_photos.COLOUR)[:3]:
        rgb = real_photos.pixels(name, PHOTO_SIZE)
        for k in range(4):
            top, left = k * (rgb.shape[0] - height) // 4, (3 - k) * (rgb.shape[1] - width) // 4
            crops.append(rgb[top:top + height, left:left + width])
    return np.stack(crops)


CROPS = same_size_crops()


def run(op: Any, images: np.ndarray = CROPS) -> tuple[np.ndarray, list[np.uint64]]:
    """The op on every image, and each sample's random key (node 1 of the pipeline)."""
    compiled = Pipeline([ArraySource(images), op]).compile(len(images), seed=SEED)
    out = np.array(compiled(np.arange(len(images))))
    stream = compiled.graph.pipelines["output"][1].stream
    return out, [np.uint64(rnd.sample_key(np.uint64(SEED), 0, i, stream)) for i in range(len(images))]


@pytest.mark.parametrize("interpolation", ["nearest", "bilinear"])
def test_random_rotation_is_torchvisions_on_pil_images(interpolation):
    out, keys = run(RandomRotation((-50, 70), interpolation=interpolation, fill=FILL))
    angles = []
    for image, result, key in zip(CROPS, out, keys):
        angle = rnd.uniform_range(key, warps.ROTATION_DRAWS.angle, -50.0, 70.0)
        angles.append(angle)
        expected = Image.fromarray(image).rotate(angle, FILTERS[interpolation == "nearest"], fillcolor=FILL)
        assert np.array_equal(result, np.asarray(expected)), differing(result, np.asarray(expected))
    assert min(angles) < -20 and max(angles) > 40
    centred, keys = run(RandomRotation(30, center=(10, 5)))
    for image, result, key in zip(CROPS, centred, keys):
        angle = rnd.uniform_range(key, warps.ROTATION_DRAWS.angle, -30.0, 30.0)
        expected = Image.fromarray(image).rotate(angle, center=(10.0, 5.0))
        assert np.array_equal(result, np.asarray(expected))


@pytest.mark.parametrize("interpolation", ["nearest", "bilinear"])
def test_random_affine_is_torchvisions_on_pil_images(interpolation):
    op = RandomAffine(25, translate=(0.2, 0.1), scale=(0.7, 1.3), shear=(-10, 10, -5, 15), interpolation=interpolation,
                      fill=FILL)
    out, keys = run(op)
    h, w = CROPS.shape[1:3]
    for image, result, key in zip(CROPS, out, keys):
        angle = rnd.uniform_range(key, warps.AFFINE_DRAWS.angle, -25.0, 25.0)
        tx = round(rnd.uniform_range(key, warps.AFFINE_DRAWS.shift_x, -0.2 * w, 0.2 * w))
        ty = round(rnd.uniform_range(key, warps.AFFINE_DRAWS.shift_y, -0.1 * h, 0.1 * h))
        scale = rnd.uniform_range(key, warps.AFFINE_DRAWS.scale, 0.7, 1.3)
        shear = (rnd.uniform_range(key, warps.AFFINE_DRAWS.shear_x, -10.0, 10.0),
                 rnd.uniform_range(key, warps.AFFINE_DRAWS.shear_y, -5.0, 15.0))
        inverse = warps.affine_inverse(w * 0.5, h * 0.5, angle, tx, ty, scale, *shear)
        expected = np.asarray(Image.fromarray(image).transform((w, h), Image.Transform.AFFINE, inverse.tolist(),
                                                               FILTERS[interpolation == "nearest"], fillcolor=FILL))
        assert np.array_equal(result, expected), differing(result, expected)
    plain, keys = run(RandomAffine(0, shear=20, center=(3, 4)))
    for image, result, key in zip(CROPS, plain, keys):
        shear = rnd.uniform_range(key, warps.AFFINE_DRAWS.shear_x, -20.0, 20.0)
        inverse = warps.affine_inverse(3.0, 4.0, 0.0, 0, 0, 1.0, shear, 0.0)
        expected = np.asarray(Image.fromarray(image).transform((w, h), Image.Transform.AFFINE, inverse.tolist()))
        assert np.array_equal(result, expected)


@pytest.mark.parametrize("interpolation", ["nearest", "InterpolationMode.BILINEAR"])
def test_random_perspective_is_torchvisions_on_pil_images(interpolation):
    out, keys = run(RandomPerspective(0.6, p=0.7, interpolation=interpolation, fill=FILL[1]))
    h, w = CROPS.shape[1:3]
    starts = np.array([[0, 0], [w - 1, 0], [w - 1, h - 1], [0, h - 1]])
    warped_count = 0
    for image, result, key in zip(CROPS, out, keys):
        if not rnd.uniform(key, warps.PERSPECTIVE_DRAWS.apply) < 0.7:
            assert np.array_equal(result, image)
            continue
        warped_count += 1
        ends = warps.perspective_corners(key, h, w, 0.6)
        bound_w, bound_h = int(0.6 * (w // 2)) + 1, int(0.6 * (h // 2)) + 1
        assert (ends[[0, 3], 0] < bound_w).all() and (ends[[1, 2], 0] >= w - bound_w).all()
        assert (ends[[0, 1], 1] < bound_h).all() and (ends[[2, 3], 1] >= h - bound_h).all()
        coefficients = warps.perspective_coefficients(starts, ends)
        expected = np.asarray(Image.fromarray(image).transform(
            (w, h), Image.Transform.PERSPECTIVE, coefficients.tolist(), FILTERS[interpolation == "nearest"],
            fillcolor=(FILL[1],) * 3))
        assert np.array_equal(result, expected), differing(result, expected)
    assert 0 < warped_count < len(CROPS)


def test_grayscale_images_warp_with_one_fill_value():
    gray = np.stack([np.asarray(Image.fromarray(c).convert("L"))[..., None] for c in CROPS[:4]])
    # the kernels write as many values per pixel as the image has channels, whatever the length of fill
    for kernel, data in ((warps.affine, warps.rotation_inverse(40, 52, 33.0)), (warps.perspective,
                                                                             [1.1, 0.1, -3, 0.05, 0.9, 2, 1e-3, 0])):
        for nearest in (True, False):
            out = np.full((2, 40, 52, 1), 5, np.uint8)
            kernel(gray[0], out[0], np.asarray(data, np.float64), nearest, np.array([77, 1, 2], np.uint8))
            method = Image.Transform.AFFINE if kernel is warps.affine else Image.Transform.PERSPECTIVE
            expected = Image.fromarray(gray[0][..., 0]).transform((52, 40), method, list(data), FILTERS[nearest],
                                                                   fillcolor=77)
            assert np.array_equal(out[0][..., 0], np.asarray(expected)) and (out[1] == 5).all()
    out, keys = run(RandomRotation(40, fill=99), gray)
    for image, result, key in zip(gray, out, keys):
        angle = rnd.uniform_range(key, warps.ROTATION_DRAWS.angle, -40.0, 40.0)
        expected = Image.fromarray(image[..., 0]).rotate(angle, fillcolor=99)
        assert np.array_equal(result[..., 0], np.asarray(expected))


def test_bad_arguments_are_refused_with_the_reason():
    with pytest.raises(ArgumentError, match=r"^RandomRotation: expand must be False, got True \(an expanded "
                                            r"rotation changes the image size with the angle, and a batch holds "
                                            r"images of one size"):
        RandomRotation(10, expand=True)
    with pytest.raises(ArgumentError, match=r"^RandomAffine: interpolation must be 'nearest' or 'bilinear', got "
                                            r"'bicubic'$"):
        RandomAffine(10, interpolation="bicubic")
    with pytest.raises(ArgumentError, match=r"^RandomRotation: degrees must be a number v >= 0 .*, got -5$"):
        RandomRotation(-5)
    with pytest.raises(ArgumentError, match=r"^RandomRotation: degrees must be a number v >= 0 .*, got nan$"):
        RandomRotation(math.nan)  # would turn every image into fill
    with pytest.raises(ArgumentError, match=r"^RandomRotation: degrees must be .*, got \(-1e\+308, 1e\+308\)$"):
        RandomRotation((-1e308, 1e308))  # a draw from it overflows to an infinite angle
    with pytest.raises(ArgumentError, match=r"^RandomRotation: center must be None or an \(x, y\) pair of numbers, "
                                            r"got \(1, inf\)$"):
        RandomRotation(10, center=(1, math.inf))
    with pytest.raises(ArgumentError, match=r"^RandomAffine: translate must be None or 2 numbers in \[0, 1\], got "
                                            r"\(0.5, 1.5\)$"):
        RandomAffine(0, translate=(0.5, 1.5))
    with pytest.raises(ArgumentError, match=r"^RandomAffine: scale must be None or a \(low, high\) pair of numbers "
                                            r"> 0, low <= high, got \(0.0, 1.0\)$"):
        RandomAffine(0, scale=(0.0, 1.0))
    with pytest.raises(ArgumentError, match=r"^RandomAffine: shear must be None, an x range .* or 4 numbers \(x_low, "
                                            r"x_high, y_low, y_high\), lows first.*, got \(1, 2, 3\)$"):
        RandomAffine(0, shear=(1, 2, 3))
    with pytest.raises(ArgumentError, match=r"^RandomAffine: shear must be .*, got \(0, 1, 3, 2\) \(low > high\)$"):
        RandomAffine(0, shear=(0, 1, 3, 2))
    with pytest.raises(ArgumentError, match=r"^RandomPerspective: fill must be a number or one number per channel "
                                            r"\(1 or 3\), each in \[0, 256\), got 300$"):
        RandomPerspective(fill=300)
    with pytest.raises(ArgumentError, match=r"^RandomPerspective: distortion_scale must be a number in \[0, 1\], got "
                                            r"1.5$"):
        RandomPerspective(1.5)
    with pytest.raises(SlipstreamError, match=r"fill \(1, 2, 3\) has 3 values for images of 1 channels"):
        run(RandomRotation(5, fill=(1, 2, 3)), CROPS[:2, :, :, :1].copy())
    with pytest.raises(SlipstreamError, match=r"takes \(height, width, channels\) uint8 images of 1 or 3 channels"):
        run(RandomAffine(5), CROPS[:2].astype(np.float32))
    assert RandomAffine(3, interpolation="InterpolationMode.NEAREST").interpolation == "nearest"


def test_ranges_centres_and_fills_are_values_and_the_interpolation_is_structure():
    """Changing a range, a centre or a fill compiles nothing: the
    fingerprint (the compile cache key) leaves them out and the values
    keep their types, None or not; the interpolation shapes the code."""
    variants = [
        [RandomRotation(10), RandomRotation((-5, 30), center=(3, 4), fill=(1, 2, 3))],
        [RandomAffine(10), RandomAffine((0, 5), translate=(0.1, 0.2), scale=(0.5, 2), shear=(1, 2, 3, 4), fill=7,
                                        center=(1.5, 2)), RandomAffine(0, shear=20)],
        [RandomPerspective(), RandomPerspective(0.9, p=1.0, fill=(5, 6, 7))],
    ]
    for alike in variants:
        assert len({op.fingerprint() for op in alike}) == 1, alike
        assert len({numba.typeof(op.runtime_values()) for op in alike}) == 1, alike
    assert RandomAffine(10).fingerprint() != RandomAffine(10, interpolation="bilinear").fingerprint()


# ---------------------------------------------------------------- boxes, keypoints and masks follow the warps


class Annotated(Shapes):
    """The shapes of test_detection with two keypoints per box (its top-left
    and top-right corners), instance masks and a semantic mask."""

    def __getitem__(self, i: int) -> tuple[Any, ...]:
        jpeg, boxes, labels = super().__getitem__(i)
        masks = self.samples[i][3]
        points = np.stack([np.stack([boxes[:, 0], boxes[:, 1], np.ones(len(boxes))], -1),
                           np.stack([boxes[:, 2], boxes[:, 1], np.full(len(boxes), 2.0)], -1)], 1)
        semantic = (masks * labels[:, None, None]).max(0).astype(np.uint8)
        return jpeg, boxes, labels, points.astype(np.float32), masks, semantic


@pytest.fixture(scope="module")
def annotated(tmp_path_factory) -> tuple[str, Annotated]:
    source = Annotated(24, seed=11)
    path = str(tmp_path_factory.mktemp("warps") / "shapes.slip")
    ss.write(path, source, {**FIELDS, "points": ss.RaggedField(np.float32, (2, 3)), "masks": ss.InstanceMasksField(),
                            "mask": ss.SegmentationMaskField()}, verbose=False)
    return path, source


def stages(before: np.ndarray, after: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The chain (``before``, the rest) whose composition is ``after``."""
    rest = after.copy()
    rest[:9] = (after[:9].reshape(3, 3) @ np.linalg.inv(before[:9].reshape(3, 3))).reshape(9)
    return before, rest


def moved_boxes(boxes: np.ndarray, chain: tuple[np.ndarray, ...]) -> tuple[np.ndarray, np.ndarray]:
    """The stored XYXY boxes moved through ``chain`` stage by stage (the
    boxes holding their four moved corners, clipped to each stage's output),
    and which of them keep a pixel of width and height (BoundingBoxes'
    defaults)."""
    out = boxes.astype(np.float64)
    for t in chain:
        x1, y1, x2, y2 = out.T
        corners = np.stack([np.stack([x1, y1], -1), np.stack([x2, y1], -1), np.stack([x2, y2], -1),
                            np.stack([x1, y2], -1)], 1)
        moved = geometry.apply_to_points(t, corners)
        out = np.concatenate([moved.min(1), moved.max(1)], -1)
        out[:, [0, 2]] = out[:, [0, 2]].clip(0, t[geometry.OUT_W])
        out[:, [1, 3]] = out[:, [1, 3]].clip(0, t[geometry.OUT_H])
    return out, (out[:, 2] - out[:, 0] >= 1) & (out[:, 3] - out[:, 1] >= 1)


WARPED = {  # the operations before the warp (an axis-aligned chain), then the warp and what follows it
    "rotation": ([Resize((150, 180))], [RandomRotation(40, fill=(90, 90, 90))]),
    "bilinear rotation about a point": ([Resize((150, 180))], [RandomRotation((-20, 20), "bilinear",
                                                                              center=(40, 60))]),
    "crop, flip and affine": ([RandomResizedCrop(160, scale=(0.5, 1.0)), RandomHorizontalFlip()],
                              [RandomAffine(25, translate=(0.1, 0.1), scale=(0.8, 1.2), shear=(-10, 10, -5, 5))]),
    "perspective and flip": ([Resize((150, 180))], [RandomPerspective(0.4, p=1.0, interpolation="nearest"),
                                                    RandomVerticalFlip()]),
}


def transforms_of(path: str, image: list, pipelines: dict) -> list[np.ndarray]:
    """Each sample's composed transform, in the epoch's order, for the image pipeline ``image``."""
    pipelines = {**pipelines, "image": image}
    with ss.Loader(path, 8, pipelines, order=ss.Order("random", seed=6), verbose=False) as loader:
        return [t for batch in loader for t in batch[-1].numpy()]


@pytest.mark.parametrize("name", list(WARPED))
def test_boxes_keypoints_and_masks_follow_the_warps(annotated, name):
    path, source = annotated
    before, warp = WARPED[name]
    pipelines = {"image": before + warp, "boxes": [BoundingBoxes(follow="image")],
                 "labels": [KeptWithBoxes("boxes")], "counts": [Count("boxes")],
                 "points": [Keypoints(follow="image", boxes="boxes")],
                 "masks": [InstanceMasks(follow="image", boxes="boxes")], "mask": [SegmentationMask(follow="image")],
                 "transform": [RefNode("boxes", None, output=geometry.TRANSFORM)]}
    earlier = iter(transforms_of(path, before, {**pipelines, "points": None, "masks": None, "mask": None}))
    measured, kept_total, moved_points, cut = [], 0, 0, 0
    with ss.Loader(path, 8, pipelines, order=ss.Order("random", seed=6), verbose=False) as loader:
        for batch, indices in zip(loader, loader.epoch_batches(0)):
            images, boxes, labels, counts, points, masks, semantic, transforms = (t.numpy() for t in batch)
            for k, index in enumerate(indices):
                _, stored_boxes, stored_labels, stored_masks = source.samples[index]
                t, n = transforms[k], counts[k]
                chain = stages(next(earlier), t)
                assert not geometry.is_axis_aligned(t)
                expected, keep = moved_boxes(stored_boxes, chain)
                np.testing.assert_allclose(boxes[k, :n], expected[keep], atol=1e-3)
                assert labels[k, :n].tolist() == stored_labels[keep].tolist()
                stored_points = source[index][3][keep]
                moved = geometry.apply_to_points(t, stored_points[..., :2])
                inside = np.array([[geometry.point_survives(chain, x, y) for x, y in row]
                                   for row in stored_points[..., :2]], bool).reshape(moved.shape[:-1])
                np.testing.assert_allclose(points[k, :n, :, :2][inside], moved[inside], atol=1e-3)
                assert (points[k, :n, :, 2][inside] == stored_points[..., 2][inside]).all()
                assert not points[k, :n][~inside].any() and not points[k, n:].any()
                moved_points += int(inside.sum())
                gone = geometry.uncovered(chain)
                cut += int(gone.sum())
                for row, stored in enumerate(np.flatnonzero(keep)):
                    np.testing.assert_array_equal(masks[k, row], np.where(gone, 0, M.resample_nearest(
                        stored_masks[stored], t, 0)))
                    assert ((semantic[k] == stored_labels[stored]) == (masks[k, row] == 1)).all()
                    pixels = half_shape_pixels(images[k], stored_labels[stored], boxes[k, row])
                    inter, union = (pixels & (masks[k, row] == 1)).sum(), (pixels | (masks[k, row] == 1)).sum()
                    if union >= 400:
                        measured.append(inter / union)
                assert (semantic[k][gone] == 255).all()
                kept_total += n
    assert kept_total > 40 and moved_points > 40 and len(measured) > 20 and cut > 1000
    assert np.median(measured) >= 0.97 and min(measured) >= 0.85, sorted(measured)[:5]


def test_warped_batches_do_not_depend_on_the_thread_count_and_resume_exactly(annotated):
    path, _ = annotated
    pipelines = {"image": [RandomResizedCrop(96), RandomAffine(30, shear=10, interpolation="bilinear"),
                           RandomPerspective(0.3)],
                 "boxes": [BoundingBoxes(follow="image")], "labels": None, "points": None, "masks": None,
                 "mask": [SegmentationMask(follow="image")]}

    def run(threads: int = 1, stop: int | None = None, state: Any = None) -> tuple[list, Any]:
        with ss.Loader(path, 8, pipelines, order=ss.Order("random", seed=3), num_threads=threads,
                       verbose=False) as loader:
            if state is not None:
                loader.load_state_dict(state)
            out, saved = [], None
            for k, batch in enumerate(loader):
                out.append([t.numpy().copy() for t in batch])
                if k + 1 == stop:
                    saved = loader.state_dict()
                    break
            return out, saved

    whole, _ = run()
    threaded, _ = run(threads=2)
    first, state = run(stop=1)
    rest, _ = run(state=state)
    assert len(whole) == 3 and len(first + rest) == 3
    for a, b, c in zip(whole, threaded, first + rest):
        assert all(np.array_equal(x, y) and np.array_equal(x, z) for x, y, z in zip(a, b, c))
