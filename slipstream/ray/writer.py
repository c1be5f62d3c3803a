"""Writing a Ray ``Dataset`` as a sharded slipstream dataset, with the
driver steering the two steps of a write on Ray while they overlap.

The driver takes the dataset's blocks from Ray Data in order, as they are
read, without fetching them:

1. **Encode.** One Ray task per block encodes its rows by the fields and
   returns two objects: the rows' :class:`~slipstream.ray.encode.Encoding`
   (their stored sizes, small, fetched by the driver) and their encoded
   values as a :class:`~slipstream.format.parts.Part`, which stays in Ray's
   object store.
2. **Lay out.** The driver feeds the sizes, block after block, to a
   :class:`~slipstream.ray.planner.ShardPlanner`; as soon as a shard is
   complete it starts a Ray task that lays the shard out from the parts
   holding its rows (read from the object store without a copy, their
   CRC-32s checked), while later blocks are still being encoded.  The
   manifest is written last, atomically, once every shard is stored.

The parts never touch the destination's storage, so the store sees only
the source read once and the shards written once, as with
:func:`slipstream.write`; the shards are the bytes it gives the same rows.
Parts are owned by the driver: a worker or node lost after encoding a
block is recovered by Ray re-running that task (lineage reconstruction),
and the driver drops each part as soon as the shards that need it are
being laid out, so the object store holds about one shard per layout in
flight plus the blocks being encoded (Ray spills to disk beyond its size).
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from slipstream.errors import FieldValueError
from slipstream.format import manifest as M
from slipstream.format.location import open_location
from slipstream.format.parts import Part, pack_part
from slipstream.format.sharded_writer import remove_unfinished
from slipstream.format.writer import WriteResult
from slipstream.ray.encode import Encoding, encode_rows
from slipstream.format.write_options import WriteOptions
from slipstream.format.write_lock import holding
from slipstream.ray.planner import Segment, ShardPlanner, laid_out, lay_out_shard, publish_write

RETRIES = 3
"""Times Ray re-runs an encoding or layout task whose worker or node died."""


def write_dataset(dataset: Any, options: WriteOptions, concurrency: int | None, verbose: bool = True) -> WriteResult:
    """Write ``dataset`` as ``options`` say, with at most ``concurrency``
    encoding tasks and as many layout tasks at once (default: the
    cluster's CPUs), with a progress bar on a terminal when ``verbose``;
    see the module docstring."""
    import ray

    options.check_destination()
    with holding(open_location(options.path, options.remote)):
        options.check_destination()  # again: a write this one waited for may have made the dataset
        dataset.context.execution_options.preserve_order = True
        limit = concurrency or max(1, int(ray.cluster_resources().get("CPU", 1)))
        conversion = _Conversion(ray, options, limit, verbose)
        blocks = _blocks(dataset.iter_internal_ref_bundles())
        try:
            return conversion.run(blocks)
        except BaseException:
            blocks.close()  # and with it Ray Data's execution
            conversion.abandon()
            raise


@dataclasses.dataclass
class _Block:
    """A block being encoded: its position among the dataset's blocks, and
    the objects its encoding task returns."""

    number: int
    encoding: Any  # ObjectRef[Encoding]
    part: Any  # ObjectRef[Part]


class _Conversion:
    """The driver's state during one write."""

    def __init__(self, ray: Any, options: WriteOptions, limit: int, verbose: bool = True) -> None:
        self.ray, self.options, self.limit, self.verbose = ray, options, limit, verbose
        self.shared = ray.put(options)  # sent once, not with every task
        self.encode = ray.remote(_encode_block).options(num_returns=2, max_retries=RETRIES)
        # A layout task takes a CPU slot like every other task, so that Ray
        # never needs more worker processes than CPUs: Ray ends the idle
        # workers beyond that number, and each new one pays for starting
        # Python and importing slipstream (seconds of CPU) again.
        self.lay_out = ray.remote(_lay_out).options(num_cpus=1, max_retries=RETRIES)
        self.encoding: collections.deque[_Block] = collections.deque()  # in the dataset's order
        self.held: list[_Block] = []  # encoded blocks whose parts a shard not yet handed out needs
        self.by_count: list[tuple[_Block, Encoding]] = []  # with ``shards``: every block, cut at the end
        self.planner = ShardPlanner(options)
        self.layouts: list[Any] = []  # ObjectRef[ShardEntry], by shard number
        self.progress: Any = None

    def run(self, blocks: Iterator[tuple[Any, int, int]]) -> WriteResult:
        from tqdm import tqdm

        name = self.options.path.rsplit("/", 1)[-1]
        self.progress = tqdm(unit="img", unit_scale=True, desc=f"writing {name}",
                             disable=None if self.verbose else True)
        with self.progress:
            rows = 0
            for number, (block, start, stop) in enumerate(blocks):
                while self._busy():
                    self._collect(wait=True)
                encoding, part = self.encode.remote(self.shared, block, start, stop, rows)
                self.encoding.append(_Block(number, encoding, part))
                rows += stop - start
                self._collect(wait=False)
            while self.encoding:
                self._collect(wait=True)
            if self.options.shards is not None:
                self.planner = ShardPlanner(self.options, rows)
                for block, encoding in self.by_count:
                    self._plan(block, encoding)
            last = self.planner.finish()
            if last is not None:
                self._start_layout(last)
            entries = self.ray.get(self.layouts)
        return publish_write(self.options, entries, self.planner.skipped)

    def abandon(self) -> None:
        """Stop this write's tasks and remove the shards it stored."""
        for block in self.encoding:
            self.ray.cancel(block.encoding)
        if self.progress is not None:
            self.progress.close()
        remove_unfinished(open_location(self.options.path, self.options.remote), laid_out(self.ray, self.layouts))

    def _busy(self) -> bool:
        """Whether ``limit`` encoding tasks are running, or twice as many
        blocks wait for the driver (behind a slow one)."""
        return (len(self.encoding) >= 2 * self.limit
                or self._unfinished([block.encoding for block in self.encoding]) >= self.limit)

    def _unfinished(self, refs: list[Any]) -> int:
        """How many of ``refs`` are not ready yet."""
        if not refs:
            return 0
        ready, _ = self.ray.wait(refs, num_returns=len(refs), timeout=0, fetch_local=False)
        return len(refs) - len(ready)

    def _collect(self, wait: bool) -> None:
        """Take the encoded blocks at the head of the queue (waiting for the
        first when ``wait``) and cut shards from them."""
        while self.encoding:
            head = self.encoding[0]
            if not wait and self._unfinished([head.encoding]):
                return
            wait = False
            encoding: Encoding = self.ray.get(head.encoding)
            self.encoding.popleft()
            self.progress.update(encoding.rows)
            if encoding.skipped and self.options.on_error == "raise":
                raise FieldValueError(f"{self.options.path} was not written: {encoding.skipped[0][1]}")
            if self.options.shards is not None:
                self.by_count.append((head, encoding))
            else:
                self._plan(head, encoding)

    def _plan(self, block: _Block, encoding: Encoding) -> None:
        self.held.append(block)
        for shard in self.planner.add(block.number, encoding.rows, encoding.sizes, encoding.skipped):
            self._start_layout(shard)
        self.held = [b for b in self.held if self.planner.needs(b.number)]

    def _start_layout(self, segments: list[Segment]) -> None:
        """Start laying out the next shard; at most ``limit`` at once."""
        while self._unfinished(self.layouts) >= self.limit:
            self.ray.wait(self.layouts, num_returns=len(self.layouts) - self.limit + 1)
        parts = {block.number: block.part for block in self.held}
        numbers = list(dict.fromkeys(int(segment[0]) for segment in segments))
        self.layouts.append(self.lay_out.remote(self.shared, len(self.layouts), segments, numbers,
                                                *[parts[number] for number in numbers]))
        self.progress.set_postfix_str(f"{len(self.layouts)} shards", refresh=False)

def _blocks(bundles: Iterable[Any]) -> Iterator[tuple[Any, int, int]]:
    """``(block, start, stop)`` for every block of Ray Data's bundles, in
    order: rows ``start .. stop-1`` of the block belong to the dataset."""
    for bundle in bundles:
        for entry, piece in zip(bundle.blocks, bundle.slices):
            rows = entry.metadata.num_rows
            if piece is not None:
                yield entry.ref, piece.start_offset, piece.end_offset
            elif rows is not None:
                yield entry.ref, 0, rows
            else:
                raise RuntimeError("Ray Data gave a block without its number of rows")


def _encode_block(options: WriteOptions, block: Any, start: int, stop: int,
                  first_row: int) -> tuple[Encoding, Part]:
    """Encode rows ``start .. stop-1`` of ``block``, the dataset's rows from
    ``first_row`` on (a Ray task)."""
    from ray.data.block import BlockAccessor

    rows = BlockAccessor.for_block(block).slice(start, stop, copy=False)
    encoding, encoded = encode_rows(options, [rows], lambda k: f"row {first_row + k}")
    return encoding, pack_part(options.descriptors, encoded)


def _lay_out(options: WriteOptions, number: int, segments: Sequence[Segment], blocks: list[int],
            *parts: Part) -> M.ShardEntry:
    """Write shard ``number`` from its ``segments`` (whose parts are those
    of ``blocks``, given as ``parts`` so that Ray hands them over from its
    object store; a Ray task)."""
    samples = (encoded for block, start, stop in segments
               for encoded in parts[blocks.index(int(block))].samples(
                   options.descriptors, start, stop, f"the encoded rows of block {block} for shard {number}"))
    return lay_out_shard(options, number, samples)
