"""AugMix: torchvision's augmentation space, the documented draw plan with
Beta and Dirichlet weights and uniform chains (against theory over many
keys), the mixture of Pillow-exact chains truncated as torchvision does,
and, in a loader, determinism and exact resume."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest
import torch
from numba import njit
from PIL import Image, ImageOps

import slipstream as ss
from slipstream.compiler import random as rnd
from slipstream.fields import geometry
from slipstream.ops import augmix, policies
from slipstream.ops.augmix import AugMix
from slipstream.ops.policies import Primitive
from test_policies import chi_squared_p, dataset, photo, pillow_reference  # noqa: F401  (fixtures)
from test_warps import annotated  # noqa: F401  (a fixture)

KEYS = 40_000
NAMES = {int(v): k for k, v in policies.NAMES.items()}


def keys_of(seed: int, count: int = KEYS) -> np.ndarray:
    return np.array([rnd.sample_key(seed, 0, i, 21) for i in range(count)], np.uint64)


def draws_of(op: AugMix, key: int, height: int, width: int) -> tuple[np.ndarray, ...]:
    """``op``'s draws for one key: weights, depths, ops, magnitudes."""
    columns = op.chain_depth if op.chain_depth > 0 else 3
    weights, depths = np.empty(op.mixture_width + 1, np.float32), np.empty(op.mixture_width, np.int64)
    ops, magnitudes = np.full((op.mixture_width, columns), -1, np.int64), np.zeros((op.mixture_width, columns))
    augmix.augmix_draw(np.uint64(key), augmix.augmix_space(op.all_ops), op.severity, op.chain_depth, op.alpha,
                       height, width, weights, depths, ops, magnitudes)
    return weights, depths, ops, magnitudes


# ---------------------------------------------------------------- the space


def test_the_space_is_torchvisions_augmix_table():
    space = augmix.augmix_space(True)
    ops, signed, _, _, _, table = space
    assert [NAMES[int(op)] for op in ops] == ["ShearX", "ShearY", "TranslateX", "TranslateY", "Rotate", "Posterize",
                                              "Solarize", "AutoContrast", "Equalize", "Brightness", "Color",
                                              "Contrast", "Sharpness"]
    assert signed.tolist() == [True] * 5 + [False] * 4 + [True] * 4
    row = {NAMES[int(op)]: k for k, op in enumerate(ops)}
    for name, end in (("ShearX", 0.3), ("Rotate", 30.0), ("Brightness", 0.9), ("Sharpness", 0.9)):
        assert np.array_equal(table[row[name]], torch.linspace(0.0, end, 10).double().numpy())
    assert np.array_equal(table[row["Solarize"]], torch.linspace(255.0, 0.0, 10).double().numpy())
    bits = 4 - (torch.arange(10) / ((10 - 1) / 4)).round().int()
    assert table[row["Posterize"]].tolist() == bits.tolist() == [4, 4, 3, 3, 2, 2, 1, 1, 0, 0]
    # translations: torchvision's whole pixels of linspace(0, width / 3) and linspace(0, height / 3)
    for size in range(8, 1025):
        theirs = [int(v) for v in torch.linspace(0.0, size / 3.0, 10).tolist()]
        assert [int(policies.magnitude_of(space, row["TranslateX"], b, 5, size)) for b in range(10)] == theirs
        assert [int(policies.magnitude_of(space, row["TranslateY"], b, size, 5)) for b in range(10)] == theirs
    partial = augmix.augmix_space(False)[0]
    assert [NAMES[int(op)] for op in partial] == [NAMES[int(op)] for op in ops[:9]]


# ---------------------------------------------------------------- the draws


def test_the_draws_follow_the_documented_plan():
    op = AugMix(severity=7, mixture_width=4, alpha=0.7)
    space = augmix.augmix_space(True)
    for key in keys_of(2, 20):
        weights, depths, ops, magnitudes = draws_of(op, int(key), 60, 90)
        named, steps = augmix._DRAWS, augmix._CHAIN_DRAWS
        g0, g1 = (max(rnd.gamma(key, k, 0.7), np.finfo(np.float64).tiny) for k in (named.original, named.shared))
        h = np.array([max(rnd.gamma(key, named.weight + i, 0.7), np.finfo(np.float64).tiny) for i in range(4)])
        assert weights[0] == np.float32(g0 / (g0 + g1))
        assert np.array_equal(weights[1:], (h / h.sum()).astype(np.float32) * np.float32(g1 / (g0 + g1)))
        assert weights.dtype == np.float32
        for i in range(4):
            chain = np.uint64(rnd.draw(key, named.chain + i))
            assert depths[i] == rnd.integers(chain, steps.depth, 1, 4)
            for s in range(depths[i]):
                r = rnd.integers(chain, steps.primitive + s, 0, 13)
                b = rnd.integers(chain, steps.bin + s, 0, 7)
                assert ops[i, s] == space[0][r]
                sign = rnd.uniform(chain, steps.sign + s)
                assert magnitudes[i, s] == policies.drawn_magnitude(space, r, b, sign, 60, 90)


@njit
def _weights(keys, space, chains, alpha):
    out = np.empty((keys.size, chains + 1), np.float32)
    depths, ops, magnitudes = np.empty(chains, np.int64), np.empty((chains, 3), np.int64), np.empty((chains, 3))
    for k in range(keys.size):
        augmix.augmix_draw(keys[k], space, 3, -1, alpha, 32, 32, out[k], depths, ops, magnitudes)
    return out


def _beta_moments(a: float, b: float) -> tuple[float, float]:
    return a / (a + b), a * b / ((a + b) ** 2 * (a + b + 1))


def _assert_mean_and_variance(values: np.ndarray, mean: float, variance: float) -> None:
    """The sample mean and variance agree with theory within 5 standard errors."""
    n = values.size
    assert abs(values.mean() - mean) < 5 * math.sqrt(variance / n)
    centred = values - values.mean()
    fourth = float((centred ** 4).mean())
    assert abs(values.var() - variance) < 5 * math.sqrt((fourth - variance ** 2) / n)


@pytest.mark.parametrize(("alpha", "chains"), [(1.0, 3), (0.3, 2), (4.0, 5)])
def test_the_weights_are_beta_and_dirichlet_times_the_rest(alpha, chains):
    weights = _weights(keys_of(int(alpha * 10) + chains), augmix.augmix_space(True), chains, alpha).astype(np.float64)
    assert np.all(weights > 0) and np.allclose(weights.sum(1), 1.0, atol=1e-6)
    original = weights[:, 0]
    _assert_mean_and_variance(original, *_beta_moments(alpha, alpha))
    # w_i = d_i * (1 - m) with d_i ~ Beta(alpha, (W - 1) alpha) independent of m ~ Beta(alpha, alpha)
    d_mean, d_var = _beta_moments(alpha, (chains - 1) * alpha)
    m_mean, m_var = _beta_moments(alpha, alpha)
    second = (d_var + d_mean ** 2) * (m_var + m_mean ** 2)
    for i in range(chains):
        _assert_mean_and_variance(weights[:, 1 + i], d_mean * m_mean, second - (d_mean * m_mean) ** 2)
    shares = weights[:, 1:] / weights[:, 1:].sum(1, keepdims=True)  # the Dirichlet part alone
    _assert_mean_and_variance(shares[:, 0], d_mean, d_var)
    assert abs(np.corrcoef(original, shares[:, 0])[0, 1]) < 5 / math.sqrt(KEYS)  # drawn independently


def test_weights_at_a_tiny_alpha_are_clamped_as_torchs_dirichlet_clamps_them():
    weights = _weights(keys_of(77, 5000), augmix.augmix_space(True), 3, 0.01)
    tiny, below_one = np.finfo(np.float32).tiny, np.nextafter(np.float32(1), np.float32(0))
    # a chain's weight is a product of two clamped ratios, which may underflow to 0 in float32 (in torch too)
    assert np.all(np.isfinite(weights)) and weights.min() >= 0 and weights[:, 0].min() > 0 and weights.max() < 1
    assert (weights[:, 0] == below_one).any() and (weights[:, 0] == tiny).any()  # both clamps reached
    assert np.allclose(weights.astype(np.float64).sum(1), 1.0, atol=1e-6)


@njit
def _steps(keys, space, severity, chain_depth, chains):
    """Each key's chains' depths and (op, magnitude) steps."""
    depths = np.empty((keys.size, chains), np.int64)
    ops = np.full((keys.size, chains, 3), -1, np.int64)
    magnitudes = np.zeros((keys.size, chains, 3))
    weights = np.empty(chains + 1, np.float32)
    for k in range(keys.size):
        augmix.augmix_draw(keys[k], space, severity, chain_depth, 1.0, 224, 224, weights, depths[k], ops[k],
                           magnitudes[k])
    return depths, ops, magnitudes


@pytest.mark.parametrize("all_ops", [True, False])
def test_depths_operations_bins_and_signs_are_uniform(all_ops):
    space = augmix.augmix_space(all_ops)
    depths, ops, magnitudes = _steps(keys_of(9 + all_ops), space, 4, -1, 3)
    assert chi_squared_p(np.bincount(depths.reshape(-1), minlength=4)[1:], np.full(3, depths.size / 3)) > 1e-3
    taken = ops >= 0
    assert np.array_equal(taken.sum(2), depths)  # a chain's steps are its first ``depth`` columns
    drawn = ops[taken]
    counts = np.array([(drawn == op).sum() for op in space[0]])
    assert counts.sum() == drawn.size
    assert chi_squared_p(counts, np.full(space[0].size, drawn.size / space[0].size)) > 1e-3
    rotations = magnitudes[taken][drawn == Primitive.ROTATE]
    table = torch.linspace(0.0, 30.0, 10).double().numpy()
    bins = np.searchsorted(table, np.abs(rotations))
    assert bins.max() == 3 and np.array_equal(table[bins], np.abs(rotations))  # severity 4: bins 0 to 3
    assert chi_squared_p(np.bincount(bins, minlength=4), np.full(4, rotations.size / 4)) > 1e-3
    moved = rotations[rotations != 0]
    assert abs((moved < 0).sum() - moved.size / 2) < 4 * math.sqrt(moved.size / 4)
    assert np.all(magnitudes[taken][drawn == Primitive.SOLARIZE] >= 0)  # unsigned
    fixed, _, _ = _steps(keys_of(1, 100), space, 4, 5, 2)
    assert np.all(fixed == 5)


# ---------------------------------------------------------------- pixels


def reference_mixture(op: AugMix, image: np.ndarray, key: int) -> tuple[np.ndarray, np.ndarray]:
    """torchvision's mixture, in NumPy float32, of chains made step by step
    with :func:`slipstream.ops.policies.apply_primitive` from ``op``'s draws:
    the uint8 result and the float32 mixture before it."""
    weights, depths, ops, magnitudes = draws_of(op, key, *image.shape[:2])
    fill = policies.fill_color(op.fill)
    mix = weights[0] * image.astype(np.float32)
    for i in range(op.mixture_width):
        chain = image
        for s in range(depths[i]):
            step = np.empty_like(image)
            policies.apply_primitive(ops[i, s], magnitudes[i, s], chain, step, fill, op.interpolation == "nearest",
                                     geometry.identity(*image.shape[:2]))
            chain = step
        mix += weights[1 + i] * chain.astype(np.float32)
    assert mix.dtype == np.float32
    return mix.astype(np.uint8), mix


@functools.lru_cache(maxsize=None)
def compiled(op: AugMix):
    """``op``'s per-sample code, compiled once per test session."""
    return njit(op.generate_code())


def run_compiled(op: AugMix, image: np.ndarray, key: int) -> np.ndarray:
    code = compiled(op)
    buffers = [np.empty_like(image) for _ in range(3)] + [np.empty(image.shape, np.float32), np.empty(geometry.SIZE)]
    return code(image, *buffers, np.uint64(key), op.runtime_values()).copy()


@pytest.mark.parametrize("op", [AugMix(), AugMix(severity=10, mixture_width=2, chain_depth=3, alpha=0.5,
                                                 interpolation="nearest", fill=(20, 200, 90)),
                                AugMix(severity=6, all_ops=False, fill=128)], ids=["default", "severe", "partial"])
def test_the_mixture_is_torchvisions_of_the_chains_truncated(photo, op):
    rounded_differ = 0
    for key in keys_of(31, 6):
        ours = run_compiled(op, photo, int(key))
        expected, mix = reference_mixture(op, photo, int(key))
        assert np.array_equal(ours, expected)
        assert not np.array_equal(ours, photo)
        rounded_differ += int((np.rint(mix) != expected).sum())
    assert rounded_differ > 1000  # truncating, not rounding, decides many pixels


def test_augmix_magnitudes_compute_pillows_pixels(photo):
    """The magnitudes AugMix adds to the other policies': posterize to 4, 3,
    2, 1 bits (Pillow's) and 0 (black, torchvision's tensor posterize), and
    translations to a third of the size."""
    fill = (9, 99, 199)
    for bits in (4, 3, 2, 1):
        out = np.empty_like(photo)
        policies.apply_primitive(int(Primitive.POSTERIZE), float(bits), photo, out, np.zeros(3, np.uint8), True,
                                 geometry.identity(*photo.shape[:2]))
        assert np.array_equal(out, np.array(ImageOps.posterize(Image.fromarray(photo), bits)))
    out = np.empty_like(photo)
    policies.apply_primitive(int(Primitive.POSTERIZE), 0.0, photo, out, np.zeros(3, np.uint8), True,
                             geometry.identity(*photo.shape[:2]))
    assert not out.any()
    space = augmix.augmix_space(True)
    for op in (Primitive.TRANSLATE_X, Primitive.TRANSLATE_Y):
        row = list(space[0]).index(op)
        for b in (4, 9):
            for sign in (1, -1):
                magnitude = sign * policies.magnitude_of(space, row, b, *photo.shape[:2])
                out = np.empty_like(photo)
                policies.apply_primitive(int(op), magnitude, photo, out, np.array(fill, np.uint8), False,
                                         geometry.identity(*photo.shape[:2]))
                assert np.array_equal(out, pillow_reference(photo, op, magnitude, fill, Image.BILINEAR))


# ---------------------------------------------------------------- in a loader


def test_augmix_in_a_loader_is_deterministic_across_threads_and_resumes_exactly(dataset):
    pipeline = {"image": [ss.ops.RandomResizedCrop(40), AugMix(severity=5, fill=(124, 116, 104))], "label": []}

    def loader(threads: int = 1) -> ss.Loader:
        return ss.Loader(dataset, 8, pipeline, order=ss.Order("random", seed=4), num_threads=threads, verbose=False)

    whole = [(x.numpy().copy(), y.numpy().copy()) for x, y in loader()]
    threaded = [(x.numpy().copy(), y.numpy().copy()) for x, y in loader(threads=2)]
    with loader() as interrupted:
        batches = iter(interrupted)
        first = [(x.numpy().copy(), y.numpy().copy()) for x, y in (next(batches), next(batches))]
        state = interrupted.state_dict()
    resumed = loader()
    resumed.load_state_dict(state)
    rest = [(x.numpy().copy(), y.numpy().copy()) for x, y in resumed]
    assert len(whole) == 6 and len(rest) == 4
    for (x1, y1), (x2, y2), (x3, y3) in zip(whole, threaded, first + rest):
        assert np.array_equal(y1, y2) and np.array_equal(y1, y3)
        assert np.array_equal(x1, x2) and np.array_equal(x1, x3)
    plain = ss.Loader(dataset, 8, {"image": [ss.ops.RandomResizedCrop(40)], "label": []},
                       order=ss.Order("random", seed=4), verbose=False)
    changed = sum(int(not np.array_equal(a, b)) for (xa, _), (xb, _) in zip(whole, plain) for a, b in zip(xa, xb))
    assert changed > 40  # nearly every sample is a mixture that differs from its crop


def test_augmix_declares_no_transform_and_boxes_asked_to_follow_it_are_refused(annotated):
    from slipstream.compiler import State
    from slipstream.ops import BoundingBoxes

    declared = AugMix().declare(State((32, 48, 3), np.dtype(np.uint8)))[1]
    assert all(a.name != geometry.TRANSFORM for a in declared)
    assert AugMix.geometry is ss.compiler.Geometry.UNTRACKED
    path, _ = annotated
    pipelines = {"image": [ss.ops.Resize((64, 64)), AugMix()], "boxes": [BoundingBoxes(follow="image")],
                 "labels": None, "points": None, "masks": None, "mask": None}
    with pytest.raises(ss.PipelineError, match=r"follows pipeline 'image', where .*AugMix.* moves pixels with no "
                                               r"single map .* apply it in a pipeline without boxes"):
        ss.Loader(path, 8, pipelines, verbose=False)


@pytest.mark.parametrize(("make", "message"), [
    (lambda: AugMix(severity=0), r"AugMix: severity must be an int in \[1, 10\], got 0"),
    (lambda: AugMix(severity=11), r"severity must be an int in \[1, 10\], got 11"),
    (lambda: AugMix(severity=2.5), r"severity must be an int in \[1, 10\], got 2.5"),
    (lambda: AugMix(mixture_width=0), r"AugMix: mixture_width must be an int in \[1, 32\], got 0"),
    (lambda: AugMix(mixture_width=10**8), r"AugMix: mixture_width must be an int in \[1, 32\], got 100000000"),
    (lambda: AugMix(chain_depth=1.5), "AugMix: chain_depth must be an int <= 16, got 1.5"),
    (lambda: AugMix(alpha=0), r"AugMix: alpha must be a number > 0, got 0"),
    (lambda: AugMix(alpha=float("nan")), r"AugMix: alpha must be a number > 0, got nan"),
    (lambda: AugMix(all_ops="yes"), "AugMix: all_ops must be a bool, got 'yes'"),
    (lambda: AugMix(interpolation="bicubic"), "AugMix: interpolation must be 'nearest' or 'bilinear', got 'bicubic'"),
    (lambda: AugMix(fill=(1, 2)), r"AugMix: fill must be None \(black\), a number or 3 numbers \(R, G, B\)"),
])
def test_bad_arguments_are_refused_with_the_reason(make, message):
    with pytest.raises(ss.ArgumentError, match=message):
        make()


def test_a_non_rgb_image_is_refused_with_the_reason(dataset):
    pipeline = {"image": [ss.ops.RandomResizedCrop(40), ss.ops.ToTensor(), AugMix()], "label": []}
    with pytest.raises(ss.SlipstreamError, match=r"AugMix takes \(height, width, 3\) uint8 images"):
        ss.Loader(dataset, 8, pipeline, verbose=False)
