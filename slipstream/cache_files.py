"""The files of one entry of the dataset cache, and the locks that keep
processes from removing what another one uses.

Beside each dataset file ``NAME.slip`` that :func:`slipstream.cached` or a
loader's first epoch keeps in a cache folder lie:

- ``NAME.json``, its note: the source it was made from (as ``repr`` shows
  it), the source's location, its fields and how their images are stored
  (``write_mode``), and the *lineage* of the file (a hash of the
  location and of the fields, without the content: the copies of one
  folder made for one set of fields share it).  The note's modification
  time is the last time the file was used, which is the last time it was
  found to match its source (:func:`slipstream.cache_use.used`).
- ``NAME.slip.lock``, while a process builds the file: it holds an
  exclusive ``flock`` on it, and removes it when done (:func:`slipstream.files.lock_removable`,
  :func:`slipstream.files.unlock_removable`), so that no lock files pile up.

A process that reads the file (a :class:`slipstream.Loader`) holds a
shared ``flock`` on the file itself (:func:`hold`).  A file is removed
only by a process that takes an exclusive lock on both (:func:`remove`):
never while it is read or built.

When a file is used, the other files of its lineage that were used less
recently (older copies of the same source, from before its content
changed) are *superseded*: they are removed then, unless a process holds
them (then by the next use, or ``slipstream cache prune --stale``; see
:mod:`slipstream.cache_use`).

This module imports nothing of slipstream's formats: :mod:`slipstream.cache`
lists and prunes the cache through it, and the formats use that module.
"""

from __future__ import annotations

import json
import logging
import os
import re
from pathlib import Path
from typing import Any

try:
    import fcntl
except ImportError:  # Windows: no advisory locks, so files are neither held nor removed
    fcntl = None  # type: ignore[assignment]

from slipstream.files import CLOEXEC, NOFOLLOW, NONBLOCK, lock_removable, unlock_removable

LOGGER = logging.getLogger("slipstream.cache")
"""The logger of the dataset cache: where a file is written and about how
big it will be (INFO; WARNING when it may not fit), which files were
removed as superseded (INFO)."""

NOTE_SUFFIX = ".json"
LOCK_SUFFIX = ".lock"
DATASET_SUFFIX = ".slip"

DIGEST_CHARS = 20
"""Hexadecimal digits of the hash that ends a cached file's name
(``NAME-DIGEST.slip``, :func:`slipstream.convert.cache_entry`)."""

_STEM = rf".+-[0-9a-f]{{{DIGEST_CHARS}}}"
DATASET_NAME = re.compile(rf"{_STEM}\.slip")
"""The names of cached dataset files: only those are listed or removed,
never another file that a cache folder (``cache_dir=``) holds."""
LOCK_NAME = re.compile(rf"{_STEM}\.slip\.lock")
NOTE_NAME = re.compile(rf"{_STEM}\.json")
TEMPORARY_NAME = re.compile(rf"\.{_STEM}\.(?:slip|json)\.[0-9]+-[0-9a-f]+\.tmp")
"""A writer's temporary file of a dataset file or a note
(:mod:`slipstream.format.tempfiles` names them)."""


def note_path(path: Path) -> Path:
    """The note of the dataset file ``path``."""
    return path.with_suffix(NOTE_SUFFIX)


def lock_path(path: Path) -> Path:
    """The build lock of the dataset file ``path``."""
    return path.with_name(path.name + LOCK_SUFFIX)


def read_note(path: Path) -> dict[str, Any]:
    """The note of the dataset file ``path`` ({} when it has none, or one
    that cannot be read: a file written before notes, or damaged)."""
    try:
        with open(note_path(path), encoding="utf-8") as file:
            note = json.load(file)
    except (OSError, ValueError):
        return {}
    return note if isinstance(note, dict) else {}


# ---------------------------------------------------------------- locks


def hold(path: Path) -> int | None:
    """Hold the dataset file ``path`` for reading (a shared lock on it):
    no prune or newer copy removes it until :func:`let_go`.  Its
    descriptor, or None when it cannot be held now (not a local file, no
    locks on this system, removed, or locked by its writer or a remover:
    try again later)."""
    if fcntl is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | CLOEXEC | NOFOLLOW | NONBLOCK)
    except OSError:
        return None
    try:
        # Not waiting: the exclusive lock of the writer that made the file lasts as long as its pages stay mapped
        # (a first epoch's, in this process), and a remover or a probe holds one for a moment.
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        if os.fstat(fd).st_nlink:
            return fd
    except OSError:
        pass
    os.close(fd)
    return None


def let_go(fd: int | None) -> None:
    """Let go of a file held by :func:`hold`."""
    if fd is not None:
        os.close(fd)


def held(path: Path) -> bool:
    """Whether a process holds the dataset file ``path`` (reads it) or its
    build lock (builds it, or removes it)."""
    return locked(path, os.O_RDONLY) or locked(lock_path(path), os.O_RDWR)


def locked(path: Path, flags: int = os.O_RDWR) -> bool:
    """Whether a process holds a lock on the file ``path`` (False when it
    does not exist); the probe's own lock is let go at once."""
    if fcntl is None:
        return False
    try:
        fd = os.open(path, flags | CLOEXEC | NOFOLLOW | NONBLOCK)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # drops the probe's lock
    return False


def remove(path: Path) -> bool:
    """Remove the dataset file ``path``, its note and its lock file, unless
    a process holds it or its lock: whether it was removed (or was gone)."""
    if fcntl is None:
        return False
    lock = lock_removable(lock_path(path), wait=False)
    if lock is None:
        return False  # being built, or another process removes it
    try:
        try:
            fd = os.open(path, os.O_RDONLY | CLOEXEC | NOFOLLOW | NONBLOCK)
        except FileNotFoundError:
            fd = None
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if os.fstat(fd).st_ino != os.stat(path, follow_symlinks=False).st_ino:
                    return False
                os.unlink(path)
            except BlockingIOError:
                return False  # a reader holds it
            except FileNotFoundError:
                return False  # another process removed it meanwhile
            finally:
                os.close(fd)
        note_path(path).unlink(missing_ok=True)
        return True
    finally:
        unlock_removable(lock_path(path), lock)


def remove_unheld_lock(path: Path, dry_run: bool = False) -> bool:
    """Remove the lock file ``path`` if no process holds it (one left by a
    process that was killed, or by an earlier release): whether it was
    (or, with ``dry_run``, would be)."""
    if fcntl is None:
        return False
    if dry_run:
        return path.exists() and not locked(path)
    fd = lock_removable(path, wait=False)
    if fd is None:
        return False
    unlock_removable(path, fd)
    return True


def remove_unheld(path: Path, dry_run: bool = False) -> bool:
    """Remove the regular file ``path`` (a writer's temporary file) if no
    process holds a lock on it: whether it was (or, with ``dry_run``,
    would be)."""
    if fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDWR | CLOEXEC | NOFOLLOW | NONBLOCK)
    except OSError:
        return False  # gone already, a link, or not ours to open
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        if os.fstat(fd).st_ino != os.stat(path, follow_symlinks=False).st_ino:
            return False
        if not dry_run:
            os.unlink(path)
        return True
    except OSError:
        return False  # a running writer holds it, or it went meanwhile
    finally:
        os.close(fd)


def human_size(size: int) -> str:
    """``size`` bytes as a short text: ``"140 GB"``, ``"61.7 kB"``, ``"512 bytes"``."""
    if size < 1000:
        return f"{size} bytes"
    value, unit = float(size), "bytes"
    for unit in ("kB", "MB", "GB", "TB", "PB"):
        value /= 1000
        if value < 999.5:
            break
    return f"{value:.1f} {unit}" if value < 99.95 else f"{value:.0f} {unit}"
