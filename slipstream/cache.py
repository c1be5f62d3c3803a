"""Where slipstream keeps what it can make again: compiled pipeline stages,
converted datasets, pages read from object stores; and the dataset cache
as ``slipstream.cache`` shows it: :func:`list` and :func:`prune` (the
work is done by :mod:`slipstream.dataset_cache`, which, like this module,
imports none of slipstream's formats: they use this module).

Example::

    import slipstream as ss

    for entry in ss.cache.list():
        print(entry.path.name, entry.bytes, entry.source, entry.last_used)
    ss.cache.prune(stale=True, dry_run=True).removed   # what would go
"""

from __future__ import annotations

import datetime
import os
from pathlib import Path

from slipstream.dataset_cache import CachedDataset, Pruned, entries, prune_cache
from slipstream.errors import ArgumentError

CACHE_VARIABLE = "SLIPSTREAM_CACHE_DIR"
"""The environment variable naming the cache root."""


class CacheFolderError(ArgumentError):
    """A cache folder cannot be created or used: a path on the way is a
    file, or a symbolic link to nothing (the message names it, and the
    variable or argument that chose it)."""


def cache_root() -> Path:
    """``$SLIPSTREAM_CACHE_DIR``, else ``~/.cache/slipstream``: the folder
    under which each cache has its own folder (``stages``, ``datasets``,
    ``pages``)."""
    configured = os.environ.get(CACHE_VARIABLE)
    return Path(configured) if configured else Path.home() / ".cache" / "slipstream"


def datasets_dir() -> Path:
    """The dataset cache's folder: ``datasets`` under :func:`cache_root`."""
    return cache_root() / "datasets"


def datasets_folder(cache_dir: str | os.PathLike | None = None) -> Path:
    """The local folder of the dataset cache: ``cache_dir``, else
    :func:`datasets_dir`.

    Raises:
        ArgumentError: ``cache_dir`` is a URL: a cache shared there keeps
            each machine's copies in its default folder, the one to list.
    """
    if cache_dir is None:
        return datasets_dir()
    if "://" in str(cache_dir):
        raise ArgumentError(f"{cache_dir} is a shared cache in object storage: each machine keeps its copies in its "
                            f"default cache folder, which is the one to list or prune (leave cache_dir out)")
    return Path(cache_dir)


def made_folder(folder: Path, chosen_by: str | None = None) -> Path:
    """``folder``, created (with its parents) when missing.

    Args:
        folder: the folder.
        chosen_by: what chose it, for the message (e.g. ``"cache_dir="``);
            None: the cache root (``$SLIPSTREAM_CACHE_DIR``, or the default).

    Raises:
        CacheFolderError: ``folder`` or a folder above it is a file, or a
            symbolic link to nothing (``mkdir`` would say only "File exists").
    """
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):
        if chosen_by is None:
            configured = os.environ.get(CACHE_VARIABLE)
            chosen_by = f"{CACHE_VARIABLE}={configured}" if configured else "the default cache folder"
        raise CacheFolderError(f"{folder} cannot be made a cache folder ({chosen_by}): {_blocked(folder)}; point "
                               f"{CACHE_VARIABLE} (or cache_dir=) at a folder, or create it") from None
    return folder


def _blocked(folder: Path) -> str:
    """What stands in the way of creating ``folder``: the first path on the
    way (from the root) that is a dangling symbolic link or not a folder."""
    for path in [*reversed(folder.parents), folder]:
        if path.is_symlink() and not path.exists():
            return f"{path} is a symbolic link to {os.readlink(path)}, which does not exist"
        if path.exists() and not path.is_dir():
            return f"{path} is a file, not a folder"
    return "a path on the way is not a folder"


def list(cache_dir: str | os.PathLike | None = None) -> tuple[CachedDataset, ...]:
    """The dataset files of the dataset cache (``cache_dir``, default
    ``$SLIPSTREAM_CACHE_DIR/datasets`` or ``~/.cache/slipstream/datasets``),
    most recently used first: what :func:`slipstream.cached` and loaders
    over sources wrote there, each a :class:`~slipstream.dataset_cache.CachedDataset`
    (size, source, last use, whether it is superseded or in use).  Reads
    only: nothing is created or removed.

    Raises:
        ArgumentError: ``cache_dir`` is a URL (see :func:`datasets_folder`).
    """
    return entries(datasets_folder(cache_dir))


def prune(cache_dir: str | os.PathLike | None = None, *, stale: bool = False,
          older_than: float | datetime.timedelta | None = None, max_bytes: int | None = None,
          everything: bool = False, dry_run: bool = False) -> Pruned:
    """Remove dataset files from the dataset cache (``cache_dir`` as for
    :func:`list`); a file that a process holds (a loader reading it, a
    writer building it) is never removed, and is reported as held.  Lock
    and temporary files that no process holds are removed too.

    Args:
        stale: remove the files superseded by a newer copy of the same
            source (same source location and fields, other content), and
            those whose source folder no longer exists.
        older_than: remove the files not used for this long (seconds, or a
            ``timedelta``).
        max_bytes: then remove the least recently used files until the
            rest take at most this many bytes.
        everything: remove every file.
        dry_run: remove nothing; the result says what would go.

    Returns:
        A :class:`~slipstream.dataset_cache.Pruned`: the files removed (or
        that would be), those kept because a process holds them, and the
        lock and temporary files removed.

    Raises:
        ArgumentError: no criterion is given, or one is out of range;
            ``cache_dir`` is a URL.
    """
    return prune_cache(datasets_folder(cache_dir), stale=stale, older_than=older_than, max_bytes=max_bytes,
                       everything=everything, dry_run=dry_run)
