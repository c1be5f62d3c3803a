"""Ray Data datasources: WebDataset tar shards and LitData optimized
datasets read by slipstream's own sources
(:class:`slipstream.sources.WebDataset`, :class:`slipstream.sources.LitData`),
so that a conversion on Ray maps samples to fields exactly as
:func:`slipstream.write` does on one machine.

Each source's natural unit (a tar shard, a LitData chunk) is one read task,
and Ray is asked for exactly that many blocks: then it does not split the
tasks' output, and each read task is fused with the write task after it, so
that a task reads one unit and writes one part, with no copy of the samples
through Ray's object store in between.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from ray.data import Dataset, read_datasource
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask

from slipstream.format.remote import Remote, absolute
from slipstream.sources.adapters import infer_fields, sample_values
from slipstream.sources.litdata import LitData
from slipstream.sources.webdataset import WebDataset

ROWS_PER_BLOCK = 256
"""Rows in each block a read task yields."""

KEY = "__key__"
"""The column naming each row's sample (``shard: key``, ``item i of ...``), used in error messages."""

ERROR = "__error__"
"""The column saying why a row's sample could not be read (empty when it could)."""

Samples = Iterable[tuple[str, "Sequence[Any] | Exception"]]


class _UnitsSource(Datasource):
    """A datasource with one read task per unit of a source, each yielding
    the unit's samples as rows: one column per field, plus :data:`KEY` and
    :data:`ERROR`."""

    def __init__(self, names: Sequence[str], units: Sequence[Any], read: Callable[[Any], Samples],
                 kind: str) -> None:
        super().__init__()
        self.names, self.units, self.read, self.kind = list(names), list(units), read, kind

    def estimate_inmemory_data_size(self) -> int | None:
        return None

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                       data_context: Any = None) -> list[ReadTask]:
        return [ReadTask(_ReadUnit(self.names, self.read, unit), BlockMetadata(None, None, None, (str(unit),)),
                         per_task_row_limit=per_task_row_limit)
                for unit in self.units]

    def get_name(self) -> str:
        return self.kind


class _ReadUnit:
    """A read task's function: the blocks of one unit's samples."""

    def __init__(self, names: list[str], read: Callable[[Any], Samples], unit: Any) -> None:
        self.names, self.read, self.unit = names, read, unit

    def __call__(self) -> Iterator[Any]:
        columns: dict[str, list[Any]] = {name: [] for name in [*self.names, KEY, ERROR]}
        values_of = [columns[name] for name in self.names]
        for key, values in self.read(self.unit):
            if not isinstance(values, Exception) and len(values) != len(self.names):
                values = ValueError(f"{len(values)} values for the {len(self.names)} fields "
                                    f"{', '.join(map(repr, self.names))}")
            failed = isinstance(values, Exception)
            for column, value in zip(values_of, (None,) * len(self.names) if failed else values):
                column.append(value)
            columns[KEY].append(key)
            columns[ERROR].append(f"{type(values).__name__}: {values}" if failed else "")
            if len(columns[KEY]) == ROWS_PER_BLOCK:
                yield _frame(columns)
                for column in columns.values():
                    column.clear()
        if columns[KEY]:
            yield _frame(columns)


def _frame(columns: dict[str, list[Any]]) -> Any:
    """A block of ``columns``, with the values as the source gave them.

    Columns of bytes, integers or text (with None for unreadable rows) go
    into an Arrow table, which Ray stores and hands to the encoding task
    without pickling each value; a block with any other value (a JSON
    object, an array) is a pandas frame of object columns, so that no value
    is changed by type inference (an integer column with a missing value
    stays integers, not floats)."""
    import pandas as pd
    import pyarrow as pa

    types = {name: _arrow_type(values) for name, values in columns.items()}
    if all(t is not None for t in types.values()):
        return pa.table({name: pa.array(values, types[name]) for name, values in columns.items()})
    return pd.DataFrame({name: pd.Series(values, dtype=object) for name, values in columns.items()})


def _arrow_type(values: list[Any]) -> Any:
    """The Arrow type that holds ``values`` exactly, if they are all bytes,
    all integers or all text (None allowed); else None."""
    import pyarrow as pa

    kinds = {type(v) for v in values if v is not None}
    if not kinds:
        return pa.null()
    if kinds == {bytes}:
        return pa.large_binary()
    if kinds == {int} and all(-2**63 <= v < 2**63 for v in values if v is not None):
        return pa.int64()
    if kinds == {str}:
        return pa.large_string()
    return None


def _read(datasource: _UnitsSource, concurrency: int | None) -> Dataset:
    """The dataset of ``datasource``: one block sequence per unit, unsplit."""
    return read_datasource(datasource, override_num_blocks=max(1, len(datasource.units)), concurrency=concurrency)


class WebDatasetSource(_UnitsSource):
    """The samples of WebDataset tar shards as rows, one read task per
    shard.  See :func:`read_webdataset`."""

    def __init__(self, source: WebDataset) -> None:
        super().__init__(list(source.fields), [absolute(shard) for shard in source.shards], source.read_shard,
                         "SlipstreamWebDataset")
        self.source = source


def read_webdataset(shards: str | Sequence[str] | WebDataset, fields: Mapping[str, Any] | None = None,
                    members: Mapping[str, str] | None = None, remote: Remote | None = None, *,
                    concurrency: int | None = None) -> Dataset:
    """A Ray ``Dataset`` of WebDataset tar shards (arguments as for
    :class:`slipstream.sources.WebDataset`), one read task per shard, ready
    for :func:`slipstream.ray.write` with the same fields::

        source = slipstream.WebDataset("s3://bucket/train/{000000..000099}.tar")
        slipstream.ray.write(slipstream.ray.read_webdataset(source), "s3://bucket/train-slip", source.fields)

    ``shards`` may also be a :class:`~slipstream.sources.WebDataset`.
    ``concurrency`` is the most read tasks at once (default: Ray's choice);
    give :func:`slipstream.ray.write` the same, so that Ray runs each read
    task and its write as one task.
    """
    source = shards if isinstance(shards, WebDataset) else WebDataset(shards, fields, members, remote)
    return _read(WebDatasetSource(source), concurrency)


class LitDataSource(_UnitsSource):
    """The items of a LitData optimized dataset as rows, one read task per
    chunk.  See :func:`read_litdata`."""

    def __init__(self, source: LitData, names: Sequence[str], options: Mapping[str, Any]) -> None:
        items = _LitDataItems(absolute(source.input_dir), list(names), dict(options))
        super().__init__(names, source.chunk_ranges(), items, "SlipstreamLitData")


class _LitDataItems:
    """The samples of a range of LitData items, opening the dataset once
    per process (a read task's function; picklable, unlike the dataset)."""

    def __init__(self, input_dir: str, names: list[str], options: dict[str, Any]) -> None:
        self.input_dir, self.names, self.options = input_dir, names, options
        self._source: LitData | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_source": None}

    def __call__(self, items: tuple[int, int]) -> Samples:
        if self._source is None:
            self._source = LitData(self.input_dir, **self.options)
        for index in range(*items):
            name = self._source.describe(index)
            try:
                yield name, sample_values(self._source[index], self.names)
            except Exception as exc:  # a damaged item is a sample error (on_error), not a failed task
                yield name, exc


def read_litdata(input_dir: str, fields: Mapping[str, Any] | None = None, *, concurrency: int | None = None,
                 **options: Any) -> Dataset:
    """A Ray ``Dataset`` of a LitData optimized dataset (a folder or URL, as
    for :class:`slipstream.sources.LitData`), one read task per chunk, with a
    column per field, ready for :func:`slipstream.ray.write`::

        fields = {"image": slipstream.RGBImageField(), "label": slipstream.IntField()}
        slipstream.ray.write(slipstream.ray.read_litdata("s3://bucket/train-lit", fields),
                             "s3://bucket/train-slip", fields)

    Args:
        input_dir: the dataset's folder or URL.
        fields: the fields the items' values go to, in order for items that
            are tuples; by default inferred from the first item, a dict
            (:func:`slipstream.sources.infer_fields`).  Only their names are
            used here.
        concurrency: the most read tasks at once, as for :func:`read_webdataset`.
        **options: further ``litdata.StreamingDataset`` arguments (e.g.
            ``storage_options``).
    """
    source = LitData(input_dir, **options)
    names = list(fields) if fields is not None else list(infer_fields(source[0]))
    return _read(LitDataSource(source, names, options), concurrency)
