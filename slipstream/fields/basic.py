"""Scalar, array, bytes and JSON fields."""

from __future__ import annotations

import dataclasses
import json
import numbers
from typing import Any

import numpy as np

from slipstream.fields.base import Encoded, Field, array_bytes

DATA_RECORD = np.dtype([("offset", "<u8"), ("size", "<u8")])
"""Record of a field whose values are bytes in the pages: where they are."""


@dataclasses.dataclass(frozen=True)
class IntField(Field, type_id=2):
    """One signed 64-bit integer per sample (class labels, ids), kept in the
    metadata record."""

    def record_dtype(self) -> np.dtype:
        return np.dtype([("value", "<i8")])

    def encode(self, value: Any) -> Encoded:
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Integral, np.integer)):
            if isinstance(value, np.ndarray) and value.ndim == 0 and value.dtype.kind in "iu":
                value = value.item()
            else:
                raise TypeError(f"IntField takes an integer, got {type(value).__name__} {value!r:.60}")
        if not -2**63 <= int(value) < 2**63:
            raise ValueError(f"IntField takes 64-bit integers, {value} is out of range")
        return Encoded({"value": int(value)})

    def read(self, record: np.void, data: memoryview | None) -> int:
        return int(record["value"])

    def default_pipeline(self, name: str, source: Any) -> list[Any]:
        return _metadata_values(source, name)


@dataclasses.dataclass(frozen=True)
class FloatField(Field, type_id=3):
    """One 64-bit float per sample, kept in the metadata record."""

    def record_dtype(self) -> np.dtype:
        return np.dtype([("value", "<f8")])

    def encode(self, value: Any) -> Encoded:
        if isinstance(value, np.ndarray) and value.ndim == 0:
            value = value.item()
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (numbers.Real, np.floating, np.integer)):
            raise TypeError(f"FloatField takes a real number, got {type(value).__name__} {value!r:.60}")
        return Encoded({"value": float(value)})

    def read(self, record: np.void, data: memoryview | None) -> float:
        return float(record["value"])

    def default_pipeline(self, name: str, source: Any) -> list[Any]:
        return _metadata_values(source, name)


@dataclasses.dataclass(frozen=True)
class NDArrayField(Field, type_id=4):
    """A NumPy array of a fixed dtype and shape per sample, stored in the pages.

    Values are converted to ``dtype`` when NumPy can do so without changing
    their kind (``"same_kind"`` casting); the shape must match exactly.
    """

    dtype: Any
    shape: tuple[int, ...]

    def __post_init__(self) -> None:
        dtype = np.dtype(self.dtype)
        if dtype.hasobject or dtype.itemsize == 0:
            raise ValueError(f"NDArrayField needs a fixed-size dtype, got {dtype}")
        shape = (int(self.shape),) if isinstance(self.shape, (int, np.integer)) else tuple(int(s) for s in self.shape)
        if any(s < 0 for s in shape):
            raise ValueError(f"NDArrayField shape {shape} has a negative dimension")
        array_bytes("NDArrayField shape", dtype, shape)
        object.__setattr__(self, "dtype", dtype.newbyteorder("<") if dtype.byteorder == ">" else dtype)
        object.__setattr__(self, "shape", shape)

    def arguments(self) -> dict[str, Any]:
        return {"dtype": np.dtype(self.dtype).str, "shape": list(self.shape)}

    def record_dtype(self) -> np.dtype:
        return DATA_RECORD

    def encode(self, value: Any) -> Encoded:
        array = np.asarray(value)
        if array.shape != self.shape:
            raise ValueError(f"NDArrayField expects shape {self.shape}, got {array.shape}")
        if array.dtype != self.dtype:
            if not np.can_cast(array.dtype, self.dtype, "same_kind"):
                raise TypeError(f"NDArrayField expects dtype {self.dtype}, got {array.dtype}")
            array = array.astype(self.dtype)
        return Encoded({}, np.ascontiguousarray(array).tobytes())

    def check_records(self, records: np.ndarray) -> tuple[int, str] | None:
        """Every value must hold exactly one array's bytes."""
        nbytes = int(np.prod(self.shape, dtype=np.int64)) * np.dtype(self.dtype).itemsize
        bad = np.flatnonzero(records["size"] != nbytes)
        if bad.size:
            i = int(bad[0])
            return i, f"holds {int(records['size'][i])} bytes, a {self.dtype} array of shape {self.shape} needs {nbytes}"
        return None

    def read(self, record: np.void, data: memoryview | None) -> np.ndarray:
        return np.frombuffer(data, self.dtype).reshape(self.shape).copy()

    def default_pipeline(self, name: str, source: Any) -> list[Any]:
        from slipstream.fields.decoders import NDArrayDecoder

        return [NDArrayDecoder(source, name, self.dtype, self.shape)]


@dataclasses.dataclass(frozen=True)
class BytesField(Field, type_id=5):
    """Bytes of any length per sample (including none), stored in the pages."""

    def record_dtype(self) -> np.dtype:
        return DATA_RECORD

    def encode(self, value: Any) -> Encoded:
        if isinstance(value, np.ndarray):
            if value.dtype != np.uint8 or value.ndim != 1:
                raise TypeError(f"BytesField takes bytes or a 1-D uint8 array, got a {value.dtype} array of "
                                f"shape {value.shape}")
            return Encoded({}, value.tobytes())
        if not isinstance(value, (bytes, bytearray, memoryview)):
            raise TypeError(f"BytesField takes bytes, got {type(value).__name__}")
        return Encoded({}, bytes(value))

    def read(self, record: np.void, data: memoryview | None) -> bytes:
        return bytes(data)

    def default_pipeline(self, name: str, source: Any) -> list[Any]:
        return _python_values(source, name)


@dataclasses.dataclass(frozen=True)
class JSONField(Field, type_id=6):
    """Any JSON-serializable value per sample (captions, boxes, attributes),
    stored as UTF-8 JSON in the pages."""

    def record_dtype(self) -> np.dtype:
        return DATA_RECORD

    def encode(self, value: Any) -> Encoded:
        try:
            text = json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as exc:
            raise TypeError(f"JSONField value is not JSON-serializable: {exc}") from None
        except RecursionError:
            raise ValueError("JSONField value is nested too deeply to store (over Python's recursion limit)") from None
        return Encoded({}, text.encode("utf-8"))

    def read(self, record: np.void, data: memoryview | None) -> Any:
        return json.loads(bytes(data).decode("utf-8"))

    def default_pipeline(self, name: str, source: Any) -> list[Any]:
        return _python_values(source, name)


def _metadata_values(source: Any, name: str) -> list[Any]:
    """A batch of the record's ``value`` column."""
    from slipstream.compiler import ArraySource

    return [ArraySource(source.column(name, "value"))]


def _python_values(source: Any, name: str) -> list[Any]:
    """A list of Python values per batch, read in a Python stage."""
    from slipstream.fields.decoders import ReadValues, SampleIndex

    return [SampleIndex(), ReadValues(source.reader, name)]
