"""JPEGs re-coded into restart-interval tiles: the same pixels, and region
decodes that read only the tiles they need give exactly what the original
file gives."""

from __future__ import annotations

import dataclasses
import io

import numpy as np
import pytest
from PIL import Image

import hostile_corpus
import jpeg_corpus
import real_photos
from slipstream import RGBImageField, native
from slipstream.errors import ArgumentError, DecodeError
from slipstream.native import DecodeFlags, Interp
from test_native_decode import SCALES, random_regions

WIDTHS = (8, 32, 64)


@pytest.fixture(scope="module")
def own_tables(corpus) -> list[jpeg_corpus.Sample]:
    """The sequential images of the corpus coded again with tables counted
    for each (Pillow's optimize=True), one with restart markers every 3 MCUs
    (intervals that do not divide a row), and six real photos of odd sizes
    coded with tables of their own, as most of ImageNet's are."""
    samples = []
    for s in corpus:
        info = native.jpeg_info(s.data)
        if info.progressive or info.components == 4:
            continue
        image = Image.open(io.BytesIO(s.data))
        options = {"subsampling": "keep"} if info.components == 3 else {}
        samples.append(dataclasses.replace(s, name=f"{s.name} optimized",
                                           data=jpeg_corpus.encode(image, optimize=True, quality="keep", **options)))
    samples.append(jpeg_corpus.make_sample(251, 333, "RGB", 2, seed=5, optimize=True, restart_marker_blocks=3))
    photos = real_photos.jpegs(4, "4:4:4", optimize=True) + real_photos.jpegs(1, "4:2:2", start=4, optimize=True)
    for k, data in enumerate(photos + real_photos.jpegs(1, "4:2:0", start=5, optimize=True)):
        info = native.jpeg_info(data)
        samples.append(jpeg_corpus.Sample(f"photo {k}", data, info.height, info.width, "RGB", None, info.progressive))
    return samples


def header_segments(jpeg: bytes) -> list[tuple[int, int, int]]:
    """(offset, marker, length) of each marker segment before the first scan."""
    segments = []
    for at in hostile_corpus.markers(jpeg):
        if jpeg[at + 1] == 0xDA:
            break
        if jpeg[at + 1] != 0xD8:
            segments.append((at, jpeg[at + 1], int.from_bytes(jpeg[at + 2:at + 4], "big")))
    return segments


def dht_tables(jpeg: bytes) -> dict[tuple[int, int], bytes]:
    """The Huffman tables the DHT segments before the first scan define, by
    (class, number): class 0 DC, 1 AC; each as its 16 counts and symbols."""
    tables = {}
    for at, marker, length in header_segments(jpeg):
        p, end = at + 4, at + 2 + length
        while marker == 0xC4 and p < end:
            count = sum(jpeg[p + 1:p + 17])
            tables[jpeg[p] >> 4, jpeg[p] & 15] = jpeg[p + 1:p + 17 + count]
            p += 17 + count
    return tables


def ac_tables(jpeg: bytes) -> dict[int, bytes]:
    return {number: t for (kind, number), t in dht_tables(jpeg).items() if kind == 1}


def restart_interval(jpeg: bytes) -> int:
    """The MCU count of the DRI segment (0 without one)."""
    at = jpeg.find(b"\xff\xdd\x00\x04")
    return 0 if at < 0 else int.from_bytes(jpeg[at + 4:at + 6], "big")


def mcu_width(jpeg: bytes) -> int:
    info = native.jpeg_info(jpeg)
    return 8 if info.components == 1 else info.mcu_width


def test_recoding_keeps_every_pixel_and_tiles_whole_rows(corpus, own_tables):
    for s in corpus + own_tables:
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
def test_regions_of_tiles_equal_regions_of_the_original(corpus, own_tables, width):
    rng = np.random.default_rng(width)
    for s in corpus + own_tables:
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
def test_crop_resize_of_tiles_equals_crop_resize_of_the_original(corpus, own_tables, interp):
    rng = np.random.default_rng(int(interp))
    for s in corpus + own_tables:
        tiled = native.jpeg_add_restart_markers(s.data, 32)
        for y, x, h, w in random_regions(rng, s.height, s.width, 10):
            out_h, out_w = int(rng.integers(1, 64)), int(rng.integers(1, 64))
            flags = DecodeFlags.FLIP_X if rng.random() < 0.5 else DecodeFlags.DEFAULT
            np.testing.assert_array_equal(
                native.jpeg_decode_crop_resize(tiled, y, x, h, w, out_h, out_w, flags, interp),
                native.jpeg_decode_crop_resize(s.data, y, x, h, w, out_h, out_w, flags, interp),
                err_msg=f"{s.name} region={(y, x, h, w)} out={(out_h, out_w)} flags={flags}",
            )


def test_an_image_with_tables_of_its_own_keeps_them_and_the_bits_of_its_ac_coefficients(own_tables):
    """Spliced: the AC tables come through unchanged, and the tiles take the
    original's bytes plus what the markers and the intervals' first DC
    differences cost."""
    for s in own_tables:
        for width in WIDTHS:
            tiled = native.jpeg_add_restart_markers(s.data, width)
            assert ac_tables(tiled) == ac_tables(s.data), (s.name, width)
            info = native.jpeg_info(tiled)
            mcu_height = 8 if info.components == 1 else info.mcu_height
            mcus = -(-s.height // mcu_height) * -(-s.width // mcu_width(tiled))
            intervals = mcus // restart_interval(tiled)
            assert len(tiled) <= len(s.data) + 8 * intervals + 64, (s.name, width, len(tiled), len(s.data))


def with_an_unused_ac_symbol(jpeg: bytes) -> bytes:
    """The JPEG with one more symbol in AC table 0, which the scan never
    codes: given the next code past the longest ones, so that every other
    symbol keeps its code and the scan decodes as before."""
    for at, marker, length in header_segments(jpeg):
        if marker == 0xC4 and jpeg[at + 4] == 0x10 and length == 2 + 17 + sum(jpeg[at + 5:at + 21]):
            counts, symbols = bytearray(jpeg[at + 5:at + 21]), jpeg[at + 21:at + 2 + length]
            longest = max(i for i in range(16) if counts[i])
            assert longest < 15
            counts[longest + 1] += 1
            unused = next(rs for rs in range(0x11, 0xFB) if 1 <= rs & 15 <= 10 and rs not in symbols)
            table = b"\x10" + bytes(counts) + symbols + bytes([unused])
            segment = b"\xff\xc4" + (2 + len(table)).to_bytes(2, "big") + table
            return jpeg[:at] + segment + jpeg[at + 2 + length:]
    raise AssertionError("no DHT segment of AC table 0 alone")


def test_an_image_with_tables_of_its_own_is_spliced_even_where_they_are_not_the_best():
    """A table of the image's own, even one with a symbol the scan never codes,
    is kept as it is (the AC bits are copied, not coded again)."""
    optimized = jpeg_corpus.make_sample(120, 160, "RGB", 2, seed=3, optimize=True).data
    padded = with_an_unused_ac_symbol(optimized)
    np.testing.assert_array_equal(native.jpeg_decode(padded), native.jpeg_decode(optimized))
    tiled = native.jpeg_add_restart_markers(padded, 32)
    assert ac_tables(tiled) == ac_tables(padded) != ac_tables(optimized)
    np.testing.assert_array_equal(native.jpeg_decode(tiled), native.jpeg_decode(optimized))


def test_an_image_with_general_purpose_tables_is_coded_with_tables_counted_for_it(photo):
    """Pillow writes T.81's example tables, which code every symbol: the tiles
    get tables of only the symbols the image codes, and come out smaller."""
    original = ac_tables(photo.data)
    assert all(sum(t[:16]) == 162 for t in original.values())
    tiled = native.jpeg_add_restart_markers(photo.data, 32)
    assert all(sum(t[:16]) < 162 for t in ac_tables(tiled).values())
    assert len(tiled) < len(photo.data)


def test_tiles_coded_again_come_back_byte_for_byte(corpus, own_tables):
    """Tiles have tables of their own, so coding them again is a splice from
    input with restart markers, which must write exactly what the first
    coding wrote (libjpeg's transcoding or a splice): the same headers,
    tables, DC differences and bits."""
    for s in corpus + own_tables:
        for width in (8, 32):
            tiled = native.jpeg_add_restart_markers(s.data, width)
            assert native.jpeg_add_restart_markers(tiled, width) == tiled, (s.name, width)


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


def with_scans(jpeg: bytes, keep) -> bytes:
    """A progressive JPEG with only the scans whose (Ss, Se, Ah, Al) ``keep``
    accepts: its header, those scans (each with the tables written before
    it) and EOI."""
    bounds = [at for at in hostile_corpus.markers(jpeg) if not 0xD0 <= jpeg[at + 1] <= 0xD7] + [len(jpeg)]
    segments = [jpeg[a:b] for a, b in zip(bounds, bounds[1:])]
    first_scan = next(i for i, s in enumerate(segments) if s[1] == 0xDA)
    out, tables = segments[:first_scan], []
    for segment in segments[first_scan:-1]:
        if segment[1] != 0xDA:
            tables.append(segment)
            continue
        at = 5 + 2 * segment[4]  # past the length, the component count and the components
        if keep(segment[at], segment[at + 1], segment[at + 2] >> 4, segment[at + 2] & 15):
            out += tables + [segment]
        tables = []
    assert segments[-1] == b"\xff\xd9"
    return b"".join(out + [segments[-1]])


def test_progressive_input_with_incomplete_scans_is_refused_and_stored_byte_for_byte():
    """libjpeg-turbo decodes a progressive JPEG whose scans leave coefficients
    unsent or unrefined with block smoothing, which the baseline tiles would
    not get: the re-coding refuses it (EUNSUPPORTED, saying why), and the
    field stores it byte for byte, so the stored pixels are the source's."""
    full = jpeg_corpus.make_sample(64, 96, "RGB", 2, seed=8, progressive=True).data
    dc_only = with_scans(full, lambda ss, se, ah, al: ss == 0)
    first_dc_scan = with_scans(full, lambda ss, se, ah, al: ss == 0 and ah == 0)
    assert native.jpeg_info(dc_only).progressive and len(dc_only) < len(full) // 2
    for data, gap in ((dc_only, "component 0, coefficient 1 never sent"),
                      (first_dc_scan, "component 0, coefficient 0 lacking its 1 lowest bits")):
        native.jpeg_check(data)
        with pytest.raises(DecodeError, match=rf"jpeg_add_restart_markers: a progressive JPEG whose scans leave "
                                              rf"coefficients incomplete \({gap}\): .*block smoothing.* would "
                                              rf"change its pixels \(EUNSUPPORTED\)") as refused:
            native.jpeg_add_restart_markers(data, 32)
        assert refused.value.status == native.Status.EUNSUPPORTED
        field = RGBImageField()
        stored = field.encode(data)
        assert stored.data == data
        record = np.zeros((), field.record_dtype())
        for name, value in stored.record.items():
            record[name] = value
        np.testing.assert_array_equal(field.read(record[()], stored.data), native.jpeg_decode(data))
    # A complete progressive JPEG is still re-coded into baseline tiles with its pixels.
    tiled = RGBImageField().encode(full).data
    assert not native.jpeg_info(tiled).progressive and restart_interval(tiled) > 0
    np.testing.assert_array_equal(native.jpeg_decode(tiled), native.jpeg_decode(full))


def test_coefficients_wider_than_baseline_codes_are_refused_as_unsupported_and_stored_byte_for_byte():
    """A DC difference of 32767 (15 bits) decodes, so jpeg_check passes it,
    but baseline tiles cannot code it: the re-coding refuses it as
    unsupported, saying so, not as corrupt, and the field stores the file
    byte for byte."""
    from test_jpeg_check import grey_jpeg_of_dc_differences

    data = grey_jpeg_of_dc_differences(8, 16, np.array([1, -1]))
    native.jpeg_check(data)
    native.jpeg_decode(data)
    with pytest.raises(DecodeError, match=r"jpeg_add_restart_markers: a DC difference wider than the 11 bits or an "
                                          r"AC coefficient wider than the 10 bits of 8-bit baseline JPEG: the image "
                                          r"decodes, but cannot be re-coded as baseline tiles \(EUNSUPPORTED\)"):
        native.jpeg_add_restart_markers(data, 32)
    assert RGBImageField().encode(data).data == data
