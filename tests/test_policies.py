"""Augmentation policies: their magnitude tables are torchvision's, their
draws follow torchvision's distributions (a chi-squared test over many
keys), each primitive computes Pillow's pixels, and in a loader they are
deterministic and resumable like every other operation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from numba import njit
from PIL import Image, ImageEnhance, ImageOps

import real_photos
import slipstream as ss
from slipstream.compiler import random as rnd
from slipstream.fields import geometry
from slipstream.ops import policies, warps
from slipstream.ops.policies import Primitive
from test_warps import annotated  # noqa: F401  (a fixture)

KEYS = 60_000


def upper_tail(statistic: float, dof: int) -> float:
    """P(chi-squared with ``dof`` degrees of freedom >= statistic), by the
    Wilson-Hilferty normal approximation (good to a few per cent here)."""
    z = ((statistic / dof) ** (1 / 3) - (1 - 2 / (9 * dof))) / math.sqrt(2 / (9 * dof))
    return 0.5 * math.erfc(z / math.sqrt(2))


def chi_squared_p(counts: np.ndarray, expected: np.ndarray) -> float:
    """The p-value of observed ``counts`` against ``expected`` counts."""
    keep = expected > 0
    statistic = float((((counts - expected) ** 2)[keep] / expected[keep]).sum())
    return upper_tail(statistic, int(keep.sum()) - 1)


# ---------------------------------------------------------------- tables


@pytest.mark.parametrize("steps", [2, 10, 11, 31])
@pytest.mark.parametrize("end", [0.3, 0.99, 30.0, 135.0, 150.0 / 331.0 * 176, 150.0 / 331.0 * 224, 77.3])
def test_linspace_is_torch_linspace_within_one_float32_step(steps, end):
    # torch's CPU kernel fills vectors of 8 or 16 floats from a base, so its last
    # bit depends on the machine's vector width: the tables of fixed ranges are
    # made by torch itself; only translations (scaled by the image) use this.
    for start, stop in ((0.0, end), (end, 0.0)):
        ours = np.array([policies.linspace32(start, stop, steps, i) for i in range(steps)], np.float32)
        theirs = torch.linspace(start, stop, steps).numpy()
        assert np.all(np.abs(ours - theirs) <= np.spacing(np.abs(theirs)))


def test_translations_shift_by_torchvisions_whole_pixels_at_every_size_and_bin():
    for bins in (10, 31):
        for size in range(8, 1025):
            theirs = torch.linspace(0.0, 150.0 / 331.0 * size, bins).numpy()
            ours = [policies.linspace32(0.0, 150.0 / 331.0 * size, bins, i) for i in range(bins)]
            assert [int(v) for v in ours] == [int(v) for v in theirs.tolist()], size


def test_the_spaces_are_torchvisions_tables():
    trivial = policies.trivial_augment_space(31)
    names = {v: k for k, v in policies.NAMES.items()}
    assert [names[op] for op in trivial.ops] == ["Identity", "ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate",
                                                 "Brightness", "Color", "Contrast", "Sharpness", "Posterize",
                                                 "Solarize", "AutoContrast", "Equalize"]
    ops, signed, starts, ends, scales, table = trivial.compiled()
    row = {names[op]: k for k, op in enumerate(trivial.ops)}
    assert np.array_equal(table[row["Rotate"]], torch.linspace(0.0, 135.0, 31).double().numpy())
    assert table[row["Posterize"]].tolist() == (8 - (torch.arange(31) / (30 / 6)).round().int()).tolist()
    assert table[row["Posterize"]].min() == 2 and table[row["Posterize"]].max() == 8
    assert signed.tolist() == [False] + [True] * 9 + [False] * 4
    rand = policies.rand_augment_space(31)
    compiled = rand.compiled()
    row = {names[op]: k for k, op in enumerate(rand.ops)}
    assert len(rand.ops) == 14 and "Invert" not in row
    # translations scale with the image: 150/331 of its width (x) or height (y)
    for b in range(31):
        assert int(policies.magnitude_of(compiled, row["TranslateX"], b, 100, 331)) == \
            int(torch.linspace(0.0, 150.0 / 331.0 * 331, 31)[b].item())
        assert int(policies.magnitude_of(compiled, row["TranslateY"], b, 100, 331)) == \
            int(torch.linspace(0.0, 150.0 / 331.0 * 100, 31)[b].item())
    auto = policies.auto_augment_space()
    assert auto.bins == 10 and "Invert" in {names[op] for op in auto.ops} and "Identity" not in \
        {names[op] for op in auto.ops}
    for policy in policies.AUTO_AUGMENT_POLICIES.values():
        assert len(policy) == 25 and all(len(sub) == 2 for sub in policy)


# ---------------------------------------------------------------- draws


@njit
def _draws(draw, params, keys, steps, height, width):
    """Each key's drawn (operation, magnitude) steps; -1 where fewer were drawn."""
    out = np.full((keys.size, steps, 2), -1.0)
    chosen, magnitudes = np.empty(steps, np.int64), np.empty(steps)
    for k in range(keys.size):
        count = draw(keys[k], params, height, width, chosen, magnitudes)
        for s in range(count):
            out[k, s, 0], out[k, s, 1] = chosen[s], magnitudes[s]
    return out


def keys_of(seed: int, op_id: int) -> np.ndarray:
    return np.array([rnd.sample_key(seed, 0, i, op_id) for i in range(KEYS)], np.uint64)


def test_trivial_augment_draws_operations_bins_and_signs_uniformly():
    space = policies.trivial_augment_space(31).compiled()
    ops = space[0]
    drawn = _draws(policies.trivial_augment_draw, (space,), keys_of(0, 12), 1, 224, 224)[:, 0]
    counts = np.array([(drawn[:, 0] == op).sum() for op in ops])
    assert chi_squared_p(counts, np.full(ops.size, KEYS / ops.size)) > 1e-3
    rotations = drawn[drawn[:, 0] == Primitive.ROTATE, 1]
    table = torch.linspace(0.0, 135.0, 31).double().numpy()
    assert set(np.abs(rotations)) <= set(table.tolist())
    bins = np.searchsorted(table, np.abs(rotations))
    assert chi_squared_p(np.bincount(bins, minlength=31), np.full(31, rotations.size / 31)) > 1e-3
    negative = (rotations < 0).sum()
    assert abs(negative - rotations[rotations != 0].size / 2) < 4 * math.sqrt(rotations.size / 4)
    assert np.all(drawn[np.isin(drawn[:, 0], [Primitive.IDENTITY, Primitive.EQUALIZE]), 1] == 0)
    assert np.all(drawn[drawn[:, 0] == Primitive.SOLARIZE, 1] >= 0)  # unsigned


def test_rand_augment_draws_each_step_independently_at_the_fixed_magnitude():
    space = policies.rand_augment_space(31).compiled()
    ops = space[0]
    drawn = _draws(policies.rand_augment_draw, (space, 2, 9), keys_of(3, 40), 2, 224, 224)
    rows = {int(op): k for k, op in enumerate(ops)}
    pairs = np.zeros((ops.size, ops.size))
    for first, second in drawn[:, :, 0].astype(int):
        pairs[rows[first], rows[second]] += 1
    # independent uniform steps: every ordered pair equally likely
    assert chi_squared_p(pairs.reshape(-1), np.full(ops.size ** 2, KEYS / ops.size ** 2)) > 1e-3
    shear = drawn[drawn[:, :, 0] == Primitive.SHEAR_X][:, 1]
    assert set(np.abs(shear)) == {torch.linspace(0.0, 0.3, 31)[9].item()}


def test_auto_augment_applies_each_sub_policy_step_with_its_probability():
    svhn = policies.AUTO_AUGMENT_POLICIES["svhn"]
    drawn = _draws(policies.auto_augment_draw, policies.auto_augment_params("svhn"), keys_of(5, 8), 2, 32, 32)
    # Every (first, second) outcome's frequency, summed over the sub-policies that can give it.
    expected: dict[tuple[int, int], float] = {}
    for (first, p1, _), (second, p2, _) in svhn:
        a, b = int(policies.NAMES[first]), int(policies.NAMES[second])
        for outcome, weight in (((a, b), p1 * p2), ((a, -1), p1 * (1 - p2)), ((b, -1), (1 - p1) * p2),
                                ((-1, -1), (1 - p1) * (1 - p2))):
            expected[outcome] = expected.get(outcome, 0.0) + weight * KEYS / len(svhn)
    observed = {outcome: 0 for outcome in expected}
    for first, second in drawn[:, :, 0].astype(int):
        observed[(first, second)] += 1
    outcomes = sorted(expected)
    assert chi_squared_p(np.array([observed[o] for o in outcomes], float),
                         np.array([expected[o] for o in outcomes])) > 1e-3


# ---------------------------------------------------------------- pixels


@pytest.fixture(scope="module", params=["coffee", "chelsea"])
def photo(request) -> np.ndarray:
    """A real photo at ImageNet's size, its central 96 x 128 pixels."""
    return real_photos.centre(request.param, 96, 128, (500, 375))


def pillow_reference(image: np.ndarray, op: Primitive, magnitude: float, fill: tuple[int, int, int],
                     resample: int = Image.NEAREST) -> np.ndarray:
    """torchvision's ``_apply_op`` on a PIL image, written with Pillow calls."""
    img = Image.fromarray(image)
    if op == Primitive.ROTATE:
        return np.array(img.rotate(magnitude, resample, fillcolor=fill))
    if op in (Primitive.SHEAR_X, Primitive.SHEAR_Y, Primitive.TRANSLATE_X, Primitive.TRANSLATE_Y):
        degrees = math.degrees(math.atan(magnitude))
        inverse = {Primitive.SHEAR_X: warps.affine_inverse(0.0, 0.0, 0.0, 0.0, 0.0, 1.0, degrees, 0.0),
                   Primitive.SHEAR_Y: warps.affine_inverse(0.0, 0.0, 0.0, 0.0, 0.0, 1.0, 0.0, degrees),
                   Primitive.TRANSLATE_X: warps.affine_inverse(img.width * 0.5, img.height * 0.5, 0.0,
                                                               float(int(magnitude)), 0.0, 1.0, 0.0, 0.0),
                   Primitive.TRANSLATE_Y: warps.affine_inverse(img.width * 0.5, img.height * 0.5, 0.0, 0.0,
                                                               float(int(magnitude)), 1.0, 0.0, 0.0)}[op]
        return np.array(img.transform(img.size, Image.AFFINE, tuple(inverse), resample, fillcolor=fill))
    enhance = {Primitive.BRIGHTNESS: ImageEnhance.Brightness, Primitive.COLOR: ImageEnhance.Color,
               Primitive.CONTRAST: ImageEnhance.Contrast, Primitive.SHARPNESS: ImageEnhance.Sharpness}
    if op in enhance:
        return np.array(enhance[op](img).enhance(1.0 + magnitude))
    return np.array({Primitive.POSTERIZE: lambda: ImageOps.posterize(img, int(magnitude)),
                     Primitive.SOLARIZE: lambda: ImageOps.solarize(img, magnitude),
                     Primitive.AUTOCONTRAST: lambda: ImageOps.autocontrast(img),
                     Primitive.EQUALIZE: lambda: ImageOps.equalize(img),
                     Primitive.INVERT: lambda: ImageOps.invert(img),
                     Primitive.IDENTITY: lambda: img}[op]())


CASES = [(Primitive.IDENTITY, 0.0), (Primitive.AUTOCONTRAST, 0.0), (Primitive.EQUALIZE, 0.0), (Primitive.INVERT, 0.0)]
CASES += [(op, m) for op in (Primitive.SHEAR_X, Primitive.SHEAR_Y) for m in (-0.99, -0.3, 0.0, 0.1, 0.5)]
CASES += [(op, m) for op in (Primitive.TRANSLATE_X, Primitive.TRANSLATE_Y) for m in (-32.0, -7.9, 0.7, 3.3, 30.0)]
CASES += [(Primitive.ROTATE, m) for m in (-135.0, -30.0, 0.0, 4.5, 90.0)]
CASES += [(op, m) for op in (Primitive.BRIGHTNESS, Primitive.COLOR, Primitive.CONTRAST, Primitive.SHARPNESS)
          for m in (-0.99, -0.45, 0.3, 0.99)]
CASES += [(Primitive.POSTERIZE, b) for b in (2.0, 4.0, 8.0)] + [(Primitive.SOLARIZE, t) for t in (0.0, 127.5, 255.0)]


@pytest.mark.parametrize(("op", "magnitude"), CASES, ids=lambda v: getattr(v, "name", v))
def test_each_primitive_computes_pillows_pixels(photo, op, magnitude):
    fill = (17, 130, 250)
    out = np.empty_like(photo)
    transform = geometry.identity(*photo.shape[:2])
    policies.apply_primitive(int(op), magnitude, photo, out, np.array(fill, np.uint8), True, transform)
    expected = pillow_reference(photo, op, magnitude, fill)
    assert np.array_equal(out, expected)
    if op not in (Primitive.SHEAR_X, Primitive.SHEAR_Y, Primitive.TRANSLATE_X, Primitive.TRANSLATE_Y,
                  Primitive.ROTATE):
        assert np.array_equal(transform, geometry.identity(*photo.shape[:2]))


GEOMETRIC = [(op, m) for op, m in CASES if op in (Primitive.SHEAR_X, Primitive.SHEAR_Y, Primitive.TRANSLATE_X,
                                                  Primitive.TRANSLATE_Y, Primitive.ROTATE)]


@pytest.mark.parametrize(("op", "magnitude"), GEOMETRIC, ids=lambda v: getattr(v, "name", v))
def test_geometric_primitives_compute_pillows_bilinear_pixels(photo, op, magnitude):
    fill = (200, 10, 90)
    out = np.empty_like(photo)
    policies.apply_primitive(int(op), magnitude, photo, out, np.array(fill, np.uint8), False,
                             geometry.identity(*photo.shape[:2]))
    assert np.array_equal(out, pillow_reference(photo, op, magnitude, fill, Image.BILINEAR))


def test_a_geometric_step_records_where_the_pixels_went(photo):
    """A pixel's centre, moved by the recorded map, lands on the output
    pixel that shows it (nearest sampling: within one pixel)."""
    out = np.empty_like(photo)
    transform = geometry.identity(*photo.shape[:2])
    policies.apply_primitive(int(Primitive.ROTATE), 30.0, photo, out, np.zeros(3, np.uint8), True, transform)
    centre = np.array([[photo.shape[1] / 2, photo.shape[0] / 2]])
    assert np.allclose(geometry.apply_to_points(transform, centre), centre)  # Pillow rotates about the centre
    corner = geometry.apply_to_points(transform, np.array([[0.0, 0.0]]))[0]
    radius = math.hypot(photo.shape[1] / 2, photo.shape[0] / 2)
    assert math.isclose(math.hypot(*(corner - centre[0])), radius, rel_tol=1e-9)


# ---------------------------------------------------------------- in a loader


@pytest.fixture(scope="module")
def dataset(tmp_path_factory):
    from jpeg_corpus import make_sample

    path = tmp_path_factory.mktemp("policies") / "photos.slip"
    ss.write(path, [(make_sample(64, 80, seed=k).data, k) for k in range(48)],
             {"image": ss.RGBImageField(), "label": ss.IntField()}, workers=0, verbose=False)
    return path


POLICIES = {"trivial": policies.TrivialAugmentWide(), "rand": policies.RandAugment(num_ops=3, magnitude=15),
            "auto": policies.AutoAugment("imagenet", fill=(124, 116, 104))}


@pytest.fixture(scope="module")
def policy_epochs(dataset) -> tuple[list, list, list]:
    """One epoch of a loader with a view per policy (one compile for the
    three), the same epoch on one thread, and one of a loader whose views
    stop before the policies (same names, so the same crops)."""

    def epoch(policy: bool, num_threads=None):
        views = {name: ss.View("image", [ss.ops.RandomResizedCrop(48), *([op] if policy else [])])
                 for name, op in POLICIES.items()}
        with ss.Loader(dataset, 16, {"image": None, "label": [], **views}, order=ss.Order("random", seed=7),
                       as_dict=True, verbose=False, num_threads=num_threads) as loader:
            return [{name: value.numpy().copy() for name, value in batch.items()} for batch in loader]

    return epoch(True), epoch(True, num_threads=1), epoch(False)


@pytest.mark.parametrize("name", list(POLICIES))
def test_a_policy_in_a_loader_is_deterministic_and_varies_per_sample(policy_epochs, name):
    first, again, plain = policy_epochs
    for b1, b2 in zip(first, again):
        assert np.array_equal(b1["label"], b2["label"]) and np.array_equal(b1[name], b2[name])
    changed = sum(int(not np.array_equal(a, b)) for b1, b2 in zip(first, plain) for a, b in zip(b1[name], b2[name]))
    assert changed > 24  # most samples received an operation that changed them


@pytest.mark.parametrize(("make", "message"), [
    (lambda: policies.TrivialAugmentWide(num_magnitude_bins=1), "num_magnitude_bins"),
    (lambda: policies.RandAugment(magnitude=31), r"magnitude must be an int in \[0, num_magnitude_bins=31\)"),
    (lambda: policies.RandAugment(num_ops=9), r"num_ops must be an int in \[0, 8\]"),
    (lambda: policies.AutoAugment("cifar100"), "policy must be one of"),
    (lambda: policies.TrivialAugmentWide(interpolation="bicubic"),
     "TrivialAugmentWide: interpolation must be 'nearest' or 'bilinear', got 'bicubic'"),
    (lambda: policies.TrivialAugmentWide(fill=(1, 2)),
     r"TrivialAugmentWide: fill must be None \(black\), a number or 3 numbers \(R, G, B\), each in \[0, 255\]"),
    (lambda: policies.TrivialAugmentWide(fill=300), r"TrivialAugmentWide: fill must be .*, got 300"),
])
def test_bad_arguments_are_refused_with_the_reason(make, message):
    with pytest.raises(ss.ArgumentError, match=message):
        make()


def test_boxes_follow_the_geometric_steps_a_policy_draws(annotated):
    """A policy is geometric: boxes follow the shears, translations and
    rotations each sample drew (and stay put under the colour steps)."""
    from test_warps import moved_boxes, stages, transforms_of

    from slipstream.compiler.nodes import RefNode
    from slipstream.ops import BoundingBoxes, Count, KeptWithBoxes, Resize

    path, source = annotated
    before = [Resize((150, 180))]
    pipelines = {"image": before + [policies.AutoAugment("svhn", fill=(128, 128, 128))],
                 "boxes": [BoundingBoxes(follow="image")], "labels": [KeptWithBoxes("boxes")],
                 "counts": [Count("boxes")], "points": None, "masks": None, "mask": None,
                 "transform": [RefNode("boxes", None, output=geometry.TRANSFORM)]}
    earlier = iter(transforms_of(path, before, pipelines))
    moved = 0
    with ss.Loader(path, 8, pipelines, order=ss.Order("random", seed=6), verbose=False) as loader:
        for batch, indices in zip(loader, loader.epoch_batches(0)):
            _, boxes, labels, counts, transforms = (t.numpy() for t in batch)
            for k, index in enumerate(indices):
                stored_boxes, stored_labels = source.samples[index][1], source.samples[index][2]
                t = transforms[k]
                expected, keep = moved_boxes(stored_boxes, stages(next(earlier), t))
                np.testing.assert_allclose(boxes[k, :counts[k]], expected[keep], atol=1e-3)
                assert labels[k, :counts[k]].tolist() == stored_labels[keep].tolist()
                moved += not geometry.is_axis_aligned(t)
    assert moved >= 8  # SVHN's policy shears most samples


# ---------------------------------------------------------------- presets


def test_torchvisions_recipe_presets_build_what_the_recipe_says(dataset):
    from slipstream.ops import MixUpOrCutMix, Normalize, RandomErasing, presets

    pipelines = presets.torchvision_train(crop_size=40, num_classes=48)
    image = pipelines["image"]
    assert [type(op).__name__ for op in image] == ["RandomResizedCrop", "RandomHorizontalFlip", "TrivialAugmentWide",
                                                   "Normalize", "RandomErasing", "MixUpOrCutMix"]
    assert image[2].interpolation == "bilinear" and image[4] == RandomErasing(p=0.1)
    assert image[5] == MixUpOrCutMix(0.2, 1.0, 0.5) and isinstance(image[3], Normalize)
    with ss.Loader(dataset, 16, {**pipelines, "label": pipelines["label"]}, order=ss.Order("random", seed=1),
                   verbose=False) as loader:
        for images, soft in loader:
            assert images.shape == (16, 3, 40, 40) and images.dtype == torch.float32
            assert soft.shape == (16, 48) and torch.allclose(soft.sum(1), torch.ones(16))
    assert type(presets.torchvision_train(auto_augment="ra", num_classes=2)["image"][2]).__name__ == "RandAugment"
    assert presets.torchvision_train(auto_augment="svhn", mixup_alpha=0, cutmix_alpha=0).keys() == {"image"}
    assert type(presets.torchvision_vit_train(num_classes=3)["image"][-1]).__name__ == "MixUpOrCutMix"
    val = presets.torchvision_val()["image"]
    assert val[0].size == (224, 224) and abs(val[0].ratio - 224 / 232) < 1e-12
    with pytest.raises(ss.ArgumentError, match="torchvision_train mixes labels .*give num_classes"):
        presets.torchvision_train()
    assert type(presets.torchvision_train(auto_augment="augmix", num_classes=2)["image"][2]).__name__ == "AugMix"
    with pytest.raises(ss.ArgumentError, match=r"auto_augment must be 'ta_wide', 'ra', 'augmix', one of "
                                               r"\['cifar10', 'imagenet', 'svhn'\] or None, got 'trivial'"):
        presets.torchvision_train(auto_augment="trivial", num_classes=2)


def test_torchvisions_recipe_is_deterministic_across_threads_and_resumes_exactly_mid_epoch(dataset):
    """The whole recipe (TrivialAugmentWide, RandomErasing, MixUp or CutMix
    with soft labels) with repeated augmentation: one thread or two give the
    same batches, and a loader stopped after two batches resumes with the
    batches the uninterrupted one gave."""
    from slipstream.ops import presets

    pipelines = presets.torchvision_train(crop_size=40, num_classes=48)

    def loader(threads: int = 1) -> ss.Loader:
        return ss.Loader(dataset, 8, pipelines, order=ss.Order("random", seed=3, repeats=2, selected_round=0),
                         num_threads=threads, verbose=False)

    def host(batches) -> list[tuple[np.ndarray, np.ndarray]]:
        return [(x.numpy().copy(), y.numpy().copy()) for x, y in batches]

    whole, threaded = host(loader()), host(loader(threads=2))
    with loader() as interrupted:
        batches = iter(interrupted)
        first = host([next(batches), next(batches)])
        state = interrupted.state_dict()
    resumed = loader()
    resumed.load_state_dict(state)
    rest = host(resumed)
    assert len(whole) == 6 and len(rest) == 4  # 48 of the 96 copies an epoch, 8 a batch
    for (x1, y1), (x2, y2), (x3, y3) in zip(whole, threaded, first + rest):
        assert np.array_equal(y1, y2) and np.array_equal(y1, y3)
        assert np.array_equal(x1, x2) and np.array_equal(x1, x3)
    assert any(not np.allclose(y.max(1), 1.0) for _, y in whole)  # mixed labels, not one-hot
