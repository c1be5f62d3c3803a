"""MixUp and CutMix: soft labels that sum to 1 and match how the pixels were mixed."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import slipstream as ss
from slipstream.compiler import random as rnd
from slipstream.ops import CutMix, MixLabels, MixUp, Normalize


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (64, 10, 12, 3), dtype=np.uint8)
    labels = (np.arange(64) * 7) % 10
    path = tmp_path_factory.mktemp("mix") / "mix.slip"
    ss.write(path, {"image": images, "label": labels}, {"image": ss.RGBImageField(write_mode="raw"),
                                                        "label": ss.IntField()}, workers=0)
    return path, images, labels


def batches(path, mix, **pipelines):
    loader = ss.Loader(path, 16, {"image": [mix], "label": [MixLabels(mix, 10)], **pipelines},
                       order=ss.Order("sequential", seed=3))
    return [(b[0].numpy().copy(), b[1].numpy().copy()) for b in loader]


def test_mixup_labels_sum_to_one_and_match_the_pixels(dataset):
    path, images, labels = dataset
    for k, (mixed, soft) in enumerate(batches(path, MixUp(alpha=0.4))):
        np.testing.assert_allclose(soft.sum(1), 1.0, atol=1e-6)
        own = images[16 * k:16 * k + 16].astype(float)
        partner = np.roll(own, -1, axis=0)
        own_labels = labels[16 * k:16 * k + 16]
        for i in range(16):
            if own_labels[i] == np.roll(own_labels, -1)[i]:
                continue
            lam = soft[i, own_labels[i]]
            assert abs(soft[i, np.roll(own_labels, -1)[i]] - (1 - lam)) < 1e-6
            assert np.abs(mixed[i] - (lam * own[i] + (1 - lam) * partner[i])).max() <= 0.5 + 1e-3


def test_mix_labels_finds_its_mixing_wherever_the_mixing_stands(dataset):
    path, images, labels = dataset
    mix = MixUp(alpha=0.4)
    loader = ss.Loader(path, 16, {"image": None, "mixed": ss.View("image", [mix]), "label": [MixLabels(mix, 10)]},
                       order=ss.Order("sequential", seed=3))
    mixed, soft = next(iter(loader))
    own = images[:16].astype(float)
    for i in np.flatnonzero(labels[:16] != np.roll(labels[:16], -1)):
        lam = float(soft[i, labels[i]])
        assert 0 < lam < 1 and abs(float(soft[i].sum()) - 1) < 1e-6
        assert np.abs(mixed[i].numpy() - (lam * own[i] + (1 - lam) * own[(i + 1) % 16])).max() <= 0.5 + 1e-3


def test_cutmix_labels_are_the_pasted_area(dataset):
    path, images, labels = dataset
    for k, (mixed, soft) in enumerate(batches(path, CutMix(alpha=1.0))):
        np.testing.assert_allclose(soft.sum(1), 1.0, atol=1e-6)
        own, own_labels = images[16 * k:16 * k + 16], labels[16 * k:16 * k + 16]
        partner, partner_labels = np.roll(own, -1, axis=0), np.roll(own_labels, -1)
        for i in range(16):
            from_partner = (mixed[i] != own[i]).any(-1)
            assert ((mixed[i] == own[i]) | (mixed[i] == partner[i])).all()
            pasted = (mixed[i] == partner[i]).all(-1) & ((own[i] != partner[i]).any(-1))
            if own_labels[i] != partner_labels[i]:
                expected = 1 - soft[i, own_labels[i]]
                assert abs(from_partner.mean() - expected) <= 0.02 and abs(pasted.mean() - expected) <= 0.02


def test_lambdas_follow_beta_and_are_deterministic(dataset):
    path, _, labels = dataset
    alpha = 0.4
    keys = [np.uint64(rnd.sample_key(np.uint64(9), 0, i, 0)) for i in range(20_000)]
    draws = np.array([rnd.beta(key, rnd.draw_number("lam"), alpha, alpha) for key in keys])
    assert abs(draws.mean() - 0.5) < 0.01 and abs(draws.var() - 1 / (4 * (2 * alpha + 1))) < 0.005
    first, second = batches(path, MixUp(alpha)), batches(path, MixUp(alpha))
    for (a, la), (b, lb) in zip(first, second):
        np.testing.assert_array_equal(a, b)
        np.testing.assert_array_equal(la, lb)


def test_mixing_then_normalizing_and_bad_labels(dataset, tmp_path):
    path, _, _ = dataset
    mix = MixUp()
    loader = ss.Loader(path, 16, {"image": [mix, Normalize()], "label": [MixLabels(mix, 10)]}, order="sequential")
    images, soft = next(iter(loader))
    assert images.shape == (16, 3, 10, 12) and images.dtype == torch.float32 and soft.shape == (16, 10)
    with pytest.raises(ValueError, match=r"num_classes must be an int in \[1, 16777216\], got 0"):
        MixLabels(mix, 0)
    small = ss.Loader(path, 16, {"image": [mix], "label": [MixLabels(mix, 5)]}, order="sequential")
    with pytest.raises(ss.PipelineError, match="MixLabels: a label is outside"):
        next(iter(small))


@pytest.mark.parametrize(("mix", "dtype", "tolerance"), [(CutMix(1.0), np.float32, 0.0),
                                                      (CutMix(1.0), np.float16, 0.0),
                                                      (MixUp(0.4), np.float32, 0.5 / 255 / 0.2 + 1e-5)])
def test_mixing_normalized_samples_is_mixing_before_normalizing(dataset, mix, dtype, tolerance):
    """torchvision's recipes mix normalized batches: CutMix pastes the same
    box there, and MixUp blends the same way (to uint8 rounding)."""
    path, _, _ = dataset
    normalize = Normalize((0.5, 0.4, 0.3), (0.2, 0.25, 0.3), dtype)
    for (a, soft_a), (b, soft_b) in zip(batches(path, mix, image=[normalize, mix]),
                                        batches(path, mix, image=[mix, normalize])):
        np.testing.assert_array_equal(soft_a, soft_b)  # the same partners and lambdas
        assert np.abs(a.astype(np.float64) - b.astype(np.float64)).max() <= tolerance


def test_mixup_refuses_float16_samples_with_what_to_do(dataset):
    path, _, _ = dataset
    with pytest.raises(ss.PipelineError, match=r"MixUp mixes \(height, width, channels\) uint8 images or float32 "
                                               r"samples, got \(3, 10, 12\) float16"):
        mix = MixUp(0.2)
        batches(path, mix, image=[Normalize(dtype=np.float16), mix])


def test_cutmix_refuses_what_it_cannot_cut():
    from slipstream.compiler import ArraySource, Pipeline
    from slipstream.errors import PipelineError

    flat = np.zeros((8, 16, 16), np.float32)
    with pytest.raises(PipelineError, match=r"CutMix cuts boxes out of \(height, width, channels\) uint8 images or "
                                            r"the \(channels, height, width\) float samples of Normalize, got "
                                            r"\(16, 16\) float32"):
        Pipeline([ArraySource(flat), CutMix(1.0)]).compile(4)


def test_mixup_or_cutmix_applies_one_of_them_to_each_whole_batch():
    from numba import njit

    from slipstream.ops import MixUpOrCutMix

    rng = np.random.default_rng(1)
    xs = rng.integers(0, 256, (8, 12, 10, 3), dtype=np.uint8)
    ops = [MixUpOrCutMix(mixup_alpha=0.4, cutmix_alpha=1.0, switch_prob=0.3), MixUp(0.4), CutMix(1.0)]
    codes = [njit(op.generate_code()) for op in ops]
    cut = 0
    for _ in range(200):
        keys = rng.integers(0, 2**63, 8, dtype=np.uint64)
        outs = [np.empty_like(xs) for _ in range(3)]
        params = [np.empty((8, 2)) for _ in range(3)]
        for code, op, out, param in zip(codes, ops, outs, params):
            code(xs, out, param, keys, op.runtime_values())
        was_cut = np.array_equal(outs[0], outs[2]) and np.array_equal(params[0], params[2])
        was_mixed = np.array_equal(outs[0], outs[1]) and np.array_equal(params[0], params[1])
        assert was_cut != was_mixed  # the whole batch, one of the two
        cut += was_cut
    assert 40 <= cut <= 80  # switch_prob 0.3 of 200 batches: 60 expected, sd 6.5


def test_mixup_or_cutmix_mixes_labels_in_a_loader_and_checks_its_arguments(dataset):
    from slipstream.ops import MixUpOrCutMix

    path, images, labels = dataset
    for mixed, soft in batches(path, MixUpOrCutMix(switch_prob=0.5)):
        np.testing.assert_allclose(soft.sum(1), 1.0, atol=1e-6)
    with pytest.raises(ValueError, match=r"MixUpOrCutMix: switch_prob must be a number in \[0, 1\], got 1.5"):
        MixUpOrCutMix(switch_prob=1.5)
    with pytest.raises(ValueError, match=r"MixUpOrCutMix: cutmix_alpha must be a number > 0, got 0"):
        MixUpOrCutMix(cutmix_alpha=0)
