"""The temporary files of writers: created next to their target, and told
apart from those of writers that died.

A writer writes ``.{target name}.{pid}-{random}.tmp`` in the target's folder
and renames it over the target when it is complete.  While it writes, it
holds an exclusive ``flock`` on the file.  The operating system drops the
lock when the process ends, however it ends (``kill -9`` and the
out-of-memory killer included), so a later writer to the same target removes
every such file it can lock, and leaves the files of writers still running
(on this machine, or on another one sharing the folder over NFS, whose locks
Linux forwards to the server) alone.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import BinaryIO

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; stale files are then left in place
    fcntl = None  # type: ignore[assignment]

SUFFIX = ".tmp"


def pattern(target: Path) -> str:
    """The glob pattern of the temporary files of writers of ``target``."""
    return f".{target.name}.*{SUFFIX}"


def create(target: Path) -> tuple[Path, BinaryIO]:
    """A new, locked temporary file for ``target``: its path and the file,
    open for writing.  The lock lasts until the file is closed (or the
    process and every process it forked since have ended)."""
    while True:
        path = target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0), 0o644)
        if fcntl is None:
            return path, os.fdopen(fd, "wb")
        # Blocks only while another writer's clean-up holds the lock; if that
        # clean-up then removed the file, this one is gone: start again.
        fcntl.flock(fd, fcntl.LOCK_EX)
        if os.fstat(fd).st_nlink:
            return path, os.fdopen(fd, "wb")
        os.close(fd)


def remove_stale(target: Path) -> list[Path]:
    """Remove the temporary files of writers of ``target`` that are no longer
    running (those whose lock can be taken); return their paths."""
    removed: list[Path] = []
    if fcntl is None:
        return removed
    for path in sorted(target.parent.glob(pattern(target))):
        try:
            fd = os.open(path, os.O_RDWR | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            continue  # gone already, or not ours to open
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue  # a running writer holds it
        try:
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                path.unlink()
                removed.append(path)
        except OSError:
            pass
        finally:
            os.close(fd)
    return removed
