"""The data pages of shards in object storage, through the node-local page
cache (:mod:`slipstream.format.pagecache`): each page is fetched by one
ranged GET per node, checked against its checksum before it enters the
cache, and checked again the first time a process reads it back from there.

:class:`CachedPages` is the :class:`~slipstream.format.pagestore.PageSource`
of a remote :class:`~slipstream.format.sharded.ShardedReader`: its Python
reads (``reader[i]``) and its loaders' page store
(:class:`~slipstream.format.shard_pages.RemotePages`) both take their pages
through it.
"""

from __future__ import annotations

import bisect
import os
import warnings
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slipstream import native
from slipstream.errors import CacheWarning, DatasetNotFoundError, FormatError, StorageError
from slipstream.format import layout as L
from slipstream.format.location import Location
from slipstream.format.pagecache import NEVER, PageCache, shard_key
from slipstream.format.pagestore import PageStore
from slipstream.format.reader import PAGE_CORRUPT, PAGE_GOOD, short_list
from slipstream.format.shard_pages import RemotePages

CHECKSUM_ATTEMPTS = 3
"""Downloads of a page whose bytes fail their checksum before it is reported corrupt."""


class CachedPages:
    """The pages of a remote sharded dataset, through the page cache.

    Args:
        reader: the dataset (a :class:`~slipstream.format.sharded.ShardedReader`:
            its shards, manifest, page numbering and page states; this
            module does not import it).
        location: the prefix holding the shards.
        cache: the node-local page cache.

    Attributes:
        cache: the page cache.
        keys: each shard's key in the cache (see
            :func:`~slipstream.format.pagecache.shard_key`).
        reads_at_once: the requests in flight at once (``Remote.requests``).
    """

    def __init__(self, reader: Any, location: Location, cache: PageCache) -> None:
        self.reader, self.location, self.cache = reader, location, cache
        self.reads_at_once = reader.remote.requests
        self.keys = [shard_key(s.path, entry.bytes, entry.header_crc32)
                     for s, entry in zip(reader.shards, reader.manifest.shards)]
        self._shard_of_key = {key: k for k, key in enumerate(self.keys)}

    def path(self, page: int) -> Path:
        """Where dataset page ``page`` lives in the cache (when it is there)."""
        shard, local = self.reader.shard_of(page)
        return self.cache.path(self.keys[shard], local)

    def follow(self, uses: Mapping[int, Sequence[int]], now: Callable[[], int]) -> None:
        """Make the cache's eviction follow a plan: ``uses`` gives each
        dataset page's batches in order, ``now()`` the batch being read.  A
        full cache removes the pages needed farthest ahead first."""
        base = self.reader.page_base

        def next_use(key: str, page: int) -> int:
            shard = self._shard_of_key.get(key)
            if shard is None:
                return NEVER  # another dataset's page
            times = uses.get(int(base[shard]) + page)
            if not times:
                return NEVER
            k = bisect.bisect_left(times, now())
            return times[k] if k < len(times) else NEVER

        self.cache.set_priority(next_use)

    def read(self, page: int, start: int, end: int) -> np.ndarray:
        """The checked bytes of dataset page ``page`` (at ``[start, end)``),
        read from its file in the cache (downloaded first when it is not
        there) into new memory.

        Raises:
            FormatError: the page does not match its checksum (naming it).
            StorageError, DatasetNotFoundError: the page cannot be had.
        """
        if self.reader.page_state[page] == PAGE_CORRUPT:
            raise FormatError(self.reader.page_report(page, f" in {CHECKSUM_ATTEMPTS} downloads"))
        def read(fd: int) -> np.ndarray:
            data = np.empty(end - start, np.uint8)
            native.pread(fd, data, 0)
            return data

        return self.take(page, read)

    def page_store(self, reader: Any, os_cache: bool, pool_pages: int) -> PageStore:
        """The pages mapped in place from the cache, kept mapped between
        epochs with ``os_cache``, else up to ``pool_pages`` of them."""
        return RemotePages(reader, os_cache, pool_pages)

    def verify(self) -> None:
        """Nothing to compare: each page is checked when it arrives (a
        loader's store checks its mapped pages, :meth:`RemotePages.verify`)."""

    def close(self) -> None:
        """Let the shards' tables go (the cache stays for other readers)."""
        for shard in self.reader.shards:
            shard.close()

    def take(self, page: int, take: Callable[[int], np.ndarray]) -> np.ndarray:
        """``take(fd)`` of the page's file in the page cache (downloaded into
        it first when it is not there), once its bytes (what ``take`` gives)
        are known to match the page's checksum.  ``take`` is called only
        with a file of the page's length.

        A page found in the cache is checked the first time this process
        reads it.  One that fails was damaged in the cache (its disk, or a
        process writing into the folder), since only checked bytes are put
        there: it is removed, a :class:`CacheWarning` says so, and the page
        is downloaded again.

        Raises:
            FormatError: every download of the page fails its checksum: it
                is corrupt in the store (recorded in ``page_state``).
            StorageError: the cache's copy is damaged again right after it
                was replaced, or the cache folder refuses the page.
        """
        reader = self.reader
        shard, local = reader.shard_of(page)
        key = self.keys[shard]
        for _ in range(2):
            fd, downloaded = self.cache.open(key, local, lambda: self._download(page))
            try:
                if os.fstat(fd).st_size == reader.page_lengths[page]:  # else cut short in the cache
                    data = take(fd)
                    if downloaded or reader.page_state[page] == PAGE_GOOD or self._matches(page, data):
                        return data
                self.cache.discard(key, local, fd)
            finally:
                os.close(fd)  # what take() mapped stays readable, even once the page is evicted from the cache
            warnings.warn(f"{self.cache.path(key, local)}: the page cache's copy of {self._named(shard, local)} "
                          f"does not match its checksum: it was damaged in the cache (its disk, or a process "
                          f"writing into the cache folder), not in the store; it was removed and is downloaded "
                          f"again", CacheWarning, stacklevel=2)
        raise StorageError(f"{self.cache.path(key, local)}: the page cache's copy of {self._named(shard, local)} "
                           f"was damaged again right after it was replaced: something damages the cache folder "
                           f"{self.cache.root} (its disk, or another process); samples in it: "
                           f"{short_list(reader.page_samples(page))}")

    def _named(self, shard: int, local: int) -> str:
        return f"data page {local} of shard {self.reader.manifest.shards[shard].name} " \
               f"({self.reader.shards[shard].path})"

    def _matches(self, page: int, data: Any) -> bool:
        """Whether ``data`` matches page ``page``'s checksum, recorded as
        good (and checked) when it does; a mismatch records nothing: where
        the bytes came from decides what it means."""
        reader = self.reader
        if reader.page_checksums is not None and L.crc32(data) != reader.page_checksums[page]:
            return False
        reader.page_state[page] = PAGE_GOOD
        reader.pages_checked += 1
        return True

    def _download(self, page: int) -> memoryview:
        """The page's bytes by a ranged GET, checked against its checksum
        (downloaded again when they do not match, in case the transfer
        garbled them)."""
        reader = self.reader
        shard, local = reader.shard_of(page)
        name = reader.manifest.shards[shard].name
        start, end = reader.shards[shard].page_span(local)
        for _ in range(CHECKSUM_ATTEMPTS):
            try:
                data = self.location.read(name, start, end)
            except (StorageError, DatasetNotFoundError) as exc:
                raise type(exc)(f"{exc}; needed for data page {local} of shard {name}, samples "
                                f"{short_list(reader.page_samples(page))}") from None
            if len(data) != end - start:
                raise FormatError(f"{reader.shards[shard].path}: data page {local} came back with {len(data):,} "
                                  f"bytes, not {end - start:,}: the shard was truncated or replaced")
            if self._matches(page, data):
                return data
        reader.page_state[page] = PAGE_CORRUPT
        raise FormatError(reader.page_report(page, f" in {CHECKSUM_ATTEMPTS} downloads"))
