"""Dataset files: every field type round trip, writer determinism, sources,
and a clear error for every kind of bad input."""

from __future__ import annotations

import dataclasses
import hashlib
import io
import json
import re
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

import slipstream as ss
from slipstream.format import layout as L
from slipstream.format.reader import PAGE_CORRUPT, PAGE_GOOD, PAGE_UNCHECKED
from jpeg_corpus import make_sample, picture, pillow_rgb, stored

# ---------------------------------------------------------------- helpers


def encoded(array: np.ndarray, fmt: str = "PNG", mode: str | None = None) -> bytes:
    buf = io.BytesIO()
    image = Image.fromarray(array)
    (image.convert(mode) if mode else image).save(buf, fmt)
    return buf.getvalue()


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


class Samples:
    """An indexable dataset of dicts (the kind a user or Hugging Face has)."""

    def __init__(self, items: list[dict]) -> None:
        self.items = items

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: int) -> dict:
        return self.items[index]


def image_folder(root: Path, per_class: int = 3) -> Path:
    for label, name in enumerate(["cat", "dog", "eel"]):
        (root / name).mkdir(parents=True)
        for k in range(per_class):
            (root / name / f"{k:03d}.jpg").write_bytes(make_sample(20 + 7 * k, 30 + 5 * label, seed=k + label).data)
    return root


# ---------------------------------------------------------------- round trips


def test_every_scalar_array_bytes_and_json_field_round_trips(tmp_path):
    dtypes = {"u8": np.uint8, "i16": np.int16, "f32": np.float32, "f64": np.float64, "c64": np.complex64}
    rng = np.random.default_rng(0)
    items = []
    for i in range(9):
        item = {"label": [-2**63, 0, 2**63 - 1, 7, -1, 3, 4, 5, 6][i], "weight": [0.0, -1.5, 1e300, np.float32(2.5),
                                                                               3, 1e-300, -0.0, 8.25, 9.0][i],
                "blob": b"" if i % 3 == 0 else bytes(rng.integers(0, 256, i * 50, dtype=np.uint8)),
                "meta": {"caption": "ünïcødé ✓ 猫", "boxes": [[i, 2.5]], "none": None} if i % 2 else ["plain", i]}
        for name, dtype in dtypes.items():
            item[name] = (rng.normal(0, 100, (2, 3)) * (1 if i else 0)).astype(dtype)
        items.append(item)
    fields = {"label": ss.IntField(), "weight": ss.FloatField(), "blob": ss.BytesField(), "meta": ss.JSONField()}
    fields.update({name: ss.NDArrayField(dtype, (2, 3)) for name, dtype in dtypes.items()})
    result = ss.write(tmp_path / "d.slip", Samples(items), fields, workers=0, page_size=4096)
    assert result.samples == 9 and result.skipped == ()
    with ss.Reader(tmp_path / "d.slip") as reader:
        assert len(reader) == 9 and list(reader.fields) == list(fields)
        for i, item in enumerate(items):
            sample = reader[i]
            assert sample["label"] == item["label"] and sample["weight"] == float(item["weight"])
            assert sample["blob"] == item["blob"] and sample["meta"] == item["meta"]
            for name, dtype in dtypes.items():
                assert sample[name].dtype == dtype
                np.testing.assert_array_equal(sample[name], item[name])
        assert reader[-1]["label"] == items[-1]["label"]
        assert {k: v.tolist() for k, v in reader.index("label").items()} == {v["label"]: [i] for i, v in
                                                                            enumerate(items)}


def test_images_of_many_sizes_and_modes_round_trip(tmp_path):
    photo = make_sample(37, 101, seed=1)
    gray, cmyk = make_sample(16, 16, "L", None), make_sample(9, 1, "CMYK", None)
    rgba = np.dstack([picture(12, 5), np.full((12, 5), 99, np.uint8)])
    palette = encoded(picture(8, 8), "PNG", "P")
    png_path = tmp_path / "pic.png"
    png_path.write_bytes(encoded(picture(21, 3)))
    values = [
        photo.data,  # JPEG: its coefficients kept, re-coded into tiles
        gray.data, cmyk.data,  # JPEGs that decode to RGB
        encoded(picture(1, 1)),  # PNG
        palette, str(png_path),
        picture(33, 7), picture(6, 6)[:, :, 0], rgba,  # arrays: RGB, grayscale, RGBA
        Image.fromarray(picture(5, 40)).convert("L"),  # a PIL image
        {"bytes": None, "path": str(png_path)},  # a Hugging Face undecoded image
    ]
    expected = [pillow_rgb(photo.data), pillow_rgb(gray.data), None, picture(1, 1),
                np.asarray(Image.open(io.BytesIO(palette)).convert("RGB")), picture(21, 3), picture(33, 7),
                np.repeat(picture(6, 6)[:, :, :1], 3, axis=2), rgba[:, :, :3],
                np.repeat(np.asarray(Image.fromarray(picture(5, 40)).convert("L"))[:, :, None], 3, axis=2),
                picture(21, 3)]
    for mode in ("jpeg", "raw", "smart"):
        path = tmp_path / f"{mode}.slip"
        ss.write(path, [(v,) for v in values], {"image": ss.RGBImageField(write_mode=mode, smart_threshold=100)},
                 workers=0)
        reader = ss.Reader(path)
        records = reader.metadata["image"]
        for i, (value, want) in enumerate(zip(values, expected)):
            image = reader[i]["image"]
            assert image.dtype == np.uint8 and image.ndim == 3 and image.shape[2] == 3
            assert (records["height"][i], records["width"][i]) == image.shape[:2]
            if want is None:  # CMYK: no Pillow reference with the same conversion; check size only
                assert image.shape[:2] == (9, 1)
                continue
            assert image.shape == want.shape, (mode, i)
            raw = records["mode"][i] == 1
            assert raw == (mode == "raw" or (mode == "smart" and want.shape[0] * want.shape[1] <= 100))
            if raw or i in (0, 1):  # raw pixels and JPEGs kept as they were are exact
                tolerance = 0 if raw and i > 2 else 3
                assert np.abs(image.astype(int) - want).max() <= tolerance, (mode, i)
            else:  # compressed by the field at its quality
                np.testing.assert_array_equal(image, ss.native.jpeg_decode(ss.native.jpeg_encode(np.ascontiguousarray(want), 90)))
        if mode == "jpeg":  # pass-through: the stored bytes are the input file's coefficients, tiled
            assert bytes(reader.value_bytes(0, "image")) == stored(photo.data)
            assert bytes(reader.value_bytes(1, "image")) == stored(gray.data)


def test_max_resolution_resizes_the_longer_side(tmp_path):
    big = make_sample(251, 333, seed=3)
    values = [(big.data,), (picture(40, 10),), (picture(300, 60),)]
    path = tmp_path / "small.slip"
    ss.write(path, values, {"image": ss.RGBImageField(max_resolution=64)}, workers=0)
    reader = ss.Reader(path)
    assert [reader[i]["image"].shape for i in range(3)] == [(48, 64, 3), (40, 10, 3), (64, 13, 3)]
    assert bytes(reader.value_bytes(1, "image")) != b"" and reader.metadata["image"]["mode"].tolist() == [0, 0, 0]
    # Same picture as a full decode shrunk by Pillow, in luma (chroma loses more: DCT scaling, then 4:2:0 again).
    shrunk = Image.fromarray(pillow_rgb(big.data)).resize((64, 48), Image.BOX).convert("L")
    stored = Image.fromarray(reader[0]["image"]).convert("L")
    assert np.abs(np.asarray(stored, int) - np.asarray(shrunk, int)).mean() < 4



def test_tile_width_recodes_jpegs_without_changing_a_pixel(tmp_path):
    """Written with tiles (the default), converted with tile_width, and loaded
    through random crops: the pixels are those of the byte-for-byte file."""
    folder = image_folder(tmp_path / "images", per_class=4)
    (folder / "cat" / "big.jpg").write_bytes(make_sample(251, 333, seed=9).data)
    (folder / "dog" / "png.png").write_bytes(encoded(picture(50, 70)))
    fields = {"image": ss.RGBImageField(tile_width=None), "label": ss.IntField()}
    plain = ss.write(tmp_path / "plain.slip", folder, fields, workers=0).path
    tiled = ss.write(tmp_path / "tiled.slip", folder, workers=0).path
    converted = ss.convert(plain, tmp_path / "converted.slip", tile_width=32, verbose=False).path
    with ss.Reader(plain) as a, ss.Reader(tiled) as b, ss.Reader(converted) as c:
        assert b.fields["image"].tile_width == 32 and c.fields["image"].tile_width == 32
        for i in range(len(a)):
            assert b"\xff\xdd" in bytes(b.value_bytes(i, "image")), i  # a restart interval is defined
            np.testing.assert_array_equal(b[i]["image"], a[i]["image"])
            assert bytes(c.value_bytes(i, "image")) == bytes(b.value_bytes(i, "image")), i
    pipeline = {"image": [ss.ops.RandomResizedCrop(24), ss.ops.RandomHorizontalFlip()], "label": []}
    batches = [list(ss.Loader(path, 5, pipeline, order=ss.Order("random", seed=3))) for path in (plain, tiled)]
    for x, y in zip(*batches, strict=True):
        np.testing.assert_array_equal(np.asarray(x[0]), np.asarray(y[0]))
    with pytest.raises(ValueError, match="tile_width"):
        ss.RGBImageField(tile_width=0)
    with pytest.raises(ss.ArgumentError, match="tile_width"):
        ss.convert(plain, tmp_path / "bad.slip", tile_width=-1, verbose=False)

def test_values_larger_than_a_page(tmp_path):
    big = picture(80, 70)  # 16,800 raw bytes over 4,096-byte pages
    path = tmp_path / "big.slip"
    ss.write(path, [(picture(3, 3),), (big,), (picture(2, 9),)], {"image": ss.RGBImageField(write_mode="raw")},
             workers=0, page_size=4096, page_checksums=True)
    reader = ss.Reader(path, verify_pages=True)
    np.testing.assert_array_equal(reader[1]["image"], big)
    np.testing.assert_array_equal(reader[2]["image"], picture(2, 9))
    offsets = reader.metadata["image"]["offset"] - reader.data_offset
    assert offsets[1] % 4096 == 0 and reader.page_count == 6
    sizes = reader.metadata["image"]["size"]
    # values that fit in a page never straddle two
    for offset, size in zip(offsets, sizes):
        assert size > 4096 or offset // 4096 == (offset + size - 1) // 4096


def test_output_is_identical_for_any_worker_count(tmp_path):
    folder = image_folder(tmp_path / "tree", per_class=12)
    hashes = set()
    for workers in (0, 1, 2):
        path = tmp_path / f"w{workers}.slip"
        result = ss.write(path, folder, workers=workers, page_size=8192, page_checksums=True)
        assert result.samples == 36
        hashes.add(digest(path))
    assert len(hashes) == 1


def test_image_folder_labels_and_classes(tmp_path):
    folder = image_folder(tmp_path / "tree")
    (folder / "notes.txt").write_text("not a class")
    path = tmp_path / "tree.slip"
    ss.write(path, folder, workers=1)
    reader = ss.Reader(path)
    assert reader.user_metadata == {"classes": ["cat", "dog", "eel"]}
    assert [reader[i]["label"] for i in range(len(reader))] == [0, 0, 0, 1, 1, 1, 2, 2, 2]
    assert {k: v.tolist() for k, v in reader.index("label").items()} == {0: [0, 1, 2], 1: [3, 4, 5], 2: [6, 7, 8]}
    assert bytes(reader.value_bytes(4, "image")) == stored((folder / "dog" / "001.jpg").read_bytes())


def test_numpy_array_sources(tmp_path):
    images = np.stack([picture(8, 8, seed=s) for s in range(5)])
    labels = np.arange(5) * 10
    ss.write(tmp_path / "d.slip", {"image": images, "label": labels, "score": labels / 4}, workers=0)
    reader = ss.Reader(tmp_path / "d.slip")
    assert [type(f).__name__ for f in reader.fields.values()] == ["NDArrayField", "IntField", "FloatField"]
    np.testing.assert_array_equal(reader[3]["image"], images[3])
    assert reader[3]["label"] == 30 and reader[3]["score"] == 7.5
    ss.write(tmp_path / "t.slip", (images, labels), {"image": ss.RGBImageField(write_mode="raw"),
                                                      "label": ss.IntField()}, workers=0)
    np.testing.assert_array_equal(ss.Reader(tmp_path / "t.slip")[4]["image"], images[4])


def test_hugging_face_datasets(tmp_path):
    datasets = pytest.importorskip("datasets")
    images = [Image.fromarray(picture(10 + k, 12, seed=k)) for k in range(4)]
    table = datasets.Dataset.from_dict({"img": images, "label": [3, 1, 4, 1]},
                                       features=datasets.Features({"img": datasets.Image(),
                                                                   "label": datasets.Value("int64")}))
    ss.write(tmp_path / "hf.slip", table, {"img": ss.RGBImageField(write_mode="raw"), "label": ss.IntField()},
             workers=2)
    reader = ss.Reader(tmp_path / "hf.slip")
    assert [reader[i]["label"] for i in range(4)] == [3, 1, 4, 1]
    np.testing.assert_array_equal(reader[2]["img"], np.asarray(images[2]))


# ---------------------------------------------------------------- cached()


class Counted:
    """A named source that records, in a log file, each process that reads it."""

    def __init__(self, log: str) -> None:
        self.log = log

    def __len__(self) -> int:
        return 20

    def __getitem__(self, index: int) -> tuple:
        if index == 0:
            with open(self.log, "a") as f:
                f.write(f"{os.getpid()}\n")
        return (index,)


def test_cached_builds_once_and_rebuilds_when_the_source_changes(tmp_path):
    folder = image_folder(tmp_path / "tree")
    cache = tmp_path / "cache"
    first = ss.cached(folder, cache_dir=cache, workers=0)
    stamp = first.stat().st_mtime_ns
    assert ss.cached(folder, cache_dir=cache, workers=0) == first and first.stat().st_mtime_ns == stamp
    assert len(ss.Reader(first)) == 9
    other_spec = ss.cached(folder, {"image": ss.RGBImageField(write_mode="raw"), "label": ss.IntField()},
                           cache_dir=cache, workers=0)
    assert other_spec != first
    (folder / "cat" / "999.jpg").write_bytes(make_sample(8, 8).data)
    changed = ss.cached(folder, cache_dir=cache, workers=0)
    assert changed not in (first, other_spec) and len(ss.Reader(changed)) == 10
    with pytest.raises(ss.ArgumentError, match="pass name="):
        ss.cached(Counted(str(tmp_path / "log")), {"x": ss.IntField()}, cache_dir=cache)


def test_concurrent_processes_build_a_cached_file_once(tmp_path):
    log = tmp_path / "builds.log"
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(Path(__file__).parent)!r})
        import slipstream as ss
        from test_format import Counted
        path = ss.cached(Counted({str(log)!r}), {{"x": ss.IntField()}}, cache_dir={str(tmp_path / "cache")!r},
                         name="counted", version=1, workers=0, verbose=False)
        print(path, len(ss.Reader(path)))
    """)
    procs = [subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True, cwd=tmp_path)
             for _ in range(4)]
    outputs = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    assert len(outputs) == 1 and outputs.pop().endswith(" 20")
    assert len(log.read_text().split()) == 1  # one process read the source; three waited and reused its file


# ---------------------------------------------------------------- bad input


@pytest.fixture(scope="module")
def good_file(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("good") / "good.slip"
    items = [{"image": make_sample(16, 24, seed=k).data, "label": k, "meta": {"k": k}} for k in range(12)]
    ss.write(path, Samples(items), {"image": ss.RGBImageField(), "label": ss.IntField(), "meta": ss.JSONField()},
             workers=0, page_size=4096, page_checksums=True, user_metadata={"note": "x"})
    return path


def corrupt(src: Path, dst: Path, offset: int, bit: int = 0) -> Path:
    data = bytearray(src.read_bytes())
    data[offset] ^= 1 << bit
    dst.write_bytes(bytes(data))
    return dst


def header_of(path: Path) -> np.void:
    return np.frombuffer(path.read_bytes(), L.HEADER_DTYPE, 1)[0]


def test_missing_empty_and_foreign_files(tmp_path):
    with pytest.raises(ss.DatasetNotFoundError, match="nowhere.slip: no such dataset file"):
        ss.Reader(tmp_path / "nowhere.slip")
    (tmp_path / "empty.slip").write_bytes(b"")
    with pytest.raises(ss.FormatError, match="empty.slip: the file is empty"):
        ss.Reader(tmp_path / "empty.slip")
    (tmp_path / "text.slip").write_bytes(b"hello world, this is not a dataset" * 10)
    with pytest.raises(ss.FormatError, match=r"text.slip: not a slipstream dataset \(starts with b'hello wo'"):
        ss.Reader(tmp_path / "text.slip")
    with pytest.raises(ss.FormatError, match="is a folder"):
        ss.Reader(tmp_path)


def test_the_reader_says_which_format_it_read(good_file):
    with ss.Reader(good_file) as reader:
        assert reader.format == "slipstream" and reader.header["magic"] == L.MAGIC


def test_a_file_of_no_known_format_is_named_with_its_first_bytes(tmp_path):
    path = tmp_path / "picture.slip"
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(200))
    with pytest.raises(ss.FormatError) as info:
        ss.Reader(path)
    assert str(info.value) == (f"{path}: not a slipstream dataset (starts with b'\\x89PNG\\r\\n\\x1a\\n', expected "
                               f"b'SLIPSTRM') nor an FFCV .beton file (no FFCV version-2 header)")


def test_unsupported_version(good_file, tmp_path):
    data = bytearray(good_file.read_bytes())
    data[8:12] = (7).to_bytes(4, "little")
    (tmp_path / "v7.slip").write_bytes(bytes(data))
    with pytest.raises(ss.FormatError, match="v7.slip: format version 7 is not supported"):
        ss.Reader(tmp_path / "v7.slip")


def test_truncated_files(good_file, tmp_path):
    data = good_file.read_bytes()
    header = header_of(good_file)
    cuts = {10: "truncated: 10 bytes", int(header["data_offset"]) + 100: "extend past the end of the file",
            int(header["metadata_offset"]) + 5: "extend past the end of the file", len(data) - 1: "extend past"}
    for cut, message in cuts.items():
        path = tmp_path / f"cut{cut}.slip"
        path.write_bytes(data[:cut])
        with pytest.raises(ss.FormatError, match=message) as info:
            ss.Reader(path)
        assert str(path) in str(info.value)


@pytest.mark.parametrize("table", ["header", "descriptors", "metadata", "allocations", "user"])
def test_a_flipped_bit_in_any_table_is_caught(good_file, tmp_path, table):
    header = header_of(good_file)
    offset = 20 if table == "header" else int(header[f"{table}_offset"]) + 3
    path = corrupt(good_file, tmp_path / f"{table}.slip", offset, bit=2)
    message = "header checksum mismatch" if table == "header" else f"{table} table checksum mismatch"
    with pytest.raises(ss.FormatError, match=message) as info:
        ss.Reader(path)
    assert str(path) in str(info.value)


def test_a_flipped_bit_in_a_page_is_caught_when_the_page_is_first_read(good_file, tmp_path):
    reader = ss.Reader(good_file)
    offset = int(reader.metadata["image"]["offset"][5]) + 40
    page = (offset - reader.data_offset) // reader.page_size
    path = corrupt(good_file, tmp_path / "page.slip", offset)
    damaged = ss.Reader(path)  # opening checks the tables, not the pages
    assert (damaged.page_state == PAGE_UNCHECKED).all()
    with pytest.raises(ss.FormatError, match=rf"page.slip: sample 5, field 'image': data page {page} \(bytes "
                                             rf"[0-9,]+ to [0-9,]+\) does not match its checksum") as info:
        damaged[5]
    assert info.value.detail.startswith(f"data page {page} ")
    assert damaged.page_state[page] == PAGE_CORRUPT
    neighbour = next(i for i in range(12) if (int(damaged.metadata["image"]["offset"][i]) - damaged.data_offset)
                     // damaged.page_size != page)
    assert damaged[neighbour]["label"] == neighbour  # other pages read as usual
    with pytest.raises(ss.FormatError, match=rf"data page {page} .* does not match its checksum: .*; samples in it: "
                                             rf".*5"):
        ss.Reader(path, verify_pages=True)


def test_files_are_written_with_page_checksums_unless_asked_not_to(tmp_path):
    ss.write(tmp_path / "checked.slip", [(1,)], {"x": ss.IntField()}, workers=0, verbose=False)
    assert ss.Reader(tmp_path / "checked.slip").page_checksums is not None
    ss.write(tmp_path / "plain.slip", [(1,)], {"x": ss.IntField()}, workers=0, page_checksums=False, verbose=False)
    plain = ss.Reader(tmp_path / "plain.slip")
    assert plain.page_checksums is None and (plain.page_state == PAGE_GOOD).all()
    with pytest.raises(ss.ArgumentError, match="has no page checksums"):
        plain.verify_pages()


def test_sample_index_out_of_range(good_file):
    reader = ss.Reader(good_file)
    for index in (12, -13, 10**12):
        with pytest.raises(ss.SampleIndexError, match=rf"good.slip: sample {index} is out of range \(12 samples\)"):
            reader[index]
    with pytest.raises(IndexError):
        reader[99]


def test_undecodable_source_image_fails_the_write_with_its_path(tmp_path):
    folder = image_folder(tmp_path / "tree")
    broken = folder / "dog" / "001.jpg"
    original = broken.read_bytes()
    broken.write_bytes(original[:300])
    target = tmp_path / "out.slip"
    with pytest.raises(ss.FieldValueError, match=rf"sample 4 \({broken}\), field 'image': .*") as info:
        ss.write(target, folder, workers=2)
    assert "out.slip" in str(info.value)
    assert not target.exists() and list(tmp_path.glob(".out.slip*")) == []
    result = ss.write(target, folder, workers=2, on_error="skip")
    assert result.samples == 8 and [i for i, _ in result.skipped] == [4] and str(broken) in result.skipped[0][1]
    assert [ss.Reader(target)[i]["label"] for i in range(8)] == [0, 0, 0, 1, 1, 2, 2, 2]
    broken.write_bytes(original)
    (folder / "eel" / "000.jpg").write_bytes(b"GIF89a not really")
    with pytest.raises(ss.FieldValueError, match="eel/000.jpg.*not a readable image"):
        ss.write(target, folder, workers=0, overwrite=True)


@pytest.mark.parametrize("field, value, message", [
    (ss.IntField(), "7", "IntField takes an integer, got str"),
    (ss.IntField(), 2**70, "IntField takes 64-bit integers, 1180591620717411303424 is out of range"),
    (ss.FloatField(), None, "FloatField takes a real number, got NoneType"),
    (ss.NDArrayField(np.float32, (2, 2)), np.zeros((2, 3)), r"NDArrayField expects shape \(2, 2\), got \(2, 3\)"),
    (ss.NDArrayField(np.int16, (2,)), np.zeros(2), "NDArrayField expects dtype int16, got float64"),
    (ss.BytesField(), "text", "BytesField takes bytes, got str"),
    (ss.JSONField(), {1, 2}, "JSONField value is not JSON-serializable: Object of type set"),
    (ss.RGBImageField(), np.zeros((4, 4, 3), np.float32), "image arrays must be uint8, got float32"),
    (ss.RGBImageField(), 12, "not an image: int"),
])
def test_field_values_of_the_wrong_type_or_shape(tmp_path, field, value, message):
    items = [{"ok": 1, "bad": value}]
    with pytest.raises(ss.FieldValueError, match=rf"sample 0 \(item 0 of Samples\), field 'bad': {message}"):
        ss.write(tmp_path / "x.slip", Samples(items), {"ok": ss.IntField(), "bad": field}, workers=0)
    assert not (tmp_path / "x.slip").exists()


class Interrupting(Samples):
    def __getitem__(self, index: int) -> dict:
        if index == 5:
            raise KeyboardInterrupt
        return super().__getitem__(index)


def test_an_interrupted_write_leaves_no_file(tmp_path):
    target = tmp_path / "out.slip"
    target.write_bytes(b"previous version")
    with pytest.raises(KeyboardInterrupt):
        ss.write(target, Interrupting([{"x": i} for i in range(10)]), {"x": ss.IntField()}, workers=0, overwrite=True)
    assert target.read_bytes() == b"previous version"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out.slip"]


def test_bad_arguments(tmp_path):
    for kwargs, message in [({"page_size": 5000}, "page_size must be a power of two"),
                            ({"on_error": "ignore"}, "on_error must be"), ({"workers": -1}, "workers must be")]:
        with pytest.raises(ss.ArgumentError, match=message):
            ss.write(tmp_path / "x.slip", [(1,)], {"x": ss.IntField()}, **kwargs)
    with pytest.raises(ss.ArgumentError, match="fields must be given"):
        ss.write(tmp_path / "x.slip", Samples([{"x": 1}]))
    with pytest.raises(ss.DatasetNotFoundError, match="no-such-folder does not exist"):
        ss.write(tmp_path / "x.slip", tmp_path / "no-such-folder")
    with pytest.raises(ValueError, match="write_mode must be one of"):
        ss.RGBImageField(write_mode="png")
    json.dumps(ss.RGBImageField().arguments())  # arguments are JSON


def test_one_frozen_write_options_checks_what_every_writer_is_given(tmp_path):
    from slipstream.format.write_options import WriteOptions
    from slipstream.format.writer import DEFAULT_SHARD_SIZE

    fields = {"x": ss.IntField()}
    to_url = WriteOptions.create("s3://bucket/prefix/", fields, columns={"x": "value"})
    assert to_url.sharded and to_url.shard_size == DEFAULT_SHARD_SIZE and to_url.path == "s3://bucket/prefix"
    assert to_url.columns == {"x": "value"} and len(to_url.descriptors) == 1
    one_file = WriteOptions.create(tmp_path / "a.slip", fields, user_metadata={"classes": ["a"]})
    assert not one_file.sharded and one_file.shard_size is None and one_file.user == b'{"classes": ["a"]}'
    by_count = WriteOptions.create(tmp_path, fields, shards=3)
    assert by_count.sharded and by_count.shard_size is None and by_count.plan(9).shard_of(8) == 2
    with pytest.raises(dataclasses.FrozenInstanceError):
        one_file.page_size = 4096
    for kwargs, message in [({"columns": {"y": "z"}}, "columns names 'y', which are not fields"),
                            ({"shards": 2, "shard_size": "1GB"}, "give shard_size or shards, not both"),
                            ({"shards": True}, "shards must be a positive integer"),
                            ({"on_error": "replace"}, "on_error must be 'raise' or 'skip'")]:
        with pytest.raises(ss.ArgumentError, match=message):
            WriteOptions.create(tmp_path, fields, **kwargs)
    with pytest.raises(ss.ArgumentError, match="shards=3 needs the number of samples beforehand"):
        by_count.plan(None)


def test_the_documented_layout_is_the_one_written():
    """docs/format.md's header and allocation tables list the offsets and
    types of the code's dtypes."""
    text = (Path(__file__).parent.parent / "docs" / "format.md").read_text()
    rows = re.findall(r"^\| (\d+) \| (u32|u64|8 bytes) \| `(\w+)` \|", text, re.M)
    documented = {name: (int(offset), {"u32": 4, "u64": 8, "8 bytes": 8}[kind]) for offset, kind, name in rows}
    actual = {name: (L.HEADER_DTYPE.fields[name][1], L.HEADER_DTYPE.fields[name][0].itemsize)
              for name in L.HEADER_DTYPE.names}
    assert documented == actual
    assert f"header ({L.HEADER_DTYPE.itemsize} bytes)" in text
    allocation_rows = re.findall(r"^\| (u32|u64) \| `(\w+)` \| (?!bytes)", text.split("## Allocation table")[1], re.M)
    assert [name for _, name in allocation_rows] == list(L.ALLOCATION_DTYPE.names)


@dataclasses.dataclass(frozen=True)
class PointField(ss.fields.Field, type_id=1001):
    """A third-party field: an (x, y) point kept in the record."""

    scale: float = 1.0

    def record_dtype(self):
        return np.dtype([("x", "<f4"), ("y", "<f4")])

    def encode(self, value):
        return ss.fields.Encoded({"x": value[0] * self.scale, "y": value[1] * self.scale})

    def read(self, record, data):
        return (float(record["x"]) / self.scale, float(record["y"]) / self.scale)


def test_third_party_fields_register_by_type_id(tmp_path):
    ss.write(tmp_path / "p.slip", [((1.5, -2.0),), ((0.25, 8.0),)], {"point": PointField(scale=2.0)}, workers=2)
    reader = ss.Reader(tmp_path / "p.slip")
    assert reader.fields["point"] == PointField(scale=2.0) and reader[1]["point"] == (0.25, 8.0)
    with pytest.raises(ValueError, match=r"type id 1001 is taken by \S*test_format.PointField; \S*Clash needs another"):
        class Clash(ss.fields.Field, type_id=1001):
            pass
    data = bytearray((tmp_path / "p.slip").read_bytes())
    header = np.frombuffer(bytes(data), L.HEADER_DTYPE, 1)[0].copy()
    at = int(header["descriptors_offset"])
    data[at:at + 4] = (4242).to_bytes(4, "little")  # a type id nobody registered
    header["descriptors_crc32"] = L.crc32(bytes(data[at:at + int(header["descriptors_size"])]))
    header["header_crc32"] = L.crc32(header.tobytes()[:L.HEADER_CRC_SPAN])
    data[:L.HEADER_DTYPE.itemsize] = header.tobytes()
    (tmp_path / "unknown.slip").write_bytes(bytes(data))
    unknown = ss.Reader(tmp_path / "unknown.slip")
    assert type(unknown.fields["point"]).__name__ == "UnknownField" and unknown.fields["point"].type_id == 4242
    assert unknown.metadata["point"]["x"].tolist() == [3.0, 0.5]  # the records stay readable
