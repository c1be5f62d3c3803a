"""timm's and DeiT's training recipes: the presets' pipelines, their
batches, RandomErasing's per-pixel noise (timm's ``mode="pixel"``) and the
bicubic crop."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from jpeg_corpus import make_sample, picture
from PIL import Image

import slipstream as ss
from slipstream.ops import (ColorJitter, Normalize, RandomErasing, RandomHorizontalFlip, RandomResizedCrop,
                            TimmRandAugment, presets)
from slipstream.ops.mixing import MixUpOrCutMix


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    path = tmp_path_factory.mktemp("timm") / "photos.slip"
    samples = [(make_sample(96 + 4 * (k % 5), 120, seed=k).data, k % 10) for k in range(24)]
    ss.write(path, samples, {"image": ss.RGBImageField(), "label": ss.IntField()}, workers=0, verbose=False)
    return path


def test_timm_train_is_timms_transform():
    pipelines = presets.timm_train("rand-m9-mstd0.5-inc1", 224, re_prob=0.25)
    crop, flip, policy, normalize, erase = pipelines["image"]
    assert crop == RandomResizedCrop(224, interpolation="bicubic") and flip == RandomHorizontalFlip(0.5)
    assert policy == TimmRandAugment("rand-m9-mstd0.5-inc1", interpolation="bilinear", fill=(124, 116, 104))
    assert isinstance(normalize, Normalize) and normalize.dtype == np.float32
    assert erase == RandomErasing(p=0.25, scale=(0.02, 1 / 3), ratio=(0.3, 1 / 0.3), value="random")
    assert "label" not in pipelines
    # Without a policy timm jitters colour instead; 'const' erasing is zero after normalization.
    plain = presets.timm_train(None, 160, re_prob=0.1, re_mode="const")["image"]
    assert plain[2] == ColorJitter(0.4, 0.4, 0.4) and plain[-1].value is None


def test_deit_train_is_deits_recipe():
    pipelines = presets.deit_train(num_classes=1000)
    image = pipelines["image"]
    assert image[0].interpolation == "bicubic" and image[4].p == 0.25 and image[4].value == "random"
    assert image[-1] == MixUpOrCutMix(0.8, 1.0, switch_prob=0.5, pairing="flip")  # timm's x.flip(0)
    assert pipelines["label"][0].op.num_classes == 1000


@pytest.mark.parametrize(("call", "message"), [
    (lambda: presets.timm_train(re_mode="rand", re_prob=0.2), "timm's 'rand'"),
    (lambda: presets.timm_train("augmix-m5-w4-d2"), "must be a timm RandAugment string"),
    (lambda: presets.timm_train(mixup=0.8), "timm_train mixes labels .*give num_classes"),
    (lambda: presets.timm_train(interpolation="nearest"), "interpolation must be one of"),
])
def test_what_timm_train_does_not_offer_is_refused(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_deit_batches(photos):
    pipelines = presets.deit_train(num_classes=10, size=64)
    order = ss.Order("random", seed=1, repeats=3, selected_round=0)  # DeiT's RASampler on a tiny dataset
    loader = ss.Loader(photos, 8, pipelines, order=order)
    batches = [(images.clone(), labels.clone()) for images, labels in loader]
    assert len(batches) == 3  # the sampler's epoch: as many draws as samples
    for images, labels in batches:
        assert images.shape == (8, 3, 64, 64) and images.dtype == torch.float32
        assert labels.shape == (8, 10) and torch.allclose(labels.sum(1), torch.ones(8))
    again = [(images.clone(), labels.clone()) for images, labels in
             ss.Loader(photos, 8, pipelines, order=order, num_threads=1)]
    assert all(torch.equal(a, c) and torch.equal(b, d) for (a, b), (c, d) in zip(batches, again))


def erased(path, dtype, value="random"):
    pipelines = {"image": [RandomResizedCrop(48), Normalize((0.5,) * 3, (0.25,) * 3, dtype),
                           RandomErasing(p=1.0, scale=(0.2, 0.3), value=value)]}
    plain = {"image": [RandomResizedCrop(48), Normalize((0.5,) * 3, (0.25,) * 3, dtype)]}
    order = ss.Order("sequential", seed=3)
    return ([images.clone() for images, _ in ss.Loader(path, 12, pipelines, order=order)],
            [images.clone() for images, _ in ss.Loader(path, 12, plain, order=order)])


def test_pixel_erasing_fills_the_box_with_standard_normal_draws(photos):
    got, plain = erased(photos, np.float32)
    changed = torch.cat([(a != b) for a, b in zip(got, plain)])
    values = torch.cat([a[a != b] for a, b in zip(got, plain)])
    # Each erased box covers 20-30% of the sample, in every channel, the same box in the three.
    share = changed.float().mean(dim=(1, 2, 3))
    assert ((share > 0.18) & (share < 0.31)).all(), share
    assert torch.equal(changed[:, 0], changed[:, 1]) and torch.equal(changed[:, 1], changed[:, 2])
    assert abs(values.mean()) < 0.02 and abs(values.std() - 1) < 0.02 and values.numel() > 20_000
    assert (values.abs() > 3).float().mean() < 0.005  # a normal's tails, not uniform noise
    # float16 samples get the same draws, rounded to the nearest float16 (from
    # float64, so a float32 value rounded again may differ in a rare tie).
    half, _ = erased(photos, np.float16)
    for a, b, h in zip(got, plain, half):
        box = a != b
        same = (a[box].half() == h[box]).float().mean()
        assert same > 0.999 and torch.allclose(a[box].half().float(), h[box].float(), rtol=1e-3, atol=0)


def test_pixel_erasing_needs_the_float_samples(photos):
    with pytest.raises(ss.PipelineError, match="only the float samples of Normalize hold"):
        ss.Loader(photos, 4, {"image": [RandomResizedCrop(32), RandomErasing(p=1.0, value="random")]})
    with pytest.raises(ValueError, match="RandomErasing: value must be None, .* or `\"random\"`, got 'noise'"):
        RandomErasing(value="noise")


def test_a_bicubic_crop_is_pillows_bicubic(tmp_path):
    """Raw stored pixels, the whole image shrunk: Pillow's BICUBIC within a level."""
    path = tmp_path / "raw.slip"
    images = [picture(150, 200, seed=k) for k in range(4)]
    ss.write(path, [(image, k) for k, image in enumerate(images)],
             {"image": ss.RGBImageField(write_mode="raw"), "label": ss.IntField()}, workers=0, verbose=False)
    crop = RandomResizedCrop((60, 80), scale=(1.0, 1.0), ratio=(4 / 3, 4 / 3), interpolation="bicubic")
    got, labels = next(iter(ss.Loader(path, 4, {"image": [crop]}, order="sequential")))
    for image, label in zip(got.numpy(), labels.tolist()):
        theirs = np.asarray(Image.fromarray(images[label]).resize((80, 60), Image.Resampling.BICUBIC))
        assert np.abs(image.astype(int) - theirs).max() <= 1
