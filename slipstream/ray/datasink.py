"""A Ray Data datasink that writes a sharded slipstream dataset, keeping
the encoded samples in the destination's storage between its two steps.

The write runs in two steps, so that the result depends only on the rows
and their order, never on how Ray splits them into blocks and tasks:

1. **Encode** (Ray's write tasks, in parallel): each task encodes its rows
   by the fields and stores them as one part (:mod:`slipstream.format.parts`)
   in ``<path>/_parts/``; it returns the sizes of the stored values.
2. **Lay out** (the driver, then Ray tasks in parallel): from the sizes
   alone the driver finds where the shards end
   (:class:`~slipstream.format.sharded_writer.ShardCuts`, the rule
   :func:`slipstream.write` follows); one task per shard reads its samples
   from the parts and writes the shard.  The driver then writes the
   manifest, last and atomically, and removes the parts.

So the shards have the bytes :func:`slipstream.write` gives the same
samples with the same options, for any number of workers and nodes.  A task
that Ray retries rewrites its own part or shard under the same name; a
write that fails removes its parts and its shards.

Ray calls a datasink's driver side only after every write task has ended,
so the layout cannot start earlier; :func:`slipstream.ray.write` drives the
same two steps itself, keeps the parts in Ray's object store and lays each
shard out as soon as its rows are encoded.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterable, Mapping
from typing import Any

from ray.data import Datasink

from slipstream.errors import FieldValueError
from slipstream.format.location import Location, open_location
from slipstream.format.parts import read_part, write_part
from slipstream.format.remote import absolute, join
from slipstream.format.sharded_writer import remove_unfinished
from slipstream.format.writer import WriteResult
from slipstream.ray.encode import Encoding, encode_rows
from slipstream.format.write_options import WriteOptions
from slipstream.format.write_lock import holding
from slipstream.ray.planner import Segment, ShardPlanner, laid_out, lay_out_shard, publish_write

PARTS = "_parts"
"""The folder (prefix) under the dataset where a write keeps its parts."""


@dataclasses.dataclass(frozen=True)
class PartSummary:
    """What one encoding task wrote: its part, and its rows' :class:`Encoding`."""

    task: int
    name: str
    encoding: Encoding


class SlipstreamDatasink(Datasink):
    """Writes a Ray ``Dataset`` as a sharded slipstream dataset.

    Example::

        import ray, slipstream as ss
        from slipstream.ray import SlipstreamDatasink

        ds = ray.data.read_parquet("s3://bucket/photos/")  # columns: image (bytes), label (int)
        ds.context.execution_options.preserve_order = True
        ds.write_datasink(SlipstreamDatasink("s3://bucket/photos-slip",
                                             {"image": ss.RGBImageField(), "label": ss.IntField()}))

    :func:`slipstream.ray.write` writes the same bytes faster (it lays
    shards out while rows are still being encoded, and keeps the encoded
    rows in Ray's object store rather than in storage); use the datasink
    where a pipeline must end in ``write_datasink``.

    Args:
        path: the dataset's folder or URL (``s3://bucket/prefix``); a
            relative path is relative to the driver's folder, wherever Ray's
            workers run.
        fields: field name -> field; a field reads the column of its name
            unless ``columns`` says otherwise.  Values are what the fields
            take in :func:`slipstream.write`: image bytes, arrays or dicts
            with ``bytes``, integers, floats, JSON values.
        columns: field name -> column, where they differ.
        shard_size: data bytes per shard (int or text, e.g. ``"1GB"``;
            default 1 GB); or ``shards``: at most this many shards of about
            equal counts (as for :func:`slipstream.write`).
        page_size, page_checksums, user_metadata: as for :func:`slipstream.write`.
        on_error: ``"raise"`` (default) fails the write at the first row
            that cannot be encoded, naming it; ``"skip"`` leaves such rows
            out and lists them in :attr:`result`.
        overwrite: replace a dataset already at ``path`` (default: refuse).
        remote: object-store options for a URL.

    After the write, :attr:`result` is a :class:`~slipstream.format.WriteResult`.
    The rows are written in the order they reach the datasink: set the
    dataset's ``context.execution_options.preserve_order = True`` for the
    dataset's own order, and with it the same bytes whatever the number of
    workers.
    """

    def __init__(self, path: str, fields: Mapping[str, Any], **options: Any) -> None:
        self.options = WriteOptions.create(absolute(path), fields, sharded=True, **options)
        self.result: WriteResult | None = None
        self._write_id = uuid.uuid4().hex[:16]  # names this write's parts
        self._lock: Any = None  # held by the driver from the start of the write to its end

    # ------------------------------------------------------------ Ray's Datasink protocol

    def get_name(self) -> str:
        return "Slipstream"

    @property
    def supports_distributed_writes(self) -> bool:
        return True

    @property
    def min_rows_per_write(self) -> int | None:
        return None

    @property
    def min_bytes_per_write(self) -> int | None:
        return None

    def on_write_start(self, schema: Any = None) -> None:
        """Refuse an existing dataset without ``overwrite``; clear the parts
        a killed earlier write left (once no other write into the folder
        runs: see :mod:`slipstream.format.write_lock`)."""
        self.options.check_destination()
        self._lock = holding(open_location(self.options.path, self.options.remote))
        self._lock.__enter__()
        try:
            self.options.check_destination()  # again: a write this one waited for may have made the dataset
            _clear(self._parts(), prefix="")
        except BaseException:
            self._release()
            raise

    def write(self, blocks: Iterable[Any], ctx: Any) -> PartSummary:
        """Encode this task's rows and store them as one part (step 1)."""
        task = int(ctx.task_idx)
        encoding, encoded = encode_rows(self.options, blocks, lambda k: f"row {k} of write task {task}")
        if encoding.skipped and self.options.on_error == "raise":
            raise FieldValueError(f"{self.options.path} was not written: {encoding.skipped[0][1]}")
        name = f"{self._write_id}-part-{task:08d}"
        write_part(self._parts(), name, self.options.descriptors, encoded)
        return PartSummary(task, name, encoding)

    def on_write_complete(self, write_result: Any) -> None:
        """Lay the shards out from the parts and publish the manifest (step 2)."""
        import ray

        options = self.options
        refs: list[Any] = []
        try:
            summaries = sorted((s for s in write_result.write_returns if s is not None), key=lambda s: s.task)
            options.check_destination()
            planner = ShardPlanner(options, sum(s.encoding.rows for s in summaries))
            specs = [shard for s in summaries
                     for shard in planner.add(s.name, s.encoding.rows, s.encoding.sizes, s.encoding.skipped)]
            last = planner.finish()
            specs += [last] if last else []
            task = ray.remote(num_cpus=1, max_retries=3)(_lay_out_shard)
            refs = [task.remote(options, number, segments, join(options.path, PARTS))
                    for number, segments in enumerate(specs)]
            result = publish_write(options, _progress(ray, refs, options.path), planner.skipped)
        except BaseException:
            remove_unfinished(open_location(options.path, options.remote), laid_out(ray, refs))
            self.on_write_failed(None)
            raise
        _clear(self._parts(), prefix=self._write_id)
        self.result = result
        self._release()

    def on_write_failed(self, error: Exception | None) -> None:
        """Remove this write's parts (its shards are laid out only once every
        part is written, in :meth:`on_write_complete`)."""
        _clear(self._parts(), prefix=self._write_id)
        self._release()

    def _release(self) -> None:
        """Let the next write into the folder go on."""
        lock, self._lock = self._lock, None
        if lock is not None:
            lock.__exit__(None, None, None)

    def _parts(self) -> Location:
        return open_location(join(self.options.path, PARTS), self.options.remote)


def _progress(ray: Any, refs: list[Any], path: str) -> list[Any]:
    """The results of ``refs``, in order, with a progress bar as they finish."""
    from tqdm import tqdm

    pending = list(refs)
    with tqdm(total=len(refs), unit="shard", desc=f"laying out {path.rsplit('/', 1)[-1]}", disable=None) as bar:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            bar.update(len(done))
    return ray.get(refs)


def _lay_out_shard(options: WriteOptions, number: int, segments: list[Segment], parts_url: str) -> Any:
    """Write shard ``number`` from its samples in the parts (a Ray task)."""
    parts = open_location(parts_url, options.remote)
    samples = (encoded for name, start, stop in segments
               for encoded in read_part(parts, str(name), options.descriptors, start, stop))
    return lay_out_shard(options, number, samples)


def _clear(parts: Location, prefix: str) -> None:
    """Remove the parts whose names start with ``prefix``, and a local parts
    folder left empty (object stores have no folders)."""
    from slipstream.errors import DatasetNotFoundError

    try:
        names = parts.names()
    except (DatasetNotFoundError, FileNotFoundError):
        return
    for name in names:
        if name.startswith(prefix):
            parts.delete(name)
    folder = parts.local_folder()
    if folder is not None:
        try:
            folder.rmdir()
        except OSError:  # not empty: another write's parts
            pass
