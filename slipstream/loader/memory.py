"""Memory managers: how the bytes of a batch's samples reach the decoders.

:class:`MappedMemory` (``os_cache=True``) hands the decoders the memory-mapped
file: the operating system's page cache holds the data once for every
process on the machine, and reads happen on first touch.

:class:`PagePool` (``os_cache=False``) reads exactly the pages upcoming
batches need, with the native ``pread`` in background threads, into a fixed
pool of page slots, and frees each page after the last batch that needs it.
Its memory is the pool, whatever the dataset's size.
"""

from __future__ import annotations

import bisect
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from slipstream import native
from slipstream.errors import ArgumentError


class MappedMemory:
    """``os_cache=True``: the decoders read the mapped file directly."""

    def __init__(self, reader: Any) -> None:
        self.storage = reader.storage

    def start_epoch(self, batches: list[np.ndarray], source: Any) -> None:
        """Nothing to plan: every page is already mapped."""

    def prepare(self, batch: int) -> None:
        """Nothing to read: the operating system pages the mapping in on demand."""

    def release(self, batch: int) -> None:
        """Nothing to free: the operating system's cache keeps or drops pages."""

    def close(self) -> None:
        """Nothing to close: the reader owns the mapping."""


class PagePool:
    """``os_cache=False``: a bounded pool of page slots filled ahead of use.

    The unit of reading is a value's run of pages: one page for a value that
    fits in a page (several values share it), consecutive pages for a larger
    one.  Before a batch runs, its units are read (if they are not already
    in the pool); while it runs, the units of the next batches are read in
    background threads into the free slots.  A unit stays in the pool while
    later batches need it; when a batch needs a slot and none is free, the
    unit whose next use is farthest away is evicted (and read again when its
    turn comes).  With ``"quasi_random"`` order, consecutive batches share
    their pages, so a pool a few windows large reads every page about once
    per epoch; a ``"random"`` order over a pool smaller than the dataset
    reads pages several times.

    Attributes:
        capacity: slots in the pool.
        in_use, peak_in_use: slots holding pages now, and the most ever.
        pages_read: pages read so far.
    """

    def __init__(self, reader: Any, capacity: int, io_threads: int = 4, lookahead: int = 4) -> None:
        if capacity < 1:
            raise ArgumentError(f"the page pool needs at least one slot, got {capacity}")
        self.reader = reader
        self.page_size = reader.page_size
        self.capacity = capacity
        self.lookahead = lookahead
        self.storage = np.zeros(capacity * self.page_size, np.uint8)
        self._fd = os.open(reader.path, os.O_RDONLY)
        self._io = ThreadPoolExecutor(max(1, io_threads), thread_name_prefix="slipstream-pages")
        self._free = np.ones(capacity, bool)
        self.in_use = self.peak_in_use = self.pages_read = 0
        self._loaded: dict[tuple[int, int], tuple[int, Future]] = {}  # unit -> (first slot, its read)
        self._page_slot = np.full(max(1, reader.page_count), -1, np.int64)  # single-page units' slots
        self._plan: list[list[tuple[int, int]]] = []

    # ---------------------------------------------------------------- planning

    def start_epoch(self, batches: list[np.ndarray], source: Any) -> None:
        """Plan the epoch: each batch's units and where its values lie in them."""
        self._source, self._batches = source, batches
        self._plan, self._locations = [], []
        self._uses: dict[tuple[int, int], list[int]] = {}
        data_offset, ps = self.reader.data_offset, self.page_size
        for b, indices in enumerate(batches):
            units: set[tuple[int, int]] = set()
            locations = {}
            for field in source.offset_fields:
                records = self.reader.metadata[field][indices]
                rel = records["offset"].astype(np.int64) - data_offset
                size = records["size"].astype(np.int64)
                first = rel // ps
                last = np.maximum(first, (rel + np.maximum(size, 1) - 1) // ps)
                locations[field] = (first, last, rel)
                units.update(zip(first.tolist(), last.tolist()))
            need = sum(last - first + 1 for first, last in units)
            if need > self.capacity:
                raise ArgumentError(f"batch {b} needs {need} pages but the page pool holds {self.capacity}: "
                                    f"use a larger pool (pool_pages=) or a smaller batch")
            self._plan.append(sorted(units))
            self._locations.append(locations)
            for unit in units:
                self._uses.setdefault(unit, []).append(b)
        self._ahead = [(b, unit) for b, plan in enumerate(self._plan) for unit in plan]
        self._next_ahead = 0

    def _next_use(self, unit: tuple[int, int], after: int) -> int:
        uses = self._uses.get(unit, [])
        k = bisect.bisect_right(uses, after)
        return uses[k] if k < len(uses) else -1

    # ---------------------------------------------------------------- per batch

    def prepare(self, batch: int) -> None:
        """Make ``batch``'s units present, point the decoders' offsets at
        them, start reading ahead, and wait for ``batch``'s reads."""
        needed = set(self._plan[batch])
        for unit in self._plan[batch]:
            if unit not in self._loaded:
                self._load(unit, self._slot_evicting(unit, batch, needed))
        ps = self.page_size
        for field, (first, last, rel) in self._locations[batch].items():
            starts = self._page_slot[first]  # values within one page: a table lookup
            for k in np.flatnonzero(first != last).tolist():  # values over several pages (rare)
                starts[k] = self._loaded[(int(first[k]), int(last[k]))][0]
            self._source.offsets(field)[self._batches[batch]] = starts * ps + (rel - first * ps)
        self._read_ahead(batch)
        for unit in self._plan[batch]:
            self._loaded[unit][1].result()  # raises the read's error, if any

    def release(self, batch: int) -> None:
        """Free the units of ``batch`` that no later batch needs."""
        for unit in self._plan[batch]:
            if self._next_use(unit, batch) < 0 and unit in self._loaded:
                self._evict(unit)
        self._read_ahead(batch)

    def _read_ahead(self, batch: int) -> None:
        """Read the units of the next ``lookahead`` batches into free slots."""
        while self._next_ahead < len(self._ahead):
            b, unit = self._ahead[self._next_ahead]
            if b > batch + self.lookahead:
                return
            if b > batch and unit not in self._loaded:
                slot = self._find_free(unit[1] - unit[0] + 1)
                if slot is None:
                    return
                self._load(unit, slot)
            self._next_ahead += 1

    def _slot_evicting(self, unit: tuple[int, int], batch: int, keep: set[tuple[int, int]]) -> int:
        """A free run of slots for ``unit``, evicting the units needed
        farthest in the future (never ``keep``) until there is one."""
        count = unit[1] - unit[0] + 1
        slot = self._find_free(count)
        while slot is None:
            victims = [u for u in self._loaded if u not in keep]
            if not victims:
                raise ArgumentError(f"the page pool ({self.capacity} slots) cannot hold batch {batch}'s pages "
                                    f"in consecutive slots; use a larger pool (pool_pages=)")
            never = [u for u in victims if self._next_use(u, batch) < 0]
            victim = never[0] if never else max(victims, key=lambda u: self._next_use(u, batch))
            self._evict(victim)
            slot = self._find_free(count)
        return slot

    def _load(self, unit: tuple[int, int], slot: int) -> None:
        count = unit[1] - unit[0] + 1
        self._free[slot:slot + count] = False
        self.in_use += count
        self.peak_in_use = max(self.peak_in_use, self.in_use)
        self.pages_read += count
        self._loaded[unit] = (slot, self._io.submit(self._read, unit, slot))
        if count == 1:
            self._page_slot[unit[0]] = slot

    def _evict(self, unit: tuple[int, int]) -> None:
        slot, future = self._loaded.pop(unit)
        future.cancel() or future.exception()  # a read still running must not land in a reused slot
        count = unit[1] - unit[0] + 1
        if count == 1:
            self._page_slot[unit[0]] = -1
        self._free[slot:slot + count] = True
        self.in_use -= count

    def _find_free(self, count: int) -> int | None:
        if count == 1:
            free = np.flatnonzero(self._free)
            return int(free[0]) if free.size else None
        run = np.convolve(self._free.astype(np.int32), np.ones(count, np.int32), "valid")
        starts = np.flatnonzero(run == count)
        return int(starts[0]) if starts.size else None

    def _read(self, unit: tuple[int, int], slot: int) -> None:
        ps = self.page_size
        start = unit[0] * ps
        length = min((unit[1] - unit[0] + 1) * ps, self.reader.data_size - start)
        native.pread(self._fd, self.storage[slot * ps: slot * ps + length], self.reader.data_offset + start)

    def close(self) -> None:
        """Stop the read-ahead threads, close the file and free the pool."""
        self._io.shutdown(wait=True, cancel_futures=True)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
