"""Parts: encoded samples set aside in a folder or an object store, to be
laid out into shards later, by another process or on another machine.

A distributed write (:mod:`slipstream.ray`) encodes its samples in many
tasks at once, but a shard's layout depends on every sample before it.  So
each task stores what it encoded as a part, and shards are laid out from
the parts once all their sizes are known.  A part is one object::

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

import os
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slipstream.errors import FormatError
from slipstream.fields.base import Encoded
from slipstream.format import layout as L
from slipstream.format.location import LocalFolder, Location
from slipstream.format.writer import stored_fields

MAGIC = b"SLIPPART"
TRAILER_DTYPE = np.dtype([("magic", "S8"), ("samples", "<u8"), ("records_offset", "<u8"), ("crc32", "<u4"),
                          ("padding", "<u4")])
TRAILER_SIZE = TRAILER_DTYPE.itemsize

READ_BYTES = 64 << 20
"""Data read from a part in one request, at most (more for a larger value)."""


def write_part(location: Location, name: str, descriptors: Sequence[L.FieldDescriptor],
               samples: Sequence[Sequence[Encoded]]) -> None:
    """Store ``samples`` (each one ``Encoded`` per field) as part ``name``
    at ``location``, written whole or not at all."""
    stores = stored_fields(descriptors)
    records = np.zeros(len(samples), L.metadata_dtype(descriptors))
    checks = np.zeros(len(samples), "<u4")
    folder = None  # an object store's part is uploaded from a temporary file
    if isinstance(location, LocalFolder):  # a local one is written in place, then renamed
        folder = location.path
        folder.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".slipstream-part-", dir=folder)
    try:
        with os.fdopen(fd, "wb") as file:
            pos = 0
            for k, encoded in enumerate(samples):
                crc = 0
                for descriptor, keep, value in zip(descriptors, stores, encoded):
                    sub = records[k][descriptor.name]
                    for key, v in value.record.items():
                        sub[key] = v
                    if keep:
                        data = b"" if value.data is None else value.data
                        sub["offset"], sub["size"] = pos, len(data)
                        file.write(data)
                        crc = L.crc32(data, crc)
                        pos += len(data)
                checks[k] = crc
            tables = records.tobytes() + checks.tobytes()
            file.write(tables)
            trailer = np.zeros(1, TRAILER_DTYPE)[0]
            trailer["magic"], trailer["samples"], trailer["records_offset"] = MAGIC, len(samples), pos
            trailer["crc32"] = L.crc32(tables)
            file.write(trailer.tobytes())
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
    records, checks = _tables(location, name, where, descriptors)
    if not 0 <= start <= stop <= len(records):
        raise FormatError(f"{where}: samples {start} to {stop - 1} asked of a part of {len(records)}")
    stores = stored_fields(descriptors)
    stored = [d.name for d, keep in zip(descriptors, stores) if keep]
    k = start
    while k < stop:
        first = _data_start(records[k], stored)
        end = k + 1  # read the samples whose data fits in READ_BYTES together (at least one)
        while end < stop and _data_end(records[end], stored) - first <= READ_BYTES:
            end += 1
        last = max(_data_end(records[j], stored) for j in range(k, end))
        data = location.read(name, first, last) if last > first else memoryview(b"")
        for j in range(k, end):
            yield _sample(records[j], checks[j], descriptors, stores, data, first, f"{where}: sample {j}")
        k = end


def _tables(location: Location, name: str, where: str,
            descriptors: Sequence[L.FieldDescriptor]) -> tuple[np.ndarray, np.ndarray]:
    size = location.size(name)
    if size < TRAILER_SIZE:
        raise FormatError(f"{where}: {size} bytes, too short for a part")
    trailer = np.frombuffer(bytes(location.read(name, size - TRAILER_SIZE, size)), TRAILER_DTYPE)[0]
    dtype = L.metadata_dtype(descriptors)
    count, offset = int(trailer["samples"]), int(trailer["records_offset"])
    if trailer["magic"] != MAGIC or offset + count * (dtype.itemsize + 4) != size - TRAILER_SIZE:
        raise FormatError(f"{where}: not a part of these fields (wrong magic or sizes)")
    tables = bytes(location.read(name, offset, size - TRAILER_SIZE))
    if L.crc32(tables) != int(trailer["crc32"]):
        raise FormatError(f"{where}: the part's records fail their CRC-32")
    records = np.frombuffer(tables, dtype, count)
    return records, np.frombuffer(tables, "<u4", count, offset=count * dtype.itemsize)


def _data_start(record: Any, stored: list[str]) -> int:
    return min((int(record[n]["offset"]) for n in stored), default=0)


def _data_end(record: Any, stored: list[str]) -> int:
    return max((int(record[n]["offset"]) + int(record[n]["size"]) for n in stored), default=0)


def _sample(record: Any, check: int, descriptors: Sequence[L.FieldDescriptor], stores: list[bool],
            data: memoryview, base: int, name: str) -> list[Encoded]:
    values, crc = [], 0
    for descriptor, keep in zip(descriptors, stores):
        sub = record[descriptor.name]
        kept = {key: sub[key] for key in sub.dtype.names if key not in ("offset", "size")}
        if not keep:
            values.append(Encoded(kept))
            continue
        offset, size = int(sub["offset"]) - base, int(sub["size"])
        value = bytes(data[offset: offset + size])
        if len(value) != size:
            raise FormatError(f"{name}: the part ends inside its {descriptor.name!r} value")
        crc = L.crc32(value, crc)
        values.append(Encoded(kept, value))
    if crc != int(check):
        raise FormatError(f"{name}: the stored values fail their CRC-32 (the part is damaged)")
    return values
