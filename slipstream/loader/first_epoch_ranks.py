"""A first epoch shared by the ranks of a ``torch.distributed`` group: each
rank streams its own batches, and the dataset file is assembled once.

When the source's file is not in the cache, rank 0 takes the cache's lock
and tells every rank (:func:`claim`).  Each rank then runs a first epoch of
its own (:class:`~slipstream.loader.first_epoch.FirstEpoch`): the samples
of its batches arrive in a temporary file of its own, decoded in place.
At the start of the next epoch every rank calls :func:`assemble` at once:

1. the ranks exchange which samples each has (and whether one failed);
2. each sample belongs to the lowest rank that has it; the samples no rank
   visited (a subset of indices, samples dropped with ``drop_last``, the
   batches before a resumed position) are cut into one contiguous share per
   rank, which encodes them now;
3. each rank stores its samples as a part (:mod:`slipstream.format.parts`,
   as the Ray writer's tasks do) next to the target;
4. rank 0 lays the parts out into the file, in index order, under the lock
   (a sample that could not be encoded, with ``on_error`` other than
   ``"raise"``, arrives without values, as on one rank), and tells every
   rank the outcome; the parts are removed.

The file is then the very file :func:`slipstream.write` writes for the
source, byte for byte, whatever the order of epoch 0: it is laid out in
index order from values encoded exactly as ``write`` encodes them.  No rank
reads it before it is complete: every rank waits for rank 0's word.  Ranks
on several machines need a cache folder they share (``SLIPSTREAM_CACHE_DIR``
on a shared file system), or a URL as ``cache_dir``: rank 0 reads every
rank's part there; with a URL it then uploads the file, and a rank on
another machine downloads it (once per machine).

A sample whose reading failed (an ``OSError``) is read once more by the
rank that owns it, in step 3, as on one rank.  When one still cannot be
read, the file is kept out of the cache, as on one rank: rank 0 completes
it under its temporary name, and every rank reads its later epochs from
that file (with a URL, rank 0 uploads it under that name too, each other
machine downloads it once, and rank 0 then deletes it there).  Each rank
holds the copy it reads with a shared lock (:func:`tempfiles.hold`), so
that no clean-up removes it; the last rank to let go of a copy, as its
loader closes, removes it.
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import Any

import numpy as np

from slipstream.errors import SlipstreamError
from slipstream.format import tempfiles
from slipstream.format.arriving import ArrivingFile
from slipstream.format.location import LocalFolder
from slipstream.format.parts import read_part, write_part


def group_is(rank: int, world_size: int) -> bool:
    """Whether this process is rank ``rank`` of an initialized
    ``torch.distributed`` group of ``world_size`` ranks (through which the
    ranks can share a first epoch)."""
    import torch.distributed as dist

    return dist.is_available() and dist.is_initialized() and \
        (dist.get_rank(), dist.get_world_size()) == (rank, world_size)


def claim(entry: Any, rank: int, world_size: int) -> contextlib.AbstractContextManager[Any] | None:
    """Whether this process writes ``entry``'s file in a first epoch: the
    lock to hold while it does (held already; on ranks other than 0, a lock
    that holds nothing), or None when the file exists or another process
    is writing it (or a copy of it is shared at a URL).  Rank 0 decides,
    and tells every rank of the group (which all call this at once)."""
    held = None
    if rank == 0 and not entry.path.exists() and not (entry.shared is not None and entry.shared.exists()):
        lock = entry.lock(wait=False, streaming=True)
        if lock.__enter__() and not entry.path.exists():
            held = lock
        else:
            lock.__exit__(None, None, None)
    if world_size == 1:
        return held
    import torch.distributed as dist

    decided = [held is not None]
    dist.broadcast_object_list(decided, src=0)
    if not decided[0]:
        return None
    return held if rank == 0 else contextlib.nullcontext()


def part_name(target: Path, rank: int, world_size: int) -> str:
    """The name of rank ``rank``'s part of ``target``, in ``target``'s folder."""
    return f".{target.name}.part-{rank}-of-{world_size}"


def assemble(first: Any, rank: int, world_size: int) -> tuple[Path, dict[int, str]]:
    """Complete the file of a first epoch shared by ``world_size`` ranks
    (see the module docstring); every rank calls it at once.  Returns the
    file's path, and the samples of every rank that still could not be
    read (and why): when there are any, the file is out of the cache, and
    ``first`` lets go of this rank's copy of it when it closes.

    Raises:
        SlipstreamError: another rank could not make its samples arrive,
            write its part, or lay the file out (naming the rank and why);
            this rank's own error is raised as it is.
    """
    import torch.distributed as dist

    target, shared = first.entry.path, first.entry.shared
    location = LocalFolder(target.parent) if shared is None else shared.location
    names = [part_name(target, r, world_size) for r in range(world_size)]

    def together(what: str, step: Any) -> Any:
        """Run ``step`` here, then learn every rank's outcome: raise the first failure."""
        result, error = None, None
        try:
            result = step()
        except Exception as exc:
            error = exc
        outcomes: list[Any] = [None] * world_size
        dist.all_gather_object(outcomes, (result, None if error is None else f"{type(error).__name__}: {error}"))
        if error is not None:
            raise error
        failed = [(r, message) for r, (_, message) in enumerate(outcomes) if message is not None]
        if failed:
            r, message = failed[0]
            raise SlipstreamError(f"{target} was not written: rank {r} of {world_size} could not {what}: {message}")
        return [value for value, _ in outcomes]

    def unseen(path: Path) -> str:
        return (f"rank {rank} of {world_size} does not see {path}, which rank 0 wrote: ranks on several machines "
                f"need a cache folder they share (SLIPSTREAM_CACHE_DIR), or a URL as cache_dir")

    def arrived() -> bytes:
        first.wait()
        return np.packbits(first.file.arrived).tobytes()

    count = len(first.file.arrived)
    has = np.stack([np.unpackbits(np.frombuffer(bits, np.uint8), count=count).astype(bool)
                    for bits in together("make its samples arrive", arrived)])
    owner = np.where(has.any(0), has.argmax(0), -1)
    for r, share in enumerate(np.array_split(np.flatnonzero(owner < 0), world_size)):
        owner[share] = r
    mine = np.flatnonzero(owner == rank)

    def write_mine() -> tuple[dict[int, str], dict[int, str]]:
        file = first.file
        first.arrive(mine[~file.arrived[mine]].tolist())
        first.read_again(sorted(file.pending.intersection(mine.tolist())))
        file.publish()
        location.delete(names[rank])
        write_part(location, names[rank], file.reader.descriptors,
                   [file.stored(i) for i in mine.tolist() if i not in file.unreadable])
        return {i: file.unreadable[i] for i in mine.tolist() if i in file.unreadable}, first.unread(mine.tolist())

    try:
        written = together("write its part", write_mine)
    except BaseException:  # no file is laid out: no part is left behind (at a URL, nothing else removes it)
        location.delete(names[rank])
        raise
    unreadable = {i: why for part, _ in written for i, why in part.items()}
    unread = {i: why for _, part in written for i, why in part.items()}

    def lay_out() -> str | None:
        if rank != 0:
            return None
        try:
            laid, path = _lay_out(first, location, names, owner, unreadable, keep=not unread)
        finally:
            for name in names:
                location.delete(name)
        try:
            if shared is not None:
                (shared.beside(path.name) if unread else shared).upload(path)
        except BaseException:
            laid.discard()
            raise
        if unread:  # kept out of the cache: every rank holds it while it reads it (take)
            laid.hand_over()
        return path.name

    name = together("lay out the file", lay_out)[0]
    first.file.discard()
    path = target.with_name(name)

    def take() -> None:
        """Hold this machine's copy of the file kept out of the cache
        (downloaded once per machine): the last rank to let go of it
        removes it."""
        lock = first.entry.lock() if shared is not None and not path.exists() else contextlib.nullcontext()
        with lock:
            if shared is not None and not path.exists():
                shared.beside(name).download(path)
            try:
                fd = tempfiles.hold(path)
            except FileNotFoundError:
                raise SlipstreamError(unseen(path)) from None
        first.removals.append(lambda: tempfiles.let_go(path, fd))

    if unread:
        try:
            together("read the file kept out of the cache", take)
        finally:  # every machine has its copy now, or none will read it
            if rank == 0 and shared is not None:
                shared.location.delete(name)
        return path, unread
    if not path.exists() and shared is not None:  # another machine's: downloaded once per machine
        with first.entry.lock():
            if not path.exists():
                shared.download(path)
    if not path.exists():
        raise SlipstreamError(unseen(path))
    return path, unread


def _lay_out(first: Any, location: LocalFolder, names: list[str], owner: np.ndarray,
            unreadable: dict[int, str], keep: bool) -> tuple[ArrivingFile, Path]:
    """Write the file of ``first`` from the parts ``names`` (part ``r``
    holding the samples ``owner`` gives rank ``r``, in index order, but
    those ``unreadable``, which arrive without values): finished as
    :meth:`ArrivingFile.finish` finishes it with ``keep``: the file and
    its path."""
    missing = [name for name in names if not location.exists(name)]
    if missing:
        raise SlipstreamError(f"{', '.join(missing)} not found in {location.url}: ranks on several machines need a "
                              f"cache folder they share (SLIPSTREAM_CACHE_DIR), or a URL as cache_dir")
    entry = first.entry
    descriptors = first.file.reader.descriptors
    stored = np.ones(len(owner), bool)
    stored[list(unreadable)] = False
    counts = np.bincount(owner[stored], minlength=len(names))
    parts = [read_part(location, name, descriptors, 0, int(n)) for name, n in zip(names, counts)]
    file = ArrivingFile(entry.path, first.fields, len(owner), entry.page_size, entry.user_metadata)
    try:
        for index, rank in enumerate(owner.tolist()):  # in index order: the layout of slipstream.write
            if index in unreadable:
                file.fail(index, unreadable[index])
            else:
                file.add(index, next(parts[rank]))
        path = file.finish(keep)
    except BaseException:
        file.discard()
        raise
    return file, path


__all__ = ["assemble", "claim", "group_is", "part_name"]
