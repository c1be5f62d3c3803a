"""slipstream on Ray Data: convert datasets of any size on a Ray cluster.

``pip install 'slipstream[ray]'``.  :func:`write` (or, slower,
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

from slipstream.errors import ArgumentError
from slipstream.format.remote import absolute
from slipstream.format.writer import WriteResult
from slipstream.ray.datasink import SlipstreamDatasink
from slipstream.ray.datasource import LitDataSource, WebDatasetSource, read_litdata, read_webdataset
from slipstream.format.write_options import WriteOptions
from slipstream.ray.writer import write_dataset

__all__ = ["LitDataSource", "SlipstreamDatasink", "WebDatasetSource", "read_litdata", "read_webdataset", "write"]


def write(dataset: Any, path: str, fields: Mapping[str, Any], *, concurrency: int | None = None,
          verbose: bool = True, **options: Any) -> WriteResult:
    """Write the Ray ``dataset`` as a sharded slipstream dataset at ``path``
    (a folder or URL) and return what was written: the bytes
    :func:`slipstream.write` gives the same rows with the same options,
    whatever the number of workers and nodes.

    Example::

        ds = slipstream.ray.read_webdataset("s3://bucket/train/{000000..000099}.tar")
        slipstream.ray.write(ds, "s3://bucket/train-slip", {"image": ss.RGBImageField(), "label": ss.IntField()})

    Blocks are encoded by Ray tasks as Ray Data reads them, and each shard
    is laid out by a Ray task as soon as its rows are encoded; the encoded
    rows wait in Ray's object store, not in storage (see
    :mod:`slipstream.ray.writer`).  The manifest is written last, so
    readers never see a half-written dataset.

    Args:
        dataset: a ``ray.data.Dataset``; its execution is set to keep the
            rows in order (``preserve_order``).
        path: the dataset's folder or URL (``s3://bucket/prefix``); a
            relative path is relative to this process's folder (the
            driver's), wherever Ray's workers run.
        fields: field name -> field; a field reads the column of its name.
        concurrency: the most encoding tasks, and the most shard layouts,
            at once (default: the cluster's CPUs).
        verbose: progress bar (shown only on a terminal), as for
            :func:`slipstream.write`.
        **options: ``columns`` (field name -> column, where they differ),
            ``shard_size`` (default 1 GB) or ``shards``, ``page_size``,
            ``page_checksums``, ``on_error``, ``user_metadata``,
            ``overwrite``, ``remote``: as for :class:`SlipstreamDatasink`.

    Raises:
        FileExistsError: ``path`` holds a dataset and ``overwrite`` is off.
        FieldValueError: a row cannot be encoded (``on_error="raise"``).
        ArgumentError: bad options.
    """
    if concurrency is not None and (not isinstance(concurrency, int) or concurrency < 1):
        raise ArgumentError(f"concurrency must be a positive integer, got {concurrency!r}")
    options = WriteOptions.create(absolute(path), fields, sharded=True, **options)
    return write_dataset(dataset, options, concurrency, verbose)
