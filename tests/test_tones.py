"""The tone kernels of slipstream.ops.tones against Pillow's own output
(``ImageOps``, ``ImageEnhance``) on real photos at several magnitudes, their
edge cases, and their operations inside a compiled pipeline and a loader.

Every kernel is bit-exact: each comparison asserts a maximum difference of 0.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from PIL import Image, ImageEnhance, ImageOps

import slipstream as ss
from slipstream.compiler import ArraySource, Pipeline
from slipstream.compiler import random as rnd
from slipstream.ops import (RandomAdjustSharpness, RandomAutocontrast, RandomEqualize, RandomInvert,
                            RandomPosterize)
from slipstream.ops import tones

import real_photos

CHOSEN = ["coffee", "chelsea", "rocket", "camera"]  # the last is grayscale
SIZE = (64, 48)  # (width, height) of the test crops: small, so that the tests stay fast
FACTORS = [0.0, 0.01, 0.1, 0.5, 1.0, 1.5, 1.99, 3.0, -0.5]
SEED = 5


def load_photos() -> list[np.ndarray]:
    """(48, 64, 3) uint8 crops of a few real photos (one of them grayscale, as RGB)."""
    return [real_photos.pixels(name, SIZE, "RGB") for name in CHOSEN]


IMAGES = load_photos()


def kernel_output(kernel, image: np.ndarray, *args, in_place: bool = False) -> np.ndarray:
    """``kernel`` on a copy of ``image``, into a new array or in place."""
    src = np.ascontiguousarray(image).copy()
    if in_place:
        kernel(src, src, *args)
        return src
    dst = np.full_like(src, 77)  # not zeros: a value the kernel fails to write shows
    kernel(src, dst, *args)
    np.testing.assert_array_equal(src, image)  # the source is left alone
    return dst


def pillow(function, image: np.ndarray) -> np.ndarray:
    """``function`` applied to ``image`` as a Pillow image (L for one channel), back as (h, w, c)."""
    one = image.shape[2] == 1
    out = np.asarray(function(Image.fromarray(np.ascontiguousarray(image[..., 0] if one else image))))
    return out[..., None] if one else out


ENHANCERS = {"brightness": ImageEnhance.Brightness, "color": ImageEnhance.Color, "contrast": ImageEnhance.Contrast,
             "sharpness": ImageEnhance.Sharpness}


def assert_exact(ours: np.ndarray, theirs: np.ndarray) -> None:
    assert ours.shape == theirs.shape and ours.dtype == np.uint8
    if not np.array_equal(ours, theirs):
        difference = np.abs(ours.astype(int) - theirs.astype(int))
        raise AssertionError(f"{np.count_nonzero(difference)} values differ, by up to {difference.max()}")


# ---------------------------------------------------------------- ImageOps


@pytest.mark.parametrize("bits", range(1, 9))
def test_posterize_equals_pillow(bits):
    for image in IMAGES:
        expected = pillow(lambda im: ImageOps.posterize(im, bits), image)
        assert_exact(kernel_output(tones.posterize, image, bits), expected)
        assert_exact(kernel_output(tones.posterize, image, bits, in_place=True), expected)


def test_posterize_to_no_bits_gives_black():
    # Pillow 13 refuses 0 bits; torchvision's tensor posterize (and older Pillow) give black
    assert not kernel_output(tones.posterize, IMAGES[0], 0).any()


@pytest.mark.parametrize("threshold", [-3, 0, 1, 64.5, 128, 200.01, 255, 256, 300.0, float("nan")])
def test_solarize_equals_pillow(threshold):
    for image in IMAGES:
        expected = pillow(lambda im: ImageOps.solarize(im, threshold), image)
        assert_exact(kernel_output(tones.solarize, image, threshold), expected)
        assert_exact(kernel_output(tones.solarize, image, threshold, in_place=True), expected)


@pytest.mark.parametrize(("name", "reference"), [("invert", ImageOps.invert), ("autocontrast", ImageOps.autocontrast),
                                                 ("equalize", ImageOps.equalize)])
def test_histogram_and_inversion_kernels_equal_pillow(name, reference):
    kernel = getattr(tones, name)
    for image in [*IMAGES, IMAGES[3][..., :1], IMAGES[0][5:9, 7:10]]:  # RGB, one channel (L), a 4 x 3 patch
        expected = pillow(reference, image)
        assert_exact(kernel_output(kernel, image), expected)
        assert_exact(kernel_output(kernel, image, in_place=True), expected)


def test_autocontrast_stretches_a_dull_photo_fully():
    dull = (IMAGES[1] // 4 + 100).astype(np.uint8)  # values 100..163
    out = kernel_output(tones.autocontrast, dull)
    assert_exact(out, pillow(ImageOps.autocontrast, dull))
    assert out.reshape(-1, 3).min(0).tolist() == [0, 0, 0] and out.reshape(-1, 3).max(0).tolist() == [255, 255, 255]


@pytest.mark.parametrize("name", ["autocontrast", "equalize"])
def test_a_flat_image_is_left_as_it_is(name):
    flat = np.full((6, 5, 3), (30, 140, 250), np.uint8)
    for image in (flat, flat[..., :1], flat[:1, :1]):
        assert_exact(kernel_output(getattr(tones, name), image), image)
        assert_exact(kernel_output(getattr(tones, name), image), pillow(getattr(ImageOps, name), image))


def test_equalize_clips_table_entries_above_255_as_pillow_does():
    # 300 pixels of 10 and 5 of 200: step = 300 // 255 = 1, and 200 maps to (0 + 300) // 1 = 300, clipped to 255
    image = np.full((305, 1, 1), 10, np.uint8)
    image[-5:] = 200
    out = kernel_output(tones.equalize, image)
    assert sorted(np.unique(out).tolist()) == [0, 255]
    assert_exact(out, pillow(ImageOps.equalize, image))


def test_equalize_with_one_channel_flat_and_others_not():
    image = IMAGES[2].copy()
    image[..., 1] = 99
    out = kernel_output(tones.equalize, image)
    assert (out[..., 1] == 99).all() and not np.array_equal(out[..., 0], image[..., 0])
    assert_exact(out, pillow(ImageOps.equalize, image))


# ---------------------------------------------------------------- ImageEnhance


@pytest.mark.parametrize("factor", FACTORS)
@pytest.mark.parametrize("name", sorted(ENHANCERS))
def test_enhance_equals_pillow(name, factor):
    kernel, enhancer = getattr(tones, name), ENHANCERS[name]
    for image in IMAGES:
        expected = pillow(lambda im: enhancer(im).enhance(factor), image)
        assert_exact(kernel_output(kernel, image, factor), expected)
        if name != "sharpness":
            assert_exact(kernel_output(kernel, image, factor, in_place=True), expected)


@pytest.mark.parametrize("factor", [0.0, 0.5, 1.99])
@pytest.mark.parametrize("name", ["brightness", "color", "contrast", "sharpness"])
def test_enhance_of_a_one_channel_image_equals_pillow_on_l(name, factor):
    image = IMAGES[3][..., :1].copy()  # the grayscale photo
    expected = pillow(lambda im: ENHANCERS[name](im).enhance(factor), image)
    assert_exact(kernel_output(getattr(tones, name), image, factor), expected)


def test_enhance_takes_integer_factors_and_factors_beyond_float32_resolution():
    image = IMAGES[0]
    for factor in (0, 1, 2, 1.0000000001, 0.99999999):
        for name, enhancer in ENHANCERS.items():
            expected = pillow(lambda im: enhancer(im).enhance(factor), image)
            assert_exact(kernel_output(getattr(tones, name), image, factor), expected)


POLICY_FACTORS = sorted({1.0 + sign * float(m) for sign in (-1, 1) for stop, bins in ((0.99, 31), (0.9, 31), (0.9, 10))
                         for m in np.linspace(0.0, stop, bins, dtype=np.float32)})
"""1 - m and 1 + m for every magnitude bin m of torchvision's TrivialAugmentWide (0 to 0.99, 31 bins), RandAugment
(0 to 0.9, 31 bins) and AutoAugment (0 to 0.9, 10 bins), float32 values as its ``torch.linspace`` gives them."""


def test_brightness_of_every_value_at_the_policies_factors_equals_pillow():
    values = np.arange(256, dtype=np.uint8).reshape(16, 16, 1).repeat(3, axis=2)
    for factor in POLICY_FACTORS:
        expected = pillow(lambda im: ImageEnhance.Brightness(im).enhance(factor), values)
        assert_exact(kernel_output(tones.brightness, values, factor), expected)


def test_solarize_of_every_value_at_the_policies_thresholds_equals_pillow():
    values = np.arange(256, dtype=np.uint8).reshape(16, 16, 1)
    for threshold in {float(t) for bins in (31, 10) for t in np.linspace(255.0, 0.0, bins, dtype=np.float32)}:
        expected = pillow(lambda im: ImageOps.solarize(im, threshold), values)
        assert_exact(kernel_output(tones.solarize, values, threshold), expected)


def test_color_of_every_rgb_colour_equals_pillow():
    # all 2**24 colours, so every (gray, value) pair the blend can meet
    levels = np.arange(256, dtype=np.uint8)
    image = np.empty((256, 256, 256, 3), np.uint8)  # (red, green, blue) -> that colour, by broadcasting
    image[..., 0], image[..., 1], image[..., 2] = levels[:, None, None], levels[None, :, None], levels
    image = image.reshape(4096, 4096, 3)
    for factor in (0.1, 0.6, 1.99):  # interpolation and extrapolation
        expected = pillow(lambda im: ImageEnhance.Color(im).enhance(factor), image)
        assert_exact(kernel_output(tones.color, image, factor, in_place=True), expected)


def test_contrast_and_sharpness_of_noise_at_the_policies_factors_equal_pillow():
    rng = np.random.default_rng(3)
    for k, factor in enumerate(POLICY_FACTORS):
        low = int(rng.integers(0, 200))
        noise = rng.integers(low, low + int(rng.integers(1, 256 - low)) + 1, (24, 32, 3)).astype(np.uint8)
        for name in ("contrast", "sharpness"):
            expected = pillow(lambda im: ENHANCERS[name](im).enhance(factor), noise)
            assert_exact(kernel_output(getattr(tones, name), noise, factor), expected)


@pytest.mark.parametrize("shape", [(1, 1), (2, 2), (1, 7), (7, 2), (3, 3), (3, 5), (4, 3)])
def test_sharpness_of_tiny_images_equals_pillow(shape):
    image = np.ascontiguousarray(IMAGES[2][:shape[0], :shape[1]])
    for factor in (0.0, 0.5, 1.99, 4.0):
        expected = pillow(lambda im: ImageEnhance.Sharpness(im).enhance(factor), image)
        out = kernel_output(tones.sharpness, image, factor)
        assert_exact(out, expected)
        if min(shape) < 3:  # Pillow's filter copies an image smaller than its 3 x 3 kernel
            assert_exact(out, image)


def test_sharpness_refuses_to_work_in_place():
    image = IMAGES[0].copy()
    with pytest.raises(ValueError, match="sharpness reads the neighbours of each pixel: dst must be another array"):
        tones.sharpness(image, image, 1.5)
    np.testing.assert_array_equal(image, IMAGES[0])


def test_sharpness_keeps_the_outermost_rows_and_columns():
    image = IMAGES[1]
    out = kernel_output(tones.sharpness, image, 0.0)
    for edge in (np.s_[0], np.s_[-1], np.s_[:, 0], np.s_[:, -1]):
        np.testing.assert_array_equal(out[edge], image[edge])
    assert not np.array_equal(out[1:-1, 1:-1], image[1:-1, 1:-1])


def test_color_refuses_images_of_two_or_four_channels():
    for channels in (2, 4):
        image = np.zeros((3, 3, channels), np.uint8)
        with pytest.raises(ValueError, match="color takes RGB images"):
            tones.color(image, image.copy(), 0.5)
    with pytest.raises(ValueError, match="contrast takes RGB or one-channel images"):
        tones.contrast(np.zeros((3, 3, 4), np.uint8), np.zeros((3, 3, 4), np.uint8), 0.5)


# ---------------------------------------------------------------- operations

OPERATIONS = [  # operation with p = 1, and what it does to an image
    (lambda p: RandomPosterize(3, p=p), lambda image: kernel_output(tones.posterize, image, 3)),
    (lambda p: RandomEqualize(p=p), lambda image: kernel_output(tones.equalize, image)),
    (lambda p: RandomAutocontrast(p=p), lambda image: kernel_output(tones.autocontrast, image)),
    (lambda p: RandomAdjustSharpness(1.8, p=p), lambda image: kernel_output(tones.sharpness, image, 1.8)),
    (lambda p: RandomInvert(p=p), lambda image: kernel_output(tones.invert, image)),
]
NAMES = ["RandomPosterize", "RandomEqualize", "RandomAutocontrast", "RandomAdjustSharpness", "RandomInvert"]
BATCH = np.stack([(IMAGES[k % len(IMAGES)].astype(np.uint16) * 3 // 4 + 8 * (k % 5)).astype(np.uint8)
                  for k in range(12)])
"""12 samples from the photos, each with its values in a narrower range (so that autocontrast changes every one)."""


PROBABILITIES = {"always": 1.0, "never": 0.0, "half": 0.5}


@pytest.fixture(scope="module")
def pipeline() -> tuple[Pipeline, dict[str, np.ndarray]]:
    """One compiled pipeline holding every operation at each probability,
    an output ``"<operation> <always|never|half>"`` each (one compile
    instead of one per case), and its outputs for the whole batch."""
    compiled = Pipeline({f"{name} {when}": [ArraySource(BATCH), make(p)]
                         for name, (make, _) in zip(NAMES, OPERATIONS) for when, p in PROBABILITIES.items()})
    compiled = compiled.compile(len(BATCH), seed=SEED)
    return compiled, {name: np.array(out) for name, out in compiled(np.arange(len(BATCH))).items()}


@pytest.mark.parametrize("name", NAMES)
def test_operations_apply_with_probability_p_from_the_sample_key(pipeline, name):
    compiled, outputs = pipeline
    effect = OPERATIONS[NAMES.index(name)][1]
    for when, p in PROBABILITIES.items():
        stream = compiled.graph.pipelines[f"{name} {when}"][1].stream
        applied = 0
        for i, (image, result) in enumerate(zip(BATCH, outputs[f"{name} {when}"])):
            if rnd.uniform(np.uint64(rnd.sample_key(np.uint64(SEED), 0, i, stream)), rnd.draw_number("apply")) < p:
                assert_exact(result, effect(image))
                applied += 1
            else:
                assert_exact(result, image)
        assert applied in {"always": [len(BATCH)], "never": [0], "half": range(1, len(BATCH))}[when]


@pytest.fixture(scope="module")
def dataset(tmp_path_factory) -> Path:
    """The photo crops stored as raw pixels, 12 samples with labels."""
    path = tmp_path_factory.mktemp("tones") / "photos.slip"
    ss.write(path, {"image": BATCH, "label": np.arange(len(BATCH))},
             {"image": ss.RGBImageField("raw"), "label": ss.IntField()}, workers=0, verbose=False)
    return path


def epoch(path: Path, **options) -> dict[str, np.ndarray]:
    """The images of one epoch of a loader with a view of the stored photos
    per operation at p = 0.5, each in dataset order: all in one loader, so
    one compile."""
    views = {name: ss.View("image", [make(0.5)]) for name, (make, _) in zip(NAMES, OPERATIONS)}
    images = {view: np.empty_like(BATCH) for view in views}
    with ss.Loader(path, 4, {"image": None, "label": [], **views}, as_dict=True, verbose=False,
                   **options) as loader:
        for batch in loader:
            for view, out in images.items():
                out[batch["label"].numpy()] = batch[view].numpy()
    return images


@pytest.fixture(scope="module")
def epochs(dataset) -> list[dict[str, np.ndarray]]:
    """Three epochs of the same random order, on one, two and one threads."""
    return [epoch(dataset, order=ss.Order("random", seed=SEED), num_threads=threads) for threads in (1, 2, 1)]


@pytest.mark.parametrize("name", NAMES)
def test_operations_in_a_loader_give_the_kernels_pixels(epochs, name):
    effect = OPERATIONS[NAMES.index(name)][1]
    halves = [images[name] for images in epochs]
    assert_exact(halves[0], halves[1])  # the same draws whatever the thread count, run after run
    assert_exact(halves[0], halves[2])
    changed = [not np.array_equal(result, image) for image, result in zip(BATCH, halves[0])]
    assert 0 < sum(changed) < len(BATCH)
    for image, result, was in zip(BATCH, halves[0], changed):
        assert_exact(result, effect(image) if was else image)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: RandomPosterize(9), r"^RandomPosterize: bits must be an int in \[0, 8\], got 9$"),
    (lambda: RandomPosterize(4.0), r"^RandomPosterize: bits must be an int in \[0, 8\], got 4\.0$"),
    (lambda: RandomPosterize(-1), r"^RandomPosterize: bits must be an int in \[0, 8\], got -1$"),
    (lambda: RandomPosterize(True), r"^RandomPosterize: bits must be an int in \[0, 8\], got True$"),
    (lambda: RandomPosterize(4, p=1.5), r"^RandomPosterize: p must be a number in \[0, 1\], got 1\.5$"),
    (lambda: RandomEqualize(p=-0.1), r"^RandomEqualize: p must be a number in \[0, 1\], got -0\.1$"),
    (lambda: RandomAutocontrast(p="often"), r"^RandomAutocontrast: p must be a number in \[0, 1\], got 'often'$"),
    (lambda: RandomInvert(p=None), r"^RandomInvert: p must be a number in \[0, 1\], got None$"),
    (lambda: RandomAdjustSharpness(-1), r"^RandomAdjustSharpness: sharpness_factor must be a number >= 0, got -1$"),
    (lambda: RandomAdjustSharpness(float("nan")),
     r"^RandomAdjustSharpness: sharpness_factor must be a number >= 0, got nan$"),
    (lambda: RandomAdjustSharpness("2"), r"^RandomAdjustSharpness: sharpness_factor must be a number >= 0, got '2'$"),
])
def test_arguments_are_checked_when_the_operation_is_made(call, message):
    with pytest.raises(ss.ArgumentError, match=message):
        call()


def test_bits_factors_and_probabilities_are_values():
    """Changing ``bits``, ``sharpness_factor`` or ``p`` compiles nothing:
    the fingerprint (the compile cache key) leaves them out."""
    for first, second in ((RandomPosterize(3), RandomPosterize(7, p=0.9)), (RandomInvert(), RandomInvert(0.2)),
                          (RandomAdjustSharpness(1.8), RandomAdjustSharpness(0.0, p=1.0))):
        assert first.fingerprint() == second.fingerprint()
        assert first.runtime_values() != second.runtime_values()


@pytest.mark.parametrize("make", [lambda: RandomInvert(1.0), lambda: RandomAdjustSharpness(2.0)], ids=["in place",
                                                                                                     "allocating"])
def test_operations_refuse_what_is_not_a_uint8_image(make):
    values = np.zeros((4, 6, 6, 3), np.float32)
    with pytest.raises(ss.PipelineError, match=r"takes \(height, width, channels\) uint8 images, got \(6, 6, 3\) "
                                               r"float32"):
        Pipeline([ArraySource(values), make()]).compile(4)
