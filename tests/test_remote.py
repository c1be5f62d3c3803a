"""Datasets in object storage, against a real S3-compatible server
(SeaweedFS on 127.0.0.1, see ``object_store.py``): sharded writes, loading
by real gloo ranks, the node-local page cache shared between processes,
and the faults a remote store brings."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import jpeg_corpus
import slipstream as ss
from slipstream.format import layout as L
from slipstream.format import manifest as M
from test_distributed import free_port

ORDERS = ("sequential", "random", "quasi_random")
COUNT, PAGE = 96, 16384


@pytest.fixture(scope="module")
def samples():
    return [(jpeg_corpus.make_sample(48, 64, seed=i).data, i) for i in range(COUNT)]


FIELDS = {"image": ss.RGBImageField(tile_width=None), "label": ss.IntField()}  # page counts of the JPEGs as made


@pytest.fixture(scope="module")
def local_file(samples, tmp_path_factory):
    path = tmp_path_factory.mktemp("remote") / "one.slip"
    ss.write(path, samples, FIELDS, workers=0, page_size=PAGE, verbose=False)
    return path


def write_remote(server, samples, url):
    """The samples as a sharded dataset at ``url`` (about 4 shards)."""
    result = ss.write(url, samples, FIELDS, workers=0, page_size=PAGE, shard_size=50_000, verbose=False,
                      remote=ss.Remote(storage_options=server.storage_options()))
    assert len(result.shards) >= 3
    return url


@pytest.fixture(scope="module")
def remote_dataset(s3_server, samples):
    """The samples as a sharded dataset in the bucket (about 4 shards)."""
    return write_remote(s3_server, samples, "s3://test/photos")


def remote(server, cache, endpoint=None, **options):
    return ss.Remote(storage_options=server.storage_options(**({"endpoint": endpoint} if endpoint else {})),
                     cache_dir=cache, **options)


def json_results(procs) -> list:
    """What each process printed last, as JSON, once all have ended well."""
    results = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        results.append(json.loads(out.strip().splitlines()[-1]))
    return results


def batches(loader, epochs=1):
    out = []
    for _ in range(epochs):
        out.append([(images.numpy().tobytes(), labels.tolist()) for images, labels in loader])
    return out


# ---------------------------------------------------------------- writing and reading


def test_write_puts_shards_then_the_manifest(s3_server, remote_dataset, local_file):
    store = s3_server.store("test")
    import obstore

    names = sorted(o["path"] for o in obstore.list(store, "photos").collect())
    listed = M.decode(bytes(obstore.get(store, "photos/manifest.json").bytes())).shards
    assert names == sorted([f"photos/{s.name}" for s in listed] + ["photos/manifest.json"])
    with ss.Reader(local_file) as one:
        assert sum(s.samples for s in listed) == len(one) == COUNT


def test_reader_over_s3_reads_what_was_written(s3_server, remote_dataset, local_file, tmp_path):
    with ss.open_dataset(remote_dataset, remote=remote(s3_server, tmp_path)) as reader, ss.Reader(local_file) as one:
        assert type(reader).__name__ == "ShardedReader" and len(reader) == COUNT
        assert reader.page_count == one.page_count  # shards end on page boundaries
        for i in (0, 17, COUNT - 1):
            np.testing.assert_array_equal(reader.read(i, "image"), one.read(i, "image"))
            assert reader.read(i, "label") == i
        reader.verify_pages()
        assert {k: v.tolist() for k, v in reader.index("label").items()} == \
            {k: v.tolist() for k, v in one.index("label").items()}


def test_credentials_from_the_environment(s3_server, remote_dataset, tmp_path):
    code = textwrap.dedent("""
        import sys, slipstream as ss
        reader = ss.open_dataset(sys.argv[1], remote=ss.Remote(cache_dir=sys.argv[2]))
        print(len(reader), reader.read(5, "label"))
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")} | s3_server.env()
    out = subprocess.run([sys.executable, "-c", code, remote_dataset, str(tmp_path)], env=env, capture_output=True,
                         text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == [str(COUNT), "5"]


def test_storage_options_in_the_spelling_of_the_environment(s3_server, remote_dataset, tmp_path):
    # obstore takes its keys in any case, with or without aws_; the HTTP client's (allow_http, timeout) too.
    options = {f"AWS_{key.upper()}": value for key, value in s3_server.storage_options().items()}
    options["Timeout"] = "30s"
    with ss.open_dataset(remote_dataset, remote=ss.Remote(storage_options=options, cache_dir=tmp_path)) as reader:
        assert (len(reader), reader.read(5, "label")) == (COUNT, 5)


WORKER = textwrap.dedent("""
    import hashlib, json, sys
    import torch.distributed as dist
    import slipstream as ss

    url, port, rank, cache, options = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], json.loads(sys.argv[5])
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=2)
    remote = ss.Remote(storage_options=options, cache_dir=cache)
    result = {}
    for order in ("sequential", "random", "quasi_random"):
        loader = ss.Loader(url, 8, order=ss.Order(order, seed=4), remote=remote, verbose=False)
        assert (loader.rank, loader.world_size) == (rank, 2)
        result[order] = [[(hashlib.sha256(i.numpy().tobytes()).hexdigest(), l.tolist()) for i, l in loader]
                         for _ in range(2)]
        loader.close()
    dist.barrier()
    dist.destroy_process_group()
    print(json.dumps(result))
""")


def test_two_gloo_ranks_get_the_batches_of_one_local_file(s3_server, remote_dataset, local_file, tmp_path):
    import hashlib

    port = str(free_port())
    options = json.dumps(s3_server.storage_options())
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, remote_dataset, port, str(rank), str(tmp_path / "cache"),
                               options], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
             for rank in range(2)]
    ranks = json_results(procs)
    for order in ORDERS:
        for epoch in range(2):
            shares = []
            for rank in range(2):
                local = ss.Loader(local_file, 8, order=ss.Order(order, seed=4), verbose=False,
                                  sharding=ss.Sharding(distributed=True, rank=rank, world_size=2))
                local.set_epoch(epoch)
                expected = [(hashlib.sha256(i.numpy().tobytes()).hexdigest(), l.tolist()) for i, l in local]
                got = [tuple(b) for b in ranks[rank][order][epoch]]
                assert got == expected, (order, epoch, rank)  # byte-identical batches
                shares.append([s for _, labels in got for s in labels])
            assert len(shares[0]) == len(shares[1]) == COUNT // 2  # equal
            assert not set(shares[0]) & set(shares[1])  # disjoint
            assert set(shares[0]) | set(shares[1]) == set(range(COUNT))  # complete


# ---------------------------------------------------------------- the page cache


def page_ranges(reader) -> set[tuple[str, str]]:
    """(object path, Range header) of every data page's GET."""
    ranges = set()
    for entry, shard in zip(reader.manifest.shards, reader.shards):
        for page in range(shard.page_count):
            start, end = shard.page_span(page)
            ranges.add((f"/test/photos/{entry.name}", f"bytes={start}-{end - 1}"))
    return ranges


READ_ALL = textwrap.dedent("""
    import json, sys
    import slipstream as ss
    url, cache, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    loader = ss.Loader(url, 8, order=ss.Order("random", seed=1),
                       remote=ss.Remote(storage_options=options, cache_dir=cache), verbose=False)
    labels = sorted(s for _, l in loader for s in l.tolist())
    print(json.dumps({"labels": labels, "downloads": loader.reader.cache.downloads}))
""")


def test_two_processes_on_a_node_download_each_page_once(s3_server, s3_proxy, remote_dataset, tmp_path):
    s3_proxy.delay_s = 0.02  # the two processes overlap on the same pages
    options = json.dumps(s3_server.storage_options(endpoint=s3_proxy.endpoint))
    procs = [subprocess.Popen([sys.executable, "-c", READ_ALL, remote_dataset, str(tmp_path / "cache"), options],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
             for _ in range(2)]
    results = json_results(procs)
    assert all(r["labels"] == list(range(COUNT)) for r in results)
    with ss.open_dataset(remote_dataset, remote=remote(s3_server, tmp_path / "other")) as reader:
        pages = page_ranges(reader)
    gets = [(r.path, r.range) for r in s3_proxy.requests if r.method == "GET" and (r.path, r.range) in pages]
    assert len(gets) == len(pages) == sum(r["downloads"] for r in results)  # every page once, by one of them
    assert set(gets) == pages


def test_a_second_epoch_makes_no_request(s3_server, s3_proxy, remote_dataset, tmp_path):
    loader = ss.Loader(remote_dataset, 8, order="quasi_random", remote=remote(s3_server, tmp_path, s3_proxy.endpoint),
                       verbose=False)
    first = batches(loader)
    assert s3_proxy.count("GET", ranged_only=True) > 0
    s3_proxy.reset_counts()
    assert batches(loader) != first  # another epoch, another order...
    assert s3_proxy.count(None) == 0  # ...and not one request
    loader.close()


def test_pages_are_read_in_place_from_the_cache(s3_server, remote_dataset, local_file, tmp_path):
    """No copy: the decoders read each cached page where the store mapped
    it, at the values' own offsets, which are never rewritten."""
    loader = ss.Loader(remote_dataset, 8, order=ss.Order("random", seed=5), remote=remote(s3_server, tmp_path),
                       verbose=False)
    assert batches(loader, 2) == batches(ss.Loader(local_file, 8, order=ss.Order("random", seed=5), verbose=False), 2)
    store = loader.memory.store
    assert loader.memory.storage is store.storage and store.storage.size >= loader.reader.page_count * PAGE
    np.testing.assert_array_equal(loader.source.offsets("image"), loader.reader.metadata["image"]["offset"])
    loader.close()


def test_once_every_page_is_mapped_an_epoch_fetches_nothing(s3_server, remote_dataset, local_file, tmp_path):
    """With the OS's cache (the default), released pages stay mapped like a
    local file's: after one epoch the store is resident and the stager
    plans, fetches and releases nothing; a pool of 2 pages keeps 2 mapped."""
    expected = batches(ss.Loader(local_file, 8, order=ss.Order("random", seed=3), verbose=False), 2)
    loader = ss.Loader(remote_dataset, 8, order=ss.Order("random", seed=3), remote=remote(s3_server, tmp_path),
                       verbose=False)
    count = loader.reader.page_count
    assert not loader.memory.store.resident
    first = batches(loader)
    fetched = loader.memory.pages_fetched
    assert loader.memory.store.resident and fetched >= count
    assert [first[0], batches(loader)[0]] == expected and loader.memory.pages_fetched == fetched
    loader.close()
    pooled = ss.Loader(remote_dataset, 8, order=ss.Order("random", seed=3), remote=remote(s3_server, tmp_path),
                       memory=ss.Memory(os_cache=False, pool_pages=2), verbose=False)
    assert batches(pooled, 2) == expected
    assert not pooled.memory.store.resident and pooled.memory.pages_fetched >= 2 * count
    pooled.close()


def test_a_cached_page_truncated_under_a_loader_is_named_not_sigbus(s3_server, remote_dataset, tmp_path):
    loader = ss.Loader(remote_dataset, 8, order="sequential", remote=remote(s3_server, tmp_path), verbose=False)
    batches(loader)  # every page cached, and kept mapped for the next epoch
    pages = sorted(Path(tmp_path).rglob("*.page"))
    assert len(pages) == loader.reader.page_count
    expected = batches(loader)
    os.truncate(pages[0], 0)
    with pytest.raises(ss.StorageError, match=rf"^{pages[0]}: truncated in the page cache while it was read"):
        batches(loader)
    with pytest.warns(ss.CacheWarning, match=rf"{pages[0]}: the page cache's copy .* does not match"):
        assert batches(loader) == expected  # the damaged copy is replaced
    assert pages[0].stat().st_size == PAGE
    loader.close()


def test_a_cache_smaller_than_the_dataset_stays_within_its_limit(s3_server, remote_dataset, local_file, tmp_path):
    limit = 4 * PAGE
    loader = ss.Loader(remote_dataset, 8, order=ss.Order("random", seed=2),
                       remote=remote(s3_server, tmp_path, cache_limit=limit), verbose=False)
    cache = loader.reader.cache
    assert loader.reader.page_count * PAGE >= 3 * limit
    expected = batches(ss.Loader(local_file, 8, order=ss.Order("random", seed=2), verbose=False), 2)
    assert batches(loader, 2) == expected
    stats = cache.stats()
    assert stats["peak_bytes"] <= limit and stats["bytes"] <= limit and stats["evictions"] > 0
    on_disk = sum(p.stat().st_size for p in Path(tmp_path).rglob("*.page"))
    assert on_disk == stats["bytes"] <= limit
    loader.close()


def test_a_cache_limit_below_one_page_is_refused_before_the_cache_is_made(s3_server, remote_dataset, tmp_path):
    cache = tmp_path / "cache"
    with pytest.raises(ss.ArgumentError, match=rf"^{remote_dataset}: cache_limit \(100 bytes\) is smaller than one "
                                               rf"page of the dataset \({PAGE:,} bytes\): raise it$"):
        ss.open_dataset(remote_dataset, remote=remote(s3_server, cache, cache_limit=100))
    assert not cache.exists()


# ---------------------------------------------------------------- faults


def test_the_server_stopped_for_3_s_mid_epoch_loses_no_sample(s3_server, s3_proxy, remote_dataset, tmp_path):
    s3_proxy.delay_s = 0.03
    loader = ss.Loader(remote_dataset, 8, order="sequential",
                       remote=remote(s3_server, tmp_path, s3_proxy.endpoint, requests=1), verbose=False)
    loader.memory.pages_ahead = 1  # keep most pages still to fetch when the server goes
    labels, outage = [], None
    for k, (_, label) in enumerate(loader):
        labels += label.tolist()
        if k == 1:
            s3_server.stop()
            outage = threading.Timer(3.0, s3_server.start)
            outage.start()
    outage.join()
    assert labels == list(range(COUNT))
    assert s3_server.running
    loader.close()


MESSAGES = {
    # obstore's message -> what it is: retried ("unreachable"), or the error raised at once
    "Generic S3 error: Error performing GET http://127.0.0.1:38719/test/photos/shard-0.slip in 2.740384894s, "
    "after 10 retries, max_retries: 10, retry_timeout: 120s - HTTP error: error sending request": "unreachable",
    "Generic S3 error: Error performing GET http://h/b/k in 403ms - Server returned non-2xx status code: "
    "503 Service Unavailable": "unreachable",
    "Generic S3 error: Error performing GET http://h/b/k in 1.2s - Server returned non-2xx status code: "
    "429": "unreachable",
    "Generic S3 error: Error performing GET http://h/b/k in 1.2s - Server returned non-2xx status code: "
    "403 Forbidden": "access denied",
    "Generic S3 error: Error performing GET http://h/b/k in 4.03s - Server returned non-2xx status code: "
    "401 Unauthorized": "access denied",
    "Error performing GET http://h/b/403/k in 0.1s: <Code>SignatureDoesNotMatch</Code>": "access denied",
    "Error performing GET http://h/b/k in 0.1s - Server returned non-2xx status code: 400 Bad Request": "refused",
}


@pytest.mark.parametrize("message", list(MESSAGES))
def test_store_errors_are_told_apart_by_their_status_not_by_digits_in_the_text(message):
    """A time of 2.740384894 s, a 403 ms or a key with 403 in it is no HTTP 403."""
    from slipstream.format import objectstore

    with pytest.raises(ss.StorageError) as raised, objectstore._Translate("s3://b/k"):
        raise OSError(message)
    expected = MESSAGES[message]
    assert isinstance(raised.value, objectstore._Unreachable) == (expected == "unreachable"), raised.value
    assert str(raised.value).startswith("s3://b/k: ")
    if expected != "unreachable":
        assert expected in str(raised.value), raised.value


def copy_dataset(s3_server, name, source="photos"):
    """A fresh copy of the bucket's dataset ``source`` under ``name``, to damage."""
    import obstore

    store = s3_server.store("test")
    for o in obstore.list(store, source).collect():
        data = bytes(obstore.get(store, o["path"]).bytes())
        obstore.put(store, o["path"].replace(f"{source}/", f"{name}/", 1), data)
    return store, M.decode(bytes(obstore.get(store, f"{name}/manifest.json").bytes()))


def corrupt_copy(s3_server, name, source="photos"):
    """A copy of the bucket's dataset ``source`` under ``name`` with a byte
    of its second shard's second data page flipped; the URL and that shard."""
    import obstore

    store, manifest = copy_dataset(s3_server, name, source)
    shard = manifest.shards[1]
    data = bytearray(bytes(obstore.get(store, f"{name}/{shard.name}").bytes()))
    data[4096 + PAGE + 100] ^= 0xFF
    obstore.put(store, f"{name}/{shard.name}", bytes(data))
    return f"s3://test/{name}", shard


def test_a_page_corrupted_in_the_bucket_is_named(s3_server, remote_dataset, tmp_path):
    _, shard = corrupt_copy(s3_server, "corrupt")
    loader = ss.Loader("s3://test/corrupt", 8, order="sequential", remote=remote(s3_server, tmp_path), verbose=False)
    with pytest.raises(ss.DecodeError) as caught:  # on_error="raise": its first sample fails
        batches(loader)
    message = str(caught.value)
    assert f"data page 1 of shard {shard.name}" in message and "s3://test/corrupt/" in message
    assert "does not match its checksum" in message and "in 3 downloads" in message
    assert "samples in it: " in message
    assert not list(Path(tmp_path).rglob("*.page")) or all(
        p.stat().st_size for p in Path(tmp_path).rglob("*.page"))  # the bad page never entered the cache
    loader.close()


def test_a_deleted_shard_is_named_before_the_first_batch(s3_server, tmp_path):
    import obstore

    store, manifest = copy_dataset(s3_server, "deleted")
    obstore.delete(store, f"deleted/{manifest.shards[2].name}")
    with pytest.raises(ss.DatasetNotFoundError, match=f"shard {manifest.shards[2].name} is missing"):
        ss.Loader("s3://test/deleted", 8, remote=remote(s3_server, tmp_path), verbose=False)


def test_a_shard_header_damaged_in_the_bucket_is_named_from_its_first_bytes(s3_server, s3_proxy, remote_dataset,
                                                                           tmp_path):
    import obstore

    store, manifest = copy_dataset(s3_server, "header")
    shard = manifest.shards[0]
    data = bytearray(bytes(obstore.get(store, f"header/{shard.name}").bytes()))
    start = L.HEADER_DTYPE.fields["descriptors_offset"][1]
    data[start:start + 8] = bytes(8)  # the tables would start at byte 0: the whole shard
    obstore.put(store, f"header/{shard.name}", bytes(data))
    with pytest.raises(ss.FormatError, match=f"header/{shard.name}: header checksum mismatch"):
        ss.open_dataset("s3://test/header", remote=remote(s3_server, tmp_path, s3_proxy.endpoint))
    ranges = [r.range for r in s3_proxy.requests if r.path.endswith(shard.name)]
    assert ranges == [f"bytes=0-{L.HEADER_DTYPE.itemsize - 1}"]  # its header, not the shard


def test_a_shard_cut_short_after_it_was_opened_is_named_without_retrying(s3_server, remote_dataset, tmp_path):
    import obstore

    store, manifest = copy_dataset(s3_server, "shortened")
    shard = manifest.shards[1]
    # Retrying as for an outage would end after 30 s with "the request failed after its retries".
    with ss.open_dataset("s3://test/shortened", remote=remote(s3_server, tmp_path, retry_timeout_s=30)) as reader:
        data = bytes(obstore.get(store, f"shortened/{shard.name}").bytes())
        obstore.put(store, f"shortened/{shard.name}", data[:reader.shards[1].data_offset])
        with pytest.raises(ss.StorageError, match=f"shortened/{shard.name}: the object is shorter than the bytes "
                                                  f"asked for .*HTTP 416.*needed for data page 0 of shard"):
            reader.read(int(reader.sample_base[1]), "image")


def test_a_manifest_that_disagrees_with_its_shards(s3_server, tmp_path):
    import obstore

    store, manifest = copy_dataset(s3_server, "swapped")
    other = bytes(obstore.get(store, f"swapped/{manifest.shards[0].name}").bytes())
    obstore.put(store, f"swapped/{manifest.shards[1].name}", other)
    with pytest.raises(ss.FormatError, match=f"the manifest disagrees with shard {manifest.shards[1].name}"):
        ss.open_dataset("s3://test/swapped", remote=remote(s3_server, tmp_path))


def test_wrong_credentials_missing_buckets_and_datasets(s3_server, remote_dataset, tmp_path):
    wrong = ss.Remote(storage_options=s3_server.storage_options(secret_access_key="not-the-secret"),
                      cache_dir=tmp_path)
    with pytest.raises(ss.StorageError, match="s3://test/photos.*access denied: check the credentials"):
        ss.Loader(remote_dataset, 8, remote=wrong, verbose=False)
    with pytest.raises(ss.DatasetNotFoundError, match="s3://no-such-bucket/photos"):
        ss.open_dataset("s3://no-such-bucket/photos", remote=remote(s3_server, tmp_path))
    with pytest.raises(ss.DatasetNotFoundError, match="s3://test/nothing-here: no dataset there"):
        ss.open_dataset("s3://test/nothing-here", remote=remote(s3_server, tmp_path))
    with pytest.raises(ss.ArgumentError, match="cache_limit"):
        ss.Remote(cache_limit="lots")


KILLED = textwrap.dedent("""
    import json, sys
    import slipstream as ss
    url, cache, options = sys.argv[1], sys.argv[2], json.loads(sys.argv[3])
    loader = ss.Loader(url, 8, order="sequential", remote=ss.Remote(storage_options=options, cache_dir=cache),
                       verbose=False)
    print("started", flush=True)
    for batch in loader:
        pass
""")


def test_a_process_killed_mid_download_leaves_no_partial_page(s3_server, s3_proxy, remote_dataset, local_file,
                                                              tmp_path):
    s3_proxy.delay_s = 0.2  # downloads are in flight when the kill comes
    options = json.dumps(s3_server.storage_options(endpoint=s3_proxy.endpoint))
    proc = subprocess.Popen([sys.executable, "-c", KILLED, remote_dataset, str(tmp_path), options],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
    assert proc.stdout.readline().strip() == "started"
    deadline = time.monotonic() + 60
    while s3_proxy.count("GET", ranged_only=True) < 12 and time.monotonic() < deadline:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    with ss.open_dataset(remote_dataset, remote=remote(s3_server, tmp_path)) as reader:
        lengths = {}
        for k, shard in enumerate(reader.shards):
            for page in range(shard.page_count):
                start, end = shard.page_span(page)
                lengths[(reader.cached_pages.keys[k], page)] = (end - start, int(reader.page_base[k]) + page)
        visible = list(Path(tmp_path).rglob("*.page"))
        assert len(visible) < reader.page_count  # it was killed before the end
        for path in visible:  # every page in the cache is whole and right
            length, page = lengths[(path.parent.name, int(path.stem))]
            data = path.read_bytes()
            assert len(data) == length and ss.native.crc32(data) == int(reader.page_checksums[page])
    s3_proxy.delay_s = 0
    again = ss.Loader(remote_dataset, 8, order="sequential", remote=remote(s3_server, tmp_path), verbose=False)
    assert batches(again) == batches(ss.Loader(local_file, 8, order="sequential", verbose=False))
    assert not [p for p in Path(tmp_path).rglob("*.tmp")]  # what the killed process left was cleaned up
    again.close()
