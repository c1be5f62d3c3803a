"""Writing sharded datasets: shard files and a manifest, in a local folder
or under an object-store prefix.

Samples arrive encoded and in source order (from the writer's worker
processes); they are laid out into one shard file after another, each a
complete slipstream file, named after its position and its header checksum
(:func:`slipstream.format.manifest.shard_name`).  The bytes of every shard
depend only on the input and the plan, never on the number of workers.

Local shards are written under temporary names and renamed when complete;
remote ones are written to a local staging folder and uploaded (one upload
overlapping the writing of the next shard), then removed locally.  The
manifest is written last, atomically: a dataset whose manifest exists is
whole, and readers of the previous manifest keep finding its shards until
the new manifest replaces it.  The shards the replaced manifest listed and
the new one does not are removed after that, and only those (and, when a
write fails, the shards it wrote): nothing else in the folder is touched,
whatever its name.  Writes into one local folder wait for each other
(:mod:`slipstream.format.write_lock`).
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import tempfile
from collections.abc import Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

from slipstream.errors import FieldValueError, SlipstreamError
from slipstream.format import layout as L
from slipstream.format import manifest as M
from slipstream.format import tempfiles
from slipstream.fields.base import Encoded
from slipstream.format.location import Location, open_location
from slipstream.format.remote import Remote
from slipstream.format.writer import Layout, WriteResult, ShardPlan, place, stored_fields

_SHARD_FILE = re.compile(r"shard-[0-9]{5,}-[0-9a-f]{8}\.slip")


def write_shards(path: str | os.PathLike, plan: ShardPlan, descriptors: list[L.FieldDescriptor], page_size: int,
                 page_checksums: bool, user: bytes, encoded: Iterator[tuple[int, Any]], count: int, on_error: str,
                 remote: Remote | None, verbose: bool) -> WriteResult:
    """Lay ``encoded`` samples out into shards at ``path`` and write the
    manifest (see the module docstring)."""
    from tqdm import tqdm

    location = open_location(path, remote)
    folder = location.local_folder()
    local = folder is not None
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        staging = folder
        tempfiles.remove_stale(staging / "shards")
    else:
        staging = Path(tempfile.mkdtemp(prefix="slipstream-shards-"))
    uploads = ThreadPoolExecutor(1, thread_name_prefix="slipstream-upload")
    pending: list[Future] = []
    entries: list[M.ShardEntry] = []
    skipped: list[tuple[int, str]] = []
    shard: _Shard | None = None
    name = str(path).rstrip("/").rsplit("/", 1)[-1]
    try:
        with tqdm(total=count, unit="img", unit_scale=True, desc=f"writing {name}",
                  disable=None if verbose else True) as progress:
            cuts = ShardCuts(plan, page_size)
            stores = stored_fields(descriptors)
            for index, outcome in encoded:
                progress.update(1)
                if isinstance(outcome, str):
                    if on_error == "raise":
                        raise FieldValueError(outcome)
                    skipped.append((index, outcome))
                    continue
                if cuts.add(index, stored_sizes(stores, outcome)) and shard is not None:
                    entries.append(_finish(shard, user, location, local, uploads, pending))
                    shard = None
                if shard is None:
                    shard = _Shard(cuts.number, staging, descriptors, page_size, page_checksums, count or 0)
                shard.layout.add(outcome)
            if shard is not None or not entries:
                shard = shard or _Shard(0, staging, descriptors, page_size, page_checksums, 0)
                entries.append(_finish(shard, user, location, local, uploads, pending))
                shard = None
            for future in pending:
                future.result()
        manifest = publish(location, descriptors, page_size, page_checksums, user, entries)
    except BaseException as exc:
        if shard is not None:
            shard.discard()
        uploads.shutdown(wait=True, cancel_futures=True)
        if not local:
            shutil.rmtree(staging, ignore_errors=True)
        remove_unfinished(location, [e.name for e in entries])
        if isinstance(exc, SlipstreamError):
            raise type(exc)(f"{location.url} was not written: {exc}", status=exc.status, detail=exc.detail) from exc
        if isinstance(exc, OSError):
            raise OSError(exc.errno, f"{location.url} was not written: {exc.strerror or exc}") from exc
        raise
    uploads.shutdown(wait=True)
    if not local:
        shutil.rmtree(staging, ignore_errors=True)
    where = str(path) if folder is None else folder
    return WriteResult(where, manifest.samples, tuple(skipped), tuple(e.name for e in entries))


class ShardCuts:
    """Where a sharded write ends its shards, decided sample by sample from
    the sizes of the stored values alone: a writer that knows only the sizes
    (the Ray writer's driver) cuts exactly where one that lays the values
    out does.

    A shard ends before a sample whose first stored value would start a new
    data page, and only there, so that every shard's pages are the pages a
    single file of the same samples has (less the zeros after the last
    value of each shard): the dataset's page numbering, and with it the
    ``"quasi_random"`` order, is the same whether it is written as one file
    or as shards.  Of those places, it ends at the first where the shard's
    data would pass ``plan.size``, or where ``plan.shard_of`` moves on.
    """

    def __init__(self, plan: ShardPlan, page_size: int) -> None:
        self.plan = plan
        self.page_size = page_size
        self.number = 0  # the current shard
        self.pos = 0  # its bytes of page data
        self.samples = 0  # its samples

    def add(self, index: int, sizes: Sequence[int]) -> bool:
        """Count source sample ``index`` whose stored values have ``sizes``
        bytes (see :func:`stored_sizes`).  Returns whether it starts a new
        shard (:attr:`number` is then that shard's)."""
        first = next((size for size in sizes if size), None)
        starts_page = first is not None and place(self.pos, first, self.page_size) % self.page_size == 0
        wanted = self.plan.shard_of(index)
        cut = bool(self.samples) and starts_page and (
            self.number < wanted if wanted is not None else self.pos + sum(sizes) > (self.plan.size or 0))
        if cut:
            self.number, self.pos, self.samples = self.number + 1, 0, 0
        for size in sizes:
            self.pos = place(self.pos, size, self.page_size) + size
        self.samples += 1
        return cut


def stored_sizes(stores: Sequence[bool], encoded: Sequence[Any]) -> list[int]:
    """The bytes of each value of ``encoded`` that goes into the pages."""
    return [0 if value.data is None else len(value.data) for keep, value in zip(stores, encoded) if keep]


class _Shard:
    """One shard being written, under a temporary name in ``folder``."""

    def __init__(self, number: int, folder: Path, descriptors: list[L.FieldDescriptor], page_size: int,
                 page_checksums: bool, capacity: int) -> None:
        self.number = number
        self.tmp, self.file = tempfiles.create(folder / "shards")
        self.layout = Layout(self.file, descriptors, page_size, page_checksums, max(1, capacity))

    def complete(self, user: bytes) -> tuple[M.ShardEntry, Path]:
        """Write the shard's tables and header, make it durable and give it
        its final name.  Returns its manifest entry and its path."""
        self.layout.finish(user)
        self.file.flush()
        os.fsync(self.file.fileno())
        header = self.layout.header
        name = M.shard_name(self.number, int(header["header_crc32"]))
        size = os.fstat(self.file.fileno()).st_size
        final = self.tmp.with_name(name)
        os.replace(self.tmp, final)
        self.file.close()
        return M.ShardEntry(name, self.layout.samples, size, int(header["page_count"]),
                            int(header["header_crc32"])), final

    def discard(self) -> None:
        self.file.close()
        self.tmp.unlink(missing_ok=True)


def _finish(shard: _Shard, user: bytes, location: Any, local: bool, uploads: ThreadPoolExecutor,
            pending: list[Future]) -> M.ShardEntry:
    """Complete a shard (:meth:`_Shard.complete`) and start its upload."""
    entry, final = shard.complete(user)
    if not local:
        for done in [f for f in pending if f.done()]:
            done.result()  # an upload that failed stops the write now
        while sum(not f.done() for f in pending) >= 1:  # one upload at a time beside the writing
            next(f for f in pending if not f.done()).result()
        pending.append(uploads.submit(_upload, location, entry.name, final))
    return entry


def write_shard(location: Location, number: int, samples: Iterable[Sequence[Encoded]],
                descriptors: list[L.FieldDescriptor], page_size: int, page_checksums: bool,
                user: bytes) -> M.ShardEntry:
    """Lay ``samples`` (each one ``Encoded`` per field) out into shard
    ``number`` at ``location``: the bytes :func:`write_shards` gives the
    shard holding these samples.  The shard appears under its final name
    whole or not at all."""
    folder = location.local_folder()
    local = folder is not None
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
    staging = folder if folder is not None else Path(tempfile.mkdtemp(prefix="slipstream-shard-"))
    shard = _Shard(number, staging, descriptors, page_size, page_checksums, 1024)
    try:
        for encoded in samples:
            shard.layout.add(list(encoded))
        entry, final = shard.complete(user)
        if not local:
            _upload(location, entry.name, final)
        return entry
    except BaseException:
        shard.discard()
        raise
    finally:
        if not local:
            shutil.rmtree(staging, ignore_errors=True)


def _upload(location: Any, name: str, file: Path) -> None:
    try:
        location.put_file(name, file)
    finally:
        file.unlink(missing_ok=True)


def _user(user: bytes) -> dict[str, Any]:
    import json

    return json.loads(user.decode("utf-8")) if user else {}


def _listed(location: Any) -> set[str]:
    """The shards the manifest now at ``location`` lists (none without one)."""
    try:
        return {s.name for s in M.decode(location.read_all(M.NAME)).shards}
    except (SlipstreamError, ValueError, OSError):
        return set()


def publish(location: Location, descriptors: list[L.FieldDescriptor], page_size: int, page_checksums: bool,
            user: bytes, entries: list[M.ShardEntry]) -> M.Manifest:
    """Write the manifest of shards ``entries`` (already at ``location``),
    atomically, then remove the shards the manifest it replaced listed and
    it does not."""
    replaced = _listed(location)
    manifest = M.from_descriptors(descriptors, page_size, page_checksums, _user(user), entries)
    location.put_bytes(M.NAME, manifest.encode())
    _remove_shards(location, replaced - {e.name for e in entries})
    return manifest


def remove_unfinished(location: Location, written: Iterable[str]) -> None:
    """Remove the shards ``written`` by a write that failed, those of them
    the manifest at ``location`` does not list."""
    _remove_shards(location, set(written) - _listed(location))


def _remove_shards(location: Any, names: set[str]) -> None:
    """Remove the shards ``names`` at ``location`` (those of them that are
    still slipstream shards: a file a user put there since is kept), then
    any left that the manifest now there lists (a write into an object
    store, which has no lock, may have listed them since)."""
    names = {name for name in names if _is_shard(location, name)}
    if names:
        names -= _listed(location)
    for name in sorted(names):
        location.delete(name)


def _is_shard(location: Any, name: str) -> bool:
    """Whether ``name`` at ``location`` is a slipstream shard: a shard's
    name, a regular file (not a link to one) and slipstream's magic."""
    if not _SHARD_FILE.fullmatch(name):
        return False
    folder = location.local_folder()
    try:
        if folder is not None and not stat.S_ISREG(os.lstat(folder / name).st_mode):
            return False
        head, _ = location.read_head(name, len(L.MAGIC))
    except (SlipstreamError, OSError):
        return False
    return bytes(head) == L.MAGIC
