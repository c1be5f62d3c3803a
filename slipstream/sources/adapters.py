"""Turning what users have into what the writer reads: a sequence of
samples, each a tuple with one value per field."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError
from slipstream.sources.folders import ImageFolder


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
        item = self.dataset[index]
        if isinstance(item, Mapping):
            missing = [n for n in self.names if n not in item]
            if missing:
                raise KeyError(f"the sample has no {', '.join(map(repr, missing))} (its keys: "
                               f"{', '.join(map(repr, item))})")
            return tuple(item[n] for n in self.names)
        if isinstance(item, (tuple, list)):
            return tuple(item)
        if len(self.names) == 1:
            return (item,)
        raise TypeError(f"a sample is a {type(item).__name__}; with {len(self.names)} fields it must be a tuple, "
                        f"a list or a dict")

    def describe(self, index: int) -> str:
        """``item i of DatasetClass``, for error messages."""
        return f"item {index} of {type(self.dataset).__name__}"


def as_source(source: Any, fields: Mapping[str, Any] | None) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """``(samples, fields, user metadata)`` for a source given to
    :func:`slipstream.write`: an image folder path, an :class:`ImageFolder`,
    a NumPy array, a tuple/list or dict of arrays, or an indexable dataset.
    ``fields`` may be omitted for folders and dicts of arrays."""
    if isinstance(source, (str, os.PathLike)):
        source = ImageFolder(Path(source))
    if isinstance(source, ImageFolder):
        return source, dict(fields or source.default_fields()), source.user_metadata()
    if isinstance(source, Mapping) and all(isinstance(a, np.ndarray) for a in source.values()):
        fields = dict(fields or {name: default_array_field(a) for name, a in source.items()})
        missing = [n for n in fields if n not in source]
        if missing:
            raise ArgumentError(f"fields {missing} have no array in the source (arrays: {list(source)})")
        return ArrayRows([source[n] for n in fields]), fields, {}
    if fields is None:
        raise ArgumentError(f"fields must be given for a source of type {type(source).__name__}: "
                            f"fields={{'name': Field(), ...}} in the order of each sample's values")
    fields = dict(fields)
    if isinstance(source, np.ndarray):
        source = (source,)
    if isinstance(source, (tuple, list)) and source and all(isinstance(a, np.ndarray) for a in source):
        if len(source) != len(fields):
            raise ArgumentError(f"{len(source)} arrays for {len(fields)} fields")
        return ArrayRows(source), fields, {}
    if not (hasattr(source, "__len__") and hasattr(source, "__getitem__")):
        raise ArgumentError(f"cannot write from a {type(source).__name__}: give an image folder, arrays, or an "
                            f"object with len() and [i]")
    return IndexableSource(source, list(fields)), fields, {}


def default_array_field(array: np.ndarray) -> Any:
    """The field that stores rows of ``array``: IntField / FloatField for a
    1-D integer / float array, NDArrayField otherwise."""
    from slipstream.fields import FloatField, IntField, NDArrayField

    if array.ndim == 1 and array.dtype.kind in "iu":
        return IntField()
    if array.ndim == 1 and array.dtype.kind == "f":
        return FloatField()
    return NDArrayField(array.dtype, array.shape[1:])
