"""JPEGs re-coded into restart-interval tiles: the same pixels, and region
decodes that read only the tiles they need give exactly what the original
file gives."""

from __future__ import annotations

import numpy as np
import pytest

import jpeg_corpus
from slipstream import native
from slipstream.errors import ArgumentError, DecodeError
from slipstream.native import DecodeFlags, Interp
from test_native_decode import SCALES, random_regions

WIDTHS = (8, 32, 64)


def restart_interval(jpeg: bytes) -> int:
    """The MCU count of the DRI segment (0 without one)."""
    at = jpeg.find(b"\xff\xdd\x00\x04")
    return 0 if at < 0 else int.from_bytes(jpeg[at + 4:at + 6], "big")


def mcu_width(jpeg: bytes) -> int:
    info = native.jpeg_info(jpeg)
    return 8 if info.components == 1 else info.mcu_width


def test_recoding_keeps_every_pixel_and_tiles_whole_rows(corpus):
    for s in corpus:
        original = native.jpeg_decode(s.data)
        for width in WIDTHS:
            tiled = native.jpeg_add_restart_markers(s.data, width)
            np.testing.assert_array_equal(native.jpeg_decode(tiled), original, err_msg=f"{s.name} width={width}")
            info = native.jpeg_info(tiled)
            assert not info.progressive, s.name
            interval, mcu = restart_interval(tiled), mcu_width(s.data)
            columns = -(-s.width // mcu)
            assert interval >= 1 and columns % interval == 0, (s.name, width, interval, columns)
            assert interval == 1 or interval * mcu <= width, (s.name, width, interval)


def test_tile_width_is_the_widest_divisor_that_fits(photo):
    # 500 pixels of 16-pixel MCUs: 32 columns, so 32 pixels -> 2 MCUs, 100 -> 4, 1000 -> the whole row.
    for width, expected in ((32, 2), (100, 4), (127, 4), (128, 8), (1000, 32), (1, 1)):
        assert restart_interval(native.jpeg_add_restart_markers(photo.data, width)) == expected, width


@pytest.mark.parametrize("width", WIDTHS)
def test_regions_of_tiles_equal_regions_of_the_original(corpus, width):
    rng = np.random.default_rng(width)
    for s in corpus:
        tiled = native.jpeg_add_restart_markers(s.data, width)
        for d in SCALES:
            for y, x, h, w in random_regions(rng, s.height, s.width, 10):
                flags = DecodeFlags.FLIP_X if rng.random() < 0.5 else DecodeFlags.DEFAULT
                np.testing.assert_array_equal(
                    native.jpeg_decode(tiled, y, x, h, w, scale_denom=d, flags=flags),
                    native.jpeg_decode(s.data, y, x, h, w, scale_denom=d, flags=flags),
                    err_msg=f"{s.name} width={width} d={d} region={(y, x, h, w)} flags={flags}",
                )


@pytest.mark.parametrize("interp", [Interp.AREA, Interp.BILINEAR])
def test_crop_resize_of_tiles_equals_crop_resize_of_the_original(corpus, interp):
    rng = np.random.default_rng(int(interp))
    for s in corpus:
        tiled = native.jpeg_add_restart_markers(s.data, 32)
        for y, x, h, w in random_regions(rng, s.height, s.width, 10):
            out_h, out_w = int(rng.integers(1, 64)), int(rng.integers(1, 64))
            flags = DecodeFlags.FLIP_X if rng.random() < 0.5 else DecodeFlags.DEFAULT
            np.testing.assert_array_equal(
                native.jpeg_decode_crop_resize(tiled, y, x, h, w, out_h, out_w, flags, interp),
                native.jpeg_decode_crop_resize(s.data, y, x, h, w, out_h, out_w, flags, interp),
                err_msg=f"{s.name} region={(y, x, h, w)} out={(out_h, out_w)} flags={flags}",
            )


def test_progressive_input_becomes_baseline_tiles():
    s = jpeg_corpus.make_sample(251, 333, "RGB", 2, seed=3, progressive=True)
    tiled = native.jpeg_add_restart_markers(s.data, 32)
    assert native.jpeg_info(s.data).progressive and not native.jpeg_info(tiled).progressive
    np.testing.assert_array_equal(native.jpeg_decode(tiled, 100, 150, 60, 70),
                                  native.jpeg_decode(s.data, 100, 150, 60, 70))


def test_damaged_tiles_fail_cleanly_or_decode_in_shape(photo):
    """Truncations and wrong restart numbers either raise DecodeError or,
    where the damage lies outside the region, decode the region in shape."""
    tiled = native.jpeg_add_restart_markers(photo.data, 32)
    region = (200, 300, 100, 120)
    expected = native.jpeg_decode(photo.data, *region)
    damaged = [tiled[:n] for n in range(len(tiled) // 3, len(tiled), len(tiled) // 9)]
    markers = [i for i in range(len(tiled) - 1) if tiled[i] == 0xFF and 0xD0 <= tiled[i + 1] <= 0xD7]
    for i in markers[::40]:
        renumbered = bytearray(tiled)
        renumbered[i + 1] = 0xD0 + (tiled[i + 1] - 0xD0 + 3) % 8
        damaged.append(bytes(renumbered))
    outcomes = set()
    for data in damaged:
        try:
            block = native.jpeg_decode(data, *region)
        except DecodeError:
            outcomes.add("error")
        else:
            assert block.shape == expected.shape
            outcomes.add("decoded")
    assert "error" in outcomes


def test_bad_arguments_and_data_are_refused(photo):
    with pytest.raises(ArgumentError, match="interval_width"):
        native.jpeg_add_restart_markers(photo.data, 0)
    with pytest.raises(DecodeError, match="SOI"):
        native.jpeg_add_restart_markers(b"\x89PNG\r\n\x1a\n" + bytes(100))
    with pytest.raises(DecodeError):
        native.jpeg_add_restart_markers(photo.data[: len(photo.data) // 2])
