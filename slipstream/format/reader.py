"""Reading dataset files: the file is memory-mapped and every table is
validated (bounds and checksum) when it is opened, so that nothing read
later can point outside the file."""

from __future__ import annotations

import json
import mmap
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError, DatasetNotFoundError, FormatError, SampleIndexError, SlipstreamError
from slipstream.format import layout as L
from slipstream.format import registry


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

    Args:
        path: the file.
        verify_pages: also check every page's CRC-32 (when the file has them).
    """

    def __new__(cls, path: str | os.PathLike, *args: Any, **kwargs: Any) -> Reader:
        if cls is Reader and _magic(path) != L.MAGIC:
            from slipstream.format.ffcv import BetonReader, looks_like_beton

            if looks_like_beton(path):
                return super().__new__(BetonReader)
        return super().__new__(cls)

    def __init__(self, path: str | os.PathLike, *, verify_pages: bool = False) -> None:
        self.path = Path(path)
        self._map, stat = _map_file(self.path)
        self._identity = _identity(stat)
        self.storage = np.frombuffer(self._map, np.uint8)
        self._parse()
        if verify_pages:
            self.verify_pages()

    # ---------------------------------------------------------------- opening

    def _fail(self, problem: str) -> FormatError:
        return FormatError(f"{self.path}: {problem}")

    def _parse(self) -> None:
        size = self.storage.size
        if size < L.HEADER_DTYPE.itemsize:
            raise self._fail(f"truncated: {size} bytes, the header alone needs {L.HEADER_DTYPE.itemsize}")
        header = np.frombuffer(self._map, L.HEADER_DTYPE, 1)[0]
        if header["magic"] != L.MAGIC:
            raise self._fail(f"not a slipstream dataset (starts with {bytes(header['magic'])!r}, "
                             f"expected {L.MAGIC!r})")
        if header["version"] != L.VERSION:
            raise self._fail(f"format version {int(header['version'])} is not supported (this slipstream reads "
                             f"version {L.VERSION}); upgrade slipstream or rewrite the file")
        if L.crc32(self.storage[: L.HEADER_CRC_SPAN]) != header["header_crc32"]:
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
        self.page_checksums = None
        if header["flags"] & L.FLAG_PAGE_CHECKSUMS:
            self.page_checksums = self._table("page_checksums", int(header["page_checksums_offset"]),
                                              4 * self.page_count).view(L.PAGE_CHECKSUM_DTYPE)
        try:
            self.fields = {d.name: _field(d) for d in self.descriptors}
        except ValueError as exc:
            raise self._fail(str(exc)) from None
        self._check_data_bounds()

    def _check_span(self, what: str, offset: int, size: int) -> None:
        if offset < 0 or size < 0 or offset + size > self.storage.size:
            raise self._fail(f"truncated or corrupt: the {what} (bytes {offset} to {offset + size}) extend past the "
                             f"end of the file ({self.storage.size} bytes)")

    def _table(self, name: str, offset: int, size: int) -> np.ndarray:
        """The bytes of a table, after checking its bounds and checksum."""
        self._check_span(f"{name} table", offset, size)
        data = self.storage[offset: offset + size]
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
        """Check every page against its stored CRC-32.

        Raises:
            FormatError: naming the first corrupt page and the samples in it.
            ArgumentError: the file was written without page checksums.
        """
        if self.page_checksums is None:
            raise ArgumentError(f"{self.path} has no page checksums (write it with page_checksums=True)")
        for page in range(self.page_count):
            start = self.data_offset + page * self.page_size
            end = min(start + self.page_size, self.data_offset + self.data_size)
            if L.crc32(self.storage[start:end]) != self.page_checksums[page]:
                rows = self.allocations[(self.allocations["offset"] < end)
                                        & (self.allocations["offset"] + self.allocations["size"] > start)]
                samples = sorted({int(s) for s in rows["sample"]})
                raise self._fail(f"page {page} (bytes {start} to {end}) is corrupt: checksum mismatch; "
                                 f"samples in it: {_short_list(samples)}")

    # ---------------------------------------------------------------- access

    def __len__(self) -> int:
        return len(self.metadata)

    def __getitem__(self, index: int) -> dict[str, Any]:
        """Sample ``index`` as Python values (images decoded to (H, W, 3) uint8)."""
        i = self._check_index(index)
        record = self.metadata[i]
        return {name: self._read(i, name, field, record) for name, field in self.fields.items()}

    def _read(self, i: int, name: str, field: Any, record: np.void) -> Any:
        """One field of sample ``i``; a value that cannot be read raises an
        error naming the file, the sample and the field."""
        try:
            return field.read(record[name], self.value_bytes(i, name))
        except SlipstreamError as exc:
            raise type(exc)(f"{self.path}: sample {i}, field {name!r}: {exc}", status=exc.status,
                            detail=exc.detail) from exc
        except (ValueError, TypeError, UnicodeDecodeError) as exc:
            raise FormatError(f"{self.path}: sample {i}, field {name!r} cannot be read: {exc}") from exc

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
        keep their value in the record)."""
        record = self.metadata[index][field]
        if "offset" not in (record.dtype.names or ()):
            return None
        offset, size = int(record["offset"]), int(record["size"])
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
        """Check that ``path`` still holds the file this reader opened: the
        same file (not another one renamed over it or written in its place),
        of the same size, not modified since.

        A reader keeps reading the file it opened, whatever happens to the
        path; but a file truncated in place loses the pages past its new
        end, and touching them through the mapping kills the process with
        SIGBUS (as for any memory-mapped file).  Loaders call this before
        every batch, so a change between batches raises this error instead;
        only a truncation during the few milliseconds a batch is being
        decoded from the mapping (``os_cache=True``) can still end the
        process.  ``os_cache=False`` reads with ``pread`` and turns a short
        read into :class:`NativeIOError` in any case.

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
        if now[3] != then[3]:
            raise FormatError(f"{self.path} was modified since it was opened")

    def close(self) -> None:
        """Release the mapping (arrays taken from the reader keep it alive)."""
        self.metadata = self.allocations = self.storage = None  # type: ignore[assignment]
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


def _identity(stat: os.stat_result) -> tuple[int, int, int, int]:
    """What ``verify`` compares: device, inode, size, modification time."""
    return stat.st_dev, stat.st_ino, stat.st_size, stat.st_mtime_ns


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
