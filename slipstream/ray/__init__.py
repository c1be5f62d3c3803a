"""slipstream on Ray Data: convert datasets of any size on a Ray cluster.

``pip install 'slipstream[ray]'``.  :func:`write` (or
:class:`SlipstreamDatasink` with ``Dataset.write_datasink``) writes any Ray
``Dataset`` as a sharded slipstream dataset, byte for byte what
:func:`slipstream.write` gives the same samples;
:func:`read_webdataset` and :func:`read_litdata` read WebDataset tar shards
and LitData optimized datasets as such a ``Dataset``, one read task per tar
shard or chunk.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slipstream.format.writer import WriteResult
from slipstream.ray.datasink import SlipstreamDatasink, check_destination
from slipstream.ray.datasource import LitDataSource, WebDatasetSource, read_litdata, read_webdataset

__all__ = ["LitDataSource", "SlipstreamDatasink", "WebDatasetSource", "read_litdata", "read_webdataset", "write"]


def write(dataset: Any, path: str, fields: Mapping[str, Any], *, concurrency: int | None = None,
          **options: Any) -> WriteResult:
    """Write the Ray ``dataset`` as a sharded slipstream dataset at ``path``
    (a folder or URL) and return what was written.

    Example::

        ds = slipstream.ray.read_webdataset("s3://bucket/train/{000000..000099}.tar", concurrency=64)
        slipstream.ray.write(ds, "s3://bucket/train-slip", {"image": ss.RGBImageField(), "label": ss.IntField()},
                             concurrency=64)

    Args:
        dataset: a ``ray.data.Dataset``; its execution is set to keep the
            rows in order (``preserve_order``).
        path, fields, options: as for :class:`SlipstreamDatasink`
            (``columns``, ``shard_size``, ``shards``, ``page_size``,
            ``page_checksums``, ``on_error``, ``user_metadata``,
            ``overwrite``, ``remote``).
        concurrency: the most encoding tasks at once (default: Ray's choice,
            up to the cluster's CPUs).  With :func:`read_webdataset` or
            :func:`read_litdata`, give the reader the same, so that Ray runs
            each read task and its write as one task.

    Raises:
        FileExistsError: ``path`` holds a dataset and ``overwrite`` is off.
        FieldValueError: a row cannot be encoded (``on_error="raise"``).
    """
    sink = SlipstreamDatasink(path, fields, **options)
    check_destination(sink.path, sink.overwrite, sink.remote)
    dataset.context.execution_options.preserve_order = True
    dataset.write_datasink(sink, concurrency=concurrency)
    if sink.result is None:  # an empty dataset: Ray starts no write task
        sink.on_write_start()
        sink.on_write_complete(_NoRows())
    assert sink.result is not None
    return sink.result


class _NoRows:
    """The result of a write that had no rows."""

    write_returns: list[Any] = []
