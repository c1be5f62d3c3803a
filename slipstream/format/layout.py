"""Byte layout of a slipstream dataset file (format version 1).

Everything is little-endian.  ``docs/format.md`` describes the same layout
for readers written in other languages; this module is its executable form::

    offset 0           header (HEADER_DTYPE), zero-padded to DATA_ALIGNMENT
    data_offset        data pages: page k at data_offset + k * page_size
    (after the pages)  tables, each starting at an 8-byte boundary:
                       field descriptors, metadata (one record per sample),
                       allocation table, user metadata (JSON), page checksums

The writer writes the pages first and the tables once every sample is
known, then the header, so a file whose header is valid is complete.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from typing import Any

import numpy as np

from slipstream import native
from slipstream.errors import FormatError

MAGIC = b"SLIPSTRM"
"""First 8 bytes of every slipstream dataset file."""

VERSION = 1
"""Format version this module reads and writes."""

DATA_ALIGNMENT = 4096
"""The data pages start at a multiple of this (an OS page), so that every
page can be mapped or read with O_DIRECT on its own."""

TABLE_ALIGNMENT = 8
"""Every table starts at a multiple of this."""

ALLOCATION_ALIGNMENT = 16
"""Every allocation inside a page starts at a multiple of this, so that
arrays stored in pages can be viewed in place with their natural alignment."""

DEFAULT_PAGE_SIZE = 8 << 20
MIN_PAGE_SIZE = 4096
MAX_PAGE_SIZE = 1 << 30

FLAG_PAGE_CHECKSUMS = 1
"""Header flag: the file has a CRC-32 for every data page."""

HEADER_DTYPE = np.dtype([
    ("magic", "S8"),
    ("version", "<u4"),
    ("header_size", "<u4"),
    ("sample_count", "<u8"),
    ("field_count", "<u4"),
    ("page_size", "<u4"),
    ("flags", "<u4"),
    ("record_size", "<u4"),
    ("data_offset", "<u8"),
    ("page_count", "<u8"),
    ("data_size", "<u8"),
    ("descriptors_offset", "<u8"),
    ("descriptors_size", "<u8"),
    ("metadata_offset", "<u8"),
    ("metadata_size", "<u8"),
    ("allocations_offset", "<u8"),
    ("allocation_count", "<u8"),
    ("user_offset", "<u8"),
    ("user_size", "<u8"),
    ("page_checksums_offset", "<u8"),
    ("descriptors_crc32", "<u4"),
    ("metadata_crc32", "<u4"),
    ("allocations_crc32", "<u4"),
    ("user_crc32", "<u4"),
    ("page_checksums_crc32", "<u4"),
    ("header_crc32", "<u4"),
])
"""The header at offset 0; ``header_crc32`` covers the bytes before it."""

HEADER_CRC_SPAN = HEADER_DTYPE.fields["header_crc32"][1]

DESCRIPTOR_PREFIX = np.dtype([
    ("type_id", "<u4"),
    ("name_size", "<u4"),
    ("arguments_size", "<u4"),
    ("record_size", "<u4"),
])
"""Start of each field descriptor; the name (UTF-8), the arguments (UTF-8
JSON object) and the record layout (UTF-8 JSON) follow, in that order, with
the sizes given here; the next descriptor starts right after."""

ALLOCATION_DTYPE = np.dtype([
    ("sample", "<u8"),
    ("field", "<u4"),
    ("reserved", "<u4"),
    ("offset", "<u8"),
    ("size", "<u8"),
])
"""One row per stored value: which sample and field it belongs to and where
its bytes are (absolute file offset).  Rows are sorted by sample, then field."""

PAGE_CHECKSUM_DTYPE = np.dtype("<u4")


def crc32(data: Any, crc: int = 0) -> int:
    """CRC-32 (zlib's polynomial) of a bytes-like object or uint8 array,
    continuing ``crc``."""
    return native.crc32(data, crc)


def align(value: int, alignment: int) -> int:
    """``value`` rounded up to a multiple of ``alignment``."""
    return -(-value // alignment) * alignment


def check_page_size(page_size: int) -> int:
    """``page_size`` when it is a power of two in the allowed range."""
    if not (isinstance(page_size, (int, np.integer)) and MIN_PAGE_SIZE <= page_size <= MAX_PAGE_SIZE
            and page_size & (page_size - 1) == 0):
        raise ValueError(f"page_size must be a power of two from {MIN_PAGE_SIZE} to {MAX_PAGE_SIZE}, got {page_size!r}")
    return int(page_size)


# ---------------------------------------------------------------- field descriptors


@dataclasses.dataclass(frozen=True)
class FieldDescriptor:
    """What the file says about one field.

    Attributes:
        type_id: the field class's registered id.
        name: the field's name (any length, UTF-8).
        arguments: the field's constructor arguments (JSON object).
        record: the field's part of the per-sample metadata record, as
            ``[[name, numpy dtype string], ...]``.
    """

    type_id: int
    name: str
    arguments: dict[str, Any]
    record: tuple[tuple[str, str], ...]

    @property
    def record_dtype(self) -> np.dtype:
        """The packed numpy dtype of this field's fixed-size record."""
        return record_dtype(self.record)


def record_dtype(record: Sequence[Sequence[str]]) -> np.dtype:
    """A packed structured dtype from ``[[name, dtype string], ...]``; only
    fixed-size, little-endian (or byte-order-free) scalar types and padding
    (``<u8``, ``|u1``, ``<f4``, ``|b1``, ``|V7``...) are allowed."""
    fields = []
    for name, code in record:
        if not isinstance(code, str) or not _RECORD_TYPE.fullmatch(code):
            raise ValueError(f"record entry {name!r} has type {code!r}: use a fixed-size little-endian scalar type")
        fields.append((str(name), np.dtype(code)))
    return np.dtype(fields)


_RECORD_TYPE = re.compile(r"[<|](?:[iu][1248]|f[248]|b1)|\|V[1-9][0-9]{0,3}")
"""The dtype strings a record entry may have."""


def record_spec(dtype: np.dtype) -> tuple[tuple[str, str], ...]:
    """The ``record`` description of a structured dtype, little-endian."""
    spec = []
    for name in dtype.names:
        sub = dtype.fields[name][0]
        spec.append((name, sub.newbyteorder("<").str if sub.str[0] == ">" else sub.str))
    return tuple(spec)


def metadata_dtype(descriptors: Sequence[FieldDescriptor]) -> np.dtype:
    """The per-sample record: one sub-record per field, by field name, packed."""
    return np.dtype([(d.name, d.record_dtype) for d in descriptors])


def json_bytes(value: Any, **options: Any) -> bytes:
    """``value`` as JSON text (``json.dumps`` with ``options``) in UTF-8,
    other languages' letters as they are.  Text that has no UTF-8 form (a
    file name that is not UTF-8, which Python gives with its bytes as lone
    surrogates, taken as a class name) is written as JSON's ``\\u``
    escapes instead, which read back as the same text."""
    try:
        return json.dumps(value, ensure_ascii=False, **options).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(value, ensure_ascii=True, **options).encode("ascii")


def encode_descriptors(descriptors: Sequence[FieldDescriptor]) -> bytes:
    parts = []
    for d in descriptors:
        name = d.name.encode("utf-8")
        arguments = json_bytes(d.arguments, sort_keys=True)
        record = json.dumps([list(r) for r in d.record]).encode("utf-8")
        prefix = np.array([(d.type_id, len(name), len(arguments), len(record))], DESCRIPTOR_PREFIX)
        parts += [prefix.tobytes(), name, arguments, record]
    return b"".join(parts)


def decode_descriptors(data: bytes, count: int) -> list[FieldDescriptor]:
    """Descriptors from their bytes; raises ValueError on any inconsistency."""
    descriptors, pos = [], 0
    for k in range(count):
        if pos + DESCRIPTOR_PREFIX.itemsize > len(data):
            raise ValueError(f"field descriptor {k} runs past the end of the descriptor table")
        prefix = np.frombuffer(data, DESCRIPTOR_PREFIX, 1, pos)[0]
        pos += DESCRIPTOR_PREFIX.itemsize
        sizes = [int(prefix["name_size"]), int(prefix["arguments_size"]), int(prefix["record_size"])]
        if pos + sum(sizes) > len(data):
            raise ValueError(f"field descriptor {k} runs past the end of the descriptor table")
        chunks = []
        for size in sizes:
            chunks.append(bytes(data[pos:pos + size]).decode("utf-8"))
            pos += size
        name, arguments, record = chunks[0], json.loads(chunks[1]), json.loads(chunks[2])
        if not isinstance(arguments, dict) or not isinstance(record, list) or not all(
                isinstance(r, list) and len(r) == 2 and all(isinstance(s, str) for s in r) for r in record):
            raise ValueError(f"field descriptor {k} ({name!r}) has malformed arguments or record layout")
        if not name or name in (d.name for d in descriptors):
            raise ValueError(f"field descriptor {k} has an empty or repeated name {name!r}")
        spec = tuple((r[0], r[1]) for r in record)
        record_dtype(spec)  # raises on an unknown dtype string or repeated entry names
        descriptors.append(FieldDescriptor(int(prefix["type_id"]), name, arguments, spec))
    if pos != len(data):
        raise ValueError(f"the descriptor table has {len(data) - pos} bytes after its {count} descriptors")
    return descriptors


UNREADABLE_KEY = "slipstream.unreadable"
"""User-metadata key of the samples a file holds no values for, because
its writer could not read or encode them (a loader's first epoch with
``on_error="skip"`` or ``"replace"``): ``{"<index>": "<why>", ...}``.
Their records are zeros; readers report them as failed samples."""


def unreadable_samples(user_metadata: Any, count: int, where: Any) -> dict[int, str]:
    """The samples a file records under :data:`UNREADABLE_KEY` (index -> why),
    checked against its ``count`` samples; ``where`` names the file in errors.

    Raises:
        FormatError: the entry is not an object of sample indices and texts.
    """
    entry = user_metadata.get(UNREADABLE_KEY, {}) if isinstance(user_metadata, dict) else {}
    try:
        samples = {int(index): why for index, why in entry.items()}
    except (AttributeError, TypeError, ValueError):
        samples = None
    if samples is None or not all(0 <= k < count and isinstance(why, str) for k, why in samples.items()):
        raise FormatError(f"{where}: its user metadata's {UNREADABLE_KEY!r} is not an object of sample indices "
                          f"(below {count}) and texts")
    return samples
