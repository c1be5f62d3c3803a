"""The ``recipe`` benchmark's peers do the work slipstream does: their
Pillow TrivialAugmentWide (benchmarks/peers/pillow_augment.py) has
slipstream's magnitude tables and computes the pixels of slipstream's
compiled primitives, and their RandomErasing and MixUp/CutMix
(benchmarks/peers/recipe_torch.py) erase and mix as torchvision defines."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from slipstream.fields import geometry
from slipstream.ops import policies

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks" / "peers"))

import pillow_augment  # noqa: E402
import real_photos  # noqa: E402
import recipe_torch  # noqa: E402

SNAKE = {"Identity": "identity", "ShearX": "shear_x", "ShearY": "shear_y", "TranslateX": "translate_x",
         "TranslateY": "translate_y", "Rotate": "rotate", "Brightness": "brightness", "Color": "color",
         "Contrast": "contrast", "Sharpness": "sharpness", "Posterize": "posterize", "Solarize": "solarize",
         "AutoContrast": "autocontrast", "Equalize": "equalize"}


@pytest.fixture(scope="module")
def photo() -> np.ndarray:
    return np.array(real_photos.image("rocket").resize((176, 176), Image.BILINEAR))


def test_the_peers_policy_is_slipstreams_trivial_augment_wide_space():
    space = policies.trivial_augment_space(31)
    compiled = space.compiled()
    names = {v: k for k, v in policies.NAMES.items()}
    assert [SNAKE[names[op]] for op in space.ops] == list(pillow_augment.OPERATIONS)
    signed = compiled[1]
    for row, op in enumerate(space.ops):
        name = SNAKE[names[op]]
        assert bool(signed[row]) == (name in pillow_augment.SIGNED), name
        for b in range(31):
            ours = float(policies.magnitude_of(compiled, row, b, 176, 176))
            assert pillow_augment.magnitude(name, b) == pytest.approx(ours, abs=1e-5), (name, b)


@pytest.mark.parametrize("bin_index", [0, 7, 19, 30])
def test_the_peers_pillow_operations_compute_slipstreams_pixels(photo, bin_index):
    space = policies.trivial_augment_space(31)
    compiled = space.compiled()
    names = {v: k for k, v in policies.NAMES.items()}
    for row, op in enumerate(space.ops):
        name = SNAKE[names[op]]
        for sign in (1.0, -1.0) if name in pillow_augment.SIGNED else (1.0,):
            value = sign * float(policies.magnitude_of(compiled, row, bin_index, *photo.shape[:2]))
            out = np.empty_like(photo)
            policies.apply_primitive(int(op), value, photo, out, np.zeros(3, np.uint8), False,
                                     geometry.identity(*photo.shape[:2]))
            theirs = np.asarray(pillow_augment.apply(Image.fromarray(photo), name, value))
            difference = np.abs(out.astype(int) - theirs.astype(int))
            assert difference.max() <= 1, (name, value, int(difference.max()))


def test_the_peers_draw_every_operation_and_sign():
    rng = random.Random(3)
    draws = [pillow_augment.draw(rng) for _ in range(14_000)]
    counts = {op: sum(1 for o, _ in draws if o == op) for op in pillow_augment.OPERATIONS}
    assert all(800 < n < 1200 for n in counts.values()), counts
    rotations = [v for o, v in draws if o == "rotate"]
    assert min(rotations) == -135.0 and max(rotations) == 135.0


def test_random_erasing_zeroes_one_rectangle_of_the_drawn_size():
    random.seed(5)
    areas = []
    for _ in range(400):
        image = torch.ones(3, 176, 176)
        recipe_torch.random_erasing(image, p=1.0)
        zero = (image == 0).all(0)
        rows, cols = zero.any(1).nonzero(), zero.any(0).nonzero()
        assert int(zero.sum()) == (len(rows)) * (len(cols))  # one rectangle
        assert rows.numel() == 0 or int(rows[-1] - rows[0]) + 1 == len(rows)
        areas.append(int(zero.sum()) / 176 ** 2)
    assert 0.015 < min(areas) and max(areas) < 0.34
    untouched = torch.ones(3, 8, 8)
    random.seed(0)
    assert sum(bool((recipe_torch.random_erasing(untouched.clone(), p=0.1) == 0).any()) for _ in range(1000)) < 150


def test_mixing_blends_images_and_labels_by_one_weight():
    random.seed(1)
    torch.manual_seed(1)
    images = torch.rand(8, 3, 32, 32)
    labels = torch.arange(8) % 5
    seen = set()
    for _ in range(40):
        mixed, soft = recipe_torch.mix_batch(images.clone(), labels, 5)
        assert soft.shape == (8, 5) and torch.allclose(soft.sum(1), torch.ones(8))
        lam = float(soft[0, labels[0]]) if labels[0] != labels[-1] else None
        if lam is None:
            continue
        from_self = torch.isclose(mixed, images).all(1)
        if bool(from_self.float().mean() < 1) and bool(((mixed == images) | (mixed == images.roll(1, 0))).all()):
            seen.add("cutmix")  # pasted pixels: the share kept is the label's weight
            assert float(from_self[0].float().mean()) == pytest.approx(lam, abs=1e-6)
        else:
            seen.add("mixup")
            assert torch.allclose(mixed, images * lam + images.roll(1, 0) * (1 - lam), atol=1e-5)
    assert seen == {"cutmix", "mixup"}
