"""What a dataset file's tables say, as data: :class:`Tables` is what every
parser returns (:func:`slipstream.format.slipfile.parse_slipstream` for
slipstream files, :func:`slipstream.format.beton.parse_beton` for FFCV
``.beton`` files) and what :class:`slipstream.Reader` is built from.

Parsers depend on this module and on the byte layouts, never on the reader,
so that a new format is one more function returning :class:`Tables`.
"""

from __future__ import annotations

import dataclasses
import functools
import os
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError, FormatError
from slipstream.format import layout as L
from slipstream.fields import registry

FORMATS = ("slipstream", "ffcv")
"""The values of :attr:`Tables.format`: which kind of file the tables were read from."""


@dataclasses.dataclass(frozen=True)
class Tables:
    """A dataset file's header and tables, validated, in slipstream's model
    whatever the file's format: canonical per-sample records with an exact
    ``offset`` and ``size`` for every stored value, and a sorted allocation
    table.  Its arrays are read-only views (into the file's mapping where
    the format allows).

    Attributes:
        path: the file (or URL) the tables were read from, for messages.
        format: ``"slipstream"`` or ``"ffcv"`` (see :data:`FORMATS`).
        header: the file's header record, in its own format's layout
            (``None`` for a dataset combined from shards).
        descriptors: what the file says about each field, in order.
        fields: field name -> field object (an :class:`UnknownField` where no
            imported class registers the type id).
        metadata: one structured record per sample, a sub-record per field.
        allocations: every stored value's sample, field, offset and size.
        user_metadata: the JSON object stored by the writer.
        page_size, data_offset, data_size, page_count: where the pages are.
        page_checksums: the CRC-32 of every data page, or ``None``.
    """

    path: str | os.PathLike
    format: str
    header: np.void | None
    descriptors: tuple[L.FieldDescriptor, ...]
    fields: dict[str, Any]
    metadata: np.ndarray
    allocations: np.ndarray
    user_metadata: dict[str, Any]
    page_size: int
    data_offset: int
    data_size: int
    page_count: int
    page_checksums: np.ndarray | None

    @functools.cached_property
    def unreadable(self) -> dict[int, str]:
        """Sample index -> why, for the samples the file holds no values
        for (:data:`~slipstream.format.layout.UNREADABLE_KEY`); usually empty.

        Raises:
            FormatError: the file's record of them is malformed.
        """
        return L.unreadable_samples(self.user_metadata, len(self.metadata), self.path)

    def check_values(self) -> Tables:
        """Check that every stored value lies inside the data pages and that
        each field accepts its records; return the tables.

        Raises:
            FormatError: naming the file, the table or field and the sample.
        """
        lo, hi = self.data_offset, self.data_offset + self.data_size
        spans = [("allocation table", self.allocations["offset"], self.allocations["size"])]
        spans += [(f"field {d.name!r}", self.metadata[d.name]["offset"], self.metadata[d.name]["size"])
                  for d in self.descriptors if stores_data(d)]
        for what, offsets, sizes in spans:
            bad = np.flatnonzero((offsets < lo) | (offsets > hi) | (sizes > hi - offsets))
            if bad.size:
                raise format_error(self.path, f"{what}: sample entry {int(bad[0])} points outside the data pages")
        # Samples the file holds no values for have zero records, which no field need accept.
        unreadable = sorted(self.unreadable)
        checked = np.delete(np.arange(len(self.metadata)), unreadable) if unreadable else None
        for name, field in self.fields.items():
            check = getattr(field, "check_records", None)  # fields need not derive from Field
            records = self.metadata[name] if checked is None else self.metadata[name][checked]
            problem = check(records) if check is not None else None
            if problem is not None:
                sample = problem[0] if checked is None else checked[problem[0]]
                raise format_error(self.path, f"field {name!r}: sample {sample} {problem[1]}")
        return self


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


def build_fields(path: str | os.PathLike, descriptors: tuple[L.FieldDescriptor, ...]) -> dict[str, Any]:
    """Field name -> field object for each descriptor, from the registered
    classes (:class:`UnknownField` for an unregistered type id).

    Raises:
        FormatError: a descriptor's arguments or record layout do not fit
            its class, naming the file and the field.
    """
    return {d.name: _field(path, d) for d in descriptors}


def _field(path: str | os.PathLike, descriptor: L.FieldDescriptor) -> Any:
    cls = registry.lookup(descriptor.type_id)
    if cls is None:
        return UnknownField(descriptor)
    field = field_from_arguments(path, descriptor.name, cls, descriptor.arguments)
    if field.record_dtype() != descriptor.record_dtype:
        raise format_error(path, f"field {descriptor.name!r} ({cls.__name__}) has records of "
                                 f"{descriptor.record_dtype}, not {field.record_dtype()}")
    return field


def field_from_arguments(path: str | os.PathLike, name: str, cls: type, arguments: dict[str, Any]) -> Any:
    """The field ``cls`` that the file ``path`` describes with ``arguments``
    for its field ``name``.

    Raises:
        FormatError: the arguments do not fit the class, naming the file and the field.
    """
    try:
        return cls.from_arguments(arguments)
    except (TypeError, ValueError, KeyError, AttributeError) as exc:
        raise format_error(path, f"field {name!r} ({cls.__name__}) has bad arguments {arguments!r}: {exc}") from None


def stores_data(descriptor: L.FieldDescriptor) -> bool:
    """Whether the field's values are stored in the data pages (its records
    give their ``offset`` and ``size``) rather than in the records."""
    return {"offset", "size"} <= set(descriptor.record_dtype.names)


def format_error(path: str | os.PathLike, problem: str) -> FormatError:
    """The error for a file whose bytes are wrong: it names the file first."""
    return FormatError(f"{path}: {problem}")
