"""Hostile inputs for the image entry points: every one generated here.

Each :class:`Hostile` says whether a correct decoder must decode it (odd but
valid JPEGs: CMYK, YCCK, progressive, arithmetic-coded, restart markers,
extreme shapes, EXIF orientation) or must refuse it with a
:class:`slipstream.DecodeError` (truncations, foreign formats, garbage,
unsupported precision, headers that lie about their size, scan bombs).
"""

from __future__ import annotations

import dataclasses
import io

import jpeg_corpus
import numpy as np
from PIL import Image
from scan_bomb import progressive_scan_bomb

from slipstream import native

# Markers that stand alone, without a length field after them.
_STANDALONE = {0xD8, 0xD9, 0x01} | set(range(0xD0, 0xD8))


@dataclasses.dataclass(frozen=True)
class Hostile:
    """One input: ``decodes`` True for a valid JPEG, with its pixel size;
    ``foreign`` for another image format, which the writer converts to JPEG
    (as documented) and the JPEG decoders refuse."""

    name: str
    data: bytes
    decodes: bool
    height: int = 0
    width: int = 0
    foreign: bool = False


def markers(data: bytes) -> list[int]:
    """Byte offsets of every marker of a JPEG, in order: header segments by
    their lengths, then the markers inside and between entropy-coded scans
    (restart markers, the next scan's tables, EOI)."""
    found, at = [], 0
    while at + 1 < len(data):
        if data[at] != 0xFF or data[at + 1] in (0x00, 0xFF):
            at += 1
            continue
        code = data[at + 1]
        found.append(at)
        if code in _STANDALONE:
            at += 2
        else:  # a segment with a length; after a scan header the entropy data is scanned byte by byte
            at += 2 + int.from_bytes(data[at + 2:at + 4], "big")
    return found


def truncated_at_every_marker(name: str, data: bytes) -> list[Hostile]:
    """data cut just before each of its markers and just after each marker's
    two bytes (all but the whole file)."""
    cuts = sorted({c for at in markers(data) for c in (at, at + 2) if 0 < c < len(data)})
    return [Hostile(f"{name} cut at byte {c}", data[:c], False) for c in cuts]


def _pillow_bytes(img: Image.Image, fmt: str, **options) -> bytes:
    buf = io.BytesIO()
    img.save(buf, fmt, **options)
    return buf.getvalue()


def _valid(name: str, data: bytes) -> Hostile:
    info = native.jpeg_info(data)
    return Hostile(name, data, True, info.height, info.width)


def ycck(cmyk_jpeg: bytes) -> bytes:
    """A CMYK JPEG re-labelled YCCK: its Adobe APP14 transform flag set to 2,
    so decoders read the components as YCCK (other colours, still valid)."""
    at = cmyk_jpeg.find(b"\xff\xee\x00\x0eAdobe")
    if at < 0:
        raise ValueError("no Adobe APP14 segment")
    patched = bytearray(cmyk_jpeg)
    patched[at + 4 + 11] = 2  # "Adobe", version (2), flags0 (2), flags1 (2), transform (1)
    return bytes(patched)


def with_exif_orientation(data: bytes, orientation: int) -> bytes:
    """A JPEG re-saved by Pillow with an EXIF orientation tag."""
    img = Image.open(io.BytesIO(data))
    exif = Image.Exif()
    exif[0x0112] = orientation
    return _pillow_bytes(img, "JPEG", quality=90, exif=exif.tobytes())


def corpus() -> list[Hostile]:
    """The whole hostile set (about 150 inputs)."""
    rng = np.random.default_rng(7)
    pixels = jpeg_corpus.picture(40, 56, seed=3)
    img = Image.fromarray(pixels)
    baseline = jpeg_corpus.encode(img, quality=90)
    progressive = jpeg_corpus.encode(img, quality=90, progressive=True)
    restarts = jpeg_corpus.encode(img, quality=90, restart_marker_rows=1)
    cmyk = jpeg_corpus.encode(img.convert("CMYK"), quality=90)
    arithmetic = native.jpeg_encode(pixels, 90, flags=native.EncodeFlags.ARITHMETIC)
    sof = baseline.find(b"\xff\xc0")
    twelve_bit = bytearray(baseline)
    twelve_bit[sof + 4] = 12
    lossless = bytearray(baseline)
    lossless[sof + 1] = 0xC3

    items = [
        _valid("baseline 4:2:0", baseline),
        _valid("progressive", progressive),
        _valid("restart marker every MCU row", restarts),
        _valid("arithmetic-coded", arithmetic),
        _valid("CMYK", cmyk),
        _valid("YCCK", ycck(cmyk)),
        _valid("grayscale", jpeg_corpus.encode(img.convert("L"), quality=90)),
        _valid("1x1", jpeg_corpus.encode(Image.fromarray(jpeg_corpus.picture(1, 1)))),
        _valid("1x10000", jpeg_corpus.encode(Image.fromarray(jpeg_corpus.picture(1, 10000)))),
        _valid("10000x1", jpeg_corpus.encode(Image.fromarray(jpeg_corpus.picture(10000, 1)))),
        _valid("EXIF orientation 6 (stored pixels are used, as Pillow and torchvision do by default)",
               with_exif_orientation(baseline, 6)),
        Hostile("zero-length", b"", False),
        Hostile("SOI alone", b"\xff\xd8", False),
        Hostile("SOI + EOI", b"\xff\xd8\xff\xd9", False),
        Hostile("PNG", _pillow_bytes(img, "PNG"), False, 40, 56, foreign=True),
        Hostile("GIF", _pillow_bytes(img, "GIF"), False, 40, 56, foreign=True),
        Hostile("WebP", _pillow_bytes(img, "WEBP", quality=80), False, 40, 56, foreign=True),
        Hostile("12-bit precision", bytes(twelve_bit), False),
        Hostile("lossless (SOF3)", bytes(lossless), False),
        Hostile("16000x16000 header over 40x56 data", jpeg_corpus.with_dimensions(baseline, 16000, 16000), False),
        Hostile("progressive 16000x16000 header", jpeg_corpus.with_dimensions(progressive, 16000, 16000), False),
        Hostile("header claims 0 rows", jpeg_corpus.with_dimensions(baseline, 0, 56), False),
        Hostile("progressive scan bomb: 5,000 legal scans over 2048x2048 grey", progressive_scan_bomb(2048, 2048, 5000),
                False),
    ]
    for n in (1, 2, 3, 100, 4096):
        items.append(Hostile(f"{n} random bytes", rng.integers(0, 256, n, dtype=np.uint8).tobytes(), False))
        items.append(Hostile(f"SOI + {n} random bytes",
                             b"\xff\xd8" + rng.integers(0, 256, n, dtype=np.uint8).tobytes(), False))
    for name, data in (("baseline", baseline), ("progressive", progressive), ("restarts", restarts),
                       ("arithmetic", arithmetic)):
        items += truncated_at_every_marker(name, data)
    return items
