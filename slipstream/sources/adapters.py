"""Turning what users have into what the writer reads: a sequence of
samples, each a tuple with one value per field.  Each adapter here is a
:class:`~slipstream.sources.protocol.Source` whose samples are itself (or,
for a dict of arrays, its rows)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError
from slipstream.format.writer import SampleStream
from slipstream.sources.protocol import IdentifiedSource


def fields_required(source: Any) -> ArgumentError:
    """The error of a source that cannot tell its fields: they must be given."""
    return ArgumentError(f"fields must be given for a source of type {type(source).__name__}: "
                         f"fields={{'name': Field(), ...}} in the order of each sample's values")


def identity_of(source: Any) -> tuple[dict[str, Any], str] | None:
    """``(identity, name)`` of a source an adapter wraps, or None when it
    cannot identify itself (:class:`~slipstream.sources.protocol.IdentifiedSource`)."""
    if not isinstance(source, IdentifiedSource):
        return None
    identity = source.identity()
    return None if identity is None else (identity, source.cache_name())


class _Wrapper:
    """The source methods of an adapter around an object of the user's
    (:attr:`wrapped`) whose values say nothing of how to store them: the
    fields must be given, there is no dataset-wide metadata, and the
    identity is the object's own when it has one."""

    @property
    def wrapped(self) -> Any:
        """The user's object."""
        raise NotImplementedError

    def default_fields(self) -> dict[str, Any]:
        """None: the object's values say nothing of how to store them.

        Raises:
            ArgumentError: always (fields must be given).
        """
        raise fields_required(self.wrapped)

    def user_metadata(self) -> dict[str, Any]:
        """Nothing: the object carries no dataset-wide metadata."""
        return {}

    def identity(self) -> dict[str, Any] | None:
        """The object's identity, when it has one (see :mod:`slipstream.sources.identity`)."""
        found = identity_of(self.wrapped)
        return None if found is None else found[0]

    def cache_name(self) -> str:
        """The object's cache name, else its type's name."""
        found = identity_of(self.wrapped)
        return type(self.wrapped).__name__ if found is None else found[1]


class _Arrays:
    """The source methods arrays in memory share: no metadata, no identity."""

    def user_metadata(self) -> dict[str, Any]:
        """Nothing: arrays carry no dataset-wide metadata."""
        return {}

    def identity(self) -> None:
        """None: arrays in memory do not say what they hold (:func:`slipstream.cached` needs ``name=``)."""
        return None

    def cache_name(self) -> str:
        """``arrays``."""
        return "arrays"


class ArrayRows(_Arrays):
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

    def default_fields(self) -> dict[str, Any]:
        """None: arrays without names have no default fields.

        Raises:
            ArgumentError: always (fields must be given).
        """
        raise fields_required(self)

    def samples_for(self, fields: Mapping[str, Any]) -> ArrayRows:
        """Itself: one array per field.

        Raises:
            ArgumentError: there are not as many arrays as fields.
        """
        if len(self.arrays) != len(fields):
            raise ArgumentError(f"{len(self.arrays)} arrays for {len(fields)} fields")
        return self


class ArrayColumns(_Arrays):
    """Equal-length arrays by name (a dict of arrays) as a source: each
    field takes the array of its name; by default one field per array
    (:func:`default_array_field`)."""

    def __init__(self, arrays: Mapping[str, np.ndarray]) -> None:
        self.arrays = dict(arrays)

    def default_fields(self) -> dict[str, Any]:
        """One field per array, in the dict's order (:func:`default_array_field`)."""
        return {name: default_array_field(array) for name, array in self.arrays.items()}

    def samples_for(self, fields: Mapping[str, Any]) -> ArrayRows:
        """The rows of the arrays the fields name, in the fields' order.

        Raises:
            ArgumentError: a field names no array; the arrays have different lengths.
        """
        missing = [name for name in fields if name not in self.arrays]
        if missing:
            raise ArgumentError(f"fields {missing} have no array in the source (arrays: {list(self.arrays)})")
        return ArrayRows([self.arrays[name] for name in fields])


class IndexableSource(_Wrapper):
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

    @property
    def wrapped(self) -> Any:
        """The object with len() and [i] it reads."""
        return self.dataset

    def samples_for(self, fields: Mapping[str, Any]) -> IndexableSource:
        """Itself: its values are in the order of the names it was made with."""
        return self


class NamedSamples(IndexableSource):
    """The samples of a source whose items are dicts (such as
    :class:`~slipstream.sources.COCODetection`), as tuples of the values of
    the fields' names, in order; ``describe``, the default fields and the
    user metadata are the source's own (an image id and path rather than
    an item number)."""

    def describe(self, index: int) -> str:
        """The source's own description of sample ``index``."""
        return self.dataset.describe(index)

    def default_fields(self) -> dict[str, Any]:
        """The source's default fields."""
        return self.dataset.default_fields()

    def user_metadata(self) -> dict[str, Any]:
        """The source's user metadata."""
        return self.dataset.user_metadata()


def named_samples(dataset: Any, fields: Mapping[str, Any]) -> NamedSamples:
    """The :class:`NamedSamples` of ``dataset``, whose items are dicts of
    images with the boxes or masks drawn on them, for ``fields``.

    Raises:
        ArgumentError: a field resizes images: the boxes and masks are in
            the pixels of the images as they are.
    """
    for name, field in fields.items():
        if getattr(field, "max_resolution", None) is not None:  # RGBImageField's resizing
            raise ArgumentError(f"field {name!r} resizes images (max_resolution={field.max_resolution}), but "
                                f"the boxes and masks of a {type(dataset).__name__} are in the pixels of the "
                                f"images as they are: store them unresized")
    return NamedSamples(dataset, list(fields))


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


class IterableSource(_Wrapper, SampleStream):
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

    @property
    def wrapped(self) -> Any:
        """The iterable it reads."""
        return self.iterable

    def samples_for(self, fields: Mapping[str, Any]) -> IterableSource:
        """Itself: its values are in the order of the names it was made with."""
        return self

    def __repr__(self) -> str:
        return f"{type(self.iterable).__name__} (an iterable)"


class StreamSource(_Wrapper):
    """A :class:`~slipstream.format.writer.SampleStream` that is nothing
    more (a stream class of one's own) as a source: its samples are the
    stream, its fields must be given."""

    def __init__(self, stream: SampleStream) -> None:
        self.stream = stream

    @property
    def wrapped(self) -> Any:
        """The stream it reads."""
        return self.stream

    def samples_for(self, fields: Mapping[str, Any]) -> SampleStream:
        """The stream itself."""
        return self.stream


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
