"""Decoding limits: scan bombs and oversized images fail fast, naming the
limit; the limits can be raised, per process or through the environment;
corrupt-data warnings of libjpeg are errors."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

import jpeg_corpus
from scan_bomb import progressive_scan_bomb
from slipstream import ArgumentError, DecodeError, RGBImageField, native
from slipstream.native import Limit, Status


@pytest.fixture()
def limits():
    """Restores the process's limits after a test that changes them."""
    saved = {limit: native.get_limit(limit) for limit in Limit}
    yield
    for limit, value in saved.items():
        native.set_limit(limit, value)


@pytest.fixture(scope="module")
def bomb() -> bytes:
    """5,000 scans over 2048 x 2048 pixels in about 100 kB: seconds of decoding without a limit."""
    return progressive_scan_bomb(2048, 2048, 5000)


def test_defaults_are_the_documented_ones():
    assert native.get_limit(Limit.SCANS) == native.DEFAULT_MAX_SCANS == 100
    assert native.get_limit(Limit.PASSES) == native.DEFAULT_MAX_PASSES == 12
    assert native.get_limit(Limit.PIXELS) == native.DEFAULT_MAX_PIXELS == 16384 * 16384


def test_bad_limits_are_refused(limits):
    for limit, value in ((Limit.SCANS, 0), (Limit.PIXELS, -5), (7, 10)):
        with pytest.raises(ArgumentError):
            native.set_limit(limit, value)
    with pytest.raises(ArgumentError):
        native.get_limit(9)
    assert native.get_limit(Limit.SCANS) == 100


def test_a_scan_bomb_fails_fast_in_every_decoder(bomb):
    assert len(bomb) < 150_000 and native.jpeg_info(bomb).progressive
    calls = {
        "jpeg_decode": lambda: native.jpeg_decode(bomb, scale_denom=8),
        "jpeg_decode region": lambda: native.jpeg_decode(bomb, 1000, 1000, 200, 200),
        "jpeg_decode_crop_resize": lambda: native.jpeg_decode_crop_resize(bomb, 0, 0, 2048, 2048, 224, 224),
        "jpeg_add_restart_markers": lambda: native.jpeg_add_restart_markers(bomb),
    }
    for name, call in calls.items():
        start = time.perf_counter()
        with pytest.raises(DecodeError) as err:
            call()
        elapsed = time.perf_counter() - start
        assert elapsed < 1.0, (name, elapsed)
        assert err.value.status == Status.ETOOBIG
        assert ("the JPEG's scans pass over its 65536 blocks more than 12 times, the limit SLIP_LIMIT_PASSES (scan "
                "13 brings them to 13.0)") in str(err.value), name
        assert "set_limit(Limit.PASSES, n) or $SLIPSTREAM_MAX_PASSES" in str(err.value), name


def test_the_scan_limit_stops_a_bomb_that_the_pass_limit_allows(bomb, limits):
    native.set_limit(Limit.PASSES, 10**6)
    with pytest.raises(DecodeError) as err:
        native.jpeg_decode(bomb, scale_denom=8)
    assert "more than 100 scans, the limit SLIP_LIMIT_SCANS" in str(err.value)
    assert "set_limit(Limit.SCANS, n) or $SLIPSTREAM_MAX_SCANS" in str(err.value)


def test_a_large_image_is_stopped_after_the_passes_its_size_allows(limits):
    """8000 x 8000 grey pixels, 1,000,000 blocks a scan, in 150 kB: at 100
    scans the scan limit alone let it cost seconds; the pass limit stops
    it at its 13th scan, and a raised limit later."""
    bomb = progressive_scan_bomb(8000, 8000, 200)
    assert len(bomb) < 200_000
    with pytest.raises(DecodeError, match=r"pass over its 1000000 blocks more than 12 times, the limit "
                                          r"SLIP_LIMIT_PASSES \(scan 13 brings them to 13.0\)"):
        native.jpeg_decode(bomb)
    native.set_limit(Limit.PASSES, 20)
    with pytest.raises(DecodeError, match=r"more than 20 times, .* \(scan 21 brings them to 21.0\)"):
        native.jpeg_decode(bomb)


def test_a_raised_scan_limit_decodes_what_it_allows(limits):
    native.set_limit(Limit.PASSES, 1000)
    small = progressive_scan_bomb(64, 96, 150)  # legal, flat grey
    with pytest.raises(DecodeError, match="more than 100 scans"):
        native.jpeg_decode(small)
    native.set_limit(Limit.SCANS, 151)
    image = native.jpeg_decode(small)
    assert image.shape == (64, 96, 3) and (image == 128).all()
    native.set_limit(Limit.SCANS, 150)
    with pytest.raises(DecodeError, match="more than 150 scans"):
        native.jpeg_decode(small)


def test_real_progressive_jpegs_stay_well_inside_the_scan_and_pass_limits(limits):
    native.set_limit(Limit.SCANS, 12)  # libjpeg's progression has 10 scans (6 for grey)
    native.set_limit(Limit.PASSES, 6)  # and 4.7 (4:4:4), 5.3 (4:2:0) and 6 (grey) passes over the blocks
    samples = {(mode, subsampling): jpeg_corpus.make_sample(120, 160, mode, subsampling, progressive=True)
               for mode, subsampling in (("RGB", 0), ("RGB", 2), ("L", None))}
    for sample in samples.values():
        assert native.jpeg_decode(sample.data).shape == (120, 160, 3)
    native.set_limit(Limit.PASSES, 5)
    assert native.jpeg_decode(samples["RGB", 0].data).shape == (120, 160, 3)
    for key in (("RGB", 2), ("L", None)):
        with pytest.raises(DecodeError, match="SLIP_LIMIT_PASSES"):
            native.jpeg_decode(samples[key].data)


def test_the_pixel_limit_refuses_large_images_but_not_their_header(limits, photo):
    native.set_limit(Limit.PIXELS, 500 * 374)
    assert native.jpeg_info(photo.data).height == 375  # the header is still described
    for call in (lambda: native.jpeg_decode(photo.data, scale_denom=8),
                 lambda: native.jpeg_decode_crop_resize(photo.data, 0, 0, 100, 100, 32, 32),
                 lambda: native.jpeg_add_restart_markers(photo.data)):
        with pytest.raises(DecodeError) as err:
            call()
        assert err.value.status == Status.ETOOBIG
        assert "has 187500 pixels, more than the limit SLIP_LIMIT_PIXELS (187000)" in str(err.value)
        assert "$SLIPSTREAM_MAX_PIXELS" in str(err.value)
    native.set_limit(Limit.PIXELS, 500 * 375)
    assert native.jpeg_decode(photo.data, scale_denom=8).shape == (47, 63, 3)


def test_an_output_over_the_pixel_limit_is_refused_before_it_is_allocated(limits, photo):
    native.set_limit(Limit.PIXELS, 1000)
    for call in (native.jpeg_decode, native.jpeg_decode_planes):
        with pytest.raises(DecodeError, match=r"a 375 x 500 output has more pixels than the limit "
                                              r"SLIP_LIMIT_PIXELS \(1,000\)"):
            call(photo.data)


def test_a_header_claiming_gigapixels_gives_etoobig_not_a_huge_allocation():
    """A small JPEG whose header claims 65500 x 65500 pixels (6 GB of planes)
    is refused before anything of its size is allocated, by the planes
    decode and the yuv420 writer as by the RGB decode."""
    hostile = jpeg_corpus.with_dimensions(jpeg_corpus.make_sample(16, 16).data, 65500, 65500)
    for call in (native.jpeg_decode, native.jpeg_decode_planes, RGBImageField(write_mode="yuv420").encode):
        with pytest.raises(DecodeError, match=r"a 65500 x 65500 output has more pixels than the limit "
                                              r"SLIP_LIMIT_PIXELS") as err:
            call(hostile)
        assert err.value.status == Status.ETOOBIG


def run_python(code: str, cwd, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=cwd,
                          env={**os.environ, **env})


def test_the_environment_sets_the_limits_at_import(tmp_path):
    done = run_python("from slipstream import native; print(native.get_limit(native.Limit.SCANS), "
                      "native.get_limit(native.Limit.PIXELS))", tmp_path, SLIPSTREAM_MAX_SCANS="7",
                      SLIPSTREAM_MAX_PIXELS="1_000_000")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["7", "1000000"]
    bad = run_python("import slipstream", tmp_path, SLIPSTREAM_MAX_SCANS="many")
    assert bad.returncode != 0
    assert "SLIPSTREAM_MAX_SCANS='many' is not a whole number of at least 1" in bad.stderr


def test_entropy_data_left_over_after_the_last_row_is_corrupt(photo):
    """A scan whose damage makes it end early leaves bytes before the next
    marker: libjpeg warns ("extraneous bytes before marker"), which is an
    error for a decode that reaches the last row, and not for one that stops
    above it (it never reads that far)."""
    end = photo.data.rindex(b"\xff\xd9")
    padded = photo.data[:end] + bytes(range(1, 41)) + photo.data[end:]  # more than the decoder reads ahead
    with pytest.raises(DecodeError, match="Corrupt JPEG data: 37 extraneous bytes before marker 0xd9") as err:
        native.jpeg_decode(padded, scale_denom=8)
    assert err.value.status == Status.ECORRUPT
    assert native.jpeg_decode(padded, 0, 0, 100, 100).shape == (100, 100, 3)
    junk_in_header = photo.data[:2] + b"\x00\x00" + photo.data[2:]  # camera files do this: harmless
    assert (native.jpeg_decode(junk_in_header) == native.jpeg_decode(photo.data)).all()
