"""Memory managers: how the bytes of a batch's samples reach the decoders.

:class:`MappedMemory` (``os_cache=True``) hands the decoders the memory-mapped
file: the operating system's page cache holds the data once for every
process on the machine, and reads happen on first touch.

:class:`PagePool` (``os_cache=False``) reads exactly the pages upcoming
batches need, with the native ``pread`` in background threads, into a fixed
pool of page slots, and frees each page after the last batch that needs it.
Its memory is the pool, whatever the dataset's size.

Both check every data page against its checksum the first time the process
reads it (:meth:`slipstream.Reader.check_page`), before the decoders see it,
and mark the samples of a page that fails as failed with ``ECORRUPT``: the
decoders leave them out, and the loader applies its ``on_error`` policy.
Once every page has been checked, later epochs pay nothing.
"""

from __future__ import annotations

import bisect
import os
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from slipstream import native
from slipstream.errors import ArgumentError, FormatError, NativeIOError
from slipstream.format.reader import PAGE_CORRUPT, PAGE_GOOD, PAGE_UNCHECKED

CORRUPT = np.int32(native.Status.ECORRUPT)
"""The failure status of a sample whose bytes lie in a page that fails its check."""


def value_pages(reader: Any, field: str, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the values of ``field`` of the samples ``indices``: the first and
    last data page each touches and its offset from the start of the data."""
    records = reader.metadata[field][indices]
    rel = records["offset"].astype(np.int64) - reader.data_offset
    size = records["size"].astype(np.int64)
    first = rel // reader.page_size
    last = np.maximum(first, (rel + np.maximum(size, 1) - 1) // reader.page_size)
    return first, last, rel


def covered_pages(pages: dict[str, tuple[np.ndarray, ...]]) -> list[int]:
    """Every page that the values ``pages`` (as :func:`value_pages` gives
    them per field) touch, once."""
    spans = []
    for first, last, _ in pages.values():
        spans.append(first)
        spans += [np.arange(a + 1, b + 1) for a, b in zip(first[first != last].tolist(), last[first != last].tolist())]
    return np.unique(np.concatenate(spans)).tolist() if spans else []


def mark_corrupt(reader: Any, source: Any, indices: np.ndarray, pages: dict[str, tuple[np.ndarray, ...]]) -> None:
    """Mark the samples of ``indices`` whose values (``pages``, as
    :func:`value_pages` gives them per field) touch a page found corrupt."""
    state = reader.page_state
    for first, last, _ in pages.values():
        bad = state[first] == PAGE_CORRUPT
        for k in np.flatnonzero(first != last).tolist():  # values over several pages (rare)
            bad[k] = bool((state[first[k]:last[k] + 1] == PAGE_CORRUPT).any())
        source.errors[indices[bad]] = CORRUPT


class MappedMemory:
    """``os_cache=True``: the decoders read the mapped file directly.

    Pages not yet checked are checked in background threads, a few batches
    ahead of the decoders (which also brings them into the page cache).
    There is one thread per core: the first batches of a random order touch
    most pages at once, and the decoders wait for their checks."""

    def __init__(self, reader: Any, lookahead: int = 4) -> None:
        self.reader = reader
        self.storage = reader.storage
        self.lookahead = lookahead
        self._checks: dict[int, Future] = {}
        self._checker: ThreadPoolExecutor | None = None
        self._batches: list[np.ndarray] = []

    def start_epoch(self, batches: list[np.ndarray], source: Any) -> None:
        """Plan nothing when every page is known good; else remember the
        batches, whose pages are checked as they come near."""
        self._source = source
        self._batches = [] if (self.reader.page_state == PAGE_GOOD).all() else batches
        self._pages: dict[int, tuple[dict[str, tuple[np.ndarray, ...]], list[int]]] = {}
        if self._batches and self._checker is None:
            self._checker = ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="slipstream-checks")

    def _batch_pages(self, batch: int) -> tuple[dict[str, tuple[np.ndarray, ...]], list[int]]:
        """Where the values of ``batch`` lie, per field, and every page they touch."""
        if batch not in self._pages:
            indices = self._batches[batch]
            pages = {field: value_pages(self.reader, field, indices) for field in self._source.offset_fields}
            self._pages[batch] = pages, covered_pages(pages)
        return self._pages[batch]

    def prepare(self, batch: int) -> None:
        """Check the pages of ``batch`` (and start on those of the next
        batches), then mark its samples in corrupt pages."""
        if not self._batches:
            return
        state = self.reader.page_state
        for ahead in range(batch, min(batch + self.lookahead + 1, len(self._batches))):
            for page in self._batch_pages(ahead)[1]:
                if state[page] == PAGE_UNCHECKED and page not in self._checks:
                    self._checks[page] = self._checker.submit(self.reader.check_page, page)
        pages, covered = self._pages.pop(batch)
        for page in covered:
            check = self._checks.pop(page, None)
            if check is not None:
                check.result()
        mark_corrupt(self.reader, self._source, self._batches[batch], pages)

    def release(self, batch: int) -> None:
        """Nothing to free: the operating system's cache keeps or drops pages."""

    def verify(self) -> None:
        """Raise :class:`FormatError` when the file changed under the mapping (:meth:`Reader.verify`)."""
        self.reader.verify()

    def close(self) -> None:
        """Stop the checking threads; the reader owns the mapping."""
        if self._checker is not None:
            self._checker.shutdown(wait=True, cancel_futures=True)
            self._checker = None


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
        for b, indices in enumerate(batches):
            units: set[tuple[int, int]] = set()
            locations = {}
            for field in source.offset_fields:
                first, last, rel = locations[field] = value_pages(self.reader, field, indices)
                units.update(zip(first.tolist(), last.tolist()))
            need = sum(last - first + 1 for first, last in units)
            if need > self.capacity:
                raise ArgumentError(f"batch {b} needs {need} pages but the page pool holds {self.capacity}: "
                                    f"use a larger pool (memory=slipstream.Memory(pool_pages=...)) or a smaller batch")
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
        them, start reading ahead, wait for ``batch``'s reads (and checks),
        and mark its samples in corrupt pages.

        Raises:
            FormatError: a page cannot be read (the file was truncated or
                replaced, or the disk failed); the message names the file.
        """
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
            try:
                self._loaded[unit][1].result()
            except NativeIOError as exc:
                self.reader.verify()  # a file changed under the loader: say so
                raise FormatError(f"{self.reader.path}: data pages {unit[0]} to {unit[1]} cannot be read: "
                                  f"{exc.detail or exc}") from exc
        mark_corrupt(self.reader, self._source, self._batches[batch], self._locations[batch])

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
                                    f"in consecutive slots; use a larger pool "
                                    f"(memory=slipstream.Memory(pool_pages=...))")
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
        """Read a unit into its slots and check each of its pages (once per process)."""
        ps = self.page_size
        start = unit[0] * ps
        length = min((unit[1] - unit[0] + 1) * ps, self.reader.data_size - start)
        data = self.storage[slot * ps: slot * ps + length]
        native.pread(self._fd, data, self.reader.data_offset + start)
        for k, page in enumerate(range(unit[0], unit[1] + 1)):
            self.reader.check_page(page, data[k * ps: (k + 1) * ps])

    def verify(self) -> None:
        """Raise :class:`FormatError` when the file changed since it was opened (:meth:`Reader.verify`)."""
        self.reader.verify()

    def close(self) -> None:
        """Stop the read-ahead threads, close the file and free the pool."""
        self._io.shutdown(wait=True, cancel_futures=True)
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
