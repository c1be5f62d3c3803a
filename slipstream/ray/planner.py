"""Cutting a write on Ray into shards from the sizes its tasks report, and
publishing the shards: the driver's half of the second step, the same for
the datasink and for :func:`slipstream.ray.write`."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import Any

import numpy as np

from slipstream.fields.base import Encoded
from slipstream.format import manifest as M
from slipstream.format.location import open_location
from slipstream.format.sharded_writer import ShardCuts, publish, write_shard
from slipstream.format.writer import WriteResult
from slipstream.format.write_options import WriteOptions

Segment = tuple[Hashable, int, int]
"""``(part, start, stop)``: the kept rows ``start .. stop-1`` of a part."""


class ShardPlanner:
    """Cuts the rows of a write's parts, taken in the dataset's order, into
    shards by the rule of :func:`slipstream.write`
    (:class:`~slipstream.format.sharded_writer.ShardCuts`), from their sizes
    alone.  A shard is handed out as soon as the row after it is seen, so
    that it can be laid out while later rows are still being encoded.

    Attributes:
        rows: the rows seen, kept or not.
        skipped: ``(row, why)`` of every row left out.
    """

    def __init__(self, options: WriteOptions, rows: int = 0) -> None:
        """``rows``: the dataset's rows, needed (and known) only with ``options.shards``."""
        self.cuts = ShardCuts(options.plan(rows), options.page_size)
        self.rows = 0
        self.skipped: list[tuple[int, str]] = []
        self._open: list[Segment] = []  # the shard not yet handed out

    def add(self, part: Hashable, rows: int, sizes: np.ndarray,
            skipped: Iterable[tuple[int, str]]) -> list[list[Segment]]:
        """Count the next part's ``rows``: ``sizes`` gives each kept row's
        stored sizes, ``skipped`` the ``(row within the part, why)`` of the
        others.  Returns the shards this completes, each as its segments."""
        left_out = dict(skipped)
        done: list[list[Segment]] = []
        kept = 0
        for local in range(rows):
            if local in left_out:
                self.skipped.append((self.rows + local, left_out[local]))
                continue
            if self.cuts.add(self.rows + local, sizes[kept].tolist()) and self._open:
                done.append(self._open)
                self._open = []
            if self._open and self._open[-1][0] == part and self._open[-1][2] == kept:
                self._open[-1] = (part, self._open[-1][1], kept + 1)
            else:
                self._open.append((part, kept, kept + 1))
            kept += 1
        self.rows += rows
        return done

    def finish(self) -> list[Segment] | None:
        """The last shard's segments (None when no row was kept)."""
        last, self._open = self._open, []
        return last or None

    def needs(self, part: Hashable) -> bool:
        """Whether the shard not yet handed out takes rows of ``part``."""
        return any(segment[0] == part for segment in self._open)


def lay_out_shard(options: WriteOptions, number: int, samples: Iterable[Sequence[Encoded]]) -> M.ShardEntry:
    """Write shard ``number`` of ``options.path`` from its ``samples``."""
    return write_shard(open_location(options.path, options.remote), number, samples, list(options.descriptors),
                       options.page_size, options.page_checksums, options.user)


def publish_write(options: WriteOptions, entries: list[M.ShardEntry],
                  skipped: Sequence[tuple[int, str]]) -> WriteResult:
    """Write the manifest of the shards ``entries``, stored for ``options``
    (none: one empty shard, as :func:`slipstream.write` writes), once the
    destination is checked again; the write's result."""
    entries = entries or [lay_out_shard(options, 0, [])]
    options.check_destination()
    manifest = publish(open_location(options.path, options.remote), list(options.descriptors), options.page_size,
                       options.page_checksums, options.user, entries)
    return WriteResult(options.path, manifest.samples, tuple(skipped), tuple(e.name for e in entries))


def laid_out(ray: Any, refs: list[Any], timeout: float = 60) -> list[str]:
    """The names of the shards the layout tasks ``refs`` of a write that
    failed wrote: those still running are cancelled and waited for (up to
    ``timeout`` seconds: a shard being uploaded would outlive the clean-up
    otherwise), and those that finished give their shard's name (one that
    failed or was cancelled leaves no shard)."""
    if not refs:
        return []
    for ref in refs:
        ray.cancel(ref)  # one that finished already is not affected
    ready, _ = ray.wait(refs, num_returns=len(refs), timeout=timeout)
    names = []
    for ref in ready:
        try:
            names.append(ray.get(ref).name)
        except Exception:  # noqa: BLE001  (a task that failed stored nothing)
            continue
    return names
