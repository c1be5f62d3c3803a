"""Sources given as paths, and sources that identify themselves.

``ss.Loader(path)`` converts a tar file, a folder or URL prefix of tars, a
LitData folder or an image folder once (through ``ss.cached``), with no
``name=``: each source says what identifies its content (files' sizes and
modification times, objects' ETags, LitData's index, Hugging Face's
fingerprint), so the same source finds its file again and a changed one
gets a new file.  Paths that hold no source say which class reads them.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest
from jpeg_corpus import stored as tiled
from test_sources import jpegs, litdata_dataset, write_tars

import slipstream as ss
from slipstream.sources import find_source, holds_dataset, source_at


CROP = {"image": [ss.ops.CenterCrop(16)]}
"""A pipeline for images of several sizes."""


def stored(reader: ss.Reader) -> list[tuple[bytes, int]]:
    """Each sample's stored image bytes and label."""
    return [(bytes(reader.value_bytes(k, "image")), int(reader[k]["label"])) for k in range(len(reader))]


def test_a_tar_file_and_a_folder_of_tars_are_loaded_as_webdataset_shards(tmp_path, cache):
    images = jpegs(25, seed=11)
    shards = write_tars(tmp_path / "wds", images, per_shard=10)
    assert type(source_at(shards[0])).__name__ == "WebDataset" and not holds_dataset(shards[0])
    with ss.Loader(shards[0], 5, CROP, order="sequential", verbose=False) as loader:
        assert not isinstance(loader.reader, ss.Reader)  # local shards stream their first epoch: no file yet
        for _ in range(2):
            list(loader)
        assert stored(loader.reader) == [(tiled(images[k]), k % 10) for k in range(10)]
        assert loader.reader.path.parent == cache
    with ss.Loader(tmp_path / "wds", 5, CROP, order="sequential", verbose=False) as loader:
        epochs = [[batch[1].tolist() for batch in loader] for _ in range(2)]  # image, label, json
        assert epochs[0] == epochs[1] == [[k % 10 for k in range(b, min(b + 5, 25))] for b in range(0, 25, 5)]
        assert stored(loader.reader) == [(tiled(images[k]), k % 10) for k in range(25)]
    ss.write(tmp_path / "direct.slip", ss.WebDataset(tmp_path / "wds"), verbose=False)
    with ss.Reader(tmp_path / "direct.slip") as direct, ss.Reader(ss.cached(tmp_path / "wds")) as cached:
        assert stored(direct) == stored(cached)  # the file ss.write makes, sample for sample
    assert holds_dataset(tmp_path / "direct.slip") and find_source(tmp_path / "direct.slip") is None


def test_a_litdata_folder_is_loaded_as_litdata(tmp_path, cache, monkeypatch):
    images, _, folder = litdata_dataset(tmp_path, count=8)
    assert type(source_at(folder)).__name__ == "LitData"
    with ss.Loader(folder, 4, CROP, order="sequential", verbose=False) as loader:
        for _ in range(2):  # the first epoch writes the file, the second reads it
            list(loader)
        assert stored(loader.reader) == [(tiled(images[k]), 3 * k) for k in range(8)]
    # Identified by its index, with no name=: asked again, the same file, however the folder is written.
    assert ss.cached(ss.LitData(folder)) == ss.cached(folder) == ss.cached(ss.LitData(f"{folder}/"))
    monkeypatch.chdir(Path(folder).parent)
    assert ss.cached(ss.LitData(Path(folder).name)) == ss.cached(folder)


def test_a_changed_litdata_dataset_gets_a_new_file(tmp_path, cache):
    (tmp_path / "a").mkdir()
    _, _, folder = litdata_dataset(tmp_path / "a", count=8)
    first = ss.cached(ss.LitData(folder))
    litdata_dataset(tmp_path / "a", count=6)  # written again over it ("overwrite"), other items
    second = ss.cached(ss.LitData(folder))
    assert second != first
    with ss.Reader(second) as reader:
        assert len(reader) == 6


def test_rewriting_a_shard_changes_the_identity(tmp_path, cache):
    images = jpegs(20, seed=12)
    write_tars(tmp_path / "wds", images, per_shard=10)
    first = ss.cached(tmp_path / "wds")
    assert ss.cached(ss.WebDataset(tmp_path / "wds")) == first  # the path and the object: one file
    time.sleep(0.01)
    write_tars(tmp_path / "wds", images[:9] + jpegs(1, seed=13) + images[10:], per_shard=10)
    second = ss.cached(tmp_path / "wds")
    assert second != first
    with ss.Reader(second) as reader:
        assert bytes(reader.value_bytes(9, "image")) == tiled(jpegs(1, seed=13)[0])


def test_webdataset_shards_in_object_storage_are_identified_by_etag(tmp_path, cache, s3_server):
    from slipstream.format.objectstore import ObjectPrefix

    remote = ss.Remote(storage_options=s3_server.storage_options(), cache_dir=tmp_path / "pages")
    prefix = ObjectPrefix("s3://test/paths/wds", remote)
    images = jpegs(18, seed=14)
    for shard in write_tars(tmp_path / "wds", images, per_shard=9):
        prefix.put_file(shard.rsplit("/", 1)[-1], shard)
    with ss.Loader("s3://test/paths/wds", 6, CROP, order="sequential", remote=remote, verbose=False) as loader:
        assert [batch[1].tolist() for batch in loader] == [[k % 10 for k in range(j, j + 6)] for j in (0, 6, 12)]
        list(loader)  # the second epoch reads the file the first wrote
        assert stored(loader.reader) == [(tiled(images[k]), k % 10) for k in range(18)]
        first = loader.reader.path
    source = ss.WebDataset("s3://test/paths/wds/", remote=remote)
    assert [entry[1] for entry in source.identity()["webdataset"]] == \
        [os.path.getsize(p) for p in sorted((tmp_path / "wds").glob("*.tar"))]
    assert ss.cached(source) == first
    changed = write_tars(tmp_path / "wds2", jpegs(9, seed=15), per_shard=9)[0]
    prefix.put_file("train-000001.tar", changed)  # same name, same size, other bytes: a new ETag
    assert ss.cached(ss.WebDataset("s3://test/paths/wds/", remote=remote)) != first


def test_hugging_face_datasets_are_identified_by_fingerprint(tmp_path, cache):
    datasets = pytest.importorskip("datasets")
    images = jpegs(6, seed=16)
    hf = datasets.Dataset.from_dict({"image": images, "label": list(range(6))})
    fields = {"image": ss.RGBImageField(), "label": ss.IntField()}
    first = ss.cached(hf, fields)
    assert ss.cached(datasets.Dataset.from_dict({"image": images, "label": list(range(6))}), fields) == first
    relabelled = hf.map(lambda item: {"label": item["label"] + 1})
    second = ss.cached(relabelled, fields)
    assert second != first
    with ss.Reader(second) as reader:
        assert [reader[k]["label"] for k in range(6)] == list(range(1, 7))
    with ss.Loader(relabelled, 3, CROP, order="sequential", verbose=False) as loader:
        assert [labels.tolist() for _, labels in loader] == [[1, 2, 3], [4, 5, 6]]


def test_a_source_that_cannot_identify_itself_asks_for_a_name(tmp_path, cache):
    images = jpegs(4, seed=17)
    samples = [(data, k) for k, data in enumerate(images)]
    fields = {"image": ss.RGBImageField(), "label": ss.IntField()}
    with pytest.raises(ss.ArgumentError, match="cannot tell what a list holds: pass name="):
        ss.cached(samples, fields)
    named = ss.cached(samples, fields, name="four")
    assert named.name.startswith("four-")


def test_paths_that_hold_no_source_say_which_class_reads_them(tmp_path, cache):
    shards = write_tars(tmp_path / "nested" / "part", jpegs(3, seed=18), per_shard=10)
    with pytest.raises(ss.ArgumentError, match="has no images.*slipstream.WebDataset.*slipstream.LitData"):
        ss.Loader(tmp_path / "nested", 2, verbose=False)
    with pytest.raises(ss.FormatError, match="but a tar file: read it as a source, slipstream.WebDataset"):
        ss.Reader(shards[0])


def test_a_folder_of_images_beside_tar_shards_asks_which_to_read(tmp_path, cache):
    folder = tmp_path / "train"
    for k, data in enumerate(jpegs(4, seed=19)):
        (folder / ("cat" if k % 2 else "dog")).mkdir(parents=True, exist_ok=True)
        (folder / ("cat" if k % 2 else "dog") / f"{k}.jpg").write_bytes(data)
    write_tars(folder, jpegs(2, seed=20), per_shard=10)  # a backup beside the class folders, as ImageNet's
    with pytest.raises(ss.ArgumentError, match=r"holds both tar shards \(1, such as train-000000.tar\) and "
                                               r"folders of images \(2, such as cat/\): say which to read, "
                                               r"slipstream.sources.ImageFolder\(.*\) or slipstream.WebDataset"):
        ss.Loader(folder, 2, CROP, verbose=False)
    assert len(ss.sources.ImageFolder(folder)) == 4 and ss.WebDataset(folder).length_hint() == 2  # each, asked
    (folder / "cat").rename(tmp_path / "cat")  # a folder of tars with a folder of no images beside them
    (folder / "dog").rename(tmp_path / "dog")
    (folder / "logs").mkdir()
    (folder / "logs" / "run.txt").write_text("done")
    assert type(source_at(folder)).__name__ == "WebDataset"


def test_a_brace_pattern_of_local_shards_is_a_source(tmp_path, cache):
    images = jpegs(6, seed=21)
    write_tars(tmp_path / "wds", images, per_shard=3)
    pattern = str(tmp_path / "wds" / "train-{000000..000001}.tar")
    with ss.Loader(pattern, 3, CROP, order="sequential", verbose=False) as loader:
        assert [batch[1].tolist() for batch in loader] == [[0, 1, 2], [3, 4, 5]]
    assert ss.cached(pattern) == ss.cached(tmp_path / "wds")  # the same shards: one file


def test_an_index_json_that_is_not_litdata_s_leaves_an_image_folder_an_image_folder(tmp_path, cache):
    folder = tmp_path / "images" / "a"
    folder.mkdir(parents=True)
    for k, data in enumerate(jpegs(3, seed=22)):
        (folder / f"{k}.jpg").write_bytes(data)
    (tmp_path / "images" / "index.json").write_text('{"files": 3}')
    assert type(source_at(tmp_path / "images")).__name__ == "ImageFolder"


def test_a_class_folder_added_without_images_is_refused_and_with_them_gets_a_new_file(tmp_path, cache):
    folder = tmp_path / "images"
    for k, data in enumerate(jpegs(3, seed=23)[:2]):
        (folder / "a").mkdir(parents=True, exist_ok=True)
        (folder / "a" / f"{k}.jpg").write_bytes(data)
    first = ss.cached(folder)
    (folder / "zebra").mkdir()  # made before its images arrive: a class without samples, which torchvision refuses
    with pytest.raises(ss.DatasetNotFoundError, match=r"images: 1 of its 2 class folders holds no image \('zebra'"):
        ss.cached(folder)
    (folder / "zebra" / "z.jpg").write_bytes(jpegs(3, seed=23)[2])
    second = ss.cached(folder)
    assert second != first
    with ss.Reader(second) as reader:
        assert reader.user_metadata["classes"] == ["a", "zebra"]


def test_a_warm_remote_epoch_counts_page_cache_hits(tmp_path, s3_server):
    remote = ss.Remote(storage_options=s3_server.storage_options(), cache_dir=tmp_path / "pages")
    images = jpegs(40, seed=19)
    ss.write("s3://test/paths/hits", [(data, k) for k, data in enumerate(images)],
             {"image": ss.RGBImageField(), "label": ss.IntField()}, page_size=4096, shards=2,
             remote=remote, verbose=False)
    with ss.Loader("s3://test/paths/hits", 8, CROP, remote=remote,
                   verbose=False) as loader:
        pages = loader.reader.page_count
        assert pages > 1
        list(loader)
        cold = loader.reader.cache.stats()
        assert cold["downloads"] == pages and cold["hits"] == 0
        list(loader)
        warm = loader.reader.cache.stats()
        assert warm["downloads"] == pages and warm["hits"] == pages  # every page read again, from the cache
