"""Any source :func:`slipstream.write` takes, as the samples the writer
reads, their fields and the dataset's user metadata: the built-in kinds of
source, registered in the order they are tried
(:mod:`slipstream.sources.registry`), and :func:`as_source`, which reads a
source of any registered kind."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError
from slipstream.format.writer import SampleStream
from slipstream.sources.adapters import (
    ArrayColumns,
    ArrayRows,
    IndexableSource,
    IterableSource,
    NamedSamples,
    StreamSource,
    fields_required,
)
from slipstream.sources.clips import VideoClips
from slipstream.sources.coco import COCODetection
from slipstream.sources.folders import ImageFolder
from slipstream.sources.huggingface import HuggingFaceSource, is_huggingface
from slipstream.sources.litdata import LitData
from slipstream.sources.paths import source_at
from slipstream.sources.protocol import Source, WriterInput, writer_input
from slipstream.sources.registry import adapt, register_source
from slipstream.sources.segmentation import SegmentationFolder
from slipstream.sources.webdataset import WebDataset

__all__ = ["NamedSamples", "as_source"]


def as_source(source: Any, fields: Mapping[str, Any] | None) -> WriterInput:
    """``(samples, fields, user metadata)`` for a source given to
    :func:`slipstream.write`: a path (an image folder, tar shards or a
    LitData dataset, see :func:`~slipstream.sources.paths.source_at`), an :class:`ImageFolder`,
    a NumPy array, a tuple/list or dict of equal-length arrays, a
    :class:`~slipstream.sources.COCODetection` or
    :class:`~slipstream.sources.SegmentationFolder`, a
    :class:`~slipstream.sources.WebDataset`, a Hugging Face dataset, a
    :class:`~slipstream.sources.LitData` dataset, any object with ``len()``
    and ``[i]``, any iterable, or an object of a kind registered with
    :func:`~slipstream.sources.register_source`.  ``fields`` may be omitted
    for folders, dicts of arrays, tar shards, and datasets whose samples
    are dicts (any source whose :meth:`~slipstream.sources.Source.default_fields` tells).

    Raises:
        ArgumentError: no registered kind takes ``source`` (the message
            lists those that do), or its fields must be given.
    """
    return writer_input(adapt(source, fields), fields)


# ---------------------------------------------------------------- the built-in kinds, in the order they are tried


def _at_path(path: str | os.PathLike, fields: Mapping[str, Any] | None) -> Source:
    """The source at ``path`` (:func:`~slipstream.sources.paths.source_at`), read as its own kind."""
    return adapt(source_at(path), fields)


def _is_dict_of_arrays(source: Any) -> bool:
    """Whether ``source`` maps names to NumPy arrays."""
    return isinstance(source, Mapping) and all(isinstance(a, np.ndarray) for a in source.values())


def _is_arrays(source: Any) -> bool:
    """Whether ``source`` is a NumPy array, or a non-empty tuple or list of them."""
    return isinstance(source, np.ndarray) or (
        isinstance(source, (tuple, list)) and bool(source) and all(isinstance(a, np.ndarray) for a in source))


def _arrays(source: np.ndarray | Sequence[np.ndarray], fields: Mapping[str, Any] | None) -> ArrayRows:
    """Rows of an array (one field) or of a tuple or list of arrays (one per field, in order)."""
    if fields is None:
        raise fields_required(source)
    arrays = (source,) if isinstance(source, np.ndarray) else source
    if len(arrays) != len(fields):
        raise ArgumentError(f"{len(arrays)} arrays for {len(fields)} fields")
    return ArrayRows(arrays)


def _is_indexable(source: Any) -> bool:
    """Whether ``source`` has ``len()`` and ``[i]``."""
    return isinstance(source, Sequence) or (hasattr(source, "__len__") and hasattr(source, "__getitem__"))


def _indexable(source: Any, fields: Mapping[str, Any] | None) -> IndexableSource:
    """An object with ``len()`` and ``[i]``, read by field name or in field order."""
    if fields is None:
        raise fields_required(source)
    return IndexableSource(source, list(fields))


def _iterable(source: Iterable[Any], fields: Mapping[str, Any] | None) -> IterableSource:
    """An iterable, read once in order, by field name or in field order."""
    if fields is None:
        raise fields_required(source)
    return IterableSource(source, list(fields))


def _stream(source: SampleStream, fields: Mapping[str, Any] | None) -> StreamSource:
    """A stream of one's own, whose values are in field order."""
    if fields is None:
        raise fields_required(source)
    return StreamSource(source)


def _dict_of_arrays(arrays: Mapping[str, np.ndarray], fields: Mapping[str, Any] | None) -> ArrayColumns:
    """Equal-length arrays by name: each field takes the array of its name."""
    return ArrayColumns(arrays)


def _register_built_in_kinds() -> None:
    """Register the kinds above, in the order they are tried: each
    specific kind before the catch-alls (any object with ``len()`` and
    ``[i]``, any iterable) that would take it too."""
    for kind, adapter, description in [
        ((str, os.PathLike), _at_path, "a path (an image folder, tar shards or a LitData dataset)"),
        ((ImageFolder, VideoClips), None, "an ImageFolder, a VideoFolder or VideoClips"),
        ((COCODetection, SegmentationFolder), None, "a COCODetection or a SegmentationFolder"),
        (WebDataset, None, "a WebDataset"),
        (is_huggingface, HuggingFaceSource, "a Hugging Face dataset"),
        (_is_dict_of_arrays, _dict_of_arrays, "a dict of arrays"),
        (LitData, None, "a LitData dataset"),
        (_is_arrays, _arrays, "an array or a tuple/list of arrays"),
        ((ArrayRows, ArrayColumns, IndexableSource, IterableSource, StreamSource), None,
         "an ArrayRows, IndexableSource or IterableSource"),
        (SampleStream, _stream, "a SampleStream"),
        (_is_indexable, _indexable, "an object with len() and [i]"),
        (Iterable, _iterable, "an iterable"),
    ]:
        register_source(kind, adapter, description=description, last=True)


_register_built_in_kinds()
