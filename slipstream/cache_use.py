"""What happens to the dataset cache as :func:`slipstream.cached` and
loaders use it: the file to be written is announced (where, about how
big), a file used gets its note (:mod:`slipstream.cache_files`), and the
older copies of the same source that it supersedes are removed once no
process holds them."""

from __future__ import annotations

import json
import logging
import os
import shutil
from pathlib import Path
from typing import Any

from slipstream.cache_files import (DATASET_SUFFIX, LOGGER, NOTE_NAME, NOTE_SUFFIX, human_size, note_path, read_note,
                                    remove)
from slipstream.format import tempfiles

MODE_FACTORS = {"jpeg": 1.0, "smart": 1.0, "yuv420": 3.0, "raw": 6.0}
"""About how many times the bytes of its JPEG input an image takes in each
write mode (README, "Which mode": 2.8x for yuv420 and 5.9x for raw on
photos; smart stores small images raw, but they are small)."""


def used(entry: Any) -> None:
    """The file of ``entry`` (a :class:`slipstream.convert.CacheEntry`),
    complete, was just found to match its source or written: write its note
    (or mark it used: its modification time becomes the time the source
    was identified), then remove the files it supersedes.  A cache folder
    that cannot be written to (read-only, full) keeps no note."""
    if not entry.path.exists():
        return  # another machine's file (a rank's, with a URL as the cache): its own process notes it
    try:
        _write_note(entry)
    except OSError as exc:
        LOGGER.debug("no note kept beside %s: %s", entry.path, exc)
        return
    supersede(entry)


def _write_note(entry: Any) -> None:
    modes = sorted({mode for mode in (getattr(f, "write_mode", None) for f in entry.fields.values()) if mode})
    note = {"source": _shortened(repr(entry.source)), "location": entry.location, "lineage": entry.lineage,
            "fields": list(entry.fields), "write_mode": ", ".join(modes) or None}
    path = note_path(entry.path)
    if read_note(entry.path) != note:
        tmp, file = tempfiles.create(path)
        try:
            with file:
                file.write(json.dumps(note, indent=1).encode())
            os.replace(tmp, path)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
    # A process that identified the source later may have marked it already: the latest time stands.
    last = max(entry.identified, path.stat().st_mtime)
    os.utime(path, (last, last))


def _shortened(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[:limit - 3] + "..."


def supersede(entry: Any) -> list[Path]:
    """Remove the files of ``entry``'s lineage (in its folder) used before
    ``entry`` was identified, unless a process holds them: the paths removed."""
    if entry.lineage is None:
        return []
    removed = []
    for note in sorted(entry.path.parent.glob(f"*{NOTE_SUFFIX}")):
        path = note.with_suffix(DATASET_SUFFIX)
        if path == entry.path or not NOTE_NAME.fullmatch(note.name) or read_note(path).get("lineage") != entry.lineage:
            continue
        try:
            last_used, size = note.stat().st_mtime, path.stat().st_size if path.exists() else 0
        except FileNotFoundError:
            continue
        if last_used >= entry.identified:
            continue  # used since: the source had that content then
        if remove(path):
            removed.append(path)
            LOGGER.info("removed %s (%s), an older copy of %s, superseded by %s", path, human_size(size),
                        _shortened(repr(entry.source)), entry.path.name,
                        extra={"removed": str(path), "bytes": size, "superseded_by": str(entry.path)})
        else:
            LOGGER.info("kept %s, an older copy superseded by %s: a process holds it (the next use, or "
                        "`slipstream cache prune --stale`, removes it)", path, entry.path.name)
    return removed


# ---------------------------------------------------------------- announcing


LARGE_COPY = 1 << 30
"""Bytes from which the copy a dataset file makes is announced as a
warning: a user is told of a gigabyte written to their cache folder."""


def announce(entry: Any, how: str) -> None:
    """Log that the file of ``entry`` is to be written (``how``: e.g.
    "written now", "written by the first epoch as it trains"): where, and
    about how big it will be; a WARNING, which Python shows without any
    logging set up, when that is :data:`LARGE_COPY` or more, or more than
    the free space of its disk."""
    estimate = estimated_bytes(entry)
    try:
        free = shutil.disk_usage(entry.path.parent).free
    except OSError:
        free = None
    size = "of unknown size" if estimate is None else f"about {human_size(estimate)}"
    room = "" if free is None else f", {human_size(free)} free there"
    large = estimate is not None and (estimate >= LARGE_COPY or (free is not None and estimate > free))
    level = logging.WARNING if large else logging.INFO
    LOGGER.log(level, "the dataset file of %s is %s at %s: %s%s (a copy of the source kept in the cache; "
               "`slipstream cache list` shows the cache, `slipstream cache prune` empties it)",
               _shortened(repr(entry.source)), how, entry.path, size, room,
               extra={"path": str(entry.path), "estimated_bytes": estimate, "free_bytes": free})


def estimated_bytes(entry: Any) -> int | None:
    """About how many bytes the file of ``entry`` will take: its source's
    bytes times the factor of its image fields' write mode (None: the
    source does not say its size)."""
    source_size = _source_bytes(entry.source, entry.identity or {})
    if source_size is None:
        return None
    modes = [getattr(f, "write_mode", None) for f in entry.fields.values()]
    factor = max([MODE_FACTORS.get(mode, 1.0) for mode in modes if mode is not None], default=1.0)
    return int(source_size * factor)


def _source_bytes(source: Any, identity: dict[str, Any]) -> int | None:
    """The bytes of the files ``source`` reads, where it says them: the
    files of its samples (image folders, segmentation folders), its tar
    shards, a Hugging Face dataset's size."""
    samples = getattr(source, "samples", None)
    if isinstance(samples, (list, tuple)) and samples and isinstance(samples[0], tuple):
        files = [part for sample in samples for part in sample if isinstance(part, Path)]
        if files:
            return sum(_file_size(file) for file in files)
    shards = identity.get("webdataset")
    if isinstance(shards, list):
        return sum(int(shard[1]) for shard in shards)
    size = getattr(getattr(source, "info", None), "dataset_size", None)
    return int(size) if isinstance(size, int) else None


def _file_size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0  # gone since the source was listed: writing it will say so
