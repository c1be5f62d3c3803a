"""The pages of a dataset file: :class:`FileSource`, the file's guarded
mapping (a :class:`~slipstream.format.pagestore.PageSource`), and its page
stores (:class:`~slipstream.format.pagestore.PageStore`):

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

import gc
import mmap
import os
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from slipstream import native
from slipstream.errors import ArgumentError, FormatError, NativeIOError, SlipstreamError
from slipstream.format.address_range import OS_PAGE, AddressRange
from slipstream.format.pagestore import PageStore

CHECKS_AHEAD = 64
"""Pages a mapped store checks beyond the running batch's: the first batches
of a random order touch many pages, and the decoders wait for their checks."""

READS_AHEAD = 16
"""Pages a pool reads beyond the running batch's (its capacity permitting)."""

READ_THREADS = 4
"""Reads a pool runs at once."""


class FileSource:
    """A dataset file's pages: the file mapped read-only, whole, and guarded
    (:func:`slipstream.native.guard_mapping`), so that a page lost to the
    file's truncation reads as zeros, which :meth:`verify` then reports,
    instead of killing the process with ``SIGBUS``.

    Args:
        path: the file.
        mapping: the file's mapping, whole.
        stat: the file's ``os.stat`` when it was mapped.

    Attributes:
        storage: the file's bytes (the mapping), as an array.
    """

    reads_at_once = 1

    def __init__(self, path: Path, mapping: mmap.mmap, stat: os.stat_result) -> None:
        self.path, self._map, self._identity = path, mapping, _identity(stat)
        self.storage = np.frombuffer(mapping, np.uint8)
        # Unguarded when the source goes, before its mapping can be unmapped.
        self._guard = _guard(self.storage)
        self._unguard = weakref.finalize(self, native.unguard_mapping, self._guard)

    def read(self, page: int, start: int, end: int) -> np.ndarray:
        """The page's bytes in the mapping."""
        return self.storage[start:end]

    def page_store(self, reader: Any, os_cache: bool, pool_pages: int) -> PageStore:
        """The mapping (``os_cache``), or a pool of ``pool_pages`` pages read as they are needed."""
        return MappedFile(reader, self.storage) if os_cache else FilePool(reader, pool_pages)

    def verify(self) -> None:
        """Check that the path still holds the file this source mapped, as it
        was: the same file (not another one renamed over it or written in
        its place), of the same size, not modified since, and that no page
        of the mapping was lost to truncation.

        Raises:
            FormatError: naming the file and what changed.
        """
        try:
            now = _identity(os.stat(self.path))
        except OSError as exc:
            raise FormatError(f"{self.path} was removed or cannot be read since it was opened: {exc.strerror}") from None
        then = self._identity
        if now[:2] != then[:2]:
            raise FormatError(f"{self.path} was replaced by another file since it was opened: open it again")
        if now[2] != then[2]:
            raise FormatError(f"{self.path} changed size since it was opened, from {then[2]:,} to {now[2]:,} bytes "
                              f"(truncated or rewritten in place)")
        if now[3:] != then[3:]:
            raise FormatError(f"{self.path} was modified since it was opened (written in place): open it again")
        lost = native.guard_faults(self._guard)
        if lost:
            raise FormatError(f"{self.path} was truncated while it was read: {lost} of its pages were gone")

    def close(self) -> None:
        """Unmap the file (arrays taken from it keep the mapping alive)."""
        self.storage = None  # type: ignore[assignment]
        self._unguard()
        try:
            self._map.close()
        except BufferError:
            pass


def _identity(stat: os.stat_result) -> tuple[int, int, int, int, int]:
    """What ``verify`` compares: device, inode, size, modification time and
    change time (which no one can set back, unlike the modification time)."""
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


def _guard(storage: np.ndarray) -> int:
    """Guard a mapping.  Guards of sources no longer referenced are
    released by their finalizers, which for sources caught in reference
    cycles run at the next garbage collection: one is run before giving up."""
    try:
        return native.guard_mapping(storage)
    except SlipstreamError as exc:
        if exc.status != native.Status.ETOOBIG:
            raise
        gc.collect()
        return native.guard_mapping(storage)


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
    """A dataset file's pages in its mapping (see the module docstring).

    Args:
        reader: the dataset file (its tables and page states): a
            :class:`~slipstream.format.reader.Reader` (this module does not
            import it).
        storage: the file's mapping.
    """

    capacity = None
    resident = True
    pages_ahead = CHECKS_AHEAD

    def __init__(self, reader: Any, storage: np.ndarray) -> None:
        self.reader = reader
        self.storage = storage
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

    def reread(self, pages: Callable[[], int]) -> None:
        """Nothing to count."""

    def verify(self) -> None:
        """Raise :class:`FormatError` when the file changed under the mapping (:meth:`Reader.verify`)."""
        self.reader.verify()

    def close(self) -> None:
        """Stop the checking threads; the file's source owns the mapping."""
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

    def reread(self, pages: Callable[[], int]) -> None:
        """Never called: a pool is not resident."""

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
