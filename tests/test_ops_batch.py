"""Torch batch augmentations: their arithmetic, per-image parameters that
can be replayed on a second view, and their use inside a loader pipeline."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import slipstream as ss
from slipstream.errors import ArgumentError
from slipstream.ops import ToTensor
from slipstream.ops.batch import (BatchColorJitter, BatchGaussianBlur, BatchRandomErasing, BatchRandomGrayscale,
                                  BatchRandomSolarize)
from jpeg_corpus import picture

BATCH = torch.from_numpy(np.stack([picture(16, 20, seed=k) for k in range(12)])).permute(0, 3, 1, 2).float() / 255


def generator(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


EVERY_OP = [
    lambda g: BatchColorJitter(0.4, 0.4, 0.4, 0.1, generator=g), lambda g: BatchRandomGrayscale(0.5, generator=g),
    lambda g: BatchRandomSolarize(0.5, 0.5, generator=g), lambda g: BatchGaussianBlur(5, generator=g),
    lambda g: BatchRandomErasing(1.0, generator=g)]


@pytest.mark.parametrize("make", EVERY_OP)
def test_a_batch_keeps_its_dtype(make):
    for dtype in (torch.float16, torch.float32, torch.uint8):
        batch = (BATCH * 255).round().to(dtype) if dtype == torch.uint8 else BATCH.to(dtype)
        assert make(generator()).forward(batch).dtype == dtype


@pytest.mark.parametrize("make", EVERY_OP)
def test_parameters_replay_on_a_second_view_and_forward_is_sample_then_apply(make):
    augmentation = make(generator(1))
    params = augmentation.sample(BATCH)
    first, second = augmentation.apply(BATCH, params), augmentation.apply(BATCH.clone(), params)
    torch.testing.assert_close(first, second, rtol=0, atol=0)
    assert first.shape == BATCH.shape and not torch.equal(first, BATCH)
    torch.testing.assert_close(make(generator(1))(BATCH), first, rtol=0, atol=0)
    as_uint8 = augmentation.apply((BATCH * 255).round().to(torch.uint8), params)
    assert as_uint8.dtype == torch.uint8 and (as_uint8.float() / 255 - first).abs().max() <= 2 / 255 + 1e-6


def test_color_factors_and_grayscale_arithmetic():
    jitter = BatchColorJitter(brightness=0.5)
    params = jitter.sample(BATCH)
    expected = (BATCH * params["brightness"].view(-1, 1, 1, 1)).clamp(0, 1)
    torch.testing.assert_close(jitter.apply(BATCH, params), expected)
    hue = BatchColorJitter(hue=0.25)
    shifted = hue(BATCH)
    torch.testing.assert_close(shifted.max(1).values, BATCH.max(1).values, atol=1e-5, rtol=0)  # value kept
    gray = BatchRandomGrayscale(1.0)(BATCH)
    luma = 0.2989 * BATCH[:, 0] + 0.587 * BATCH[:, 1] + 0.114 * BATCH[:, 2]
    torch.testing.assert_close(gray, luma.unsqueeze(1).expand_as(BATCH))


def test_blur_matches_per_image_convolution_and_erasing_boxes():
    blur = BatchGaussianBlur(3, sigma=(0.5, 1.5))
    params = blur.sample(BATCH)
    out = blur.apply(BATCH, params)
    for i in range(len(BATCH)):
        t = torch.arange(-1, 2, dtype=torch.float32)
        k = torch.exp(-0.5 * (t / params["sigma"][i]) ** 2)
        k = k / k.sum()
        img = torch.nn.functional.pad(BATCH[i:i + 1].transpose(0, 1), (1, 1, 1, 1), mode="reflect")
        ref = torch.nn.functional.conv2d(torch.nn.functional.conv2d(img, k.view(1, 1, 1, 3)), k.view(1, 1, 3, 1))
        torch.testing.assert_close(out[i], ref.transpose(0, 1)[0], atol=1e-5, rtol=0)
    erase = BatchRandomErasing(1.0, value=0.25)
    params = erase.sample(BATCH)
    out = erase.apply(BATCH, params)
    for i, (top, left, h, w) in enumerate(params["box"].tolist()):
        assert (out[i, :, top:top + h, left:left + w] == 0.25).all()
        changed = (out[i] != BATCH[i]).any(0)
        assert changed.sum() <= h * w


@pytest.mark.parametrize("channels", [1, 4])
@pytest.mark.parametrize("make", [lambda: BatchRandomGrayscale(1.0), lambda: BatchColorJitter(0.4, 0.4, 0.4, 0.1)])
def test_colour_operations_refuse_batches_that_are_not_rgb(make, channels):
    batch = BATCH[:, :1].expand(-1, channels, -1, -1)
    augmentation = make()
    with pytest.raises(ArgumentError, match=rf"{type(augmentation).__name__} takes RGB batches \(3 channels\), got "
                                            rf"\(12, {channels}, 16, 20\)"):
        augmentation(batch)


@pytest.mark.parametrize(("make", "match"), [
    (lambda: BatchRandomGrayscale(p=2), r"p must be a number in \[0, 1\], got 2"),
    (lambda: BatchRandomSolarize(p=-1), r"p must be a number in \[0, 1\], got -1"),
    (lambda: BatchGaussianBlur(3, p=5), r"p must be a number in \[0, 1\], got 5"),
    (lambda: BatchGaussianBlur(3, sigma=(2, 0.1)), r"sigma must be a number or a \(low, high\) pair with 0 < low"),
    (lambda: BatchGaussianBlur(3, sigma=-1), r"sigma must be a number or a \(low, high\) pair"),
    (lambda: BatchRandomErasing(p=3), r"p must be a number in \[0, 1\], got 3"),
    (lambda: BatchRandomErasing(scale=(0.5, 0.1)), r"BatchRandomErasing: scale must be a pair satisfying 0 <= low <= "
                                                   r"high <= 1, got \(0.5, 0.1\)"),
    (lambda: BatchRandomErasing(ratio=(0, 3)), "BatchRandomErasing: ratio must be a pair satisfying 0 < low <= high"),
])
def test_wrong_arguments_are_refused(make, match):
    with pytest.raises(ArgumentError, match=match):
        make()


def test_color_jitter_takes_ranges_as_colorjitter_does():
    jitter = BatchColorJitter(brightness=(0.5, 0.75), hue=(-0.1, 0.2))
    params = jitter.sample(BATCH)
    assert ((params["brightness"] >= 0.5) & (params["brightness"] < 0.75)).all()
    assert ((params["hue"] >= -0.1) & (params["hue"] < 0.2)).all()
    brighter = BatchColorJitter(brightness=(0.5, 0.75))
    params = brighter.sample(BATCH)
    expected = (BATCH * params["brightness"].view(-1, 1, 1, 1)).clamp(0, 1)
    torch.testing.assert_close(brighter.apply(BATCH, params), expected)
    with pytest.raises(ArgumentError, match=r"hue range \(-0.6, 0.6\) is not valid"):
        BatchColorJitter(hue=0.6)


def test_erasing_writes_one_value_per_channel():
    erase = BatchRandomErasing(1.0, value=(0.1, 0.2, 0.3))
    params = erase.sample(BATCH)
    out = erase.apply(BATCH, params)
    for i, (top, left, h, w) in enumerate(params["box"].tolist()):
        box = out[i, :, top:top + h, left:left + w]
        assert torch.equal(box, torch.tensor([0.1, 0.2, 0.3]).view(3, 1, 1).expand_as(box))
    with pytest.raises(ArgumentError, match=r"BatchRandomErasing: value has 2 numbers for images of 3 channels"):
        BatchRandomErasing(1.0, value=(0.1, 0.2))(BATCH)


def test_blur_refuses_a_kernel_wider_than_it_can_reflect():
    with pytest.raises(ArgumentError, match=r"BatchGaussianBlur: kernel_size 9 needs images of at least 5x5 pixels "
                                            r"\(kernel_size // 2 \+ 1 on each side\), got 4x4"):
        BatchGaussianBlur(9)(BATCH[:, :, :4, :4])
    assert BatchGaussianBlur(9)(BATCH[:, :, :5, :5]).shape == (12, 3, 5, 5)


def test_erasing_boxes_of_a_float16_batch_are_those_of_float32():
    # float16's largest value is 65504: a box of 30% of a 512x512 image has more pixels than that
    erase = BatchRandomErasing(1.0, scale=(0.3, 0.33))
    boxes = {}
    for dtype in (torch.float32, torch.float16):
        batch = torch.ones(8, 3, 512, 512, dtype=dtype)
        params = erase.sample(batch, keys=np.arange(8, dtype=np.uint64) * 7919)
        boxes[dtype] = params["box"]
        erased = (erase.apply(batch, params)[:, 0] == 0).double().mean(dim=(1, 2))
        assert (erased < 0.4).all() and (erased > 0.25).all(), (dtype, erased.tolist())
    torch.testing.assert_close(boxes[torch.float16], boxes[torch.float32], rtol=0, atol=0)


def test_batch_augmentations_run_as_torch_stages_of_a_loader(tmp_path):
    images = np.stack([picture(16, 16, seed=k) for k in range(8)])
    path = tmp_path / "b.slip"
    ss.write(path, {"image": images, "label": np.arange(8)}, {"image": ss.RGBImageField(write_mode="raw"),
                                                              "label": ss.IntField()}, workers=0)
    loader = ss.Loader(path, 8, {"image": [ToTensor(), BatchRandomSolarize(0.5, p=1.0)]}, order="sequential")
    assert [s.jit for s in loader.compiled.sources] == [True, False]
    batch, labels = next(iter(loader))
    x = torch.from_numpy(images).permute(0, 3, 1, 2).float() / 255
    torch.testing.assert_close(batch, torch.where(x >= 0.5, 1 - x, x))


def _resume_dataset(tmp_path):
    images = np.stack([picture(16, 16, seed=k) for k in range(40)])
    path = tmp_path / "resume.slip"
    ss.write(path, {"image": images, "label": np.arange(40)}, {"image": ss.RGBImageField(write_mode="raw"),
                                                               "label": ss.IntField()}, workers=0, verbose=False)
    return path


def _augmented():
    return {"image": [ToTensor(), BatchColorJitter(0.4, 0.4, 0.4, 0.1), BatchRandomErasing(0.5),
                      BatchGaussianBlur(3, p=0.5), BatchRandomGrayscale(0.3)]}


def test_batch_augmentations_in_a_loader_draw_from_its_keys_and_resume_exactly(tmp_path):
    """The draws depend on the seed, the epoch and the samples only: not on
    torch's global generator, and a loader resumed mid-epoch from its
    state_dict() repeats the remaining batches bit for bit."""
    path = _resume_dataset(tmp_path)
    loader = ss.Loader(path, 8, _augmented(), order=ss.Order("random", seed=3))
    for _ in loader:  # epoch 0
        pass
    torch.manual_seed(1)
    iterator = iter(loader)  # epoch 1
    next(iterator), next(iterator)
    state = loader.state_dict()
    rest = [(images.clone(), labels.clone()) for images, labels in iterator]
    torch.manual_seed(2)  # another global generator state: the draws must not depend on it
    fresh = ss.Loader(path, 8, _augmented(), order=ss.Order("random", seed=3))
    fresh.load_state_dict(state)
    resumed = [(images.clone(), labels.clone()) for images, labels in fresh]
    assert len(resumed) == len(rest) == 3
    for (a, la), (b, lb) in zip(rest, resumed):
        torch.testing.assert_close(la, lb, rtol=0, atol=0)
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    plain = ss.Loader(path, 8, {"image": [ToTensor()]}, order=ss.Order("random", seed=3))
    augmented = ss.Loader(path, 8, _augmented(), order=ss.Order("random", seed=3))
    assert not torch.equal(next(iter(plain))[0], next(iter(augmented))[0])  # the augmentations act
    other_seed = next(iter(ss.Loader(path, 8, _augmented(), order=ss.Order("sequential", seed=4))))[0]
    same_seed = next(iter(ss.Loader(path, 8, _augmented(), order=ss.Order("sequential", seed=3))))[0]
    assert not torch.equal(other_seed, same_seed)


def test_a_batch_augmentation_draws_each_images_parameters_from_that_images_key():
    """Two batches sharing a sample give it the same per-image parameters:
    the k-th draw of its own key, whatever the other samples are."""
    from slipstream.compiler import random as rnd

    jitter = BatchColorJitter(0.4, 0.4, 0.4, 0.1)
    keys = rnd.batch_keys(np.uint64(5), 0, np.arange(12), 12, 10)
    params = jitter.sample(BATCH, keys)
    shifted = jitter.sample(BATCH[3:], keys[3:])
    for name in ("brightness", "contrast", "saturation", "hue"):
        torch.testing.assert_close(params[name][3:], shifted[name], rtol=0, atol=0)
    expected = 0.6 + 0.8 * torch.tensor([rnd.uniform(key, rnd.draw_number("brightness")) for key in keys]).float()
    torch.testing.assert_close(params["brightness"], expected)
