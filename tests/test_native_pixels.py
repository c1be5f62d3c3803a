"""Resampling and packing kernels against float64 NumPy references."""

from __future__ import annotations

import numpy as np
import pytest

import jpeg_corpus
from slipstream import ArgumentError, native
from slipstream.native import Dtype, Interp


@pytest.mark.parametrize("interp", list(Interp))
@pytest.mark.parametrize("channels", [1, 3, 4])
def test_resize_within_one_of_float64_reference(interp, channels):
    rng = np.random.default_rng(channels)
    name = interp.name.lower()
    for _ in range(60):
        h, w = int(rng.integers(1, 120)), int(rng.integers(1, 120))
        img = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
        y, x = int(rng.integers(0, h)), int(rng.integers(0, w))
        ch, cw = int(rng.integers(1, h - y + 1)), int(rng.integers(1, w - x + 1))
        oh, ow = int(rng.integers(1, 150)), int(rng.integers(1, 150))
        got = native.resize(img, y, x, ch, cw, oh, ow, interp)
        ref = jpeg_corpus.resize_reference(img, y, x, ch, cw, oh, ow, name)
        assert got.shape == (oh, ow, channels)
        assert np.abs(got.astype(int) - ref).max() <= 1, (h, w, (y, x, ch, cw), (oh, ow))
        np.testing.assert_array_equal(native.resize(img, y, x, ch, cw, oh, ow, interp, flip_x=True), got[:, ::-1])


def test_resize_region_with_whole_pixel_edges_is_resize_and_shifts_smoothly():
    rng = np.random.default_rng(9)
    img = rng.integers(0, 256, (60, 80, 3), dtype=np.uint8)
    for interp in Interp:
        for y, x, h, w, oh, ow in [(0, 0, 60, 80, 30, 40), (5, 7, 31, 43, 64, 20), (10, 3, 1, 70, 9, 9)]:
            np.testing.assert_array_equal(native.resize_region(img, y, x, h, w, oh, ow, interp),
                                          native.resize(img, y, x, h, w, oh, ow, interp))
    smooth = np.repeat(np.linspace(0, 255, 64)[None, :, None], 16, axis=0).repeat(3, axis=2).astype(np.uint8)
    left = native.resize_region(smooth, 0, 10.0, 16, 32, 16, 32, Interp.BILINEAR).astype(int)
    shifted = native.resize_region(smooth, 0, 10.5, 16, 32, 16, 32, Interp.BILINEAR).astype(int)
    assert 1 <= (shifted - left)[:, 2:-2].mean() <= 3  # half a pixel of a 4-per-pixel ramp: about 2 levels
    with pytest.raises(ArgumentError, match="does not lie inside the 16 x 64 image"):
        native.resize_region(smooth, 0, 40.5, 16, 24, 4, 4)


def test_resize_identity_and_constant():
    rng = np.random.default_rng(5)
    img = rng.integers(0, 256, (50, 70, 3), dtype=np.uint8)
    for interp in Interp:
        np.testing.assert_array_equal(native.resize(img, 5, 6, 30, 40, 30, 40, interp), img[5:35, 6:46])
        flat = np.full((33, 47, 3), 173, np.uint8)
        assert (native.resize(flat, 1, 2, 30, 41, 224, 17, interp) == 173).all()


def test_resize_ignores_pixels_outside_the_crop():
    img = np.zeros((40, 40, 3), np.uint8)
    img[10:30, 10:30] = 200
    for interp in Interp:
        for size in ((7, 7), (20, 20), (64, 64)):
            assert (native.resize(img, 10, 10, 20, 20, *size, interp) == 200).all()


def test_resize_strided_source_and_output():
    rng = np.random.default_rng(6)
    canvas = rng.integers(0, 256, (80, 90, 3), dtype=np.uint8)
    src = canvas[5:65, 7:77]
    expected = native.resize(np.ascontiguousarray(src), 3, 4, 50, 60, 31, 29, Interp.BILINEAR)
    out_canvas = np.zeros((40, 50, 3), np.uint8)
    out = native.resize(src, 3, 4, 50, 60, 31, 29, Interp.BILINEAR, out=out_canvas[2:33, 3:32])
    np.testing.assert_array_equal(out, expected)
    assert out_canvas[:2].sum() == 0 and out_canvas[33:].sum() == 0 and out_canvas[:, :3].sum() == 0


def pack_reference(img, mean, std, dtype):
    x = img.astype(np.float64)
    if mean is not None:
        x = (x - np.asarray(mean, np.float64)) / np.asarray(std, np.float64)
    with np.errstate(over="ignore"):  # values beyond float16's range become inf, as in the kernel
        return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.uint8, np.float16, np.float32])
@pytest.mark.parametrize("layout", ["CHW", "HWC"])
def test_pack_exact_against_numpy(dtype, layout):
    rng = np.random.default_rng(7)
    mean, std = (123.675, 116.28, 103.53), (58.395, 57.12, 57.375)
    for h, w in ((1, 1), (17, 31), (224, 224)):
        img = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        img[0, 0] = (0, 128, 255)
        norm = (None, None) if dtype == np.uint8 else (mean, std)
        got = native.pack(img, dtype, *norm, layout=layout)
        ref = pack_reference(img, *norm, dtype)
        if layout == "CHW":
            ref = ref.transpose(2, 0, 1)
        assert got.dtype == dtype and got.shape == ref.shape
        np.testing.assert_array_equal(got.view(np.uint8), np.ascontiguousarray(ref).view(np.uint8))


def test_pack_float16_rounding_covers_subnormals_and_ties():
    img = np.arange(256, dtype=np.uint8).reshape(16, 16, 1)
    for mean, std in ((0.0, 1.0), (127.5, 1e-3), (0.0, 65519.0), (100.0, 3e5), (1.0, 2 ** 20)):
        got = native.pack(img, np.float16, mean, std)
        np.testing.assert_array_equal(got.view(np.uint16), pack_reference(img, mean, std, np.float16)
                                      .transpose(2, 0, 1).view(np.uint16))


def test_pack_rgb_float16_is_exact_for_any_normalization():
    """Planar float16 from RGB, the loader's case, has a vector path that is
    taken only where it gives the double-precision result exactly: every
    byte value of every channel, at widths around its 8-pixel step, for
    usual and awkward normalizations (ties, subnormals, overflow)."""
    rng = np.random.default_rng(9)
    values = np.arange(256, dtype=np.uint8)
    norms = [((123.675, 116.28, 103.53), (58.395, 57.12, 57.375)), ((0.0, 0.0, 0.0), (1.0, 1.0, 1.0)),
             ((127.5, 127.5, 127.5), (127.5, 127.5, 127.5)), ((127.5, 0.0, 100.0), (1e-3, 65519.0, 3e5)),
             ((1.0, 2.0, 3.0), (2.0 ** 20, 2.0 ** -10, 7.0))]
    norms += [(tuple(rng.uniform(-300, 300, 3)), tuple(rng.uniform(1e-3, 300, 3))) for _ in range(20)]
    for (mean, std), width in zip(norms, [8, 9, 15, 16, 17, 23, 31, 37] * 4):
        img = np.stack([rng.permutation(np.resize(values, width * 32)).reshape(32, width) for _ in range(3)], axis=-1)
        got = native.pack(img, np.float16, mean, std)
        np.testing.assert_array_equal(got.view(np.uint16),
                                      pack_reference(img, mean, std, np.float16).transpose(2, 0, 1).view(np.uint16))


def test_pack_into_a_batch_slot_of_a_torch_tensor():
    import torch

    rng = np.random.default_rng(8)
    batch = torch.zeros((4, 3, 20, 30), dtype=torch.float32)
    img = rng.integers(0, 256, (20, 30, 3), dtype=np.uint8)
    native.pack(img, mean=(1, 2, 3), std=(4, 5, 6), out=batch[2])
    ref = pack_reference(img, (1, 2, 3), (4, 5, 6), np.float32).transpose(2, 0, 1)
    np.testing.assert_array_equal(batch[2].numpy(), ref)
    assert batch[[0, 1, 3]].abs().sum() == 0


def test_pack_rejects_bad_arguments():
    img = np.zeros((4, 4, 3), np.uint8)
    with pytest.raises(ArgumentError, match="uint8"):
        native.pack(img, Dtype.UINT8, mean=1, std=1)
    with pytest.raises(ArgumentError, match="non-zero"):
        native.pack(img, np.float32, mean=0, std=0)
    with pytest.raises(ArgumentError, match="3 numbers"):
        native.pack(img, np.float32, mean=(1, 2), std=1)
    with pytest.raises(ArgumentError, match="float64"):
        native.pack(img, np.float64)
    with pytest.raises(ArgumentError, match="writes"):
        native.pack(img, np.float32, out=np.zeros((4, 4, 3), np.float32))


KERNEL_OUTPUTS = r'''
import sys
import numpy as np
sys.path.insert(0, sys.argv[2])
import jpeg_corpus
from slipstream import native
from slipstream.native import Interp

rng = np.random.default_rng(11)
out = {}
for i in range(120):
    channels = (1, 3, 4)[i % 3]
    h, w = int(rng.integers(1, 200)), int(rng.integers(1, 200))
    img = rng.integers(0, 256, (h, w, channels), dtype=np.uint8)
    y, x = float(rng.uniform(0, h - 0.5)), float(rng.uniform(0, w - 0.5))
    ch, cw = float(rng.uniform(0.5, h - y)), float(rng.uniform(0.5, w - x))
    oh, ow = int(rng.integers(1, 260)), int(rng.integers(1, 260))
    out[f"resize{i}"] = native.resize_region(img, y, x, ch, cw, oh, ow, Interp(i % 2), flip_x=bool(i % 4 > 1))
    if channels == 3:
        mean, std = tuple(rng.uniform(0, 255, 3)), tuple(rng.uniform(1, 100, 3))
        out[f"pack{i}"] = native.pack(img, np.float16, mean, std).view(np.uint16)
for i in range(60):
    h, w = int(rng.integers(1, 300)), int(rng.integers(1, 300))
    planes = native.rgb_to_planes(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    y, x = int(rng.integers(0, h)), int(rng.integers(0, w))
    ch, cw = int(rng.integers(1, h - y + 1)), int(rng.integers(1, w - x + 1))
    oh, ow = int(rng.integers(1, 260)), int(rng.integers(1, 260))
    out[f"planes{i}"] = native.planes_crop_resize(planes, h, w, y, x, ch, cw, oh, ow, flags=i % 2,
                                                  interp=Interp(i % 3))
for i in range(20):  # images at most 4 pixels wide, whose chroma is replicated
    h, w = int(rng.integers(1, 300)), int(rng.integers(1, 5))
    planes = native.rgb_to_planes(rng.integers(0, 256, (h, w, 3), dtype=np.uint8))
    y = int(rng.integers(0, h))
    ch = int(rng.integers(1, h - y + 1))
    oh, ow = int(rng.integers(1, 260)), int(rng.integers(1, 40))
    out[f"narrow_planes{i}"] = native.planes_crop_resize(planes, h, w, y, 0, ch, w, oh, ow, flags=i % 2,
                                                         interp=Interp(i % 3))
for i, (h, w) in enumerate([(375, 500), (333, 250), (480, 640)]):
    data = jpeg_corpus.make_sample(h, w).data
    out[f"decode{i}"] = native.jpeg_decode_crop_resize(data, 17, 30, h - 40, w - 61, 300, 300)
np.savez(sys.argv[1], **out)
'''


def test_vector_kernels_give_the_bytes_of_the_portable_ones(tmp_path):
    """Resampling, the planes' crop and float16 packing have vector code for
    CPUs with AVX2; a process told to use the portable code produces the same
    bytes."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    script = tmp_path / "kernels.py"
    script.write_text(KERNEL_OUTPUTS)
    tests = str(Path(__file__).resolve().parent)
    results = {}
    for name, portable in (("vector", "0"), ("portable", "1")):
        env = {**os.environ, "SLIPSTREAM_PORTABLE_KERNELS": portable}
        subprocess.run([sys.executable, str(script), str(tmp_path / f"{name}.npz"), tests], env=env, cwd=tmp_path,
                       check=True)
        results[name] = np.load(tmp_path / f"{name}.npz")
    assert len(results["vector"].files) == len(results["portable"].files) > 210
    for key in results["vector"].files:
        np.testing.assert_array_equal(results["vector"][key], results["portable"][key], err_msg=key)


def test_bicubic_is_pillows_bicubic():
    """Keys' kernel with a = -0.5, antialiased when shrinking, as Pillow's
    ``Image.resize(..., BICUBIC)``: within one level, but for the few pixels
    where Pillow clamps its first pass's overshoot before the second."""
    from PIL import Image

    for seed, (h, w, out_h, out_w) in enumerate([(375, 500, 224, 224), (120, 90, 300, 260), (333, 500, 176, 176)]):
        img = jpeg_corpus.picture(h, w, seed=seed)
        ours = native.resize(img, 0, 0, h, w, out_h, out_w, Interp.BICUBIC).astype(int)
        theirs = np.asarray(Image.fromarray(img).resize((out_w, out_h), Image.Resampling.BICUBIC)).astype(int)
        diff = np.abs(ours - theirs)
        assert diff.max() <= 3 and (diff <= 1).mean() > 0.999, (h, w, out_h, out_w)
        bilinear = native.resize(img, 0, 0, h, w, out_h, out_w, Interp.BILINEAR).astype(int)
        assert np.abs(bilinear - theirs).mean() > 2 * diff.mean()  # a different filter is told apart
