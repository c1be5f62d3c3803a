"""Arrays of a variable number of rows per sample: the boxes of a detection
dataset (``RaggedField(np.float32, inner_shape=(4,))``), one label per box,
keypoints (``inner_shape=(17, 3)``).

A value is an array of shape ``(n, *inner_shape)`` with ``n >= 0`` rows,
stored in the pages; its record holds ``length`` (the ``n``) beside the
location, so that a loader knows the longest value of a dataset before it
reads any page, and sizes its batches by it.

:class:`RaggedDecoder` copies each sample's rows into a padded
``(max_length, *inner_shape)`` array and names the number of rows it holds
``count``; the loader's default pipeline for the field is that decoder with
the dataset's longest value as ``max_length``.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
from numba import uint64

from slipstream.compiler import Allocation, Decoder, State
from slipstream.errors import ArgumentError
from slipstream.fields.base import Encoded, Field, array_bytes

COUNT = "count"
"""The name of the output that holds each sample's number of rows."""


@dataclasses.dataclass(frozen=True)
class RaggedField(Field, type_id=7):
    """A variable number of rows of a fixed dtype and row shape per sample.

    Args:
        dtype: the element type (values are converted when NumPy can do so
            without changing their kind, ``"same_kind"`` casting).
        inner_shape: the shape of one row: ``(4,)`` for boxes, ``()`` for a
            label per box.
    """

    dtype: Any
    inner_shape: tuple[int, ...] = ()

    def __post_init__(self) -> None:
        dtype = np.dtype(self.dtype)
        if dtype.hasobject or dtype.itemsize == 0 or dtype.fields is not None:
            raise ValueError(f"RaggedField needs a plain fixed-size dtype, got {dtype}")
        shape = self.inner_shape
        shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(int(s) for s in shape)
        if any(s < 1 for s in shape):
            raise ValueError(f"RaggedField inner_shape {shape} has a dimension below 1")
        array_bytes("RaggedField inner_shape", dtype, shape)
        object.__setattr__(self, "dtype", dtype.newbyteorder("<") if dtype.byteorder == ">" else dtype)
        object.__setattr__(self, "inner_shape", shape)

    @property
    def row_bytes(self) -> int:
        """The size of one row in bytes."""
        return int(np.prod(self.inner_shape, dtype=np.int64)) * self.dtype.itemsize

    def arguments(self) -> dict[str, Any]:
        return {"dtype": self.dtype.str, "inner_shape": list(self.inner_shape)}

    def record_dtype(self) -> np.dtype:
        return np.dtype([("offset", "<u8"), ("size", "<u8"), ("length", "<u8")])

    def encode(self, value: Any) -> Encoded:
        array = np.asarray(value)
        if array.size == 0 and array.ndim <= 1:  # [] and np.zeros(0): no rows, whatever their shape
            array = np.zeros((0, *self.inner_shape), self.dtype)
        if array.shape[1:] != self.inner_shape or array.ndim != 1 + len(self.inner_shape):
            raise ValueError(f"RaggedField expects rows of shape {self.inner_shape} (an array of shape "
                             f"(n, {', '.join(map(str, self.inner_shape))})), got shape {array.shape}")
        if array.dtype != self.dtype:
            if not np.can_cast(array.dtype, self.dtype, "same_kind"):
                raise TypeError(f"RaggedField expects dtype {self.dtype}, got {array.dtype}")
            array = array.astype(self.dtype)
        return Encoded({"length": len(array)}, np.ascontiguousarray(array).tobytes())

    def check_records(self, records: np.ndarray) -> tuple[int, str] | None:
        """Every value must hold exactly ``length`` rows."""
        # compared by division: a crafted length times the row size could wrap around 2**64
        row = np.uint64(self.row_bytes)
        bad = np.flatnonzero((records["size"] % row != 0) | (records["size"] // row != records["length"]))
        if bad.size:
            i = int(bad[0])
            return i, (f"holds {int(records['size'][i])} bytes, {int(records['length'][i])} rows of "
                       f"{self.row_bytes} bytes need {int(records['length'][i]) * self.row_bytes}")
        return None

    def read(self, record: np.void, data: memoryview | None) -> np.ndarray:
        return np.frombuffer(data, self.dtype).reshape(int(record["length"]), *self.inner_shape).copy()

    def default_pipeline(self, name: str, source: Any) -> list[Any]:
        """:class:`RaggedDecoder` padded to the dataset's longest value."""
        return [RaggedDecoder(source, name)]


def longest(source: Any, field: str) -> tuple[int, int]:
    """``(length, sample)``: the most rows any sample of ``field`` holds, and
    the first sample that holds them (``(0, -1)`` for an empty dataset)."""
    lengths = source.records(field, "the longest value")["length"]
    if not len(lengths):
        return 0, -1
    sample = int(np.argmax(lengths))
    return int(lengths[sample]), sample


@dataclasses.dataclass(frozen=True, eq=False)
class RaggedDecoder(Decoder):
    """Copies the rows of a :class:`RaggedField` value into a padded
    ``(max_length, *inner_shape)`` sample; rows past the value's own are
    ``fill``, and the named output ``count`` (int64) holds how many rows it
    has.

    Args:
        source: the :class:`~slipstream.fields.decoders.DecodeSource`.
        field: the field's name.
        max_length: the padded length; ``None`` for the longest value of
            the dataset.  A dataset with a longer value is refused when the
            pipeline is built (naming the sample), so no row is ever lost.
        fill: the value of the padding rows.
    """

    source: Any = dataclasses.field(repr=False)
    field: str
    max_length: int | None = None
    fill: float = 0

    def stored_field(self) -> str:
        """The field it decodes."""
        return self.field

    def __post_init__(self) -> None:
        field = self.source.reader.fields[self.field]
        if not isinstance(field, RaggedField):
            raise ArgumentError(f"{self.source.reader.path}: field {self.field!r} is a {type(field).__name__}, "
                                f"not a RaggedField")
        length, sample = longest(self.source, self.field)
        if self.max_length is None:
            object.__setattr__(self, "max_length", max(length, 1))
        elif not isinstance(self.max_length, (int, np.integer)) or self.max_length < 1:
            raise ArgumentError(f"max_length must be a positive int or None, got {self.max_length!r}")
        elif length > self.max_length:
            raise ArgumentError(f"{self.source.reader.path}: sample {sample} has {length} rows in field "
                                f"{self.field!r}, more than max_length={self.max_length}; raise max_length "
                                f"(None pads to the dataset's longest value)")

    @property
    def stored(self) -> RaggedField:
        """The field this decoder reads."""
        return self.source.reader.fields[self.field]

    @property
    def shape(self) -> tuple[int, ...]:
        """The padded per-sample shape."""
        return (int(self.max_length), *self.stored.inner_shape)

    def inputs(self) -> tuple[np.ndarray, ...]:
        source = self.source
        return (source.storage, source.offsets(self.field), source.column(self.field, "length", np.int64))

    def declare(self, state: State | None) -> tuple[State, list[Allocation]]:
        dtype = self.stored.dtype
        return State(shape=self.shape, dtype=dtype), [Allocation(self.shape, dtype),
                                                      Allocation((), np.int64, name=COUNT)]

    def generate_code(self):
        row_bytes, fill = uint64(self.stored.row_bytes), self.stored.dtype.type(self.fill)

        def read(storage, offsets, lengths, index, out, count, key):
            n = lengths[index]
            start, nbytes = uint64(offsets[index]), uint64(n) * row_bytes
            flat = out.reshape(-1)
            dst = flat.view(np.uint8)
            for j in range(nbytes):
                dst[j] = storage[start + j]
            for j in range(uint64(n) * (uint64(flat.size) // uint64(out.shape[0])), uint64(flat.size)):
                flat[j] = fill
            count[0] = n
            return out

        return read

    def fingerprint(self) -> str:
        return f"RaggedDecoder:{self.stored!r}:{self.max_length}:{self.fill!r}"
