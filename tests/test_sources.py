"""Sources beyond image folders: WebDataset tar shards written by the
``webdataset`` package (local and on a real S3 server), Hugging Face
datasets (map-style and streaming), and LitData datasets written by
``litdata.optimize``; each converted with ``slipstream.write`` and read
back against its source."""

from __future__ import annotations

import signal
from pathlib import Path

import numpy as np
import pytest
from jpeg_corpus import stored as tiled

import slipstream as ss
from slipstream import native

webdataset = pytest.importorskip("webdataset")


def jpegs(count: int, seed: int = 0) -> list[bytes]:
    """Small, distinct JPEG files."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(count):
        pixels = np.empty((24 + k % 5, 32, 3), np.uint8)
        pixels[:] = rng.integers(0, 255, 3, dtype=np.uint8)
        pixels[::4] = 255 - pixels[::4]
        out.append(native.jpeg_encode(pixels, 90))
    return out


def write_tars(folder, images: list[bytes], per_shard: int, extra=None) -> list[str]:
    """Tar shards of ``images`` (``.jpg``), labels (``.cls``) and ``.json`` members, by webdataset's ShardWriter."""
    folder.mkdir(parents=True, exist_ok=True)
    with webdataset.ShardWriter(str(folder / "train-%06d.tar"), maxcount=per_shard, verbose=0) as sink:
        for k, data in enumerate(images):
            sample = {"__key__": f"img{k:06d}", "jpg": data, "cls": k % 10, "json": {"k": k}}
            sample.update((extra or {}).get(k, {}))
            sink.write(sample)
    return sorted(str(p) for p in folder.glob("*.tar"))


def test_webdataset_members_become_fields_and_keep_their_bytes(tmp_path):
    images = jpegs(45)
    shards = write_tars(tmp_path / "wds", images, per_shard=20)
    assert len(shards) == 3
    source = ss.WebDataset(str(tmp_path / "wds" / "train-{000000..000002}.tar"))
    assert list(source.fields) == ["image", "label", "json"]
    result = ss.write(tmp_path / "out.slip", source, workers=2, verbose=False)
    assert result.samples == 45 and not result.skipped
    with ss.Reader(tmp_path / "out.slip") as reader:
        for k in (0, 19, 20, 44):
            assert bytes(reader.value_bytes(k, "image")) == tiled(images[k])
            assert reader[k]["label"] == k % 10 and reader[k]["json"] == {"k": k}
    folder = ss.WebDataset(tmp_path / "wds")  # a folder of tars reads the same shards in order
    assert folder.shards == source.shards


def test_webdataset_captions_are_a_default_field(tmp_path):
    images = jpegs(3)
    extra = {k: {"txt": f"a caption of image {k}"} for k in range(3)}
    write_tars(tmp_path / "wds", images, per_shard=10, extra=extra)
    source = ss.WebDataset(tmp_path / "wds")
    assert list(source.fields) == ["image", "label", "json", "text"]
    ss.write(tmp_path / "out.slip", source, workers=0, verbose=False)
    with ss.Reader(tmp_path / "out.slip") as reader:
        assert [reader[k]["text"] for k in range(3)] == [f"a caption of image {k}" for k in range(3)]


def test_webdataset_from_s3(tmp_path, s3_server):
    from slipstream.format.objectstore import ObjectPrefix

    images = jpegs(30, seed=1)
    remote = ss.Remote(storage_options=s3_server.storage_options(), cache_dir=tmp_path / "cache")
    prefix = ObjectPrefix("s3://test/sources/wds", remote)
    for shard in write_tars(tmp_path / "wds", images, per_shard=12):
        prefix.put_file(shard.rsplit("/", 1)[-1], shard)
    source = ss.WebDataset("s3://test/sources/wds/", remote=remote)
    assert [s.rsplit("/", 1)[-1] for s in source.shards] == ["train-000000.tar", "train-000001.tar", "train-000002.tar"]
    ss.write(tmp_path / "s3.slip", source, workers=0, verbose=False)
    with ss.Reader(tmp_path / "s3.slip") as reader:
        assert [bytes(reader.value_bytes(k, "image")) for k in range(30)] == [tiled(i) for i in images]


def test_webdataset_bad_members_follow_on_error(tmp_path):
    images = jpegs(12, seed=2)
    write_tars(tmp_path / "wds", images, per_shard=100,
               extra={3: {"jpg": b"\xff\xd8\xff not a jpeg"}, 7: {"cls": "seven"}})
    source = ss.WebDataset(tmp_path / "wds")
    with pytest.raises(ss.FieldValueError, match=r"train-000000.tar: img000003, field 'image'"):
        ss.write(tmp_path / "raise.slip", source, workers=0, verbose=False)
    assert not (tmp_path / "raise.slip").exists()
    result = ss.write(tmp_path / "skip.slip", source, workers=0, on_error="skip", verbose=False)
    assert [i for i, _ in result.skipped] == [3, 7]
    assert "img000007: ValueError: a .cls member must hold an integer, it holds 'seven'" in result.skipped[1][1]
    with ss.Reader(tmp_path / "skip.slip") as reader:
        kept = [k for k in range(12) if k not in (3, 7)]
        assert [reader[i]["json"]["k"] for i in range(len(reader))] == kept


def test_webdataset_truncated_shard_is_reported_by_name(tmp_path):
    images = jpegs(10, seed=3)
    [shard] = write_tars(tmp_path / "wds", images, per_shard=100)
    data = open(shard, "rb").read()
    with open(shard, "wb") as f:
        f.write(data[: len(data) // 2])
    with pytest.raises(ss.FieldValueError, match=r"train-000000.tar: img0000\d\d: FormatError: the tar shard is "
                                                  r"truncated: .* any samples after it in the shard are lost"):
        ss.write(tmp_path / "out.slip", ss.WebDataset(shard), workers=0, verbose=False)
    result = ss.write(tmp_path / "out.slip", ss.WebDataset(shard), workers=0, on_error="skip", verbose=False)
    assert 0 < result.samples < 10 and len(result.skipped) == 1


def test_webdataset_missing_shard_and_member(tmp_path):
    with pytest.raises(ss.DatasetNotFoundError, match="nothing.tar: no such tar shard"):
        ss.WebDataset(tmp_path / "nothing.tar")
    write_tars(tmp_path / "wds", jpegs(3), per_shard=10)
    source = ss.WebDataset(tmp_path / "wds", {"image": ss.RGBImageField(), "caption": ss.JSONField()})
    with pytest.raises(ss.FieldValueError, match=r"no .caption member for field 'caption' \(members: .cls, .jpg, "
                                                  r".json\)"):
        ss.write(tmp_path / "out.slip", source, workers=0, verbose=False)


def test_brace_expansion():
    from slipstream.sources import expand_braces

    assert expand_braces("s3://b/{00..02}.tar") == ["s3://b/00.tar", "s3://b/01.tar", "s3://b/02.tar"]
    assert expand_braces("{a,b}-{8..10}") == ["a-8", "a-9", "a-10", "b-8", "b-9", "b-10"]


def hf_dataset():
    datasets = pytest.importorskip("datasets")
    images = jpegs(20, seed=4)
    features = datasets.Features({"image": datasets.Image(),
                                  "label": datasets.ClassLabel(names=[f"c{k}" for k in range(4)])})
    return images, datasets.Dataset.from_dict(
        {"image": [{"bytes": b, "path": None} for b in images], "label": [k % 4 for k in range(20)]},
        features=features)


@pytest.mark.parametrize("streaming", [False, True])
def test_hugging_face_datasets_keep_jpeg_bytes_and_class_names(tmp_path, streaming):
    images, dataset = hf_dataset()
    if streaming:
        dataset = dataset.to_iterable_dataset(num_shards=2)
    result = ss.write(tmp_path / "hf.slip", dataset, workers=2, verbose=False)
    assert result.samples == 20
    with ss.Reader(tmp_path / "hf.slip") as reader:
        assert reader.user_metadata == {"classes": ["c0", "c1", "c2", "c3"]}
        assert type(reader.fields["image"]).__name__ == "RGBImageField"
        assert [bytes(reader.value_bytes(k, "image")) for k in range(20)] == [tiled(i) for i in images]
        assert [reader[k]["label"] for k in range(20)] == [k % 4 for k in range(20)]


@pytest.mark.parametrize("streaming", [False, True])
def test_hugging_face_image_columns_are_images_when_the_first_image_is_none(tmp_path, streaming):
    datasets = pytest.importorskip("datasets")
    images, dataset = hf_dataset()
    dataset = datasets.Dataset.from_dict(
        {"image": [None] + [{"bytes": b, "path": None} for b in images[1:]], "label": dataset["label"]},
        features=dataset.features)
    if streaming:
        dataset = dataset.to_iterable_dataset(num_shards=2)
    result = ss.write(tmp_path / "hf.slip", dataset, workers=0, on_error="skip", verbose=False)
    assert result.samples == 19 and [i for i, _ in result.skipped] == [0]
    with ss.Reader(tmp_path / "hf.slip") as reader:
        assert type(reader.fields["image"]).__name__ == "RGBImageField"
        assert [bytes(reader.value_bytes(k, "image")) for k in range(19)] == [tiled(i) for i in images[1:]]


def litdata_dataset(folder: Path, count: int = 16) -> tuple[list[bytes], list[Path], str]:
    """``count`` JPEGs written by ``litdata.optimize`` as items ``{"image":
    PIL image, "label": 3 * k}`` in chunks of 4 items: (the JPEGs, their
    files, the dataset's folder)."""
    litdata = pytest.importorskip("litdata")
    import litdata_items

    images = jpegs(count, seed=5)
    files = []
    for k, data in enumerate(images):
        files.append(folder / f"{k}.jpg")
        files[-1].write_bytes(data)
    # litdata.optimize leaves its own SIGINT handler installed, which ends the process (exit status 0) on the
    # next Ctrl-C: the tests' own Ctrl-C (tests/test_faults.py) would end the test run.
    interrupt = signal.getsignal(signal.SIGINT)
    try:
        litdata.optimize(fn=litdata_items.image_and_label, inputs=[(str(f), k) for k, f in enumerate(files)],
                         output_dir=str(folder / "lit"), chunk_size=4, num_workers=1, mode="overwrite")
    finally:
        signal.signal(signal.SIGINT, interrupt)
    return images, files, str(folder / "lit")


def check_litdata_copy(path: Path, images: list[bytes], files: list[Path]) -> None:
    """The dataset at ``path`` holds the items of :func:`litdata_dataset`:
    labels, JPEG bytes and pixels."""
    from PIL import Image

    with ss.open_dataset(path) as reader:
        assert len(reader) == len(images)
        for k in range(len(images)):
            assert reader[k]["label"] == 3 * k
            assert bytes(reader.value_bytes(k, "image")) == tiled(images[k])  # its coefficients kept, tiled
            assert np.array_equal(reader[k]["image"], np.asarray(Image.open(files[k]).convert("RGB")))


def test_litdata_dataset_converts_with_its_labels_and_pixels(tmp_path):
    images, files, folder = litdata_dataset(tmp_path)
    source = ss.LitData(folder)
    assert len(source) == 16
    ranges = source.chunk_ranges()
    assert len(ranges) > 1 and ranges[0][0] == 0 and ranges[-1][1] == 16  # chunks of 4 items
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))
    result = ss.write(tmp_path / "lit.slip", source, workers=2, verbose=False)
    assert result.samples == 16
    check_litdata_copy(tmp_path / "lit.slip", images, files)


def test_iterables_stream_without_length(tmp_path):
    images = jpegs(9, seed=6)
    generator = ({"image": data, "label": k} for k, data in enumerate(images))
    result = ss.write(tmp_path / "gen.slip", generator, {"image": ss.RGBImageField(), "label": ss.IntField()},
                      workers=2, shard_size="1MB", verbose=False)
    assert result.samples == 9
    with ss.open_dataset(tmp_path / "gen.slip") as reader:
        assert [reader[k]["label"] for k in range(9)] == list(range(9))
    with pytest.raises(ss.ArgumentError, match="shards=2 needs the number of samples beforehand"):
        ss.write(tmp_path / "n", iter(images), {"image": ss.RGBImageField()}, shards=2, verbose=False)


def test_infer_fields_names_what_it_cannot_store():
    from slipstream.sources import infer_fields

    fields = infer_fields({"image": jpegs(1)[0], "label": 3, "score": 0.5, "meta": {"a": 1}, "raw": b"xy",
                           "embedding": np.zeros(4, np.float32)})
    assert [type(f).__name__ for f in fields.values()] == ["RGBImageField", "IntField", "FloatField", "JSONField",
                                                           "BytesField", "NDArrayField"]
    with pytest.raises(ss.ArgumentError, match="no field type for 'when', a complex"):
        infer_fields({"when": 1j})
