"""The memory manager of sharded and remote datasets: the values of upcoming
batches are staged, ahead of time, into a bounded buffer.

A sharded dataset has no single mapped file for the decoders to read, so
before a batch runs, the bytes of its samples' values are copied into a
ring buffer (``storage``), and the decoders' offsets are pointed at them.
Two kinds of work run ahead of the batches, in background threads:

- page fetches (:meth:`ShardedReader.fetch`): pages of upcoming batches
  are downloaded into the node-local page cache, many requests at once,
  far enough ahead to hide the store's latency (a remote dataset), or
  checked against their checksums (a local one);
- staging: once a batch's pages are ready, its values are copied into its
  area of the ring.

Memory is the ring (``pool_bytes``) plus the pages in flight, whatever the
dataset's size; the disk cache holds the pages, bounded by its limit.  The
order's batches tell which pages are needed when, so the page cache, when
full, removes the pages needed farthest in the future.
"""

from __future__ import annotations

import collections
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError, FormatError
from slipstream.format.layout import ALLOCATION_ALIGNMENT
from slipstream.format.reader import PAGE_CORRUPT
from slipstream.loader.memory import covered_pages, mark_corrupt, value_pages


class StagedMemory:
    """Stages each batch's values into a ring buffer ahead of use.

    Args:
        reader: a :class:`slipstream.format.sharded.ShardedReader`.
        pool_bytes: the ring's size; a batch's values must fit in it.
        batches_ahead: batches staged ahead of the one running.
        pages_ahead: pages fetched ahead of the running batch's (default:
            twice the reader's requests in flight for a remote dataset).

    Attributes:
        storage: the ring buffer the decoders read.
        pages_fetched: page fetches started (each page once per epoch at most).
    """

    def __init__(self, reader: Any, pool_bytes: int, batches_ahead: int = 4, pages_ahead: int | None = None) -> None:
        self.reader = reader
        self.storage = np.zeros(max(ALLOCATION_ALIGNMENT, pool_bytes), np.uint8)
        self.batches_ahead = batches_ahead
        requests = reader.remote.requests if reader.is_remote else 8
        self.pages_ahead = pages_ahead if pages_ahead is not None else 2 * requests
        if reader.cache is not None and reader.cache.limit is not None:
            # Pages fetched ahead must still be in the cache when their batch comes.
            self.pages_ahead = max(1, min(self.pages_ahead, reader.cache.limit // reader.page_size // 2))
        self._stager = ThreadPoolExecutor(2, thread_name_prefix="slipstream-staging")
        self.pages_fetched = 0
        self._batches: list[np.ndarray] = []

    # ---------------------------------------------------------------- planning

    def start_epoch(self, batches: list[np.ndarray], source: Any) -> None:
        """Plan the epoch: each batch's values and pages, each page's uses."""
        self._cancel()
        self._source, self._batches = source, batches
        self._values: list[dict[str, tuple[np.ndarray, ...]]] = []
        self._pages: list[list[int]] = []
        self._need: list[int] = []
        for b, indices in enumerate(batches):
            fields = {}
            total = 0
            for field in source.offset_fields:
                records = self.reader.metadata[field][indices]
                offsets, sizes = records["offset"].astype(np.int64), records["size"].astype(np.int64)
                fields[field] = (offsets, sizes)
                total += int(np.sum(-(-sizes // ALLOCATION_ALIGNMENT) * ALLOCATION_ALIGNMENT))
            if total > self.storage.size:
                raise ArgumentError(f"batch {b} has {total:,} bytes of values but the staging buffer holds "
                                    f"{self.storage.size:,}: pass a larger pool "
                                    f"(memory=slipstream.Memory(pool_pages=...)), or a smaller batch")
            self._values.append(fields)
            self._pages.append(covered_pages({f: value_pages(self.reader, f, indices) for f in fields}))
            self._need.append(total)
        self._page_order = [(b, p) for b, pages in enumerate(self._pages) for p in pages]
        self._first_entry = np.concatenate([[0], np.cumsum([len(p) for p in self._pages])]).tolist()
        uses: dict[int, list[int]] = collections.defaultdict(list)
        for b, page in self._page_order:
            uses[page].append(b)
        self._uses = dict(uses)
        self._requested: set[int] = set()
        self._staged: dict[int, Future] = {}
        self._ring: collections.deque[tuple[int, int, int]] = collections.deque()  # (batch, start, end)
        self._next_stage = 0
        self.reader.set_plan(self._uses)

    # ---------------------------------------------------------------- per batch

    def prepare(self, batch: int) -> None:
        """Fetch and stage ahead, wait until ``batch`` is staged, point the
        decoders' offsets at its values, and mark its samples in corrupt
        pages (pages that fail their checksum in the shard file, or in every
        download of them): the loader's ``on_error`` decides about those.

        Raises:
            FormatError, StorageError, DatasetNotFoundError: a page of the
                batch cannot be had (the store fails, the shard was
                truncated or replaced); the message names the URL or file,
                the shard, the page and its samples.
        """
        self.reader.set_time(batch)
        self._fetch_ahead(batch)
        self._stage_ahead(batch)
        if batch not in self._staged:
            self._stage(batch, wait_for_room=True)
        staged = self._staged.pop(batch).result()
        indices = self._batches[batch]
        for field, offsets in staged.items():
            self._source.offsets(field)[indices] = offsets
        mark_corrupt(self.reader, self._source, indices,
                     {f: value_pages(self.reader, f, indices) for f in self._values[batch]})

    def release(self, batch: int) -> None:
        """Free ``batch``'s area of the ring; stage and fetch further ahead."""
        while self._ring and self._ring[0][0] <= batch:
            self._ring.popleft()
        self._fetch_ahead(batch + 1)
        self._stage_ahead(batch + 1)

    def _fetch_ahead(self, batch: int) -> None:
        """Start fetching the pages of ``batch`` and of the batches after
        it, in the order of their first use, up to ``pages_ahead`` pages
        beyond ``batch``'s own."""
        if batch >= len(self._batches):
            return
        budget = len(self._pages[batch]) + self.pages_ahead
        seen: set[int] = set()
        order = self._page_order
        for k in range(self._first_entry[batch], len(order)):
            page = order[k][1]
            if page in seen:
                continue
            if len(seen) >= budget:
                break
            seen.add(page)
            self._request(page)

    def _request(self, page: int) -> None:
        if page not in self._requested:
            self._requested.add(page)
            self.reader.fetch(page)
            self.pages_fetched += 1

    def _stage_ahead(self, batch: int) -> None:
        while self._next_stage < min(len(self._batches), batch + self.batches_ahead + 1):
            if self._next_stage < batch:
                self._next_stage = batch
                continue
            if not self._stage(self._next_stage, wait_for_room=False):
                return

    def _stage(self, batch: int, wait_for_room: bool) -> bool:
        """Reserve ``batch``'s area and start copying its values there."""
        if batch in self._staged:
            return True
        start = self._reserve(self._need[batch])
        if start is None:
            if not wait_for_room:
                return False
            raise ArgumentError(f"the staging buffer ({self.storage.size:,} bytes) cannot hold batch {batch}'s "
                                f"values: pass a larger pool (memory=slipstream.Memory(pool_pages=...))")
        self._ring.append((batch, start, start + self._need[batch]))
        for page in self._pages[batch]:
            self._request(page)
        self._staged[batch] = self._stager.submit(self._copy, batch, start)
        self._next_stage = max(self._next_stage, batch + 1)
        return True

    def _reserve(self, need: int) -> int | None:
        """The start of a free run of ``need`` bytes after the live areas."""
        size = self.storage.size
        if not self._ring:
            return 0 if need <= size else None
        tail = self._ring[0][1]
        head = self._ring[-1][2]
        if head >= tail:
            if head + need <= size:
                return head
            return 0 if need <= tail else None
        return head if head + need <= tail else None

    def _copy(self, batch: int, start: int) -> dict[str, np.ndarray]:
        """Wait for the batch's pages, then copy its values to ``start`` on."""
        corrupt = set()
        for page in self._pages[batch]:
            try:
                self.reader.fetch(page).result()
            except FormatError:
                if self.reader.page_state[page] != PAGE_CORRUPT:
                    raise
                # A page that fails its checksum: its samples are marked failed
                # (on_error decides), the rest of the batch goes on.
                corrupt.add(page)
        staged = {}
        pos = start
        ps, storage, view_of = self.reader.page_size, self.storage, self.reader.page_view
        for field, (offsets, sizes) in self._values[batch].items():
            padded = -(-sizes // ALLOCATION_ALIGNMENT) * ALLOCATION_ALIGNMENT
            starts = pos + np.concatenate([[0], np.cumsum(padded)[:-1]]) if sizes.size else sizes
            pages, within = np.divmod(offsets, ps)
            for page, at, size, to in zip(pages.tolist(), within.tolist(), sizes.tolist(), starts.tolist()):
                if corrupt and not corrupt.isdisjoint(range(page, page + (at + max(size, 1) - 1) // ps + 1)):
                    continue  # not copied: its sample is marked failed in prepare()
                if at + size <= ps:  # within one page: one slice copy
                    storage[to: to + size] = view_of(page)[at: at + size]
                elif size:
                    self.reader.copy(page * ps + at, storage[to: to + size])
            staged[field] = starts.astype(np.uint64)
            pos += int(padded.sum())
        return staged

    def _cancel(self) -> None:
        """Stop the staging of an epoch left early, and wait for copies
        already running: the next epoch reuses their areas of the ring."""
        staged = getattr(self, "_staged", {})
        for future in staged.values():
            future.cancel()
        for future in staged.values():
            if not future.cancelled():
                try:
                    future.result()
                except Exception:
                    pass  # a page that could not be had: the batch was never handed out
        staged.clear()

    def close(self) -> None:
        """Stop the staging threads (the reader owns its downloads)."""
        self._cancel()
        self._stager.shutdown(wait=True, cancel_futures=True)
