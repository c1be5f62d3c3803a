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

import os
from collections import deque
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
        pass

    def prepare(self, batch: int) -> None:
        pass

    def release(self, batch: int) -> None:
        pass

    def close(self) -> None:
        pass


class PagePool:
    """``os_cache=False``: a bounded pool of page slots filled ahead of use.

    The unit of reading is a value's run of pages: one page for a value that
    fits in a page (several values share it), consecutive pages for a larger
    one.  Units are read in the order batches need them, as far ahead as free
    slots allow; a batch waits only for its own units.  After a batch has run,
    the units no later batch needs are freed.

    Attributes:
        capacity: slots in the pool.
        in_use, peak_in_use: slots holding pages now, and the most ever.
        pages_read: pages read so far.
    """

    def __init__(self, reader: Any, capacity: int, io_threads: int = 4) -> None:
        if capacity < 1:
            raise ArgumentError(f"the page pool needs at least one slot, got {capacity}")
        self.reader = reader
        self.page_size = reader.page_size
        self.capacity = capacity
        self.storage = np.zeros(capacity * self.page_size, np.uint8)
        self._fd = os.open(reader.path, os.O_RDONLY)
        self._io = ThreadPoolExecutor(max(1, io_threads), thread_name_prefix="slipstream-pages")
        self._free = np.ones(capacity, bool)
        self.in_use = self.peak_in_use = self.pages_read = 0
        self._reset()

    def _reset(self) -> None:
        self._loaded: dict[tuple[int, int], tuple[int, Future]] = {}  # unit -> (first slot, read)
        self._plan: list[list[tuple[int, int]]] = []
        self._last_use: dict[tuple[int, int], int] = {}
        self._queue: deque[tuple[int, tuple[int, int]]] = deque()
        self._locations: list[dict[str, tuple[np.ndarray, np.ndarray]]] = []

    # ---------------------------------------------------------------- planning

    def start_epoch(self, batches: list[np.ndarray], source: Any) -> None:
        """Plan the epoch: the units of every batch and each unit's last use."""
        self._wait_all()
        self._free[:] = True
        self.in_use = 0
        self._reset()
        self._source = source
        self._batches = batches
        data_offset, ps = self.reader.data_offset, self.page_size
        fields = source.offset_fields
        for b, indices in enumerate(batches):
            units: set[tuple[int, int]] = set()
            locations = {}
            for field in fields:
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
                                    f"use a larger pool or a smaller batch")
            plan = sorted(units)
            self._plan.append(plan)
            self._locations.append(locations)
            for unit in plan:
                self._last_use[unit] = b
                self._queue.append((b, unit))

    # ---------------------------------------------------------------- per batch

    def prepare(self, batch: int) -> None:
        """Read what ``batch`` needs (and prefetch ahead), point the decoders'
        offsets at it, and wait for its reads."""
        self._prefetch(until_batch=batch)
        ps = self.page_size
        for field, (first, last, rel) in self._locations[batch].items():
            starts = np.array([self._loaded[(f, l)][0] for f, l in zip(first.tolist(), last.tolist())], np.int64)
            self._source.offsets(field)[self._batches[batch]] = starts * ps + (rel - first * ps)
        for unit in self._plan[batch]:
            self._loaded[unit][1].result()  # raises the read's error, if any
        self._prefetch(until_batch=None)

    def release(self, batch: int) -> None:
        """Free the units no batch after ``batch`` needs."""
        for unit in self._plan[batch]:
            if self._last_use.get(unit) == batch and unit in self._loaded:
                slot, future = self._loaded.pop(unit)
                future.result()
                count = unit[1] - unit[0] + 1
                self._free[slot:slot + count] = True
                self.in_use -= count
        self._prefetch(until_batch=None)

    def _prefetch(self, until_batch: int | None) -> None:
        """Start reads in plan order while slots are free; with
        ``until_batch``, every unit of that batch must be started."""
        while self._queue:
            b, unit = self._queue[0]
            if unit in self._loaded or self._last_use.get(unit, -1) < b:
                self._queue.popleft()
                continue
            count = unit[1] - unit[0] + 1
            slot = self._find_free(count)
            if slot is None:
                if until_batch is not None and b <= until_batch:
                    raise ArgumentError(f"the page pool ({self.capacity} slots) cannot hold batch {b}'s pages "
                                        f"beside the pages still in use; use a larger pool")
                return
            self._queue.popleft()
            self._free[slot:slot + count] = False
            self.in_use += count
            self.peak_in_use = max(self.peak_in_use, self.in_use)
            self.pages_read += count
            self._loaded[unit] = (slot, self._io.submit(self._read, unit, slot))

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
        buffer = self.storage[slot * ps: slot * ps + length]
        native.pread(self._fd, buffer, self.reader.data_offset + start)

    def _wait_all(self) -> None:
        for _, future in self._loaded.values():
            future.cancel() or future.exception()

    def close(self) -> None:
        self._io.shutdown(wait=True, cancel_futures=True)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
