"""The page stores of a dataset file (:class:`~slipstream.format.pagestore.PageStore`).

- :class:`MappedFile` (``os_cache=True``): the decoders read the reader's
  own mapping of the file.  The operating system's page cache holds the data
  once for every process on the machine, and reads happen on first touch; a
  fetch only checks the page against its checksum, once per process.
- :class:`FilePool` (``os_cache=False``): each fetched page is read
  (``pread``) into fresh memory at its place in an
  :class:`~slipstream.format.address_range.AddressRange` over the file, and
  let go when the stager releases it: the store's memory is its capacity,
  whatever the file's size.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError, FormatError, NativeIOError
from slipstream.format.address_range import OS_PAGE, AddressRange

CHECKS_AHEAD = 64
"""Pages a mapped store checks beyond the running batch's: the first batches
of a random order touch many pages, and the decoders wait for their checks."""

READS_AHEAD = 16
"""Pages a pool reads beyond the running batch's (its capacity permitting)."""

READ_THREADS = 4
"""Reads a pool runs at once."""


def read_page(space: AddressRange, start: int, length: int, fd: int, offset: int, reader: Any,
              where: str) -> np.ndarray:
    """``length`` bytes of file ``fd`` from ``offset`` on, read into their
    place at ``start`` in ``space`` (:meth:`AddressRange.fill`).

    Raises:
        FormatError: the read fails: the file changed under the loader
            (``reader.verify()`` names the change), or else ``where``
            (the file and page) cannot be read.
    """
    try:
        return space.fill(start, length, fd, offset)
    except NativeIOError as exc:
        reader.verify()  # a file changed under the loader: say so
        raise FormatError(f"{where} cannot be read: {exc.detail or exc}") from exc


class MappedFile:
    """A dataset file's pages in its reader's mapping (see the module docstring).

    Args:
        reader: the dataset file (its mapping, tables and page states): a
            :class:`~slipstream.format.reader.Reader`, which makes its stores
            (so this module does not import it).
    """

    capacity = None
    resident = True
    pages_ahead = CHECKS_AHEAD

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.storage = reader.storage
        self._checks = ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="slipstream-checks")

    def plan(self, uses: Mapping[int, Sequence[int]]) -> None:
        """Nothing to plan: pages are checked as the stager asks."""

    def advance(self, now: int) -> None:
        """Nothing to follow."""

    def fetch(self, page: int) -> Future[None]:
        return self._checks.submit(self._check, page)

    def _check(self, page: int) -> None:
        if not self.reader.check_page(page):
            raise FormatError(self.reader.page_problem(page))

    def release(self, pages: Iterable[int]) -> None:
        """Nothing to let go: the operating system's cache keeps or drops pages."""

    def verify(self) -> None:
        """Raise :class:`FormatError` when the file changed under the mapping (:meth:`Reader.verify`)."""
        self.reader.verify()

    def close(self) -> None:
        """Stop the checking threads; the reader owns the mapping."""
        self._checks.shutdown(wait=True, cancel_futures=True)


class FilePool:
    """A dataset file's pages, each read into memory at its place when
    fetched (see the module docstring).

    Args:
        reader: the dataset file (its path, tables and page states): a
            :class:`~slipstream.format.reader.Reader`.
        capacity: pages held at once.

    Attributes:
        in_use, peak_in_use: pages held now, and the most ever.
        pages_read: pages read so far.

    Raises:
        ArgumentError: ``capacity`` is below 1, or the file's pages are not
            whole pages of the operating system.
    """

    resident = False
    pages_ahead = READS_AHEAD

    def __init__(self, reader: Any, capacity: int) -> None:
        if capacity < 1:
            raise ArgumentError(f"the page pool needs at least one page, got {capacity}")
        page_size = reader.page_size
        if page_size % OS_PAGE:
            raise ArgumentError(f"{reader.path}: its pages of {page_size:,} bytes are not whole pages of this "
                                f"operating system ({OS_PAGE:,} bytes), so a page pool cannot hold them: read it "
                                f"through the operating system's cache (memory=slipstream.Memory(os_cache=True))")
        self.reader, self.capacity, self.page_size = reader, capacity, page_size
        # The range starts so that the file's first page falls on an OS page: storage is the range from there
        # on, less the file's data_offset, so that a value's file offset indexes it.
        self._shift = -reader.data_offset % OS_PAGE
        self.range = AddressRange(self._shift + reader.data_offset + reader.data_size)
        self.storage = self.range.storage[self._shift:]
        self._fd = os.open(reader.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        self._reads = ThreadPoolExecutor(READ_THREADS, thread_name_prefix="slipstream-pages")
        self._held: set[int] = set()
        self.in_use = self.peak_in_use = self.pages_read = 0

    def _place(self, page: int) -> tuple[int, int]:
        start, end = self.reader.page_span(page)
        return self._shift + start, end - start

    def plan(self, uses: Mapping[int, Sequence[int]]) -> None:
        """Nothing to plan: the stager chooses what to read and let go."""

    def advance(self, now: int) -> None:
        """Nothing to follow."""

    def fetch(self, page: int) -> Future[None]:
        self._held.add(page)
        self.in_use = len(self._held)
        self.peak_in_use = max(self.peak_in_use, self.in_use)
        self.pages_read += 1
        return self._reads.submit(self._read, page)

    def _read(self, page: int) -> None:
        """Read the page into its place and check it (once per process)."""
        start, length = self._place(page)
        data = read_page(self.range, start, length, self._fd, start - self._shift, self.reader,
                         f"{self.reader.path}: data page {page}")
        if not self.reader.check_page(page, data):
            raise FormatError(self.reader.page_problem(page))

    def release(self, pages: Iterable[int]) -> None:
        for page in pages:
            if page in self._held:
                self._held.discard(page)
                self.range.release(*self._place(page))
        self.in_use = len(self._held)

    def verify(self) -> None:
        """Raise :class:`FormatError` when the file changed since it was opened (:meth:`Reader.verify`)."""
        self.reader.verify()

    def close(self) -> None:
        """Stop the reading threads, let every page go and close the file."""
        self._reads.shutdown(wait=True, cancel_futures=True)
        self.release(list(self._held))
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
