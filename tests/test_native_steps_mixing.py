"""The policy-step and mixing kernels of the native library
(``slip_policy_step``, ``slip_timm_step``, ``slip_mix_blend``,
``slip_mix_paste``): each step gives the bytes of the tone or warp kernel it
stands for, with the matrix that slipstream's compiled code builds the way
torchvision builds it (to the last bit, over thousands of angles and
magnitudes); the mixing kernels give NumPy's values; and every kernel refuses
hostile arguments (sizes, buffers, overlaps, NaN) with a status, writing
nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest
from PIL import Image

from slipstream import native
from slipstream.errors import ArgumentError
from slipstream.native import Primitive, Status, TimmOp, lib
from slipstream.ops import policies, timm_augment, warps

NAN, INF = float("nan"), float("inf")
IDENTITY = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
SHAPES = [(1, 1, 3), (2, 7, 3), (7, 2, 1), (17, 31, 3), (40, 33, 4), (64, 48, 2)]


def image(shape: tuple[int, int, int], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, shape, dtype=np.uint8)


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """The same float64 values to the last bit (and the sign of a zero); NaN where the other is NaN."""
    x, y = np.asarray(a, np.float64), np.asarray(b, np.float64)
    nan = np.isnan(x)
    return bool((nan == np.isnan(y)).all() and (x[~nan].view(np.uint64) == y[~nan].view(np.uint64)).all())


# ---------------------------------------------------------------- the matrices, bit for bit

def angles() -> list[float]:
    rng = np.random.default_rng(1)
    special = [0.0, -0.0, 90.0, -90.0, 180.0, 270.0, 360.0, -360.0, 45.0, 30.0, 135.0, -135.0, 720.0, 359.99999999,
               1e-300, -1e-300, 5e-324, 1e6, -1e6, 1e300, 3.3, -7.25, 0.1, INF, -INF]
    return special + list(rng.uniform(-400, 400, 1500)) + list(rng.uniform(-1, 1, 300)) + \
        list(rng.integers(-3600, 3600, 300) / 4.0)


def test_rotations_build_the_compiled_codes_matrix_to_the_last_bit():
    """The kernel's Image.rotate matrix (Python's % 360, round(v, 15)) is the
    one the compiled code builds, bit for bit, at every angle."""
    src = image((9, 14, 3), 2)
    for k, angle in enumerate(angles()):
        for op, step in ((Primitive.ROTATE, native.policy_step), (TimmOp.ROTATE, native.timm_step)):
            _, inverse = step(op, angle, src, nearest=k % 2 == 0)
            expected = warps.rotation_inverse(9, 14, angle)
            if inverse is None:  # the identity: copied
                assert list(expected) == IDENTITY, angle
            else:
                assert same_bits(inverse, expected), (angle, inverse, expected)


def test_shears_and_translations_build_torchvisions_matrices_to_the_last_bit():
    src = image((10, 13, 3), 3)
    rng = np.random.default_rng(4)
    for magnitude in [0.0, 1e-12, 0.3, -0.99, 0.99, 7.9, -7.9, 32.0, -31.5, 1e4, INF, -INF] + \
            list(rng.uniform(-40, 40, 400)):
        degrees = math.degrees(math.atan(magnitude))
        shift = float(math.trunc(magnitude)) if math.isfinite(magnitude) else magnitude
        cases = {Primitive.SHEAR_X: warps.affine_inverse(0.0, 0.0, 0.0, 0.0, 0.0, 1.0, degrees, 0.0),
                 Primitive.SHEAR_Y: warps.affine_inverse(0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, degrees),
                 Primitive.TRANSLATE_X: warps.affine_inverse(6.5, 5.0, 0.0, shift, 0.0, 1.0, 0.0, 0.0),
                 Primitive.TRANSLATE_Y: warps.affine_inverse(6.5, 5.0, 0.0, 0.0, shift, 1.0, 0.0, 0.0)}
        for op, expected in cases.items():
            out, inverse = native.policy_step(op, magnitude, src, fill=(1, 2, 3))
            if list(expected) == IDENTITY:
                assert inverse is None and np.array_equal(out, src), (op, magnitude)
            else:
                assert same_bits(inverse, expected), (op.name, magnitude, inverse, expected)
                assert np.array_equal(out, native.warp_affine(src, expected, False, (1, 2, 3))), (op.name, magnitude)


def test_timms_matrices_have_no_centre():
    src = image((10, 13, 3), 5)
    for argument in (0.3, -0.27, 0.45, -0.405, 1e-9):
        cases = {TimmOp.SHEAR_X: [1, argument, 0, 0, 1, 0], TimmOp.SHEAR_Y: [1, 0, 0, argument, 1, 0],
                 TimmOp.TRANSLATE_X_REL: [1, 0, argument * 13, 0, 1, 0],
                 TimmOp.TRANSLATE_Y_REL: [1, 0, 0, 0, 1, argument * 10]}
        for op, matrix in cases.items():
            out, inverse = native.timm_step(op, argument, src, fill=4, nearest=True)
            assert same_bits(inverse, matrix), op.name
            assert np.array_equal(out, native.warp_affine(src, matrix, True, 4)), op.name
    out, inverse = native.timm_step(TimmOp.SHEAR_X, 0.0, src)
    assert inverse is None and np.array_equal(out, src)


def test_a_rotation_is_pillows():
    src = image((31, 45, 3), 6)
    for angle in (13.5, -27.0, 90.0, 200.0):
        for nearest, resample in ((True, Image.NEAREST), (False, Image.BILINEAR)):
            out, _ = native.policy_step(Primitive.ROTATE, angle, src, (9, 8, 7), nearest)
            expected = np.asarray(Image.fromarray(src).rotate(angle, resample, fillcolor=(9, 8, 7)))
            assert np.array_equal(out, expected), (angle, nearest)


# ---------------------------------------------------------------- the tones, as their kernels

TONES = [(Primitive.BRIGHTNESS, native.brightness, True), (Primitive.COLOR, native.color, True),
         (Primitive.CONTRAST, native.contrast, True), (Primitive.SHARPNESS, native.sharpness, True),
         (Primitive.SOLARIZE, native.solarize, False)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_each_tone_step_gives_its_kernels_bytes(shape):
    src = image(shape, shape[0] * 100 + shape[1])
    for magnitude in (-0.99, -0.3, 0.0, 0.45, 0.99, 1e30, -INF, 127.5, 256.0):
        for op, kernel, enhance in TONES:
            if op in (Primitive.COLOR, Primitive.CONTRAST) and shape[2] not in (1, 3):
                continue
            out, inverse = native.policy_step(op, magnitude, src)
            assert inverse is None
            assert np.array_equal(out, kernel(src, 1.0 + magnitude if enhance else magnitude)), (op.name, magnitude)
    for op, kernel in ((Primitive.AUTOCONTRAST, native.autocontrast), (Primitive.EQUALIZE, native.equalize),
                       (Primitive.INVERT, native.invert)):
        assert np.array_equal(native.policy_step(op, 3.0, src)[0], kernel(src)), op.name
    assert np.array_equal(native.policy_step(Primitive.IDENTITY, 5.0, src)[0], src)
    for magnitude, bits in ((-3.0, 0), (-0.5, 0), (0.9, 0), (2.0, 2), (4.7, 4), (8.0, 8), (1e9, 8), (INF, 8)):
        assert np.array_equal(native.policy_step(Primitive.POSTERIZE, magnitude, src)[0],
                              native.posterize(src, bits)), magnitude
        for op in (TimmOp.POSTERIZE, TimmOp.POSTERIZE_INCREASING):
            assert np.array_equal(native.timm_step(op, magnitude, src)[0], native.posterize(src, bits)), magnitude


def test_timms_tones_take_their_argument_as_it_is():
    src = image((23, 19, 3), 7)
    for argument in (0.1, 0.55, 1.0, 1.9):
        for ops, kernel in (((TimmOp.COLOR, TimmOp.COLOR_INCREASING), native.color),
                            ((TimmOp.CONTRAST, TimmOp.CONTRAST_INCREASING), native.contrast),
                            ((TimmOp.BRIGHTNESS, TimmOp.BRIGHTNESS_INCREASING), native.brightness),
                            ((TimmOp.SHARPNESS, TimmOp.SHARPNESS_INCREASING), native.sharpness)):
            for op in ops:
                assert np.array_equal(native.timm_step(op, argument, src)[0], kernel(src, argument)), op.name
    for op in (TimmOp.SOLARIZE, TimmOp.SOLARIZE_INCREASING):
        assert np.array_equal(native.timm_step(op, 26.0, src)[0], native.solarize(src, 26.0))
    for op, kernel in ((TimmOp.AUTO_CONTRAST, native.autocontrast), (TimmOp.EQUALIZE, native.equalize),
                       (TimmOp.INVERT, native.invert)):
        assert np.array_equal(native.timm_step(op, 0.0, src)[0], kernel(src)), op.name


def test_solarize_add_raises_the_dark_values_as_pillows_table_does():
    src = image((16, 16, 3), 8)
    src[0, :, 0] = np.arange(112, 128)  # values just below the threshold
    for argument in (0.0, 1.0, 99.0, 99.9, 110.0, 128.0, 300.0, -5.0, -1000.0, 1e18, -INF):
        add = int(max(-256, min(256, argument)))
        table = [min(255, max(0, i + add)) if i < 128 else i for i in range(256)]
        expected = np.asarray(Image.fromarray(src).point(table * 3))
        out, inverse = native.timm_step(TimmOp.SOLARIZE_ADD, argument, src)
        assert inverse is None and np.array_equal(out, expected), argument


def test_the_compiled_steps_give_the_kernels_bytes_and_follow_the_map():
    """apply_primitive and apply_timm_op are the kernels plus the map."""
    from slipstream.fields import geometry

    src = image((21, 26, 3), 9)
    fill = np.array([3, 4, 5], np.uint8)
    for fn, step, op, value in ((policies.apply_primitive, native.policy_step, Primitive.ROTATE, 30.0),
                                (policies.apply_primitive, native.policy_step, Primitive.EQUALIZE, 0.0),
                                (timm_augment.apply_timm_op, native.timm_step, TimmOp.SHEAR_Y, 0.2),
                                (timm_augment.apply_timm_op, native.timm_step, TimmOp.SOLARIZE_ADD, 40.0)):
        out, transform = np.empty_like(src), geometry.identity(21, 26)
        fn(int(op), value, src, out, fill, False, transform)
        expected, inverse = step(op, value, src, fill, False)
        assert np.array_equal(out, expected), op.name
        if inverse is None:
            assert np.array_equal(transform, geometry.identity(21, 26)), op.name
        else:
            step_map = np.empty(geometry.SIZE)
            warps.set_inverse(step_map, inverse, 21, 26)
            assert np.allclose(transform, step_map), op.name


# ---------------------------------------------------------------- hostile steps

def call_step(name: str, op: int, value: float, src: np.ndarray | None, src_size: int, h: int, w: int, c: int,
              src_stride: int, dst: np.ndarray | int | None, dst_size: int, dst_stride: int,
              fill: np.ndarray | None, fill_size: int, inverse: np.ndarray | None, inverse_size: int) -> int:
    """The C step ``name`` on raw pointers and sizes (``dst`` an array, an address or NULL)."""
    address = dst.ctypes.data if isinstance(dst, np.ndarray) else dst
    return getattr(lib, f"slip_{name}")(op, value, None if src is None else src.ctypes.data, src_size, h, w, c,
                                        src_stride, address, dst_size, dst_stride,
                                        None if fill is None else fill.ctypes.data, fill_size, 1,
                                        None if inverse is None else inverse.ctypes.data, inverse_size)


@pytest.mark.parametrize(("name", "ops", "last"), [("policy_step", (Primitive.ROTATE, Primitive.SHARPNESS), 14),
                                                   ("timm_step", (TimmOp.ROTATE, TimmOp.SOLARIZE_ADD), 20)])
def test_the_steps_refuse_hostile_arguments_and_write_nothing(name, ops, last):
    src = image((6, 5, 3), 10)
    kept, n = src.copy(), src.size
    dst, inverse = np.full_like(src, 41), np.full(6, 7.0)
    fill = np.array([1, 2, 3], np.uint8)
    for op in ops:
        dst[...], inverse[...] = 41, 7.0
        good = (op, 20.0, src, n, 6, 5, 3, 15, dst, n, 15, fill, 3, inverse, 6)
        refusals = [
            ("an unknown op", (-1,) + good[1:], Status.EINVAL),
            ("an op past the last", (last + 1,) + good[1:], Status.EINVAL),
            ("the largest op", (2**31 - 1,) + good[1:], Status.EINVAL),
            ("a NaN magnitude", (op, NAN) + good[2:], Status.EINVAL),
            ("NULL src", good[:2] + (None,) + good[3:], Status.EINVAL),
            ("NULL dst", good[:8] + (None,) + good[9:], Status.EINVAL),
            ("NULL fill", good[:11] + (None,) + good[12:], Status.EINVAL),
            ("NULL inverse", good[:13] + (None,) + good[14:], Status.EINVAL),
            ("no rows", good[:4] + (0,) + good[5:], Status.EINVAL),
            ("negative width", good[:5] + (-5,) + good[6:], Status.EINVAL),
            ("too wide", good[:5] + (65501,) + good[6:], Status.EINVAL),
            ("no channels", good[:6] + (0,) + good[7:], Status.EINVAL),
            ("five channels", good[:6] + (5,) + good[7:], Status.EINVAL),
            ("a source stride short of a row", good[:7] + (14,) + good[8:], Status.EINVAL),
            ("a negative output stride", good[:10] + (-15,) + good[11:], Status.EINVAL),
            ("a source one byte short", good[:3] + (n - 1,) + good[4:], Status.EBUFFER),
            ("an output one byte short", good[:9] + (n - 1,) + good[10:], Status.EBUFFER),
            ("a stride beyond int64 when multiplied", good[:7] + (2**63 - 1,) + good[8:], Status.EBUFFER),
            ("a fill short of a channel", good[:12] + (2,) + good[13:], Status.EBUFFER),
            ("an inverse short of a value", good[:14] + (5,), Status.EBUFFER),
            ("no inverse", good[:14] + (0,), Status.EBUFFER),
            ("in place", good[:8] + (src, n, 15) + good[11:], Status.EINVAL),
            ("an output overlapping the source", good[:8] + (src.ctypes.data + 30, n, 15) + good[11:],
             Status.EINVAL),
        ]
        for what, args, status in refusals:
            assert call_step(name, *args) == status, what
            assert native.last_error(), what
            assert (dst == 41).all() and np.array_equal(src, kept) and (inverse == 7.0).all(), what
        assert call_step(name, *good) in (0, 1)


def test_color_and_contrast_steps_take_one_or_three_channels():
    src = image((6, 5, 4), 11)
    for step, ops in ((native.policy_step, (Primitive.COLOR, Primitive.CONTRAST)),
                      (native.timm_step, (TimmOp.COLOR, TimmOp.CONTRAST_INCREASING))):
        for op in ops:
            with pytest.raises(ArgumentError, match=r"color and contrast take RGB \(3\) or one channel \(EINVAL\)"):
                step(op, 0.5, src)
    with pytest.raises(ArgumentError, match=r"policy_step: the magnitude is not a number \(EINVAL\)"):
        native.policy_step(Primitive.ROTATE, NAN, src)
    with pytest.raises(ArgumentError, match="op 15 is not a slip_primitive"):
        native.policy_step(15, 0.0, src)


def test_the_compiled_steps_refuse_what_the_kernels_refuse():
    from slipstream.fields import geometry

    src, transform = image((6, 5, 3), 12), geometry.identity(6, 5)
    with pytest.raises(ValueError, match="a policy step takes"):
        policies.apply_primitive(int(Primitive.ROTATE), NAN, src, np.empty_like(src), np.zeros(3, np.uint8), True,
                                 transform)
    with pytest.raises(ValueError, match="a policy step takes"):
        timm_augment.apply_timm_op(int(TimmOp.ROTATE), 3.0, src, src, np.zeros(3, np.uint8), True, transform)
    assert np.array_equal(transform, geometry.identity(6, 5))


# ---------------------------------------------------------------- mixing

LAMS = [0.0, 1.0, 0.5, 0.25, 0.75, 1e-12, 0.999999, 0.3141, -0.5, 1.5, 7.0, -3.0]


def blended(a: np.ndarray, b: np.ndarray, lam: float) -> np.ndarray:
    """MixUp's values as NumPy computes them: double precision, uint8 rounded half to even and clipped."""
    mixed = lam * a.astype(np.float64) + (1.0 - lam) * b.astype(np.float64)
    if a.dtype == np.uint8:
        return np.clip(np.rint(mixed), 0, 255).astype(np.uint8)
    return mixed.astype(a.dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.float32])
def test_the_blend_is_numpys(dtype):
    rng = np.random.default_rng(13)
    for shape in ((1,), (3, 1, 1), (17, 23, 3), (3, 64, 65), (5, 1000)):
        if dtype == np.uint8:
            a, b = (rng.integers(0, 256, shape).astype(np.uint8) for _ in range(2))
        else:
            a, b = (rng.normal(0, 2, shape).astype(np.float32) for _ in range(2))
        for lam in LAMS + list(rng.uniform(0, 1, 5)):
            assert np.array_equal(native.mix_blend(a, b, lam), blended(a, b, lam)), (shape, lam)
    a, b = np.arange(256, dtype=np.uint8), np.arange(1, 257).astype(np.uint8)  # every tie: 0.5 of neighbours
    assert np.array_equal(native.mix_blend(a, b, 0.5), np.rint((a + b.astype(float)) / 2).astype(np.uint8))


def test_the_blend_works_in_place_and_with_itself():
    rng = np.random.default_rng(14)
    a, b = rng.normal(size=(4, 9)).astype(np.float32), rng.normal(size=(4, 9)).astype(np.float32)
    expected = blended(a, b, 0.3)
    assert np.array_equal(native.mix_blend(a, a, 0.3), a)
    for keep in (a, b):
        x, y = a.copy(), b.copy()
        out = x if keep is a else y
        assert native.mix_blend(x, y, 0.3, out=out) is out
        assert np.array_equal(out, expected)


@pytest.mark.parametrize(("shape", "dtype", "channels_first"), [((13, 17, 3), np.uint8, False),
                                                               ((9, 11, 1), np.uint8, False),
                                                               ((3, 13, 17), np.float32, True),
                                                               ((4, 8, 6), np.float16, True),
                                                               ((12, 10), np.float32, False)])
def test_the_paste_is_numpys(shape, dtype, channels_first):
    rng = np.random.default_rng(15)
    a, b = (rng.normal(0, 50, shape).astype(dtype) for _ in range(2))
    height, width = shape[1:] if channels_first else shape[:2]
    boxes = [(0, 0, 0, 0), (0, 0, height, width), (2, 1, 2, 3), (1, 1, height - 1, width - 2),
             (height, width, height, width)]
    for _ in range(20):
        top, bottom = sorted(int(v) for v in rng.integers(0, height + 1, 2))
        left, right = sorted(int(v) for v in rng.integers(0, width + 1, 2))
        boxes.append((top, left, bottom, right))
    for top, left, bottom, right in boxes:
        expected = a.copy()
        if channels_first:
            expected[:, top:bottom, left:right] = b[:, top:bottom, left:right]
        else:
            expected[top:bottom, left:right] = b[top:bottom, left:right]
        out = native.mix_paste(a, b, top, left, bottom, right, channels_first)
        assert np.array_equal(out.view(np.uint8), expected.view(np.uint8)), (top, bottom, left, right)


def addr(a: np.ndarray | None, offset: int = 0) -> int | None:
    return None if a is None else a.ctypes.data + offset


def test_the_blend_refuses_hostile_arguments_and_writes_nothing():
    a = np.arange(12, dtype=np.float32)
    b, dst = a[::-1].copy(), np.full(12, 41, np.float32)
    kept = a.copy()
    n, f32, u8 = a.nbytes, int(native.Dtype.FLOAT32), int(native.Dtype.UINT8)
    good = (addr(a), n, addr(b), n, addr(dst), n, 12, f32, 0.5)
    refusals = [
        ("NULL a", (None,) + good[1:], Status.EINVAL),
        ("NULL b", good[:2] + (None,) + good[3:], Status.EINVAL),
        ("NULL dst", good[:4] + (None,) + good[5:], Status.EINVAL),
        ("float16", good[:7] + (int(native.Dtype.FLOAT16), 0.5), Status.EINVAL),
        ("an unknown dtype", good[:7] + (7, 0.5), Status.EINVAL),
        ("a negative dtype", good[:7] + (-1, 0.5), Status.EINVAL),
        ("a NaN lam", good[:8] + (NAN,), Status.EINVAL),
        ("an infinite lam", good[:8] + (INF,), Status.EINVAL),
        ("a misaligned a", (addr(a, 1),) + good[1:], Status.EINVAL),
        ("a misaligned dst", good[:4] + (addr(dst, 2),) + good[5:], Status.EINVAL),
        ("a one byte short", good[:1] + (n - 1,) + good[2:], Status.EBUFFER),
        ("b one byte short", good[:3] + (n - 1,) + good[4:], Status.EBUFFER),
        ("dst one byte short", good[:5] + (n - 1,) + good[6:], Status.EBUFFER),
        ("a count past any buffer", good[:6] + (2**62,) + good[7:], Status.EBUFFER),
        ("the largest count", good[:6] + (2**64 - 1,) + good[7:], Status.EBUFFER),
        ("dst overlapping a", good[:4] + (addr(a, 4), n) + good[6:], Status.EINVAL),
        ("dst overlapping b", good[:4] + (addr(b, -4), n) + good[6:], Status.EINVAL),
    ]
    for what, args, status in refusals:
        assert lib.slip_mix_blend(*args) == status, what
        assert native.last_error(), what
        assert (dst == 41).all() and np.array_equal(a, kept), what
    assert lib.slip_mix_blend(addr(a), n, addr(b), n, addr(dst), n, 0, u8, 0.5) == Status.OK  # nothing to do
    assert (dst == 41).all()
    assert lib.slip_mix_blend(*good) == Status.OK
    with pytest.raises(ArgumentError, match="mix_blend blends uint8 or float32 samples"):
        native.mix_blend(np.zeros(3, np.float64), np.zeros(3, np.float64), 0.5)
    with pytest.raises(ArgumentError, match=r"mix_blend: lam is not a finite number \(EINVAL\)"):
        native.mix_blend(a, b, NAN)


def test_the_paste_refuses_hostile_arguments_and_writes_nothing():
    a = np.arange(2 * 6 * 5, dtype=np.float32).reshape(2, 6, 5)
    b, dst = -a, np.full_like(a, 41)
    kept, n = a.copy(), a.nbytes
    good = (addr(a), n, addr(b), n, addr(dst), n, 2, 6, 5, 4, 1, 1, 4, 3)
    refusals = [
        ("NULL a", (None,) + good[1:], Status.EINVAL),
        ("NULL b", good[:2] + (None,) + good[3:], Status.EINVAL),
        ("NULL dst", good[:4] + (None,) + good[5:], Status.EINVAL),
        ("no planes", good[:6] + (0,) + good[7:], Status.EINVAL),
        ("no rows", good[:7] + (0,) + good[8:], Status.EINVAL),
        ("a negative width", good[:8] + (-5,) + good[9:], Status.EINVAL),
        ("too many planes", good[:6] + (65501,) + good[7:], Status.EINVAL),
        ("pixels of no bytes", good[:9] + (0,) + good[10:], Status.EINVAL),
        ("pixels of 17 bytes", good[:9] + (17,) + good[10:], Status.EINVAL),
        ("a negative top", good[:10] + (-1,) + good[11:], Status.EINVAL),
        ("a negative left", good[:11] + (-1,) + good[12:], Status.EINVAL),
        ("a bottom past the plane", good[:12] + (7, 3), Status.EINVAL),
        ("a right past the plane", good[:13] + (6,), Status.EINVAL),
        ("an inverted box", good[:10] + (4, 1, 1, 3), Status.EINVAL),
        ("the largest box", good[:10] + (0, 0, 2**31 - 1, 2**31 - 1), Status.EINVAL),
        ("a one byte short", good[:1] + (n - 1,) + good[2:], Status.EBUFFER),
        ("b one byte short", good[:3] + (n - 1,) + good[4:], Status.EBUFFER),
        ("dst one byte short", good[:5] + (n - 1,) + good[6:], Status.EBUFFER),
        ("the largest sample", good[:6] + (65500, 65500, 65500, 16) + good[10:], Status.EBUFFER),
        ("dst a", good[:4] + (addr(a), n) + good[6:], Status.EINVAL),
        ("dst overlapping b", good[:4] + (addr(b, 8), n) + good[6:], Status.EINVAL),
    ]
    for what, args, status in refusals:
        assert lib.slip_mix_paste(*args) == status, what
        assert native.last_error(), what
        assert (dst == 41).all() and np.array_equal(a, kept), what
    assert lib.slip_mix_paste(*good) == Status.OK
    with pytest.raises(ArgumentError, match="a and b must have one shape and dtype"):
        native.mix_paste(a, b[:1], 0, 0, 1, 1)
    with pytest.raises(ArgumentError, match=r"mix_paste: the box .* is not inside 6 x 5 pixels \(EINVAL\)"):
        native.mix_paste(a, b, 0, 0, 7, 1, channels_first=True)


def test_the_policies_name_the_headers_codes():
    assert policies.Primitive is native.Primitive and timm_augment.TimmOp is native.TimmOp
    assert set(policies.NAMES.values()) == set(Primitive)
    assert set(timm_augment.NAMES.values()) == set(TimmOp)
