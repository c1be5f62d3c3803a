"""The stager: brings the pages of upcoming batches into a
:class:`~slipstream.format.pagestore.PageStore`, ahead of the decoders,
whatever the store is (local shards, the remote page cache...).

The decoders read every value in place, at the offset its record gives, in
the store's :attr:`~slipstream.format.pagestore.PageStore.storage`: nothing
is copied and no offset is rewritten.  Ahead of the running batch, the
stager keeps a window of pages fetched (or being fetched): the running
batch's, then the next pages in the order the epoch first reads them, up to
the store's ``pages_ahead`` more and never more than its capacity.  Pages
that leave the window are released; a page read again later is fetched
again (from the OS cache, the page cache or a mapping the store kept).

Each page is checked against its checksum the first time the process
fetches it.  The samples of a page that fails are marked failed with
``ECORRUPT`` before the batch runs: the decoders leave them out, and the
loader applies its ``on_error`` policy.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError, FormatError
from slipstream.format.pagestore import PageStore
from slipstream.format.reader import PAGE_CORRUPT, PAGE_GOOD
from slipstream.loader.memory import covered_pages, mark_corrupt, value_pages


class Stager:
    """Fetches each batch's pages into ``store`` ahead of use.

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

    def start_epoch(self, batches: list[np.ndarray], source: Any) -> None:
        """Plan the epoch: each batch's pages, and when each page is read.
        Nothing is planned when every page is in place and known good (a
        mapped local dataset after its first epoch)."""
        self._let_go()
        self._source = source
        self._batches = [] if self.store.capacity is None and self.store.resident and \
            (self.reader.page_state == PAGE_GOOD).all() else batches
        self._values: list[dict[str, tuple[np.ndarray, ...]]] = []
        self._pages: list[list[int]] = []
        capacity = self.store.capacity
        for b, indices in enumerate(self._batches):
            values = {field: value_pages(self.reader, field, indices) for field in source.offset_fields}
            pages = covered_pages(values)
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
        self.store.plan(uses)

    # ---------------------------------------------------------------- per batch

    def prepare(self, batch: int) -> None:
        """Fetch ahead, wait until ``batch``'s pages are in place, and mark
        its samples in corrupt pages (pages that fail their checksum in the
        file, or in every download of them).

        Raises:
            FormatError, StorageError, DatasetNotFoundError: a page of the
                batch cannot be had (the store fails, a shard was truncated
                or replaced); the message names the URL or file, the shard,
                the page and its samples.
        """
        if not self._batches:
            return
        self.store.advance(batch)
        self._move_window(batch)
        for page in self._pages[batch]:
            try:
                self._live[page].result()
            except FormatError:
                if self.reader.page_state[page] != PAGE_CORRUPT:
                    raise
                # A page that fails its checksum: its samples are marked failed
                # (on_error decides), the rest of the batch goes on.
        mark_corrupt(self.reader, self._source, self._batches[batch], self._values[batch])

    def release(self, batch: int) -> None:
        """``batch`` is done: let go of the pages the window no longer holds, fetch further ahead."""
        if self._batches:
            self._move_window(batch + 1)

    def _move_window(self, batch: int) -> None:
        """Make the window start at ``batch``: release the pages outside it,
        fetch those in it."""
        window = self._window(batch)
        gone = [page for page in self._live if page not in window]
        for page in gone:
            self._wait(self._live.pop(page))
        self.store.release(gone)
        for page in window:
            if page not in self._live:
                self._live[page] = self.store.fetch(page)
                self.pages_fetched += 1

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
        for future in self._live.values():
            self._wait(future)
        self.store.release(list(self._live))
        self._live.clear()

    def verify(self) -> None:
        """Raise when bytes read in place may be wrong: a file changed under
        the store (:meth:`~slipstream.format.pagestore.PageStore.verify`)."""
        self.store.verify()

    def close(self) -> None:
        """Let the pages go and close the store."""
        self._let_go()
        self.store.close()
