"""One reserved stretch of address space that a dataset's pages are mapped
into, each at its place, so that decoders read many files through one base
address and the dataset's own offsets.

A dataset of many files (shards, or the page files of the node-local cache)
has no single mapping for compiled decoders, which know one array and each
value's offset into it.  An :class:`AddressRange` reserves the dataset's
extent once (address space only: no memory, no swap) and maps, at the
place of each part, the file's bytes (:meth:`AddressRange.map_file`), a
slot that bytes are read into (:meth:`AddressRange.fill`) or zeros
(:meth:`AddressRange.map_zeros`), and gives a place back
(:meth:`AddressRange.release`).  Every step replaces the place in one
system call, so the range never has a hole.  The whole range is guarded
against SIGBUS once: a mapped file truncated under it reads zeros, and
:meth:`AddressRange.faults` counts them.
"""

from __future__ import annotations

import ctypes
import mmap
import weakref
import numpy as np

from slipstream import native

OS_PAGE = mmap.PAGESIZE
"""The operating system's page size: places, lengths and file offsets of mappings are multiples of it."""


def os_pages(size: int) -> int:
    """``size`` rounded up to whole OS pages."""
    return -(-size // OS_PAGE) * OS_PAGE


class _Reservation:
    """The owner of the reserved addresses, as NumPy sees it: arrays over the
    range keep it alive (through ``.base``), and the range is unguarded and
    unmapped only when the last of them is gone, so that a compiled pipeline
    still holding one never reads freed addresses."""

    def __init__(self, length: int) -> None:
        self.address = native.range_reserve(length)
        self.length = length
        self.__array_interface__ = {"data": (self.address, True), "shape": (length,), "typestr": "|u1",
                                    "version": 3}
        try:
            self.guard = native.guard_mapping(np.asarray(self))
        except BaseException:
            native.range_free(self.address, length)
            raise
        weakref.finalize(self, _free, self.address, length, self.guard)


def _free(address: int, length: int, guard: int) -> None:
    native.unguard_mapping(guard)
    native.range_free(address, length)


class AddressRange:
    """``length`` bytes of reserved address space (rounded up to whole OS
    pages), read through :attr:`storage`.

    Places not mapped since the range was reserved, or released since, are
    not readable: touching one is a SIGSEGV.  Whoever fills the range keeps
    every place that decoders may read mapped, if only to zeros.

    Raises:
        NativeMemoryError: the address space is short (``ulimit -v``).
    """

    def __init__(self, length: int) -> None:
        self._reservation = _Reservation(os_pages(max(1, length)))
        self.storage: np.ndarray = np.asarray(self._reservation)
        """The whole range as read-only bytes: a value at offset ``o`` is ``storage[o]``."""
        self.length = self._reservation.length

    def _place(self, start: int, length: int) -> tuple[int, int]:
        if start < 0 or start % OS_PAGE or length <= 0 or start + os_pages(length) > self.length:
            raise ValueError(f"bytes {start:,} to {start + length:,} are not a place in a range of {self.length:,} "
                             f"bytes that starts on an OS page ({OS_PAGE} bytes)")
        return self._reservation.address + start, os_pages(length)

    def map_file(self, start: int, length: int, fd: int, offset: int, populate: bool = False) -> None:
        """Map ``length`` bytes of file ``fd`` from ``offset`` on at ``start``
        (``offset`` a whole number of OS pages); ``populate`` reads them in
        now, in the calling thread.  The mapping holds the file: ``fd`` may
        be closed, the file unlinked."""
        native.range_map_file(*self._place(start, length), fd, offset, populate)

    def fill(self, start: int, length: int, fd: int, offset: int) -> np.ndarray:
        """Read ``length`` bytes of file ``fd`` from ``offset`` on into fresh
        memory at ``start``: the bytes, as a view of :attr:`storage`.

        Raises:
            NativeIOError: the read fails, or the file ends first.
        """
        native.pread(fd, self.map_memory(start, length), offset)
        return self.storage[start: start + length]

    def map_memory(self, start: int, length: int) -> np.ndarray:
        """Map fresh, writable memory (zeros) at ``start``: a writable view of
        its ``length`` bytes (:attr:`storage` stays read-only, as what the
        decoders read)."""
        address, whole = self._place(start, length)
        native.range_map_memory(address, whole, True)
        return np.ctypeslib.as_array((ctypes.c_uint8 * length).from_address(address))

    def map_zeros(self, start: int, length: int) -> None:
        """Map read-only zeros at ``start``: the place of bytes that cannot be had."""
        native.range_map_memory(*self._place(start, length), False)

    def release(self, start: int, length: int) -> None:
        """Let go of what is mapped at ``start``: the place is reserved again
        (and unreadable) until it is mapped anew."""
        native.range_release(*self._place(start, length))

    def faults(self) -> int:
        """Pages of mapped files found truncated (and read as zeros) so far."""
        return native.guard_faults(self._reservation.guard)

    def __repr__(self) -> str:
        return f"AddressRange({self.length:,} bytes at {self._reservation.address:#x})"


__all__ = ["OS_PAGE", "AddressRange", "os_pages"]
