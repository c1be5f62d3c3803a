"""``native.jpeg_check``, the writer's check that a JPEG decodes, against
the decode it stands for: a whole-image decode at scale 1/8.

The check answers from its entropy scanner (``native.jpeg_scan``) when the
scanner proves the image good, and from that decode otherwise.  These tests
show that it is neither weaker nor stricter than the decode: on real photos,
on every flavour of the JPEG corpus, on the hostile corpus and on thousands
of damaged photos (bits flipped, bytes dropped, inserted or overwritten with
markers, restart markers swapped, data cut short), its verdict (status and
message) is the decode's, and the scanner never calls good an image the
decode refuses.  They also show that the scanner, not the fallback, is what
answers for ordinary photos, which is where the time goes.
"""

from __future__ import annotations

import hostile_corpus
import jpeg_corpus
import numpy as np
import pytest
import real_photos

from slipstream import native
from slipstream.errors import DecodeError


def decode_verdict(data: bytes) -> tuple[int, str]:
    """(status, message) of a whole-image decode at 1/8 scale: (0, "") when it decodes."""
    try:
        native.jpeg_decode(data, scale_denom=8)
    except DecodeError as exc:
        return int(exc.status), str(exc).replace("jpeg_decode", "CALL")
    return 0, ""


def check_verdict(data: bytes) -> tuple[int, str]:
    try:
        native.jpeg_check(data)
    except DecodeError as exc:
        return int(exc.status), str(exc).replace("jpeg_check", "CALL")
    return 0, ""


def scans_good(data: bytes) -> bool:
    try:
        return native.jpeg_scan(data)
    except DecodeError:
        return False


def photos(count: int) -> list[bytes]:
    """The first ``count`` of the real photos in their many flavours."""
    found = [data for _, data in real_photos.catalogue()]
    assert len(found) >= count, len(found)
    return found[:count]


def entropy_start(data: bytes) -> int:
    """The offset of the first byte after the (first) SOS segment."""
    sos = data.find(b"\xff\xda")
    return sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big")


def damaged(data: bytes, rng: np.random.Generator, count: int) -> list[bytes]:
    """``count`` copies of ``data`` each damaged once in its entropy-coded
    data (or at its end), in the ways damage happens."""
    start, end = entropy_start(data), len(data) - 2
    out = []
    for k in range(count):
        at = int(rng.integers(start, end))
        b = bytearray(data)
        kind = k % 8
        if kind == 0:  # one bit flipped
            b[at] ^= 1 << int(rng.integers(0, 8))
        elif kind == 1:  # one byte overwritten
            b[at] = int(rng.integers(0, 256))
        elif kind == 2:  # a byte lost
            del b[at]
        elif kind == 3:  # a byte inserted
            b.insert(at, int(rng.integers(0, 256)))
        elif kind == 4:  # a marker in the middle of the data
            b[at:at + 2] = bytes([0xFF, int(rng.choice([0xD0, 0xD3, 0xD9, 0xC4, 0xFF, 0x01, 0xE1]))])
        elif kind == 5:  # cut short, with or without an EOI after the cut
            b = b[:at] + (b"\xff\xd9" if rng.integers(0, 2) else b"")
        elif kind == 6:  # a run of bytes zeroed
            n = int(rng.integers(1, 40))
            b[at:at + n] = bytes(len(b[at:at + n]))
        else:  # junk between the data and EOI
            b[end:end] = bytes(rng.integers(0, 255, int(rng.integers(1, 12)), dtype=np.uint8))
        out.append(bytes(b))
    return out


def with_swapped_restart(data: bytes) -> bytes:
    """A tiled JPEG whose first two restart markers are exchanged."""
    b = bytearray(data)
    first = b.find(b"\xff\xd0", entropy_start(data))
    second = b.find(b"\xff\xd1", first + 2)
    assert first > 0 and second > 0
    b[first + 1], b[second + 1] = 0xD1, 0xD0
    return bytes(b)


def test_ordinary_photos_are_answered_by_the_scanner():
    images = real_photos.catalogue()
    sequential = [(name, d) for name, d in images if not native.jpeg_info(d).progressive]
    assert len(sequential) == sum("progressive=True" not in name for name, _ in images) >= 150
    assert [name for name, d in sequential if not native.jpeg_scan(d)] == []
    for _, d in images:
        native.jpeg_check(d)  # every photo decodes


@pytest.mark.parametrize("sample", jpeg_corpus.corpus(), ids=lambda s: s.name)
def test_every_flavour_gets_the_decode_s_verdict(sample):
    assert check_verdict(sample.data) == decode_verdict(sample.data) == (0, "")
    scanned = native.jpeg_scan(sample.data)
    # The scanner reads the single-scan grey, YCbCr and RGB flavours itself,
    # restart markers included; progressive and CMYK images go to the decode.
    assert scanned == (sample.mode in ("RGB", "L") and not sample.progressive)


def test_tiled_photos_are_read_interval_by_interval():
    for data in photos(6):
        tiled = native.jpeg_add_restart_markers(data, 64)
        assert native.jpeg_scan(tiled)
        native.jpeg_check(tiled)
        swapped = with_swapped_restart(tiled)
        assert not native.jpeg_scan(swapped)
        assert check_verdict(swapped) == decode_verdict(swapped) != (0, "")


@pytest.mark.parametrize("item", hostile_corpus.corpus(), ids=lambda h: h.name)
def test_hostile_inputs_get_the_decode_s_verdict(item):
    verdict = decode_verdict(item.data)
    assert check_verdict(item.data) == verdict
    assert (verdict == (0, "")) == item.decodes
    if scans_good(item.data):
        assert verdict == (0, "")


def test_damaged_photos_get_the_decode_s_verdict():
    rng = np.random.default_rng(38)
    sources = photos(40)
    sources += [native.jpeg_add_restart_markers(d, 48) for d in sources[:8]]
    sources += [jpeg_corpus.make_sample(75, 101, "L", None, seed=5).data,
                jpeg_corpus.make_sample(120, 90, "RGB", 1, seed=6).data,
                jpeg_corpus.encode(jpeg_corpus.Image.fromarray(jpeg_corpus.picture(64, 80, seed=7)), quality=90,
                                   subsampling=2, restart_marker_rows=1)]
    counts = {"scanner good": 0, "decoded by fallback": 0, "refused": 0}
    for data in sources:
        for bad in damaged(data, rng, 60):
            verdict = decode_verdict(bad)
            assert check_verdict(bad) == verdict, f"damaged copy of a {len(data)}-byte JPEG"
            good = scans_good(bad)
            if good:
                assert verdict == (0, ""), "the scanner passed an image the decode refuses"
            counts["scanner good" if good else "decoded by fallback" if verdict == (0, "") else "refused"] += 1
    # Damage of every consequence was seen: most refused, some harmless
    # (a flipped bit in a coefficient's value) passed by the scanner.
    assert counts["refused"] > 1000 and counts["scanner good"] > 50, counts


def test_no_image_is_refused_for_being_read_faster():
    """Files the scanner does not understand (progressive, arithmetic-coded,
    CMYK, 4:1:1) still pass the check when they decode."""
    pixels = jpeg_corpus.picture(48, 64, seed=2)
    image = jpeg_corpus.Image.fromarray(pixels)
    for data in (jpeg_corpus.encode(image, quality=90, progressive=True),
                 native.jpeg_encode(pixels, 90, flags=native.EncodeFlags.ARITHMETIC),
                 jpeg_corpus.encode(image.convert("CMYK"), quality=90)):
        assert not native.jpeg_scan(data)
        native.jpeg_check(data)


def test_every_entry_point_names_the_same_first_fault():
    """A header with two faults, a component sampled 2x2 against the largest
    2x3 (a fraction libjpeg cannot upsample) and more pixels than
    SLIP_LIMIT_PIXELS, gets one verdict from the header reader, the scanner,
    the check and the decode: the sampling, which comes first (fuzz_jpeg_check
    found them answering in two orders)."""
    baseline = jpeg_corpus.encode(jpeg_corpus.Image.fromarray(jpeg_corpus.picture(40, 56, seed=4)), quality=90)
    forged = bytearray(jpeg_corpus.with_dimensions(baseline, 16000, 17000))
    sof = forged.find(b"\xff\xc0")
    assert forged[sof + 11] == 0x22 and forged[sof + 14] == 0x11, "the components' sampling moved"
    forged[sof + 14] = 0x23
    verdicts = []
    for call in (native.jpeg_info, native.jpeg_scan, native.jpeg_check,
                 lambda data: native.jpeg_decode(data, scale_denom=8)):
        with pytest.raises(DecodeError) as caught:
            call(bytes(forged))
        verdicts.append((int(caught.value.status), str(caught.value).split(": ", 1)[-1]))
    assert {status for status, _ in verdicts} == {int(native.Status.EUNSUPPORTED)}, verdicts
    assert all("sampled 2x2 against the largest 2x3" in message for _, message in verdicts), verdicts



def grey_jpeg_of_dc_differences(height: int, width: int, signs: np.ndarray) -> bytes:
    """A baseline grey JPEG whose k-th block codes a DC difference of
    ``signs[k] * 32767`` (category 15, the largest a DC table may name) and
    no AC coefficient: a DC table of one code ("0", category 15) and an AC
    table of one ("0", end of block)."""
    import struct

    def segment(marker: int, body: bytes) -> bytes:
        return struct.pack(">BBH", 0xFF, marker, len(body) + 2) + body

    assert len(signs) == (height // 8) * (width // 8)
    bits = np.zeros((len(signs), 17), np.uint8)  # the DC code, its 15 value bits, the end of block's code
    bits[:, 1:16] = (np.asarray(signs) > 0)[:, None]
    bits = np.concatenate([bits.ravel(), np.ones(-bits.size % 8, np.uint8)])  # padded with ones (T.81 F.1.2.3)
    entropy = np.packbits(bits).tobytes().replace(b"\xff", b"\xff\x00")
    dc_table = bytes([0x00, 1] + [0] * 15 + [15])
    ac_table = bytes([0x10, 1] + [0] * 15 + [0x00])
    return (b"\xff\xd8" + segment(0xDB, bytes([0]) + bytes([1] * 64))
            + segment(0xC0, struct.pack(">BHHB", 8, height, width, 1) + bytes([1, 0x11, 0]))
            + segment(0xC4, dc_table) + segment(0xC4, ac_table)
            + segment(0xDA, bytes([1, 1, 0x00, 0, 63, 0])) + entropy + b"\xff\xd9")


@pytest.mark.parametrize("sign", [1, -1])
def test_the_scanner_reads_dc_differences_to_the_edge_of_an_int(sign):
    """The scanner keeps each component's DC prediction and calls an image
    good only while it stays within a 32-bit int (beyond, it leaves the
    verdict to the decode).  65,538 differences of 32767 (or -32767) in a
    row take it to 2,147,483,646 (or its negative), still inside; one more
    leaves.  So a difference read with the wrong sign or size moves the
    edge, which these two images find: the first scans good, the second is
    left to the decode, and both get the decode's verdict (libjpeg-turbo
    decodes them: it lets the prediction wrap)."""
    height, width = 8 * 257, 8 * 256  # 65,792 blocks
    for in_a_row, scans in ((65538, True), (65539, False)):
        signs = np.empty(height * width // 64, np.int8)
        signs[:in_a_row] = sign
        signs[in_a_row:] = -sign * (-1) ** np.arange(len(signs) - in_a_row)  # back and forth, ending in range
        data = grey_jpeg_of_dc_differences(height, width, signs)
        assert scans_good(data) is scans, in_a_row
        assert check_verdict(data) == decode_verdict(data), in_a_row
