"""A loader over a source whose dataset file is not in the cache yet trains
at once: its first epoch decodes the source's samples as they are encoded,
while the file is written, and later epochs read the file.

Shown here on real sources (an image folder, a Hugging Face dataset, a
LitData dataset), each against a loader over the finished file and against
``ss.write``'s file of the same source; and when things go wrong: a process
killed in the first epoch, a corrupt image, an epoch left early.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
from jpeg_corpus import stored as tiled
from test_distributed import free_port, launch_ranks
from test_sources import jpegs, litdata_dataset, write_tars

import slipstream as ss
from slipstream.loader import orders
from slipstream.ops import presets
from slipstream.sources import ImageFolder, synthetic_folder

PIPELINES = presets.imagenet_train(48)
"""Random crops, flips and normalization: batches that show any difference in the bytes or the draws."""


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return synthetic_folder(tmp_path_factory.mktemp("first") / "images", count=70, height=60, width=80,
                            verbose=False)


def epoch(loader: ss.Loader) -> list[list[np.ndarray]]:
    return [[value.numpy().copy() for value in batch] for batch in loader]


def same(a: list[list[np.ndarray]], b: list[list[np.ndarray]]) -> bool:
    return len(a) == len(b) and all(len(x) == len(y) and all(np.array_equal(u, v) for u, v in zip(x, y))
                                    for x, y in zip(a, b))


def samples_of(path: Path) -> list[tuple[bytes, int]]:
    with ss.Reader(path) as reader:
        return [(bytes(reader.value_bytes(k, "image")), int(reader[k]["label"])) for k in range(len(reader))]


def dataset_files(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.slip")) if cache.exists() else []


@pytest.mark.parametrize("order", ["random", "sequential"])
def test_the_first_epoch_streams_and_gives_the_batches_of_the_file(folder, cache, tmp_path, order):
    with ss.Loader(folder, 16, PIPELINES, order=ss.Order(order, seed=4), verbose=False) as loader:
        assert not dataset_files(cache)  # training starts before any dataset file exists
        first = epoch(loader)
        assert not dataset_files(cache)  # ... and none exists until the next epoch asks for it
        second = epoch(loader)
        path = loader.reader.path
        assert dataset_files(cache) == [path] and isinstance(loader.reader, ss.Reader)
    with ss.Loader(folder, 16, PIPELINES, order=ss.Order(order, seed=4), verbose=False) as cached:
        assert cached.reader.path == path  # the file is found in the cache: no first epoch this time
        assert same(epoch(cached), first) and same(epoch(cached), second)
    ss.write(tmp_path / "direct.slip", folder, verbose=False)
    assert samples_of(path) == samples_of(tmp_path / "direct.slip")
    if order == "sequential":  # samples arrived in index order: the very file ss.write writes
        assert path.read_bytes() == (tmp_path / "direct.slip").read_bytes()


def test_a_hugging_face_dataset_trains_two_epochs_from_nothing(cache, tmp_path):
    datasets = pytest.importorskip("datasets")
    images = jpegs(20, seed=30)
    hf = datasets.Dataset.from_dict({"image": images, "label": [k % 4 for k in range(20)]})
    pipelines = {"image": [ss.ops.CenterCrop(16)]}
    with ss.Loader(hf, 8, pipelines, order=ss.Order("random", seed=1), verbose=False) as loader:
        epochs = [[batch[1].tolist() for batch in loader] for _ in range(2)]
        path = loader.reader.path
    assert sorted(sum(epochs[0], [])) == sorted(k % 4 for k in range(20))
    assert [bytes(b) for b, _ in samples_of(path)] == [tiled(i) for i in images]


def test_a_litdata_dataset_trains_two_epochs_from_nothing(cache, tmp_path):
    images, _, lit = litdata_dataset(tmp_path, count=12)
    pipelines = {"image": [ss.ops.CenterCrop(16)]}
    with ss.Loader(lit, 4, pipelines, order="sequential", verbose=False) as loader:
        epochs = [[batch[1].tolist() for batch in loader] for _ in range(2)]
        path = loader.reader.path
    assert epochs[0] == epochs[1] == [[3 * k for k in range(b, b + 4)] for b in range(0, 12, 4)]
    assert samples_of(path) == [(tiled(images[k]), 3 * k) for k in range(12)]


def test_a_litdata_dataset_in_object_storage_trains_from_its_url_through_the_remote_s_endpoint(cache, tmp_path,
                                                                                               s3_server, monkeypatch):
    from slipstream.format.objectstore import ObjectPrefix

    images, _, lit = litdata_dataset(tmp_path, count=12)
    url = "s3://test/first-epoch/lit"
    remote = ss.Remote(storage_options=s3_server.storage_options(), cache_dir=tmp_path / "pages")
    prefix = ObjectPrefix(url, remote)
    for file in sorted(Path(lit).iterdir()):
        prefix.put_file(file.name, file)
    for name in [name for name in os.environ if name.startswith("AWS_")]:  # nothing but the remote names the server
        monkeypatch.delenv(name)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    pipelines = {"image": [ss.ops.CenterCrop(16)]}
    with ss.Loader(url, 4, pipelines, order="sequential", remote=remote, verbose=False) as loader:
        assert not isinstance(loader.reader, ss.Reader)  # epoch 0 reads the dataset in the bucket
        epochs = [[batch[1].tolist() for batch in loader] for _ in range(2)]
        path = loader.reader.path
    assert epochs[0] == epochs[1] == [[3 * k for k in range(b, b + 4)] for b in range(0, 12, 4)]
    assert samples_of(path) == [(tiled(images[k]), 3 * k) for k in range(12)]
    assert any((tmp_path / "pages" / "litdata").iterdir())  # litdata's chunk cache is in the remote's folder
    with pytest.raises(ss.ArgumentError, match=r"no equivalent of the storage option 'conditional_put'"):
        ss.LitData(url, remote=ss.Remote(storage_options={**s3_server.storage_options(), "conditional_put": "etag"}))


def shards_of(folder: Path, count: int, per_shard: int) -> list[bytes]:
    """Tar shards whose labels are the samples' indices: the images written."""
    images = jpegs(count, seed=40)
    write_tars(folder, images, per_shard, extra={k: {"cls": k} for k in range(count)})
    return images


def test_local_webdataset_shards_stream_their_first_epoch_through_a_bounded_shuffle(cache, tmp_path):
    shards_of(tmp_path / "wds", 70, per_shard=25)
    pipelines = {"image": [ss.ops.CenterCrop(16)], "json": None}
    with ss.Loader(tmp_path / "wds", 8, pipelines, order=ss.Order("random", seed=3), verbose=False) as loader:
        assert not dataset_files(cache) and not isinstance(loader.reader, ss.Reader)  # training starts at once
        first = np.concatenate([batch[1].numpy().copy() for batch in loader])
        second = epoch(loader)
        path = loader.reader.path
    # Epoch 0 follows the stream: the k-th sample given is among the first min(256 + 2k, 16384 + k) of the
    # shards, in the order orders.stream_order documents; it holds every sample once.
    assert first.tolist() == orders.stream_order(np.arange(70), 70, 3, 0).tolist()
    assert sorted(first.tolist()) == list(range(70))
    with ss.Loader(tmp_path / "wds", 8, pipelines, order=ss.Order("random", seed=3), verbose=False) as cached:
        assert cached.reader.path == path
        cached.set_epoch(1)
        assert same(epoch(cached), second)  # later epochs are those of a run that found the file
    ss.write(tmp_path / "direct.slip", ss.WebDataset(tmp_path / "wds"), verbose=False)
    assert path.read_bytes() == (tmp_path / "direct.slip").read_bytes()  # the stream's order: ss.write's file


def test_a_streamed_first_epoch_resumes_from_its_state(cache, tmp_path):
    shards_of(tmp_path / "wds", 40, per_shard=15)
    pipelines = {"image": [ss.ops.CenterCrop(16)], "json": None}
    order = ss.Order("random", seed=8)
    with ss.Loader(tmp_path / "wds", 6, pipelines, order=order, verbose=False) as loader:
        whole = [batch[1].tolist() for batch in loader]
    for file in dataset_files(cache):
        file.unlink()  # the next runs start without the file again
    with ss.Loader(tmp_path / "wds", 6, pipelines, order=order, verbose=False) as stopped:
        for k, _ in enumerate(stopped):
            if k == 2:
                state = stopped.state_dict()
                break
    # The file finished since (closing a loader completes it when every sample has arrived; ss.cached, when not):
    # the run resumes over the file, in the stream's order.
    ss.cached(tmp_path / "wds", verbose=False)
    with ss.Loader(tmp_path / "wds", 6, pipelines, order=order, verbose=False) as resumed:
        assert isinstance(resumed.reader, ss.Reader)
        resumed.load_state_dict(state)
        assert [batch[1].tolist() for batch in resumed] == whole[3:]
        resumed.load_state_dict(state)
        batches = iter(resumed)
        next(batches)
        again = resumed.state_dict()  # stopped again: its state resumes the stream's order as well
    with ss.Loader(tmp_path / "wds", 6, pipelines, order=order, verbose=False) as resumed:
        resumed.load_state_dict(again)
        assert [batch[1].tolist() for batch in resumed] == whole[4:]
    for file in dataset_files(cache):
        file.unlink()  # as if the run had been killed: it resumes streaming the first epoch again
    with ss.Loader(tmp_path / "wds", 6, pipelines, order=order, verbose=False) as resumed:
        assert not isinstance(resumed.reader, ss.Reader)
        resumed.load_state_dict(state)
        assert [batch[1].tolist() for batch in resumed] == whole[3:]
        list(resumed)
        assert isinstance(resumed.reader, ss.Reader) and len(resumed.reader) == 40


def shards_in_a_bucket(tmp_path, s3_server, url, folder):
    """Three shards of 12, 12 and 6 samples (:func:`shards_of`), written under ``tmp_path / "wds"`` and
    uploaded under ``url + "/" + folder``: the remote options, the prefix and the local shards."""
    from slipstream.format.objectstore import ObjectPrefix

    remote = ss.Remote(storage_options=s3_server.storage_options(), cache_dir=tmp_path / "pages")
    prefix = ObjectPrefix(url, remote)
    shards_of(tmp_path / "wds", 30, per_shard=12)
    tars = sorted((tmp_path / "wds").glob("*.tar"))
    for tar in tars:
        prefix.put_file(folder + tar.name, tar)
    return remote, prefix, tars


def streams_the_shards(source, remote, tmp_path):
    """Check that a loader over the shards of :func:`shards_in_a_bucket` trains at once, its first epoch in
    the stream's order, and writes ``ss.write``'s file of them: that file."""
    pipelines = {"image": [ss.ops.CenterCrop(16)], "json": None}
    with ss.Loader(source, 6, pipelines, order=ss.Order("random", seed=5), remote=remote, verbose=False) as loader:
        assert not isinstance(loader.reader, ss.Reader)
        first = np.concatenate([batch[1].numpy().copy() for batch in loader])
        list(loader)
        path = loader.reader.path
    assert first.tolist() == orders.stream_order(np.arange(30), 30, 5, 0).tolist()
    ss.write(tmp_path / "direct.slip", ss.WebDataset(tmp_path / "wds"), verbose=False, overwrite=True)
    assert path.read_bytes() == (tmp_path / "direct.slip").read_bytes()
    return path


def test_shards_in_object_storage_stream_their_first_epoch_when_img2dataset_counted_them(cache, tmp_path,
                                                                                         s3_server):
    url = "s3://test/first-epoch/wds"
    remote, prefix, tars = shards_in_a_bucket(tmp_path, s3_server, url, "")
    pipelines = {"image": [ss.ops.CenterCrop(16)], "json": None}
    stated = ss.WebDataset(url + "/", remote=remote, length=30)  # a count known from elsewhere
    with ss.Loader(stated, 6, pipelines, order="sequential", verbose=False) as loader:
        assert not isinstance(loader.reader, ss.Reader)
        assert [batch[1].tolist() for batch in loader] == [list(range(k, k + 6)) for k in range(0, 30, 6)]
    with pytest.raises(ss.ArgumentError, match="length must be a number of samples"):
        ss.WebDataset(url + "/", remote=remote, length=-1)
    for file in dataset_files(cache):
        file.unlink()
    for tar, count in zip(tars, (12, 12, 6)):  # what img2dataset writes beside each shard
        stats = {"count": count + 1, "successes": count, "failed_to_download": 1, "failed_to_resize": 0}
        prefix.put_bytes(tar.stem + "_stats.json", json.dumps(stats).encode())
    streams_the_shards(url, remote, tmp_path)
    prefix.put_bytes(tars[1].stem + "_stats.json", b"{not json")
    with pytest.raises(ss.FormatError, match=r"train-000001_stats.json: not the stats img2dataset writes"):
        ss.WebDataset(url + "/", remote=remote).length_hint()


def test_shards_that_nothing_counts_stream_their_first_epoch_which_learns_its_length_at_the_end(cache, tmp_path,
                                                                                                 s3_server):
    url = "s3://test/first-epoch/uncounted"
    remote, prefix, tars = shards_in_a_bucket(tmp_path, s3_server, url, "")
    assert ss.WebDataset(url + "/", remote=remote).length_hint() is None  # neither index, stats nor length=
    path = streams_the_shards(url, remote, tmp_path)  # the bounded shuffle of 30 samples; ss.write's file
    pipelines = {"image": [ss.ops.CenterCrop(16)], "json": None}

    path.unlink()
    with ss.Loader(url, 7, pipelines, order="sequential", sharding=ss.Sharding(drop_last=True), remote=remote,
                   verbose=False) as loader:
        with pytest.raises(TypeError, match="known only at its end"):
            len(loader)
        assert "epoch 0's length not known yet" in repr(loader)
        batches = iter(loader)
        with pytest.raises(TypeError, match="known only at its end"):
            len(batches)
        labels = [batch[1].tolist() for batch in batches]
        assert labels == [list(range(k, k + 7)) for k in range(0, 28, 7)]  # the stream's order, 2 samples dropped
        assert len(loader) == 4  # known once the stream has ended
        assert [batch[1].tolist() for batch in loader] == labels  # epoch 1 reads the file, every sample in it
        assert isinstance(loader.reader, ss.Reader) and len(loader.reader) == 30
    assert path.read_bytes() == (tmp_path / "direct.slip").read_bytes()

    # Stopped in epoch 0: resumed by a run that streams it again, and by one over the file.
    order = ss.Order("random", seed=5)
    path.unlink()
    with ss.Loader(url, 6, pipelines, order=order, remote=remote, verbose=False) as loader:
        unknown = loader.state_dict()  # taken before the stream's length is known
        whole = [batch[1].tolist() for batch in loader]
    assert sum(whole, []) == orders.stream_order(np.arange(30), 30, 5, 0).tolist()
    assert unknown["samples"] == -1 and "a stream of unknown length" in unknown["dataset"]
    path.unlink()
    with ss.Loader(url, 6, pipelines, order=order, remote=remote, verbose=False) as stopped:
        for k, _ in enumerate(stopped):
            if k == 1:
                known = stopped.state_dict()  # the length known or not, as far as the stream was read ahead
                break
    for state in ({**unknown, "batch": 2}, known):
        if path.exists():
            path.unlink()  # as if the run had been killed: it resumes streaming the first epoch again
        with ss.Loader(url, 6, pipelines, order=order, remote=remote, verbose=False) as resumed:
            resumed.load_state_dict(state)
            assert [batch[1].tolist() for batch in resumed] == whole[2:]
            assert len(resumed) == 5
        with ss.Loader(url, 6, pipelines, order=order, remote=remote, verbose=False) as resumed:
            assert isinstance(resumed.reader, ss.Reader)
            resumed.load_state_dict(state)
            assert [batch[1].tolist() for batch in resumed] == whole[2:]
    path.unlink()
    with ss.Loader(url, 6, pipelines, order=order, remote=remote, verbose=False) as resumed:
        resumed.load_state_dict({**unknown, "batch": 9})  # checked once the stream has ended
        with pytest.raises(ss.ArgumentError, match=r"resumes epoch 0 at batch 9, but the stream .* makes 5 batches"):
            list(resumed)

    # What needs the stream's length beforehand writes the file first: a subset, repeated augmentation.
    path.unlink()
    with ss.Loader(url, 6, pipelines, indices=[1, 2, 3], remote=remote, verbose=False) as loader:
        assert isinstance(loader.reader, ss.Reader) and [batch[1].tolist() for batch in loader] != []
    path.unlink()
    with ss.Loader(url, 6, pipelines, order=ss.Order("random", repeats=2, selected_round=0), remote=remote,
                   verbose=False) as loader:
        assert isinstance(loader.reader, ss.Reader)


def test_a_stream_of_unknown_length_records_a_bad_sample_and_is_read_to_its_end_when_its_epoch_is_skipped(
        cache, tmp_path, s3_server):
    from slipstream.format.objectstore import ObjectPrefix

    url = "s3://test/first-epoch/uncounted-bad"
    remote = ss.Remote(storage_options=s3_server.storage_options(), cache_dir=tmp_path / "pages")
    images = jpegs(20, seed=41)
    images[5] = images[5][: len(images[5]) // 2]  # a cut JPEG
    write_tars(tmp_path / "wds", images, 8, extra={k: {"cls": k} for k in range(20)})
    for tar in sorted((tmp_path / "wds").glob("*.tar")):
        ObjectPrefix(url, remote).put_file(tar.name, tar)
    pipelines = {"image": [ss.ops.CenterCrop(16)], "json": None}
    with ss.Loader(url, 4, pipelines, order="sequential", remote=remote, verbose=False) as loader:
        with pytest.raises(ss.FieldValueError, match=r"sample 5 \(.*train-000000.tar: img000005\), field 'image'"):
            epoch(loader)
    assert not dataset_files(cache)
    with ss.Loader(url, 4, pipelines, order="sequential", on_error="skip", remote=remote, verbose=False) as loader:
        with pytest.warns(ss.SampleWarning, match="sample 5: it could not be written"):
            first = [batch[1].tolist() for batch in loader]
        assert first == [[0, 1, 2, 3], [4, 6, 7], [8, 9, 10, 11], [12, 13, 14, 15], [16, 17, 18, 19]]
        path = loader.reader.path
    ss.write(tmp_path / "direct.slip", ss.WebDataset(tmp_path / "wds"), on_error="skip", verbose=False)
    with ss.Reader(path) as reader, ss.Reader(tmp_path / "direct.slip") as direct:
        assert len(reader) == 20 and list(reader.unreadable) == [5]  # recorded, in the index space of the stream
        assert [bytes(reader.value_bytes(k, "image")) for k in (4, 6, 19)] == \
            [bytes(direct.value_bytes(k, "image")) for k in (4, 5, 18)]  # ss.write leaves it out instead

    path.unlink()
    with ss.Loader(url, 4, pipelines, on_error="skip", remote=remote, verbose=False):
        pass
    assert not dataset_files(cache)  # closed before its stream was read to the end: no file
    with ss.Loader(url, 4, pipelines, order="sequential", on_error="skip", remote=remote, verbose=False) as loader:
        loader.set_epoch(1)  # the first epoch skipped: the stream is read to its end, the file written first
        with pytest.warns(ss.SampleWarning):
            assert [batch[1].tolist() for batch in loader] == first
        assert len(loader) == 5 and isinstance(loader.reader, ss.Reader) and loader.reader.path == path


class StallingShards(ss.WebDataset):
    """Tar shards that do not say their length and whose reading stalls after ``flowing`` samples until
    ``flow`` is set (as a stalled download does)."""

    def __init__(self, *args, flowing: int, **kwargs):
        super().__init__(*args, **kwargs)
        self.flowing, self.flow = flowing, threading.Event()

    def length_hint(self):
        return None

    def __iter__(self):
        for k, item in enumerate(super().__iter__()):
            if k == self.flowing:
                assert self.flow.wait(60), "the test never let the stream flow again"
            yield item


def test_an_epoch_left_while_its_stream_stalls_stops_at_once(cache, tmp_path):
    shards_of(tmp_path / "wds", 200, per_shard=50)
    shards = StallingShards(tmp_path / "wds", flowing=70)  # samples are read 64 at a time: in the second read
    pipelines = {"image": [ss.ops.CenterCrop(16)], "json": None}
    with ss.Loader(shards, 4, pipelines, order="sequential", verbose=False) as loader:
        batches = iter(loader)
        assert [next(batches)[1].tolist() for _ in range(2)] == [[0, 1, 2, 3], [4, 5, 6, 7]]
        started = time.perf_counter()
        batches.close()  # the next batch waits for samples the stream does not give
        assert time.perf_counter() - started < 5
        shards.flow.set()
    assert not dataset_files(cache)  # left before the stream's end: no file
    shards.flow.clear()
    with ss.Loader(shards, 4, pipelines, order="sequential", verbose=False) as loader:
        shards.flow.set()
        assert [batch[1].tolist() for batch in loader] == [list(range(k, k + 4)) for k in range(0, 200, 4)]
        assert len(loader) == 50


class StallingFolder(ImageFolder):
    """An image folder whose reads stall after ``flowing`` of them until ``flow`` is set (as a read from a network
    share that hangs)."""

    def __init__(self, root, flowing: int):
        super().__init__(root)
        self.flowing, self.flow, self.reads = flowing, threading.Event(), 0

    def __getitem__(self, index):
        self.reads += 1
        if self.reads > self.flowing:
            assert self.flow.wait(30), "the test never let the reads go on"
        return super().__getitem__(index)


def first_epoch_threads() -> list[threading.Thread]:
    return [thread for thread in threading.enumerate() if thread.name == "slipstream-first-epoch"]


def test_an_epoch_left_while_a_source_read_stalls_starts_again_and_closes_at_once(folder, cache):
    """Neither the next epoch, whose first batches have arrived, nor closing the loader (its iterator open, waiting
    for a sample whose read stalls) waits for the stalled read; once it returns, nothing more is read or written."""
    source = StallingFolder(folder, flowing=40)  # in batch 5 of 9
    pipelines = {"image": [ss.ops.CenterCrop(16)], "label": None}
    loader = ss.Loader(source, 8, pipelines, order="sequential", verbose=False)
    batches = iter(loader)
    first = [next(batches)[0].numpy().copy() for _ in range(2)]
    started = time.perf_counter()
    again = iter(loader)  # epoch 0 again, from its start
    assert all(np.array_equal(next(again)[0].numpy(), batch) for batch in first)
    assert next(again)[0].shape == (8, 16, 16, 3)
    assert time.perf_counter() - started < 5
    started = time.perf_counter()
    loader.close()
    assert time.perf_counter() - started < 5
    reads = source.reads
    assert first_epoch_threads()  # still in the stalled read
    source.flow.set()
    for thread in first_epoch_threads():
        thread.join(10)
    assert not first_epoch_threads() and source.reads == reads
    assert not dataset_files(cache) and not list(cache.glob(".*.tmp"))


def test_shards_listed_by_a_wids_index_stream_their_first_epoch(cache, tmp_path, s3_server):
    url = "s3://test/first-epoch/wids"
    remote, prefix, tars = shards_in_a_bucket(tmp_path, s3_server, url, "shards/")
    # What widsindex writes, relative to the index; the last shard through a second index (a "source_url").
    index = {"__kind__": "wids-shard-index-v1", "wids_version": 1, "name": "train",
             "shardlist": [{"url": f"shards/{tar.name}", "nsamples": 12, "filesize": tar.stat().st_size}
                           for tar in tars[:2]],
             "datasets": [{"source_url": f"{url}/shards/rest.json"}]}
    prefix.put_bytes("train.json", json.dumps(index).encode())
    rest = {"wids_version": 1, "shardlist": [{"url": tars[2].name, "nsamples": 6}]}
    prefix.put_bytes("shards/rest.json", json.dumps(rest).encode())
    source = ss.WebDataset(f"{url}/train.json", remote=remote)
    assert source.shards == [f"{url}/shards/{tar.name}" for tar in tars] and source.length_hint() == 30
    path = streams_the_shards(f"{url}/train.json", remote, tmp_path)  # counted by the index
    pipelines = {"image": [ss.ops.CenterCrop(16)], "json": None}

    local = tmp_path / "wds" / "shards.json"  # on this machine: relative to the index's folder, or to its "base"
    local.write_text(json.dumps({"wids_version": 1, "base": "..", "shardlist": [
        {"url": f"wds/{tar.name}", "nsamples": n} for tar, n in zip(tars, (12, 12, 6))]}))
    assert ss.WebDataset(local).shards == [str(tar) for tar in tars]
    assert ss.sources.source_at(local).length_hint() == 30
    samples, fields, _ = ss.sources.as_source(ss.WebDataset(local), {"image": ss.RGBImageField()})
    assert list(fields) == ["image"] and samples.length_hint() == 30  # other fields keep the index's counts
    local.write_text(json.dumps({"wids_version": 1, "shardlist": [
        {"url": tar.name, "nsamples": n} for tar, n in zip(tars, (12, 13, 6))]}))
    with ss.Loader(local, 6, pipelines, order="sequential", verbose=False) as loader:
        with pytest.raises(ss.FormatError, match="ended after 30 samples, but said it holds 31"):
            epoch(loader)
    assert dataset_files(cache) == [path]  # no file from the miscounted shards


@pytest.mark.parametrize("content, message", [
    (b"[1, 2", r"index.json: a shard index must be JSON"),
    (b'{"shardlist": []}', r"index.json: a shard index \(wids\) gives \"wids_version\": 1; this one has none"),
    (b'{"wids_version": 1, "shardlist": []}', r"index.json: the shard index lists no shards"),
    (b'{"wids_version": 1, "shardlist": [{"url": "a.tar"}]}',
     r"index.json: shard 0 \(.*a.tar\) must give its number of samples as \"nsamples\" .*, not None"),
    (b'{"wids_version": 1, "shardlist": [{"url": "a.tar", "nsamples": -2}]}', r"not -2"),
    (b'{"wids_version": 1, "shardlist": [{"nsamples": 3}]}', r"shard 0 of the shard list must be an object with"),
    (b'{"wids_version": 1, "shardlist": [{"url": "a.tar", "nsamples": 2199023255553}]}', r"\(0 to 1099511627776\)"),
    (b'{"wids_version": true, "shardlist": [{"url": "a.tar", "nsamples": 1}]}', r"this one has True"),
    (b'{"wids_version": 1, "base": 5, "shardlist": [{"url": "a.tar", "nsamples": 1}]}', r"\"base\" must be a path"),
    (b'{"wids_version": 1, "datasets": [{"source_url": "missing.json"}]}', r"missing.json: no such shard index"),
])
def test_a_shard_index_that_cannot_be_read_says_what_is_wrong_naming_it(tmp_path, content, message):
    (tmp_path / "index.json").write_bytes(content)
    with pytest.raises((ss.FormatError, ss.DatasetNotFoundError), match=message):
        ss.WebDataset(tmp_path / "index.json")


def test_shards_on_an_http_server_are_named_by_a_shard_index_or_a_pattern_not_by_their_folder(tmp_path):
    shards_of(tmp_path / "wds", 6, per_shard=3)
    (tmp_path / "wds" / "train.json").write_text(json.dumps({"wids_version": 1, "shardlist": [
        {"url": f"train-00000{k}.tar", "nsamples": 3} for k in range(2)]}))
    port = free_port()
    server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1", "-d",
                               str(tmp_path / "wds")], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        url = f"http://127.0.0.1:{port}/"
        fields = {"image": ss.RGBImageField(), "label": ss.IntField()}
        for attempt in range(100):  # the server starting
            try:
                indexed = ss.WebDataset(url + "train.json", fields)
                break
            except ss.SlipstreamError:
                time.sleep(0.1)
        assert indexed.shards == [f"{url}train-00000{k}.tar" for k in range(2)] and indexed.length_hint() == 6
        pattern = ss.WebDataset(url + "train-{000000..000001}.tar", fields)
        assert pattern.shards == indexed.shards
        with pytest.raises(ss.ArgumentError, match=r"a folder on an HTTP server cannot be listed; name its shards"):
            ss.WebDataset(url, fields)
        # The server lists no folder: each shard is asked for its size, and its img2dataset stats are looked for.
        sizes = [(tmp_path / "wds" / f"train-00000{k}.tar").stat().st_size for k in range(2)]
        assert [size for _, size, _ in pattern.identity()["webdataset"]] == sizes
        assert pattern.length_hint() is None  # no stats: a stream that learns its length at its end
        for k in range(2):
            (tmp_path / "wds" / f"train-00000{k}_stats.json").write_text(json.dumps({"successes": 3}))
        assert ss.WebDataset(url + "train-{000000..000001}.tar", fields).length_hint() == 6
        with pytest.raises(ss.DatasetNotFoundError, match=r"train-000002.tar: no such tar shard"):
            ss.WebDataset(url + "train-{000000..000002}.tar", fields).identity()
    finally:
        server.kill()
        server.wait()


def test_shard_urls_resolve_against_the_index_and_a_folder_named_json_is_a_folder(tmp_path):
    from slipstream.sources.shard_index import _resolved

    assert _resolved("a/../b.tar", "s3://bucket/train") == "s3://bucket/train/b.tar"
    assert _resolved("/other/b.tar", "s3://bucket/train") == "s3://bucket/other/b.tar"
    assert _resolved("//mirror/b.tar", "https://host/train") == "https://mirror/b.tar"
    assert _resolved("gs://elsewhere/b.tar", "s3://bucket/train") == "gs://elsewhere/b.tar"
    assert _resolved("file:///data/b.tar", "s3://bucket/train") == "/data/b.tar"
    assert _resolved("b.tar", "/data/train") == "/data/train/b.tar"
    shards_of(tmp_path / "tars.json", 7, per_shard=4)  # a folder of shards, whatever its name
    assert ss.WebDataset(tmp_path / "tars.json").length_hint() == 7
    assert ss.sources.source_at(tmp_path / "tars.json").length_hint() == 7


class _Opens:
    """The paths Python opens while counting (an audit hook, added once: hooks cannot be removed)."""

    paths: list[str] | None = None

    @classmethod
    def hook(cls, event: str, args: tuple) -> None:
        if event == "open" and cls.paths is not None and isinstance(args[0], (str, os.PathLike)):
            cls.paths.append(os.fspath(args[0]))


sys.addaudithook(_Opens.hook)


def test_a_loader_given_a_shard_index_reads_it_once(cache, tmp_path):
    shards_of(tmp_path / "wds", 10, per_shard=4)
    index = tmp_path / "wds" / "train.json"
    index.write_text(json.dumps({"wids_version": 1, "shardlist": [
        {"url": tar.name, "nsamples": n} for tar, n in zip(sorted((tmp_path / "wds").glob("*.tar")), (4, 4, 2))]}))
    _Opens.paths = []
    try:
        with ss.Loader(index, 5, {"image": [ss.ops.CenterCrop(16)], "json": None}, order="sequential",
                       verbose=False) as loader:
            labels = [batch[1].numpy().copy() for batch in loader]
    finally:
        opened, _Opens.paths = _Opens.paths, None
    assert sorted(np.concatenate(labels).tolist()) == list(range(10))
    assert opened.count(str(index)) == 1, opened


def test_a_stream_order_is_a_bounded_shuffle():
    for size, indices in ((5000, np.arange(5000)), (300, np.array([7, 3, 3, 250, 0]))):
        given = orders.stream_order(np.arange(size), size, 11, 2, buffer=1000, first=50)
        k = np.arange(size)
        assert sorted(given.tolist()) == list(range(size)) and (given < np.minimum(50 + 2 * k, 1000 + k)).all()
        assert not np.array_equal(given, orders.stream_order(np.arange(size), size, 11, 3, buffer=1000, first=50))
        subset = orders.stream_order(indices, size, 11, 2, buffer=1000, first=50)
        place = np.argsort(given)
        assert sorted(subset.tolist()) == sorted(indices.tolist()) and (np.diff(place[subset]) >= 0).all()
        # Followed as the stream is read, without its length: the same samples in the same order.
        online, entered = orders.StreamShuffle(11, 2, buffer=1000, first=50), 0
        followed = []
        while online.has_more():
            while online.wants():
                if entered < size:
                    online.enter(entered)
                    entered += 1
                else:
                    online.end()
            if online.has_more():
                followed.append(online.give())
                assert online.entered <= min(size, 50 + 2 * (len(followed) - 1), 1000 + len(followed) - 1)
        assert followed == given.tolist()


def test_counting_a_shard_s_samples_by_their_headers_matches_reading_them(tmp_path):
    shards_of(tmp_path / "wds", 30, per_shard=12)
    shard = sorted((tmp_path / "wds").glob("*.tar"))[1]
    shard.write_bytes(shard.read_bytes()[:7000])  # cut inside a member: the rest of the shard is lost
    source = ss.WebDataset(tmp_path / "wds")
    items = list(source)
    assert source.length_hint() == len(items) < 30
    assert sum(isinstance(values, Exception) for _, values in items) == 1


def test_a_stream_that_changes_while_it_is_read_says_so(cache, tmp_path):
    shards_of(tmp_path / "wds", 30, per_shard=15)
    with ss.Loader(tmp_path / "wds", 6, {"image": [ss.ops.CenterCrop(16)], "json": None}, order="sequential",
                   verbose=False) as loader:
        shard = sorted((tmp_path / "wds").glob("*.tar"))[1]
        write_tars(tmp_path / "other", jpegs(5, seed=41), per_shard=5)
        shard.write_bytes(next((tmp_path / "other").glob("*.tar")).read_bytes())  # 5 samples where 15 were
        with pytest.raises(ss.FormatError, match="ended after 20 samples, but said it holds 30"):
            epoch(loader)
    assert not dataset_files(cache)


def test_cache_dir_names_the_folder_the_file_goes_to(folder, cache, tmp_path):
    mine = tmp_path / "fast-disk"
    with ss.Loader(folder, 16, PIPELINES, order=ss.Order("random", seed=2), cache_dir=mine, verbose=False) as loader:
        first = epoch(loader)
        epoch(loader)
        path = loader.reader.path
    assert path.parent == mine and not dataset_files(cache)
    assert path.name == ss.cached(folder, cache_dir=mine, verbose=False).name  # the name ss.cached gives it
    with ss.Loader(folder, 16, PIPELINES, order=ss.Order("random", seed=2), cache_dir=mine, verbose=False) as again:
        assert again.reader.path == path and same(epoch(again), first)
    with pytest.raises(ss.ArgumentError, match="is a dataset already: leave cache_dir out"):
        ss.Loader(path, 16, PIPELINES, cache_dir=mine, verbose=False)


def test_repeated_augmentation_streams_each_sample_once(folder, cache):
    order = ss.Order("random", seed=3, repeats=2, selected_round=0)
    with ss.Loader(folder, 10, PIPELINES, order=order, verbose=False) as loader:
        first = epoch(loader)
        epoch(loader)
        path = loader.reader.path
    with ss.Loader(folder, 10, PIPELINES, order=order, verbose=False) as cached:
        assert cached.reader.path == path and same(epoch(cached), first)


def test_samples_the_epoch_does_not_visit_are_written_too(folder, cache):
    with ss.Loader(folder, 8, PIPELINES, indices=range(0, 70, 3), order="random", verbose=False) as loader:
        visited = epoch(loader)
        assert len(visited) == 3
        epoch(loader)
        assert len(loader.reader) == 70  # the file holds every sample of the source


def test_an_epoch_left_early_starts_again_with_the_same_batches(folder, cache):
    with ss.Loader(folder, 10, PIPELINES, order=ss.Order("random", seed=9), verbose=False) as loader:
        for k, _ in enumerate(loader):
            if k == 2:
                break
        first = epoch(loader)  # the first epoch again, from its start
        epoch(loader)
        path = loader.reader.path
    with ss.Loader(folder, 10, PIPELINES, order=ss.Order("random", seed=9), verbose=False) as cached:
        assert cached.reader.path == path and same(epoch(cached), first)


def test_a_pipeline_that_needs_the_whole_dataset_converts_first(cache, tmp_path):
    images = synthetic_folder(tmp_path / "same", count=12, height=32, width=32, verbose=False)
    with ss.Loader(images, 4, order="sequential", verbose=False) as loader:  # the plain decoder: one size for all
        assert dataset_files(cache) == [loader.reader.path]
        assert [b[0].shape for b in loader] == [(4, 32, 32, 3)] * 3


def folder_with_a_cut_image(folder: Path) -> Path:
    """Eight JPEGs in class ``a``, the sixth (``5.jpg``, sample 5) cut short."""
    (folder / "a").mkdir(parents=True)
    for k, data in enumerate(jpegs(8, seed=31)):
        (folder / "a" / f"{k}.jpg").write_bytes(data)
    (folder / "a" / "5.jpg").write_bytes(jpegs(1, seed=32)[0][:200])
    return folder


def test_a_corrupt_image_stops_the_first_epoch_naming_it(cache, tmp_path):
    folder = folder_with_a_cut_image(tmp_path / "bad")
    with ss.Loader(folder, 4, {"image": [ss.ops.CenterCrop(16)]}, order="sequential", verbose=False) as loader:
        with pytest.raises(ss.FieldValueError, match=r"5\.jpg.*field 'image'"):
            epoch(loader)
    assert not dataset_files(cache) and not list(cache.glob(".*.tmp"))


@pytest.mark.parametrize("on_error", ["skip", "replace"])
def test_a_corrupt_image_follows_on_error_in_every_epoch_and_the_file_records_it(cache, tmp_path, on_error):
    folder = folder_with_a_cut_image(tmp_path / "bad")
    pipelines = {"image": [ss.ops.CenterCrop(16)], "label": None}
    order = ss.Order("random", seed=2)
    with ss.Loader(folder, 4, pipelines, order=order, on_error=on_error, verbose=False) as loader:
        first = epoch(loader)
        assert list(loader.failures) == [5] and "5.jpg" in loader.failures[5]
        second = epoch(loader)
        path = loader.reader.path
    rows = [sum(len(batch[0]) for batch in e) for e in (first, second)]
    assert rows == [7, 7] if on_error == "skip" else [8, 8]  # the file's epochs skip (or replace) it as the first
    if on_error == "replace":  # the replaced image is black
        assert sum(int(not batch[0][k].any()) for batch in first for k in range(len(batch[0]))) == 1
    with ss.Reader(path) as reader:
        assert list(reader.unreadable) == [5] and "5.jpg" in reader.unreadable[5]
        assert reader.user_metadata["classes"] == ["a"]
        with pytest.raises(ss.FormatError, match=r"sample 5, field 'image': the sample could not be written"):
            reader.read(5, "image")
        assert [bytes(reader.value_bytes(k, "image")) for k in (0, 4, 6)] == \
            [tiled((folder / "a" / f"{k}.jpg").read_bytes()) for k in (0, 4, 6)]
    with ss.Loader(folder, 4, pipelines, order=order, on_error=on_error, verbose=False) as cached:
        assert cached.reader.path == path  # a run that starts with the file gives the same batches
        assert same(epoch(cached), first) and same(epoch(cached), second)
    with ss.Loader(path, 4, pipelines, order="sequential", verbose=False) as strict:  # on_error="raise"
        with pytest.raises(ss.DecodeError, match=r"sample 5 cannot be decoded \(it could not be written .*5\.jpg"):
            epoch(strict)


@pytest.mark.parametrize("back", [True, False], ids=["back-in-time", "still-gone"])
def test_an_image_that_cannot_be_read_in_the_first_epoch_is_read_again_and_never_recorded_for_good(cache, tmp_path,
                                                                                                   back):
    folder = tmp_path / "images"
    (folder / "a").mkdir(parents=True)
    for k, data in enumerate(jpegs(8, seed=33)):
        (folder / "a" / f"{k}.jpg").write_bytes(data)
    pipelines = {"image": [ss.ops.CenterCrop(16)], "label": None}
    loader = ss.Loader(folder, 4, pipelines, order="sequential", on_error="skip", verbose=False)
    gone, hidden = folder / "a" / "3.jpg", tmp_path / "3.jpg"
    gone.rename(hidden)  # after the loader identified the folder: missing while epoch 0 reads it
    first = epoch(loader)
    assert sum(len(batch[0]) for batch in first) == 7 and "No such file" in loader.failures[3]
    if back:
        hidden.rename(gone)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        second = epoch(loader)
    kept_out = [str(w.message) for w in caught if issubclass(w.category, ss.CacheWarning)]
    path = loader.reader.path
    if back:  # read again as the file was completed: the file has it, as ss.write's
        assert sum(len(batch[0]) for batch in second) == 8 and not kept_out
        direct = ss.write(tmp_path / "direct.slip", folder, verbose=False).path
        assert dataset_files(cache) == [path] and samples_of(path) == samples_of(direct)
        with ss.Reader(path) as reader:
            assert not reader.unreadable
        loader.close()
        return
    (warning,) = kept_out
    assert "3.jpg" in warning and "No such file" in warning and "is not kept in the cache" in warning
    assert sum(len(batch[0]) for batch in second) == 7  # skipped again, from the loader's own file
    assert not dataset_files(cache) and path.exists()
    loader.close()
    assert not path.exists() and not list(cache.glob(".*.tmp"))
    hidden.rename(gone)
    with ss.Loader(folder, 4, pipelines, order="sequential", on_error="skip", verbose=False) as again:
        assert sum(len(batch[0]) for batch in epoch(again)) == 8 and not again.failures  # the next run reads it
        epoch(again)
        assert samples_of(again.reader.path) == samples_of(
            ss.write(tmp_path / "whole.slip", folder, verbose=False).path)


INTERRUPTED = textwrap.dedent("""
    import json, os, signal, sys, threading, time
    import slipstream as ss
    from slipstream.sources import ImageFolder

    def completing():  # whether the main thread waits in FirstEpoch.finish
        frame = sys._current_frames()[threading.main_thread().ident]
        while frame is not None and frame.f_code.co_name != "finish":
            frame = frame.f_back
        return frame is not None

    class Interrupting(ImageFolder):
        # The folder, whose last sample (which epoch 0 does not visit) is read once the main thread waits for the
        # file's completion: after a Ctrl-C.

        def __getitem__(self, index):
            if index == len(self) - 1:
                while not completing():
                    time.sleep(0.001)
                os.kill(os.getpid(), signal.SIGINT)
            return super().__getitem__(index)

    pipelines = {"image": [ss.ops.CenterCrop(16)], "label": None}
    loader = ss.Loader(Interrupting(sys.argv[1]), 5, pipelines, order="sequential", indices=range(10), verbose=False)
    epochs, state = [[]], None
    for batch in loader:
        epochs[0].append([v.numpy().tolist() for v in batch])
        state = state or loader.state_dict()  # after epoch 0's first batch
    try:
        iter(loader)
        print("not interrupted")
    except KeyboardInterrupt:
        print("interrupted", flush=True)
    if sys.argv[2] == "epoch 0 again":
        loader.set_epoch(0)
    elif sys.argv[2] == "epoch 0 resumed":
        loader.load_state_dict(state)
    epochs.append([[v.numpy().tolist() for v in batch] for batch in loader])
    epochs.append([[v.numpy().tolist() for v in batch] for batch in loader])
    print(json.dumps({"epochs": epochs, "path": str(loader.reader.path)}))
    loader.close()
""")


@pytest.mark.parametrize("then", ["epoch 1", "epoch 0 again", "epoch 0 resumed"])
def test_ctrl_c_while_the_file_is_completed_leaves_it_completing_and_the_next_epoch_reads_it(folder, cache,
                                                                                               tmp_path, then):
    # After the Ctrl-C the loader runs epoch 1, or epoch 0 again (set_epoch), or epoch 0 from a state taken after
    # its first batch: each over the completed file, then the epoch after it.
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(cache.parent)}
    run = subprocess.run([sys.executable, "-c", INTERRUPTED, str(folder), then], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.splitlines()[0] == "interrupted"
    out = json.loads(run.stdout.splitlines()[-1])
    assert dataset_files(cache) == [Path(out["path"])] and not list(cache.glob(".*.tmp"))
    direct = ss.write(tmp_path / "direct.slip", folder, verbose=False).path
    assert samples_of(Path(out["path"])) == samples_of(direct)
    with ss.Loader(direct, 5, {"image": [ss.ops.CenterCrop(16)], "label": None}, order="sequential",
                   indices=range(10), verbose=False) as loader:
        expected = [[v.numpy().tolist() for v in batch] for batch in loader]
    assert out["epochs"] == [expected, expected[1:] if then == "epoch 0 resumed" else expected, expected]


@pytest.mark.parametrize("entry", [{"12": "gone"}, {"x": "gone"}, {"1": 5}, ["1"]])
def test_a_file_whose_unreadable_entry_is_malformed_is_refused(tmp_path, entry):
    path = tmp_path / "d.slip"
    ss.write(path, {"label": np.arange(10)}, {"label": ss.IntField()}, user_metadata={"slipstream.unreadable": entry},
             workers=0, verbose=False)
    with pytest.raises(ss.FormatError, match=r"d\.slip: its user metadata's 'slipstream.unreadable' is not"):
        ss.Reader(path)


def test_a_loader_whose_file_cannot_be_completed_says_why_at_every_later_epoch(cache, tmp_path):
    folder = folder_with_a_cut_image(tmp_path / "bad")
    pipelines = {"image": [ss.ops.CenterCrop(16)]}
    loader = ss.Loader(folder, 2, pipelines, indices=[0, 1, 6, 7], order="sequential", verbose=False)
    assert len(epoch(loader)) == 2  # the cut image (sample 5) is not among the epoch's samples
    with pytest.raises(ss.FieldValueError, match=r"5\.jpg"):  # completing the file encodes it
        iter(loader)
    with pytest.raises(ss.SlipstreamError, match=r"cannot run another epoch: completing .* failed \(FieldValueError"):
        iter(loader)
    loader.close()
    assert not dataset_files(cache) and not list(cache.glob(".*.tmp"))


KILLED = textwrap.dedent("""
    import os, sys, signal
    import slipstream as ss
    loader = ss.Loader(sys.argv[1], 5, {"image": [ss.ops.CenterCrop(16)]}, order="random", verbose=False)
    for k, batch in enumerate(loader):
        if k == 3:
            print("killing", flush=True)
            os.kill(os.getpid(), signal.SIGKILL)
""")


def test_a_process_killed_in_the_first_epoch_leaves_no_dataset_and_the_next_run_starts_over(folder, cache, tmp_path):
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(cache.parent)}
    run = subprocess.run([sys.executable, "-c", KILLED, str(folder)], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=600)
    assert run.returncode == -signal.SIGKILL and "killing" in run.stdout, run.stderr[-2000:]
    assert not dataset_files(cache)
    assert list(cache.glob(".*.tmp"))  # only the dead writer's temporary file
    with ss.Loader(folder, 5, {"image": [ss.ops.CenterCrop(16)]}, order="random", verbose=False) as loader:
        assert len(epoch(loader)) == 14
        epoch(loader)
        path = loader.reader.path
    assert dataset_files(cache) == [path] and not list(cache.glob(".*.tmp"))  # the stale one removed
    assert len(samples_of(path)) == 70


def test_another_process_waits_for_the_file_a_first_epoch_writes(folder, cache, tmp_path):
    with ss.Loader(folder, 35, PIPELINES, order="random", verbose=False) as loader:
        epoch(loader)
        env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(cache.parent)}
        code = "import sys, time, slipstream as ss; print(ss.cached(sys.argv[1], verbose=False), time.time())"
        waiting = subprocess.Popen([sys.executable, "-c", code, str(folder)], stdout=subprocess.PIPE, text=True,
                                   env=env, cwd=tmp_path)
        time.sleep(3)
        before = time.time()
        iter(loader)  # the next epoch: the file is completed, renamed into the cache, and the lock let go
        path, done = waiting.communicate(timeout=120)[0].split()
        assert path == str(loader.reader.path) and float(done) >= before  # it waited for this file
    assert dataset_files(cache) == [Path(path)]


FULL = textwrap.dedent("""
    import glob, json, os, resource, sys, warnings
    import numpy as np
    import slipstream as ss
    from slipstream.format import arriving
    from slipstream.ops import presets

    folder, cache, when, repeats = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    arriving.MEMORY_AHEAD_BYTES = 1  # in memory, encoding waits until every batch before it is done
    indices = np.tile(np.arange(70), repeats)  # repeats > 1: oversampling, each sample several times an epoch
    out = {"epochs": [], "warnings": [], "held": 0}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with ss.Loader(folder, 5, presets.imagenet_train(48), order=ss.Order("random", seed=2), indices=indices,
                       verbose=False) as loader:
            for e in range(3):
                batches = []
                for k, batch in enumerate(loader):
                    if e == 0 and (k == 0 if when == "epoch" else k == len(loader) - 1):
                        # The pipeline compiled (its cache written): from now on the file cannot grow past 50 kB
                        # (in the epoch) or past what it holds (every sample written: its tables cannot be).
                        size = 50_000 if when == "epoch" else os.path.getsize(glob.glob(cache + "/.*.tmp")[0])
                        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
                    memory = loader._epochs.first.file._memory if loader._epochs.first is not None else None
                    if memory is not None:  # bytes of samples held for batches not done
                        out["held"] = max(out["held"], memory.position - memory.freed)
                    batches.append([v.numpy().tolist() for v in batch])
                out["epochs"].append(batches)
            out["in_memory"] = loader._epochs.first is not None and loader._epochs.first.in_memory
            out["freed"] = loader._epochs.first.file._memory.freed
    out["warnings"] = [f"{w.category.__name__}: {w.message}" for w in caught]
    print(json.dumps(out))
""")


def test_a_sample_unreadable_for_one_epoch_from_the_source_after_a_full_disk_is_read_in_the_next(cache, tmp_path):
    folder = synthetic_folder(tmp_path / "images", count=30, height=60, width=80, verbose=False)
    script = textwrap.dedent("""
        import glob, json, os, resource, sys, warnings
        import slipstream as ss
        from slipstream.ops import presets

        folder, cache, image = sys.argv[1], sys.argv[2], sys.argv[3]
        counts = []
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with ss.Loader(folder, 5, presets.imagenet_train(48), order="sequential", on_error="skip",
                           verbose=False) as loader:
                for e in range(3):
                    if e == 1:  # gone for one epoch
                        os.rename(image, image + ".away")
                    if e == 2:
                        os.rename(image + ".away", image)
                    count = 0
                    for k, batch in enumerate(loader):
                        if e == 0 and k == 0:  # the pipeline compiled: the file cannot grow past 50 kB
                            resource.setrlimit(resource.RLIMIT_FSIZE, (50_000, 50_000))
                        count += len(batch[0])
                    counts.append(count)
                in_memory = loader._epochs.first is not None and loader._epochs.first.in_memory
        print(json.dumps({"counts": counts, "in_memory": in_memory}))
    """)
    image = sorted(folder.rglob("*.jpg"))[7]
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(cache.parent)}
    run = subprocess.run([sys.executable, "-c", script, str(folder), str(cache), str(image)], capture_output=True,
                         text=True, env=env, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout.splitlines()[-1])
    assert out["in_memory"]  # every epoch read the source
    assert out["counts"] == [30, 29, 30]  # skipped while it was gone, and only then


@pytest.mark.parametrize("when, repeats", [("epoch", 1), ("finish", 1), ("epoch", 3)])
def test_a_full_disk_in_the_first_epoch_gives_the_file_up_and_training_goes_on_from_the_source(folder, cache,
                                                                                                 tmp_path, when,
                                                                                                 repeats):
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(cache.parent)}
    run = subprocess.run([sys.executable, "-c", FULL, str(folder), str(cache), when, str(repeats)],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    out = json.loads(run.stdout.splitlines()[-1])
    assert out["in_memory"] and out["freed"] > 0  # batches done give their memory back
    # Encoding runs ahead of the batches done by what the budget allows (here: one batch of 5 small images,
    # about 2 kB each, page-rounded), never the whole epoch (about 150 kB a pass).
    assert 0 < out["held"] < 40_000
    (warning,) = out["warnings"]
    assert warning.startswith(f"CacheWarning: [Errno 27] {cache}") and ".slip was not written: File too large: " \
        "training goes on from the source" in warning
    assert not dataset_files(cache) and not list(cache.glob(".*.tmp"))  # no file, no temporary file left
    # Every epoch, the one the disk filled in included, gives the batches of a loader over ss.write's file.
    ss.write(tmp_path / "direct.slip", folder, verbose=False)
    with ss.Loader(tmp_path / "direct.slip", 5, PIPELINES, order=ss.Order("random", seed=2),
                   indices=np.tile(np.arange(70), repeats), verbose=False) as direct:
        expected = [[[v.tolist() for v in batch] for batch in epoch(direct)] for _ in range(3)]
    assert out["epochs"] == expected


def test_a_full_disk_as_the_loader_completes_the_file_on_closing_is_a_warning(folder, cache, tmp_path):
    script = textwrap.dedent("""
        import glob, os, resource, sys, warnings
        import slipstream as ss
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with ss.Loader(sys.argv[1], 5, {"image": [ss.ops.CenterCrop(16)]}, verbose=False) as loader:
                for batch in loader:
                    pass  # every sample has arrived: closing completes the file, but its tables do not fit
                size = os.path.getsize(glob.glob(sys.argv[2] + "/.*.tmp")[0])
                resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))
        print("\\n".join(f"{w.category.__name__}: {w.message}" for w in caught))
    """)
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(cache.parent)}
    run = subprocess.run([sys.executable, "-c", script, str(folder), str(cache)], capture_output=True, text=True,
                         env=env, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "CacheWarning: [Errno 27]" in run.stdout and "no dataset file is kept" in run.stdout
    assert not dataset_files(cache) and not list(cache.glob(".*.tmp"))


def test_a_full_disk_under_a_stream_names_the_file_and_leaves_none(cache, tmp_path):
    shards_of(tmp_path / "wds", 40, per_shard=20)
    write_tars(tmp_path / "small", jpegs(5, seed=39), per_shard=5)
    script = textwrap.dedent("""
        import resource, sys
        import slipstream as ss
        pipelines = {"image": [ss.ops.CenterCrop(16)], "json": None}
        ss.write("small.slip", ss.WebDataset(sys.argv[2]), verbose=False)
        with ss.Loader("small.slip", 5, pipelines, verbose=False) as warm:
            next(iter(warm))  # the pipeline compiled and cached: nothing more to write but the dataset file
        resource.setrlimit(resource.RLIMIT_FSIZE, (20_000, 20_000))  # room for a few samples
        try:
            with ss.Loader(sys.argv[1], 5, pipelines, order="random", verbose=False) as loader:
                for batch in loader:
                    pass
        except OSError as exc:  # a stream cannot be read again: the error stands
            print("OSError", exc)
    """)
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(cache.parent)}
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path / "wds"), str(tmp_path / "small")],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert f"OSError [Errno 27] {cache}" in run.stdout and ".slip was not written: File too large" in run.stdout
    assert not dataset_files(cache) and not list(cache.glob(".*.tmp"))


def test_a_first_epoch_that_cannot_reserve_its_address_space_writes_the_file_first(folder, cache, tmp_path):
    script = textwrap.dedent("""
        import resource, sys, warnings
        import slipstream as ss
        pipelines = {"image": [ss.ops.CenterCrop(16)], "label": None}
        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        resource.setrlimit(resource.RLIMIT_AS, (64 << 30, hard))  # as ulimit -v: 64 GiB of address space
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with ss.Loader(sys.argv[1], 10, pipelines, order="sequential", verbose=False) as loader:
                print(isinstance(loader.reader, ss.Reader), sum(len(batch[0]) for batch in loader))
        print([str(w.message) for w in caught if issubclass(w.category, ss.CacheWarning)])
    """)
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(cache.parent)}
    run = subprocess.run([sys.executable, "-c", script, str(folder)], capture_output=True, text=True, env=env,
                         cwd=tmp_path, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    done, warned = run.stdout.strip().splitlines()[-2:]
    assert done == "True 70"  # the file written first (ss.cached), then read
    assert "reserving an address range" in warned and "so its dataset file is written first" in warned
    (path,) = dataset_files(cache)
    assert not list(cache.glob(".*.tmp")) and samples_of(path) == samples_of(
        ss.write(tmp_path / "direct.slip", folder, verbose=False).path)


RANK = textwrap.dedent("""
    import json, sys
    import torch.distributed as dist
    import slipstream as ss
    from slipstream.ops import presets

    folder, port, rank, stop, on_error = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5]
    drop_last = sys.argv[6] == "1"
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    order = ss.Order("random", seed=6)
    pipelines = presets.imagenet_train(48)
    if folder.endswith("wds"):  # tar shards: their .json members are not an output
        pipelines["json"] = None
    sharding = ss.Sharding(drop_last=drop_last)
    with ss.Loader(folder, 8, pipelines, order=order, on_error=on_error, sharding=sharding, verbose=False) as loader:
        streamed = loader._epochs.first is not None
        if stop:  # leave epoch 0 after `stop` batches, as a job stopped mid-epoch
            batches = iter(loader)
            for _ in range(stop):
                next(batches)
            print(json.dumps({"state": loader.state_dict(), "streamed": streamed}))
            sys.exit(0)
        epochs = [[[v.numpy().tolist() for v in batch] for batch in loader] for _ in range(2)]
        path = str(loader.reader.path)
    with ss.Loader(path, 8, pipelines, order=order, on_error=on_error, sharding=sharding, verbose=False) as cached:
        again = [[[v.numpy().tolist() for v in batch] for batch in cached] for _ in range(2)]
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps({"path": path, "streamed": streamed, "same": epochs == again, "same_later": epochs[1] == again[1],
                      "labels": [[b[1] for b in e] for e in epochs], "failures": list(loader.failures)}))
""")


def run_two_ranks(folder, cache, tmp_path, stop: int = 0, on_error: str = "raise", drop_last: bool = False
                  ) -> list[dict]:
    env = {**os.environ, "SLIPSTREAM_CACHE_DIR": str(cache.parent)}
    port = str(free_port())
    return launch_ranks(RANK, [[str(folder), port, str(rank), str(stop), on_error, str(int(drop_last))]
                               for rank in range(2)], tmp_path, env)


def test_two_ranks_stream_their_shares_and_build_one_file(folder, cache, tmp_path):
    ranks = run_two_ranks(folder, cache, tmp_path)
    assert all(r["streamed"] for r in ranks)  # neither rank waited for a file before training
    assert all(r["same"] for r in ranks)  # epochs 0 and 1 equal a two-rank run over the finished file
    path = Path(ranks[0]["path"])
    assert ranks[1]["path"] == str(path) and dataset_files(cache) == [path]
    assert not list(cache.glob(".*"))  # no part or temporary file left
    shares = [sum(r["labels"][0], []) for r in ranks]
    assert len(shares[0]) == len(shares[1]) == 35  # 70 samples shared by 2 ranks
    ss.write(tmp_path / "direct.slip", folder, verbose=False)
    assert path.read_bytes() == (tmp_path / "direct.slip").read_bytes()  # laid out in index order: write's file


@pytest.mark.parametrize("drop_last", [False, True])
def test_two_ranks_stream_tar_shards_each_keeping_its_share_and_build_one_file(cache, tmp_path, drop_last):
    shards_of(tmp_path / "wds", 70, per_shard=20)
    ranks = run_two_ranks(tmp_path / "wds", cache, tmp_path, drop_last=drop_last)
    assert all(r["streamed"] and r["same_later"] for r in ranks)  # epoch 1: a two-rank run's over the file
    # Epoch 0 follows the stream's bounded shuffle, shared place by place: rank r's k-th sample is the order's
    # (2k + r)-th; 70 samples, 35 each, every one once; with drop_last, 4 whole batches each, and the 6 samples
    # no batch held are read again from the stream to complete the file.
    order = orders.stream_order(np.arange(70), 70, 6, 0)
    shares = [sum(r["labels"][0], []) for r in ranks]
    given = 32 if drop_last else 35
    assert shares == [order[0::2][:given].tolist(), order[1::2][:given].tolist()]
    path = Path(ranks[0]["path"])
    assert dataset_files(cache) == [path] and not list(cache.glob(".*"))
    ss.write(tmp_path / "direct.slip", ss.WebDataset(tmp_path / "wds"), verbose=False)
    assert path.read_bytes() == (tmp_path / "direct.slip").read_bytes()


def test_a_first_epoch_stopped_on_two_ranks_resumes_on_one(folder, cache, tmp_path):
    states = [r["state"] for r in run_two_ranks(folder, cache, tmp_path, stop=2)]
    assert not dataset_files(cache)  # stopped in epoch 0: no dataset
    order = ss.Order("random", seed=6)
    with ss.Loader(folder, 8, PIPELINES, order=order, verbose=False) as loader:
        assert loader._epochs.first is not None  # the file is still missing: epoch 0 streams again, from where it stopped
        loader.load_state_dict(states)
        rest = epoch(loader)
        after = epoch(loader)
        path = loader.reader.path
    with ss.Loader(path, 8, PIPELINES, order=order, verbose=False) as cached:
        cached.load_state_dict(states)  # a state of the first epoch resumes a loader over its file
        assert same(epoch(cached), rest) and same(epoch(cached), after)
    assert len(sum((b[1].tolist() for b in rest), [])) == 70 - 2 * 2 * 8  # what the two ranks had not given
    ss.write(tmp_path / "direct.slip", folder, verbose=False)
    assert samples_of(path) == samples_of(tmp_path / "direct.slip")


def test_a_stream_s_first_epoch_stopped_on_two_ranks_resumes_on_one(cache, tmp_path):
    shards_of(tmp_path / "wds", 70, per_shard=20)
    states = [r["state"] for r in run_two_ranks(tmp_path / "wds", cache, tmp_path, stop=2)]
    pipelines = {**PIPELINES, "json": None}
    with ss.Loader(tmp_path / "wds", 8, pipelines, order=ss.Order("random", seed=6), verbose=False) as loader:
        assert loader._epochs.first is not None  # the file is still missing: epoch 0 streams again, from where it stopped
        loader.load_state_dict(states)
        rest = np.concatenate([batch[1].numpy().copy() for batch in loader])
        epoch(loader)  # the next epoch completes the file and reads it
        path = loader.reader.path
    # The two ranks gave the order's first 2 * 2 * 8 places (place by place); one rank gives the rest, in order.
    assert rest.tolist() == orders.stream_order(np.arange(70), 70, 6, 0)[32:].tolist()
    assert samples_of(path) == samples_of(ss.write(tmp_path / "direct.slip", ss.WebDataset(tmp_path / "wds"),
                                                   verbose=False).path)


def test_two_ranks_record_a_sample_that_cannot_be_encoded(cache, tmp_path):
    folder = folder_with_a_cut_image(tmp_path / "bad")
    ranks = run_two_ranks(folder, cache, tmp_path, on_error="skip")
    assert all(r["streamed"] and r["same"] for r in ranks)  # the file's epochs skip it as the first epoch did
    assert sorted(sum((r["failures"] for r in ranks), [])) == [5]  # the rank whose batch held it recorded it
    with ss.Reader(ranks[0]["path"]) as reader:
        assert list(reader.unreadable) == [5] and "5.jpg" in reader.unreadable[5]
        assert [bytes(reader.value_bytes(k, "image")) for k in (0, 7)] == \
            [tiled((folder / "a" / f"{k}.jpg").read_bytes()) for k in (0, 7)]


def hugging_face_card_folder(folder: Path, images: list[bytes], stated: int) -> Path:
    """A dataset folder as on the Hub: parquet files of ``images`` (labels: their indices modulo 4) and a
    card that says the train split holds ``stated`` examples."""
    datasets = pytest.importorskip("datasets")
    features = datasets.Features({"image": datasets.Image(), "label": datasets.ClassLabel(names=list("abcd"))})
    half = len(images) // 2
    for part, (start, stop) in enumerate([(0, half), (half, len(images))]):
        chunk = datasets.Dataset.from_dict({"image": [{"bytes": b, "path": None} for b in images[start:stop]],
                                            "label": [k % 4 for k in range(start, stop)]}, features=features)
        chunk.to_parquet(str(folder / "data" / f"train-{part:05d}-of-00002.parquet"))
    write_card(folder, stated)
    return folder


def write_card(folder: Path, stated: int) -> None:
    """A dataset card in ``folder``, as on the Hub: the train split is ``data/train-*`` and holds ``stated``
    examples."""
    (folder / "README.md").write_text(textwrap.dedent(f"""\
        ---
        dataset_info:
          splits:
          - name: train
            num_bytes: 0
            num_examples: {stated}
        configs:
        - config_name: default
          data_files:
          - split: train
            path: data/train-*
        ---
        """))


def test_a_hugging_face_streaming_dataset_whose_card_counts_it_streams_its_first_epoch(cache, tmp_path):
    datasets = pytest.importorskip("datasets")
    images = jpegs(30, seed=31)
    folder = hugging_face_card_folder(tmp_path / "hub", images, stated=30)
    streaming = datasets.load_dataset(str(folder), split="train", streaming=True)
    pipelines = {"image": [ss.ops.CenterCrop(16)]}
    with ss.Loader(streaming, 8, pipelines, order=ss.Order("random", seed=5), verbose=False) as loader:
        assert not dataset_files(cache) and not isinstance(loader.reader, ss.Reader)  # training starts at once
        first = [batch[1].tolist() for batch in loader]
        second = [batch[1].tolist() for batch in loader]
        path = loader.reader.path
    # Epoch 0 follows the stream through the bounded shuffle; every later epoch reads the file.
    assert sum(first, []) == [k % 4 for k in orders.stream_order(np.arange(30), 30, 5, 0).tolist()]
    assert sorted(sum(second, [])) == sorted(k % 4 for k in range(30))
    ss.write(tmp_path / "direct.slip", streaming, verbose=False)
    assert path.read_bytes() == (tmp_path / "direct.slip").read_bytes()
    assert ss.Reader(path).user_metadata["classes"] == list("abcd")


def test_a_streaming_dataset_whose_count_may_have_changed_streams_learning_its_length(cache, tmp_path):
    datasets = pytest.importorskip("datasets")
    from datasets.distributed import split_dataset_by_node

    from slipstream.sources.huggingface import huggingface_identity, known_length

    folder = hugging_face_card_folder(tmp_path / "hub", jpegs(12, seed=32), stated=12)
    streaming = datasets.load_dataset(str(folder), split="train", streaming=True)
    assert known_length(streaming) == 12
    assert known_length(streaming.shuffle(seed=1, buffer_size=4).map(lambda x: x)) == 12  # one to one
    changed = [streaming.filter(lambda x: x["label"] > 0), streaming.take(5), streaming.skip(2),
               streaming.map(lambda batch: batch, batched=True),
               split_dataset_by_node(streaming, rank=0, world_size=2)]
    assert [known_length(dataset) for dataset in changed] == [None] * len(changed)
    files = str(folder / "data" / "*.parquet")
    filtered = datasets.load_dataset("parquet", data_files=files, split="train", streaming=True,
                                     filters=[("label", ">", 0)])  # parquet read with a filter: rows not counted
    assert known_length(filtered) is None
    whole = datasets.load_dataset("parquet", data_files=files, split="train", streaming=True)
    assert huggingface_identity(filtered) != huggingface_identity(whole)  # the filter is the builder's option
    with ss.Loader(filtered, 4, {"image": [ss.ops.CenterCrop(16)]}, order="sequential", verbose=False) as loader:
        assert not isinstance(loader.reader, ss.Reader)  # training at once, the length learnt at the stream's end
        labels = [k % 4 for k in range(12) if k % 4]  # the stream's order, the filter's rows
        assert [batch[1].tolist() for batch in loader] == [labels[:4], labels[4:8], labels[8:]] and len(loader) == 3
    with ss.Loader(filtered, 4, {"image": [ss.ops.CenterCrop(16)]}, order="sequential", indices=[0, 1],
                   verbose=False) as loader:
        assert isinstance(loader.reader, ss.Reader) and len(loader.reader) == 9  # a subset: the file first


def test_parquet_files_without_a_card_are_counted_by_their_footers_and_stream(cache, tmp_path):
    datasets = pytest.importorskip("datasets")
    from slipstream.sources.huggingface import known_length

    images = jpegs(14, seed=35)
    folder = hugging_face_card_folder(tmp_path / "hub", images, stated=14)
    streaming = datasets.load_dataset("parquet", data_files=str(folder / "data" / "*.parquet"), split="train",
                                      streaming=True)  # the files without their card
    assert streaming.info.splits is None and known_length(streaming) == 14
    with ss.Loader(streaming, 4, {"image": [ss.ops.CenterCrop(16)]}, order="sequential", verbose=False) as loader:
        assert not isinstance(loader.reader, ss.Reader)  # training starts at once
        labels = [batch[1].tolist() for batch in loader] + [batch[1].tolist() for batch in loader]
        path = loader.reader.path
    assert sum(labels, []) == [k % 4 for k in range(14)] * 2
    assert [bytes(b) for b, _ in samples_of(path)] == [tiled(i) for i in images]


def test_a_card_counts_a_streaming_dataset_only_when_it_reads_every_file_of_the_split(tmp_path):
    datasets = pytest.importorskip("datasets")
    from slipstream.sources.huggingface import known_length

    folder = tmp_path / "hub"
    (folder / "data").mkdir(parents=True)
    for part in range(2):  # JSON lines: a builder whose files do not count their rows
        (folder / "data" / f"train-{part}.jsonl").write_text("".join(json.dumps({"label": k}) + "\n"
                                                                    for k in range(5 * part, 5 * part + 5)))
    write_card(folder, 10)
    streaming = datasets.load_dataset(str(folder), split="train", streaming=True)
    assert known_length(streaming) == 10
    assert known_length(streaming.shard(2, 0)) is None  # half the files: the card's count is not its count
    assert len(list(streaming.shard(2, 0))) == 5


def test_a_stream_is_read_by_several_ranks_only_when_every_process_reads_it_alike(tmp_path):
    datasets = pytest.importorskip("datasets")
    from slipstream.sources.adapters import IterableSource
    from slipstream.sources.huggingface import HuggingFaceStream

    folder = hugging_face_card_folder(tmp_path / "hub", jpegs(8, seed=36), stated=8)
    streaming = datasets.load_dataset(str(folder), split="train", streaming=True)
    assert HuggingFaceStream(streaming, ["image", "label"]).repeatable()
    # shuffle() orders the stream anew in each process (unseeded) and each epoch: each rank would number it its way.
    assert not HuggingFaceStream(streaming.shuffle(seed=1, buffer_size=4), ["image", "label"]).repeatable()
    assert not IterableSource(iter([{"label": 1}]), ["label"]).repeatable()  # a generator: once only
    assert ss.WebDataset(write_tars(tmp_path / "wds", jpegs(3, seed=37), per_shard=3)).repeatable()


def test_a_card_that_miscounts_its_dataset_stops_the_first_epoch_saying_so(cache, tmp_path):
    datasets = pytest.importorskip("datasets")
    folder = hugging_face_card_folder(tmp_path / "hub", jpegs(12, seed=33), stated=15)
    streaming = datasets.load_dataset(str(folder), split="train", streaming=True)
    with ss.Loader(streaming, 4, {"image": [ss.ops.CenterCrop(16)]}, order="sequential", verbose=False) as loader:
        with pytest.raises(ss.FormatError, match=r"Hugging Face streaming dataset .* \(train\) ended after 12 "
                                                 r"samples, but said it holds 15"):
            epoch(loader)
    assert not dataset_files(cache)


class CountedSamples:
    """Images read through ``__getitem__``, which counts the reads: whether a dataset was built from them."""

    def __init__(self, images: list[bytes]) -> None:
        self.images, self.reads = images, 0

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, index: int) -> dict:
        self.reads += 1
        return {"image": self.images[index], "label": index}


def test_cached_with_a_url_shares_the_file_machines_download_instead_of_building(tmp_path, monkeypatch, s3_server):
    from slipstream.format.objectstore import ObjectPrefix

    remote = ss.Remote(storage_options=s3_server.storage_options())
    url = "s3://test/shared-cache/cached"
    source = CountedSamples(jpegs(12, seed=34))
    fields = {"image": ss.RGBImageField(), "label": ss.IntField()}
    monkeypatch.setenv("SLIPSTREAM_CACHE_DIR", str(tmp_path / "machine-a"))
    built = ss.cached(source, fields, cache_dir=url, name="counted", remote=remote, workers=0,
                      verbose=False)
    assert source.reads == 12 and built.parent == tmp_path / "machine-a" / "datasets"
    assert ObjectPrefix(url, remote).read_all(built.name) == built.read_bytes()  # uploaded whole
    monkeypatch.setenv("SLIPSTREAM_CACHE_DIR", str(tmp_path / "machine-b"))  # another machine, the same bucket
    fetched = ss.cached(source, fields, cache_dir=url, name="counted", remote=remote, workers=0,
                        verbose=False)
    assert source.reads == 12  # downloaded, not built again
    assert fetched.parent == tmp_path / "machine-b" / "datasets" and fetched.read_bytes() == built.read_bytes()
    assert not list(fetched.parent.glob(".*.tmp"))


def test_a_first_epoch_with_a_url_as_cache_dir_uploads_the_file_other_machines_train_from(folder, tmp_path,
                                                                                         monkeypatch, s3_server):
    from slipstream.format.objectstore import ObjectPrefix

    remote = ss.Remote(storage_options=s3_server.storage_options())
    url = "s3://test/shared-cache/loader"
    order = ss.Order("random", seed=8)
    monkeypatch.setenv("SLIPSTREAM_CACHE_DIR", str(tmp_path / "machine-a"))
    with ss.Loader(folder, 16, PIPELINES, order=order, cache_dir=url, remote=remote, verbose=False) as loader:
        assert loader._epochs.first is not None  # nothing at the URL: the first epoch streams from the folder
        epochs = [epoch(loader) for _ in range(2)]
        path = loader.reader.path
    assert ObjectPrefix(url, remote).read_all(path.name) == path.read_bytes()
    monkeypatch.setenv("SLIPSTREAM_CACHE_DIR", str(tmp_path / "machine-b"))
    with ss.Loader(folder, 16, PIPELINES, order=order, cache_dir=url, remote=remote, verbose=False) as other:
        assert other._epochs.first is None and other.reader.path == tmp_path / "machine-b" / "datasets" / path.name
        assert same(epoch(other), epochs[0]) and same(epoch(other), epochs[1])


SHARED_RANK = textwrap.dedent("""
    import json, os, sys
    folder, port, rank, url, options, cache = sys.argv[1:]
    os.environ["SLIPSTREAM_CACHE_DIR"] = cache  # each rank a machine of its own: nothing local is shared
    import torch.distributed as dist
    import slipstream as ss
    from slipstream.ops import presets

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=int(rank), world_size=2)
    remote = ss.Remote(storage_options=json.loads(options))
    with ss.Loader(folder, 8, presets.imagenet_train(48), order=ss.Order("random", seed=6), cache_dir=url,
                   remote=remote, verbose=False) as loader:
        streamed = loader._epochs.first is not None
        epochs = [[[v.numpy().tolist() for v in batch] for batch in loader] for _ in range(2)]
        path = str(loader.reader.path)
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps({"path": path, "streamed": streamed, "labels": [[b[1] for b in e] for e in epochs]}))
""")


def test_a_download_during_which_the_copy_is_uploaded_again_is_one_upload_s_file(tmp_path, monkeypatch, s3_server):
    from slipstream.format import shared_copy

    remote = ss.Remote(storage_options=s3_server.storage_options())
    monkeypatch.setattr(shared_copy, "DOWNLOAD_CHUNK", 1 << 20)
    copy = shared_copy.SharedCopy("s3://test/shared-cache/race", "x.slip", remote)
    first, second = tmp_path / "a", tmp_path / "b"
    first.write_bytes(b"A" * (3 << 20))
    second.write_bytes(b"B" * (3 << 20))
    copy.upload(first)
    read = copy.location.read

    def read_while_another_machine_uploads(name: str, start: int, end: int) -> memoryview:
        if start == 2 << 20:  # another machine's upload completes in the middle of this download
            copy.upload(second)
        return read(name, start, end)

    monkeypatch.setattr(copy.location, "read", read_while_another_machine_uploads)
    (tmp_path / "machine").mkdir()
    copy.download(tmp_path / "machine" / "x.slip")
    assert (tmp_path / "machine" / "x.slip").read_bytes() == second.read_bytes()  # fetched again, whole
    assert not list((tmp_path / "machine").glob(".*"))


def test_a_failed_upload_is_a_warning_and_the_next_use_uploads(tmp_path, monkeypatch, s3_server):
    from slipstream.format.objectstore import ObjectPrefix

    remote = ss.Remote(storage_options=s3_server.storage_options())
    monkeypatch.setenv("SLIPSTREAM_CACHE_DIR", str(tmp_path / "machine"))
    source = CountedSamples(jpegs(6, seed=38))
    fields = {"image": ss.RGBImageField(), "label": ss.IntField()}
    url = "s3://later-bucket/cache"  # no such bucket yet: the upload fails
    with pytest.warns(ss.CacheWarning, match=r"was not shared at s3://later-bucket/cache/.*the local file serves"):
        path = ss.cached(source, fields, cache_dir=url, name="later", remote=remote, workers=0, verbose=False)
    s3_server.create_bucket("later-bucket")
    assert ss.cached(source, fields, cache_dir=url, name="later", remote=remote, workers=0, verbose=False) == path
    assert ObjectPrefix(url, remote).read_all(path.name) == path.read_bytes() and source.reads == 6


def test_two_ranks_on_machines_of_their_own_build_one_file_through_a_url(folder, tmp_path, s3_server):
    from slipstream.format.objectstore import ObjectPrefix

    url = "s3://test/shared-cache/ranks"
    options = json.dumps(s3_server.storage_options())
    port = str(free_port())
    ranks = launch_ranks(SHARED_RANK, [[str(folder), port, str(rank), url, options, str(tmp_path / f"machine-{rank}")]
                                       for rank in range(2)], tmp_path, dict(os.environ))
    assert all(r["streamed"] for r in ranks)  # neither waited for a file before training
    paths = [Path(r["path"]) for r in ranks]
    assert paths[0].name == paths[1].name and paths[0] != paths[1]  # each machine's own copy of one file
    assert paths[0].read_bytes() == paths[1].read_bytes()
    names = ObjectPrefix(url, ss.Remote(storage_options=s3_server.storage_options())).names()
    assert names == [paths[0].name]  # the file, and no part left behind
    ss.write(tmp_path / "direct.slip", folder, verbose=False)
    assert paths[0].read_bytes() == (tmp_path / "direct.slip").read_bytes()
    assert sorted(sum(ranks[0]["labels"][0] + ranks[1]["labels"][0], [])) == sorted(
        sum(ranks[0]["labels"][1] + ranks[1]["labels"][1], []))  # both epochs: every sample once


UNREAD_RANK = textwrap.dedent("""
    import json, os, sys, warnings
    folder, port, rank, url, options, cache = sys.argv[1:]
    os.environ["SLIPSTREAM_CACHE_DIR"] = cache
    import torch.distributed as dist
    import slipstream as ss
    from pathlib import Path

    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=int(rank), world_size=2)
    shared = {"cache_dir": url, "remote": ss.Remote(storage_options=json.loads(options))} if url else {}
    pipelines = {"image": [ss.ops.CenterCrop(16)], "label": None}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loader = ss.Loader(folder, 2, pipelines, order="sequential", on_error="skip", verbose=False, **shared)
        dist.barrier()
        if rank == "0":  # after both ranks identified the folder: missing while epoch 0 reads it, and after
            os.rename(os.path.join(folder, "a", "3.jpg"), os.path.join(folder, "..", "3.jpg"))
        dist.barrier()
        counts = [sum(len(batch[0]) for batch in loader) for _ in range(2)]
        path, unreadable, failures = loader.reader.path, list(loader.reader.unreadable), list(loader.failures)
        if rank == "0":
            loader.close()
        dist.barrier()
        if rank == "1":  # once rank 0 let go of the file: it is still there for rank 1's next epoch
            counts.append(sum(len(batch[0]) for batch in loader))
            loader.close()
    dist.barrier()
    left = path.exists()  # once both ranks closed
    dist.destroy_process_group()
    kept_out = [str(w.message) for w in caught if issubclass(w.category, ss.CacheWarning)]
    print(json.dumps({"path": str(path), "counts": counts, "unreadable": unreadable, "failures": failures,
                      "kept_out": kept_out, "left": left}))
""")


@pytest.mark.parametrize("machines", ["one", "two"])
def test_a_sample_still_unreadable_on_two_ranks_keeps_their_file_out_of_the_cache(tmp_path, machines, request):
    folder = tmp_path / "images"
    (folder / "a").mkdir(parents=True)
    for k, data in enumerate(jpegs(8, seed=34)):
        (folder / "a" / f"{k}.jpg").write_bytes(data)
    url, options = "", "{}"
    if machines == "two":  # each rank a machine of its own: the file goes through a URL
        s3_server = request.getfixturevalue("s3_server")
        url, options = "s3://test/shared-cache/unread", json.dumps(s3_server.storage_options())
    caches = [tmp_path / ("cache" if machines == "one" else f"machine-{rank}") for rank in range(2)]
    port = str(free_port())
    ranks = launch_ranks(UNREAD_RANK, [[str(folder), port, str(rank), url, options, str(caches[rank])]
                                       for rank in range(2)], tmp_path, dict(os.environ))
    # Sample 3 (in rank 0's second batch): skipped in epoch 0, read again as the ranks completed the file and
    # still missing: skipped in epoch 1 too, from a file of the ranks' own that neither left in any cache.
    assert sum(r["counts"][0] for r in ranks) == sum(r["counts"][1] for r in ranks) == 7
    assert ranks[1]["counts"][2] == ranks[1]["counts"][1]  # read after rank 0 closed
    assert ranks[0]["failures"] == [3] and ranks[1]["failures"] == []
    for r, cache in zip(ranks, caches):
        (warning,) = r["kept_out"]
        assert "3.jpg" in warning and "No such file" in warning and "is not kept in the cache" in warning
        assert r["unreadable"] == [3] and not r["left"]
        path = Path(r["path"])  # on two machines, rank 1 read a copy it downloaded from the URL
        assert path.parent == cache / "datasets" and path.name.endswith(".tmp")
    for cache in caches:
        assert not dataset_files(cache / "datasets") and not list((cache / "datasets").glob(".*"))
    if url:
        from slipstream.format.objectstore import ObjectPrefix

        remote = ss.Remote(storage_options=json.loads(options))
        assert ObjectPrefix(url, remote).names() == []  # no file, part or private copy left at the URL
    (tmp_path / "3.jpg").rename(folder / "a" / "3.jpg")
    with ss.Loader(folder, 2, {"image": [ss.ops.CenterCrop(16)], "label": None}, order="sequential",
                   cache_dir=caches[0] / "datasets", verbose=False) as again:  # the next run reads it
        assert sum(len(batch[0]) for batch in again) == 8 and not again.failures


def test_a_quasi_random_first_epoch_is_random_and_later_epochs_are_quasi_random_over_the_file(folder, cache,
                                                                                              tmp_path):
    quasi = ss.Order("quasi_random", seed=9, window_pages=2)
    with ss.Loader(folder, 8, PIPELINES, order=quasi, verbose=False) as loader:
        assert loader._epochs.first is not None  # training starts at once, in quasi_random order too
        batches = iter(loader)
        stopped = [[v.numpy().copy() for v in next(batches)] for _ in range(3)]
        state = loader.state_dict()
        first = stopped + [[v.numpy().copy() for v in batch] for batch in batches]
        second = epoch(loader)
        path = loader.reader.path
    # Epoch 0: the permutation of a random order with the seed; epoch 1: quasi-random over the file.
    with ss.Loader(path, 8, PIPELINES, order=ss.Order("random", seed=9), verbose=False) as random:
        assert same(epoch(random), first)
    with ss.Loader(path, 8, PIPELINES, order=quasi, verbose=False) as cached:
        cached.set_epoch(1)
        assert same(epoch(cached), second)
        cached.load_state_dict(state)  # a state of the random first epoch resumes it over the file
        assert same(epoch(cached), first[3:])


def refused_at_once(open_it) -> str:
    """The message of the ArgumentError ``open_it()`` raises, checked to come
    at once: a call that waited for a lock its own process holds would wait
    for ever (here it fails the test after a minute instead)."""
    outcome: dict[str, str] = {}

    def attempt() -> None:
        try:
            open_it()
        except ss.ArgumentError as exc:
            outcome["error"] = str(exc)

    thread = threading.Thread(target=attempt, daemon=True)
    thread.start()
    thread.join(60)
    assert not thread.is_alive(), "it waited for a lock its own process holds"
    assert "error" in outcome, "it was not refused"
    return outcome["error"]


def test_a_source_a_loader_of_this_process_still_streams_is_refused_to_another_until_it_closes(folder, cache):
    """A training and a validation loader over one folder, or a notebook cell
    run again while its loader lives: the first, in its first epoch, holds
    the cache's lock for the file until the epoch ends, and goes on only as
    its user iterates it.  A second loader, or ``ss.cached``, over the same
    source in the same process is refused at once, naming the file, instead
    of waiting for that lock; once the first loader closes, the next one
    streams its own first epoch."""
    with ss.Loader(folder, 16, PIPELINES, indices=range(0, 50), verbose=False) as train:
        assert train._epochs.first is not None
        for open_it in (lambda: ss.Loader(folder, 16, PIPELINES, indices=range(50, 70), verbose=False),
                        lambda: ss.cached(folder, verbose=False)):
            message = refused_at_once(open_it)
            assert "is being written by a Loader of this process" in message and ".slip" in message
    assert not dataset_files(cache)  # the first loader closed in its epoch 0: nothing written
    with ss.Loader(folder, 16, PIPELINES, verbose=False) as again:
        assert again._epochs.first is not None
        epoch(again)
    assert len(dataset_files(cache)) == 1


def test_a_loader_that_fails_to_start_over_a_source_leaves_no_lock_or_temporary_file(folder, cache):
    """A loader refused after its first epoch began (indices out of range)
    lets go of what that epoch held: the next loader streams."""
    with pytest.raises(ss.ArgumentError, match="indices must lie in"):
        ss.Loader(folder, 16, PIPELINES, indices=[0, 1, 999], verbose=False)
    assert not list(cache.glob(".*.tmp"))
    with ss.Loader(folder, 16, PIPELINES, verbose=False) as loader:
        assert loader._epochs.first is not None


def test_a_loader_closed_in_its_first_epoch_no_longer_maps_the_file_it_gave_up(cache, tmp_path, monkeypatch):
    """The temporary file of a first epoch left unfinished is removed, and
    its pages are mapped no more: a deleted file that a mapping keeps holds
    its disk space for as long as the loader object lives (hundreds of GB
    for ImageNet), which the next run's first epoch would find missing."""
    from slipstream.loader.first_epoch import FirstEpoch

    read = FirstEpoch.read
    monkeypatch.setattr(FirstEpoch, "read", lambda self, index: (time.sleep(0.01), read(self, index))[1])
    folder = synthetic_folder(tmp_path / "images", count=400, height=48, width=48, verbose=False)

    def temporary_files_mapped() -> list[str]:
        with open("/proc/self/maps") as maps:
            return [line.split(maxsplit=5)[-1].strip() for line in maps if ".tmp" in line and str(cache) in line]

    loader = ss.Loader(folder, 8, PIPELINES, verbose=False)
    next(iter(loader))
    assert not loader._epochs.first.file.complete and temporary_files_mapped()
    loader.close()
    assert not list(cache.glob(".*.tmp")) and not temporary_files_mapped()
    del loader


def test_a_streaming_dataset_split_by_node_or_cast_gets_a_file_of_its_own(cache, tmp_path):
    """``split_dataset_by_node`` and ``cast_column`` change what a streaming
    dataset yields without changing its files: its identity holds its rank
    and world size and its features, so the file a loader wrote over one
    node's half is not the file of the whole stream (which would train on
    half the data, the other half never seen) nor of a cast."""
    datasets = pytest.importorskip("datasets")
    from datasets.distributed import split_dataset_by_node

    from slipstream.sources.identity import source_identity

    lines = tmp_path / "data.jsonl"
    lines.write_text("".join(json.dumps({"x": k, "label": k % 3}) + "\n" for k in range(10)))
    whole = datasets.load_dataset("json", data_files={"train": str(lines)}, split="train", streaming=True)
    half = split_dataset_by_node(whole, rank=0, world_size=2)
    cast = whole.cast_column("label", datasets.ClassLabel(names=["a", "b", "c"]))
    identities = [source_identity(d)[0] for d in (whole, half, split_dataset_by_node(whole, rank=1, world_size=2),
                                                  cast)]
    assert len({json.dumps(i, sort_keys=True) for i in identities}) == 4
    assert source_identity(whole)[0] == identities[0]  # and each stays the same
    with ss.Loader(half, 2, order="sequential", verbose=False) as loader:
        assert sorted(int(x) for _ in range(2) for batch in loader for x in batch[0]) == [0, 0, 2, 2, 4, 4, 6, 6, 8, 8]
    with ss.Loader(whole, 2, order="sequential", verbose=False) as loader:
        assert sorted(int(x) for batch in loader for x in batch[0]) == list(range(10))
    assert len(dataset_files(cache)) == 2


def test_a_litdata_dataset_read_with_options_that_change_its_items_gets_a_file_of_its_own(tmp_path):
    """``LitData(dir, subsample=...)`` yields other items than ``LitData(dir)``:
    the options that change what it yields are part of its identity, those
    that only say where chunks are fetched and kept are not."""
    _, _, input_dir = litdata_dataset(tmp_path, count=8)
    whole = ss.LitData(input_dir).identity()
    assert ss.LitData(input_dir).identity() == whole
    assert ss.LitData(input_dir, max_cache_size="1GB").identity() == whole
    assert ss.LitData(input_dir, subsample=0.5).identity() != whole
    assert ss.LitData(input_dir, subsample=0.5, seed=1).identity() != ss.LitData(input_dir, subsample=0.5).identity()


def test_a_loader_over_arrays_says_to_write_them_with_cached_first(cache):
    """Arrays cannot say what identifies them, so the cache cannot know
    their file: the loader says how to give it one, which then serves."""
    arrays = {"x": np.arange(40, dtype=np.int64), "y": np.linspace(0, 1, 40, dtype=np.float32)}
    with pytest.raises(ss.ArgumentError, match=r"cannot tell what a dict holds.*ss\.cached\(source, name=\.\.\.\)"):
        ss.Loader(arrays, 8, verbose=False)
    path = ss.cached(arrays, name="numbers", verbose=False)
    with ss.Loader(path, 8, order="sequential", verbose=False) as loader:
        assert np.concatenate([batch[0].numpy() for batch in loader]).tolist() == list(range(40))
