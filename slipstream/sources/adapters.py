"""Turning what users have into what the writer reads: a sequence of
samples, each a tuple with one value per field."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError
from slipstream.format.writer import SampleStream


class ArrayRows:
    """Samples from equal-length arrays (one per field): sample ``i`` is
    ``(arrays[0][i], arrays[1][i], ...)``."""

    def __init__(self, arrays: Sequence[np.ndarray]) -> None:
        lengths = {len(a) for a in arrays}
        if len(lengths) != 1:
            raise ArgumentError(f"the arrays have different lengths: {sorted(lengths)}")
        self.arrays = list(arrays)

    def __len__(self) -> int:
        return len(self.arrays[0])

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        return tuple(a[index] for a in self.arrays)

    def describe(self, index: int) -> str:
        """``row i``, for error messages."""
        return f"row {index}"


class IndexableSource:
    """Samples from any object with ``len()`` and ``[i]`` that gives a tuple
    or list (values in field order), a dict (values by field name), or a
    single value when there is one field.  Hugging Face ``datasets.Dataset``
    objects are of the dict kind."""

    def __init__(self, dataset: Any, names: Sequence[str]) -> None:
        self.dataset = dataset
        self.names = list(names)

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, index: int) -> tuple[Any, ...]:
        return sample_values(self.dataset[index], self.names)

    def describe(self, index: int) -> str:
        """``item i of DatasetClass``, for error messages."""
        return f"item {index} of {type(self.dataset).__name__}"


def sample_values(item: Any, names: Sequence[str]) -> tuple[Any, ...]:
    """The values of one sample in field order, from a tuple or list
    (values in field order), a dict (values by field name), or a single
    value when there is one field."""
    if isinstance(item, Mapping):
        missing = [n for n in names if n not in item]
        if missing:
            raise KeyError(f"the sample has no {', '.join(map(repr, missing))} (its keys: "
                           f"{', '.join(map(repr, item))})")
        return tuple(item[n] for n in names)
    if isinstance(item, (tuple, list)):
        return tuple(item)
    if len(names) == 1:
        return (item,)
    raise TypeError(f"a sample is a {type(item).__name__}; with {len(names)} fields it must be a tuple, "
                    f"a list or a dict")


class IterableSource(SampleStream):
    """Samples from an iterable without random access (a generator, a
    Hugging Face ``IterableDataset``, a ``webdataset`` pipeline): each item
    a tuple, a dict or a single value, as for :class:`IndexableSource`."""

    def __init__(self, iterable: Iterable[Any], names: Sequence[str]) -> None:
        self.iterable = iterable
        self.names = list(names)

    def __iter__(self) -> Iterator[tuple[str, Sequence[Any] | Exception]]:
        kind = type(self.iterable).__name__
        for index, item in enumerate(self.iterable):
            name = f"item {index} of {kind}"
            try:
                yield name, sample_values(item, self.names)
            except (KeyError, TypeError) as exc:
                yield name, exc

    def length_hint(self) -> int | None:
        try:
            return len(self.iterable)  # type: ignore[arg-type]
        except TypeError:
            return None

    def repeatable(self) -> bool:
        """Not known of an arbitrary iterable (a generator yields its items once)."""
        return False

    def __repr__(self) -> str:
        return f"{type(self.iterable).__name__} (an iterable)"


def infer_fields(item: Any) -> dict[str, Any]:
    """Fields for samples like ``item``, a dict of values: JPEG bytes, PIL
    images, image dicts (``{"bytes", "path"}``) and uint8 ``(H, W, 3)``
    arrays -> :class:`~slipstream.RGBImageField`; integers ->
    :class:`~slipstream.IntField`; floats -> :class:`~slipstream.FloatField`;
    other arrays -> :class:`~slipstream.NDArrayField`; bytes ->
    :class:`~slipstream.BytesField`; text, lists and dicts ->
    :class:`~slipstream.JSONField`.

    Raises:
        ArgumentError: ``item`` is not a dict, or a value has none of these kinds.
    """
    from slipstream.fields import BytesField, FloatField, IntField, JSONField, NDArrayField, RGBImageField
    from slipstream.fields.image import JPEG_SOI

    if not isinstance(item, Mapping):
        raise ArgumentError(f"fields can be inferred from samples that are dicts, not from a {type(item).__name__}: "
                            f"pass fields=")
    fields: dict[str, Any] = {}
    for name, value in item.items():
        if isinstance(value, (bool, np.bool_)):
            fields[name] = IntField()
        elif isinstance(value, (int, np.integer)):
            fields[name] = IntField()
        elif isinstance(value, (float, np.floating)):
            fields[name] = FloatField()
        elif (isinstance(value, (bytes, bytearray)) and bytes(value[:3]) == JPEG_SOI[:3]) or \
                (isinstance(value, Mapping) and {"bytes", "path"} <= set(value)) or \
                type(value).__module__.startswith("PIL.") or \
                (isinstance(value, np.ndarray) and value.dtype == np.uint8 and value.ndim == 3 and value.shape[2] == 3):
            fields[name] = RGBImageField()
        elif isinstance(value, np.ndarray):
            fields[name] = NDArrayField(value.dtype, value.shape)
        elif isinstance(value, (bytes, bytearray)):
            fields[name] = BytesField()
        elif isinstance(value, (str, list, dict)) or value is None:
            fields[name] = JSONField()
        else:
            raise ArgumentError(f"no field type for {name!r}, a {type(value).__name__}: pass fields=")
    return fields


def default_array_field(array: np.ndarray) -> Any:
    """The field that stores rows of ``array``: IntField / FloatField for a
    1-D integer / float array, NDArrayField otherwise."""
    from slipstream.fields import FloatField, IntField, NDArrayField

    if array.ndim == 1 and array.dtype.kind in "iu":
        return IntField()
    if array.ndim == 1 and array.dtype.kind == "f":
        return FloatField()
    return NDArrayField(array.dtype, array.shape[1:])
