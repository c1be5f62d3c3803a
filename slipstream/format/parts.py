"""Parts: encoded samples set aside, in storage or in memory, to be laid
out into shards later, by another process or on another machine.

A distributed write (:mod:`slipstream.ray`) encodes its samples in many
tasks at once, but a shard's layout depends on every sample before it.  So
each task sets what it encoded aside as a part, and shards are laid out
from the parts once their sizes are known.  A part is kept in storage as
one object (:func:`write_part`, :func:`read_part`), or travels in memory as
a :class:`Part`, which holds the same bytes::

    data      the stored values of every sample, back to back
    records   one metadata record per sample (``layout.metadata_dtype``),
              ``offset``/``size`` relative to the start of the part
    checks    per sample, the CRC-32 of its stored values (uint32)
    trailer   MAGIC, sample count, records offset (u64 each), CRC-32 of
              records and checks (u32), zero padding to TRAILER_SIZE

Values read back are checked against their CRC, so a part damaged in
storage is reported, never laid out into a shard.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import tempfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slipstream.errors import FormatError
from slipstream.fields.base import Encoded
from slipstream.format import layout as L
from slipstream.format.location import Location
from slipstream.format.writer import stored_fields, stored_record

MAGIC = b"SLIPPART"
TRAILER_DTYPE = np.dtype([("magic", "S8"), ("samples", "<u8"), ("records_offset", "<u8"), ("crc32", "<u4"),
                          ("padding", "<u4")])
TRAILER_SIZE = TRAILER_DTYPE.itemsize

READ_BYTES = 64 << 20
"""Data read from a part in one request, at most (more for a larger value)."""


@dataclasses.dataclass(frozen=True)
class Part:
    """A part in memory: its stored values and its closing tables, the bytes
    :func:`write_part` stores, but not joined into one buffer.

    Pickled with protocol 5 (as Ray stores objects), each value is handed
    over out of band: copied once, straight into the object store, and
    read back from it in place.  Read the samples with :meth:`samples`.
    """

    values: list[np.ndarray]  # uint8, the stored values of every sample in order, one per stored field
    tables: np.ndarray  # uint8, records, checks and trailer

    def samples(self, descriptors: Sequence[L.FieldDescriptor], start: int, stop: int,
                where: str) -> Iterator[list[Encoded]]:
        """Samples ``start .. stop-1``, as :func:`read_part` gives them
        (values as views of this part's arrays); ``where`` names the part in
        errors."""
        tables = memoryview(self.tables).cast("B")
        data = sum(len(value) for value in self.values)  # the tables follow the values

        def read(first: int, end: int) -> memoryview:
            if first < data:
                raise FormatError(f"{where}: records point into the values")
            return tables[first - data: end - data]

        records, checks = _tables(read, data + len(tables), where, descriptors)
        if not 0 <= start <= stop <= len(records):
            raise FormatError(f"{where}: samples {start} to {stop - 1} asked of a part of {len(records)}")
        stores = stored_fields(descriptors)
        per_sample = sum(stores)
        if len(self.values) != per_sample * len(records):
            raise FormatError(f"{where}: {len(self.values)} values for {len(records)} samples")
        for k in range(start, stop):
            yield _sample(records[k], checks[k], descriptors, stores,
                          iter(self.values[k * per_sample: (k + 1) * per_sample]), f"{where}: sample {k}")


def pack_part(descriptors: Sequence[L.FieldDescriptor], samples: Sequence[Sequence[Encoded]]) -> Part:
    """``samples`` (each one ``Encoded`` per field) as a :class:`Part`; the
    values are not copied."""
    stores = stored_fields(descriptors)
    records = np.zeros(len(samples), L.metadata_dtype(descriptors))
    checks = np.zeros(len(samples), "<u4")
    values: list[np.ndarray] = []
    pos = 0
    for k, encoded in enumerate(samples):
        crc = 0
        for descriptor, keep, value in zip(descriptors, stores, encoded):
            sub = records[k][descriptor.name]
            for key, v in value.record.items():
                sub[key] = v
            if keep:
                data = np.frombuffer(b"" if value.data is None else value.data, np.uint8)
                sub["offset"], sub["size"] = pos, len(data)
                values.append(data)
                crc = L.crc32(data, crc)
                pos += len(data)
        checks[k] = crc
    tables = records.tobytes() + checks.tobytes()
    trailer = np.zeros(1, TRAILER_DTYPE)
    trailer["magic"], trailer["samples"], trailer["records_offset"] = MAGIC, len(samples), pos
    trailer["crc32"] = L.crc32(tables)
    return Part(values, np.frombuffer(tables + trailer.tobytes(), np.uint8))


def write_part(location: Location, name: str, descriptors: Sequence[L.FieldDescriptor],
               samples: Sequence[Sequence[Encoded]]) -> None:
    """Store ``samples`` (each one ``Encoded`` per field) as part ``name``
    at ``location``, written whole or not at all."""
    part = pack_part(descriptors, samples)
    # A local part is written in place, then renamed; an object store's is uploaded from a temporary file.
    folder = location.local_folder()
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".slipstream-part-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as file:
            for value in part.values:
                file.write(value)
            file.write(part.tables)
        location.put_file(name, Path(tmp))
    finally:
        Path(tmp).unlink(missing_ok=True)


def read_part(location: Location, name: str, descriptors: Sequence[L.FieldDescriptor], start: int,
              stop: int) -> Iterator[list[Encoded]]:
    """Samples ``start .. stop-1`` of part ``name``, each one ``Encoded``
    per field, as :func:`write_part` was given them.

    Raises:
        FormatError: the part is not one, is truncated, or a value's bytes
            do not match their CRC-32.
    """
    where = location.url_of(name)
    read = functools.partial(location.read, name)
    records, checks = _tables(read, location.size(name), where, descriptors)
    if not 0 <= start <= stop <= len(records):
        raise FormatError(f"{where}: samples {start} to {stop - 1} asked of a part of {len(records)}")
    return _values(read, records, checks, descriptors, start, stop, where)


def _values(read: Callable[[int, int], memoryview], records: np.ndarray, checks: np.ndarray,
            descriptors: Sequence[L.FieldDescriptor], start: int, stop: int, where: str) -> Iterator[list[Encoded]]:
    stores = stored_fields(descriptors)
    stored = [d.name for d, keep in zip(descriptors, stores) if keep]
    k = start
    while k < stop:
        first = _data_start(records[k], stored)
        end = k + 1  # read the samples whose data fits in READ_BYTES together (at least one)
        while end < stop and _data_end(records[end], stored) - first <= READ_BYTES:
            end += 1
        last = max(_data_end(records[j], stored) for j in range(k, end))
        data = read(first, last) if last > first else memoryview(b"")
        for j in range(k, end):
            name = f"{where}: sample {j}"
            yield _sample(records[j], checks[j], descriptors, stores,
                          _slices(records[j], descriptors, stores, data, first, name), name)
        k = end


def _tables(read: Callable[[int, int], memoryview], size: int, where: str,
            descriptors: Sequence[L.FieldDescriptor]) -> tuple[np.ndarray, np.ndarray]:
    """The records and checks of the part of ``size`` bytes that ``read(first, end)`` reads."""
    if size < TRAILER_SIZE:
        raise FormatError(f"{where}: {size} bytes, too short for a part")
    trailer = np.frombuffer(bytes(read(size - TRAILER_SIZE, size)), TRAILER_DTYPE)[0]
    dtype = L.metadata_dtype(descriptors)
    count, offset = int(trailer["samples"]), int(trailer["records_offset"])
    if trailer["magic"] != MAGIC or offset + count * (dtype.itemsize + 4) != size - TRAILER_SIZE:
        raise FormatError(f"{where}: not a part of these fields (wrong magic or sizes)")
    tables = bytes(read(offset, size - TRAILER_SIZE))
    if L.crc32(tables) != int(trailer["crc32"]):
        raise FormatError(f"{where}: the part's records fail their CRC-32")
    records = np.frombuffer(tables, dtype, count)
    return records, np.frombuffer(tables, "<u4", count, offset=count * dtype.itemsize)


def _data_start(record: Any, stored: list[str]) -> int:
    return min((int(record[n]["offset"]) for n in stored), default=0)


def _data_end(record: Any, stored: list[str]) -> int:
    return max((int(record[n]["offset"]) + int(record[n]["size"]) for n in stored), default=0)


def _sample(record: Any, check: int, descriptors: Sequence[L.FieldDescriptor], stores: list[bool],
            stored: Iterator[Any], name: str) -> list[Encoded]:
    """One sample, one ``Encoded`` per field: its record's values, and for
    each stored field the next of ``stored``; checked against its CRC-32."""
    values, crc = [], 0
    for descriptor, keep in zip(descriptors, stores):
        sub = record[descriptor.name]
        kept = stored_record(sub)
        if not keep:
            values.append(Encoded(kept))
            continue
        value = next(stored)
        crc = L.crc32(value, crc)
        values.append(Encoded(kept, value))
    if crc != int(check):
        raise FormatError(f"{name}: the stored values fail their CRC-32 (the part is damaged)")
    return values


def _slices(record: Any, descriptors: Sequence[L.FieldDescriptor], stores: list[bool], data: memoryview, base: int,
            name: str) -> Iterator[bytes]:
    """The stored values of a sample of a part in storage, from ``data``
    (the part's bytes from offset ``base`` on)."""
    for descriptor, keep in zip(descriptors, stores):
        if keep:
            sub = record[descriptor.name]
            offset, size = int(sub["offset"]) - base, int(sub["size"])
            value = bytes(data[offset: offset + size])
            if len(value) != size:
                raise FormatError(f"{name}: the part ends inside its {descriptor.name!r} value")
            yield value
