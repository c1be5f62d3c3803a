"""Reading sharded and remote datasets: many shard files, local or in object
storage, as one dataset with one index space.

The shards' data pages are numbered one after the other (shard 0's pages,
then shard 1's...), and the records of the dataset give every value's
offset in that numbering (``page * page_size + offset in page``), so that
everything above the format layer (orders, the stager, decoders) sees
one dataset with ``data_offset == 0``.  Where the bytes come from is the
business of this module and of its page stores
(:mod:`slipstream.format.shard_pages`): the shard files for a local
dataset, the node-local page cache (:mod:`slipstream.format.pagecache`)
filled by ranged GETs for a remote one.

:func:`open_dataset` opens any dataset: a :class:`ShardedReader` for these,
a :class:`~slipstream.format.reader.Reader` for a local file.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError, DatasetNotFoundError, FormatError
from slipstream.format import layout as L
from slipstream.format import manifest as M
from slipstream.format.location import LocalFolder, Location, open_location
from slipstream.format.cached_pages import CachedPages
from slipstream.files import read_head
from slipstream.format.pagecache import PageCache
from slipstream.format.pagestore import PageSource, PageStore
from slipstream.format.reader import Reader
from slipstream.format.remote import Remote, is_url, local_path
from slipstream.format.shard_pages import ShardFiles
from slipstream.format.slipfile import parse_slipstream
from slipstream.format.tables import Tables, stores_data


class RemoteShard(Reader):
    """The header and tables of a shard in object storage, validated like a
    local file's (its pages stay remote).

    Args:
        location: the dataset's prefix.
        name: the shard's object name.
        head: the object's first bytes, its header (fewer when the object
            is shorter), as ``location.read_head`` gives them.
        size: the object's size, as ``location.read_head`` gives it.
    """

    def __init__(self, location: Location, name: str, head: memoryview, size: int) -> None:
        self.path = location.url_of(name)  # type: ignore[assignment]
        self._size = size
        self.storage = None  # type: ignore[assignment]
        head = np.frombuffer(head, np.uint8)[:L.HEADER_DTYPE.itemsize]
        start = size  # a header that fails its checksum says nothing of where the tables are: none are read
        if head.size == L.HEADER_DTYPE.itemsize:
            header = np.frombuffer(head, L.HEADER_DTYPE, 1)[0]
            if L.crc32(head[:L.HEADER_CRC_SPAN]) == header["header_crc32"]:
                start = min(size, int(header["descriptors_offset"]))
        self._head, self._tail_start = head, start
        self._tail = np.frombuffer(location.read(name, start, size), np.uint8) if start < size else np.zeros(0, np.uint8)
        self._use(parse_slipstream(self.path, size, self._bytes), _ThroughTheDataset(self.path))

    def _file_size(self) -> int:
        return self._size

    def _bytes(self, offset: int, size: int) -> np.ndarray:
        """Bytes ``[offset, offset + size)`` of the shard, from its header or
        its tables (the parser reads nothing else)."""
        if offset + size <= self._head.size:
            return self._head[offset: offset + size]
        if offset >= self._tail_start:
            return self._tail[offset - self._tail_start: offset - self._tail_start + size]
        raise self._fail(f"bytes {offset} to {offset + size} lie in the data pages, not in the tables: the "
                         f"header is corrupt")


class _ThroughTheDataset:
    """The pages of a remote shard opened for its tables
    (:class:`RemoteShard`): they are read through the dataset's page cache,
    and checked as they arrive, so there is nothing to verify or close."""

    reads_at_once = 1

    def __init__(self, url: str) -> None:
        self.url = url

    def read(self, page: int, start: int, end: int) -> np.ndarray:
        raise self._elsewhere()

    def page_store(self, reader: Any, os_cache: bool, pool_pages: int) -> PageStore:
        raise self._elsewhere()

    def _elsewhere(self) -> ArgumentError:
        return ArgumentError(f"{self.url}: the pages of a shard are read through its dataset: open the dataset with "
                             f"slipstream.open_dataset")

    def verify(self) -> None:
        """Nothing to compare: each page is checked when it arrives."""

    def close(self) -> None:
        """Nothing held."""


class ShardedReader(Reader):
    """A sharded dataset (a manifest and its shard files), or a dataset file
    at a URL, as one dataset.  :func:`open_dataset` returns one for a folder
    or prefix holding a manifest, a manifest file, or any URL.

    Attributes, beyond :class:`Reader`'s:
        manifest: the dataset's :class:`~slipstream.format.manifest.Manifest`.
        shards: each shard's reader, in order.
        sample_base, page_base: where each shard's samples and pages start
            in the dataset's numbering.
        cached_pages: the remote pages, through the node-local page cache
            (:class:`~slipstream.format.cached_pages.CachedPages`), else None.
        cache: the node-local page cache (remote datasets), else None.

    Args:
        path: a folder or prefix with a manifest, a manifest, or a dataset
            file at a URL.
        verify_pages: check every page now (downloading them all).
        remote: object-store options and the page cache (for URLs).
    """

    def __init__(self, path: str | os.PathLike, *, verify_pages: bool = False, remote: Remote | None = None) -> None:
        self.remote = remote or Remote()
        self.path = path if is_url(path) else local_path(path)  # type: ignore[assignment]
        self.location, single = _resolve(path, self.remote)
        self.is_remote = self.location.local_folder() is None
        limit = self.remote.cache_bytes
        if single is None:
            self.manifest = self._read_manifest()
            threads = self.remote.requests if self.is_remote else min(8, os.cpu_count() or 1)
            pool = ThreadPoolExecutor(threads, thread_name_prefix="slipstream-open")
            try:
                self.shards = list(pool.map(self._open_shard, self.manifest.shards))
            finally:
                pool.shutdown(wait=False, cancel_futures=True)  # after a failure, the shards not yet opened
        else:
            self.shards = [self._reader(single, *self._first_bytes(single))]
            self.manifest = _manifest_of(single, self.shards[0])
        page_size = self.manifest.page_size
        if self.is_remote and limit is not None and limit < page_size:  # refused before the cache folder is made
            raise ArgumentError(f"{self.path}: cache_limit ({limit:,} bytes) is smaller than one page of the "
                                f"dataset ({page_size:,} bytes): raise it")
        self.cached_pages = CachedPages(self, self.location, PageCache(self.remote.cache_path, limit)) \
            if self.is_remote else None
        self.cache = self.cached_pages.cache if self.cached_pages is not None else None
        self._combine(self.cached_pages or ShardFiles(self))
        if verify_pages:
            self.verify_pages()

    # ---------------------------------------------------------------- opening

    def _read_manifest(self) -> M.Manifest:
        url = self.location.url_of(M.NAME)
        try:
            data = self.location.read_all(M.NAME)
        except DatasetNotFoundError:
            if not self.is_remote:
                raise FormatError(f"{self.path} is a folder, not a dataset file, and not a sharded dataset: it has "
                                  f"no {M.NAME} (a sharded dataset's manifest, written last, when every shard is "
                                  f"complete)") from None
            raise DatasetNotFoundError(f"{self.path}: no dataset here ({url} does not exist; a sharded dataset "
                                       f"has its manifest there, written last, when every shard is complete)") \
                from None
        return M.decode(data, url)

    def _open_shard(self, entry: M.ShardEntry) -> Reader:
        """One shard's reader, after checking it against its manifest entry:
        its size and header checksum from its first bytes, before its
        tables are read (a shard cut short or replaced is named as such),
        then everything its tables say."""
        head, size = self._first_bytes(entry.name)
        self._agree(entry, _identity_differences(entry, size, _header_crc32(head)))
        shard = self._reader(entry.name, head, size)
        self._agree(entry, self._differences(entry, shard))
        return shard

    def _first_bytes(self, name: str) -> tuple[memoryview, int]:
        """The header of shard ``name`` (fewer bytes when it is shorter) and its size."""
        try:
            return self.location.read_head(name, L.HEADER_DTYPE.itemsize)
        except DatasetNotFoundError as exc:
            raise DatasetNotFoundError(f"{self.path}: shard {name} is missing: {exc}") from None

    def _reader(self, name: str, head: memoryview, size: int) -> Reader:
        """The reader of shard ``name``, whose first bytes and size were read."""
        folder = self.location.local_folder()
        if folder is None:
            return RemoteShard(self.location, name, head, size)
        return Reader(folder / name)

    def _differences(self, entry: M.ShardEntry, shard: Reader) -> list[str]:
        """What the opened ``shard`` says that its manifest entry (and the
        manifest) do not, in words."""
        if shard.format != "slipstream":
            return ["it is an FFCV .beton file, not a slipstream file"]
        manifest = self.manifest
        found = _identity_differences(entry, shard._file_size(), int(shard.header["header_crc32"]))
        if len(shard) != entry.samples:
            found.append(_difference("sample count", entry.samples, len(shard)))
        if shard.page_count != entry.pages:
            found.append(_difference("data pages", entry.pages, shard.page_count))
        if shard.page_size != manifest.page_size:
            found.append(_difference("page size", f"{manifest.page_size:,} bytes", f"{shard.page_size:,}"))
        if (shard.page_checksums is not None) != manifest.page_checksums:
            found.append(_difference("page checksums", _present(manifest.page_checksums),
                                     _present(shard.page_checksums is not None)))
        fields = _field_difference(manifest.fields, tuple(shard.descriptors))
        if fields:
            found.append(fields)
        if shard.user_metadata != manifest.user_metadata:
            found.append(_difference("user metadata", M.shown(manifest.user_metadata), M.shown(shard.user_metadata)))
        return found

    def _agree(self, entry: M.ShardEntry, differences: list[str]) -> None:
        """Raise the error that names ``differences`` between shard ``entry`` and its manifest entry, if any."""
        if differences:
            raise FormatError(f"{self.path}: the manifest disagrees with shard {entry.name}: "
                              f"{'; '.join(differences)}")

    def _combine(self, source: PageSource) -> None:
        """One index space over the shards (see the module docstring), whose pages ``source`` holds."""
        first = self.shards[0]  # a manifest lists one shard or more
        self.page_size = self.manifest.page_size
        counts = np.array([len(s) for s in self.shards], np.int64)
        pages = np.array([s.page_count for s in self.shards], np.int64)
        self.sample_base = np.concatenate([[0], np.cumsum(counts)])
        self.page_base = np.concatenate([[0], np.cumsum(pages)])
        page_lengths = np.concatenate([s.page_lengths for s in self.shards]).astype(np.int64)
        self._page_shard = np.repeat(np.arange(len(self.shards)), pages)
        parts, allocations = [], []
        for k, shard in enumerate(self.shards):
            metadata = np.array(shard.metadata)
            for d in self.manifest.fields:
                if stores_data(d):
                    offsets = metadata[d.name]["offset"]
                    offsets[:] = self._global(k, offsets.astype(np.int64))
            parts.append(metadata)
            table = np.array(shard.allocations)
            table["sample"] += np.uint64(self.sample_base[k])
            table["offset"] = self._global(k, table["offset"].astype(np.int64))
            allocations.append(table)
        metadata, table = np.concatenate(parts), np.concatenate(allocations)
        metadata.flags.writeable = table.flags.writeable = False
        checksums = np.concatenate([s.page_checksums for s in self.shards]) if self.manifest.page_checksums else None
        # The shards' fields are the manifest's (checked as each shard opened): the first shard's objects serve.
        self._use(Tables(self.path, first.format, None, tuple(self.manifest.fields), first.fields, metadata, table,
                         dict(self.manifest.user_metadata), self.page_size, 0, int(page_lengths.sum()),
                         int(self.page_base[-1]), checksums), source, page_lengths)

    def _global(self, shard: int, offsets: np.ndarray) -> np.ndarray:
        """File offsets of shard ``shard`` in the dataset's page numbering."""
        return (self.page_base[shard] * self.page_size + offsets - self.shards[shard].data_offset).astype(np.uint64)

    # ---------------------------------------------------------------- pages

    def shard_of(self, page: int) -> tuple[int, int]:
        """(shard, page within the shard) of dataset page ``page``."""
        shard = int(self._page_shard[page])
        return shard, page - int(self.page_base[shard])

    def page_problem(self, page: int) -> str:
        shard, local = self.shard_of(page)
        start, end = self.shards[shard].page_span(local)
        return (f"data page {local} of shard {self.manifest.shards[shard].name} ({self.shards[shard].path}, bytes "
                f"{start:,} to {end:,}) does not match its checksum: the shard is corrupt there")

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}: {f!r}" for n, f in self.fields.items())
        return (f"{type(self).__name__}({str(self.path)!r}, {len(self)} samples in {len(self.shards)} shards, "
                f"{{{fields}}})")


def _manifest_of(name: str, shard: Reader) -> M.Manifest:
    """The manifest of a dataset that is the one file ``shard``, at ``name``."""
    entry = M.ShardEntry(name, len(shard), shard._file_size(), shard.page_count, int(shard.header["header_crc32"]))
    return M.from_descriptors(shard.descriptors, shard.page_size, shard.page_checksums is not None,
                              shard.user_metadata, [entry])


def _identity_differences(entry: M.ShardEntry, size: int, header_crc32: int | None) -> list[str]:
    """How a shard of ``size`` bytes whose header records ``header_crc32``
    (None: too short to hold a header) differs from its manifest entry."""
    found = []
    if size != entry.bytes:
        found.append(_difference("size", f"{entry.bytes:,} bytes", f"{size:,}"))
    if header_crc32 is not None and header_crc32 != entry.header_crc32:
        found.append(_difference("header checksum", f"{entry.header_crc32:08x}", f"{header_crc32:08x}") +
                     ": the shard was rewritten or replaced")
    return found


def _header_crc32(head: memoryview) -> int | None:
    """The header checksum that a slipstream file starting with ``head``
    records; None when ``head`` is shorter than a header."""
    if len(head) < L.HEADER_DTYPE.itemsize:
        return None
    return int(np.frombuffer(head, L.HEADER_DTYPE, 1)[0]["header_crc32"])


def _difference(what: str, says: Any, holds: Any) -> str:
    return f"its {what} (the manifest says {says}, the shard {holds})"


def _present(flag: bool) -> str:
    return "present" if flag else "absent"


def _field_difference(said: tuple[L.FieldDescriptor, ...], held: tuple[L.FieldDescriptor, ...]) -> str | None:
    """How the shard's fields ``held`` differ from the manifest's ``said``, in words; None when they do not."""
    if said == held:
        return None
    names, held_names = [d.name for d in said], [d.name for d in held]
    if names != held_names:
        return _difference("fields", ", ".join(names), ", ".join(held_names))
    one, other = next((a, b) for a, b in zip(said, held) if a != b)
    return _difference(f"field {one.name!r}", _field_text(one), _field_text(other))


def _field_text(d: L.FieldDescriptor) -> str:
    return M.shown({"type_id": d.type_id, "arguments": d.arguments, "record": [list(r) for r in d.record]}, 120)


def _resolve(path: str | os.PathLike, remote: Remote) -> tuple[Location, str | None]:
    """The dataset's folder or prefix, and the name of its single file when
    it is one file rather than a manifest and shards."""
    text = str(path)
    if text.rstrip("/").endswith("/" + M.NAME) or text == M.NAME:
        base = text.rstrip("/")[: -len(M.NAME)].rstrip("/") or "."
        return open_location(base, remote), None
    if is_url(text):
        location = open_location(text, remote)
        if location.exists(M.NAME):
            return location, None
        parent, _, name = text.rstrip("/").rpartition("/")
        folder = open_location(parent, remote)
        if name and folder.exists(name):
            return folder, name
        raise DatasetNotFoundError(f"{text}: no dataset there (neither {location.url_of(M.NAME)} nor an object "
                                   f"{text} exists)")
    local = local_path(path)
    if local.is_dir():
        return LocalFolder(local), None
    if local.exists():
        head = read_head(local, 4096, error=FormatError)  # a FIFO or a socket is refused by name, not waited on
        if M.looks_like_manifest(head):
            return LocalFolder(local.parent), None
        return LocalFolder(local.parent), local.name
    raise DatasetNotFoundError(f"{local}: no such dataset")


def opens_as_sharded(path: Any) -> bool:
    """Whether :func:`open_dataset` opens ``path`` as a sharded (or remote)
    dataset: a URL, a folder, or a manifest file."""
    if not isinstance(path, (str, os.PathLike)):
        return False
    if is_url(path):
        return True
    local = local_path(path)
    if local.is_dir():
        return True
    try:
        return M.looks_like_manifest(read_head(local, 4096))
    except OSError:  # not there, or not a regular file: Reader says which
        return False



def open_dataset(path: str | os.PathLike, *, verify_pages: bool = False, remote: Remote | None = None) -> Reader:
    """Open any dataset: a local slipstream or FFCV ``.beton`` file as a
    :class:`~slipstream.format.reader.Reader`; a sharded dataset (a folder
    or prefix with a manifest, or the manifest itself) or anything at a URL
    (``s3://bucket/prefix``, ``file://...``) as a :class:`ShardedReader`,
    which has the same interface over one index space.

    Args:
        path: the file, folder, manifest or URL.
        verify_pages: check every page's CRC-32 now (downloading a remote
            dataset's pages), instead of each page when it is first read.
        remote: a :class:`slipstream.Remote`: object-store options and the
            page cache, for URLs (unused for local datasets).

    Raises:
        DatasetNotFoundError: nothing is there.
        FormatError: naming the file (or shard, or manifest) and what is
            wrong with it.
    """
    if opens_as_sharded(path):
        return ShardedReader(path, verify_pages=verify_pages, remote=remote)
    return Reader(path, verify_pages=verify_pages)
