"""Ray Data datasources: WebDataset tar shards read by slipstream's own
reader (:class:`slipstream.sources.WebDataset`), one read task per shard,
so that a conversion on Ray maps members to fields exactly as
:func:`slipstream.write` does on one machine."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from ray.data import Dataset, read_datasource
from ray.data.block import BlockMetadata
from ray.data.datasource import Datasource, ReadTask

from slipstream.format.remote import Remote
from slipstream.sources.webdataset import WebDataset

ROWS_PER_BLOCK = 256
"""Rows in each block a read task yields."""

KEY = "__key__"
"""The column naming each row's sample (``shard: key``), used in error messages."""

ERROR = "__error__"
"""The column saying why a row's sample could not be read (empty when it could)."""


class WebDatasetSource(Datasource):
    """The samples of WebDataset tar shards as rows: one column per field
    (values as :func:`slipstream.sources.member_value` gives them), plus
    :data:`KEY` and :data:`ERROR`.  See :func:`read_webdataset`."""

    def __init__(self, source: WebDataset) -> None:
        super().__init__()
        self.source = source

    def estimate_inmemory_data_size(self) -> int | None:
        return None

    def get_read_tasks(self, parallelism: int, per_task_row_limit: int | None = None,
                       data_context: Any = None) -> list[ReadTask]:
        return [ReadTask(_Reader(self.source, shard), BlockMetadata(None, None, None, (shard,)),
                         per_task_row_limit=per_task_row_limit)
                for shard in self.source.shards]

    def get_name(self) -> str:
        return "SlipstreamWebDataset"


class _Reader:
    """A read task's function: the blocks of one shard."""

    def __init__(self, source: WebDataset, shard: str) -> None:
        self.source, self.shard = source, shard

    def __call__(self) -> Iterator[Any]:
        import pandas as pd

        names = list(self.source.fields)
        rows: list[dict[str, Any]] = []
        for key, values in self.source.read_shard(self.shard):
            if isinstance(values, Exception):
                rows.append({**{n: None for n in names}, KEY: key, ERROR: f"{type(values).__name__}: {values}"})
            else:
                rows.append({**dict(zip(names, values)), KEY: key, ERROR: ""})
            if len(rows) == ROWS_PER_BLOCK:
                yield pd.DataFrame(rows)
                rows = []
        if rows:
            yield pd.DataFrame(rows)


def read_webdataset(shards: str | Sequence[str], fields: Mapping[str, Any] | None = None,
                    members: Mapping[str, str] | None = None, remote: Remote | None = None) -> Dataset:
    """A Ray ``Dataset`` of WebDataset tar shards (arguments as for
    :class:`slipstream.sources.WebDataset`), ready for
    :func:`slipstream.ray.write` with the same fields::

        source = slipstream.WebDataset("s3://bucket/train/{000000..000099}.tar")
        slipstream.ray.write(slipstream.ray.read_webdataset(source), "s3://bucket/train-slip", source.fields)

    ``shards`` may also be a :class:`~slipstream.sources.WebDataset`.
    """
    source = shards if isinstance(shards, WebDataset) else WebDataset(shards, fields, members, remote)
    return read_datasource(WebDatasetSource(source))
