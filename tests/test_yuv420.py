"""Images stored as planar YCbCr 4:2:0 (``write_mode="yuv420"``): what is
stored, what every image decoder makes of it against the same photos stored
as JPEG, and hostile planes."""

from __future__ import annotations

import struct
from pathlib import Path

import jpeg_corpus
import numpy as np
import pytest
import real_photos

import slipstream as ss
from slipstream import native
from slipstream.errors import ArgumentError
from slipstream.fields.image_modes import JPEG_MODE, YUV420_MODE
from slipstream.native import Subsampling
from slipstream.ops import CenterCrop, RandomResizedCrop, Resize, multi_crop_pipelines

@pytest.fixture(scope="module")
def photos() -> list[bytes]:
    """Twelve 4:2:0 photos and four of other layouts (4:4:4, 4:2:2, 4:4:0, grey)."""
    chosen = real_photos.jpegs(12, "4:2:0") + real_photos.jpegs(1, "4:4:4", start=12)
    chosen += real_photos.jpegs(1, "4:2:2", start=13) + real_photos.jpegs(1, "4:4:0", start=14)
    chosen += real_photos.jpegs(1, "grey")
    kinds = [native.jpeg_info(data).subsampling for data in chosen]
    assert kinds == [Subsampling.S420] * 12 + [Subsampling.S444, Subsampling.S422, Subsampling.S440, Subsampling.GRAY]
    return chosen


@pytest.fixture(scope="module")
def files(photos, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("yuv420")
    paths = {}
    for mode in ("jpeg", "yuv420"):
        paths[mode] = folder / f"{mode}.slip"
        ss.write(paths[mode], [{"image": p, "label": k} for k, p in enumerate(photos)],
                 {"image": ss.RGBImageField(write_mode=mode), "label": ss.IntField()}, verbose=False)
    return paths


def batches(path: Path, pipelines: dict, size: int) -> dict[str, np.ndarray]:
    loader = ss.Loader(path, size, {"label": [], **pipelines}, order=ss.Order("sequential", seed=3), as_dict=True,
                       verbose=False)
    return {name: np.asarray(value).copy() for name, value in next(iter(loader)).items()}


def test_planes_are_stored_for_every_image_and_read_back_as_rgb(photos, files):
    reader = ss.Reader(files["yuv420"])
    records = reader.metadata["image"]
    assert (records["mode"] == YUV420_MODE).all()
    assert records["size"].tolist() == [native.planes_bytes(h, w) for h, w in zip(records["height"], records["width"])]
    for k in (0, 12):  # a 4:2:0 photo (its own planes) and a 4:4:4 one (chroma averaged)
        got, want = reader[k]["image"], native.jpeg_decode(photos[k])
        difference = np.abs(got.astype(int) - want)
        assert difference.mean() < (0.4 if k == 0 else 3.0), (k, difference.mean())
    assert (ss.Reader(files["jpeg"]).metadata["image"]["mode"] == JPEG_MODE).all()
    jpeg_bytes = sum(len(p) for p in photos)
    assert 1.0 < records["size"].sum() / jpeg_bytes < 12.0  # planes cost more than the JPEGs; how much: BENCHMARKS.md


@pytest.mark.parametrize("operation", [lambda: RandomResizedCrop(160), lambda: CenterCrop(160, ratio=0.875),
                                       lambda: Resize((96, 128))], ids=["RandomResizedCrop", "CenterCrop", "Resize"])
def test_each_crop_from_planes_follows_the_same_crop_of_the_jpeg(files, operation):
    got = batches(files["yuv420"], {"image": [operation()]}, 12)
    want = batches(files["jpeg"], {"image": [operation()]}, 12)
    np.testing.assert_array_equal(got["label"], want["label"])
    # The same regions and flips.  Where a crop shrinks 2x or more, the JPEG path decodes at a DCT scale, which
    # differs from a full-size decode by about a level on average; the planes are resampled at full size.
    difference = np.abs(got["image"].astype(int) - want["image"])
    assert difference.mean() < 2.0, difference.mean()
    assert np.percentile(difference, 99) <= 10


def test_multi_crop_from_planes_follows_the_jpeg(files):
    pipelines = multi_crop_pipelines(global_crops=2, local_crops=3, global_size=96, local_size=48)
    got, want = batches(files["yuv420"], pipelines, 12), batches(files["jpeg"], pipelines, 12)
    for name in ("global_0", "global_1", "local_0", "local_2"):
        difference = np.abs(got[name].astype(np.float64) - want[name])
        assert difference.mean() < 0.05, (name, difference.mean())  # normalized values: a level is 1/(255 std)


def test_planes_with_a_size_that_disagrees_with_their_record_are_refused(files):
    field = ss.RGBImageField(write_mode="yuv420")
    records = ss.Reader(files["yuv420"]).metadata["image"][:3].copy()
    assert field.check_records(records) is None
    records["height"][1] += 1  # one row taller than the planes stored
    at, problem = field.check_records(records)
    assert at == 1 and problem.startswith("is YCbCr 4:2:0 planes of the wrong size"), problem


def test_tiles_and_planes_are_one_or_the_other():
    # tile_width (by default 32) tiles the JPEGs a field stores; a planes field stores none.
    assert ss.RGBImageField(write_mode="yuv420").tile_width == 32
    with pytest.raises(ArgumentError, match='tile_width tiles stored JPEGs, and write_mode="yuv420" stores planes'):
        ss.convert("any.slip", "out.slip", tile_width=32, write_mode="yuv420")


def test_convert_stores_the_images_of_a_beton_and_a_slip_file_as_planes(files, tmp_path):
    from slipstream.cli import main

    beton = Path(__file__).parent / "fixtures" / "ffcv" / "images_smart.beton"  # JPEGs and raw pixels
    source = ss.Reader(beton)
    image = next(name for name, field in source.fields.items() if isinstance(field, ss.RGBImageField))
    assert set(source.metadata[image]["mode"].tolist()) == {0, 1}
    assert main(["convert", str(beton), str(tmp_path / "planes.slip"), "--write-mode", "yuv420"]) == 0
    converted = ss.Reader(tmp_path / "planes.slip")
    assert (converted.metadata[image]["mode"] == YUV420_MODE).all()
    assert converted.fields[image].write_mode == "yuv420"
    for k in range(len(source)):
        got, want = converted[k][image], source[k][image]
        assert got.shape == want.shape
        assert np.abs(luma(got) - luma(want)).mean() < 1.5, k
    ss.convert(files["jpeg"], tmp_path / "from_slip.slip", write_mode="yuv420", verbose=False)
    planes = ss.Reader(tmp_path / "from_slip.slip").metadata["image"]
    np.testing.assert_array_equal(planes["size"], ss.Reader(files["yuv420"]).metadata["image"]["size"])
    with pytest.raises(ArgumentError, match='write_mode must be None .* or "yuv420", got \'raw\''):
        ss.convert(files["jpeg"], tmp_path / "raw.slip", write_mode="raw")


def luma(image: np.ndarray) -> np.ndarray:
    return image.astype(np.float64) @ np.array([0.299, 0.587, 0.114])


def test_decoding_on_the_device_refuses_planes_and_says_why(files):
    from slipstream.ops.device_decode import DecodeOnDevice

    with pytest.raises(ArgumentError, match=r"yuv420\.slip, field 'image': DecodeOnDevice decodes JPEGs and raw "
                                            r"pixels, and this field stores YCbCr 4:2:0 planes"):
        ss.Loader(files["yuv420"], 4, {"image": [DecodeOnDevice("cpu"), CenterCrop(32, ratio=1.0)]}, verbose=False)


def test_convert_to_planes_refuses_a_jpeg_whose_header_disagrees_with_its_record(tmp_path):
    """Planes are stored at the JPEG header's size under the record's: a
    sample whose two sizes differ would make the converted file unopenable,
    so convert names the sample and both sizes and writes nothing."""
    jpegs = [jpeg_corpus.make_sample(32, 32, "RGB", 2, seed=k).data for k in range(3)]
    source = tmp_path / "source.slip"
    ss.write(source, [(j,) for j in jpegs], {"image": ss.RGBImageField(tile_width=None)}, workers=0,
             page_checksums=False, verbose=False)
    raw = bytearray(source.read_bytes())
    sof = raw.index(b"\xff\xc0", raw.index(jpegs[1]))
    raw[sof + 5:sof + 7] = struct.pack(">H", 24)  # sample 1's JPEG now says 24 rows, its record 32
    source.write_bytes(raw)
    target = tmp_path / "planes.slip"
    with pytest.raises(ss.errors.SlipstreamError, match=r"planes\.slip was not written: sample 1 .*field 'image': "
                                                        r"the stored size 32x32 disagrees with the JPEG header's "
                                                        r"24x32"):
        ss.convert(source, target, write_mode="yuv420", verbose=False)
    assert not target.exists()
