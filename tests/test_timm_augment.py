"""timm's RandAugment strings: parsed as timm parses them, each operation
computing the pixels timm's Pillow functions compute, the draws following
timm's distributions, and the policy running in a loader."""

from __future__ import annotations

import math

import numpy as np
import pytest
from numba import njit
from PIL import Image, ImageEnhance, ImageOps
from real_photos import pixels
from test_policies import chi_squared_p

import slipstream as ss
from slipstream.compiler import random as rnd
from slipstream.fields import geometry
from slipstream.ops import timm_augment as timm
from slipstream.ops.timm_augment import TimmOp

FILL = (124, 116, 104)


@pytest.mark.parametrize(("config", "expected"), [
    ("rand-m9-mstd0.5-inc1", dict(magnitude=9.0, magnitude_std=0.5, increasing=True)),
    ("rand-m7-n3", dict(magnitude=7.0, num_layers=3)),
    ("rand-mstd101-mmax15", dict(magnitude_std=math.inf, magnitude_max=15.0)),
    ("rand-m9-mmax0", dict(magnitude=9.0)),  # timm's bound is `magnitude_max or 10`
    ("rand-n1-w0-inc0", dict(num_layers=1, weighted=True, increasing=False)),
    ("rand", dict()),
])
def test_configuration_strings_are_parsed_as_timm_parses_them(config, expected):
    assert timm.parse_rand_augment(config) == timm.RandAugmentConfig(**expected)


@pytest.mark.parametrize(("config", "message"), [
    ("randaugment-m9", "must start with 'rand'"),
    ("rand-m9-x3", r"section 'x3' is not one of m<int>, n<int>, mstd<float>, mmax<int>, inc<0\|1>, w0"),
    ("rand-w1", r"section 'w1' is not one of"),
    ("rand-n9", r"n must be in \[0, 8\], got 9"),
    (9, r"TimmRandAugment: config must be a timm RandAugment string \(`rand-m9-mstd0.5-inc1`\), got 9"),
])
def test_bad_configuration_strings_are_refused_naming_the_section(config, message):
    with pytest.raises(ss.ArgumentError, match=message):
        timm.TimmRandAugment(config)


@pytest.fixture(scope="module")
def photo() -> np.ndarray:
    return np.ascontiguousarray(pixels("astronaut", (500, 333))[40:136, 60:188])


def timm_reference(image: np.ndarray, op: TimmOp, argument: float) -> np.ndarray:
    """timm's function for ``op`` (timm/data/auto_augment.py), with Pillow."""
    img = Image.fromarray(image)
    kwargs = dict(resample=Image.BILINEAR, fillcolor=FILL)
    affine = {TimmOp.SHEAR_X: (1, argument, 0, 0, 1, 0), TimmOp.SHEAR_Y: (1, 0, 0, argument, 1, 0),
              TimmOp.TRANSLATE_X_REL: (1, 0, argument * img.size[0], 0, 1, 0),
              TimmOp.TRANSLATE_Y_REL: (1, 0, 0, 0, 1, argument * img.size[1])}
    if op in affine:
        return np.array(img.transform(img.size, Image.AFFINE, affine[op], **kwargs))
    if op == TimmOp.ROTATE:
        return np.array(img.rotate(argument, **kwargs))
    if op in (TimmOp.POSTERIZE, TimmOp.POSTERIZE_INCREASING):
        return image.copy() if argument >= 8 else np.array(ImageOps.posterize(img, int(argument)))
    if op in (TimmOp.SOLARIZE, TimmOp.SOLARIZE_INCREASING):
        return np.array(ImageOps.solarize(img, argument))
    if op == TimmOp.SOLARIZE_ADD:
        lut = [min(255, i + int(argument)) if i < 128 else i for i in range(256)]
        return np.array(img.point(lut * 3))
    enhance = {TimmOp.COLOR: ImageEnhance.Color, TimmOp.CONTRAST: ImageEnhance.Contrast,
               TimmOp.BRIGHTNESS: ImageEnhance.Brightness, TimmOp.SHARPNESS: ImageEnhance.Sharpness}
    for plain in enhance:
        if op in (plain, TimmOp(plain + 1)):
            return np.array(enhance[plain](img).enhance(argument))
    return np.array({TimmOp.AUTO_CONTRAST: ImageOps.autocontrast, TimmOp.EQUALIZE: ImageOps.equalize,
                     TimmOp.INVERT: ImageOps.invert}[op](img))


CASES = [(op, a) for op in (TimmOp.SHEAR_X, TimmOp.SHEAR_Y) for a in (-0.27, 0.12)]
CASES += [(op, a) for op in (TimmOp.TRANSLATE_X_REL, TimmOp.TRANSLATE_Y_REL) for a in (-0.405, 0.18)]
CASES += [(TimmOp.ROTATE, a) for a in (-27.0, 13.5)] + [(TimmOp.POSTERIZE, b) for b in (1.0, 3.0, 8.0)]
CASES += [(TimmOp.SOLARIZE, 230.0), (TimmOp.SOLARIZE_INCREASING, 26.0), (TimmOp.SOLARIZE_ADD, 99.0)]
CASES += [(op, f) for op in (TimmOp.COLOR, TimmOp.CONTRAST_INCREASING, TimmOp.BRIGHTNESS, TimmOp.SHARPNESS)
          for f in (0.1, 1.72, 1.9)]
CASES += [(TimmOp.AUTO_CONTRAST, 0.0), (TimmOp.EQUALIZE, 0.0), (TimmOp.INVERT, 0.0)]


@pytest.mark.parametrize(("op", "argument"), CASES, ids=lambda v: getattr(v, "name", v))
def test_each_operation_computes_timms_pixels(photo, op, argument):
    out = np.empty_like(photo)
    transform = geometry.identity(*photo.shape[:2])
    timm.apply_timm_op(int(op), argument, photo, out, np.array(FILL, np.uint8), False, transform)
    assert np.array_equal(out, timm_reference(photo, op, argument))


def test_arguments_follow_timms_level_to_arg():
    key = np.uint64(rnd.sample_key(1, 0, 3, 5))
    negated = rnd.uniform(key, 7) < 0.5
    sign = -1.0 if negated else 1.0
    level = 9.0
    assert timm.argument_of(int(TimmOp.ROTATE), level, key, 7) == sign * 0.9 * 30.0
    assert timm.argument_of(int(TimmOp.POSTERIZE), level, key, 7) == 3.0
    assert timm.argument_of(int(TimmOp.POSTERIZE_INCREASING), level, key, 7) == 1.0
    assert timm.argument_of(int(TimmOp.SOLARIZE), level, key, 7) == 230.0
    assert timm.argument_of(int(TimmOp.SOLARIZE_INCREASING), level, key, 7) == 26.0
    assert timm.argument_of(int(TimmOp.SOLARIZE_ADD), level, key, 7) == 99.0
    assert timm.argument_of(int(TimmOp.COLOR), level, key, 7) == 0.9 * 1.8 + 0.1
    assert timm.argument_of(int(TimmOp.COLOR_INCREASING), level, key, 7) == max(0.1, 1.0 + sign * 0.9 * 0.9)
    assert timm.argument_of(int(TimmOp.SHEAR_Y), level, key, 7) == sign * 0.9 * 0.3
    assert timm.argument_of(int(TimmOp.TRANSLATE_X_REL), level, key, 7) == sign * 0.9 * 0.45


@pytest.mark.parametrize("level", [11.7, 15.0, 20.0])
def test_solarize_arguments_above_level_10_are_clipped_as_timm_clips_them(photo, level):
    key = np.uint64(rnd.sample_key(1, 0, 3, 5))
    assert timm.argument_of(int(TimmOp.SOLARIZE), level, key, 7) == 256.0
    assert timm.argument_of(int(TimmOp.SOLARIZE_INCREASING), level, key, 7) == 0.0
    add = timm.argument_of(int(TimmOp.SOLARIZE_ADD), level, key, 7)
    assert add == 128.0
    out = np.empty_like(photo)
    timm.apply_timm_op(int(TimmOp.SOLARIZE_ADD), add, photo, out, np.array(FILL, np.uint8), False,
                       geometry.identity(*photo.shape[:2]))
    assert np.array_equal(out, timm_reference(photo, TimmOp.SOLARIZE_ADD, 128))


@njit
def _draws(params, keys, steps):
    out = np.full((keys.size, steps, 2), np.nan)
    chosen, arguments = np.empty(steps, np.int64), np.empty(steps)
    for k in range(keys.size):
        count = timm.timm_draw(keys[k], params, 64, 64, chosen, arguments)
        for s in range(count):
            out[k, s, 0], out[k, s, 1] = chosen[s], arguments[s]
    return out


def params_of(config: str) -> tuple:
    return timm.TimmRandAugment(config).draw_values()


def test_each_layer_applies_half_of_the_time_an_operation_chosen_uniformly():
    keys = np.array([rnd.sample_key(2, 0, i, 6) for i in range(40_000)], np.uint64)
    params = params_of("rand-m9-n2-inc1")
    drawn = _draws(params, keys, 2)
    applied = (~np.isnan(drawn[:, :, 0])).sum(1)
    assert chi_squared_p(np.bincount(applied, minlength=3).astype(float),
                         np.array([0.25, 0.5, 0.25]) * keys.size) > 1e-3
    ops = drawn[:, :, 0][~np.isnan(drawn[:, :, 0])].astype(int)
    assert chi_squared_p(np.bincount(ops, minlength=21)[params[0]].astype(float),
                         np.full(15, ops.size / 15)) > 1e-3
    rotations = drawn[drawn[:, :, 0] == TimmOp.ROTATE][:, 1]
    assert set(np.abs(rotations).round(9)) == {27.0}  # no noise: m9 of 10 of 30 degrees
    assert abs((rotations < 0).mean() - 0.5) < 0.05


def test_magnitude_noise_is_a_clipped_normal_around_m():
    # About 5,400 rotations of each: the tolerances below are 4 standard errors of their means or more.
    keys = np.array([rnd.sample_key(4, 0, i, 6) for i in range(160_000)], np.uint64)
    drawn = _draws(params_of("rand-m9-n1-mstd0.5"), keys, 1)
    levels = np.abs(drawn[drawn[:, 0, 0] == TimmOp.ROTATE][:, 0, 1]) / 3.0  # rotate: level / 10 * 30 degrees
    expected = np.clip(np.random.default_rng(0).normal(9.0, 0.5, 200_000), 0, 10)
    assert abs(levels.mean() - expected.mean()) < 0.05 and abs(levels.std() - expected.std()) < 0.05
    uniform = _draws(params_of("rand-m9-n1-mstd101"), keys, 1)
    levels = np.abs(uniform[uniform[:, 0, 0] == TimmOp.ROTATE][:, 0, 1]) / 3.0
    assert abs(levels.mean() - 4.5) < 0.15 and levels.min() >= 0 and levels.max() <= 9


def test_weighted_choice_follows_timms_weights_without_replacement():
    keys = np.array([rnd.sample_key(5, 0, i, 6) for i in range(40_000)], np.uint64)
    ops, weights = params_of("rand-n2-w0")[:2]
    drawn = _draws(params_of("rand-n2-w0"), keys, 2)
    both = drawn[~np.isnan(drawn[:, 1, 0])]
    assert (both[:, 0, 0] != both[:, 1, 0]).all()  # without replacement
    single = _draws(params_of("rand-n1-w0"), keys, 1)  # one layer: whether it applies does not depend on the choice
    first = single[:, 0, 0][~np.isnan(single[:, 0, 0])].astype(int)
    rows = {int(op): r for r, op in enumerate(ops)}
    counts = np.bincount([rows[o] for o in first], minlength=ops.size).astype(float)
    assert counts[weights == 0].sum() == 0
    keep = weights > 0
    assert chi_squared_p(counts[keep], weights[keep] * first.size) > 1e-3


def test_timms_rand_augment_runs_in_a_loader_deterministically(tmp_path):
    from jpeg_corpus import make_sample

    path = tmp_path / "photos.slip"
    ss.write(path, [(make_sample(64, 80, seed=k).data, k) for k in range(32)],
             {"image": ss.RGBImageField(), "label": ss.IntField()}, workers=0, verbose=False)
    pipeline = {"image": [ss.ops.RandomResizedCrop(48), timm.TimmRandAugment("rand-m9-mstd0.5-inc1")], "label": []}

    def epoch(threads):
        with ss.Loader(path, 8, pipeline, order=ss.Order("random", seed=2), num_threads=threads,
                       verbose=False) as loader:
            return [x.numpy().copy() for x, _ in loader]

    for a, b in zip(epoch(1), epoch(2)):
        assert np.array_equal(a, b)
