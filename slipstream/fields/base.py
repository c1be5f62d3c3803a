"""The Field protocol: how one column of a dataset is stored.

A field describes one value per sample.  When writing, :meth:`Field.encode`
turns a user value into the field's part of the sample's fixed-size metadata
record, plus optionally variable-size bytes that go into the data pages.
When reading, :meth:`Field.read` turns them back into a Python value.

A field class is registered under a type id when it is defined, so that a
reader can rebuild it from the file::

    class PointField(Field, type_id=1001):
        ...

Third-party ids start at 1000.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Callable
from typing import Any, ClassVar

import numpy as np

from slipstream.fields import registry
from slipstream.errors import ArgumentError, FieldValueError
from slipstream.files import read_head


MAX_VALUE_BYTES = np.iinfo(np.int64).max
"""The most bytes one stored value may hold."""


def array_bytes(what: str, dtype: np.dtype, shape: tuple[int, ...]) -> int:
    """The bytes of an array of ``dtype`` and ``shape``, which ``what`` (a
    field and the name of its shape argument) describes.

    Raises:
        ValueError: they pass :data:`MAX_VALUE_BYTES` (a shape no file can hold).
    """
    nbytes = dtype.itemsize
    for size in shape:
        nbytes *= size
    if nbytes > MAX_VALUE_BYTES:
        raise ValueError(f"{what} {shape} would hold {nbytes} bytes of {dtype}, more than any value can "
                         f"({MAX_VALUE_BYTES})")
    return nbytes


def file_value(value: Any, kind: str) -> Any:
    """``value`` with a file named or carried the ways datasets give one
    replaced by the file's bytes: a ``{"bytes": ..., "path": ...}`` dict
    (Hugging Face's undecoded images and videos) by its bytes or its path's,
    and a path by the file's bytes (a FIFO is refused by name, not waited
    on); anything else as it is.  ``kind`` names the value in errors.

    Raises:
        TypeError: a dict with neither entry.
        FieldValueError: a path that is no regular file.
    """
    if isinstance(value, dict):
        if value.get("bytes") is not None:
            value = value["bytes"]
        elif value.get("path") is not None:
            value = value["path"]
        else:
            raise TypeError(f"{kind} dict needs a 'bytes' or a 'path' entry")
    if isinstance(value, (str, os.PathLike)):
        value = read_head(value, error=FieldValueError)
    return value


def first_problem(problems: list[tuple[np.ndarray, str]], detail: Callable[[int], str]) -> tuple[int, str] | None:
    """For :meth:`Field.check_records`: the first sample that the first
    failing check of ``problems`` (a bool per sample, and what it means)
    flags, with that meaning and ``detail(sample)`` in parentheses; None
    when no check flags any sample."""
    for bad, what in problems:
        at = np.flatnonzero(bad)
        if at.size:
            i = int(at[0])
            return i, f"{what} ({detail(i)})"
    return None


@dataclasses.dataclass(frozen=True)
class Encoded:
    """A value as it is written: ``record`` fills the field's part of the
    metadata record (by sub-field name, ``offset`` and ``size`` excepted),
    ``data`` is stored in the pages (``None`` for nothing).  ``loss``, when
    set, says how the stored value differs from the value given, in words
    that fit "N of M samples were ..." and are the same for every value
    that loses alike: the writer counts them and warns once per write
    (:class:`~slipstream.errors.LossWarning`)."""

    record: dict[str, Any]
    data: bytes | memoryview | None = None
    loss: str | None = None


class Field:
    """Base class of every field type.

    Subclasses set ``type_id`` through the class keyword and implement
    :meth:`record_dtype`, :meth:`encode` and :meth:`read`.  Fields that store
    bytes in the pages have ``offset`` (uint64) and ``size`` (uint64) in their
    record: the writer fills them.  Fields are immutable; the constructor's
    arguments must round-trip through :meth:`arguments` (a JSON object).
    """

    type_id: ClassVar[int]

    def __init_subclass__(cls, type_id: int | None = None, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        if type_id is not None:
            cls.type_id = type_id
            registry.register(cls, type_id)

    def record_dtype(self) -> np.dtype:
        """This field's part of the per-sample metadata record (a structured
        dtype of fixed-size little-endian types)."""
        raise NotImplementedError

    def arguments(self) -> dict[str, Any]:
        """Constructor arguments, JSON-serializable; ``type(self)(**arguments)``
        rebuilds the field."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}  # type: ignore[arg-type]

    @classmethod
    def from_arguments(cls, arguments: dict[str, Any]) -> Field:
        """The field a file describes with ``arguments``."""
        return cls(**arguments)

    def encode(self, value: Any) -> Encoded:
        """The stored form of ``value``.  Runs in the writer's worker
        processes.  Raise ``TypeError`` or ``ValueError`` with a short reason
        for a value this field cannot store."""
        raise NotImplementedError

    def read(self, record: np.void, data: memoryview | None) -> Any:
        """The Python value of one sample, from its record and its stored
        bytes (``None`` for fields without data)."""
        raise NotImplementedError

    def check_decodes(self, value: Any) -> None:
        """Raise the error that keeps ``value``, as :meth:`read` returned it,
        from decoding: how the loader names the cause of a sample its
        compiled decoder failed on.  :meth:`read` of most fields decodes
        everything and raises there already, so the default does nothing;
        a field whose :meth:`read` leaves the decoding to its user (a video)
        decodes here."""

    def check_records(self, records: np.ndarray) -> tuple[int, str] | None:
        """The first sample whose record (read from a file) this field's
        decoders cannot trust, as ``(sample, what is wrong)``, or None.

        The reader calls it when it opens a file, after checking that every
        stored value lies inside the data pages; the compiled decoders rely
        on it (they do not bounds-check), so a field whose decoders read a
        size implied by the record (an image's pixels, an array's bytes)
        checks here that the stored size matches."""
        return None

    def default_pipeline(self, name: str, source: Any) -> list[Any]:
        """The operations a loader uses for this field when the user gives
        none: a decoder reading field ``name`` from ``source`` (a
        :class:`slipstream.fields.decoders.DecodeSource`), and what it needs
        after it."""
        raise ArgumentError(f"{type(self).__name__} has no default decoder: give field {name!r} a pipeline "
                                  f"or drop it with pipelines={{{name!r}: None}}")

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.arguments().items())
        return f"{type(self).__name__}({args})"
