"""A Ray Data datasink that writes a sharded slipstream dataset.

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
"""

from __future__ import annotations

import dataclasses
import json
import uuid
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import numpy as np
from ray.data import Datasink

from slipstream.errors import ArgumentError, FieldValueError
from slipstream.format import layout as L
from slipstream.format import manifest as M
from slipstream.format.location import Location, open_location
from slipstream.format.parts import read_part, write_part
from slipstream.format.remote import Remote, join, parse_size
from slipstream.format.sharded_writer import ShardCuts, publish, remove_unfinished, stored_sizes, write_shard
from slipstream.format.writer import DEFAULT_SHARD_SIZE, WriteResult, _check_arguments, _ShardPlan, encode_values, \
    stored_fields

PARTS = "_parts"
"""The folder (prefix) under the dataset where a write keeps its parts."""


@dataclasses.dataclass(frozen=True)
class PartSummary:
    """What one encoding task wrote: its part, and per row its stored sizes
    or why it was left out."""

    task: int
    name: str
    rows: int
    sizes: np.ndarray  # (kept rows, stored fields) int64
    skipped: tuple[tuple[int, str], ...]  # (row within the task, reason)


class SlipstreamDatasink(Datasink):
    """Writes a Ray ``Dataset`` as a sharded slipstream dataset.

    Example::

        import ray, slipstream as ss
        from slipstream.ray import SlipstreamDatasink

        ds = ray.data.read_parquet("s3://bucket/photos/")  # columns: image (bytes), label (int)
        ds.context.execution_options.preserve_order = True
        ds.write_datasink(SlipstreamDatasink("s3://bucket/photos-slip",
                                             {"image": ss.RGBImageField(), "label": ss.IntField()}))

    (:func:`slipstream.ray.write` does the same and returns what was written.)

    Args:
        path: the dataset's folder or URL (``s3://bucket/prefix``).
        fields: field name -> field; a field reads the column of its name
            unless ``columns`` says otherwise.  Values are what the fields
            take in :func:`slipstream.write`: image bytes, arrays or dicts
            with ``bytes``, integers, floats, JSON values.
        columns: field name -> column, where they differ.
        shard_size: data bytes per shard (int or text, e.g. ``"1GB"``;
            default 1 GB); or ``shards``: this many shards of equal counts.
        page_size, page_checksums, user_metadata: as for :func:`slipstream.write`.
        on_error: ``"raise"`` (default) fails the write at the first row
            that cannot be encoded, naming it; ``"skip"`` leaves such rows
            out and lists them in :attr:`result`.
        overwrite: replace a dataset already at ``path`` (default: refuse).
        remote: object-store options for a URL.

    After the write, :attr:`result` is a :class:`~slipstream.format.WriteResult`.
    The rows are written in the order they reach the datasink: set the
    dataset's ``context.execution_options.preserve_order = True`` (as
    :func:`slipstream.ray.write` does) for the dataset's own order, and with
    it the same bytes whatever the number of workers.
    """

    def __init__(self, path: str, fields: Mapping[str, Any], *, columns: Mapping[str, str] | None = None,
                 shard_size: int | str | None = None, shards: int | None = None,
                 page_size: int = L.DEFAULT_PAGE_SIZE, page_checksums: bool = True, on_error: str = "raise",
                 user_metadata: Mapping[str, Any] | None = None, overwrite: bool = False,
                 remote: Remote | None = None) -> None:
        fields = dict(fields)
        _check_arguments(fields, page_size, on_error, None)
        if shards is not None and shard_size is not None:
            raise ArgumentError("give shard_size or shards, not both")
        if shards is not None and (not isinstance(shards, int) or shards < 1):
            raise ArgumentError(f"shards must be a positive integer, got {shards!r}")
        self.path = str(path).rstrip("/")
        self.fields = fields
        self.columns = {name: (columns or {}).get(name, name) for name in fields}
        self.shard_size = parse_size(shard_size, "shard_size") if shard_size is not None else \
            (None if shards is not None else DEFAULT_SHARD_SIZE)
        self.shards = shards
        self.page_size, self.page_checksums, self.on_error = page_size, page_checksums, on_error
        self.user = json.dumps(dict(user_metadata or {}), sort_keys=True, ensure_ascii=False).encode("utf-8")
        self.overwrite = overwrite
        self.remote = remote or Remote()
        self.write_id = uuid.uuid4().hex[:16]
        self.descriptors = [L.FieldDescriptor(f.type_id, name, f.arguments(), L.record_spec(f.record_dtype()))
                            for name, f in fields.items()]
        self.result: WriteResult | None = None

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
        a killed earlier write left."""
        check_destination(self.path, self.overwrite, self.remote)
        _clear(self._parts(), prefix="")

    def write(self, blocks: Iterable[Any], ctx: Any) -> PartSummary:
        """Encode this task's rows and store them as one part (step 1)."""
        task = int(ctx.task_idx)
        encoded, sizes, skipped, rows = [], [], [], 0
        stores = stored_fields(self.descriptors)
        for name, values in _rows(blocks, list(self.columns.values()), task):
            outcome = encode_values(self.fields, name, values)
            if isinstance(outcome, str):
                if self.on_error == "raise":
                    raise FieldValueError(f"{self.path} was not written: {outcome}")
                skipped.append((rows, outcome))
            else:
                encoded.append(outcome)
                sizes.append(stored_sizes(stores, outcome))
            rows += 1
        name = f"{self.write_id}-part-{task:08d}"
        write_part(self._parts(), name, self.descriptors, encoded)
        return PartSummary(task, name, rows, np.asarray(sizes, np.int64).reshape(len(encoded), sum(stores)),
                           tuple(skipped))

    def on_write_complete(self, write_result: Any) -> None:
        """Lay the shards out from the parts and publish the manifest (step 2)."""
        import ray

        summaries = sorted((s for s in write_result.write_returns if s is not None), key=lambda s: s.task)
        check_destination(self.path, self.overwrite, self.remote)
        plan = _ShardPlan(self.shard_size, self.shards, sum(s.rows for s in summaries))
        specs, skipped = _shard_specs(summaries, plan, self.page_size)
        location = open_location(self.path, self.remote)
        task = ray.remote(num_cpus=1, max_retries=3)(_lay_out_shard)
        arguments = (join(self.path, PARTS), self.remote, self.descriptors, self.page_size,
                     self.page_checksums, self.user)
        try:
            if specs:
                entries = _progress(ray, [task.remote(self.path, number, segments, *arguments)
                                          for number, segments in enumerate(specs)], self.path)
            else:
                entries = [write_shard(location, 0, [], self.descriptors, self.page_size, self.page_checksums,
                                       self.user)]
            manifest = publish(location, self.descriptors, self.page_size, self.page_checksums, self.user, entries)
        except BaseException:
            self.on_write_failed(None)
            raise
        _clear(self._parts(), prefix=self.write_id)
        self.result = WriteResult(self.path, manifest.samples, tuple(skipped), tuple(e.name for e in entries))

    def on_write_failed(self, error: Exception | None) -> None:
        """Remove this write's parts and any shard no manifest lists."""
        _clear(self._parts(), prefix=self.write_id)
        remove_unfinished(open_location(self.path, self.remote))

    def _parts(self) -> Location:
        return open_location(join(self.path, PARTS), self.remote)


def check_destination(path: str, overwrite: bool, remote: Remote) -> None:
    """Refuse ``path`` when it holds a dataset (a manifest) and ``overwrite`` is off."""
    if not overwrite and open_location(path, remote).exists(M.NAME):
        raise FileExistsError(f"{path} already holds a slipstream dataset ({M.NAME}); pass overwrite=True "
                              f"(--overwrite) to replace it")


def _rows(blocks: Iterable[Any], columns: list[str], task: int) -> Iterator[tuple[str, Any]]:
    """Each row of ``blocks`` as ``(name, values of columns)``, or ``(name,
    exception)`` for a row without them or that its source could not read
    (the :data:`~slipstream.ray.datasource.ERROR` column).  Rows are named
    by their :data:`~slipstream.ray.datasource.KEY` column where there is one.

    Blocks are read a column at a time (Ray's NumPy batch format: object
    arrays of bytes and dicts, tensor columns as arrays), not as a dict per row.
    """
    from ray.data.block import BlockAccessor

    from slipstream.ray.datasource import ERROR, KEY

    first = 0
    for block in blocks:
        batch = BlockAccessor.for_block(block).to_numpy()
        count = BlockAccessor.for_block(block).num_rows()
        names = batch[KEY] if KEY in batch else (f"row {first + k} of write task {task}" for k in range(count))
        errors = batch[ERROR] if ERROR in batch else ("",) * count
        missing = [c for c in columns if c not in batch]
        if missing:
            problem = KeyError(f"no column {missing[0]!r} (columns: {', '.join(map(repr, batch))})")
            cells: Iterable[Any] = (problem for _ in range(count))
        else:
            cells = zip(*(batch[c] for c in columns))
        for key, error, values in zip(names, errors, cells):
            yield (f"row {key}" if KEY in batch else key), (ValueError(error) if error else values)
        first += count


def _shard_specs(summaries: list[PartSummary], plan: _ShardPlan,
                 page_size: int) -> tuple[list[list[tuple[str, int, int]]], list[tuple[int, str]]]:
    """Per shard, its ``(part, first, stop)`` segments, and every skipped
    row as ``(row, reason)``: the cuts :class:`ShardCuts` makes over all rows."""
    cuts = ShardCuts(plan, page_size)
    specs: list[list[tuple[str, int, int]]] = []
    skipped: list[tuple[int, str]] = []
    row = 0
    for summary in summaries:
        left_out = dict(summary.skipped)
        kept = 0
        for local in range(summary.rows):
            if local in left_out:
                skipped.append((row + local, left_out[local]))
                continue
            if cuts.add(row + local, summary.sizes[kept].tolist()) or not specs:
                specs.append([])
            segments = specs[-1]
            if segments and segments[-1][0] == summary.name and segments[-1][2] == kept:
                segments[-1] = (summary.name, segments[-1][1], kept + 1)
            else:
                segments.append((summary.name, kept, kept + 1))
            kept += 1
        row += summary.rows
    return specs, skipped


def _progress(ray: Any, refs: list[Any], path: str) -> list[Any]:
    """The results of ``refs``, in order, with a progress bar as they finish."""
    from tqdm import tqdm

    pending = list(refs)
    with tqdm(total=len(refs), unit="shard", desc=f"laying out {path.rsplit('/', 1)[-1]}", disable=None) as bar:
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            bar.update(len(done))
    return ray.get(refs)


def _lay_out_shard(path: str, number: int, segments: list[tuple[str, int, int]], parts_url: str, remote: Remote,
                   descriptors: list[L.FieldDescriptor], page_size: int, page_checksums: bool,
                   user: bytes) -> M.ShardEntry:
    """Write shard ``number`` from its samples in the parts (a Ray task)."""
    parts = open_location(parts_url, remote)
    samples = (encoded for name, start, stop in segments
               for encoded in read_part(parts, name, descriptors, start, stop))
    return write_shard(open_location(path, remote), number, samples, descriptors, page_size, page_checksums, user)


def _clear(parts: Location, prefix: str) -> None:
    """Remove the parts whose names start with ``prefix``, and a local parts
    folder left empty (object stores have no folders)."""
    from slipstream.errors import DatasetNotFoundError
    from slipstream.format.location import LocalFolder

    try:
        names = parts.names()
    except (DatasetNotFoundError, FileNotFoundError):
        return
    for name in names:
        if name.startswith(prefix):
            parts.delete(name)
    if isinstance(parts, LocalFolder):
        try:
            parts.path.rmdir()
        except OSError:  # not empty: another write's parts
            pass
