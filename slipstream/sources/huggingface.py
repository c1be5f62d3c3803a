"""Hugging Face ``datasets`` as sources: map-style ``Dataset`` objects
(random access) and ``IterableDataset`` objects, streaming ones included
(read in order).

A streaming dataset says how many samples it holds when its card records
the split's ``num_examples`` (as the Hub's dataset cards do) and nothing
done to the dataset since can change how many it yields; a loader's first
epoch then streams from it (see :mod:`slipstream.loader.first_epoch`).

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
    samples = HuggingFaceStream(dataset, list(fields)) if streamed else IndexableSource(dataset, list(fields))
    return samples, fields, meta


class HuggingFaceStream(IterableSource):
    """The samples of a Hugging Face ``IterableDataset``, in order; its
    length is :func:`stated_length`'s."""

    def length_hint(self) -> int | None:
        return stated_length(self.iterable)


def stated_length(dataset: Any) -> int | None:
    """How many examples an ``IterableDataset`` yields, as its card records
    them (``info.splits[split].num_examples``), or None when it records
    none or something done to the dataset since may yield another number:
    ``filter``, ``take``, ``skip``, a batched ``map``, a split by node,
    concatenation, interleaving, repetition.  Shuffling, casting, selecting
    columns and a ``map`` of one example to one keep the number."""
    from datasets import iterable_dataset as iterable

    splits, split = dataset.info.splits, dataset.split
    if not splits or split is None or str(split) not in splits or dataset._distributed is not None:
        return None
    count = splits[str(split)].num_examples
    if not count:  # datasets records 0 where it does not know
        return None
    keeping = tuple(getattr(iterable, name) for name in _KEEPING_COUNT if hasattr(iterable, name))
    examples = dataset._ex_iterable
    while examples is not None:
        # Exact types: a subclass may yield another number (a filter is a map that drops examples).
        kind = type(examples)
        if kind is iterable.MappedExamplesIterable:
            if examples.batched:  # a batch can come back with any number of examples
                return None
        elif kind is iterable.RebatchedArrowExamplesIterable:
            if examples.drop_last_batch:
                return None
        elif kind not in keeping:
            return None
        examples = getattr(examples, "ex_iterable", None)  # the examples iterable it wraps, if any
    return int(count)


_KEEPING_COUNT = ("ExamplesIterable", "ArrowExamplesIterable", "ShuffledDataSourcesExamplesIterable",
                  "ShuffledDataSourcesArrowExamplesIterable", "InterleavedShardsExamplesIterable",
                  "BufferShuffledExamplesIterable", "FormattedExamplesIterable", "SelectColumnsIterable",
                  "TypedExamplesIterable")
"""The examples iterables of ``datasets`` that yield as many examples as
the one they wrap, or (sources) as the files hold (names: some exist only
in some versions)."""


def huggingface_identity(dataset: Any) -> tuple[dict[str, Any], str] | None:
    """``(identity, name)`` of a Hugging Face dataset for
    :func:`slipstream.cached`, or None when it has none to give.

    A map-style ``Dataset`` is identified by its fingerprint, which
    ``datasets`` derives from the data it was loaded from and every
    transform applied since.  An ``IterableDataset`` (streaming) has no
    fingerprint: it is identified by its builder, configuration, version and
    split and the files it streams (a local file with its size and
    modification time; a Hub file by its URL, which names the revision),
    when ``datasets`` records them; one made from a generator or a Python
    object records none, and gets None.
    """
    import datasets

    info = dataset.info
    name = info.dataset_name or info.builder_name or "huggingface"
    split = str(dataset.split) if dataset.split is not None else None
    if isinstance(dataset, datasets.Dataset):
        return {"huggingface": dataset._fingerprint, "split": split}, name
    files = _streamed_files(dataset)
    if not files or not info.builder_name:
        return None
    return {"huggingface-stream": info.builder_name, "config": info.config_name, "version": str(info.version),
            "split": split, "files": files}, name


def _streamed_files(dataset: Any) -> list[Any]:
    """The files an ``IterableDataset`` reads, as ``datasets`` records them
    for its examples iterable, each local one with its size and modification
    time; [] when it records none."""
    import os

    from slipstream.format.remote import is_url

    kwargs = getattr(dataset._ex_iterable, "kwargs", None) or {}
    listed = kwargs.get("files") or []
    files: list[Any] = []
    for entry in listed:
        for path in (entry if isinstance(entry, (list, tuple)) else [entry]):
            text = str(path)
            if is_url(text) or "://" in text or not os.path.exists(text):
                files.append(text)
            else:
                stat = os.stat(text)
                files.append([os.path.realpath(text), stat.st_size, stat.st_mtime_ns])
    return files
