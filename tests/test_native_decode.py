"""JPEG decoding kernels against Pillow and against themselves."""

from __future__ import annotations

import numpy as np
import pytest

import jpeg_corpus
from slipstream import native
from slipstream.errors import DecodeError
from slipstream.native import Colorspace, DecodeFlags, Interp, Subsampling

SCALES = (1, 2, 4, 8)


def random_regions(rng: np.random.Generator, h: int, w: int, count: int) -> list[tuple[int, int, int, int]]:
    """Random regions plus ones touching every edge and one-pixel slivers."""
    regions = [(0, 0, h, w), (0, 0, 1, 1), (h - 1, w - 1, 1, 1), (0, w - 1, h, 1), (h - 1, 0, 1, w)]
    for _ in range(count):
        y, x = int(rng.integers(0, h)), int(rng.integers(0, w))
        regions.append((y, x, int(rng.integers(1, h - y + 1)), int(rng.integers(1, w - x + 1))))
    return regions


def test_info_reports_the_header(corpus):
    expected_ss = {0: Subsampling.S444, 1: Subsampling.S422, 2: Subsampling.S420}
    for s in corpus:
        info = native.jpeg_info(s.data)
        assert (info.height, info.width) == (s.height, s.width), s.name
        assert info.progressive == s.progressive, s.name
        if s.mode == "L":
            assert (info.components, info.colorspace, info.subsampling) == (1, Colorspace.GRAY, Subsampling.GRAY)
        elif s.mode == "CMYK":
            assert info.components == 4 and info.colorspace in (Colorspace.CMYK, Colorspace.YCCK), s.name
        else:
            assert (info.components, info.colorspace) == (3, Colorspace.YCBCR), s.name
            assert info.subsampling == expected_ss[s.subsampling], s.name
            assert info.mcu_width == (16 if s.subsampling in (1, 2) else 8), s.name


def test_full_decode_is_identical_to_pillow(corpus):
    for s in corpus:
        ours = native.jpeg_decode(s.data)
        assert ours.shape == (s.height, s.width, 3), s.name
        np.testing.assert_array_equal(ours, jpeg_corpus.pillow_rgb(s.data), err_msg=s.name)


@pytest.mark.parametrize("flags", [DecodeFlags.DEFAULT, DecodeFlags.FAST_IDCT])
def test_region_equals_block_of_full_decode_at_every_scale(corpus, flags):
    rng = np.random.default_rng(1)
    for s in corpus:
        for d in SCALES:
            full = native.jpeg_decode(s.data, scale_denom=d, flags=flags)
            assert full.shape == (-(-s.height // d), -(-s.width // d), 3)
            for y, x, h, w in random_regions(rng, s.height, s.width, 12):
                y0, x0, bh, bw = native.scaled_region(y, x, h, w, d)
                block = native.jpeg_decode(s.data, y, x, h, w, scale_denom=d, flags=flags)
                np.testing.assert_array_equal(
                    block, full[y0:y0 + bh, x0:x0 + bw], err_msg=f"{s.name} d={d} region={(y, x, h, w)}"
                )


def test_flip_is_an_exact_mirror(corpus):
    rng = np.random.default_rng(2)
    for s in corpus[::3]:
        for d in SCALES:
            for y, x, h, w in random_regions(rng, s.height, s.width, 3):
                plain = native.jpeg_decode(s.data, y, x, h, w, d)
                flipped = native.jpeg_decode(s.data, y, x, h, w, d, DecodeFlags.FLIP_X)
                np.testing.assert_array_equal(flipped, plain[:, ::-1], err_msg=s.name)


def test_decode_into_a_strided_buffer_leaves_the_padding_alone(photo):
    canvas = np.full((200, 300, 3), 7, np.uint8)
    view = canvas[10:10 + 94, 20:20 + 125]  # rows padded by the canvas
    out = native.jpeg_decode(photo.data, scale_denom=4, out=view)
    assert out is view
    np.testing.assert_array_equal(view, native.jpeg_decode(photo.data, scale_denom=4))
    mask = np.ones(canvas.shape[:2], bool)
    mask[10:104, 20:145] = False
    assert (canvas[mask] == 7).all()


def test_fast_idct_stays_close_to_accurate(photo):
    accurate = native.jpeg_decode(photo.data).astype(np.float64)
    fast = native.jpeg_decode(photo.data, flags=DecodeFlags.FAST_IDCT).astype(np.float64)
    mse = np.mean((fast - accurate) ** 2)
    assert 0 < mse and 10 * np.log10(255**2 / mse) > 35


@pytest.mark.parametrize("interp", list(Interp))
def test_crop_resize_is_resample_of_the_scaled_decode(corpus, interp):
    """The fused kernel equals: decode at the chosen DCT scale, then resample
    the exact (fractional) crop rectangle - within 1 of a float64 reference."""
    rng = np.random.default_rng(3)
    name = interp.name.lower()
    for s in corpus:
        if s.height * s.width > 10**6:
            continue
        for _ in range(6):
            y, x, h, w = random_regions(rng, s.height, s.width, 1)[-1]
            out_h, out_w = int(rng.integers(1, 64)), int(rng.integers(1, 64))
            d = native.jpeg_scale_for(h, w, out_h, out_w)
            assert d == max([k for k in SCALES if h >= out_h * k and w >= out_w * k], default=1)
            scaled = native.jpeg_decode(s.data, scale_denom=d)
            ref = jpeg_corpus.resize_reference(scaled, y / d, x / d, h / d, w / d, out_h, out_w, name)
            got = native.jpeg_decode_crop_resize(s.data, y, x, h, w, out_h, out_w, interp=interp)
            diff = np.abs(got.astype(int) - ref)
            assert diff.max() <= 1, f"{s.name} crop={(y, x, h, w)} out={(out_h, out_w)} d={d}"
            flipped = native.jpeg_decode_crop_resize(s.data, y, x, h, w, out_h, out_w, DecodeFlags.FLIP_X, interp)
            np.testing.assert_array_equal(flipped, got[:, ::-1])


def test_crop_resize_looks_like_pillow_crop_resize(photo):
    """Against Pillow's full decode + bilinear crop-resize (torchvision's
    RandomResizedCrop on PIL images): the DCT-scaled path is a different but
    equally valid low-pass, so the bound is on PSNR, not on bytes."""
    from PIL import Image

    img = Image.fromarray(jpeg_corpus.pillow_rgb(photo.data))
    for y, x, h, w in [(0, 0, 375, 500), (50, 60, 300, 280), (100, 100, 120, 90)]:
        ours = native.jpeg_decode_crop_resize(photo.data, y, x, h, w, 112, 112, interp=Interp.BILINEAR)
        theirs = np.asarray(img.resize((112, 112), Image.BILINEAR, box=(x, y, x + w, y + h)))
        mse = np.mean((ours.astype(float) - theirs) ** 2)
        assert 10 * np.log10(255**2 / mse) > 30, (y, x, h, w)


def test_crop_resize_upscales_small_crops(photo):
    out = native.jpeg_decode_crop_resize(photo.data, 10, 10, 20, 30, 224, 224, interp=Interp.BILINEAR)
    full = native.jpeg_decode(photo.data)
    ref = jpeg_corpus.resize_reference(full, 10, 10, 20, 30, 224, 224, "bilinear")
    assert np.abs(out.astype(int) - ref).max() <= 1


def test_decode_accepts_bytes_like_inputs(photo):
    import torch

    expected = native.jpeg_decode(photo.data)
    as_array = np.frombuffer(photo.data, np.uint8)
    for data in (bytearray(photo.data), memoryview(photo.data), as_array, torch.from_numpy(as_array.copy())):
        np.testing.assert_array_equal(native.jpeg_decode(data), expected)
    out = torch.zeros((375, 500, 3), dtype=torch.uint8)
    native.jpeg_decode(photo.data, out=out)
    np.testing.assert_array_equal(out.numpy(), expected)


def _without_segments(jpeg: bytes, marker: int) -> bytes:
    """``jpeg`` with every segment of ``marker`` (0xC4 DHT, 0xDB DQT) before its scan removed."""
    out, i = bytearray(jpeg[:2]), 2
    while jpeg[i + 1] != 0xDA:
        length = int.from_bytes(jpeg[i + 2:i + 4], "big")
        if jpeg[i + 1] != marker:
            out += jpeg[i:i + 2 + length]
        i += 2 + length
    return bytes(out + jpeg[i:])


def _on_a_fresh_thread(function, *args):
    """``function(*args)`` on a new thread, whose decompressor has decoded nothing yet."""
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(function, *args).result()


def test_an_image_never_decodes_with_the_tables_of_the_image_before():
    """A reused decompressor keeps libjpeg's tables from image to image; a
    JPEG lacking its own must decode (or fail) the same whatever the thread
    decoded before it."""
    rng = np.random.default_rng(3)
    picture = (rng.random((48, 64, 3)) * 255).astype(np.uint8)
    plain = native.jpeg_encode(picture, 90)  # libjpeg's standard Huffman tables
    other = native.jpeg_encode(picture[::-1].copy(), 40, Subsampling.S444)  # other tables in the same slots
    no_huffman, no_quantization = _without_segments(plain, 0xC4), _without_segments(plain, 0xDB)
    assert len(no_huffman) < len(plain) and len(no_quantization) < len(plain)

    def decode_after(first: bytes, data: bytes):
        native.jpeg_decode(first)
        return native.jpeg_decode(data)

    # Without Huffman tables: the standard ones, as a fresh decompressor has them.
    expected = native.jpeg_decode(plain)
    for first in (plain, other):
        np.testing.assert_array_equal(_on_a_fresh_thread(decode_after, first, no_huffman), expected)
    np.testing.assert_array_equal(_on_a_fresh_thread(native.jpeg_decode, no_huffman), expected)
    # Without quantization tables: refused, however many were seen before.
    for first in (plain, other):
        with pytest.raises(DecodeError, match="quantization table 0"):
            _on_a_fresh_thread(decode_after, first, no_quantization)
    with pytest.raises(DecodeError):
        _on_a_fresh_thread(native.jpeg_decode, no_quantization)
