"""Reading dataset files: the file is memory-mapped and every table is
validated (bounds and checksum) when it is opened, so that nothing read
later can point outside the file.  Data pages are checked against their
checksums the first time they are read in a process, and the mapping is
guarded, so that a file truncated under a reader becomes an error instead of
a SIGBUS."""

from __future__ import annotations

import gc
import json
import mmap
import os
import sys
import weakref
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from slipstream import native
from slipstream.errors import ArgumentError, DatasetNotFoundError, FormatError, SampleIndexError, SlipstreamError
from slipstream.format import layout as L
from slipstream.format import registry
from slipstream.format.remote import local_path

PAGE_UNCHECKED, PAGE_GOOD, PAGE_CORRUPT = 0, 1, 2
"""States of a data page in :attr:`Reader.page_state`."""


class UnknownField:
    """Stands in for a field whose type id no imported class registers: its
    records and bytes stay readable, its values are given as raw bytes."""

    def __init__(self, descriptor: L.FieldDescriptor) -> None:
        self.descriptor = descriptor
        self.type_id = descriptor.type_id

    def read(self, record: np.void, data: memoryview | None) -> Any:
        """The sample's stored bytes when it has any, else its raw record."""
        return bytes(data) if data is not None else record

    def default_pipeline(self, name: str, source: Any) -> list[Any]:
        """None: a loader cannot decode a field whose class is unknown."""
        raise ArgumentError(f"{source.reader.path}: field {name!r} has type id {self.type_id}, which no imported "
                            f"field class registers: import the package that defines it, or drop the field with "
                            f"pipelines={{{name!r}: None}}")

    def __repr__(self) -> str:
        return f"UnknownField(type_id={self.type_id}, arguments={self.descriptor.arguments})"


class Reader:
    """A dataset file, memory-mapped and validated.

    ``Reader(path)`` opens slipstream files and FFCV ``.beton`` files alike
    (the latter through :class:`slipstream.format.ffcv.BetonReader`).

    Attributes:
        path: the file.
        descriptors: what the file says about each field.
        fields: field name -> field object.
        metadata: the per-sample records, a read-only structured array with
            one sub-record per field name.
        allocations: every stored value's sample, field, offset and size.
        user_metadata: the JSON object stored by the writer (e.g. ``classes``).
        page_size, data_offset, page_count, data_size: where the pages are.
        page_checksums: the CRC-32 of every data page, or ``None`` for a
            file written without them.
        page_state: per page, ``PAGE_UNCHECKED``, ``PAGE_GOOD`` or
            ``PAGE_CORRUPT``: each page is checked against its checksum the
            first time this process reads a value in it (:meth:`check_page`),
            and never again.
        pages_checked: checksums computed so far (each page's once).

    A sharded dataset (a folder or prefix with a manifest, or the manifest
    itself) and any URL (``s3://bucket/prefix``...) open as a
    :class:`slipstream.format.sharded.ShardedReader`, which has the same
    interface over one index space.

    Args:
        path: the file, folder, manifest or URL.
        verify_pages: check every page's CRC-32 now (when the file has them),
            instead of each page when it is first read.
        remote: a :class:`slipstream.Remote`: object-store options and the
            page cache, for URLs (unused for a local file).
    """

    def __new__(cls, path: str | os.PathLike, *args: Any, **kwargs: Any) -> Reader:
        if cls is Reader:
            from slipstream.format.sharded import ShardedReader, opens_as_sharded

            if opens_as_sharded(path):
                return super().__new__(ShardedReader)
            if _magic(local_path(path)) != L.MAGIC:
                from slipstream.format.ffcv import BetonReader, looks_like_beton

                if looks_like_beton(path):
                    return super().__new__(BetonReader)
        return super().__new__(cls)

    def __init__(self, path: str | os.PathLike, *, verify_pages: bool = False, remote: Any = None) -> None:
        self.path = local_path(path)
        self._map, stat = _map_file(self.path)
        self._identity = _identity(stat)
        self.storage = np.frombuffer(self._map, np.uint8)
        # Unguarded when the reader goes, before its mapping can be unmapped.
        self._guard = _guard(self.storage)
        self._unguard = weakref.finalize(self, native.unguard_mapping, self._guard)
        self.page_checksums: np.ndarray | None = None
        self._parse()
        self.page_state = np.zeros(self.page_count, np.uint8)
        self.pages_checked = 0
        if self.page_checksums is None:
            self.page_state[:] = PAGE_GOOD
        if verify_pages:
            self.verify_pages()

    # ---------------------------------------------------------------- opening

    def _fail(self, problem: str) -> FormatError:
        return FormatError(f"{self.path}: {problem}")

    def _parse(self) -> None:
        size = self._file_size()
        if size < L.HEADER_DTYPE.itemsize:
            raise self._fail(f"truncated: {size} bytes, the header alone needs {L.HEADER_DTYPE.itemsize}")
        header = np.frombuffer(self._bytes(0, L.HEADER_DTYPE.itemsize), L.HEADER_DTYPE, 1)[0]
        if header["magic"] != L.MAGIC:
            raise self._fail(f"not a slipstream dataset (starts with {bytes(header['magic'])!r}, "
                             f"expected {L.MAGIC!r})")
        if header["version"] != L.VERSION:
            raise self._fail(f"format version {int(header['version'])} is not supported (this slipstream reads "
                             f"version {L.VERSION}); upgrade slipstream or rewrite the file")
        if L.crc32(self._bytes(0, L.HEADER_CRC_SPAN)) != header["header_crc32"]:
            raise self._fail("header checksum mismatch: the header is corrupt")
        if header["header_size"] != L.HEADER_DTYPE.itemsize:
            raise self._fail(f"header size {int(header['header_size'])} is not {L.HEADER_DTYPE.itemsize}")
        self.header = header
        self.page_size = int(header["page_size"])
        try:
            L.check_page_size(self.page_size)
        except ValueError as exc:
            raise self._fail(str(exc)) from None
        self.data_offset, self.data_size = int(header["data_offset"]), int(header["data_size"])
        self.page_count = int(header["page_count"])
        if self.page_count != -(-self.data_size // self.page_size):
            raise self._fail(f"{self.page_count} pages cannot hold {self.data_size} bytes of {self.page_size}")
        self._check_span("data pages", self.data_offset, self.data_size)
        count, field_count = int(header["sample_count"]), int(header["field_count"])

        raw = self._table("descriptors", int(header["descriptors_offset"]), int(header["descriptors_size"]))
        try:
            self.descriptors = L.decode_descriptors(raw.tobytes(), field_count)
            dtype = L.metadata_dtype(self.descriptors)
        except (ValueError, RecursionError) as exc:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
            raise self._fail(f"bad field descriptors: {exc}") from None
        if dtype.itemsize == 0:
            raise self._fail(f"the {field_count} fields have empty records")
        if dtype.itemsize != header["record_size"]:
            raise self._fail(f"the fields need {dtype.itemsize}-byte records, the header says "
                             f"{int(header['record_size'])}")
        if header["metadata_size"] != count * dtype.itemsize:
            raise self._fail(f"metadata table is {int(header['metadata_size'])} bytes, {count} samples need "
                             f"{count * dtype.itemsize}")
        self.metadata = self._table("metadata", int(header["metadata_offset"]), count * dtype.itemsize).view(dtype)
        n_alloc = int(header["allocation_count"])
        self.allocations = self._table("allocations", int(header["allocations_offset"]),
                                       n_alloc * L.ALLOCATION_DTYPE.itemsize).view(L.ALLOCATION_DTYPE)
        user = self._table("user", int(header["user_offset"]), int(header["user_size"]))
        try:
            self.user_metadata = json.loads(user.tobytes().decode("utf-8")) if user.size else {}
        except (ValueError, RecursionError) as exc:
            raise self._fail(f"user metadata is not JSON: {exc}") from None
        if header["flags"] & L.FLAG_PAGE_CHECKSUMS:
            self.page_checksums = self._table("page_checksums", int(header["page_checksums_offset"]),
                                              4 * self.page_count).view(L.PAGE_CHECKSUM_DTYPE)
        try:
            self.fields = {d.name: _field(d) for d in self.descriptors}
        except ValueError as exc:
            raise self._fail(str(exc)) from None
        self._check_data_bounds()

    def _file_size(self) -> int:
        """The file's size in bytes."""
        return int(self.storage.size)

    def _bytes(self, offset: int, size: int) -> np.ndarray:
        """Bytes ``[offset, offset + size)`` of the file, which the tables
        are read from (a subclass may hold only the header and tables)."""
        return self.storage[offset: offset + size]

    def _check_span(self, what: str, offset: int, size: int) -> None:
        if offset < 0 or size < 0 or offset + size > self._file_size():
            raise self._fail(f"truncated or corrupt: the {what} (bytes {offset} to {offset + size}) extend past the "
                             f"end of the file ({self._file_size()} bytes)")

    def _table(self, name: str, offset: int, size: int) -> np.ndarray:
        """The bytes of a table, after checking its bounds and checksum."""
        self._check_span(f"{name} table", offset, size)
        data = self._bytes(offset, size)
        if L.crc32(data) != self.header[f"{name}_crc32"]:
            raise self._fail(f"{name} table checksum mismatch: the table is corrupt")
        return data

    def _check_data_bounds(self) -> None:
        """Every stored value lies inside the data pages."""
        lo, hi = self.data_offset, self.data_offset + self.data_size
        spans = [("allocation table", self.allocations["offset"], self.allocations["size"])]
        spans += [(f"field {name!r}", self.metadata[name]["offset"], self.metadata[name]["size"])
                  for name, d in zip(self.fields, self.descriptors) if _stores_data(d)]
        for what, offsets, sizes in spans:
            bad = np.flatnonzero((offsets < lo) | (offsets > hi) | (sizes > hi - offsets))
            if bad.size:
                raise self._fail(f"{what}: sample entry {int(bad[0])} points outside the data pages")
        for name, field in self.fields.items():
            check = getattr(field, "check_records", None)  # fields need not derive from Field
            problem = check(self.metadata[name]) if check is not None else None
            if problem is not None:
                raise self._fail(f"field {name!r}: sample {problem[0]} {problem[1]}")

    def verify_pages(self) -> None:
        """Check every page against its stored CRC-32 now.

        Raises:
            FormatError: naming the first corrupt page and the samples in it.
            ArgumentError: the file was written without page checksums.
        """
        if self.page_checksums is None:
            raise ArgumentError(f"{self.path} has no page checksums (write it with page_checksums=True)")
        for page in range(self.page_count):
            if not self.check_page(page):
                start, end = self.page_span(page)
                rows = self.allocations[(self.allocations["offset"] < end)
                                        & (self.allocations["offset"] + self.allocations["size"] > start)]
                samples = sorted({int(s) for s in rows["sample"]})
                raise self._fail(f"{self.page_problem(page)}; samples in it: {_short_list(samples)}")

    def page_span(self, page: int) -> tuple[int, int]:
        """The file offsets ``[start, end)`` of data page ``page``."""
        start = self.data_offset + page * self.page_size
        return start, min(start + self.page_size, self.data_offset + self.data_size)

    def check_page(self, page: int, data: np.ndarray | None = None) -> bool:
        """Whether data page ``page`` matches its checksum.  The first call
        for a page computes the CRC-32 of ``data`` (the page's bytes as read
        elsewhere, e.g. into a page pool; default: the mapped file) and
        records the result in :attr:`page_state`; later calls only look it
        up.  Always true for a file without page checksums."""
        state = self.page_state[page]
        if state == PAGE_UNCHECKED:
            if data is None:
                start, end = self.page_span(page)
                data = self.storage[start:end]
            good = L.crc32(data) == self.page_checksums[page]
            state = self.page_state[page] = PAGE_GOOD if good else PAGE_CORRUPT
            self.pages_checked += 1
        return bool(state == PAGE_GOOD)

    def page_problem(self, page: int) -> str:
        """What is wrong with a page that failed its check, in words."""
        start, end = self.page_span(page)
        return (f"data page {page} (bytes {start:,} to {end:,}) does not match its checksum: the file is corrupt "
                f"there (a bad disk, memory or copy)")

    # ---------------------------------------------------------------- access

    def __len__(self) -> int:
        return len(self.metadata)

    def __getitem__(self, index: int) -> dict[str, Any]:
        """Sample ``index`` as Python values (images decoded to (H, W, 3) uint8)."""
        i = self._check_index(index)
        return {name: self.read(i, name) for name in self.fields}

    def read(self, index: int, field: str) -> Any:
        """One field of sample ``index`` as a Python value.

        Raises:
            FormatError, DecodeError: the value cannot be read; the message
                names the file, the sample, the field and the cause, and the
                exception's ``detail`` holds the cause alone.
        """
        i = self._check_index(index)
        if field not in self.fields:
            raise ArgumentError(f"{self.path} has no field {field!r} (fields: {', '.join(self.fields)})")
        where = f"{self.path}: sample {i}, field {field!r}"
        try:
            return self.fields[field].read(self.metadata[i][field], self._value_bytes(i, field))
        except SlipstreamError as exc:
            raise type(exc)(f"{where}: {exc}", status=exc.status, detail=exc.detail or str(exc)) from exc
        except RecursionError:
            problem = f"its value is nested too deeply to read (over Python's recursion limit of " \
                      f"{sys.getrecursionlimit()} levels)"
            raise FormatError(f"{where}: {problem}", detail=problem) from None
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            raise FormatError(f"{where} cannot be read: {exc}", detail=str(exc)) from exc

    def __iter__(self) -> Iterator[dict[str, Any]]:
        return (self[i] for i in range(len(self)))

    def _check_index(self, index: int) -> int:
        if not isinstance(index, (int, np.integer)):
            raise TypeError(f"sample indices are integers, got {type(index).__name__}")
        i = int(index) + (len(self) if index < 0 else 0)
        if not 0 <= i < len(self):
            raise SampleIndexError(f"{self.path}: sample {int(index)} is out of range ({len(self)} samples)")
        return i

    def value_bytes(self, index: int, field: str) -> memoryview | None:
        """The stored bytes of one sample's field (``None`` for fields that
        keep their value in the record), after checking the pages they lie
        in (:meth:`check_page`).

        Raises:
            FormatError: a page of the value does not match its checksum.
        """
        try:
            return self._value_bytes(index, field)
        except FormatError as exc:
            raise FormatError(f"{self.path}: sample {index}, field {field!r}: {exc}", detail=exc.detail) from None

    def _value_bytes(self, index: int, field: str) -> memoryview | None:
        record = self.metadata[index][field]
        if "offset" not in (record.dtype.names or ()):
            return None
        offset, size = int(record["offset"]), int(record["size"])
        if size:
            first, last = (offset - self.data_offset) // self.page_size, (offset + size - 1 - self.data_offset) \
                // self.page_size
            for page in range(first, last + 1):
                if not self.check_page(page):
                    problem = self.page_problem(page)
                    raise FormatError(problem, detail=problem)
        return memoryview(self._map)[offset: offset + size]

    def index(self, field: str) -> dict[Any, np.ndarray]:
        """Value -> indices of the samples that have it, for a field with one
        scalar per sample (``IntField``, ``FloatField``), e.g. the samples of
        each class for building subsets."""
        if field not in self.fields:
            raise ArgumentError(f"{self.path} has no field {field!r} (fields: {', '.join(self.fields)})")
        names = self.metadata.dtype[field].names
        if names != ("value",):
            raise ArgumentError(f"index() needs a field with one scalar per sample; {field!r} is "
                                f"{self.fields[field]!r}")
        values = self.metadata[field]["value"]
        order = np.argsort(values, kind="stable")
        keys, starts = np.unique(values[order], return_index=True)
        groups = np.split(order, starts[1:])
        return {key.item(): group for key, group in zip(keys, groups)}

    def verify(self) -> None:
        """Check that ``path`` still holds the file this reader opened, as it
        was: the same file (not another one renamed over it or written in its
        place), of the same size, not modified since, and that no page of the
        mapping was lost to truncation.

        A reader keeps reading the file it opened, whatever happens to the
        path; but a file truncated or rewritten in place changes under it.
        Touching a mapped page past a truncated end would kill the process
        with SIGBUS; the reader's mapping is guarded
        (:func:`slipstream.native.guard_mapping`), so such a page reads as
        zeros instead, and this check then fails.  Loaders call it after
        every batch, before they hand the batch on, so that nothing read
        from a changed file reaches a training step.

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
        """Release the mapping (arrays taken from the reader keep it alive)."""
        self.metadata = self.allocations = self.storage = None  # type: ignore[assignment]
        self._unguard()
        try:
            self._map.close()
        except BufferError:
            pass

    def __enter__(self) -> Reader:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        fields = ", ".join(f"{n}: {f!r}" for n, f in self.fields.items())
        return f"{type(self).__name__}({str(self.path)!r}, {len(self)} samples, {{{fields}}})"


def _stores_data(descriptor: L.FieldDescriptor) -> bool:
    return {"offset", "size"} <= set(descriptor.record_dtype.names)


def _field(descriptor: L.FieldDescriptor) -> Any:
    cls = registry.lookup(descriptor.type_id)
    if cls is None:
        return UnknownField(descriptor)
    try:
        field = cls.from_arguments(descriptor.arguments)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise ValueError(f"field {descriptor.name!r} ({cls.__name__}) has bad arguments "
                         f"{descriptor.arguments!r}: {exc}") from None
    if field.record_dtype() != descriptor.record_dtype:
        raise ValueError(f"field {descriptor.name!r} ({cls.__name__}) has records of {descriptor.record_dtype}, "
                         f"not {field.record_dtype()}")
    return field


def _short_list(values: list[int], limit: int = 8) -> str:
    shown = ", ".join(map(str, values[:limit]))
    return shown + (f" and {len(values) - limit} more" if len(values) > limit else "") if values else "none"


def _magic(path: str | os.PathLike) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read(len(L.MAGIC))
    except OSError:
        return b""  # opening it again reports the problem


def _identity(stat: os.stat_result) -> tuple[int, int, int, int, int]:
    """What ``verify`` compares: device, inode, size, modification time and
    change time (which no one can set back, unlike the modification time)."""
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns


def _guard(storage: np.ndarray) -> int:
    """Guard a reader's mapping.  Guards of readers no longer referenced are
    released by their finalizers, which for readers caught in reference
    cycles run at the next garbage collection: one is run before giving up."""
    try:
        return native.guard_mapping(storage)
    except SlipstreamError as exc:
        if exc.status != native.Status.ETOOBIG:
            raise
        gc.collect()
        return native.guard_mapping(storage)


def _map_file(path: Path) -> tuple[mmap.mmap, os.stat_result]:
    try:
        with open(path, "rb") as f:
            stat = os.fstat(f.fileno())
            if stat.st_size == 0:
                raise FormatError(f"{path}: the file is empty")
            return mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ), stat
    except FileNotFoundError:
        raise DatasetNotFoundError(f"{path}: no such dataset file") from None
    except IsADirectoryError:
        raise FormatError(f"{path} is a folder, not a dataset file") from None
