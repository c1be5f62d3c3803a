"""Writing a dataset: one file, or shards and a manifest (locally or in an
object store), from any source of samples; the checks both share, and the
choice between :func:`~slipstream.format.writer.write_file` and
:func:`~slipstream.format.sharded_writer.write_shards`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from slipstream.errors import ArgumentError
from slipstream.format import layout as L
from slipstream.format.remote import Remote, is_url, parse_size
from slipstream.format.sharded_writer import write_shards
from slipstream.format.writer import (
    DEFAULT_SHARD_SIZE,
    SampleSource,
    SampleStream,
    WriteResult,
    _check_arguments,
    _encoded_samples,
    _ShardPlan,
    check_sharding,
    field_descriptors,
    stored_user_metadata,
    write_file,
)


def write_dataset(
    path: str | os.PathLike,
    source: SampleSource | SampleStream,
    fields: Mapping[str, Any],
    *,
    workers: int | None = None,
    page_size: int = L.DEFAULT_PAGE_SIZE,
    page_checksums: bool = True,
    on_error: str = "raise",
    user_metadata: Mapping[str, Any] | None = None,
    verbose: bool = True,
    shard_size: int | str | None = None,
    shards: int | None = None,
    remote: Remote | None = None,
) -> WriteResult:
    """Write every sample of ``source`` into a dataset file at ``path``, or
    into a sharded dataset (shard files and a manifest) there.

    Args:
        path: the file to create (replaced atomically if it exists); with
            ``shard_size`` or ``shards``, or for a URL, the folder or prefix
            of a sharded dataset.
        source: the samples (see :class:`SampleSource` and :class:`SampleStream`).
        fields: field name -> field object, in the order of the source's values.
        workers: encoding processes; 0 encodes in this process; default: one
            per CPU core.
        page_size: bytes per data page, a power of two (default 8 MiB).
        page_checksums: store a CRC-32 of every data page (default), which
            readers check the first time they read the page, so that
            corruption on disk or in a copy is reported instead of decoded.
        on_error: ``"raise"`` stops at the first sample that cannot be
            encoded (naming it); ``"skip"`` leaves such samples out and
            reports them in the result.
        user_metadata: JSON object stored in the file (e.g. class names).
        verbose: show a progress bar (only on a terminal).
        shard_size: start a new shard when the current one's data would pass
            this many bytes (an int, or a text such as ``"1GB"``).  The
            default for a URL given neither this nor ``shards`` is 1 GB.
        shards: split the samples into this many shards of (nearly) equal
            sample counts instead.
        remote: object-store options, for a URL.

    Raises:
        FieldValueError: a sample cannot be encoded (``on_error="raise"``).
        ArgumentError: bad arguments.
    """
    fields = dict(fields)
    _check_arguments(fields, page_size, on_error, workers)
    check_sharding(shard_size, shards)
    workers = (os.cpu_count() or 1) if workers is None else workers
    user = stored_user_metadata(user_metadata)
    descriptors = field_descriptors(fields)
    streamed = isinstance(source, SampleStream)
    count = source.length_hint() if streamed else len(source)
    encoded = _encoded_samples(source, fields, workers, count)
    if shards is not None and count is None:
        raise ArgumentError(f"shards={shards} needs the number of samples beforehand, which a "
                            f"{type(source).__name__} does not give: use shard_size instead")
    if shards is not None or shard_size is not None or is_url(path):
        if shards is None and shard_size is None:
            shard_size = DEFAULT_SHARD_SIZE
        plan = _ShardPlan(parse_size(shard_size, "shard_size"), shards, count)
        return write_shards(path, plan, descriptors, page_size, page_checksums, user, encoded, count, on_error,
                            remote, verbose)
    return write_file(path, descriptors, page_size, page_checksums, user, encoded, count, on_error, verbose)
