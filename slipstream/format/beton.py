"""Parsing FFCV ``.beton`` files (FFCV's format version 2) without FFCV.

A ``.beton`` is: a 24-byte header, one 1041-byte descriptor per field, the
metadata table (one C-aligned record per sample), zero padding to a page
boundary, the data pages, and the allocation table up to the end of the
file.  Facts about the layout are from FFCV 1.0.2's sources (``types.py``,
``writer.py``, ``fields/*.py``) and are checked against files written by
FFCV itself (``tests/fixtures/ffcv``).

:func:`parse_beton` translates all of it into slipstream's own model
(:class:`~slipstream.format.tables.Tables`) when a reader opens the file:
the same field classes, canonical metadata records with an exact ``offset``
and ``size`` for every stored value, and a sorted allocation table, so that everything downstream (``reader[i]``, the loader,
``slipstream convert``) works on ``.beton`` files unchanged.  What FFCV
leaves ambiguous is resolved here once: JPEG lengths come from FFCV's
allocation table (preferring the non-empty entry where an empty value shares
a pointer), every other length from the metadata or the field's shape, and
JSON values lose FFCV's trailing NUL.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from slipstream.errors import FormatError
from slipstream.format import layout as L
from slipstream.fields import registry
from slipstream.format.tables import Tables, field_from_arguments, format_error, stores_data

HEADER = np.dtype([("version", "<u2"), ("num_fields", "<u2"), ("page_size", "<u4"), ("num_samples", "<u8"),
                   ("alloc_table_ptr", "<u8")])
DESCRIPTOR = np.dtype([("type_id", "u1"), ("name", "S16"), ("arguments", "V1024")])
ALLOCATION = np.dtype([("sample_id", "<u8"), ("ptr", "<u8"), ("size", "<u8")])
VERSION = 2

FLOAT, INT, IMAGE, BYTES, NDARRAY, JSON, TORCH_TENSOR = range(7)
NAMES = {FLOAT: "FloatField", INT: "IntField", IMAGE: "RGBImageField", BYTES: "BytesField", NDARRAY: "NDArrayField",
         JSON: "JSONField", TORCH_TENSOR: "TorchTensorField"}
# FFCV's per-field metadata; the two packed ones have alignment 1.
METADATA = {
    FLOAT: np.dtype("<f8"), INT: np.dtype("<i8"), NDARRAY: np.dtype("<u8"), TORCH_TENSOR: np.dtype("<u8"),
    BYTES: np.dtype([("ptr", "<u8"), ("size", "<u8")]), JSON: np.dtype([("ptr", "<u8"), ("size", "<u8")]),
    IMAGE: np.dtype([("mode", "u1"), ("width", "<u2"), ("height", "<u2"), ("data_ptr", "<u8")]),
}
# slipstream's type ids of the fields FFCV's become.
SLIPSTREAM_TYPE = {INT: 2, FLOAT: 3, IMAGE: 1, NDARRAY: 4, TORCH_TENSOR: 4, BYTES: 5, JSON: 6}


def is_beton_header(head: bytes) -> bool:
    """Whether a file starting with ``head`` (at least the 24-byte header)
    is an FFCV version-2 file; the rest is checked when it is parsed, with
    errors that say what is wrong."""
    if len(head) < HEADER.itemsize:
        return False
    h = np.frombuffer(head, HEADER, 1)[0]
    page_size = int(h["page_size"])
    return h["version"] == VERSION and 0 < h["num_fields"] and page_size >= 1024 and page_size & (page_size - 1) == 0


def parse_beton(path: str | os.PathLike, data: np.ndarray) -> Tables:
    """The tables of the FFCV file ``path`` whose bytes are ``data`` (a
    uint8 array, typically the file's mapping), in slipstream's model (see
    the module docstring).  The metadata and allocation tables are new
    arrays; the values stay in ``data``'s pages.

    Raises:
        FormatError: naming the file and what is wrong (an unsupported
            version, an unfinished or truncated file, a custom FFCV field...).
    """
    return _BetonParser(path, data).parse()


class _BetonParser:
    """One parse of one ``.beton``: the file's name and bytes, and where its
    pages turned out to be, at hand for the translation and its messages."""

    def __init__(self, path: str | os.PathLike, data: np.ndarray) -> None:
        self.path, self.data = path, data
        self.data_offset = self.data_size = 0

    def fail(self, problem: str) -> FormatError:
        return format_error(self.path, problem)

    def parse(self) -> Tables:
        size = self.data.size
        if size < HEADER.itemsize:
            raise self.fail(f"truncated FFCV file: {size} bytes, the header needs {HEADER.itemsize}")
        header = self.data[:HEADER.itemsize].view(HEADER)[0]
        if header["version"] != VERSION:
            raise self.fail(f"FFCV format version {int(header['version'])} is not supported (only {VERSION})")
        field_count, count = int(header["num_fields"]), int(header["num_samples"])
        page_size = int(header["page_size"])
        table = int(header["alloc_table_ptr"])
        if table == 0:
            raise self.fail("FFCV's writer did not finish this file (its allocation table pointer is 0)")
        descriptors_end = HEADER.itemsize + field_count * DESCRIPTOR.itemsize
        if descriptors_end > size:
            raise self.fail(f"truncated or corrupt FFCV file: {field_count} field descriptors need "
                            f"{descriptors_end} bytes, the file has {size}")
        raw = self.data[HEADER.itemsize:descriptors_end].view(DESCRIPTOR)
        kinds = [int(d["type_id"]) for d in raw]
        names = [bytes(d["name"]).split(b"\0")[0].decode("ascii", "replace") for d in raw]
        for k, (name, kind) in enumerate(zip(names, kinds)):
            if not name or name in names[:k]:
                raise self.fail(f"field {k} has an empty or repeated name {name!r}")
            if kind not in METADATA:
                raise self.fail(f"field {name!r} has FFCV type id {kind}, a custom FFCV field slipstream cannot "
                                f"read (it reads {', '.join(NAMES.values())})")
        record = np.dtype([(n, METADATA[k]) for n, k in zip(names, kinds)], align=True)
        metadata_end = descriptors_end + count * record.itemsize
        if not metadata_end <= table <= size or (size - table) % ALLOCATION.itemsize:
            raise self.fail(f"truncated or corrupt FFCV file: the metadata ends at byte {metadata_end}, the "
                            f"allocation table starts at {table}, the file has {size} bytes")
        ffcv_metadata = self.data[descriptors_end:metadata_end].view(record)
        ffcv_allocations = self.data[table:].view(ALLOCATION)
        self.data_offset = L.align(metadata_end, page_size) if table > metadata_end else table
        self.data_size = table - self.data_offset
        if self.data_size < 0 or self.data_size % page_size:
            raise self.fail(f"corrupt FFCV file: the pages (from byte {self.data_offset}) do not end at the "
                            f"allocation table (byte {table})")

        descriptors, fields, columns = [], {}, []
        for name, kind, descriptor in zip(names, kinds, raw):
            arguments = self._arguments(name, kind, bytes(descriptor["arguments"]))
            field = fields[name] = field_from_arguments(self.path, name, registry.lookup(SLIPSTREAM_TYPE[kind]),
                                                        arguments)
            descriptors.append(L.FieldDescriptor(field.type_id, name, arguments, L.record_spec(field.record_dtype())))
            columns.append(self._records(name, kind, field, ffcv_metadata[name], ffcv_allocations))
        metadata = np.zeros(count, L.metadata_dtype(descriptors))
        for descriptor, column in zip(descriptors, columns):
            for key, values in column.items():
                metadata[descriptor.name][key] = values
        metadata.flags.writeable = False
        return Tables(self.path, "ffcv", header, tuple(descriptors), fields, metadata,
                      _allocation_table(descriptors, metadata), {}, page_size, self.data_offset, self.data_size,
                      self.data_size // page_size, None).check_values()

    def _arguments(self, name: str, kind: int, arguments: bytes) -> dict[str, Any]:
        if kind not in (NDARRAY, TORCH_TENSOR):
            return {}
        shape = np.frombuffer(arguments, "<u8", 32)
        text_size = int(np.frombuffer(arguments, "<u8", 1, 256)[0])
        try:
            if not 0 < text_size <= len(arguments) - 264:
                raise ValueError(f"dtype text of {text_size} bytes")
            descr = json.loads(arguments[264:264 + text_size].decode("ascii"))
            if len(descr) != 1:
                raise ValueError(f"{len(descr)} dtype entries")
            if len(descr[0]) != 2:  # [name, type, shape]: a sub-array, whose shape FFCV's arrays never carry
                raise ValueError(f"a dtype entry of {len(descr[0])} parts, {descr[0]!r}, where FFCV writes 2")
            dtype = np.dtype(descr[0][1])
        except (ValueError, TypeError, IndexError, UnicodeDecodeError) as exc:
            raise self.fail(f"field {name!r}: unreadable NDArrayField arguments ({exc})") from None
        dims = [int(d) for d in shape]
        while dims and dims[-1] == 0:  # FFCV's own rule: trailing zero slots are unused
            dims.pop()
        return {"dtype": dtype.str, "shape": dims}

    def _records(self, name: str, kind: int, field: Any, column: np.ndarray, allocations: np.ndarray) -> dict:
        """slipstream's record values for one FFCV metadata column."""
        if kind in (INT, FLOAT):
            return {"value": column}
        if kind in (NDARRAY, TORCH_TENSOR):
            sizes = np.full(len(column), field.dtype.itemsize * int(np.prod(field.shape, dtype=np.int64)), np.uint64)
            return self._placed(column, sizes)
        if kind in (BYTES, JSON):
            offsets, sizes = column["ptr"], column["size"].copy()
            if kind == JSON:  # FFCV stores json.dumps(value) + NUL
                ends = (offsets + sizes - 1)[sizes > 0].astype(np.int64)
                self._check_inside(name, ends)
                if np.any(self.data[ends] != 0):
                    raise self.fail(f"field {name!r}: a JSON value lacks FFCV's terminating NUL byte")
                sizes[sizes > 0] -= 1
            return self._placed(offsets, sizes)
        modes, heights, widths = column["mode"], column["height"], column["width"]
        if np.any(modes > 1):
            bad = int(np.flatnonzero(modes > 1)[0])
            raise self.fail(f"field {name!r}, sample {bad}: image mode {int(modes[bad])} is neither JPEG (0) "
                            f"nor raw (1)")
        sizes = heights.astype(np.uint64) * widths.astype(np.uint64) * 3
        jpeg = modes == 0
        sizes[jpeg] = self._jpeg_sizes(name, column["data_ptr"][jpeg], allocations)
        return {"height": heights, "width": widths, "mode": modes, **self._placed(column["data_ptr"], sizes)}

    def _jpeg_sizes(self, name: str, pointers: np.ndarray, allocations: np.ndarray) -> np.ndarray:
        """Lengths of JPEG values, which only FFCV's allocation table has.
        Where an empty value shares a pointer, the longest entry is the JPEG."""
        order = np.lexsort((-allocations["size"].astype(np.int64), allocations["ptr"]))
        ptrs, sizes = allocations["ptr"][order], allocations["size"][order]
        at = np.searchsorted(ptrs, pointers)
        found = (at < len(ptrs)) & (ptrs[np.minimum(at, len(ptrs) - 1)] == pointers) if len(ptrs) else at < 0
        if not np.all(found):
            raise self.fail(f"field {name!r}: a JPEG at byte {int(pointers[~found][0])} has no entry in the "
                            f"allocation table")
        return sizes[at]

    def _placed(self, offsets: np.ndarray, sizes: np.ndarray) -> dict[str, np.ndarray]:
        # An empty value may point anywhere (FFCV gives some a pointer before the pages): pin it inside.
        offsets = np.where(sizes == 0, self.data_offset, offsets).astype(np.uint64)
        return {"offset": offsets, "size": sizes.astype(np.uint64)}

    def _check_inside(self, name: str, positions: np.ndarray) -> None:
        bad = (positions < self.data_offset) | (positions >= self.data_offset + self.data_size)
        if np.any(bad):
            raise self.fail(f"field {name!r}: a value at byte {int(positions[bad][0])} lies outside the data pages")


def _allocation_table(descriptors: list[L.FieldDescriptor], metadata: np.ndarray) -> np.ndarray:
    """slipstream's allocation table: one row per stored value, sorted."""
    parts = []
    for k, descriptor in enumerate(descriptors):
        if not stores_data(descriptor):
            continue
        column = metadata[descriptor.name]
        rows = np.zeros(len(column), L.ALLOCATION_DTYPE)
        rows["sample"], rows["field"] = np.arange(len(column)), k
        rows["offset"], rows["size"] = column["offset"], column["size"]
        parts.append(rows)
    table = np.concatenate(parts) if parts else np.zeros(0, L.ALLOCATION_DTYPE)
    table = table[np.lexsort((table["field"], table["sample"]))]
    table.flags.writeable = False
    return table
