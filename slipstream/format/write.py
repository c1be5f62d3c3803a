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
from slipstream.format import manifest as M
from slipstream.format.location import open_location
from slipstream.format.remote import Remote, is_url, local_path, parse_size
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
        shards: split the samples into this many shards of (nearly) equal
            sample counts instead.
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
    fields = dict(fields)
    _check_arguments(fields, page_size, on_error, workers)
    check_sharding(shard_size, shards)
    sharded = shards is not None or shard_size is not None or is_url(path)
    check_destination(path, sharded=sharded, overwrite=overwrite, remote=remote)
    workers = (os.cpu_count() or 1) if workers is None else workers
    user = stored_user_metadata(user_metadata)
    descriptors = field_descriptors(fields)
    streamed = isinstance(source, SampleStream)
    count = source.length_hint() if streamed else len(source)
    encoded = _encoded_samples(source, fields, workers, count)
    if shards is not None and count is None:
        raise ArgumentError(f"shards={shards} needs the number of samples beforehand, which a "
                            f"{type(source).__name__} does not give: use shard_size instead")
    if sharded:
        if shards is None and shard_size is None:
            shard_size = DEFAULT_SHARD_SIZE
        plan = _ShardPlan(parse_size(shard_size, "shard_size"), shards, count)
        return write_shards(path, plan, descriptors, page_size, page_checksums, user, encoded, count, on_error,
                            remote, verbose)
    return write_file(path, descriptors, page_size, page_checksums, user, encoded, count, on_error, verbose)


def check_destination(path: str | os.PathLike, *, sharded: bool, overwrite: bool, remote: Remote | None) -> None:
    """Refuse a destination the write would fail at only after encoding
    everything, or would replace without being asked to.

    Args:
        path: where the dataset goes: a file, or for ``sharded``, the folder
            or prefix of shards and a manifest.
        sharded: whether a sharded dataset is written there.
        overwrite: whether a dataset already there may be replaced.
        remote: object-store options, for a URL.

    Raises:
        FileExistsError: a file (or a sharded dataset's manifest) is at
            ``path`` and ``overwrite`` is off.
        FileNotFoundError: the folder that is to hold the file does not exist.
        NotADirectoryError, IsADirectoryError: ``path``, or the folder that
            is to hold it, is the wrong kind of thing.
    """
    if sharded:
        if not is_url(path) and local_path(path).is_file():
            raise NotADirectoryError(f"{path} is a file; a sharded dataset is written into a folder")
        if not overwrite and open_location(path, remote).exists(M.NAME):
            raise FileExistsError(f"{path} already holds a slipstream dataset ({M.NAME}); pass overwrite=True "
                                  f"(--overwrite) to replace it")
        return
    target = local_path(path)
    folder = target.parent
    if not folder.is_dir():
        if folder.exists():
            raise NotADirectoryError(f"{target} cannot be written: {folder} is not a folder")
        raise FileNotFoundError(f"{target} cannot be written: the folder {folder} does not exist")
    if target.is_dir():
        raise IsADirectoryError(f"{target} is a folder; give the path of a file to write, or shard_size= or "
                                f"shards= (--shard-size, --shards) to write a sharded dataset into the folder")
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} already exists; pass overwrite=True (--overwrite) to replace it")
