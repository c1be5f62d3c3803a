"""The dataset cache as a list of records, and its pruning: what
:func:`slipstream.cache.list`, :func:`slipstream.cache.prune` and
``slipstream cache list | prune`` do.

Each dataset file of a cache folder is a :class:`CachedDataset`: its size,
its source and when it was last used (from its note, see
:mod:`slipstream.cache_files`; a file written before notes were kept has
no source, and its own modification time stands for its last use),
whether a newer copy of the same source supersedes it, whether its source
folder is gone, and whether a process holds it.  Pruning removes the files
that its criteria choose, except those a process holds, and the lock,
note and temporary files that nothing holds or that belong to no file.
"""

from __future__ import annotations

import dataclasses
import datetime
import os
import time
from collections.abc import Iterable
from pathlib import Path
from stat import S_ISREG
from typing import Any

from slipstream import cache_files
from slipstream.cache_files import DATASET_SUFFIX
from slipstream.errors import ArgumentError

LOCATION_PATHS = ("folder", "coco", "segmentation", "litdata")
"""The keys of a source location (:func:`slipstream.sources.identity.source_location`)
that name where the source is, most telling first."""


@dataclasses.dataclass(frozen=True)
class CachedDataset:
    """A dataset file of the dataset cache.

    Attributes:
        path: the file.
        bytes: its size.
        source: the source it was made from, as ``repr`` shows it (None:
            written before slipstream kept notes of its files).
        location: where the source is (a folder, an annotation file, a
            URL), or None when that is not known.
        fields: the names of its fields (empty when not known).
        write_mode: how its images are stored (``"jpeg"``, ``"yuv420"``...;
            several joined by commas), or None (no image field, or not known).
        last_used: when it was last used (written, or found to match its
            source by :func:`slipstream.cached` or a loader).
        superseded: another file of the same source and fields was used
            more recently (the source changed since this one was made).
        source_gone: its source folder (or file) no longer exists.
        held: a process holds it (a loader reads it, or it is being
            written or removed): no prune removes it now.
    """

    path: Path
    bytes: int
    source: str | None
    location: str | None
    fields: tuple[str, ...]
    write_mode: str | None
    last_used: datetime.datetime
    superseded: bool
    source_gone: bool
    held: bool

    @property
    def stale(self) -> bool:
        """Whether it serves no current source: superseded, or its source gone."""
        return self.superseded or self.source_gone


@dataclasses.dataclass(frozen=True)
class Pruned:
    """What :func:`prune_cache` removed.

    Attributes:
        removed: the files removed (with ``dry_run``: that would be).
        held: the files chosen but kept, because a process holds them.
        leftovers: lock, note and temporary files removed (or that would
            be) that nothing holds or that belong to no dataset file.
        dry_run: whether nothing was removed.
    """

    removed: tuple[CachedDataset, ...]
    held: tuple[CachedDataset, ...]
    leftovers: tuple[Path, ...]
    dry_run: bool

    @property
    def freed_bytes(self) -> int:
        """The bytes of the files removed (or that would be)."""
        return sum(entry.bytes for entry in self.removed)


def entries(folder: Path) -> tuple[CachedDataset, ...]:
    """The dataset files of the cache folder ``folder``, most recently used
    first; () when the folder does not exist."""
    if not folder.is_dir():
        return ()
    found = []
    for path in sorted(folder.glob(f"*{DATASET_SUFFIX}")):
        if not cache_files.DATASET_NAME.fullmatch(path.name):
            continue  # not a file the cache named: a user's own, in a cache_dir= folder
        try:
            stat = path.lstat()
        except FileNotFoundError:
            continue  # removed meanwhile
        if not S_ISREG(stat.st_mode):
            continue  # a link or a folder: not a file the cache wrote
        note = cache_files.read_note(path)
        try:
            last_used = cache_files.note_path(path).stat().st_mtime if note else stat.st_mtime
        except FileNotFoundError:
            last_used = stat.st_mtime
        found.append((path, stat.st_size, note, last_used))
    newest: dict[str, float] = {}
    for _, _, note, last_used in found:
        lineage = note.get("lineage")
        if lineage is not None:
            newest[lineage] = max(newest.get(lineage, last_used), last_used)
    records = [CachedDataset(path=path, bytes=size, source=note.get("source"), location=_where(note.get("location")),
                             fields=tuple(note.get("fields", ())), write_mode=note.get("write_mode"),
                             last_used=datetime.datetime.fromtimestamp(last_used, datetime.timezone.utc),
                             superseded=note.get("lineage") is not None and last_used < newest[note["lineage"]],
                             source_gone=_gone(note.get("location")), held=cache_files.held(path))
               for path, size, note, last_used in found]
    return tuple(sorted(records, key=lambda entry: entry.last_used, reverse=True))


def _where(location: Any) -> str | None:
    """The place a source location names (a local path or a URL)."""
    if not isinstance(location, dict):
        return None
    for key in LOCATION_PATHS:
        if isinstance(location.get(key), str):
            return location[key]
    shards = location.get("webdataset")
    if isinstance(shards, list) and shards:
        return str(shards[0]) if len(shards) == 1 else f"{shards[0]} and {len(shards) - 1} more shards"
    return None


def _gone(location: Any) -> bool:
    """Whether the local folder or file a source location names no longer exists."""
    where = _where(location) if isinstance(location, dict) and any(k in location for k in LOCATION_PATHS) else None
    return where is not None and "://" not in where and not os.path.exists(where)


def prune_cache(folder: Path, *, stale: bool = False, older_than: float | datetime.timedelta | None = None,
                max_bytes: int | None = None, everything: bool = False, dry_run: bool = False) -> Pruned:
    """:func:`slipstream.cache.prune` of the cache folder ``folder`` (see there)."""
    if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0):
        raise ArgumentError(f"max_bytes must be a number of bytes of at least 0, got {max_bytes!r}")
    limit = max_bytes
    age = _seconds(older_than)
    if not (stale or age is not None or limit is not None or everything):
        raise ArgumentError("prune removes what a criterion chooses: pass stale=True, older_than=, max_bytes= or "
                            "everything=True (slipstream cache prune --stale, --older-than, --max-size or --all)")
    listed = entries(folder)
    now = time.time()
    chosen = [entry for entry in listed if everything or (stale and entry.stale)
              or (age is not None and now - entry.last_used.timestamp() > age)]
    if limit is not None:
        left = sum(entry.bytes for entry in listed if entry not in chosen or entry.held)
        for entry in reversed(listed):  # least recently used first, until the rest fit
            if left <= limit:
                break
            if entry not in chosen and not entry.held:
                chosen.append(entry)
                left -= entry.bytes
    removed, held = [], []
    for entry in sorted(chosen, key=lambda e: e.last_used):
        gone = not entry.held if dry_run else cache_files.remove(entry.path)
        (removed if gone else held).append(entry)
    if removed and not dry_run:
        cache_files.LOGGER.info("pruned %d dataset files (%s) from %s", len(removed),
                                cache_files.human_size(sum(e.bytes for e in removed)), folder)
    return Pruned(tuple(removed), tuple(held), tuple(_leftovers(folder, dry_run)), dry_run)


def _seconds(older_than: float | datetime.timedelta | None) -> float | None:
    if older_than is None:
        return None
    seconds = older_than.total_seconds() if isinstance(older_than, datetime.timedelta) else older_than
    if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or not seconds >= 0:
        raise ArgumentError(f"older_than must be a number of seconds of at least 0 or a timedelta, got "
                            f"{older_than!r}")
    return float(seconds)


def _leftovers(folder: Path, dry_run: bool) -> Iterable[Path]:
    """Remove (or, with ``dry_run``, name) what the cache left in
    ``folder`` that nothing holds: lock files, notes of no dataset file,
    temporary files of writers that are no longer running."""
    if not folder.is_dir():
        return
    for name in sorted(os.listdir(folder)):
        path = folder / name
        if cache_files.LOCK_NAME.fullmatch(name):
            if cache_files.remove_unheld_lock(path, dry_run):
                yield path
        elif cache_files.NOTE_NAME.fullmatch(name):
            dataset = path.with_suffix(DATASET_SUFFIX)
            if not dataset.exists() and not cache_files.held(dataset):
                if not dry_run:
                    path.unlink(missing_ok=True)
                yield path
        elif cache_files.TEMPORARY_NAME.fullmatch(name) and cache_files.remove_unheld(path, dry_run):
            yield path
