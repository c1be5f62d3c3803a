"""Planar YCbCr 4:2:0 kernels against libjpeg-turbo's own decode, on real
photos of every chroma subsampling and on hostile input."""

from __future__ import annotations

import collections

import jpeg_corpus
import numpy as np
import pytest
import real_photos

from slipstream import native
from slipstream.errors import ArgumentError, DecodeError
from slipstream.native import DecodeFlags, Interp, Subsampling

JFIF_LUMA = np.array([0.299, 0.587, 0.114])


def photos_by_subsampling(per_kind: int = 8) -> dict[Subsampling, list[bytes]]:
    """``per_kind`` photos of each usual subsampling and of grey, by the subsampling their header gives."""
    found: dict[Subsampling, list[bytes]] = collections.defaultdict(list)
    for subsampling in ("4:4:4", "4:2:2", "4:2:0", "4:4:0", "grey"):
        for data in real_photos.jpegs(per_kind, subsampling):
            found[native.jpeg_info(data).subsampling].append(data)
    return found


def luma(image: np.ndarray) -> np.ndarray:
    return image.astype(np.float64) @ JFIF_LUMA


def verdict(call, data: bytes) -> tuple[int, str]:
    """(status, message without the function's name) of ``call(data)``: (0, "") when it succeeds."""
    try:
        call(data)
    except DecodeError as exc:
        return int(exc.status), str(exc).split(": ", 1)[-1]
    return 0, ""


def test_planes_bytes_is_the_documented_layout():
    for h, w in [(1, 1), (1, 7), (7, 1), (375, 500), (65500, 3)]:
        assert native.planes_bytes(h, w) == h * w + 2 * ((h + 1) // 2) * ((w + 1) // 2)
    with pytest.raises(ArgumentError, match=r"planes_bytes: image size 0 x 5 is outside 1 to 65500"):
        native.planes_bytes(0, 5)


def test_a_full_decode_from_planes_matches_libjpeg_turbo_on_photos_of_every_subsampling():
    found = photos_by_subsampling()
    assert set(found) == {Subsampling.S420, Subsampling.S422, Subsampling.S444, Subsampling.S440,
                          Subsampling.GRAY}, sorted(found)
    assert all(len(photos) == 8 for photos in found.values())
    for kind, photos in found.items():
        for data in photos:
            info = native.jpeg_info(data)
            planes = native.jpeg_decode_planes(data)
            assert planes.size == native.planes_bytes(info.height, info.width)
            got = native.planes_crop_resize(planes, info.height, info.width, 0, 0, info.height, info.width,
                                            info.height, info.width, interp=Interp.BILINEAR)
            want = native.jpeg_decode(data)
            difference = np.abs(got.astype(int) - want)
            if kind in (Subsampling.S420, Subsampling.GRAY):
                # The JPEG's own planes: only the chroma upsampling and the conversion's rounding differ.
                assert difference.max() <= 2, (kind, difference.max())
                assert difference.mean() < 0.4, (kind, difference.mean())
            else:
                # Chroma averaged to 4:2:0: the luma stays, colour edges soften.
                assert np.abs(luma(got) - luma(want)).mean() < 1.0, kind


def test_crops_from_planes_follow_the_jpeg_paths_crops():
    rng = np.random.default_rng(0)
    for data in photos_by_subsampling()[Subsampling.S420]:
        info = native.jpeg_info(data)
        planes = native.jpeg_decode_planes(data)
        for interp in (Interp.AREA, Interp.BILINEAR):
            h = int(rng.integers(info.height // 4, info.height + 1))
            w = int(rng.integers(info.width // 4, info.width + 1))
            y, x = int(rng.integers(0, info.height - h + 1)), int(rng.integers(0, info.width - w + 1))
            got = native.planes_crop_resize(planes, info.height, info.width, y, x, h, w, 224, 224,
                                            DecodeFlags.FLIP_X, interp)
            want = native.jpeg_decode_crop_resize(data, y, x, h, w, 224, 224, DecodeFlags.FLIP_X, interp)
            difference = np.abs(got.astype(int) - want)
            assert difference.mean() < 1.0, (interp, (y, x, h, w), difference.mean())
            assert np.percentile(difference, 99) <= 6, (interp, (y, x, h, w))
            plain = native.planes_crop_resize(planes, info.height, info.width, y, x, h, w, 224, 224, 0, interp)
            np.testing.assert_array_equal(plain[:, ::-1], got)


def test_rgb_pixels_become_planes_with_their_luma_and_averaged_chroma():
    rng = np.random.default_rng(1)
    flat = np.broadcast_to(rng.integers(0, 256, 3, dtype=np.uint8), (5, 7, 3)).copy()
    planes = native.rgb_to_planes(flat)
    back = native.planes_crop_resize(planes, 5, 7, 0, 0, 5, 7, 5, 7, interp=Interp.BILINEAR)
    assert np.abs(back.astype(int) - flat).max() <= 2  # a flat colour survives subsampling
    picture = rng.integers(0, 256, (33, 18, 3), dtype=np.uint8)
    planes = native.rgb_to_planes(picture)
    y = planes[:33 * 18].reshape(33, 18)
    assert np.abs(y - luma(picture)).max() <= 0.5 + 1e-9  # luma rounded once
    cb = planes[33 * 18:33 * 18 + 17 * 9].reshape(17, 9).astype(float)
    block = picture[:2, :2].reshape(-1, 3).astype(float).mean(axis=0)
    assert abs(cb[0, 0] - (128 - 0.168736 * block[0] - 0.331264 * block[1] + 0.5 * block[2])) <= 0.5 + 1e-3
    corner = picture[32, 16:18].astype(float).mean(axis=0)  # the last row has one pixel row per chroma sample
    assert abs(cb[16, 8] - (128 - 0.168736 * corner[0] - 0.331264 * corner[1] + 0.5 * corner[2])) <= 0.5 + 1e-3


def test_hostile_planes_and_jpegs_are_refused_with_the_reason():
    data = photos_by_subsampling(1)[Subsampling.S420][0]
    info = native.jpeg_info(data)
    planes = native.jpeg_decode_planes(data)
    with pytest.raises(DecodeError, match=r"planes_crop_resize: the planes of a \d+ x \d+ image are \d+ bytes, but "
                                          r"only \d+ were given \(ETRUNCATED\)"):
        native.planes_crop_resize(planes[:-1], info.height, info.width, 0, 0, 8, 8, 8, 8)
    with pytest.raises(DecodeError, match="ETRUNCATED"):  # a size that disagrees with the bytes
        native.planes_crop_resize(planes, info.height + 2, info.width, 0, 0, 8, 8, 8, 8)
    with pytest.raises(ArgumentError, match=r"crop \(y=0, x=0, h=\d+, w=8\) does not lie inside"):
        native.planes_crop_resize(planes, info.height, info.width, 0, 0, info.height + 1, 8, 8, 8)
    with pytest.raises(ArgumentError, match="unknown interpolation 9"):
        native.planes_crop_resize(planes, info.height, info.width, 0, 0, 8, 8, 8, 8, interp=9)
    with pytest.raises(ArgumentError, match="the planes need"):
        native.jpeg_decode_planes(data, out=np.empty(planes.size - 1, np.uint8))
    with pytest.raises(DecodeError, match=r"jpeg_decode_planes: .*\((ETRUNCATED|ECORRUPT)\)"):
        native.jpeg_decode_planes(data[: len(data) // 2])
    with pytest.raises(DecodeError, match="ENOTJPEG"):
        native.jpeg_decode_planes(b"\x89PNG\r\n\x1a\n" + bytes(64))


def test_decoding_planes_leaves_the_next_rgb_decode_on_the_thread_unchanged():
    data = photos_by_subsampling(1)[Subsampling.S420][0]
    before = native.jpeg_decode(data)
    native.jpeg_decode_planes(data)
    np.testing.assert_array_equal(native.jpeg_decode(data), before)


def test_damaged_420_jpegs_get_the_check_s_verdict_from_the_planes_decode():
    """The planes decode reads on to EOI after the last row, as the RGB
    decode does, so damage that leaves entropy data over (a flipped bit that
    ends the scan early, junk before EOI) is refused, with jpeg_check's
    status and message, instead of giving planes."""
    rng = np.random.default_rng(0)
    data = jpeg_corpus.make_sample(96, 128, "RGB", 2).data
    assert native.jpeg_info(data).subsampling == Subsampling.S420
    sos = data.index(b"\xff\xda")
    start = sos + 2 + int.from_bytes(data[sos + 2:sos + 4], "big")
    junk_before_eoi = data[:-2] + b"\x12\x34\x56\xff\xd9"
    status, message = verdict(native.jpeg_decode_planes, junk_before_eoi)
    assert (status, message) == verdict(native.jpeg_check, junk_before_eoi)
    assert status == native.Status.ECORRUPT and "extraneous bytes before marker 0xd9" in message, message
    refused = 0
    for _ in range(300):
        bad = bytearray(data)
        bad[int(rng.integers(start, len(data) - 2))] ^= 1 << int(rng.integers(0, 8))
        want = verdict(native.jpeg_check, bytes(bad))
        assert verdict(native.jpeg_decode_planes, bytes(bad)) == want
        refused += want != (0, "")
    assert refused > 30, refused  # enough of the damage was fatal to show the verdicts agree


def test_a_full_decode_from_planes_matches_libjpeg_turbo_at_every_small_size():
    """libjpeg-turbo replicates the chroma of images at most 4 pixels wide
    (2 chroma samples or fewer across) instead of interpolating it; the
    planes kernel does too, so the 2-level bound holds at every size."""
    for h in range(1, 9):
        for w in range(1, 9):
            data = jpeg_corpus.encode(jpeg_corpus.Image.fromarray(jpeg_corpus.picture(h, w, seed=10 * h + w)),
                                      quality=95, subsampling=2)
            assert native.jpeg_info(data).subsampling == Subsampling.S420
            planes = native.jpeg_decode_planes(data)
            got = native.planes_crop_resize(planes, h, w, 0, 0, h, w, h, w, interp=Interp.BILINEAR)
            assert np.abs(got.astype(int) - native.jpeg_decode(data)).max() <= 2, (h, w)
