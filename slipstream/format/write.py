"""Writing a dataset: one file, or shards and a manifest (locally or in an
object store), from any source of samples: the options checked
(:class:`~slipstream.format.write_options.WriteOptions`), then
:func:`~slipstream.format.writer.write_file` or
:func:`~slipstream.format.sharded_writer.write_shards`."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from slipstream.errors import ArgumentError
from slipstream.format import layout as L
from slipstream.format.location import open_location
from slipstream.format.remote import Remote
from slipstream.format.sharded_writer import write_shards
from slipstream.format.write_lock import holding
from slipstream.format.write_options import WriteOptions
from slipstream.format.writer import (SampleSource, SampleStream, WriteResult, _encoded_samples, reporting_losses,
                                      write_file)


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
    overwrite: bool = False,
) -> WriteResult:
    """Write every sample of ``source`` into a dataset file at ``path``, or
    into a sharded dataset (shard files and a manifest) there.

    Args:
        path: the file to create, in a folder that exists; with
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
        shards: split the samples into at most this many shards of about
            equal sample counts instead (a shard ends only where a data
            page starts: a dataset of fewer pages has fewer shards).
        remote: object-store options, for a URL.
        overwrite: replace a dataset already at ``path`` (atomically: the
            old one stays whole until the new one is complete).  Without
            it, an existing file, or a sharded dataset's manifest, is
            refused before anything is encoded.

    Raises:
        FieldValueError: a sample cannot be encoded (``on_error="raise"``).
        ArgumentError: bad arguments.
        FileExistsError: ``path`` exists and ``overwrite`` is off.
        FileNotFoundError: the folder that is to hold the file does not exist.
    """
    options = WriteOptions.create(path, fields, shard_size=shard_size, shards=shards, page_size=page_size,
                                  page_checksums=page_checksums, on_error=on_error, user_metadata=user_metadata,
                                  overwrite=overwrite, remote=remote)
    if workers is not None and (not isinstance(workers, int) or isinstance(workers, bool) or workers < 0):
        raise ArgumentError(f"workers must be a non-negative integer or None, got {workers!r}")
    options.check_destination()
    workers = (os.cpu_count() or 1) if workers is None else workers
    count = source.length_hint() if isinstance(source, SampleStream) else len(source)
    plan = options.plan(count) if options.sharded else None  # shards= is refused for a stream that is not counted
    # Encoding starts when it is first read; what it loses is told once, when all of it is written.
    encoded = reporting_losses(_encoded_samples(source, options.fields, workers, count), list(options.fields), path)
    try:
        if plan is not None:
            with holding(open_location(path, options.remote)):
                options.check_destination()  # again: a write this one waited for may have made the dataset
                return write_shards(path, plan, list(options.descriptors), options.page_size,
                                    options.page_checksums, options.user, encoded, count, options.on_error,
                                    options.remote, verbose)
        return write_file(path, list(options.descriptors), options.page_size, options.page_checksums, options.user,
                          encoded, count, options.on_error, verbose)
    finally:
        encoded.close()  # a write that failed stops its encoders now, not when its traceback is collected
