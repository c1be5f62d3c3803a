"""The node-local page cache as a shared, untrusted folder: a page damaged
in the cache is never served (it is removed and downloaded again, and said
so), a page corrupt in the store follows ``on_error``; symbolic links,
FIFOs and folders where the cache's files belong are refused by name,
never followed, and nothing outside the cache is written or removed; a
dataset file or shard that is a FIFO is refused at once."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pytest

import slipstream as ss
from slipstream.format.pagecache import PageCache
from test_remote import COUNT, batches, corrupt_copy, remote, samples, write_remote  # noqa: F401  (a fixture)

PAGE_BYTES = b"p" * 4096


@pytest.fixture(scope="module")
def remote_dataset(s3_server, samples):
    return write_remote(s3_server, samples, "s3://test/cache-safety")


def page_files(root: Path) -> list[Path]:
    return sorted(root.rglob("*.page"))


def no_hang(call, seconds: float = 20.0):
    """``call()``'s exception (or None), failing the test if it has not
    returned within ``seconds``."""
    outcome: list = []

    def run():
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still waiting after {seconds} s"
    return outcome[0]


# ---------------------------------------------------------------- damaged pages


def test_a_page_damaged_in_the_cache_is_downloaded_again_and_said_so(s3_server, remote_dataset, tmp_path):
    cache = tmp_path / "cache"
    expected = batches(ss.Loader(remote_dataset, 8, order="sequential", remote=remote(s3_server, cache),
                                 verbose=False))
    good = {path: path.read_bytes() for path in page_files(cache)}
    for path, data in good.items():  # every cached page damaged on disk
        path.write_bytes(bytes([data[0] ^ 0xFF]) + data[1:])
    reader = ss.open_dataset(remote_dataset, remote=remote(s3_server, cache))
    with pytest.warns(ss.CacheWarning) as caught:
        first = reader.read(0, "image")
    (warning,) = caught
    assert str(warning.message).endswith(
        "does not match its checksum: it was damaged in the cache (its disk, or a process writing into the cache "
        "folder), not in the store; it was removed and is downloaded again")
    damaged = Path(str(warning.message).split(": ", 1)[0])
    assert damaged in good and f"({remote_dataset}/shard-" in str(warning.message)
    assert reader.cache.discarded == 1 and reader.cache.downloads == 1
    assert damaged.read_bytes() == good[damaged]  # the cache holds the downloaded page again
    np.testing.assert_array_equal(reader.read(0, "image"), first)
    reader.close()
    loader = ss.Loader(remote_dataset, 8, order="sequential", remote=remote(s3_server, cache), verbose=False)
    with pytest.warns(ss.CacheWarning):
        assert batches(loader) == expected  # never a damaged byte in a batch
    loader.close()
    assert {path: path.read_bytes() for path in page_files(cache)} == good


def test_a_page_corrupt_in_the_store_follows_on_error_and_is_never_served(s3_server, remote_dataset, tmp_path):
    url, shard = corrupt_copy(s3_server, "corrupt-skip", "cache-safety")
    loader = ss.Loader(url, 8, order="sequential", on_error="skip", remote=remote(s3_server, tmp_path), verbose=False)
    with pytest.warns(ss.SampleWarning, match=r"samples of epoch 0 could not be decoded and were left out .* "
                                              rf"data page 1 of shard {shard.name} \({url}/"):
        labels = [label for _, batch in batches(loader)[0] for label in batch]
    lost = sorted(set(range(COUNT)) - set(labels))
    assert lost and sorted(loader.failures) == lost and len(labels) + len(lost) == COUNT
    reader = ss.open_dataset(url, remote=remote(s3_server, tmp_path))
    for _ in range(2):  # never served, however often it is asked for
        with pytest.raises(ss.FormatError, match=rf"data page 1 of shard {shard.name} .* does not match its "
                                                 r"checksum: the shard is corrupt there in 3 downloads"):
            reader.read(lost[0], "image")
    assert reader.cache.downloads == 0  # the bad page never entered the cache
    loader.close()
    reader.close()


# ---------------------------------------------------------------- what the cache did not make


def test_a_symlink_at_usage_is_refused_and_its_target_untouched(tmp_path):
    outside = tmp_path / "precious.txt"
    outside.write_bytes(b"do not overwrite me")
    root = tmp_path / "cache"
    root.mkdir()
    (root / "usage").symlink_to(outside)
    with pytest.raises(ss.StorageError, match=rf"the page cache's {root / 'usage'} is a symbolic link, which is not "
                                              r"followed"):
        PageCache(root).open("key", 0, lambda: PAGE_BYTES)
    assert outside.read_bytes() == b"do not overwrite me"


def test_eviction_never_follows_a_symlinked_folder(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    victims = [outside / f"{k:08d}.page" for k in range(3)]
    for victim in victims:
        victim.write_bytes(b"v" * 4096)
    root = tmp_path / "cache"
    root.mkdir()
    (root / "evil-0123456789abcdef01234567").symlink_to(outside, target_is_directory=True)
    cache = PageCache(root, limit=3 * 4096)
    for page in range(8):  # five evictions at least
        os.close(cache.open("shard", page, lambda: PAGE_BYTES)[0])
    assert cache.evictions >= 5 and cache.usage() <= 3 * 4096
    assert [v.read_bytes() for v in victims] == [b"v" * 4096] * 3


def test_a_symlinked_shard_folder_is_refused_and_nothing_is_written_through_it(tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    root = tmp_path / "cache"
    root.mkdir()
    (root / "shard").symlink_to(outside, target_is_directory=True)
    with pytest.raises(ss.StorageError, match=rf"the page cache's {root / 'shard'} is a symbolic link, not a folder "
                                              r"the cache made"):
        PageCache(root).open("shard", 0, lambda: PAGE_BYTES)
    assert list(outside.iterdir()) == []


def test_a_shard_folder_removed_while_the_cache_lives_is_made_again(tmp_path):
    # The cache keeps each shard folder open for its hits; a folder removed
    # meanwhile (the cache cleared by hand) is noticed at the next miss.
    import shutil

    cache = PageCache(tmp_path / "cache")
    fd, downloaded = cache.open("shard", 0, lambda: PAGE_BYTES)
    os.close(fd)
    assert downloaded
    shutil.rmtree(tmp_path / "cache" / "shard")
    fd, downloaded = cache.open("shard", 0, lambda: PAGE_BYTES)
    try:
        assert downloaded and os.pread(fd, len(PAGE_BYTES), 0) == PAGE_BYTES
    finally:
        os.close(fd)
    assert (tmp_path / "cache" / "shard" / "00000000.page").read_bytes() == PAGE_BYTES
    fd, downloaded = cache.open("shard", 0, lambda: b"never asked for")
    os.close(fd)
    assert not downloaded and cache.hits == 1


def test_a_dangling_lock_symlink_is_refused_and_its_target_not_created(tmp_path):
    root = tmp_path / "cache"
    (root / "shard").mkdir(parents=True)
    target = tmp_path / "created-by-the-cache"
    (root / "shard" / "00000000.lock").symlink_to(target)
    with pytest.raises(ss.StorageError, match=rf"{root / 'shard' / '00000000.lock'} is a symbolic link"):
        PageCache(root).open("shard", 0, lambda: PAGE_BYTES)
    assert not target.exists()


@pytest.mark.parametrize("what", ["fifo", "folder", "symlink"])
def test_what_is_not_a_page_file_where_a_page_belongs_is_refused_at_once(tmp_path, what):
    root = tmp_path / "cache"
    (root / "shard").mkdir(parents=True)
    page = root / "shard" / "00000000.page"
    outside = tmp_path / "outside.page"
    outside.write_bytes(PAGE_BYTES)
    {"fifo": lambda: os.mkfifo(page), "folder": page.mkdir, "symlink": lambda: page.symlink_to(outside)}[what]()
    described = {"fifo": "is a FIFO \\(named pipe\\)", "folder": "is a folder", "symlink": "is a symbolic link"}[what]
    error = no_hang(lambda: PageCache(root).open("shard", 0, lambda: PAGE_BYTES))
    assert isinstance(error, ss.StorageError)
    assert error.args[0].startswith(f"the page cache's {page} ") and described.replace("\\", "") in error.args[0]
    assert outside.read_bytes() == PAGE_BYTES


@pytest.mark.parametrize("length", [100, 4096, (2 << 20) + 3 * 4096 + 5])
def test_a_page_of_any_length_is_written_whole(tmp_path, length):
    """Whole blocks go to the disk directly, in chunks through an aligned
    buffer, the rest through the OS's cache: the file holds every byte."""
    data = np.random.default_rng(length).integers(0, 256, length, np.uint8).tobytes()
    cache = PageCache(tmp_path / "cache")
    fd, downloaded = cache.open("shard", 0, lambda: data)
    try:
        assert downloaded and os.fstat(fd).st_size == length and os.pread(fd, length + 1, 0) == data
    finally:
        os.close(fd)
    assert (tmp_path / "cache" / "shard" / "00000000.page").read_bytes() == data


def test_a_write_the_disk_refuses_names_the_page(tmp_path):
    """A file-size limit stands in for a full disk: the write fails the same way."""
    script = textwrap.dedent(f"""
        import resource, signal
        from pathlib import Path
        from slipstream.format.pagecache import PageCache
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        cache = PageCache(Path({str(tmp_path / 'cache')!r}))
        cache.usage()  # the counter exists before the limit
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))
        try:
            cache.open("shard", 3, lambda: b"x" * 8192)
        except Exception as exc:
            print(type(exc).__name__, exc)
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert out.stdout.startswith(f"StorageError {tmp_path / 'cache' / 'shard' / '00000003.page'}: cannot write this "
                                 f"page (8,192 bytes) into the page cache: File too large (EFBIG); free space there")
    assert not page_files(tmp_path / "cache")
    assert resource.getrlimit(resource.RLIMIT_FSIZE)  # this process kept its limits


def test_a_dataset_file_or_shard_that_is_a_fifo_is_refused_at_once(tmp_path):
    fifo = tmp_path / "data.slip"
    os.mkfifo(fifo)
    error = no_hang(lambda: ss.Reader(fifo))
    assert isinstance(error, ss.FormatError) and str(error) == f"{fifo} is a FIFO (named pipe), not a regular file"
    folder = tmp_path / "sharded"
    ss.write(folder, [(np.zeros((4, 4, 3), np.uint8), k) for k in range(8)],
             {"image": ss.RGBImageField(write_mode="raw"), "label": ss.IntField()}, shards=2, workers=0,
             verbose=False)
    shard = sorted(folder.glob("*.slip"))[0]
    shard.unlink()
    os.mkfifo(shard)
    error = no_hang(lambda: ss.open_dataset(folder))
    assert isinstance(error, ss.FormatError) and f"{shard} is a FIFO (named pipe), not a regular file" in str(error)
