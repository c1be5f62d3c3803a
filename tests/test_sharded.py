"""Sharded datasets on a local disk: shard files and a manifest, read as one
dataset with the pages, orders and batches of a single file of the same
samples, and every reader and loader feature working on them."""

from __future__ import annotations

import json
import os
import re
import subprocess

import numpy as np
import pytest

import jpeg_corpus
import slipstream as ss
from cli_command import slipstream_command
from slipstream.format import manifest as M
from slipstream.ops import CenterCrop, StoredBytes, presets

COUNT, PAGE = 120, 16384
FIELDS = {"image": ss.RGBImageField(), "label": ss.IntField(), "meta": ss.JSONField()}


@pytest.fixture(scope="module")
def samples():
    sizes = [(48, 64), (40, 56), (72, 96)]
    return [(jpeg_corpus.make_sample(*sizes[i % 3], seed=i).data, i, {"i": i, "tag": "x" * (i % 7)})
            for i in range(COUNT)]


@pytest.fixture(scope="module")
def files(samples, tmp_path_factory):
    root = tmp_path_factory.mktemp("sharded")
    one = root / "one.slip"
    ss.write(one, samples, FIELDS, workers=0, page_size=PAGE, verbose=False)
    by_size = ss.write(root / "by-size", samples, FIELDS, workers=2, page_size=PAGE, shard_size="60kB",
                       verbose=False)
    by_count = ss.write(root / "by-count", samples, FIELDS, workers=0, page_size=PAGE, shards=4, verbose=False)
    assert len(by_size.shards) >= 3 and len(by_count.shards) == 4
    return one, root / "by-size", root / "by-count"


def test_shards_hold_the_pages_of_the_single_file(files):
    one, *sharded = files
    with ss.Reader(one) as single:
        for folder in sharded:
            with ss.open_dataset(folder) as reader:
                assert type(reader).__name__ == "ShardedReader" and len(reader) == COUNT
                assert reader.page_count == single.page_count
                np.testing.assert_array_equal(reader.metadata["image"]["offset"],
                                              single.metadata["image"]["offset"] - single.data_offset)
                for i in (0, 41, COUNT - 1):
                    np.testing.assert_array_equal(reader[i]["image"], single[i]["image"])
                    assert reader[i]["meta"] == single[i]["meta"] and reader[i]["label"] == i
                assert {k: v.tolist() for k, v in reader.index("label").items()} == \
                    {k: v.tolist() for k, v in single.index("label").items()}
                reader.verify_pages()
                reader.verify()


def test_file_urls_and_manifests_open_alike(files):
    one, by_size, _ = files
    opened = [ss.open_dataset(f"file://{by_size}"), ss.open_dataset(by_size / M.NAME), ss.open_dataset(f"file://{by_size / M.NAME}")]
    for reader in opened:
        assert type(reader).__name__ == "ShardedReader" and reader.read(9, "label") == 9
        reader.close()
    with ss.Reader(f"file://{one}") as single:
        assert type(single).__name__ == "Reader" and len(single) == COUNT
    with pytest.raises(ss.ArgumentError, match="a path on this machine"):
        ss.Reader(f"file://elsewhere{one}")


def test_a_reader_sends_sharded_datasets_and_urls_to_open_dataset(files):
    one, by_size, _ = files
    for path, what in [(by_size, f"is a sharded dataset \\(a folder with a {M.NAME}\\)"),
                       (by_size / M.NAME, "is the manifest of a sharded dataset"),
                       ("s3://bucket/train", "is a URL")]:
        with pytest.raises(ss.ArgumentError, match=rf"^{re.escape(str(path))} {what}: .*slipstream.open_dataset\(path"):
            ss.Reader(path)
    with ss.open_dataset(by_size) as sharded, ss.open_dataset(one) as single:
        assert type(sharded) is ss.format.ShardedReader and type(single) is ss.Reader
        assert sharded.format == single.format == "slipstream"
        assert sharded.read(7, "label") == single.read(7, "label") == 7


def test_equal_shares_and_sizes(files):
    _, by_size, by_count = files
    manifest = M.decode((by_count / M.NAME).read_bytes())
    counts = [s.samples for s in manifest.shards]
    assert sum(counts) == COUNT and max(counts) - min(counts) <= COUNT // 4  # cut at the next page boundary
    for entry in M.decode((by_size / M.NAME).read_bytes()).shards:
        assert entry.bytes == (by_size / entry.name).stat().st_size


def test_the_same_bytes_for_any_number_of_workers(samples, files, tmp_path):
    _, by_size, _ = files
    again = ss.write(tmp_path / "again", samples, FIELDS, workers=0, page_size=PAGE, shard_size="60kB",
                     verbose=False)
    assert (tmp_path / "again" / M.NAME).read_bytes() == (by_size / M.NAME).read_bytes()
    for name in again.shards:
        assert (tmp_path / "again" / name).read_bytes() == (by_size / name).read_bytes()


@pytest.mark.parametrize("order", ["sequential", "random", "quasi_random"])
def test_loaders_give_the_batches_of_the_single_file(files, order):
    one, by_size, by_count = files
    pipelines = {"image": presets.imagenet_train(32)["image"], "meta": None}
    chosen = np.arange(3, COUNT, 2)

    def epochs(path, **options):
        loader = ss.Loader(path, 16, pipelines, order=ss.Order(order, seed=7), indices=chosen, verbose=False,
                           **options)
        out = [[(i.numpy().tobytes(), l.tolist()) for i, l in loader] for _ in range(2)]
        loader.close()
        return out

    expected = epochs(one)
    assert epochs(by_size) == expected
    assert epochs(by_count / M.NAME, memory=ss.Memory(pool_pages=4)) == expected
    assert sorted(s for _, labels in expected[0] for s in labels) == chosen.tolist()


@pytest.mark.parametrize("os_cache", [True, False], ids=["mapped", "pool"])
def test_decoders_read_the_shards_pages_in_place(files, os_cache):
    """No copy: the decoders read each value at its offset in the dataset's
    numbering, in the store's one address range (the shard files mapped
    there, or each page read into its place), and the offsets bound into the
    compiled stages are never rewritten."""
    one, _, by_count = files
    pipelines = {"image": [CenterCrop(32)], "label": [], "meta": None}
    single = ss.Loader(one, 16, pipelines, order="sequential", verbose=False)
    expected = [(i.numpy().tobytes(), l.tolist()) for i, l in single]
    single.close()
    memory = ss.Memory(os_cache=os_cache, pool_pages=4)
    with ss.open_dataset(by_count) as reader:
        loader = ss.Loader(reader, 16, pipelines, order="sequential", memory=memory, verbose=False)
        store = loader.memory.store
        assert loader.memory.storage is store.storage and store.storage.size >= reader.page_count * PAGE
        assert store.capacity == (None if os_cache else 4)
        for _ in range(2):
            assert [(i.numpy().tobytes(), l.tolist()) for i, l in loader] == expected
        np.testing.assert_array_equal(loader.source.offsets("image"), reader.metadata["image"]["offset"])
        assert loader.memory.pages_fetched >= (reader.page_count if os_cache else 2 * reader.page_count)
        loader.close()


@pytest.mark.parametrize("os_cache", [True, False], ids=["mapped", "pool"])
def test_a_shard_truncated_under_a_loader_is_named_and_the_process_survives(samples, tmp_path, os_cache):
    folder = tmp_path / "data"
    ss.write(folder, samples, FIELDS, workers=0, page_size=PAGE, shards=3, verbose=False)
    victim = M.decode((folder / M.NAME).read_bytes()).shards[1].name
    loader = ss.Loader(folder, 8, {"image": [StoredBytes(4096)], "label": [], "meta": None}, order="sequential",
                       memory=ss.Memory(os_cache=os_cache, pool_pages=4), verbose=False)
    assert sorted(s for _, l in loader for s in l.tolist()) == list(range(COUNT))
    os.truncate(folder / victim, 5000)
    with pytest.raises(ss.FormatError, match=rf"{victim} (changed size|was truncated)"):
        for _ in loader:
            pass
    loader.close()


def test_values_read_in_python_and_resume(files):
    _, by_size, _ = files
    loader = ss.Loader(by_size, 10, {"image": None}, order=ss.Order("random", seed=1), verbose=False)
    iterator = iter(loader)
    first = [next(iterator) for _ in range(3)]
    state = loader.state_dict()
    rest = [(labels.tolist(), meta) for labels, meta in iterator]
    assert all(m["i"] == l for labels, meta in rest for l, m in zip(labels, meta))
    resumed = ss.Loader(by_size, 10, {"image": None}, order=ss.Order("random", seed=1), verbose=False)
    resumed.load_state_dict(state)
    assert [(labels.tolist(), meta) for labels, meta in resumed] == rest
    assert len(first) == 3


def test_a_new_write_replaces_the_old_shards_after_its_manifest(samples, tmp_path):
    folder = tmp_path / "data"
    old = ss.write(folder, samples, FIELDS, workers=0, page_size=PAGE, shards=3, verbose=False)
    new = ss.write(folder, samples[:50], FIELDS, workers=0, page_size=PAGE, shards=2, verbose=False, overwrite=True)
    assert not set(old.shards) & set(new.shards)
    assert sorted(p.name for p in folder.iterdir()) == sorted([*new.shards, M.NAME])
    with ss.open_dataset(folder) as reader:
        assert len(reader) == 50


def test_a_failed_write_leaves_the_previous_dataset(samples, tmp_path):
    folder = tmp_path / "data"
    ss.write(folder, samples, FIELDS, workers=0, page_size=PAGE, shards=3, verbose=False)
    before = sorted(p.name for p in folder.iterdir())
    broken = samples[:60] + [(b"not a jpeg", 60, {})] + samples[61:]
    with pytest.raises(ss.FieldValueError, match="was not written.*sample 60"):
        ss.write(folder, broken, FIELDS, workers=0, page_size=PAGE, shards=3, verbose=False, overwrite=True)
    assert sorted(p.name for p in folder.iterdir()) == before
    with ss.open_dataset(folder) as reader:
        assert len(reader) == COUNT


def test_damaged_manifests_and_shards_are_named(files, tmp_path):
    _, by_size, _ = files
    data = (by_size / M.NAME).read_bytes()
    for name, text, error, message in [
            ("bad-crc", data.replace(b'"samples":120', b'"samples":121', 1), ss.FormatError, "checksum mismatch"),
            ("not-json", b"{" + b"slipstream-manifest", ss.FormatError, "not JSON"),
            ("future", json.dumps({"format": M.FORMAT, "version": 9}).encode(), ss.FormatError, "version 9")]:
        folder = tmp_path / name
        folder.mkdir()
        for shard in by_size.iterdir():
            (folder / shard.name).write_bytes(shard.read_bytes())
        (folder / M.NAME).write_bytes(text)
        with pytest.raises(error, match=message):
            ss.open_dataset(folder)
    folder = tmp_path / "missing"
    folder.mkdir()
    manifest = M.decode(data)
    (folder / M.NAME).write_bytes(data)
    for entry in manifest.shards[1:]:
        (folder / entry.name).write_bytes((by_size / entry.name).read_bytes())
    with pytest.raises(ss.DatasetNotFoundError, match=f"shard {manifest.shards[0].name} is missing"):
        ss.Loader(folder, 8, verbose=False)
    (folder / manifest.shards[0].name).write_bytes((by_size / manifest.shards[1].name).read_bytes())
    with pytest.raises(ss.FormatError, match=f"manifest disagrees with shard {manifest.shards[0].name}"):
        ss.open_dataset(folder)


def test_a_corrupt_page_in_a_shard_follows_on_error(files, tmp_path):
    _, by_size, _ = files
    folder = tmp_path / "corrupt"
    folder.mkdir()
    for shard in by_size.iterdir():
        (folder / shard.name).write_bytes(shard.read_bytes())
    entry = M.decode((folder / M.NAME).read_bytes()).shards[1]
    damaged = bytearray((folder / entry.name).read_bytes())
    damaged[4096 + 50] ^= 0xFF
    (folder / entry.name).write_bytes(bytes(damaged))
    loader = ss.Loader(folder, 8, {"image": presets.imagenet_train(32)["image"], "meta": None}, order="sequential",
                       on_error="skip", verbose=False)
    with pytest.warns(ss.SampleWarning, match="does not match its checksum"):
        labels = [s for _, l in loader for s in l.tolist()]
    assert 0 < COUNT - len(labels) == len(loader.failures)
    with pytest.raises(ss.FormatError, match=f"data page 0 of shard {entry.name}"):
        ss.open_dataset(folder, verify_pages=True)


def test_the_command_line_writes_and_describes_sharded_datasets(tmp_path):
    from slipstream.sources import synthetic_folder

    images = synthetic_folder(tmp_path / "images", count=30, height=60, width=80, verbose=False)
    slipstream = [slipstream_command()]
    out = subprocess.run([*slipstream, "write", str(images), str(tmp_path / "ds"), "--shards", "3",
                          "--page-size", "16384"], capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "30 samples in 3 shards and a manifest" in out.stdout
    out = subprocess.run([*slipstream, "info", str(tmp_path / "ds"), "--verify-pages"], capture_output=True,
                         text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert "ShardedReader, 30 samples" in out.stdout and "shards: 3 (shard-00000-" in out.stdout
    assert "pages: verified" in out.stdout
    out = subprocess.run([*slipstream, "convert", str(tmp_path / "ds" / M.NAME), str(tmp_path / "one.slip")],
                         capture_output=True, text=True, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    with ss.Reader(tmp_path / "one.slip") as one, ss.open_dataset(tmp_path / "ds") as sharded:
        assert [one[i]["label"] for i in range(30)] == [sharded[i]["label"] for i in range(30)]


def test_a_dataset_of_more_shards_than_1024_opens_and_loads(tmp_path):
    """Every local shard is a guarded mapping; a dataset of many small shards
    (here 1,100) opens, loads every sample once, and releases its guards."""
    path = tmp_path / "many"
    ss.write(path, [(bytes([k % 251]) * 5000, k) for k in range(1100)],
             {"blob": ss.BytesField(), "label": ss.IntField()}, shards=1100, page_size=4096, workers=0, verbose=False)
    for _ in range(2):  # a second open works too: the first one's guards were given back
        with ss.open_dataset(path) as reader:
            assert type(reader).__name__ == "ShardedReader" and len(reader.shards) == 1100
            loader = ss.Loader(reader, 64, {"blob": [StoredBytes(5000)], "label": []}, as_dict=True, verbose=False)
            labels = []
            for b in loader:  # each value's 5,000 bytes, read from its shard's pages
                assert (b["blob"].numpy() == (b["label"].numpy() % 251)[:, None]).all()
                labels.append(b["label"].numpy().copy())  # the loader reuses its batches' memory
            labels = np.concatenate(labels)
            assert sorted(labels.tolist()) == list(range(1100))
