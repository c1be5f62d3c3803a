"""The stager: brings the pages of upcoming batches into a
:class:`~slipstream.format.pagestore.PageStore`, ahead of the decoders,
whatever the store is (the mapped file, a page pool, local shards, the
remote page cache...).

The decoders read every value in place, at the offset its record gives, in
the store's :attr:`~slipstream.format.pagestore.PageStore.storage`: nothing
is copied and no offset is rewritten.  Ahead of the running batch, the
stager keeps a window of pages fetched (or being fetched): the running
batch's, then the next pages in the order the epoch first reads them, up to
the store's ``pages_ahead`` more and never more than its capacity.  A store
without a capacity gets back the pages that leave the window at once; one
with a capacity keeps them until it needs room, then gives back the page
needed farthest in the future (so that a pool a few windows large reads
each page of a ``"quasi_random"`` epoch about once).  A page read again
later is fetched again (from the OS cache, the page cache, or a mapping the
store kept).

Each page is checked against its checksum the first time the process
fetches it.  The samples of a page that fails are reported
(:attr:`~slipstream.loader.stager.Staged.corrupt`) before the batch runs:
the epoch iterator hands them to the decoders as known failures
(``ECORRUPT``), which they leave out, and applies its ``on_error`` policy.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError, FormatError
from slipstream.format.pagestore import PageStore
from slipstream.format.reader import PAGE_CORRUPT, PAGE_GOOD
from slipstream.loader.stager import Staged

NEVER = float("inf")
"""The next use of a page that no later batch of the epoch reads."""


def value_pages(reader: Any, field: str, indices: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the values of ``field`` of the samples ``indices``: the first and
    last data page each touches and its offset from the start of the data."""
    records = reader.metadata[field][indices]
    rel = records["offset"].astype(np.int64) - reader.data_offset
    size = records["size"].astype(np.int64)
    first = rel // reader.page_size
    last = np.maximum(first, (rel + np.maximum(size, 1) - 1) // reader.page_size)
    return first, last, rel


def batch_values(reader: Any, source: Any, indices: np.ndarray) -> dict[str, tuple[np.ndarray, ...]]:
    """:func:`value_pages` of every field whose values lie in data pages,
    for the samples the decoders read for ``indices`` (``source.reached``:
    each sample's own, and those a window of frames reads after it), row by
    row: k values per sample of ``indices``."""
    return {field: value_pages(reader, field, source.reached(field, indices).ravel())
            for field in source.offset_fields}


def covered_pages(pages: dict[str, tuple[np.ndarray, ...]]) -> list[int]:
    """Every page that the values ``pages`` (as :func:`value_pages` gives
    them per field) touch, once."""
    spans = []
    for first, last, _ in pages.values():
        spans.append(first)
        spans += [np.arange(a + 1, b + 1) for a, b in zip(first[first != last].tolist(), last[first != last].tolist())]
    return np.unique(np.concatenate(spans)).tolist() if spans else []


def corrupt_samples(reader: Any, indices: np.ndarray, pages: dict[str, tuple[np.ndarray, ...]]) -> np.ndarray:
    """The samples of ``indices`` whose values (``pages``, as
    :func:`batch_values` gives them per field: k values per sample) touch
    a page found corrupt, each once, in the order of ``indices``: known
    failures, which the decoders do not decode and the loader's
    ``on_error`` applies to."""
    state = reader.page_state
    bad = np.zeros(len(indices), bool)
    for first, last, _ in pages.values():
        touched = state[first] == PAGE_CORRUPT
        for k in np.flatnonzero(first != last).tolist():  # values over several pages (rare)
            touched[k] = bool((state[first[k]:last[k] + 1] == PAGE_CORRUPT).any())
        bad |= touched.reshape(len(indices), -1).any(axis=1)
    return indices[bad]


class Stager:
    """Fetches each batch's pages into ``store`` ahead of use: the stager
    (:class:`slipstream.loader.stager.Stager`) of a finished dataset.

    Args:
        store: the dataset's pages, for this loader alone (the stager closes it).
        reader: the dataset (its tables and page states).

    Attributes:
        storage: the store's array, which the decoders read.
        pages_ahead: pages fetched beyond the running batch's (the store's
            choice; lower it to fetch less far ahead).
        pages_fetched: page fetches started (a page leaves the window and
            comes back: fetched again).
    """

    def __init__(self, store: PageStore, reader: Any) -> None:
        self.store = store
        self.reader = reader
        self.storage = store.storage
        self.pages_ahead = store.pages_ahead
        self.pages_fetched = 0
        self._batches: list[np.ndarray] = []
        self._live: dict[int, Future[None]] = {}  # pages fetched (or being fetched) and not released

    # ---------------------------------------------------------------- planning

    def start_epoch(self, batches: Sequence[np.ndarray], source: Any) -> None:
        """Plan the epoch: each batch's pages, and when each page is read.
        Nothing is planned when every page is in place and known good (a
        mapped local dataset after its first epoch)."""
        batches = list(batches)
        self._let_go()
        in_place = self.store.capacity is None and self.store.resident and (self.reader.page_state == PAGE_GOOD).all()
        self._batches = [] if in_place else batches
        if in_place and batches:
            self.store.reread(lambda: len(covered_pages(batch_values(self.reader, source, np.concatenate(batches)))))
        self._values: list[dict[str, tuple[np.ndarray, ...]]] = []
        self._pages: list[list[int]] = []
        capacity = self.store.capacity
        for b, indices in enumerate(self._batches):
            values = batch_values(self.reader, source, indices)
            pages = covered_pages(values)
            if pages and (pages[0] < 0 or pages[-1] >= self.reader.page_count):
                self.store.verify()  # tables read from a file changed under the loader: say so
                page = pages[0] if pages[0] < 0 else pages[-1]
                raise FormatError(f"{self.reader.path}: batch {b} reads data page {page} of "
                                  f"{self.reader.page_count}: the dataset's tables changed under the loader")
            if capacity is not None and len(pages) > capacity:
                raise ArgumentError(f"batch {b} needs {len(pages)} pages but the page pool holds {capacity}: use a "
                                    f"larger pool (memory=slipstream.Memory(pool_pages=...)) or a smaller batch")
            self._values.append(values)
            self._pages.append(pages)
        self._order = [page for pages in self._pages for page in pages]
        self._first_entry = np.concatenate([[0], np.cumsum([len(p) for p in self._pages])]).astype(int).tolist()
        uses: dict[int, list[int]] = {}
        for b, pages in enumerate(self._pages):
            for page in pages:
                uses.setdefault(page, []).append(b)
        self._uses = uses
        self.store.plan(uses)

    # ---------------------------------------------------------------- per batch

    def prepare(self, batch: int) -> Staged:
        """Fetch ahead, wait until ``batch``'s pages are in place, and
        report its samples in corrupt pages (pages that fail their checksum
        in the file, or in every download of them).

        Raises:
            FormatError, StorageError, DatasetNotFoundError: a page of the
                batch cannot be had (the store fails, a shard was truncated
                or replaced); the message names the URL or file, the shard,
                the page and its samples.
        """
        if not self._batches:
            return Staged()
        self.store.advance(batch)
        self._move_window(batch)
        for page in self._pages[batch]:
            try:
                self._live[page].result()
            except FormatError:
                if self.reader.page_state[page] != PAGE_CORRUPT:
                    raise
                # A page that fails its checksum: its samples are reported failed
                # (on_error decides), the rest of the batch goes on.
        return Staged(corrupt=corrupt_samples(self.reader, self._batches[batch], self._values[batch]))

    def release(self, batch: int) -> None:
        """``batch`` is done: let go of the pages the window no longer holds, fetch further ahead."""
        if self._batches:
            self._move_window(batch + 1)

    def _move_window(self, batch: int) -> None:
        """Make the window start at ``batch``: fetch the pages in it, and
        give back those outside it (at once, or as room is needed)."""
        window = self._window(batch)
        capacity = self.store.capacity
        if capacity is None:
            self._give_back([page for page in self._live if page not in window])
        for page in window:
            if page in self._live:
                continue
            if capacity is not None and len(self._live) >= capacity:
                # Room: the page outside the window needed farthest ahead goes (the window fits).
                self._give_back([max((p for p in self._live if p not in window),
                                     key=lambda p: self._next_use(p, batch))])
            self._live[page] = self.store.fetch(page)
            self.pages_fetched += 1

    def _next_use(self, page: int, batch: int) -> float:
        """The first batch from ``batch`` on that reads ``page``."""
        uses = self._uses.get(page, ())
        k = bisect.bisect_left(uses, batch)
        return uses[k] if k < len(uses) else NEVER

    def _give_back(self, pages: list[int]) -> None:
        """Release ``pages``, once their fetches are over."""
        for page in pages:
            self._wait(self._live.pop(page))
        if pages:
            self.store.release(pages)

    def _window(self, batch: int) -> dict[int, None]:
        """``batch``'s pages, then the next ones the epoch reads first, up to
        ``pages_ahead`` more and the store's capacity, in that order."""
        if batch >= len(self._batches):
            return {}
        order, window = self._order, {}
        budget = len(self._pages[batch]) + self.pages_ahead
        if self.store.capacity is not None:
            budget = min(budget, self.store.capacity)
        for k in range(self._first_entry[batch], len(order)):
            if len(window) >= budget:
                break
            window[order[k]] = None
        return window

    @staticmethod
    def _wait(future: Future[None]) -> None:
        """Wait for a fetch before its page is let go; its failure no longer matters."""
        try:
            future.result()
        except Exception:
            pass

    def _let_go(self) -> None:
        """Release every page of the last epoch (one left early included)."""
        self._give_back(list(self._live))

    def verify(self) -> None:
        """Raise when bytes read in place may be wrong: a file changed under
        the store (:meth:`~slipstream.format.pagestore.PageStore.verify`)."""
        self.store.verify()

    def close(self) -> None:
        """Let the pages go and close the store."""
        self._let_go()
        self.store.close()
