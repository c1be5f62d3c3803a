"""The comparison's same-bytes check (benchmarks/bytesets.py): a row whose
systems would decode different JPEG bytes stops the run, naming the system
and its file; copies holding the set's bytes unchanged, a tiled file of the
same pixels and a planes file of the JPEGs' own planes pass."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from PIL import Image

import real_photos
import slipstream as ss

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS / "peers"))
sys.path.insert(0, str(BENCHMARKS))

import bytesets  # noqa: E402

@pytest.fixture
def row(tmp_path: Path) -> dict[str, Path]:
    """A set's folder of 6 photos (4:4:4 and 4:2:0) in two classes,
    slipstream's byte-for-byte file of it, and the tiled and planes copies
    of that file."""
    folder = tmp_path / "set"
    for i, photo in enumerate(real_photos.jpegs(3, "4:4:4") + real_photos.jpegs(3, "4:2:0", start=3)):
        (folder / f"c{i % 2}").mkdir(parents=True, exist_ok=True)
        (folder / f"c{i % 2}" / f"photo{i}.JPEG").write_bytes(photo)
    slip, tiled, planes = tmp_path / "set.slip", tmp_path / "set-tiles.slip", tmp_path / "set-yuv420.slip"
    bytesets.write_slip(folder, slip)
    ss.convert(slip, tiled, tile_width=bytesets.TILE_WIDTH, verbose=False)
    ss.convert(slip, planes, write_mode="yuv420", verbose=False)
    return {"folder": folder, "slip": slip, "tiled": tiled, "planes": planes}


def test_copies_of_the_same_bytes_pass_and_say_what_they_hold(row):
    reads = bytesets.verify_set("original", row, {"train": {"a": "folder", "b": "slip", "c": "tiled", "d": "planes"},
                                                  "val": {"b": "slip"}})
    assert reads["val"] == {"b": reads["train"]["b"]}
    reads = reads["train"]
    assert reads["b"] == {"file": str(row["slip"]), "holds": bytesets.RELATION["slip"],
                          "bytes": row["slip"].stat().st_size}
    assert reads["a"]["bytes"] == sum(path.stat().st_size for path in row["folder"].rglob("*.JPEG"))
    assert reads["c"]["holds"] == bytesets.RELATION["tiled"]
    assert reads["d"]["holds"] == bytesets.RELATION["planes"]
    assert reads["d"]["bytes"] > reads["b"]["bytes"]  # planes take more room than the JPEGs
    assert bytesets.stored_digest(row["tiled"]) != bytesets.stored_digest(row["slip"])  # not the same bytes


def test_a_reencoded_copy_stops_the_run_naming_the_system_and_file(row, tmp_path):
    other = tmp_path / "reencoded.slip"
    samples = [(str(p), 0) for p in sorted(row["folder"].rglob("*.JPEG"))]
    ss.write(other, samples, {"image": ss.RGBImageField(max_resolution=200), "label": ss.IntField()}, verbose=False)
    with pytest.raises(bytesets.DifferentBytes, match=r"slipstream \(byte for byte\) would not read the 'original' "
                                                      r"bytes from .*reencoded\.slip: it holds 6 images with bytes"):
        bytesets.verify_set("original", {**row, "slip": other},
                            {"train": {"dataloader": "folder", "slipstream (byte for byte)": "slip"}})


def test_a_missing_or_extra_image_stops_the_run(row, tmp_path):
    extra = row["folder"] / "c0" / "extra.JPEG"
    Image.new("RGB", (40, 30), (10, 200, 30)).save(extra, quality=90)
    with pytest.raises(bytesets.DifferentBytes, match=r"it holds 6 images .* the folder 7"):
        bytesets.verify_set("original", row, {"train": {"slipstream (byte for byte)": "slip"}})


def test_a_tiled_file_of_other_pixels_stops_the_run(row, tmp_path):
    shifted = tmp_path / "shifted"
    shutil.copytree(row["folder"], shifted)
    first = sorted(shifted.rglob("*.JPEG"))[0]
    Image.open(first).rotate(90, expand=True).save(first, quality=90)
    tiled = tmp_path / "shifted-tiles.slip"
    bytesets.write_slip(shifted, tmp_path / "shifted.slip")
    ss.convert(tmp_path / "shifted.slip", tiled, tile_width=bytesets.TILE_WIDTH, verbose=False)
    with pytest.raises(bytesets.DifferentBytes, match=r"slipstream would not read .*: sample \d decodes to different"):
        bytesets.verify_set("original", {**row, "tiled": tiled}, {"train": {"slipstream": "tiled"}})


def test_a_planes_file_of_other_images_stops_the_run(row, tmp_path):
    shifted = tmp_path / "shifted"
    shutil.copytree(row["folder"], shifted)
    last = sorted(shifted.rglob("*.JPEG"))[-1]
    Image.open(last).transpose(Image.Transpose.FLIP_LEFT_RIGHT).save(last, quality=90)
    bytesets.write_slip(shifted, tmp_path / "shifted.slip")
    planes = tmp_path / "shifted-yuv420.slip"
    ss.convert(tmp_path / "shifted.slip", planes, write_mode="yuv420", verbose=False)
    with pytest.raises(bytesets.DifferentBytes, match=r"slipstream \(yuv420\) would not read .*: sample \d holds "
                                                      r"other planes than its JPEG's"):
        bytesets.verify_set("original", {**row, "planes": planes}, {"train": {"slipstream (yuv420)": "planes"}})


def test_a_system_without_a_copy_of_the_set_stops_the_run(row):
    with pytest.raises(bytesets.DifferentBytes, match=r"ffcv has no copy of the 'original' bytes \(beton\)"):
        bytesets.verify_set("original", row, {"train": {"ffcv": "beton"}})
