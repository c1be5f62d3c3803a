"""Any source :func:`slipstream.write` takes, as the samples the writer
reads, their fields and the dataset's user metadata: the one place that
knows every kind of source, so that the adapters of each kind need not
know each other."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError
from slipstream.format.writer import SampleStream
from slipstream.sources.adapters import (
    ArrayRows,
    IndexableSource,
    IterableSource,
    default_array_field,
    infer_fields,
)
from slipstream.sources.coco import COCODetection
from slipstream.sources.folders import ImageFolder
from slipstream.sources.huggingface import from_huggingface, is_huggingface
from slipstream.sources.litdata import LitData
from slipstream.sources.paths import source_at
from slipstream.sources.segmentation import SegmentationFolder
from slipstream.sources.webdataset import WebDataset

_NAMED_SOURCES = (COCODetection, SegmentationFolder)
"""Sources whose samples are dicts of their :meth:`default_fields`' names."""


class NamedSamples(IndexableSource):
    """The samples of a source whose items are dicts (such as
    :class:`~slipstream.sources.COCODetection`), as tuples of the values of
    the fields' names, in order; ``describe`` is the source's own (an image
    id and path rather than an item number)."""

    def describe(self, index: int) -> str:
        """The source's own description of sample ``index``."""
        return self.dataset.describe(index)


def as_source(source: Any, fields: Mapping[str, Any] | None) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """``(samples, fields, user metadata)`` for a source given to
    :func:`slipstream.write`: a path (an image folder, tar shards or a
    LitData dataset, see :func:`~slipstream.sources.paths.source_at`), an :class:`ImageFolder`,
    a NumPy array, a tuple/list or dict of equal-length arrays, a
    :class:`~slipstream.sources.COCODetection` or
    :class:`~slipstream.sources.SegmentationFolder`, a
    :class:`~slipstream.sources.WebDataset`, a Hugging Face dataset, a
    :class:`~slipstream.sources.LitData` dataset, any object with ``len()``
    and ``[i]``, or any iterable.  ``fields`` may be omitted for folders,
    dicts of arrays, tar shards, and datasets whose samples are dicts."""
    if isinstance(source, (str, os.PathLike)):
        source = source_at(source)
    if isinstance(source, ImageFolder):
        return source, dict(fields or source.default_fields()), source.user_metadata()
    if isinstance(source, _NAMED_SOURCES):
        fields = dict(fields or source.default_fields())
        for name, field in fields.items():
            if getattr(field, "max_resolution", None) is not None:  # RGBImageField's resizing
                raise ArgumentError(f"field {name!r} resizes images (max_resolution={field.max_resolution}), but "
                                    f"the boxes and masks of a {type(source).__name__} are in the pixels of the "
                                    f"images as they are: store them unresized")
        return NamedSamples(source, list(fields)), fields, source.user_metadata()
    if isinstance(source, WebDataset):
        if fields is not None and dict(fields) != source.fields:
            source = source.with_fields(fields)
        return source, source.fields, {}
    if is_huggingface(source):
        return from_huggingface(source, fields)
    if isinstance(source, Mapping) and all(isinstance(a, np.ndarray) for a in source.values()):
        fields = dict(fields or {name: default_array_field(a) for name, a in source.items()})
        missing = [n for n in fields if n not in source]
        if missing:
            raise ArgumentError(f"fields {missing} have no array in the source (arrays: {list(source)})")
        return ArrayRows([source[n] for n in fields]), fields, {}
    if fields is None and isinstance(source, LitData):
        fields = infer_fields(source[0])
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
    if isinstance(source, SampleStream):
        return source, fields, {}
    if isinstance(source, Sequence) or (hasattr(source, "__len__") and hasattr(source, "__getitem__")):
        return IndexableSource(source, list(fields)), fields, {}
    if isinstance(source, Iterable):
        return IterableSource(source, list(fields)), fields, {}
    raise ArgumentError(f"cannot write from a {type(source).__name__}: give an image folder, arrays, tar shards, an "
                        f"object with len() and [i], or an iterable")
