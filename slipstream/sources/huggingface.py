"""Hugging Face ``datasets`` as sources: map-style ``Dataset`` objects
(random access) and ``IterableDataset`` objects, streaming ones included
(read in order).

Image columns are read undecoded (``Image(decode=False)``), so that JPEGs
keep their bytes; ``ClassLabel`` columns give integer labels, and their
class names are stored as ``classes`` in the dataset's user metadata, as
an image folder's are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slipstream.sources.adapters import IndexableSource, IterableSource, infer_fields


def is_huggingface(source: Any) -> bool:
    """Whether ``source`` is a ``datasets.Dataset`` or ``datasets.IterableDataset``."""
    return type(source).__module__.startswith("datasets.") and type(source).__name__ in ("Dataset", "IterableDataset")


def from_huggingface(dataset: Any, fields: Mapping[str, Any] | None) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """``(samples, fields, user metadata)`` for a Hugging Face dataset (see
    the module docstring).  ``fields`` defaults to one per column, inferred
    from the first sample (:func:`~slipstream.sources.adapters.infer_fields`)."""
    import datasets

    features = dataset.features or {}
    for name, feature in features.items():
        if isinstance(feature, datasets.Image) and feature.decode:
            dataset = dataset.cast_column(name, datasets.Image(decode=False))
    streamed = isinstance(dataset, datasets.IterableDataset)
    if fields is None:
        first = next(iter(dataset)) if streamed else dataset[0]
        fields = infer_fields(first)
    fields = dict(fields)
    labels = [name for name in fields if isinstance(features.get(name), datasets.ClassLabel)]
    meta = {"classes": list(features[labels[0]].names)} if len(labels) == 1 else {}
    samples = IterableSource(dataset, list(fields)) if streamed else IndexableSource(dataset, list(fields))
    return samples, fields, meta
