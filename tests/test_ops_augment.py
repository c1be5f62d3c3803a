"""Per-sample augmentations against torch references of torchvision's
documented arithmetic, with the parameters each sample drew."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from slipstream.compiler import ArraySource, Pipeline
from slipstream.compiler import random as rnd
from slipstream.ops import (ColorJitter, Cutout, GaussianBlur, RandomErasing, RandomGrayscale, RandomHorizontalFlip,
                            RandomSolarize, RandomTranslate, RandomVerticalFlip)
from jpeg_corpus import picture

SEED = 21
IMAGES = np.stack([picture(20, 28, seed=k) for k in range(24)])


def run(op, images=IMAGES):
    """The op on every image, and each sample's random key (node 1 of the pipeline)."""
    compiled = Pipeline([ArraySource(images), op]).compile(len(images), seed=SEED)
    out = compiled(np.arange(len(images)))
    stream = compiled.graph.pipelines["output"][1].stream
    keys = [np.uint64(rnd.sample_key(np.uint64(SEED), 0, i, stream)) for i in range(len(images))]
    return np.array(out), keys


def gray(img: torch.Tensor) -> torch.Tensor:
    r, g, b = img.float().unbind(-1)
    return (0.2989 * r + 0.587 * g + 0.114 * b).to(torch.uint8)


def blend(a: torch.Tensor, b: torch.Tensor, ratio: float) -> torch.Tensor:
    return (ratio * a.float() + (1.0 - ratio) * b.float()).clamp(0, 255).to(torch.uint8)


@pytest.mark.parametrize("name", ["brightness", "contrast", "saturation"])
def test_single_color_factors_match_torchvision_arithmetic(name):
    out, keys = run(ColorJitter(**{name: 0.6}))
    for image, result, key in zip(IMAGES, out, keys):
        factor = rnd.uniform_range(key, rnd.draw_number(name), 0.4, 1.6)
        img = torch.from_numpy(image)
        if name == "brightness":
            expected = blend(img, torch.zeros_like(img), factor)
        elif name == "contrast":
            expected = blend(img, gray(img).float().mean(), factor)
        else:
            expected = blend(img, gray(img)[..., None], factor)
        assert np.abs(result.astype(int) - expected.numpy()).max() <= 1


def test_hue_rotation_keeps_gray_and_value():
    out, keys = run(ColorJitter(hue=0.3))
    for image, result in zip(IMAGES, out):
        neutral = (image.max(-1) == image.min(-1))
        assert (result[neutral] == image[neutral]).all()  # gray pixels have no hue
        assert np.abs(result.max(-1).astype(int) - image.max(-1)).max() <= 1  # HSV value is kept
    assert not np.array_equal(out, IMAGES)


def test_color_jitter_applies_factors_in_a_random_order():
    out, _ = run(ColorJitter(brightness=0.5, contrast=0.5, saturation=0.5, hue=0.1))
    assert out.shape == IMAGES.shape and not np.array_equal(out, IMAGES)
    again, _ = run(ColorJitter(brightness=0.5, contrast=0.5, saturation=0.5, hue=0.1))
    np.testing.assert_array_equal(out, again)
    from slipstream.errors import ArgumentError

    with pytest.raises(ArgumentError, match=r"^ColorJitter: hue must be None \(no spread\), a number v >= 0 .* or a \(low, high\) pair of "
                                            r"numbers in \[-0.5, 0.5\], low <= high, got 0.7 \(center \+ v must be "
                                            r"<= 0.5\)$"):
        ColorJitter(hue=0.7)


def test_color_jitter_takes_numpy_numbers_and_refuses_ranges_of_other_lengths():
    from slipstream.errors import ArgumentError

    for number in (np.float32(0.4), np.float64(0.4), np.int64(0)):
        assert ColorJitter(brightness=number) == ColorJitter(brightness=float(number))
    with pytest.raises(ArgumentError, match=r"^ColorJitter: brightness must be None \(no spread\), a number v >= 0 \(meaning "
                                            r"\[1 - v, 1 \+ v\]\) or a \(low, high\) pair of numbers >= 0, "
                                            r"low <= high, got \[0.5, 1.5, 2\]$"):
        ColorJitter(brightness=[0.5, 1.5, 2])


def test_grayscale_and_solarize():
    out, keys = run(RandomGrayscale(p=0.5))
    changed = 0
    for image, result, key in zip(IMAGES, out, keys):
        if rnd.uniform(key, rnd.draw_number("apply")) < 0.5:
            expected = gray(torch.from_numpy(image)).numpy()
            assert (result == expected[..., None]).all()
            changed += 1
        else:
            np.testing.assert_array_equal(result, image)
    assert 0 < changed < len(IMAGES)
    out, keys = run(RandomSolarize(100, p=1.0))
    np.testing.assert_array_equal(out, np.where(IMAGES >= 100, 255 - IMAGES, IMAGES))


@pytest.mark.parametrize("threshold", [0, 0.5, 127.5, 128, 254.5, 255])
def test_solarize_inverts_exactly_the_values_at_or_above_the_threshold(threshold):
    levels = np.arange(256, dtype=np.uint8).reshape(1, 16, 16, 1).repeat(3, -1)
    out, _ = run(RandomSolarize(threshold, p=1.0), levels)
    np.testing.assert_array_equal(out[0], np.where(levels[0] >= threshold, 255 - levels[0], levels[0]))


@pytest.mark.parametrize(("threshold", "p"), [(-1, 0.5), (256, 0.5), (300.0, 0.5), (math.nan, 0.5), ("128", 0.5),
                                              (128, 1.5), (128, -0.5)])
def test_solarize_refuses_thresholds_and_probabilities_out_of_range(threshold, p):
    from slipstream.errors import ArgumentError

    what = r"^RandomSolarize: p must be a number in \[0, 1\], got " if threshold == 128 else \
        r"^RandomSolarize: threshold must be a number in \[0, 255\], got "
    with pytest.raises(ArgumentError, match=what):
        RandomSolarize(threshold, p)


@pytest.mark.parametrize(("make", "match"), [
    (lambda: RandomGrayscale(p=1.5), r"^RandomGrayscale: p must be a number in \[0, 1\], got 1.5$"),
    (lambda: RandomGrayscale(p="0.5"), r"^RandomGrayscale: p must be a number in \[0, 1\], got '0.5'$"),
    (lambda: RandomErasing(p=2), r"p must be a number in \[0, 1\], got 2"),
    (lambda: RandomErasing(scale=(0.5, 1.5)), r"RandomErasing: scale must be a \(low, high\) pair of numbers in "
                                              r"\[0, 1\], low <= high, got \(0.5, 1.5\)"),
    (lambda: RandomErasing(scale=(0.4, 0.1)), r"RandomErasing: scale must be a \(low, high\) pair .* \(low > high\)"),
    (lambda: RandomErasing(scale=(-0.1, 0.1)), r"RandomErasing: scale must be a \(low, high\) pair of numbers in"),
    (lambda: RandomErasing(ratio=(0, 3)), r"RandomErasing: ratio must be a \(low, high\) pair of numbers > 0, "
                                          r"low <= high, got \(0, 3\)"),
    (lambda: RandomErasing(ratio=(3, 0.3)), r"RandomErasing: ratio must be a \(low, high\) pair .* \(low > high\)"),
    (lambda: RandomErasing(value=(1, "2", 3)), r"RandomErasing: value must be None, a number, one number per channel "
                                               r"or `\"random\"`, got \(1, '2', 3\)"),
    (lambda: Cutout(size=-4), r"^Cutout: size must be an int in \[0, 65536\], got -4$"),
    (lambda: Cutout(8, fill=300), r"^Cutout: fill must be a number in \[0, 255\] or 3 numbers in \[0, 255\], "
                                  r"got 300$"),
    (lambda: RandomTranslate(padding=-3), r"^RandomTranslate: padding must be an int in \[0, 65536\], got -3$"),
    (lambda: RandomTranslate(3, fill=(0, -1, 0)), r"^RandomTranslate: fill must be a number in \[0, 255\] or 3 "
                                                  r"numbers in \[0, 255\], got \(0, -1, 0\)$"),
    (lambda: GaussianBlur(3, sigma=(2, 0.1)), r"^GaussianBlur: sigma must be a number s > 0 \(meaning \(s, s\)\) or a "
                                              r"\(low, high\) pair of numbers > 0, low <= high, got \(2, 0.1\) "
                                              r"\(low > high\)$"),
    (lambda: GaussianBlur(4), r"^GaussianBlur: kernel_size must be an odd int in \[1, 1023\], got 4$"),
])
def test_wrong_arguments_are_refused(make, match):
    from slipstream.errors import ArgumentError

    with pytest.raises(ArgumentError, match=match):
        make()


@pytest.mark.parametrize("value", [300, -1, (0, 0, 256)])
def test_random_erasing_refuses_uint8_values_out_of_range(value):
    from slipstream.errors import PipelineError

    with pytest.raises(PipelineError, match=r"RandomErasing's value on uint8 images must be a number or one number "
                                            r"per channel, each in \[0, 255\]"):
        Pipeline([ArraySource(IMAGES), RandomErasing(p=1.0, value=value)]).compile(4)


@pytest.mark.parametrize("channels", [1, 4])
def test_grayscale_refuses_images_that_are_not_rgb(channels):
    from slipstream.errors import PipelineError

    images = np.repeat(IMAGES[..., :1], channels, axis=-1)
    with pytest.raises(PipelineError, match=f"RandomGrayscale takes RGB images \\(3 channels\\), got {channels} "
                                            "channels"):
        Pipeline([ArraySource(images), RandomGrayscale(p=1.0)]).compile(4)


def test_gaussian_blur_matches_a_reflect_padded_convolution():
    out, keys = run(GaussianBlur(5, sigma=(0.5, 2.0)))
    for image, result, key in zip(IMAGES, out, keys):
        sigma = rnd.uniform_range(key, rnd.draw_number("sigma"), 0.5, 2.0)
        t = torch.arange(-2, 3, dtype=torch.float64)
        kernel = torch.exp(-0.5 * (t / sigma) ** 2)
        kernel = (kernel / kernel.sum()).float()
        img = torch.from_numpy(image).permute(2, 0, 1)[:, None].float()
        padded = torch.nn.functional.pad(img, (2, 2, 2, 2), mode="reflect")
        blurred = torch.nn.functional.conv2d(padded, kernel.view(1, 1, 1, 5))
        blurred = torch.nn.functional.conv2d(blurred, kernel.view(1, 1, 5, 1))
        expected = blurred.round().clamp(0, 255)[:, 0].permute(1, 2, 0).to(torch.uint8).numpy()
        assert np.abs(result.astype(int) - expected).max() <= 1


def test_random_erasing_and_cutout():
    out, keys = run(RandomErasing(p=1.0, value=(1, 2, 3)))
    for image, result in zip(IMAGES, out):
        erased = (result != image).any(-1)
        fraction = erased.mean()
        # at most a third of the area, but each side is rounded (as torchvision rounds it): up to half a pixel
        # more on each, (h + 1/2)(w + 1/2) <= h w + (H + W) / 2 + 1/4
        height, width = image.shape[:2]
        assert 0 < fraction <= 0.33 + ((height + width) / 2 + 0.25) / (height * width)
        rows, cols = np.nonzero(erased)
        assert (result[rows.min():rows.max() + 1, cols.min():cols.max() + 1] == (1, 2, 3)).all()  # one rectangle
    out, keys = run(Cutout(8, fill=255))
    for result, key in zip(out, keys):
        cy = rnd.integers(key, rnd.draw_number("center_y"), 0, 20)
        cx = rnd.integers(key, rnd.draw_number("center_x"), 0, 28)
        top, left = max(0, cy - 4), max(0, cx - 4)
        assert (result[top:min(20, cy + 4), left:min(28, cx + 4)] == 255).all()


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_random_erasing_fills_zero_after_normalization_wherever_it_stands(dtype):
    """torchvision's recipes erase after normalizing, with 0: the default
    fill is that zero after Normalize, and before it the colour Normalize
    turns into zero (within half a level)."""
    from slipstream.ops import Normalize

    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)

    def outputs(*ops):
        return np.array(Pipeline([ArraySource(IMAGES), *ops]).compile(len(IMAGES), seed=SEED)(
            np.arange(len(IMAGES)))).astype(np.float64)

    plain = outputs(Normalize(mean, std, dtype))
    for ops, tolerance in (([Normalize(mean, std, dtype), RandomErasing(p=1.0)], 0.0),
                           ([RandomErasing(p=1.0), Normalize(mean, std, dtype)], 0.5 / 255 / min(std) + 2e-3)):
        result = outputs(*ops)
        erased = (result != plain).any(0 if result.ndim == 3 else 1)
        assert erased.any(axis=(1, 2)).all()  # every sample lost a rectangle
        assert np.abs(np.moveaxis(result, 1, -1)[erased]).max() <= tolerance
    painted = outputs(Normalize(mean, std, dtype), RandomErasing(p=1.0, value=(1.5, -2.0, 0.25)))
    erased = (painted != plain).any(1)
    assert np.array_equal(np.moveaxis(painted, 1, -1)[erased], np.tile([1.5, -2.0, 0.25], (int(erased.sum()), 1)))
    black = run(RandomErasing(p=1.0))[0]  # no Normalize after it: black, as before
    assert ((black == 0).all(-1) & (IMAGES != 0).any(-1)).any()


def test_random_erasing_fills_one_value_per_channel_and_refuses_other_counts():
    from slipstream.errors import PipelineError

    rgba = np.concatenate([IMAGES, np.full(IMAGES.shape[:3] + (1,), 200, np.uint8)], -1)
    out, _ = run(RandomErasing(p=1.0, value=(1, 2, 3, 4)), rgba)
    erased = (out != rgba).any(-1)
    assert erased.any(axis=(1, 2)).all()
    assert (out[erased] == (1, 2, 3, 4)).all()
    with pytest.raises(PipelineError, match=r"RandomErasing's value has 2 numbers for images of 3 channels: give one "
                                            r"number, or one per channel \(3\)"):
        Pipeline([ArraySource(IMAGES), RandomErasing(p=1.0, value=(1, 2))]).compile(4)


def test_random_erasing_refuses_what_it_cannot_erase():
    from slipstream.errors import PipelineError

    with pytest.raises(PipelineError, match=r"RandomErasing takes \(height, width, channels\) uint8 images or the "
                                            r"\(channels, height, width\) float samples of Normalize, got \(20, 28\) "):
        Pipeline([ArraySource(IMAGES[..., 0]), RandomErasing()]).compile(4)


def test_translate_and_flips():
    out, keys = run(RandomTranslate(3, fill=0))
    for image, result, key in zip(IMAGES, out, keys):
        dy = rnd.integers(key, rnd.draw_number("shift_y"), -3, 4)
        dx = rnd.integers(key, rnd.draw_number("shift_x"), -3, 4)
        padded = np.zeros((26, 34, 3), np.uint8)
        padded[3:23, 3:31] = image
        np.testing.assert_array_equal(result, padded[3 + dy:23 + dy, 3 + dx:31 + dx])
    for op, flipped in ((RandomHorizontalFlip(1.0), IMAGES[:, :, ::-1]), (RandomVerticalFlip(1.0), IMAGES[:, ::-1])):
        np.testing.assert_array_equal(run(op)[0], flipped)
    np.testing.assert_array_equal(run(RandomVerticalFlip(0.0))[0], IMAGES)
