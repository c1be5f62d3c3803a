"""The storage under a dataset, behind two protocols.

A reader is a dataset's tables (what each sample holds, and where) plus a
:class:`PageSource`: where its data pages are (a mapped file, local shard
files, object storage through the node's page cache).  The source gives the
bytes of a page for reads in Python, checks that nothing changed under it,
and makes a :class:`PageStore` for each loader: what a loader needs from
the storage, its pages' bytes in place, brought in ahead of the batches that
read them.

A :class:`PageStore` presents a dataset's data pages in one array,
:attr:`~PageStore.storage`, each page at its offset in the dataset's tables
(``data_offset + page * page_size``), so that compiled decoders read every
value at the offset its record gives, with no copy and no rewritten
offsets.  The loader's stager (:class:`slipstream.loader.staging.Stager`)
drives any store the same way, and never asks what kind it is:

1. :meth:`~PageStore.plan`: the pages each batch of the epoch reads, as
   page -> the batch numbers that read it (read-ahead order, and the
   eviction rule of a shared cache);
2. :meth:`~PageStore.fetch` for the pages of the next batches, up to
   :attr:`~PageStore.pages_ahead` beyond the running batch's and never more
   than :attr:`~PageStore.capacity` at once: the page is readable in place
   and checked against its checksum (once per process) when the future
   completes;
3. :meth:`~PageStore.advance` as batches start, and
   :meth:`~PageStore.release` for pages no later batch of the epoch reads
   (for an epoch whose pages are all in place and checked already, none of
   these: :meth:`~PageStore.reread` instead);
4. :meth:`~PageStore.verify` after each batch: bytes read in place may
   have changed under the loader (a file truncated or rewritten).

A page that fails its checksum (in its file, or in every download of it)
is recorded ``PAGE_CORRUPT`` in the reader's page states and its future
raises :class:`~slipstream.errors.FormatError`; its place reads as bytes
(possibly zeros) that no decoder is handed, since the stager marks its
samples failed.  Any other failure of a fetch (a store that cannot be
reached, a file gone) raises from the future, naming the page.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class PageSource(Protocol):
    """Where a reader's data pages are: what a reader holds beside its tables."""

    reads_at_once: int
    """Pages worth reading at once when every page is checked (:meth:`Reader.verify_pages`)."""

    def read(self, page: int, start: int, end: int) -> np.ndarray:
        """The bytes of data page ``page``, at ``[start, end)`` in the
        tables' numbering: in place where the source maps them, else read
        into new memory.  Bytes that arrive over a network are checked as
        they arrive: a page whose every download fails its checksum raises
        :class:`~slipstream.errors.FormatError` (and is recorded
        ``PAGE_CORRUPT``); other bytes are checked by the reader."""

    def page_store(self, reader: Any, os_cache: bool, pool_pages: int) -> PageStore:
        """A store of the pages in place, for one loader of ``reader`` (the
        reader this source serves): through the operating system's cache
        (``os_cache``) or a pool of ``pool_pages`` pages.  The caller closes it."""

    def verify(self) -> None:
        """Raise :class:`~slipstream.errors.FormatError` naming the change
        when what the source opened changed since (a file truncated,
        rewritten or replaced)."""

    def close(self) -> None:
        """Let the pages go (mappings, files)."""


@runtime_checkable
class PageStore(Protocol):
    """A dataset's data pages, in place, for one consumer (a loader)."""

    storage: np.ndarray
    """Every page at its offset in the dataset's tables; read only the pages fetched and not released."""

    capacity: int | None
    """Pages the store holds in place at once (None: any number)."""

    pages_ahead: int
    """Pages worth fetching beyond the running batch's, to hide the latency of fetching."""

    resident: bool
    """Whether every page is in place now and stays there until the store
    closes (a mapped file; remote pages once all are mapped), so that a page
    once checked needs no fetch and no release: the stager then plans
    nothing for an epoch whose pages are all known good."""

    def plan(self, uses: Mapping[int, Sequence[int]]) -> None:
        """When this consumer reads each page: page -> the (sorted) batch
        numbers that read it; pages not named are not needed."""

    def advance(self, now: int) -> None:
        """Where the consumer is in its plan: uses before batch ``now`` are past."""

    def fetch(self, page: int) -> Future[None]:
        """Start making ``page`` readable in :attr:`storage` and checked; the
        future raises the page's error.  Fetching a page already fetched
        (and not released) gives a completed future."""

    def release(self, pages: Iterable[int]) -> None:
        """No batch reads these pages in place until they are fetched again: the store may let them go."""

    def reread(self, pages: Callable[[], int]) -> None:
        """An epoch starts that reads only pages the store holds in place and
        has checked (it is :attr:`resident`), so nothing is planned or
        fetched; ``pages()`` counts them, for a store that counts its reads
        (a remote one, as hits of its page cache)."""

    def verify(self) -> None:
        """Raise :class:`~slipstream.errors.FormatError` (or
        :class:`~slipstream.errors.StorageError`) when bytes read in place
        since the store was opened may be wrong: a file truncated or replaced."""

    def close(self) -> None:
        """Stop the store's threads and let its pages go; :attr:`storage` may not be read after."""
