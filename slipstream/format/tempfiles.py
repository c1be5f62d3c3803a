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

Each function has a form that works relative to an open folder (``dir_fd``),
for folders shared with other users (the page cache): a temporary file is
created with ``O_EXCL`` and ``O_NOFOLLOW``, and only regular files are ever
opened or removed, never what a symbolic link points to.
"""

from __future__ import annotations

import os
import secrets
from pathlib import Path
from typing import BinaryIO

from slipstream.files import CLOEXEC, NOFOLLOW, NONBLOCK

try:
    import fcntl
except ImportError:  # Windows: no advisory locks; stale files are then left in place
    fcntl = None  # type: ignore[assignment]

SUFFIX = ".tmp"
DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def pattern(target: Path) -> str:
    """The glob pattern of the temporary files of writers of ``target``."""
    return f".{target.name}.*{SUFFIX}"


def create(target: Path) -> tuple[Path, BinaryIO]:
    """A new, locked temporary file for ``target``: its path and the file,
    open for writing.  The lock lasts until the file is closed (or the
    process and every process it forked since have ended)."""
    folder = os.open(target.parent, os.O_RDONLY | DIRECTORY | CLOEXEC)
    try:
        name, file = create_in(folder, target.name)
    finally:
        os.close(folder)
    return target.with_name(name), file


def create_in(dir_fd: int, target: str) -> tuple[str, BinaryIO]:
    """:func:`create` for the file named ``target`` in the open folder
    ``dir_fd``: the temporary file's name and the file."""
    while True:
        name = f".{target}.{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}"
        fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_EXCL | CLOEXEC | NOFOLLOW, 0o644, dir_fd=dir_fd)
        try:
            if fcntl is None:
                return name, os.fdopen(fd, "wb")
            # Blocks only while another writer's clean-up holds the lock; if that
            # clean-up then removed the file, this one is gone: start again.
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_nlink:
                return name, os.fdopen(fd, "wb")
        except BaseException:
            # Ctrl-C (or any failure) before the caller holds the file: nobody
            # else knows its name, so it is removed here.
            os.close(fd)
            os.unlink(name, dir_fd=dir_fd)
            raise
        os.close(fd)


def remove_stale(target: Path) -> list[Path]:
    """Remove the temporary files of writers of ``target`` that are no longer
    running (those whose lock can be taken); return their paths."""
    try:
        folder = os.open(target.parent, os.O_RDONLY | DIRECTORY | CLOEXEC)
    except OSError:
        return []
    try:
        return [target.with_name(name) for name in remove_stale_in(folder, target.name)]
    finally:
        os.close(folder)


def remove_stale_in(dir_fd: int, target: str) -> list[str]:
    """:func:`remove_stale` for the file named ``target`` in the open folder
    ``dir_fd``: the names removed.  Only regular files are removed."""
    if fcntl is None:
        return []
    prefix = f".{target}."
    with os.scandir(dir_fd) as entries:
        names = sorted(e.name for e in entries if e.name.startswith(prefix) and e.name.endswith(SUFFIX)
                       and e.is_file(follow_symlinks=False))
    return [name for name in names if _remove_unheld(dir_fd, name)]


def _remove_unheld(dir_fd: int, name: str) -> bool:
    """Remove the regular file ``name`` of the open folder ``dir_fd`` if no
    process holds a lock on it: whether it was removed."""
    try:
        fd = os.open(name, os.O_RDWR | CLOEXEC | NOFOLLOW | NONBLOCK, dir_fd=dir_fd)
    except OSError:
        return False  # gone already, a link, or not ours to open
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        return False  # a running writer, or a reader, holds it
    try:
        if os.fstat(fd).st_ino == os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_ino:
            os.unlink(name, dir_fd=dir_fd)
            return True
    except OSError:
        pass
    finally:
        os.close(fd)
    return False


def hold(path: Path) -> int:
    """Open the complete temporary file ``path``, which several processes
    read, with a shared lock: while any process holds it, no clean-up
    removes it (:func:`remove_stale`, :func:`let_go`).  Returns the open
    file descriptor, for :func:`let_go`."""
    fd = os.open(path, os.O_RDONLY | CLOEXEC | NOFOLLOW)
    if fcntl is not None:
        fcntl.flock(fd, fcntl.LOCK_SH)
    return fd


def let_go(path: Path, fd: int) -> None:
    """Close ``fd`` (from :func:`hold`), and remove ``path`` unless another
    process still holds it: the last reader to let go removes it."""
    os.close(fd)
    if fcntl is None:
        return  # no locks to tell the last reader by: the file is left in place, as stale files are
    folder = os.open(path.parent, os.O_RDONLY | DIRECTORY | CLOEXEC)
    try:
        _remove_unheld(folder, path.name)
    finally:
        os.close(folder)
