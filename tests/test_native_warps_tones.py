"""The tone and warp kernels of the native library (``slip_posterize`` ...
``slip_sharpness``, ``slip_warp_affine``, ``slip_warp_perspective``) against
Pillow (``ImageOps``, ``ImageEnhance``, ``Image.transform``), byte for byte,
on random images of many sizes (1 x 1, 2 x N, odd widths, large), 1 to 4
channels and every range of their parameters; and their refusals of hostile
arguments (sizes, strides, buffers, overlaps), which write nothing.

Pillow has L and RGB images: an image of 2 or 4 channels is compared channel
by channel with L images, which the kernels treat alike (each channel on its
own)."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from collections.abc import Callable

import numpy as np
import pytest
from PIL import Image, ImageEnhance, ImageOps

from slipstream import native
from slipstream.errors import ArgumentError
from slipstream.native import Status, lib
from slipstream.ops import tones, warps

SIZES = [(1, 1), (1, 2), (2, 1), (2, 2), (2, 9), (9, 2), (3, 3), (3, 4), (4, 3), (5, 17), (13, 1), (17, 31),
         (37, 61), (64, 48), (101, 257)]
LARGE = (613, 1031)
NAN, INF = float("nan"), float("inf")
SPECIAL_FACTORS = [0.0, -0.0, 1.0, 0.5, 1.99, -1.0, 1e-30, 1e30, 1e39, INF, -INF, NAN]


def picture(rng: np.random.Generator, height: int, width: int, channels: int, kind: int) -> np.ndarray:
    """A random (height, width, channels) uint8 image of one of five kinds:
    noise over all values, noise over a narrow range, a gradient with noise,
    a few distinct values, one flat colour."""
    shape = (height, width, channels)
    if kind == 0:
        return rng.integers(0, 256, shape, dtype=np.uint8)
    if kind == 1:
        low = int(rng.integers(0, 240))
        return rng.integers(low, low + int(rng.integers(1, 17)), shape).astype(np.uint8)
    if kind == 2:
        y, x = np.mgrid[0:height, 0:width]
        ramp = (y * 255 // max(height - 1, 1) + x * 97 // max(width, 1))[..., None] + rng.integers(-6, 7, shape)
        return np.clip(ramp, 0, 255).astype(np.uint8)
    if kind == 3:
        return rng.choice(rng.integers(0, 256, int(rng.integers(2, 5))), shape).astype(np.uint8)
    flat = np.empty(shape, np.uint8)
    flat[...] = rng.integers(0, 256, channels)
    return flat


def images(seed: int, channel_counts: tuple[int, ...] = (1, 2, 3, 4)):
    """(image, description) for every size of SIZES, every channel count and every kind of :func:`picture`."""
    rng = np.random.default_rng(seed)
    for height, width in SIZES:
        for channels in channel_counts:
            for kind in range(5):
                yield picture(rng, height, width, channels, kind), f"{height}x{width}x{channels} kind {kind}"


def pillow(function: Callable[[Image.Image], Image.Image], image: np.ndarray) -> np.ndarray:
    """``function`` of ``image`` as Pillow computes it: on the RGB image, or on each channel as an L image."""
    if image.shape[2] == 3:
        return np.asarray(function(Image.fromarray(image)))
    return np.stack([np.asarray(function(Image.fromarray(np.ascontiguousarray(image[..., k]))))
                     for k in range(image.shape[2])], axis=-1)


def assert_same(ours: np.ndarray, theirs: np.ndarray, what: str) -> None:
    assert ours.shape == theirs.shape, (what, ours.shape, theirs.shape)
    if not np.array_equal(ours, theirs):
        wrong = np.argwhere(ours != theirs)
        raise AssertionError(f"{what}: {len(wrong)} values differ, first at {wrong[:3].tolist()}")


def both_ways(kernel: Callable[..., np.ndarray], image: np.ndarray, *args) -> np.ndarray:
    """``kernel`` into a new array and in place, which must agree; the source left alone."""
    kept = image.copy()
    out = kernel(image, *args)
    np.testing.assert_array_equal(image, kept)
    in_place = image.copy()
    assert kernel(in_place, *args, out=in_place) is in_place
    np.testing.assert_array_equal(in_place, out)
    return out


# ---------------------------------------------------------------- tones


def test_imageops_kernels_equal_pillow_at_every_parameter():
    rng = np.random.default_rng(1)
    for image, what in images(2):
        for bits in (int(rng.integers(1, 9)), int(rng.integers(-5, 1)), int(rng.integers(8, 20))):
            ours = both_ways(native.posterize, image, bits)
            if bits <= 0:  # Pillow 13 refuses 0 bits: black, as torchvision's tensor posterize gives
                assert not ours.any(), what
            else:
                assert_same(ours, pillow(lambda im: ImageOps.posterize(im, min(bits, 8)), image), f"{what} {bits}")
        for threshold in (float(rng.uniform(-20, 280)), int(rng.integers(0, 257)), -INF, INF, NAN):
            assert_same(both_ways(native.solarize, image, threshold),
                        pillow(lambda im: ImageOps.solarize(im, threshold), image), f"{what} {threshold}")
        for name in ("invert", "autocontrast", "equalize"):
            assert_same(both_ways(getattr(native, name), image), pillow(getattr(ImageOps, name), image),
                        f"{name} {what}")


ENHANCERS = {"brightness": ImageEnhance.Brightness, "color": ImageEnhance.Color,
             "contrast": ImageEnhance.Contrast, "sharpness": ImageEnhance.Sharpness}


@pytest.mark.parametrize("name", sorted(ENHANCERS))
def test_enhance_kernels_equal_pillow_at_every_factor(name):
    rng = np.random.default_rng(3)
    kernel, enhancer = getattr(native, name), ENHANCERS[name]
    channel_counts = (1, 3) if name in ("color", "contrast") else (1, 2, 3, 4)
    for image, what in images(4, channel_counts):
        for factor in [*rng.uniform(-3, 5, 2), *rng.choice(SPECIAL_FACTORS, 3)]:
            theirs = pillow(lambda im: enhancer(im).enhance(factor), image)
            ours = kernel(image, factor) if name == "sharpness" else both_ways(kernel, image, factor)
            assert_same(ours, theirs, f"{name} {what} factor {factor}")


@pytest.mark.parametrize("factor", SPECIAL_FACTORS)
def test_enhance_kernels_of_a_large_photo_like_image_equal_pillow(factor):
    image = picture(np.random.default_rng(5), *LARGE, 3, 2)
    for name, enhancer in ENHANCERS.items():
        assert_same(getattr(native, name)(image, factor), pillow(lambda im: enhancer(im).enhance(factor), image),
                    f"{name} {factor}")


def test_imageops_kernels_of_a_large_image_equal_pillow():
    image = picture(np.random.default_rng(6), *LARGE, 3, 0)
    for name in ("invert", "autocontrast", "equalize"):
        assert_same(getattr(native, name)(image), pillow(getattr(ImageOps, name), image), name)
    assert_same(native.posterize(image, 3), pillow(lambda im: ImageOps.posterize(im, 3), image), "posterize")
    assert_same(native.solarize(image, 77.5), pillow(lambda im: ImageOps.solarize(im, 77.5), image), "solarize")


def test_tone_kernels_read_and_write_rows_apart():
    """Rows of the source and the output some bytes apart (sub-images of
    larger arrays) give the bytes of packed rows, and nothing else of the
    output's array is written."""
    rng = np.random.default_rng(7)
    calls = [(native.posterize, 5), (native.solarize, 100.0), (native.invert,), (native.autocontrast,),
             (native.equalize,), (native.brightness, 1.3), (native.color, 0.4), (native.contrast, 1.7),
             (native.sharpness, 2.5)]
    for height, width in ((1, 1), (3, 3), (17, 31)):
        image = picture(rng, height, width, 3, 2)
        big_src = rng.integers(0, 256, (height + 2, width + 5, 3), dtype=np.uint8)
        big_src[1:height + 1, 2:width + 2] = image
        for kernel, *args in calls:
            big_out = np.full((height + 3, width + 4, 3), 99, np.uint8)
            out = big_out[2:height + 2, 1:width + 1]
            assert kernel(big_src[1:height + 1, 2:width + 2], *args, out=out) is out
            assert_same(out, kernel(image, *args), f"{kernel.__name__} {height}x{width}")
            out[...] = 99
            assert (big_out == 99).all(), kernel.__name__


BLEND_OUTPUTS = r"""
import sys
import numpy as np
from slipstream import native

rng = np.random.default_rng(21)
out = {}
for i in range(40):
    height, width = int(rng.integers(1, 90)), int(rng.integers(1, 700))
    image = rng.integers(0, 256, (height, width, 3), dtype=np.uint8)
    factor = float(rng.choice([rng.uniform(-3, 5), 0.0, 1.0, np.inf, -np.inf, np.nan]))
    for name in ("brightness", "color", "contrast", "sharpness"):
        out[f"{name}{i}"] = getattr(native, name)(image, factor)
    out[f"gray{i}"] = native.contrast(image[..., :1].copy(), factor)
np.savez(sys.argv[1], **out)
"""


def test_vector_blends_give_the_bytes_of_the_portable_ones(tmp_path):
    """The blends of brightness, color, contrast and sharpness have loops
    compiled for CPUs with AVX2; a process told to use the portable code
    produces the same bytes."""
    script = tmp_path / "blends.py"
    script.write_text(BLEND_OUTPUTS)
    results = {}
    for name, portable in (("vector", "0"), ("portable", "1")):
        env = {**os.environ, "SLIPSTREAM_PORTABLE_KERNELS": portable}
        subprocess.run([sys.executable, str(script), str(tmp_path / f"{name}.npz")], env=env, cwd=tmp_path, check=True)
        results[name] = np.load(tmp_path / f"{name}.npz")
    assert len(results["vector"].files) == len(results["portable"].files) == 200
    for key in results["vector"].files:
        np.testing.assert_array_equal(results["vector"][key], results["portable"][key], err_msg=key)


# ---------------------------------------------------------------- warps

FILTERS = {True: Image.Resampling.NEAREST, False: Image.Resampling.BILINEAR}


def random_affine(rng: np.random.Generator, height: int, width: int, kind: int) -> list[float]:
    """Pillow's AFFINE data of one of nine kinds, each taking one of
    Pillow's paths: a rotation about a random point, a pure scale (maybe a
    mirror), a shift by whole pixels, a shift by fractions, a shear, a
    general map, two maps whose coordinates pass 32768 (floating-point
    sums), and a map to one point."""
    if kind == 0:
        angle, cx, cy = rng.uniform(-np.pi, np.pi), rng.uniform(-5, width + 5), rng.uniform(-5, height + 5)
        c, s = math.cos(angle), math.sin(angle)
        return [c, s, cx - c * cx - s * cy, -s, c, cy + s * cx - c * cy]
    if kind == 1:  # half of them by factors and offsets whose points fall on pixel edges exactly
        if rng.integers(2):
            sx, sy = rng.choice([-3.0, -1.0, -0.5, 0.25, 0.5, 1.0, 2.0, 3.0], 2)
            return [sx, 0.0, rng.integers(-4 * width, 8 * width) / 4, 0.0, sy, rng.integers(-4 * height, 8 * height) / 4]
        sx, sy = rng.choice([-1, 1], 2) * np.exp(rng.uniform(-2, 2, 2))
        return [sx, 0.0, rng.uniform(-width, 2 * width), 0.0, sy, rng.uniform(-height, 2 * height)]
    if kind == 2:
        return [1.0, 0.0, float(rng.integers(-width - 3, width + 4)), 0.0, 1.0,
                float(rng.integers(-height - 3, height + 4))]
    if kind == 3:
        return [1.0, 0.0, rng.uniform(-width, width), 0.0, 1.0, rng.uniform(-height, height)]
    if kind == 4:
        return [1.0, rng.uniform(-1, 1), rng.uniform(-width, width), rng.uniform(-1, 1), 1.0, 0.0]
    if kind == 5:
        return [*rng.uniform(-2, 2, 2), rng.uniform(-50, 50), *rng.uniform(-2, 2, 2), rng.uniform(-50, 50)]
    if kind == 6:
        return [1.0, rng.uniform(-0.01, 0.01), rng.uniform(32000, 33000) * rng.choice([-1, 1]), 0.0, 1.0,
                rng.uniform(-40000, 40000)]
    if kind == 7:  # column 0 lands inside the image, the far columns beyond 32768
        return [3000.0, 0.001, rng.uniform(-1500, width - 1500), 0.0, 1.0, rng.uniform(-1, 1)]
    return [0.0, 0.0, rng.uniform(-1, width + 1), 0.0, 0.0, rng.uniform(-1, height + 1)]


def pillow_warp(image: np.ndarray, method: Image.Transform, data: list[float], nearest: bool, fill: np.ndarray,
                size: tuple[int, int]) -> np.ndarray:
    """Pillow's transform of ``image`` onto (height, width) ``size``, channel by channel where it has no mode."""
    height, width = size
    if image.shape[2] == 3:
        return np.asarray(Image.fromarray(image).transform((width, height), method, data, FILTERS[nearest],
                                                           fillcolor=tuple(int(v) for v in fill)))
    return np.stack([np.asarray(Image.fromarray(np.ascontiguousarray(image[..., k])).transform(
        (width, height), method, data, FILTERS[nearest], fillcolor=int(fill[k]))) for k in range(image.shape[2])],
        axis=-1)


def warp_cases(seed: int):
    """(image, output size, fill, description) over SIZES, channels 1 to 4, and output sizes of their own."""
    rng = np.random.default_rng(seed)
    for (height, width), channels in zip(SIZES * 2, [1, 2, 3, 4] * len(SIZES)):
        image = picture(rng, height, width, channels, int(rng.integers(0, 4)))
        size = (height, width) if rng.integers(2) else tuple(int(v) for v in rng.integers(1, 80, 2))
        yield image, size, rng.integers(0, 256, channels).astype(np.uint8), f"{height}x{width}x{channels} to {size}"


def test_affine_warps_equal_pillows_transform_on_every_path():
    rng = np.random.default_rng(8)
    for image, size, fill, what in warp_cases(9):
        for kind in range(9):
            data = random_affine(rng, image.shape[0], image.shape[1], kind)
            for nearest in (True, False):
                ours = native.warp_affine(image, data, nearest, fill, size)
                theirs = pillow_warp(image, Image.Transform.AFFINE, data, nearest, fill, size)
                assert_same(ours, theirs, f"{what} kind {kind} {data} nearest={nearest}")


def test_affine_warps_of_a_large_image_equal_pillow():
    rng = np.random.default_rng(10)
    image = picture(rng, *LARGE, 3, 0)
    for kind in range(9):
        data = random_affine(rng, *LARGE, kind)
        for nearest in (True, False):
            assert_same(native.warp_affine(image, data, nearest, (1, 2, 3)),
                        pillow_warp(image, Image.Transform.AFFINE, data, nearest, np.array([1, 2, 3]), LARGE),
                        f"kind {kind} nearest={nearest}")


def test_perspective_warps_equal_pillows_transform():
    rng = np.random.default_rng(11)
    for image, size, fill, what in warp_cases(12):
        height, width = image.shape[:2]
        for _ in range(4):
            data = [*rng.uniform(0.5, 1.5, 1), *rng.uniform(-0.5, 0.5, 2), *rng.uniform(-0.5, 0.5, 1),
                    *rng.uniform(0.5, 1.5, 1), *rng.uniform(-5, 5, 1), *rng.uniform(-0.6, 0.6, 2) / max(width, height)]
            for nearest in (True, False):
                assert_same(native.warp_perspective(image, data, nearest, fill, size),
                            pillow_warp(image, Image.Transform.PERSPECTIVE, data, nearest, fill, size),
                            f"{what} {data} nearest={nearest}")


def test_perspective_where_the_denominator_is_zero_is_fill():
    image = picture(np.random.default_rng(13), 9, 11, 3, 0)
    fill = np.array([7, 8, 9], np.uint8)
    for nearest in (True, False):  # a6 = -2: w = 1 - 2 (x + 0.5) is 0 in column 0
        out = native.warp_perspective(image, [1, 0, 5, 0, 1, 0, -2, 0], nearest, fill)
        assert (out[:, 0] == fill).all()
        theirs = pillow_warp(image, Image.Transform.PERSPECTIVE, [1, 0, 5, 0, 1, 0, -2, 0], nearest, fill, (9, 11))
        assert_same(out[:, 1:], theirs[:, 1:], f"nearest={nearest}")


@pytest.mark.parametrize("matrix", [[INF, 0, 0, 0, 1, 0], [1, 0.2, INF, 0, 1, 0], [1, 0.2, 0, 0, 1, -INF], [INF] * 6,
                                    [1e300, 0, 0, 0, 1, 0], [-1e300, 1e300, 0, 0, 1, 0], [1, 1e-300, 0, 0, 1, 0]])
def test_affine_warps_with_infinite_and_huge_coefficients_equal_pillow(matrix):
    image = picture(np.random.default_rng(14), 13, 17, 3, 0)
    fill = np.array([200, 30, 90], np.uint8)
    for nearest in (True, False):
        assert_same(native.warp_affine(image, matrix, nearest, fill),
                    pillow_warp(image, Image.Transform.AFFINE, matrix, nearest, fill, (13, 17)), f"{nearest}")


def test_warps_with_coefficients_that_are_not_numbers_fill_those_pixels():
    image = picture(np.random.default_rng(15), 13, 17, 3, 0)
    fill = np.array([200, 30, 90], np.uint8)
    for nearest in (True, False):
        for matrix in ([NAN] * 6, [1, 0, NAN, 0, 1, 0], [1, 0.1, 0, NAN, 1, 0]):
            assert (native.warp_affine(image, matrix, nearest, fill) == fill).all()
        assert (native.warp_perspective(image, [NAN] * 8, nearest, fill) == fill).all()
        assert (native.warp_perspective(image, [1, 0, 0, 0, 1, 0, 0, NAN], nearest, fill) == fill).all()


def test_warps_read_and_write_rows_apart():
    rng = np.random.default_rng(16)
    image = picture(rng, 19, 23, 3, 2)
    big_src = rng.integers(0, 256, (22, 30, 3), dtype=np.uint8)
    big_src[2:21, 3:26] = image
    for warp, data in ((native.warp_affine, [0.9, 0.2, -1.5, -0.1, 1.1, 2.0]),
                       (native.warp_affine, [1.0, 0.0, -4.0, 0.0, 1.0, 3.0]),
                       (native.warp_perspective, [1.0, 0.1, -2.0, 0.05, 0.9, 1.0, 0.004, -0.003])):
        for nearest in (True, False):
            big_out = np.full((25, 20, 3), 99, np.uint8)
            out = big_out[3:20, 2:17]
            warp(big_src[2:21, 3:26], data, nearest, (4, 5, 6), (17, 15), out)
            assert_same(out, warp(image, data, nearest, (4, 5, 6), (17, 15)), f"{warp.__name__} {nearest}")
            out[...] = 99
            assert (big_out == 99).all()


# ---------------------------------------------------------------- hostile arguments

TONES = {"posterize": (3,), "solarize": (128.0,), "invert": (), "autocontrast": (), "equalize": (),
         "brightness": (0.5,), "color": (0.5,), "contrast": (0.5,), "sharpness": (0.5,)}


def call_tone(name: str, src: np.ndarray | None, src_size: int, height: int, width: int, channels: int,
              src_stride: int, dst: np.ndarray | int | None, dst_size: int, dst_stride: int) -> int:
    """The C tone kernel ``name`` on raw pointers and sizes (``dst`` an array, an address or NULL)."""
    address = dst.ctypes.data if isinstance(dst, np.ndarray) else dst
    return getattr(lib, f"slip_{name}")(None if src is None else src.ctypes.data, src_size, height, width, channels,
                                        src_stride, address, dst_size, dst_stride, *TONES[name])


def tone_refusals(src: np.ndarray, dst: np.ndarray) -> list[tuple[str, tuple, int]]:
    """(what, arguments after the name, expected status) of calls each kernel must refuse, on a 6 x 5 x 3
    ``src`` and a ``dst`` of its size."""
    n = src.size
    return [
        ("NULL src", (None, n, 6, 5, 3, 15, dst, n, 15), Status.EINVAL),
        ("NULL dst", (src, n, 6, 5, 3, 15, None, n, 15), Status.EINVAL),
        ("no rows", (src, n, 0, 5, 3, 15, dst, n, 15), Status.EINVAL),
        ("negative width", (src, n, 6, -5, 3, 15, dst, n, 15), Status.EINVAL),
        ("too wide", (src, n, 6, 65501, 3, 15, dst, n, 15), Status.EINVAL),
        ("no channels", (src, n, 6, 5, 0, 15, dst, n, 15), Status.EINVAL),
        ("five channels", (src, n, 6, 5, 5, 15, dst, n, 15), Status.EINVAL),
        ("a source stride short of a row", (src, n, 6, 5, 3, 14, dst, n, 15), Status.EINVAL),
        ("a negative output stride", (src, n, 6, 5, 3, 15, dst, n, -15), Status.EINVAL),
        ("a source one byte short", (src, n - 1, 6, 5, 3, 15, dst, n, 15), Status.EBUFFER),
        ("an output one byte short", (src, n, 6, 5, 3, 15, dst, n - 1, 15), Status.EBUFFER),
        ("an empty output", (src, n, 6, 5, 3, 15, dst, 0, 15), Status.EBUFFER),
        ("a stride past any buffer", (src, n, 6, 5, 3, 2**62, dst, n, 15), Status.EBUFFER),
        ("a stride beyond int64 when multiplied", (src, n, 6, 5, 3, 2**63 - 1, dst, n, 15), Status.EBUFFER),
        ("a source stride wider than its buffer", (src, n, 6, 5, 3, 16, dst, n, 15), Status.EBUFFER),
        ("an output overlapping the source a byte on", (src, n, 5, 5, 3, 15, src.ctypes.data + 1, n - 1, 15),
         Status.EINVAL),
        ("in place with another stride", (src, n, 5, 5, 3, 15, src.ctypes.data, n, 16), Status.EINVAL),
    ]


@pytest.mark.parametrize("name", sorted(TONES))
def test_tone_kernels_refuse_hostile_arguments_and_write_nothing(name):
    src = np.random.default_rng(17).integers(0, 256, (6, 5, 3), dtype=np.uint8)
    kept = src.copy()
    dst = np.full_like(src, 41)
    for what, args, status in tone_refusals(src, dst):
        assert call_tone(name, *args) == status, what
        assert native.last_error(), what
        assert (dst == 41).all() and np.array_equal(src, kept), what
    assert call_tone(name, src, src.size, 6, 5, 3, 15, dst, dst.size, 15) == Status.OK  # the same, well formed


def test_sharpness_refuses_to_work_in_place_and_color_and_contrast_take_one_or_three_channels():
    src = np.random.default_rng(18).integers(0, 256, (6, 5, 4), dtype=np.uint8)
    kept = src.copy()
    assert call_tone("sharpness", src, src.size, 6, 5, 3, 20, src, src.size, 20) == Status.EINVAL
    assert "overlaps" in native.last_error()
    for name in ("color", "contrast"):
        for channels in (2, 4):
            assert call_tone(name, src, src.size, 6, 5, channels, 20, src, src.size, 20) == Status.EINVAL, name
            assert "channels" in native.last_error()
    np.testing.assert_array_equal(src, kept)
    with pytest.raises(ArgumentError, match=r"sharpness: dst overlaps src.*\(EINVAL\)"):
        native.sharpness(src, 1.5, out=src)


def call_warp(name: str, src: np.ndarray | None, src_size: int, src_h: int, src_w: int, channels: int,
              src_stride: int, dst: np.ndarray | int | None, dst_size: int, dst_h: int, dst_w: int, dst_stride: int,
              data: np.ndarray | None, fill: np.ndarray | None, fill_size: int) -> int:
    address = dst.ctypes.data if isinstance(dst, np.ndarray) else dst
    return getattr(lib, f"slip_warp_{name}")(
        None if src is None else src.ctypes.data, src_size, src_h, src_w, channels, src_stride, address, dst_size,
        dst_h, dst_w, dst_stride, None if data is None else data.ctypes.data, 1,
        None if fill is None else fill.ctypes.data, fill_size)


@pytest.mark.parametrize("name", ["affine", "perspective"])
def test_warps_refuse_hostile_arguments_and_write_nothing(name):
    src = np.random.default_rng(19).integers(0, 256, (6, 5, 3), dtype=np.uint8)
    dst = np.full((4, 7, 3), 41, np.uint8)
    data, fill = np.array([0.9, 0.1, 1.0, -0.1, 1.1, 0.5, 0.001, 0.002]), np.array([1, 2, 3], np.uint8)
    s, d = src.size, dst.size
    refusals = [
        ("NULL src", (None, s, 6, 5, 3, 15, dst, d, 4, 7, 21, data, fill, 3), Status.EINVAL),
        ("NULL dst", (src, s, 6, 5, 3, 15, None, d, 4, 7, 21, data, fill, 3), Status.EINVAL),
        ("NULL coefficients", (src, s, 6, 5, 3, 15, dst, d, 4, 7, 21, None, fill, 3), Status.EINVAL),
        ("NULL fill", (src, s, 6, 5, 3, 15, dst, d, 4, 7, 21, data, None, 3), Status.EINVAL),
        ("no source rows", (src, s, 0, 5, 3, 15, dst, d, 4, 7, 21, data, fill, 3), Status.EINVAL),
        ("a negative output width", (src, s, 6, 5, 3, 15, dst, d, 4, -7, 21, data, fill, 3), Status.EINVAL),
        ("an output too high", (src, s, 6, 5, 3, 15, dst, d, 65501, 7, 21, data, fill, 3), Status.EINVAL),
        ("no channels", (src, s, 6, 5, 0, 15, dst, d, 4, 7, 21, data, fill, 3), Status.EINVAL),
        ("five channels", (src, s, 6, 5, 5, 25, dst, d, 4, 7, 35, data, fill, 5), Status.EINVAL),
        ("an output stride short of a row", (src, s, 6, 5, 3, 15, dst, d, 4, 7, 20, data, fill, 3), Status.EINVAL),
        ("a source one byte short", (src, s - 1, 6, 5, 3, 15, dst, d, 4, 7, 21, data, fill, 3), Status.EBUFFER),
        ("an output one byte short", (src, s, 6, 5, 3, 15, dst, d - 1, 4, 7, 21, data, fill, 3), Status.EBUFFER),
        ("an output stride past its buffer", (src, s, 6, 5, 3, 15, dst, d, 4, 7, 22, data, fill, 3),
         Status.EBUFFER),
        ("a stride beyond int64 when multiplied", (src, s, 6, 5, 3, 2**63 - 1, dst, d, 4, 7, 21, data, fill, 3),
         Status.EBUFFER),
        ("a fill short of a channel", (src, s, 6, 5, 3, 15, dst, d, 4, 7, 21, data, fill, 2), Status.EBUFFER),
        ("an output overlapping the source", (src, s, 6, 5, 3, 15, src.ctypes.data + 30, s - 30, 2, 5, 15, data,
                                              fill, 3), Status.EINVAL),
        ("the output the source", (src, s, 6, 5, 3, 15, src, s, 6, 5, 15, data, fill, 3), Status.EINVAL),
    ]
    kept = src.copy()
    for what, args, status in refusals:
        assert call_warp(name, *args) == status, what
        assert native.last_error(), what
        assert (dst == 41).all() and np.array_equal(src, kept), what
    assert call_warp(name, src, s, 6, 5, 3, 15, dst, d, 4, 7, 21, data, fill, 3) == Status.OK


def test_the_python_wrappers_check_their_arrays():
    image = np.zeros((4, 5, 3), np.uint8)
    with pytest.raises(ArgumentError, match="src is empty"):
        native.invert(np.zeros((0, 5, 3), np.uint8))
    with pytest.raises(ArgumentError, match=r"out has shape \(4, 4, 3\); this call writes \(4, 5, 3\)"):
        native.brightness(image, 0.5, out=np.zeros((4, 4, 3), np.uint8))
    with pytest.raises(ArgumentError, match="warp_affine: 6 coefficients are needed, got 5"):
        native.warp_affine(image, [1, 0, 0, 0, 1])
    with pytest.raises(ArgumentError, match=r"color: .*RGB \(3\) or one channel \(EINVAL\)"):
        native.color(np.zeros((4, 5, 4), np.uint8), 0.5)


# ---------------------------------------------------------------- the compiled entry points


def test_the_compiled_kernels_refuse_what_the_c_kernels_refuse():
    image = np.zeros((4, 5, 3), np.uint8)
    with pytest.raises(ValueError, match="invert takes"):
        tones.invert(np.zeros((0, 5, 3), np.uint8), np.zeros((0, 5, 3), np.uint8))
    with pytest.raises(ValueError, match="brightness takes"):
        tones.brightness(np.zeros((4, 10, 3), np.uint8)[:, ::2], image, 0.5)  # not contiguous
    with pytest.raises(ValueError, match="posterize takes"):
        tones.posterize(image, np.zeros((4, 4, 3), np.uint8), 3)  # too small
    fill = np.zeros(1, np.uint8)
    with pytest.raises(ValueError, match="affine takes"):
        warps.affine(image, np.zeros_like(image), np.array([1.0, 0, 0, 0, 1, 0]), True, fill)  # fill of 1 value
    with pytest.raises(ValueError, match="perspective takes"):
        warps.perspective(image, image, np.array([1.0, 0, 0, 0, 1, 0, 0, 0]), False, np.zeros(3, np.uint8))


def test_the_compiled_kernels_give_the_c_kernels_bytes():
    rng = np.random.default_rng(20)
    image = picture(rng, 23, 29, 3, 2)
    for name, args in TONES.items():
        out = np.empty_like(image)
        getattr(tones, name)(image, out, *args)
        assert_same(out, getattr(native, name)(image, *args), name)
    fill = np.array([5, 6, 7], np.uint8)
    matrix, coefficients = np.array([0.9, 0.3, -2.0, -0.2, 1.1, 1.5]), np.array([1.0, 0.1, -2, 0.05, 0.9, 1, 0.004, 0])
    for nearest in (True, False):
        out = np.empty((31, 17, 3), np.uint8)
        warps.affine(image, out, matrix, nearest, fill)
        assert_same(out, native.warp_affine(image, matrix, nearest, fill, (31, 17)), f"affine {nearest}")
        warps.perspective(image, out, coefficients, nearest, fill)
        assert_same(out, native.warp_perspective(image, coefficients, nearest, fill, (31, 17)), "perspective")
