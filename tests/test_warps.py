"""Projective geometry: transforms that compose as matrices (axis-aligned
chains with the arithmetic they always had), points, boxes and masks moved
through any projective map, and what an earlier stage cut off staying cut
off."""

from __future__ import annotations


import numpy as np
import pytest

from slipstream.fields import geometry
from slipstream.fields import masks as M
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
