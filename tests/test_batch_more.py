"""The torch batch versions of torchvision's warps and tone operations
against the compiled per-sample operations (the same keys draw the same
parameters, and the pixels agree: tones exactly, bilinear warps within one
level, nearest warps on at least 99.9% of the values), the original
slipstream's set (zoom, rotate-object, optical distortion, patch shuffle,
YIQ jitter, sRGB to LMS, circular mask) against what each is defined to
compute, parameter replay on a second view, keys, dtypes, errors, loader
pipelines that resume exactly, and CUDA against the CPU."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pytest
import torch
from jpeg_corpus import picture
from test_warps import CROPS, FILL, run

import slipstream as ss
from slipstream.compiler import random as rnd
from slipstream.errors import ArgumentError
from slipstream.ops import (RandomAdjustSharpness, RandomAffine, RandomAutocontrast, RandomEqualize, RandomInvert,
                            RandomPerspective, RandomPosterize, RandomRotation, ToTensor)
from slipstream.ops.batch import (BatchCircularMask, BatchFixedOpticalDistortion, BatchPatchShuffle,
                                  BatchRandomAdjustSharpness, BatchRandomAffine, BatchRandomAutocontrast,
                                  BatchRandomEqualize, BatchRandomInvert, BatchRandomPerspective, BatchRandomPosterize,
                                  BatchRandomRotation, BatchRandomZoom, BatchRotateObject, BatchSRGBToLMS,
                                  BatchYIQColorJitter)
from slipstream.ops.batch_tones import SRGB_TO_LMS
from slipstream.ops.warps import AFFINE_DRAWS, PERSPECTIVE_DRAWS, ROTATION_DRAWS, perspective_corners


def chw(images: np.ndarray) -> torch.Tensor:
    """(B, H, W, C) uint8 images as a (B, C, H, W) uint8 batch."""
    return torch.from_numpy(np.ascontiguousarray(images)).permute(0, 3, 1, 2).contiguous()


def hwc_levels(batch: torch.Tensor) -> np.ndarray:
    """A batch (uint8, or float in [0, 1]) as (B, H, W, C) uint8 levels."""
    if batch.dtype != torch.uint8:
        batch = (batch.float() * 255).round().clamp(0, 255).to(torch.uint8)
    return batch.permute(0, 2, 3, 1).numpy()


def keys_of(keys: list[np.uint64]) -> np.ndarray:
    return np.array(keys, np.uint64)


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---------------------------------------------------------------- agreement with the compiled operations

FILL01 = tuple(v / 255 for v in FILL)
SHEAR = (-10, 10, -5, 15)


def warp_pair(name: str, interpolation: str) -> tuple[object, torch.nn.Module]:
    """The compiled warp and its batch version, with the same arguments."""
    if name == "rotation":
        return (RandomRotation((-50, 70), interpolation=interpolation, fill=FILL),
                BatchRandomRotation((-50, 70), interpolation=interpolation, fill=FILL01))
    if name == "affine":
        args = (25, (0.2, 0.1), (0.7, 1.3), SHEAR)
        return (RandomAffine(*args, interpolation=interpolation, fill=FILL),
                BatchRandomAffine(*args, interpolation=interpolation, fill=FILL01))
    return (RandomPerspective(0.6, p=0.7, interpolation=interpolation, fill=FILL),
            BatchRandomPerspective(0.6, p=0.7, interpolation=interpolation, fill=FILL01))


@pytest.mark.parametrize("interpolation", ["nearest", "bilinear"])
@pytest.mark.parametrize("name", ["rotation", "affine", "perspective"])
def test_batch_warps_agree_with_the_compiled_warps(name, interpolation):
    """The same keys draw the same parameters, so the same maps.  Bilinear:
    every value within one level (Pillow truncates the blend, the batch
    rounds it).  Nearest: at least 99.9% of the values equal; the others
    are pixels whose mapped point lies within Pillow's rounding (its cosine
    and sine rounded to 15 decimals, its 16.16 fixed-point sums) of a pixel
    boundary, where float64 picks the neighbour."""
    compiled, batch = warp_pair(name, interpolation)
    expected, keys = run(compiled)
    images = chw(CROPS)
    got = hwc_levels(batch(images, keys_of(keys)))
    diff = np.abs(got.astype(np.int64) - expected.astype(np.int64))
    if interpolation == "bilinear":
        assert diff.max() <= 1, f"{(diff > 1).sum()} values differ by more than one level"
    else:
        assert (diff == 0).mean() >= 0.999, f"{(diff != 0).mean():.5f} of the values differ"
    from_float = hwc_levels(batch(images.float() / 255, keys_of(keys)))
    assert np.abs(from_float.astype(np.int64) - got).max() <= 1  # a float batch takes the same map
    assert sum(not np.array_equal(a, b) for a, b in zip(got, CROPS)) >= len(CROPS) // 2


def test_batch_warps_draw_the_compiled_parameters():
    keys = np.array([rnd.sample_key(np.uint64(3), 0, i, 8) for i in range(12)], np.uint64)
    images = chw(CROPS)
    h, w = CROPS.shape[1:3]
    rotation = BatchRandomRotation((-50, 70)).sample(images, keys)
    affine = BatchRandomAffine(25, (0.2, 0.1), (0.7, 1.3), SHEAR).sample(images, keys)
    perspective = BatchRandomPerspective(0.6, p=0.7).sample(images, keys)
    for i, key in enumerate(keys):
        assert rotation["angle"][i].item() == rnd.uniform_range(key, ROTATION_DRAWS.angle, -50.0, 70.0)
        assert affine["angle"][i].item() == rnd.uniform_range(key, AFFINE_DRAWS.angle, -25.0, 25.0)
        shift = [rnd.uniform_range(key, AFFINE_DRAWS.shift_x, -0.2 * w, 0.2 * w),
                 rnd.uniform_range(key, AFFINE_DRAWS.shift_y, -0.1 * h, 0.1 * h)]
        assert affine["translate"][i].tolist() == [round(v) for v in shift]
        assert affine["scale"][i].item() == rnd.uniform_range(key, AFFINE_DRAWS.scale, 0.7, 1.3)
        assert affine["shear"][i].tolist() == [rnd.uniform_range(key, AFFINE_DRAWS.shear_x, -10.0, 10.0),
                                               rnd.uniform_range(key, AFFINE_DRAWS.shear_y, -5.0, 15.0)]
        assert bool(perspective["apply"][i]) == (rnd.uniform(key, PERSPECTIVE_DRAWS.apply) < 0.7)
        assert perspective["ends"][i].tolist() == perspective_corners(key, h, w, 0.6).tolist()


NARROW = np.stack([(image.astype(np.uint16) * 3 // 4 + 8 * (k % 5)).astype(np.uint8) for k, image in enumerate(CROPS)])
"""The photo crops with their values in narrower ranges, so that autocontrast changes every one."""

TONES = {
    "posterize": (lambda: RandomPosterize(3, 0.5), lambda: BatchRandomPosterize(3, 0.5)),
    "posterize-0": (lambda: RandomPosterize(0, 0.5), lambda: BatchRandomPosterize(0, 0.5)),
    "equalize": (lambda: RandomEqualize(0.5), lambda: BatchRandomEqualize(0.5)),
    "autocontrast": (lambda: RandomAutocontrast(0.5), lambda: BatchRandomAutocontrast(0.5)),
    "sharpness-1.8": (lambda: RandomAdjustSharpness(1.8, 0.5), lambda: BatchRandomAdjustSharpness(1.8, 0.5)),
    "sharpness-0.3": (lambda: RandomAdjustSharpness(0.3, 0.5), lambda: BatchRandomAdjustSharpness(0.3, 0.5)),
    "sharpness-9": (lambda: RandomAdjustSharpness(9.0, 0.5), lambda: BatchRandomAdjustSharpness(9.0, 0.5)),
    "invert": (lambda: RandomInvert(0.5), lambda: BatchRandomInvert(0.5)),
}


@pytest.mark.parametrize("name", sorted(TONES))
def test_batch_tones_equal_the_compiled_tones(name):
    """Exactly (the brief allowed one level): the same integer and float32
    steps as Pillow's, on uint8 batches and on float batches of v / 255."""
    make_compiled, make_batch = TONES[name]
    expected, keys = run(make_compiled(), NARROW)
    images = chw(NARROW)
    for batch in (images, images.float() / 255, images.double() / 255):
        got = hwc_levels(make_batch()(batch, keys_of(keys)))
        assert np.array_equal(got, expected), f"{(got != expected).sum()} values differ ({batch.dtype})"
    changed = sum(not np.array_equal(a, b) for a, b in zip(expected, NARROW))
    assert 0 < changed < len(NARROW)


# ---------------------------------------------------------------- the original slipstream's set


def ramp(height: int, width: int) -> torch.Tensor:
    """(1, 1, H, W) float64 image whose pixel (y, x) holds x / 100 (a linear ramp along x)."""
    return (torch.arange(width, dtype=torch.float64) / 100).expand(1, 1, height, width).clone()


def test_zoom_magnifies_about_its_point_which_stays_in_place():
    """zoom 0.5 about (0.25, 0.5): output pixel x shows input point
    0.5 * (x + 0.5 - 8) + 8, and bilinear on a ramp gives that point's x - 0.5."""
    zoom = BatchRandomZoom(zoom=0.5, x=0.25, y=0.5, p=1.0)
    image = ramp(8, 32)
    out = zoom(image)
    xs = torch.arange(32, dtype=torch.float64)
    expected = (0.5 * (xs + 0.5 - 8) + 8 - 0.5).clamp(min=0) / 100
    torch.testing.assert_close(out[0, 0, 4], expected, rtol=0, atol=1e-6)
    assert torch.equal(BatchRandomZoom(p=0.0)(image), image)


def test_rotate_object_moves_rotates_and_shrinks():
    images = chw(CROPS[:, :32, :32])
    moved = BatchRotateObject(0, ctr_x=0.25, ctr_y=0.25, scale=1.0, dest_x=0.75, dest_y=0.75, p=1.0)(images)
    assert torch.equal(moved[:, :, 16:, 16:], images[:, :, :16, :16])
    assert torch.equal(moved[:, :, :16, :16], images[:, :, :1, :1].expand(-1, -1, 16, 16))  # edge padding
    turned = BatchRotateObject((90, 90), scale=1.0, dest_x=0.5, dest_y=0.5, p=1.0, interpolation="nearest")(images)
    assert torch.equal(turned, torch.rot90(images, 1, (2, 3)))  # counter-clockwise
    shrunk = BatchRotateObject(0, scale=2.0, dest_x=0.5, dest_y=0.5, p=1.0, interpolation="nearest")(images)
    assert torch.equal(shrunk[:, :, 8:24, 8:24], images[:, :, 1::2, 1::2])  # shown at half its size


def test_rotation_is_counter_clockwise_and_affine_clockwise_as_torchvision():
    images = chw(CROPS[:, :32, :32])
    assert torch.equal(BatchRandomRotation((90, 90))(images), torch.rot90(images, 1, (2, 3)))
    assert torch.equal(BatchRandomAffine((90, 90))(images), torch.rot90(images, -1, (2, 3)))


def test_fixed_optical_distortion_maps_radially():
    image = chw(CROPS[:2])
    assert torch.equal(BatchFixedOpticalDistortion(distortion=0.0)(image), image)
    lens = BatchFixedOpticalDistortion(distortion=-0.5, dx=2.0, dy=-1.0)
    h, w = CROPS.shape[1:3]
    u, v = lens.points({}, h, w, torch.device("cpu"))
    cx, cy = w / 2 + 2.0, h / 2 - 1.0
    for y, x in [(0, 0), (5, 40), (h - 1, w - 1)]:
        nx, ny = (x + 0.5 - cx) / w, (y + 0.5 - cy) / h
        factor = 1 - 0.5 * (nx * nx + ny * ny) - 0.5 * (nx * nx + ny * ny) ** 2
        assert u[0, y, x].item() == pytest.approx(cx + nx * factor * w, abs=1e-9)
        assert v[0, y, x].item() == pytest.approx(cy + ny * factor * h, abs=1e-9)
    assert lens(image).shape == image.shape


def test_patch_shuffle_reorders_whole_patches():
    images = chw(np.stack([picture(17, 16, seed=k) for k in range(6)]))
    shuffle = BatchPatchShuffle([0.5, 0.25], p=1.0, generator=generator(2))
    params = shuffle.sample(images)
    out = shuffle.apply(images, params)
    assert set(params["size"].tolist()) == {0, 1}
    for image, result, size in zip(images, out, params["size"].tolist()):
        side = 8 if size == 0 else 4
        cut = [image[:, r:r + side, c:c + side] for r in range(0, 16, side) for c in range(0, 16, side)]
        pasted = [result[:, r:r + side, c:c + side] for r in range(0, 16, side) for c in range(0, 16, side)]
        assert sorted(p.flatten().tolist() for p in pasted) == sorted(p.flatten().tolist() for p in cut)
        assert torch.equal(result[:, 16:], image[:, 16:])  # the row no whole patch covers stays
    assert not torch.equal(out, images)


def test_circular_mask_keeps_the_centre_and_fades_to_tol():
    mask = BatchCircularMask(blur_span=4.0, tol=0.001)
    m = mask.mask(24, 32, torch.device("cpu"))[0, 0]
    assert m[12, 16] == 1 and m[0, 0] < 1e-3
    # 41 x 41: the radius is 20.5 - 4 = 16.5, and b pixels past it the mask is tol ** (b / blur_span) ** 2
    assert mask.mask(41, 41, torch.device("cpu"))[0, 0, 20, 40].item() == pytest.approx(0.001 ** (3.5 / 4) ** 2,
                                                                                           rel=1e-5)
    images = chw(CROPS[:2, :24, :32])
    out = mask(images)
    assert torch.equal(out[:, :, 12, 16], images[:, :, 12, 16]) and out[:, :, 0, 0].max() == 0
    hard = BatchCircularMask(blur_span=0.0).mask(8, 8, torch.device("cpu"))
    assert set(hard.unique().tolist()) == {0.0, 1.0}


def test_srgb_to_lms_is_the_transfer_function_then_cat02():
    colours = torch.tensor([[0.0, 0.0, 0.0], [1.0, 1.0, 1.0], [0.02, 0.5, 0.9]], dtype=torch.float64)
    batch = colours.view(3, 3, 1, 1)
    out = BatchSRGBToLMS()(batch).view(3, 3)
    linear = colours.clone()
    linear[2] = torch.tensor([0.02 / 12.92, ((0.5 + 0.055) / 1.055) ** 2.4, ((0.9 + 0.055) / 1.055) ** 2.4],
                             dtype=torch.float64)
    xyz_to_lms = torch.tensor([[0.7328, 0.4296, -0.1624], [-0.7036, 1.6975, 0.0061], [0.0030, 0.0136, 0.9834]],
                              dtype=torch.float64)
    expected = linear @ SRGB_TO_LMS.T
    torch.testing.assert_close(out, expected, rtol=0, atol=1e-12)
    torch.testing.assert_close(out[1], xyz_to_lms @ torch.tensor([0.950456, 1.0, 1.088754], dtype=torch.float64),
                               rtol=0, atol=1e-5)  # white is D65's white point
    assert BatchSRGBToLMS()(chw(CROPS[:2])).dtype == torch.float32


def test_yiq_jitter_brightness_contrast_value_and_saturation():
    batch = chw(CROPS[:4]).float() / 255
    torch.testing.assert_close(BatchYIQColorJitter(p=1.0)(batch), batch, rtol=0, atol=1e-5)
    torch.testing.assert_close(BatchYIQColorJitter(brightness=(1.5, 1.5))(batch), (batch * 1.5).clamp(0, 1),
                               rtol=0, atol=1e-5)
    torch.testing.assert_close(BatchYIQColorJitter(contrast=(0.5, 0.5))(batch), 0.5 * (batch - 0.5) + 0.5,
                               rtol=0, atol=1e-5)
    gray = BatchYIQColorJitter(saturation=(0.0, 0.0))(batch)
    luma = 0.299 * batch[:, 0] + 0.587 * batch[:, 1] + 0.114 * batch[:, 2]
    torch.testing.assert_close(gray, luma.unsqueeze(1).expand_as(batch), rtol=0, atol=3e-3)
    turned = BatchYIQColorJitter(hue=(180, 180))(batch)  # chroma negated, luma kept
    turned_luma = 0.299 * turned[:, 0] + 0.587 * turned[:, 1] + 0.114 * turned[:, 2]
    inside = (turned > 0.01).all(1) & (turned < 0.99).all(1)
    assert inside.float().mean() > 0.5
    torch.testing.assert_close(turned_luma[inside], luma[inside], rtol=0, atol=1e-5)
    assert torch.equal(BatchYIQColorJitter(0.4, 0.4, 0.4, 30, p=0.0)(batch), batch)


# ---------------------------------------------------------------- every operation: replay, keys, dtypes

BATCH = chw(np.stack([picture(16, 20, seed=k) for k in range(12)])).float() / 255

EVERY_OP: dict[str, Callable[[torch.Generator], torch.nn.Module]] = {
    "rotation": lambda g: BatchRandomRotation(40, interpolation="bilinear", generator=g),
    "affine": lambda g: BatchRandomAffine(20, (0.1, 0.1), (0.8, 1.2), SHEAR, "bilinear", generator=g),
    "perspective": lambda g: BatchRandomPerspective(0.5, p=0.7, generator=g),
    "zoom": lambda g: BatchRandomZoom(x=(0.3, 0.7), p=0.7, generator=g),
    "rotate-object": lambda g: BatchRotateObject(p=0.7, generator=g),
    "optical-distortion": lambda g: BatchFixedOpticalDistortion(),
    "patch-shuffle": lambda g: BatchPatchShuffle([0.5, 0.25], p=0.7, generator=g),
    "posterize": lambda g: BatchRandomPosterize(2, p=0.7, generator=g),
    "equalize": lambda g: BatchRandomEqualize(p=0.7, generator=g),
    "autocontrast": lambda g: BatchRandomAutocontrast(p=0.7, generator=g),
    "sharpness": lambda g: BatchRandomAdjustSharpness(3.0, p=0.7, generator=g),
    "invert": lambda g: BatchRandomInvert(p=0.7, generator=g),
    "yiq": lambda g: BatchYIQColorJitter(0.4, 0.4, 0.4, 30, 0.2, p=0.8, generator=g),
    "srgb-to-lms": lambda g: BatchSRGBToLMS(),
    "circular-mask": lambda g: BatchCircularMask(3.0),
}
PER_PIXEL = {"posterize", "equalize", "autocontrast", "sharpness", "invert", "yiq", "srgb-to-lms", "circular-mask"}
"""Operations that commute with a horizontal flip."""


@pytest.mark.parametrize("name", sorted(EVERY_OP))
def test_parameters_replay_on_a_second_view(name):
    """The same parameters transform any view the same way: applying them
    twice gives the same batch, forward is sample then apply, and a second
    view gets the first view's transform (a flipped view, for operations
    that commute with a flip; for the warps, another batch stacked on the
    channels)."""
    op = EVERY_OP[name](generator(1))
    params = op.sample(BATCH)
    first = op.apply(BATCH, params)
    assert torch.equal(first, op.apply(BATCH.clone(), params)) and first.shape == BATCH.shape
    assert not torch.equal(first, BATCH)
    assert torch.equal(EVERY_OP[name](generator(1))(BATCH), first)
    if name in PER_PIXEL:
        torch.testing.assert_close(op.apply(BATCH.flip(3), params), first.flip(3), rtol=0, atol=1e-6)
    else:
        other = BATCH.flip(2)
        both = op.apply(torch.cat([BATCH, other], 1), params)
        torch.testing.assert_close(both, torch.cat([first, op.apply(other, params)], 1), rtol=0, atol=1e-6)


@pytest.mark.parametrize("name", sorted(EVERY_OP))
def test_each_images_parameters_come_from_its_own_key(name):
    """The same keys draw the same parameters whatever torch's generator
    holds, and a sample keeps its parameters in another batch."""
    keys = rnd.batch_keys(np.uint64(5), 0, np.arange(12), 12, 10)
    op = EVERY_OP[name](None)
    torch.manual_seed(1)
    params = op.sample(BATCH, keys)
    torch.manual_seed(2)
    again, shifted = op.sample(BATCH, keys), op.sample(BATCH[3:], keys[3:])
    for key, value in params.items():
        assert torch.equal(value, again[key])
        assert torch.equal(value[3:], shifted[key]), key
    if "apply" in params:
        assert params["apply"].tolist() == (rnd.uniforms(keys, rnd.draw_number("apply")) < op.p).tolist()
    torch.testing.assert_close(op(BATCH, keys), op.apply(BATCH, params), rtol=0, atol=0)


@pytest.mark.parametrize("name", sorted(EVERY_OP))
def test_float_and_uint8_batches_keep_their_dtype_and_agree(name):
    op = EVERY_OP[name](None)
    as_uint8 = (BATCH * 255).round().to(torch.uint8)
    params = op.sample(BATCH, rnd.batch_keys(np.uint64(7), 0, np.arange(12), 12, 3))
    results = {dtype: op.apply(as_uint8 if dtype == torch.uint8 else BATCH.to(dtype), params)
               for dtype in (torch.float16, torch.float32, torch.float64, torch.uint8)}
    for dtype, result in results.items():
        assert result.dtype == (torch.float32 if dtype == torch.uint8 and name == "srgb-to-lms" else dtype)
    if name != "srgb-to-lms":
        difference = (results[torch.uint8].float() / 255 - results[torch.float32]).abs().max()
        assert difference <= 1 / 255 + 1e-6  # the same transform, rounded once
        assert (results[torch.float16].float() - results[torch.float32]).abs().max() <= 2 / 255


# ---------------------------------------------------------------- errors


@pytest.mark.parametrize(("make", "match"), [
    (lambda: BatchRandomRotation(10, expand=True),
     r"RandomRotation: expand must be False, got True \(an expanded rotation"),
    (lambda: BatchRandomRotation(10, fill="red"), "fill must be a finite number"),
    (lambda: BatchRandomAffine(10, interpolation="bicubic"),
     "RandomAffine: interpolation must be 'nearest' or 'bilinear', got 'bicubic'"),
    (lambda: BatchRandomAffine(10, translate=(2, 0)),
     r"RandomAffine: translate must be None or 2 numbers in \[0, 1\], got \(2, 0\)"),
    (lambda: BatchRandomPerspective(1.5), r"RandomPerspective: distortion_scale must be a number in \[0, 1\], got 1.5"),
    (lambda: BatchRandomZoom(zoom=0), "zoom must be a positive number"),
    (lambda: BatchRandomZoom(zoom=None), "zoom must be a positive number"),
    (lambda: BatchRandomRotation(10, fill=None), "fill must be a finite number"),
    (lambda: BatchRandomZoom(padding_mode="reflect"), "padding_mode must be one of constant, edge"),
    (lambda: BatchRotateObject(dest_x=(0.8, 0.2)), "dest_x must be a number or a"),
    (lambda: BatchFixedOpticalDistortion(distortion=math.nan), "distortion must be a finite number"),
    (lambda: BatchPatchShuffle(0), r"sizes must be a fraction in \(0, 1\]"),
    (lambda: BatchRandomPosterize(9), r"RandomPosterize: bits must be an int in \[0, 8\], got 9"),
    (lambda: BatchRandomAdjustSharpness(-1.0),
     "RandomAdjustSharpness: sharpness_factor must be a number >= 0, got -1.0"),
    (lambda: BatchRandomInvert(p=2), r"p must be a number in \[0, 1\]"),
    (lambda: BatchYIQColorJitter(hue=200), "BatchYIQColorJitter: hue range"),
    (lambda: BatchCircularMask(tol=0), r"tol must be a number in \(0, 1\)"),
])
def test_wrong_arguments_are_refused(make, match):
    with pytest.raises(ArgumentError, match=match):
        make()


def test_wrong_batches_are_refused():
    with pytest.raises(ArgumentError, match=r"fill \(0.1, 0.2\) has 2 values for images of 3 channels"):
        BatchRandomRotation(10, fill=(0.1, 0.2))(BATCH)
    with pytest.raises(ArgumentError, match=r"take \(batch, channels, height, width\) tensors, got \(3, 16, 20\)"):
        BatchRandomEqualize(1.0)(BATCH[0])
    with pytest.raises(ArgumentError, match="take float or uint8 tensors, got torch.int32"):
        BatchRandomInvert(1.0)(BATCH.int())
    with pytest.raises(ArgumentError, match=r"BatchYIQColorJitter takes RGB batches \(3 channels\), got \(12, 1,"):
        BatchYIQColorJitter(0.4)(BATCH[:, :1])
    with pytest.raises(ArgumentError, match="BatchSRGBToLMS takes RGB batches"):
        BatchSRGBToLMS()(torch.cat([BATCH, BATCH[:, :1]], 1))
    shuffle = BatchPatchShuffle(0.25, p=1.0)
    with pytest.raises(ArgumentError, match="parameters order 16 patches, this batch of .* has 25: replay them on"):
        shuffle.apply(torch.rand(12, 3, 10, 10), shuffle.sample(BATCH))


# ---------------------------------------------------------------- in a loader


def _chain() -> dict:
    return {"image": [ToTensor(), BatchRandomRotation(30, generator=None), BatchRandomAffine(10, (0.1, 0.1)),
                      BatchRandomPerspective(0.4), BatchRandomZoom(), BatchRotateObject(),
                      BatchFixedOpticalDistortion(-0.2), BatchPatchShuffle(0.5), BatchRandomPosterize(4),
                      BatchRandomEqualize(), BatchRandomAutocontrast(), BatchRandomAdjustSharpness(2.0),
                      BatchRandomInvert(), BatchYIQColorJitter(0.4, 0.4, 0.4, 20), BatchCircularMask(2.0),
                      BatchSRGBToLMS()]}


def test_a_loader_pipeline_of_every_new_operation_repeats_and_resumes_exactly(tmp_path):
    images = np.stack([picture(16, 16, seed=k) for k in range(40)])
    path = tmp_path / "d.slip"
    ss.write(path, {"image": images, "label": np.arange(40)}, {"image": ss.RGBImageField(write_mode="raw"),
                                                               "label": ss.IntField()}, workers=0, verbose=False)
    loader = ss.Loader(path, 8, _chain(), order=ss.Order("random", seed=3))
    assert [s.jit for s in loader.compiled.sources] == [True, False]
    first = [(x.clone(), y.clone()) for x, y in loader]
    torch.manual_seed(9)  # the draws come from the keys, not from torch's generator
    second = [(x.clone(), y.clone()) for x, y in ss.Loader(path, 8, _chain(), order=ss.Order("random", seed=3))]
    for (a, la), (b, lb) in zip(first, second, strict=True):
        assert torch.equal(la, lb) and torch.equal(a, b)
    iterator = iter(loader)  # epoch 1
    next(iterator), next(iterator)
    state = loader.state_dict()
    rest = [(x.clone(), y.clone()) for x, y in iterator]
    fresh = ss.Loader(path, 8, _chain(), order=ss.Order("random", seed=3))
    fresh.load_state_dict(state)
    resumed = [(x.clone(), y.clone()) for x, y in fresh]
    assert len(resumed) == len(rest) == 3
    for (a, la), (b, lb) in zip(rest, resumed):
        assert torch.equal(la, lb) and torch.equal(a, b)
    assert not torch.equal(rest[0][0], first[2][0])  # epoch 1 draws anew


# ---------------------------------------------------------------- CUDA


@pytest.fixture
def exact_float32():
    """Full float32 arithmetic on the GPU (no TF32), so that CPU and CUDA results can be compared closely."""
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved


@pytest.mark.cuda
@pytest.mark.parametrize("name", sorted(EVERY_OP))
def test_new_batch_operations_on_cuda_match_the_cpu(name, exact_float32):
    batch = chw(np.stack([picture(24, 28, seed=k) for k in range(16)])).float() / 255
    op = EVERY_OP[name](None)
    params = op.sample(batch, keys=np.arange(16, dtype=np.uint64) * 7919)
    on_cpu = op.apply(batch, params)
    on_cuda = op.apply(batch.cuda(), {k: v.cuda() for k, v in params.items()})
    assert on_cuda.is_cuda
    torch.testing.assert_close(on_cuda.cpu(), on_cpu, rtol=0, atol=1e-5)
    as_uint8 = (batch * 255).round().to(torch.uint8)
    torch.testing.assert_close(op.apply(as_uint8.cuda(), {k: v.cuda() for k, v in params.items()}).cpu(),
                               op.apply(as_uint8, params), rtol=0, atol=1 if name != "srgb-to-lms" else 1e-5)
