"""Hugging Face ``datasets`` as sources: map-style ``Dataset`` objects
(random access) and ``IterableDataset`` objects, streaming ones included
(read in order).

A streaming dataset says how many samples it holds when its card records
the split's ``num_examples`` (as the Hub's dataset cards do) or its parquet
files' footers count their rows, and nothing done to the dataset since can
change how many it yields; a loader's first epoch then streams from it (see
:mod:`slipstream.loader.first_epoch`).

Image columns are read undecoded (``Image(decode=False)``), so that JPEGs
keep their bytes; ``ClassLabel`` columns give integer labels, and their
class names are stored as ``classes`` in the dataset's user metadata, as
an image folder's are.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slipstream.sources.adapters import IndexableSource, IterableSource, infer_fields
from slipstream.sources.protocol import writer_input


def is_huggingface(source: Any) -> bool:
    """Whether ``source`` is a ``datasets.Dataset`` or ``datasets.IterableDataset``."""
    return type(source).__module__.startswith("datasets.") and type(source).__name__ in ("Dataset", "IterableDataset")


def from_huggingface(dataset: Any, fields: Mapping[str, Any] | None) -> tuple[Any, dict[str, Any], dict[str, Any]]:
    """``(samples, fields, user metadata)`` for a Hugging Face dataset (see
    :class:`HuggingFaceSource`)."""
    return writer_input(HuggingFaceSource(dataset, fields), fields)


class HuggingFaceSource:
    """A Hugging Face ``Dataset`` or ``IterableDataset`` as a source (see
    the module docstring): its image columns read undecoded, its samples
    random access for a ``Dataset`` and a stream (:class:`HuggingFaceStream`)
    for an ``IterableDataset``.

    Args:
        dataset: the dataset.
        fields: the fields it is to be written with, when given: the class
            names stored (:meth:`user_metadata`) are those of the one
            ``ClassLabel`` column among them.
    """

    def __init__(self, dataset: Any, fields: Mapping[str, Any] | None = None) -> None:
        import datasets

        self.given = dataset
        """The dataset as given: what identifies it (casting a column changes a ``Dataset``'s fingerprint)."""
        self.features = dataset.features or {}
        for name, feature in self.features.items():
            if isinstance(feature, datasets.Image) and feature.decode:
                dataset = dataset.cast_column(name, datasets.Image(decode=False))
        self.dataset = dataset
        self.streamed = isinstance(dataset, datasets.IterableDataset)
        self.fields = None if fields is None else dict(fields)
        self._defaults: dict[str, Any] | None = None

    def default_fields(self) -> dict[str, Any]:
        """One field per column: an :class:`~slipstream.RGBImageField` for
        an ``Image`` feature, an :class:`~slipstream.IntField` for a
        ``ClassLabel``, any other inferred from the first sample
        (:func:`~slipstream.sources.adapters.infer_fields`), which is read
        once."""
        if self._defaults is None:
            import datasets

            from slipstream.fields import IntField, RGBImageField

            first = next(iter(self.dataset)) if self.streamed else self.dataset[0]
            # A column's feature says what it holds, where its first value may be None.
            self._defaults = {name: RGBImageField() if isinstance(self.features.get(name), datasets.Image) else
                              IntField() if isinstance(self.features.get(name), datasets.ClassLabel) else field
                              for name, field in infer_fields(first).items()}
        return dict(self._defaults)

    def user_metadata(self) -> dict[str, Any]:
        """``classes``, the names of the ``ClassLabel`` column's classes,
        when exactly one of the fields written is such a column."""
        import datasets

        labels = [name for name in self.fields or self.default_fields()
                  if isinstance(self.features.get(name), datasets.ClassLabel)]
        return {"classes": list(self.features[labels[0]].names)} if len(labels) == 1 else {}

    def identity(self) -> dict[str, Any] | None:
        """The dataset's identity (:func:`huggingface_identity`), None when it has none."""
        found = huggingface_identity(self.given)
        return None if found is None else found[0]

    def cache_name(self) -> str:
        """The dataset's name, or its builder's."""
        info = self.given.info
        return info.dataset_name or info.builder_name or "huggingface"

    def samples_for(self, fields: Mapping[str, Any]) -> IndexableSource | HuggingFaceStream:
        """The dataset's rows, as the values of ``fields``' columns in order."""
        if self.streamed:
            return HuggingFaceStream(self.dataset, list(fields))
        return IndexableSource(self.dataset, list(fields))


class HuggingFaceStream(IterableSource):
    """The samples of a Hugging Face ``IterableDataset``, in order; its
    length is :func:`known_length`'s."""

    def length_hint(self) -> int | None:
        return known_length(self.iterable)

    def repeatable(self) -> bool:
        """Unless shuffled (``shuffle()``, whose order may differ between
        processes and epochs)."""
        from datasets import iterable_dataset as iterable

        shuffles = tuple(getattr(iterable, name) for name in _SHUFFLING if hasattr(iterable, name))
        examples = self.iterable._ex_iterable
        while examples is not None:
            if isinstance(examples, shuffles):
                return False
            examples = getattr(examples, "ex_iterable", None)
        return True

    def __repr__(self) -> str:
        info = self.iterable.info
        return f"Hugging Face streaming dataset {info.dataset_name or info.builder_name!r} ({self.iterable.split})"


def known_length(dataset: Any) -> int | None:
    """How many examples an ``IterableDataset`` yields, when that is known
    without reading them: as its card records them
    (``info.splits[split].num_examples``), else, for parquet files read
    whole (no ``filters``), as their footers count their rows.  None when
    neither tells, or something done to the dataset since may yield
    another number: ``filter``, ``take``, ``skip``, a batched ``map``, a
    split by node, concatenation, interleaving, repetition.  Shuffling,
    casting, selecting columns and a ``map`` of one example to one keep
    the number."""
    from datasets import iterable_dataset as iterable

    if dataset._distributed is not None:
        return None
    keeping = tuple(getattr(iterable, name) for name in _KEEPING_COUNT if hasattr(iterable, name))
    examples = dataset._ex_iterable
    while True:
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
        inner = getattr(examples, "ex_iterable", None)  # the examples iterable it wraps, if any
        if inner is None:
            break
        examples = inner
    return _parquet_rows(examples) or _card_count(dataset, examples)


def _card_count(dataset: Any, examples: Any) -> int | None:
    """The split's ``num_examples`` on the dataset's card, if recorded
    (datasets records 0 where it does not know) and the examples iterable
    ``examples`` reads the split's data files, all of them (not a
    ``shard()``)."""
    splits, split = dataset.info.splits, dataset.split
    if not splits or split is None or str(split) not in splits:
        return None
    builder = _builder(examples)
    data_files = getattr(getattr(builder, "config", None), "data_files", None) or {}
    read = _files_read(examples)
    if not read or str(split) not in data_files or \
            sorted(map(str, read)) != sorted(map(str, data_files[str(split)])):
        return None
    return int(splits[str(split)].num_examples) or None


def _files_read(examples: Any) -> list[Any]:
    """The files a source examples iterable reads, as ``datasets`` passes
    them to its builder (``files`` for parquet and arrow, ``base_files``
    for JSON, CSV and text); [] when it records none."""
    kwargs = getattr(examples, "kwargs", None) or {}
    return list(kwargs.get("files") or kwargs.get("base_files") or [])


def _builder(examples: Any) -> Any:
    """The dataset builder whose method a source examples iterable calls, or None."""
    method = getattr(examples, "generate_tables_fn", None) or getattr(examples, "generate_examples_fn", None)
    return getattr(method, "__self__", None)


def _parquet_rows(examples: Any) -> int | None:
    """The rows of the parquet files the examples iterable ``examples``
    reads whole, counted from their footers (read in parallel; a URL
    through ``fsspec``); None for another builder, parquet read with
    ``filters`` or skipping bad files, or a footer that cannot be read."""
    builder = _builder(examples)
    if type(builder).__name__ != "Parquet":
        return None
    config = builder.config
    if getattr(config, "filters", None) is not None or getattr(config, "on_bad_files", "error") != "error":
        return None
    files = _files_read(examples)
    groups = list((getattr(examples, "kwargs", None) or {}).get("row_groups_list") or [None] * len(files))
    if not files or len(groups) != len(files):
        return None

    def rows(file: Any, row_groups: Any) -> int:
        import fsspec
        import pyarrow.parquet as pq

        with fsspec.open(str(file), "rb") as handle:
            metadata = pq.ParquetFile(handle).metadata
            if row_groups is None:
                return int(metadata.num_rows)
            return sum(int(metadata.row_group(g).num_rows) for g in row_groups)

    from concurrent.futures import ThreadPoolExecutor

    try:
        with ThreadPoolExecutor(min(16, len(files)), thread_name_prefix="slipstream-parquet") as pool:
            return sum(pool.map(rows, files, groups))
    except Exception:  # a footer that cannot be read: the count is not known (reading the dataset says why)
        return None


_KEEPING_COUNT = ("ExamplesIterable", "ArrowExamplesIterable", "ShuffledDataSourcesExamplesIterable",
                  "ShuffledDataSourcesArrowExamplesIterable", "InterleavedShardsExamplesIterable",
                  "BufferShuffledExamplesIterable", "FormattedExamplesIterable", "SelectColumnsIterable",
                  "TypedExamplesIterable")
"""The examples iterables of ``datasets`` that yield as many examples as
the one they wrap, or (sources) as the files hold (names: some exist only
in some versions)."""

_SHUFFLING = ("BufferShuffledExamplesIterable", "InterleavedShardsExamplesIterable",
              "ShuffledDataSourcesExamplesIterable", "ShuffledDataSourcesArrowExamplesIterable")
"""The examples iterables of ``datasets`` that shuffle."""


def huggingface_identity(dataset: Any) -> tuple[dict[str, Any], str] | None:
    """``(identity, name)`` of a Hugging Face dataset for
    :func:`slipstream.cached`, or None when it has none to give.

    A map-style ``Dataset`` is identified by its fingerprint, which
    ``datasets`` derives from the data it was loaded from and every
    transform applied since.  An ``IterableDataset`` (streaming) has no
    fingerprint: it is identified by its builder, configuration (with the
    options the builder was given), version and split and the files it
    streams (a local file with its size and modification time; a Hub file
    by its URL, which names the revision), when ``datasets`` records them;
    one made from a generator or a Python object records none, and gets
    None, as does one transformed after it was loaded (columns selected or
    renamed, a map, a shuffle).  Its features (which a cast changes) and,
    when it is split by node (``split_dataset_by_node``), its rank and
    world size are part of it: each changes what it yields.
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
    features = info.features.to_dict() if info.features is not None else None
    node = dataset._distributed
    # The builder's options (parquet's filters, CSV's separator...) change the examples, not the config's name.
    config = getattr(_builder(dataset._ex_iterable), "config_id", None) or info.config_name
    return {"huggingface-stream": info.builder_name, "config": config, "version": str(info.version),
            "split": split, "files": files, "features": features,
            "node": None if node is None else [node.rank, node.world_size]}, name


def _streamed_files(dataset: Any) -> list[Any]:
    """The files an ``IterableDataset`` reads, as ``datasets`` records them
    for its examples iterable, each local one with its size and modification
    time; [] when it records none."""
    import os

    from slipstream.format.remote import is_url

    listed = _files_read(dataset._ex_iterable)
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
