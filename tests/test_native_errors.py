"""Bad input never crashes: each case raises a clear SlipstreamError subclass."""

from __future__ import annotations

import numpy as np
import pytest

import jpeg_corpus
from slipstream import ArgumentError, DecodeError, SlipstreamError, native
from slipstream.native import Status


def decode_everything(data) -> None:
    """Every decoding entry point on data; each must raise DecodeError."""
    for call in (
        lambda: native.jpeg_info(data),
        lambda: native.jpeg_decode(data),
        lambda: native.jpeg_decode(data, 0, 0, 1, 1),
        lambda: native.jpeg_decode_crop_resize(data, 0, 0, 1, 1, 8, 8),
    ):
        with pytest.raises(DecodeError) as err:
            call()
        assert err.value.status in (Status.ENOTJPEG, Status.ECORRUPT, Status.ETRUNCATED, Status.ETOOBIG,
                                    Status.EUNSUPPORTED)
        assert err.value.detail and err.value.detail in str(err.value)


def test_truncated_jpegs_raise(corpus):
    for s in corpus:
        if s.height * s.width < 64:
            continue  # too little entropy data to cut in many places
        for prefix in jpeg_corpus.truncations(s.data, 12):
            try:
                info = native.jpeg_info(prefix)
            except DecodeError:
                continue  # cut inside the header
            # The header is whole: the full decode must notice the missing data.
            assert (info.height, info.width) == (s.height, s.width)
            with pytest.raises(DecodeError, match="truncated|Premature|Corrupt") as err:
                native.jpeg_decode(prefix)
            assert err.value.status in (Status.ETRUNCATED, Status.ECORRUPT), s.name


def test_garbage_raises():
    rng = np.random.default_rng(0)
    cases = [b"", b"\xff", b"\xff\xd8", jpeg_corpus.png_bytes(), b"GIF89a" + bytes(100),
             rng.integers(0, 256, 5000, dtype=np.uint8).tobytes(),
             b"\xff\xd8" + rng.integers(0, 256, 5000, dtype=np.uint8).tobytes()]
    for data in cases:
        decode_everything(data)


def test_png_bytes_say_not_a_jpeg():
    with pytest.raises(DecodeError, match="not with a JPEG SOI marker") as err:
        native.jpeg_decode(jpeg_corpus.png_bytes())
    assert err.value.status == Status.ENOTJPEG


def test_header_claiming_60000_by_60000_fails_fast(photo):
    huge = jpeg_corpus.with_dimensions(photo.data, 60000, 60000)
    info = native.jpeg_info(huge)
    assert (info.height, info.width) == (60000, 60000)
    with pytest.raises(DecodeError) as err:
        native.jpeg_decode(huge)  # refuses to allocate 10.8 GB
    assert err.value.status == Status.ETOOBIG
    for call in (lambda: native.jpeg_decode(huge, 30000, 30000, 224, 224),
                 lambda: native.jpeg_decode_crop_resize(huge, 0, 0, 60000, 60000, 224, 224),
                 lambda: native.jpeg_decode_crop_resize(huge, 59000, 100, 500, 600, 224, 224)):
        with pytest.raises(DecodeError):
            call()


def test_progressive_header_claiming_huge_size_hits_the_memory_cap():
    prog = jpeg_corpus.make_sample(64, 64, "RGB", 2, progressive=True).data
    huge = jpeg_corpus.with_dimensions(prog, 60000, 60000)
    with pytest.raises(DecodeError) as err:
        native.jpeg_decode_crop_resize(huge, 0, 0, 64, 64, 32, 32)
    assert err.value.status in (Status.ETOOBIG, Status.ECORRUPT, Status.ETRUNCATED)


def test_corrupted_entropy_data_never_crashes(photo):
    """Random byte damage may decode (JPEG has no checksum) or fail; either way
    a SlipstreamError or a correctly shaped image, never a crash."""
    rng = np.random.default_rng(1)
    sos = photo.data.find(b"\xff\xda")
    failures = 0
    for _ in range(300):
        damaged = bytearray(photo.data)
        for at in rng.integers(sos + 14, len(damaged) - 2, 4):
            damaged[at] = int(rng.integers(0, 256))
        try:
            out = native.jpeg_decode_crop_resize(bytes(damaged), 20, 30, 300, 400, 64, 64)
            assert out.shape == (64, 64, 3)
        except DecodeError:
            failures += 1
    assert failures > 0  # damage is detected at least sometimes


def test_wrong_buffer_sizes_and_arguments(photo):
    data = photo.data
    readonly = np.zeros((375, 500, 3), np.uint8)
    readonly.flags.writeable = False
    bad_calls = {
        "out has shape": lambda: native.jpeg_decode(data, out=np.zeros((10, 10, 3), np.uint8)),
        "dtype uint8": lambda: native.jpeg_decode(data, out=np.zeros((375, 500, 3), np.float32)),
        "read-only": lambda: native.jpeg_decode(data, out=readonly),
        "does not lie inside": lambda: native.jpeg_decode(data, 300, 400, 100, 200),
        "empty or negative": lambda: native.jpeg_decode(data, -1, 0, 10, 10),
        "scale_denom": lambda: native.jpeg_decode(data, scale_denom=3),
        "unknown decode flags": lambda: native.jpeg_decode(data, flags=64),
        "interpolation": lambda: native.jpeg_decode_crop_resize(data, 0, 0, 10, 10, 5, 5, interp=9),
        "must be positive": lambda: native.jpeg_decode_crop_resize(data, 0, 0, 10, 10, 0, 5),
        "channels": lambda: native.resize(np.zeros((4, 4, 2), np.uint8), 0, 0, 4, 4, 2, 2),
        "crop": lambda: native.resize(np.zeros((4, 4, 3), np.uint8), 2, 2, 4, 4, 2, 2),
        "packed pixels": lambda: native.resize(np.zeros((4, 8, 3), np.uint8)[:, ::2], 0, 0, 4, 4, 2, 2),
    }
    for message, call in bad_calls.items():
        with pytest.raises(ArgumentError) as err:
            call()
        assert isinstance(err.value, (SlipstreamError, ValueError))
        assert message.split()[0] in str(err.value) or message in str(err.value), (message, str(err.value))


def test_unsupported_processes_say_so(photo):
    """A 12-bit or a lossless (SOF3) JPEG is valid but not decodable here."""
    sof = photo.data.find(b"\xff\xc0")
    twelve_bit = bytearray(photo.data)
    twelve_bit[sof + 4] = 12  # sample precision
    lossless = bytearray(photo.data)
    lossless[sof + 1] = 0xC3
    for data, words in ((twelve_bit, "precision"), (lossless, "SOF type 0xc3")):
        with pytest.raises(DecodeError, match=words) as err:
            native.jpeg_decode(bytes(data))
        assert err.value.status == Status.EUNSUPPORTED


def test_a_height_given_by_a_dnl_marker_is_unsupported_not_corrupt():
    """A frame header of height 0 defers the height to a DNL marker, which
    T.81 allows and libjpeg does not support: every entry point says
    EUNSUPPORTED (valid but unsupported), with libjpeg's message."""
    data = jpeg_corpus.with_dimensions(jpeg_corpus.make_sample(16, 16).data, 0, 16)
    for call in (native.jpeg_info, native.jpeg_check, native.jpeg_decode, native.jpeg_decode_planes,
                 native.jpeg_add_restart_markers):
        with pytest.raises(DecodeError, match=r"Empty JPEG image \(DNL not supported\) \(EUNSUPPORTED\)") as err:
            call(data)
        assert err.value.status == Status.EUNSUPPORTED
