"""Decoding crops, flips and packing: their sampling statistics, their
pixels against a reference, determinism, and a short training run."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from PIL import Image

import slipstream as ss
from slipstream.compiler import random as rnd
from slipstream.ops import (CenterCrop, Normalize, RandomCrop, RandomHorizontalFlip, RandomResizedCrop, Resize,
                            ToTensor)
from slipstream.ops.crops import analytic_crop_params, random_resized_crop_params, resized_random_crop_params
from slipstream.ops.multicrop import multi_crop_regions
from jpeg_corpus import make_sample, picture, pillow_rgb

SCALE, RATIO = (0.08, 1.0), (3 / 4, 4 / 3)
LOG_RATIO = (math.log(RATIO[0]), math.log(RATIO[1]))


def torchvision_reference(rng: np.random.Generator, height: int, width: int) -> tuple[int, int, int, int]:
    """torchvision's documented RandomResizedCrop.get_params, over NumPy's generator."""
    area = height * width
    for _ in range(10):
        target_area = area * rng.uniform(*SCALE)
        aspect = math.exp(rng.uniform(*LOG_RATIO))
        w = int(round(math.sqrt(target_area * aspect)))
        h = int(round(math.sqrt(target_area / aspect)))
        if 0 < w <= width and 0 < h <= height:
            return int(rng.integers(0, height - h + 1)), int(rng.integers(0, width - w + 1)), h, w
    in_ratio = width / height
    if in_ratio < min(RATIO):
        w, h = width, int(round(width / min(RATIO)))
    elif in_ratio > max(RATIO):
        h, w = height, int(round(height * max(RATIO)))
    else:
        w, h = width, height
    return (height - h) // 2, (width - w) // 2, h, w


def key(seed: int, index: int, epoch: int = 0, stream: int = 0) -> np.uint64:
    """The random key of a sample in random stream ``stream`` (a NumPy
    uint64: Python ints above 2**63 do not convert to Numba's int64)."""
    return np.uint64(rnd.sample_key(np.uint64(seed), epoch, index, stream))


def decoder_stream(loader: ss.Loader, output: str = "image") -> int:
    """The random stream of the decoder that starts ``output``'s pipeline."""
    return loader.compiled.graph.pipelines[output][0].stream


def ks_pvalue(a: np.ndarray, b: np.ndarray) -> float:
    """Two-sample Kolmogorov-Smirnov test, asymptotic p-value."""
    a, b = np.sort(a), np.sort(b)
    grid = np.concatenate([a, b])
    d = np.abs(np.searchsorted(a, grid, "right") / a.size - np.searchsorted(b, grid, "right") / b.size).max()
    n = a.size * b.size / (a.size + b.size)
    lam = (math.sqrt(n) + 0.12 + 0.11 / math.sqrt(n)) * d
    return float(min(1.0, max(0.0, 2 * sum((-1) ** (k - 1) * math.exp(-2 * k * k * lam * lam)
                                            for k in range(1, 101)))))


@pytest.mark.parametrize("height, width", [(375, 500), (500, 333), (64, 400)])
def test_random_resized_crop_matches_torchvision_statistics(height, width):
    draws = 20_000
    ours = np.array([random_resized_crop_params(key(7, i), height, width, *SCALE,
                                                *LOG_RATIO, 10) for i in range(draws)])
    rng = np.random.default_rng(0)
    reference = np.array([torchvision_reference(rng, height, width) for _ in range(draws)])
    for crops in (ours, reference):  # inside the image
        y, x, h, w = crops.T
        assert (y >= 0).all() and (x >= 0).all() and (h >= 1).all() and (w >= 1).all()
        assert (y + h <= height).all() and (x + w <= width).all()
    for statistic in (lambda c: c[:, 2] * c[:, 3] / (height * width), lambda c: np.log(c[:, 3] / c[:, 2]),
                      lambda c: c[:, 0] / height, lambda c: c[:, 1] / width):
        assert ks_pvalue(statistic(ours), statistic(reference)) > 0.01


def test_analytic_crops_fit_and_cover_the_scale_range():
    crops = np.array([analytic_crop_params(key(1, i), 375, 500, *SCALE, *LOG_RATIO)
                      for i in range(5000)])
    y, x, h, w = crops.T
    assert (y + h <= 375).all() and (x + w <= 500).all() and (h >= 1).all() and (w >= 1).all()
    scales = h * w / (375 * 500)
    assert scales.min() < 0.1 and scales.max() > 0.9
    ratios = w / h
    assert (ratios > 0.7).all() and (ratios < 1.4).all()


# ---------------------------------------------------------------- pixels


@pytest.fixture(scope="module")
def photos(tmp_path_factory):
    """JPEGs of several sizes and subsamplings, and raw copies of the same pixels."""
    samples = [make_sample(h, w, "RGB", ss_, seed=k) for k, (h, w, ss_) in
               enumerate([(375, 500, 2), (333, 251, 0), (240, 320, 1), (97, 131, 2), (500, 375, 2), (60, 40, 0)])]
    folder = tmp_path_factory.mktemp("photos")
    jpeg, raw = folder / "jpeg.slip", folder / "raw.slip"
    ss.write(jpeg, [(s.data,) for s in samples], {"image": ss.RGBImageField()}, workers=0)
    ss.write(raw, [(pillow_rgb(s.data),) for s in samples], {"image": ss.RGBImageField(write_mode="raw")},
             workers=0)
    return samples, jpeg, raw


def reference_crop(full: np.ndarray, region, out_hw, flip=False) -> np.ndarray:
    y, x, h, w = map(int, region)
    return ss.native.resize(full, y, x, h, w, out_hw[0], out_hw[1], ss.native.Interp.BILINEAR, flip_x=flip)


@pytest.mark.parametrize("size", [224, 96, 32])
def test_fused_crops_match_pillow_decode_crop_resize(photos, size):
    """Reference: Pillow's full decode, cropped and resized by our resampler.
    Where the crop needs full resolution (DCT scale 1), the fused kernel
    decodes exactly what Pillow does and the results agree within 2 on at
    least 99.9% of values (here: all, exactly).  Where it decodes at 1/2 to
    1/8 scale, the DCT's own downscaling replaces part of the resampling:
    a different low-pass filter, so noisy texture differs by a few levels
    (up to 15 at 1/8 on these noisy test images).  There the bound is on
    quality: against an ideal Lanczos reduction of the full decode, the
    fused result is at most 3 levels (mean absolute, of 255) further off
    than the reference is.  Over 900 crops of these images (150 random
    streams), the excess was 0.54 on average and 2.4 at worst, on the 4:2:2
    image decoded at 1/4 scale."""
    samples, jpeg, raw = photos
    seed = 3
    loader = ss.Loader(jpeg, len(samples), {"image": [RandomResizedCrop(size)]},
                       order=ss.Order("sequential", seed=seed))
    (batch,) = next(iter(loader))
    within = total = 0
    for k, sample in enumerate(samples):
        y, x, h, w = random_resized_crop_params(key(seed, k, stream=decoder_stream(loader)), sample.height, sample.width, *SCALE, *LOG_RATIO, 10)
        full = pillow_rgb(sample.data)
        expected = reference_crop(full, (y, x, h, w), (size, size))
        ours = batch[k].numpy().astype(int)
        if ss.native.jpeg_scale_for(h, w, size, size) == 1:
            diff = np.abs(ours - expected)
            within += int((diff <= 2).sum())
            total += diff.size
        else:
            ideal = np.asarray(Image.fromarray(full[y:y + h, x:x + w]).resize((size, size), Image.LANCZOS), int)
            assert np.abs(ours - ideal).mean() <= np.abs(expected.astype(int) - ideal).mean() + 3.0, (k, size)
    assert total == 0 or within / total >= 0.999
    raw_loader = ss.Loader(raw, len(samples), {"image": [RandomResizedCrop(size)]},
                           order=ss.Order("sequential", seed=seed))
    (raw_batch,) = next(iter(raw_loader))
    for k, sample in enumerate(samples):  # raw images take the same regions, resized exactly like the reference
        region = random_resized_crop_params(key(seed, k, stream=decoder_stream(raw_loader)), sample.height,
                                            sample.width, *SCALE, *LOG_RATIO, 10)
        np.testing.assert_array_equal(raw_batch[k].numpy(),
                                      reference_crop(pillow_rgb(sample.data), region, (size, size)))


def test_center_crop_is_exact(photos):
    samples, jpeg, _ = photos
    for pipeline in ([CenterCrop(224, ratio=224 / 256)], [Resize(256), CenterCrop(224)]):
        (batch,) = next(iter(ss.Loader(jpeg, len(samples), {"image": pipeline}, order="sequential")))
        for k, sample in enumerate(samples):
            side = round(224 / 256 * min(sample.height, sample.width))
            region = ((sample.height - side) // 2, (sample.width - side) // 2, side, side)
            np.testing.assert_array_equal(batch[k].numpy(), reference_crop(pillow_rgb(sample.data), region,
                                                                           (224, 224)))


def test_resize_then_random_crop_keeps_the_scale(photos):
    samples, jpeg, raw = photos
    loader = ss.Loader(raw, len(samples), {"image": [Resize(64), RandomCrop(48)]},
                       order=ss.Order("sequential", seed=4))
    (batch,) = next(iter(loader))
    (whole,) = next(iter(ss.Loader(raw, len(samples), {"image": [Resize((40, 30))]}, order="sequential")))
    assert batch.shape == (len(samples), 48, 48, 3) and whole.shape == (len(samples), 40, 30, 3)
    for k, sample in enumerate(samples):
        full = pillow_rgb(sample.data)
        region = resized_random_crop_params(key(4, k, stream=decoder_stream(loader)), sample.height, sample.width, 48, 48, 64)
        assert abs(region[2] / min(sample.height, sample.width) - 48 / 64) < 0.02  # the crop keeps Resize's scale
        np.testing.assert_array_equal(batch[k].numpy(), reference_crop(full, region, (48, 48)))
        np.testing.assert_array_equal(whole[k].numpy(), reference_crop(full, (0, 0, *full.shape[:2]), (40, 30)))
    with pytest.raises(ValueError, match="Resize\\(64\\) gives images of different sizes"):
        ss.Loader(raw, 2, {"image": [Resize(64)]})


@pytest.mark.parametrize("crop", [CenterCrop(72), RandomCrop((48, 72)), CenterCrop((65, 48))])
def test_a_crop_larger_than_the_resized_shorter_side_is_refused(photos, crop):
    # Clipped to the image, such a region would be stretched to the crop's size; torchvision pads it or raises.
    samples, jpeg, raw = photos
    with pytest.raises(ss.ArgumentError, match=rf"{type(crop).__name__}\(.*\) after Resize\(64\) is larger than the "
                                               r"resized image's shorter side 64: the crop must fit"):
        ss.Loader(raw, 2, {"image": [Resize(64), crop]})
    (batch,) = next(iter(ss.Loader(raw, len(samples), {"image": [Resize(64), type(crop)(64)]}, order="sequential")))
    assert batch.shape == (len(samples), 64, 64, 3)  # a side equal to the shorter one fits


def test_flips_happen_with_probability_p_and_fold_into_the_decode(tmp_path):
    n, p = 2000, 0.3
    image = picture(6, 9)
    path = tmp_path / "same.slip"
    ss.write(path, [(image,)] * n, {"image": ss.RGBImageField(write_mode="raw")}, workers=0)
    loader = ss.Loader(path, 500, {"image": [CenterCrop((6, 9), ratio=1.0), RandomHorizontalFlip(p)]},
                       order=ss.Order("sequential", seed=1))
    assert len(loader.compiled.graph.nodes) == 1  # the flip became part of the decode
    flipped = 0
    for (batch,) in loader:
        for sample in batch.numpy():
            if np.array_equal(sample, image[:, ::-1]):
                flipped += 1
            else:
                np.testing.assert_array_equal(sample, image)
    sigma = math.sqrt(p * (1 - p) / n)
    assert abs(flipped / n - p) <= 3 * sigma
    unfused = ss.Loader(path, 500, {"image": [RandomHorizontalFlip(p)]}, order=ss.Order("sequential", seed=1))
    outputs = [s for (b,) in unfused for s in b.numpy()]
    count = sum(int(np.array_equal(s, image[:, ::-1])) for s in outputs)
    assert count + sum(int(np.array_equal(s, image)) for s in outputs) == n  # the others are untouched
    assert abs(count / n - p) <= 3 * sigma


def test_to_tensor_and_normalize_are_one_pass(photos):
    samples, _, raw = photos
    mean, std = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)
    loader = ss.Loader(raw, len(samples), {"image": [CenterCrop(32, ratio=1.0), ToTensor(),
                                                     Normalize(mean, std, torch.float16)]}, order="sequential")
    assert len(loader.compiled.graph.nodes) == 2
    (batch,) = next(iter(loader))
    assert batch.shape == (len(samples), 3, 32, 32) and batch.dtype == torch.float16
    (plain,) = next(iter(ss.Loader(raw, len(samples), {"image": [CenterCrop(32, ratio=1.0)]}, order="sequential")))
    expected = ((plain.numpy().astype(np.float64) / 255 - mean) / std).transpose(0, 3, 1, 2)
    np.testing.assert_allclose(batch.numpy().astype(np.float64), expected, atol=2e-3)
    (unit,) = next(iter(ss.Loader(raw, len(samples), {"image": [CenterCrop(32, ratio=1.0), ToTensor()]},
                                  order="sequential")))
    np.testing.assert_allclose(unit.numpy(), plain.numpy().transpose(0, 3, 1, 2) / 255, atol=1e-6)


# ---------------------------------------------------------------- determinism and training


def test_augmented_batches_are_deterministic_across_threads_and_resume(photos):
    samples, jpeg, _ = photos
    pipeline = {"image": [RandomResizedCrop(64), RandomHorizontalFlip(), ToTensor()]}
    runs = []
    for threads in (1, 2):
        loader = ss.Loader(jpeg, 2, pipeline, order=ss.Order("random", seed=5), num_threads=threads)
        runs.append([b[0].numpy().copy() for b in loader])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a, b)
    loader = ss.Loader(jpeg, 2, pipeline, order=ss.Order("random", seed=5))
    iterator = iter(loader)
    next(iterator)
    state = loader.state_dict()
    resumed = ss.Loader(jpeg, 2, pipeline, order=ss.Order("random", seed=5))
    resumed.load_state_dict(state)
    for a, b in zip(runs[0][1:], resumed):
        np.testing.assert_array_equal(a, b[0].numpy())


def test_a_small_network_learns_through_the_imagenet_train_pipeline(tmp_path):
    rng = np.random.default_rng(0)
    colors = rng.integers(30, 225, (10, 3))
    items = []
    for k in range(400):
        label = k % 10
        image = np.clip(colors[label] + rng.normal(0, 20, (48, 48, 3)), 0, 255).astype(np.uint8)
        image[:, : 8 + 4 * label] //= 2  # a class-dependent dark band
        items.append((ss.native.jpeg_encode(image, 90), label))
    path = tmp_path / "classes.slip"
    ss.write(path, items, {"image": ss.RGBImageField(), "label": ss.IntField()}, workers=0)
    loader = ss.Loader(path, 32, {"image": [RandomResizedCrop(32, scale=(0.5, 1.0)), RandomHorizontalFlip(),
                                            ToTensor(), Normalize((0.5,) * 3, (0.25,) * 3)]}, order=ss.Order(seed=0))
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2), torch.nn.ReLU(), torch.nn.Conv2d(8, 16, 3, stride=2),
                                torch.nn.ReLU(), torch.nn.AdaptiveAvgPool2d(1), torch.nn.Flatten(), torch.nn.Linear(16, 10))
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    losses = []
    while len(losses) < 30:
        for images, labels in loader:
            loss = torch.nn.functional.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            losses.append(loss.item())
            if len(losses) == 30:
                break
    assert np.mean(losses[-5:]) < 0.6 * np.mean(losses[:5])


# ---------------------------------------------------------------- multi-crop and presets


def test_multi_crop_decodes_once_and_matches_its_regions(photos, monkeypatch):
    monkeypatch.setenv("SLIPSTREAM_COUNT_DECODES", "1")
    samples, jpeg, raw = photos
    pipelines = ss.ops.multi_crop_pipelines(global_crops=2, global_size=64, local_crops=3, local_size=24, flip=0.0,
                                            mean=(0, 0, 0), std=(1, 1, 1), dtype=np.float32)
    loader = ss.Loader(jpeg, len(samples), pipelines, order=ss.Order("sequential", seed=2), as_dict=True)
    assert loader.output_names == ["global_0", "global_1", "local_0", "local_1", "local_2"]
    batch = next(iter(loader))
    assert loader.source.decodes.tolist() == [1] * len(samples)  # one decode per sample for all 5 crops
    scale_lo = np.array([0.4, 0.4, 0.05, 0.05, 0.05])
    scale_hi = np.array([1.0, 1.0, 0.4, 0.4, 0.4])
    for k, sample in enumerate(samples):
        regions = multi_crop_regions(key(2, k, stream=decoder_stream(loader, "crops")), sample.height, sample.width, scale_lo, scale_hi, *LOG_RATIO, False)
        full = pillow_rgb(sample.data)
        for name, region, side in zip(loader.output_names, regions, (64, 64, 24, 24, 24)):
            ours = np.rint(batch[name][k].numpy().transpose(1, 2, 0) * 255).astype(int)
            ideal = np.asarray(Image.fromarray(full[region[0]:region[0] + region[2], region[1]:region[1] + region[3]])
                               .resize((side, side), Image.LANCZOS), int)
            reference = reference_crop(full, region, (side, side)).astype(int)  # full decode, our resampler
            # As for single crops: no further from an ideal reduction than the reference is.
            assert np.abs(ours - ideal).mean() <= np.abs(reference - ideal).mean() + 1.0, (k, name, region)
    per_crop = ss.Loader(jpeg, len(samples), {"image": [RandomResizedCrop(64)],
                                              **{f"crop_{k}": ss.View("image", [RandomResizedCrop(24)]) for k in range(4)}},
                         order="sequential")
    next(iter(per_crop))
    assert per_crop.source.decodes.tolist() == [5] * len(samples)


def test_decode_counting_is_off_unless_asked_and_changes_no_pixel(photos, monkeypatch):
    samples, jpeg, _ = photos
    pipelines = {"image": [RandomResizedCrop(48), RandomHorizontalFlip()],
                 **ss.ops.multi_crop_pipelines(global_crops=1, global_size=32, local_crops=1, local_size=16)}
    batches, fingerprints = {}, {}
    for switch in ("", "0", "1"):
        monkeypatch.setenv("SLIPSTREAM_COUNT_DECODES", switch)
        loader = ss.Loader(jpeg, len(samples), pipelines, order=ss.Order("sequential", seed=4), as_dict=True)
        batches[switch] = next(iter(loader))
        counted = 2 if switch == "1" else 0  # the crop's decode and the multi-crop's, per sample
        assert loader.source.count_decodes == (switch == "1")
        assert loader.source.decodes.tolist() == [counted] * len(samples)
        crop = RandomResizedCrop(48).bind(loader.source, "image")
        fingerprints[switch] = crop.fingerprint()
        loader.close()
    assert fingerprints[""] == fingerprints["0"] != fingerprints["1"]  # no cached stage serves both
    for name in batches[""]:
        assert torch.equal(batches[""][name], batches["1"][name]), name


def test_yoked_crops_share_a_center():
    scale_lo, scale_hi = np.array([0.4, 0.05, 0.05]), np.array([1.0, 0.4, 0.4])
    for index in range(200):
        regions = multi_crop_regions(key(0, index), 375, 500, scale_lo, scale_hi, *LOG_RATIO, True)
        cy, cx = regions[0, 0] + regions[0, 2] // 2, regions[0, 1] + regions[0, 3] // 2
        for y, x, h, w in regions[1:]:
            assert 0 <= y and y + h <= 375 and 0 <= x and x + w <= 500
            if h // 2 <= cy <= 375 - h + h // 2 and w // 2 <= cx <= 500 - w + w // 2:  # not clamped
                assert (y + h // 2, x + w // 2) == (cy, cx)


def test_presets_give_what_models_take(photos):
    samples, jpeg, _ = photos
    train = next(iter(ss.Loader(jpeg, 4, ss.ops.presets.imagenet_train(32), order="sequential")))
    val = next(iter(ss.Loader(jpeg, 4, ss.ops.presets.imagenet_val(32), order="sequential")))
    views = next(iter(ss.Loader(jpeg, 4, ss.ops.presets.simclr(32), order="sequential", as_dict=True)))
    assert train[0].shape == val[0].shape == (4, 3, 32, 32) and train[0].dtype == torch.float16
    assert set(views) == {"image", "view_2"} and not torch.equal(views["image"], views["view_2"])


def test_resize_then_crop_keeps_the_flips_of_both(tmp_path):
    """Resize(s, flip_p) + CenterCrop(c, flip_p): one fused decode whose flip
    probability is that of exactly one of the two independent flips."""
    from slipstream.ops.crops import CenterCrop, Resize

    for p, q, expected in ((1.0, 0.0, 1.0), (0.0, 1.0, 1.0), (1.0, 1.0, 0.0), (0.5, 0.5, 0.5)):
        folded = Resize(40, flip_p=p).fold(CenterCrop(32, flip_p=q))
        assert folded.flip_p == pytest.approx(expected)
