"""The pages of sharded datasets: :class:`ShardFiles`, the source of local
shards (a :class:`~slipstream.format.pagestore.PageSource`; remote shards'
is :class:`~slipstream.format.cached_pages.CachedPages`), and the page stores
(:class:`~slipstream.format.pagestore.PageStore`) that put every shard's
pages in one :class:`~slipstream.format.address_range.AddressRange`, at
their offsets in the dataset's numbering, read in place by the decoders.

- :class:`LocalShards`: shard files on this machine.  With the operating
  system's cache (``os_cache=True``), each shard's data pages are mapped
  once, when the store opens, as a single file's are; without it, each page
  is read (``pread``) into fresh memory at its place when it is fetched, and
  let go when no later batch reads it: the store's memory is its capacity.
- :class:`RemotePages`: shards in object storage.  A fetched page is
  downloaded into the node-local page cache (unless it is there already)
  and the cached file is mapped at its place.  Released pages stay mapped
  for the next epoch, as a local file's do (with ``os_cache``; up to
  :data:`MAPPED_PAGES`, else up to the pool's size), or are let go at once
  when the cache has a limit (an evicted page's disk blocks are freed when
  it is unmapped).  Once every page is mapped and checked, the store is
  resident: a later epoch fetches nothing, as from a local file.

Both check each page against its checksum the first time this process
fetches it, in the fetching thread.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError, FormatError, StorageError
from slipstream.format.address_range import OS_PAGE, AddressRange
from slipstream.format.file_pages import CHECKS_AHEAD, READ_THREADS, READS_AHEAD, read_page
from slipstream.files import open_regular
from slipstream.format.pagestore import PageStore
from slipstream.format.reader import PAGE_CORRUPT, PAGE_UNCHECKED

IN_FLIGHT_BYTES = 64 << 20
"""Bytes of pages a remote store downloads at once, at most (and never more
than ``Remote.requests`` pages): enough to keep a link of 1 GB/s busy at
50 ms per request (bandwidth times latency), and few enough that the pages
the next batch needs, fetched first, do not share the link with many
fetched far ahead."""

MAPPED_PAGES = 1024
"""Released remote pages a store keeps mapped for the next epoch with
``os_cache`` (the least recently released go first): 8 GiB of the default
8 MiB pages, whose page tables take 16 MiB."""


class ShardFiles:
    """The pages of a sharded dataset's local shard files, each mapped by
    its shard's own reader.

    Args:
        reader: the dataset (a :class:`~slipstream.format.sharded.ShardedReader`,
            which this module does not import).
    """

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.reads_at_once = min(8, os.cpu_count() or 1)

    def read(self, page: int, start: int, end: int) -> np.ndarray:
        """The page's bytes, in its shard's mapping."""
        shard, local = self.reader.shard_of(page)
        shard_reader = self.reader.shards[shard]
        return shard_reader.pages.read(local, *shard_reader.page_span(local))

    def page_store(self, reader: Any, os_cache: bool, pool_pages: int) -> PageStore:
        """Every shard mapped in one range (``os_cache``), or a pool of ``pool_pages`` pages."""
        return LocalShards(reader, os_cache, pool_pages)

    def verify(self) -> None:
        """Check that no shard changed since it was opened (naming the one that did)."""
        for shard in self.reader.shards:
            shard.verify()

    def close(self) -> None:
        """Unmap every shard."""
        for shard in self.reader.shards:
            shard.close()


class _ShardPages:
    """What both stores share: the range, each page's place and length, and
    one future per page fetched and not let go.  ``reader`` is the
    :class:`~slipstream.format.sharded.ShardedReader` that makes the store
    (so this module does not import it)."""

    def __init__(self, reader: Any, pool: ThreadPoolExecutor) -> None:
        self.reader = reader
        self.page_size = reader.page_size
        if self.page_size % OS_PAGE:
            raise ArgumentError(f"{reader.path}: its pages of {self.page_size:,} bytes are not whole pages of this "
                                f"operating system ({OS_PAGE:,} bytes), so they cannot be mapped in place: write the "
                                f"dataset with page_size a multiple of {OS_PAGE:,}")
        self.range = AddressRange(reader.page_count * self.page_size)
        self.storage = self.range.storage
        self._lengths = reader.page_lengths
        self._pool = pool
        self._futures: dict[int, Future[None]] = {}
        self._lock = threading.Lock()

    def _place(self, page: int) -> tuple[int, int]:
        return page * self.page_size, int(self._lengths[page])

    def plan(self, uses: Mapping[int, Sequence[int]]) -> None:
        """Nothing to plan: pages are fetched as the stager asks."""

    def advance(self, now: int) -> None:
        """Nothing to follow."""

    def reread(self, pages: Callable[[], int]) -> None:
        """Nothing to count."""

    def fetch(self, page: int) -> Future[None]:
        with self._lock:
            future = self._futures.get(page)
            # A failed fetch is tried again (the store or the file may be back), unless
            # the page is known corrupt: its file, or every download of it, fails its checksum.
            if future is None or (future.done() and future.exception() is not None
                                  and self.reader.page_state[page] != PAGE_CORRUPT):
                future = self._futures[page] = self._pool.submit(self._bring, page)
            return future

    def _bring(self, page: int) -> None:
        raise NotImplementedError


class LocalShards(_ShardPages):
    """The pages of local shard files, in place (see the module docstring).

    Args:
        reader: the dataset.
        os_cache: map every shard's pages now (the operating system caches
            them), or read each page into memory when it is fetched.
        pool_pages: without ``os_cache``, the pages held at once.
    """

    def __init__(self, reader: Any, os_cache: bool, pool_pages: int) -> None:
        mapped = os_cache and all(s.data_offset % OS_PAGE == 0 for s in reader.shards)
        threads = (os.cpu_count() or 1) if mapped else READ_THREADS
        super().__init__(reader, ThreadPoolExecutor(threads, thread_name_prefix="slipstream-pages"))
        self.mapped = self.resident = mapped
        self.capacity = None if mapped else pool_pages
        self.pages_ahead = CHECKS_AHEAD if mapped else READS_AHEAD
        self._paths = [str(s.path) for s in reader.shards]
        if self.mapped:
            for k, shard in enumerate(reader.shards):
                if shard.data_size:
                    fd = open_regular(shard.path, error=FormatError)
                    try:
                        self.range.map_file(int(reader.page_base[k]) * self.page_size, shard.data_size, fd,
                                            shard.data_offset)
                    finally:
                        os.close(fd)

    def _bring(self, page: int) -> None:
        start, length = self._place(page)
        if self.mapped:
            data = self.storage[start: start + length]
        else:
            shard, local = self.reader.shard_of(page)
            fd = open_regular(self._paths[shard], error=FormatError)
            try:
                data = read_page(self.range, start, length, fd,
                                 self.reader.shards[shard].data_offset + local * self.page_size, self.reader,
                                 f"{self._paths[shard]}: data page {local}")
            finally:
                os.close(fd)
        if not self.reader.check_page(page, data):
            raise FormatError(self.reader.page_report(page))

    def release(self, pages: Iterable[int]) -> None:
        """Mapped pages stay (the operating system's cache decides); read ones are let go."""
        if self.mapped:
            return
        with self._lock:
            for page in pages:
                if self._futures.pop(page, None) is not None:
                    self.range.release(*self._place(page))

    def verify(self) -> None:
        """Check that no shard changed since it was opened (naming the one
        that did), and that no mapped page was lost to truncation."""
        self.reader.verify()
        if self.range.faults():
            raise FormatError(f"{self.reader.path}: a shard file was truncated while it was read (pages of it read "
                              f"as zeros)")

    def close(self) -> None:
        """Stop the store's threads and let go of the shards' pages (and the files they hold)."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            self._futures.clear()
            self.range.release(0, self.range.length)


class RemotePages(_ShardPages):
    """The pages of shards in object storage, mapped in place from the
    node-local page cache (see the module docstring).

    Args:
        reader: the dataset (its :attr:`cached_pages` fetch the pages).
        os_cache: keep released pages mapped for the next epoch (up to
            :data:`MAPPED_PAGES`), as the operating system's cache of a local
            file would keep them; else keep up to ``pool_pages``.  None are
            kept when the cache has a limit.
        pool_pages: without ``os_cache``, released pages kept mapped.
    """

    def __init__(self, reader: Any, os_cache: bool, pool_pages: int) -> None:
        downloads = max(1, min(reader.remote.requests, IN_FLIGHT_BYTES // reader.page_size))
        super().__init__(reader, ThreadPoolExecutor(downloads, thread_name_prefix="slipstream-pages"))
        self._pages = reader.cached_pages
        cache = self._pages.cache
        self.capacity = None
        self.pages_ahead = 2 * downloads
        if cache.limit is not None:
            # Pages fetched ahead must still be in the cache when their batch comes.
            self.pages_ahead = max(1, min(self.pages_ahead, cache.limit // self.page_size // 2))
        self._keep = 0 if cache.limit is not None else MAPPED_PAGES if os_cache else max(1, pool_pages)
        self._kept: collections.OrderedDict[int, None] = collections.OrderedDict()
        self._now = 0
        self._faults = 0  # of the range's guard, when last looked at

    @property
    def resident(self) -> bool:
        """Whether every page is mapped, checked, and kept until the store
        closes: the dataset's pages fit among those kept, and each was
        fetched once."""
        count = self.reader.page_count
        with self._lock:
            return self._keep >= count and len(self._futures) == count and all(
                f.done() and f.exception() is None for f in self._futures.values())

    def plan(self, uses: Mapping[int, Sequence[int]]) -> None:
        """Remember when each page is needed: a full cache removes the pages needed farthest ahead."""
        self._now = 0
        self._pages.follow(uses, lambda: self._now)

    def advance(self, now: int) -> None:
        self._now = now

    def fetch(self, page: int) -> Future[None]:
        with self._lock:
            if self._kept.pop(page, None) is not None:  # read again from its mapping: not to be let go
                self._pages.cache.note_hits(1)
        return super().fetch(page)

    def reread(self, pages: Callable[[], int]) -> None:
        """Count the epoch's pages, read from their mappings, as hits of the page cache."""
        self._pages.cache.note_hits(pages())

    def _bring(self, page: int) -> None:
        start, length = self._place(page)

        def mapped(fd: int) -> np.ndarray:
            # MAP_POPULATE: the page tables are filled here, in the fetching thread, rather than by a
            # fault per 4 KiB in the decoders.
            self.range.map_file(start, length, fd, 0, populate=True)
            return self.storage[start: start + length]

        try:
            self._pages.take(page, mapped)
        except FormatError:
            if self.reader.page_state[page] == PAGE_CORRUPT:
                self.range.map_zeros(start, length)  # no decoder is handed its samples, but some read anyway
            raise

    def release(self, pages: Iterable[int]) -> None:
        """Keep the pages mapped for the next epoch, up to a bound (none when
        the cache has a limit: an evicted page's disk space comes back when
        it is unmapped)."""
        with self._lock:
            for page in pages:
                future = self._futures.get(page)
                if future is not None and future.done() and future.exception() is None:
                    self._kept[page] = None  # a page that failed keeps its future: a corrupt one is not fetched again
            while len(self._kept) > self._keep:
                page, _ = self._kept.popitem(last=False)
                del self._futures[page]
                self.range.release(*self._place(page))

    def verify(self) -> None:
        """Check that no mapped page was lost to truncation of its file in
        the cache.  Pages found cut short are let go and checked again when
        next fetched (their copy is then replaced).

        Raises:
            StorageError: naming the damaged page files, or the cache folder.
        """
        faults = self.range.faults()
        if faults == self._faults:
            return
        self._faults = faults
        reader, damaged = self.reader, []
        with self._lock:
            for page, future in list(self._futures.items()):
                path = self._pages.path(page)
                try:
                    short = os.stat(path).st_size < self._lengths[page]
                except OSError:
                    continue  # evicted: what is mapped is the unlinked file, which no one can reach to cut
                if short and future.done() and future.exception() is None:
                    damaged.append(str(path))
                    del self._futures[page]
                    self._kept.pop(page, None)
                    self.range.release(*self._place(page))
                    reader.page_state[page] = PAGE_UNCHECKED
        where = ", ".join(damaged[:3]) + (f" and {len(damaged) - 3} more" if len(damaged) > 3 else "") \
            if damaged else f"a page file in {self._pages.cache.root}"
        raise StorageError(f"{where}: truncated in the page cache while it was read (its bytes read as zeros): "
                           f"another process damages the cache folder {self._pages.cache.root}; the page is "
                           f"fetched again when next read")

    def close(self) -> None:
        """Stop the store's download threads and let every page go."""
        self._pool.shutdown(wait=True, cancel_futures=True)
        with self._lock:
            futures, self._futures = self._futures, {}
            self._kept.clear()
        for page, future in futures.items():
            try:
                future.result()
            except Exception:
                continue  # nothing mapped there, or zeros
            self.range.release(*self._place(page))

