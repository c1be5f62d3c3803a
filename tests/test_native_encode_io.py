"""JPEG encoding for the writer, and positional file reads."""

from __future__ import annotations

import io
import os

import numpy as np
import pytest
from PIL import Image

import jpeg_corpus
from slipstream import ArgumentError, EncodeError, NativeIOError, native
from slipstream.native import EncodeFlags, Subsampling


@pytest.mark.parametrize("subsampling", [Subsampling.S444, Subsampling.S422, Subsampling.S420, Subsampling.S440])
@pytest.mark.parametrize("flags", [EncodeFlags.DEFAULT, EncodeFlags.PROGRESSIVE | EncodeFlags.OPTIMIZE])
def test_encode_roundtrip_through_pillow(subsampling, flags):
    img = jpeg_corpus.picture(61, 83, noise=2.0)
    data = native.jpeg_encode(img, quality=95, subsampling=subsampling, flags=flags)
    info = native.jpeg_info(data)
    assert (info.height, info.width, info.subsampling) == (61, 83, subsampling)
    assert info.progressive == bool(flags & EncodeFlags.PROGRESSIVE)
    decoded = np.asarray(Image.open(io.BytesIO(data)).convert("RGB"))
    np.testing.assert_array_equal(native.jpeg_decode(data), decoded)
    mse = np.mean((decoded.astype(float) - img) ** 2)
    assert 10 * np.log10(255**2 / mse) > 30


def test_encode_grayscale_and_quality_order():
    gray = np.ascontiguousarray(jpeg_corpus.picture(40, 50)[:, :, 0])
    with pytest.raises(ArgumentError, match="packed pixels"):
        native.jpeg_encode(jpeg_corpus.picture(40, 50)[:, :, 0])  # every third byte: not a packed image
    data = native.jpeg_encode(gray)
    assert native.jpeg_info(data).components == 1
    decoded = native.jpeg_decode(data)
    assert (decoded[:, :, 0] == decoded[:, :, 2]).all()
    sizes = [len(native.jpeg_encode(jpeg_corpus.picture(64, 64), quality=q)) for q in (10, 50, 95)]
    assert sizes == sorted(sizes)


def test_encode_into_caller_buffer_and_bound():
    noise = np.random.default_rng(0).integers(0, 256, (67, 45, 3), dtype=np.uint8)
    bound = native.jpeg_encode_bound(67, 45, 3)
    buf = bytearray(bound)
    view = native.jpeg_encode(noise, quality=100, subsampling=Subsampling.S444, out=buf)
    assert 0 < len(view) <= bound
    assert bytes(view) == native.jpeg_encode(noise, quality=100, subsampling=Subsampling.S444)
    with pytest.raises(ArgumentError, match="the JPEG needs [0-9]+ bytes; the output buffer has 100"):
        native.jpeg_encode(noise, quality=100, out=bytearray(100))
    with pytest.raises(ArgumentError, match="quality"):
        native.jpeg_encode(noise, quality=0)
    with pytest.raises(ArgumentError, match="channels"):
        native.jpeg_encode(np.zeros((4, 4, 4), np.uint8))
    assert issubclass(EncodeError, ValueError)


def test_pread_reads_exact_ranges(tmp_path):
    payload = np.random.default_rng(1).integers(0, 256, 100_000, dtype=np.uint8).tobytes()
    path = tmp_path / "pages.bin"
    path.write_bytes(payload)
    fd = os.open(path, os.O_RDONLY)
    try:
        for offset, size in ((0, 10), (4096, 8192), (99_990, 10), (0, 100_000)):
            buf = np.empty(size, np.uint8)
            native.pread(fd, buf, offset)
            assert buf.tobytes() == payload[offset:offset + size]
        with pytest.raises(NativeIOError, match="ended after 10 of 20 bytes") as err:
            native.pread(fd, bytearray(20), 99_990)
        assert isinstance(err.value, OSError)
        with pytest.raises(ArgumentError, match="negative"):
            native.pread(fd, bytearray(1), -1)
    finally:
        os.close(fd)
    with pytest.raises(NativeIOError, match="Bad file descriptor"):
        native.pread(fd, bytearray(1), 0)
