"""Parsing slipstream dataset files (the layout of
:mod:`slipstream.format.layout`) into :class:`~slipstream.format.tables.Tables`.

Every table is checked (bounds and checksum) here, so that nothing read
later can point outside the file.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable

import numpy as np

from slipstream.errors import FormatError
from slipstream.format import layout as L
from slipstream.format.tables import Tables, build_fields, format_error

ReadBytes = Callable[[int, int], np.ndarray]
"""``read(offset, size)``: bytes ``[offset, offset + size)`` of a file as a
uint8 array.  A file in object storage may hold only its header and tables
(its pages stay remote), so parsers read through this rather than a buffer."""


def parse_slipstream(path: str | os.PathLike, size: int, read: ReadBytes) -> Tables:
    """The validated tables of the slipstream file ``path`` of ``size``
    bytes, read through ``read``.

    Raises:
        FormatError: naming the file and what is wrong (not a slipstream
            file, an unsupported version, a truncated file, a checksum
            mismatch, bad field descriptors, a value outside the pages...).
    """
    return _SlipstreamParser(path, size, read).parse()


class _SlipstreamParser:
    """One parse of one file: the file's name, size and bytes at hand for
    the checks and their messages."""

    def __init__(self, path: str | os.PathLike, size: int, read: ReadBytes) -> None:
        self.path, self.size, self.read = path, size, read

    def fail(self, problem: str) -> FormatError:
        return format_error(self.path, problem)

    def parse(self) -> Tables:
        header = self._header()
        page_size = int(header["page_size"])
        try:
            L.check_page_size(page_size)
        except ValueError as exc:
            raise self.fail(str(exc)) from None
        data_offset, data_size = int(header["data_offset"]), int(header["data_size"])
        page_count = int(header["page_count"])
        if page_count != -(-data_size // page_size):
            raise self.fail(f"{page_count} pages cannot hold {data_size} bytes of {page_size}")
        self._check_span("data pages", data_offset, data_size)
        count, field_count = int(header["sample_count"]), int(header["field_count"])

        raw = self._table(header, "descriptors", int(header["descriptors_offset"]), int(header["descriptors_size"]))
        try:
            descriptors = tuple(L.decode_descriptors(raw.tobytes(), field_count))
            dtype = L.metadata_dtype(descriptors)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            raise self.fail(f"bad field descriptors: {exc}") from None
        if dtype.itemsize == 0:
            raise self.fail(f"the {field_count} fields have empty records")
        if dtype.itemsize != header["record_size"]:
            raise self.fail(f"the fields need {dtype.itemsize}-byte records, the header says "
                            f"{int(header['record_size'])}")
        if header["metadata_size"] != count * dtype.itemsize:
            raise self.fail(f"metadata table is {int(header['metadata_size'])} bytes, {count} samples need "
                            f"{count * dtype.itemsize}")
        metadata = self._table(header, "metadata", int(header["metadata_offset"]), count * dtype.itemsize).view(dtype)
        allocations = self._table(header, "allocations", int(header["allocations_offset"]),
                                  int(header["allocation_count"]) * L.ALLOCATION_DTYPE.itemsize)
        user = self._table(header, "user", int(header["user_offset"]), int(header["user_size"]))
        try:
            user_metadata = json.loads(user.tobytes().decode("utf-8")) if user.size else {}
        except (ValueError, RecursionError) as exc:
            raise self.fail(f"user metadata is not JSON: {exc}") from None
        checksums = None
        if header["flags"] & L.FLAG_PAGE_CHECKSUMS:
            checksums = self._table(header, "page_checksums", int(header["page_checksums_offset"]),
                                    4 * page_count).view(L.PAGE_CHECKSUM_DTYPE)
        return Tables(self.path, "slipstream", header, descriptors, build_fields(self.path, descriptors),
                      _read_only(metadata), _read_only(allocations.view(L.ALLOCATION_DTYPE)), user_metadata,
                      page_size, data_offset, data_size, page_count, checksums).check_values()

    def _header(self) -> np.void:
        """The header, after checking its magic, version, checksum and size."""
        if self.size < L.HEADER_DTYPE.itemsize:
            raise self.fail(f"truncated: {self.size} bytes, the header alone needs {L.HEADER_DTYPE.itemsize}")
        header = np.frombuffer(self.read(0, L.HEADER_DTYPE.itemsize), L.HEADER_DTYPE, 1)[0]
        if header["magic"] != L.MAGIC:
            raise self.fail(f"not a slipstream dataset (starts with {bytes(header['magic'])!r}, "
                            f"expected {L.MAGIC!r})")
        if header["version"] != L.VERSION:
            raise self.fail(f"format version {int(header['version'])} is not supported (this slipstream reads "
                            f"version {L.VERSION}); upgrade slipstream or rewrite the file")
        if L.crc32(self.read(0, L.HEADER_CRC_SPAN)) != header["header_crc32"]:
            raise self.fail("header checksum mismatch: the header is corrupt")
        if header["header_size"] != L.HEADER_DTYPE.itemsize:
            raise self.fail(f"header size {int(header['header_size'])} is not {L.HEADER_DTYPE.itemsize}")
        return header

    def _check_span(self, what: str, offset: int, size: int) -> None:
        if offset < 0 or size < 0 or offset + size > self.size:
            raise self.fail(f"truncated or corrupt: the {what} (bytes {offset} to {offset + size}) extend past the "
                            f"end of the file ({self.size} bytes)")

    def _table(self, header: np.void, name: str, offset: int, size: int) -> np.ndarray:
        """The bytes of a table, after checking its bounds and checksum."""
        self._check_span(f"{name} table", offset, size)
        data = self.read(offset, size)
        if L.crc32(data) != header[f"{name}_crc32"]:
            raise self.fail(f"{name} table checksum mismatch: the table is corrupt")
        return data


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view: the tables are shared by everything reading the file."""
    view = array.view()
    view.flags.writeable = False
    return view
