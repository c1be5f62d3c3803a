"""Opening files that must be regular files, safely.

``open()`` on a FIFO waits for a writer forever, and on a folder fails with a
bare ``EISDIR``; a symbolic link is followed wherever it points.  The
functions here open without blocking (``O_NONBLOCK``, which changes nothing
for a regular file), optionally without following a final symbolic link
(``O_NOFOLLOW``) and relative to an open folder (``dir_fd``), then check
with ``fstat`` that what was opened is a regular file, and raise an error
that says what it is instead.
"""

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Callable
from pathlib import Path

CLOEXEC = getattr(os, "O_CLOEXEC", 0)
NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
NONBLOCK = getattr(os, "O_NONBLOCK", 0)


def kind(mode: int) -> str:
    """What a file of ``st_mode`` ``mode`` is, in words ("a folder", "a FIFO (named pipe)", ...)."""
    for test, words in ((stat.S_ISREG, "a regular file"), (stat.S_ISDIR, "a folder"),
                        (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                        (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                        (stat.S_ISBLK, "a block device")):
        if test(mode):
            return words
    return "not a regular file"


def open_regular(path: str | os.PathLike, flags: int = os.O_RDONLY, *, error: Callable[[str], Exception] = OSError,
                 dir_fd: int | None = None, follow: bool = True, mode: int = 0o644,
                 shown: str | os.PathLike | None = None) -> int:
    """A file descriptor of the regular file ``path`` (relative to the
    folder ``dir_fd`` when given), opened with ``flags``, never blocking.

    With ``follow=False`` a symbolic link as the last part of ``path`` is
    refused (and ``O_CREAT`` does not create the file it points to).
    ``error`` (an exception class, or any callable making the exception,
    called with a message naming ``shown``, default ``path``) is raised
    when the file is not a regular file; other failures of ``open``
    raise their ``OSError``.
    """
    shown = shown if shown is not None else path
    flags |= CLOEXEC | NONBLOCK | (0 if follow else NOFOLLOW)
    try:
        fd = os.open(path, flags, mode, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno == errno.ELOOP and not follow:
            raise error(f"{shown} is a symbolic link, which is not followed here (remove it, or point to the "
                        f"real file)") from None
        if exc.errno == errno.EISDIR:
            raise error(f"{shown} is a folder, not a regular file") from None
        if exc.errno == errno.ENXIO:  # a FIFO opened for writing without a reader, or a socket
            raise error(f"{shown} is a FIFO (named pipe) or a socket, not a regular file") from None
        raise
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):
        os.close(fd)
        raise error(f"{shown} is {kind(info.st_mode)}, not a regular file")
    return fd


def read_head(path: str | os.PathLike, length: int | None = None, *,
              error: Callable[[str], Exception] = OSError) -> bytes:
    """The first ``length`` bytes (fewer for a shorter file; None: all) of
    the regular file ``path``, opened by :func:`open_regular` (a FIFO raises
    ``error`` instead of waiting for a writer)."""
    fd = open_regular(path, error=error)
    try:
        size = os.fstat(fd).st_size
        wanted = size if length is None else min(length, size)
        parts = []
        done = 0
        while done < wanted:  # one pread gives at most about 2 GiB on Linux
            part = os.pread(fd, wanted - done, done)
            if not part:
                break
            parts.append(part)
            done += len(part)
        return b"".join(parts)
    finally:
        os.close(fd)


def lock_removable(path: str | os.PathLike, *, wait: bool = True, waiting: Callable[[int], None] | None = None,
                   error: Callable[[str], Exception] = OSError) -> int | None:
    """An exclusive ``flock`` on the lock file ``path``, made when missing
    (for anyone who may write its folder; another user's is opened for
    reading, which locks as well): its descriptor, or None without ``wait``
    when another holds it.  ``waiting(fd)`` is called before a wait.  A
    lock file is removed by its holder (:func:`unlock_removable`), so a
    file locked after its removal is no longer the one at ``path``: it is
    opened again.

    Raises:
        OSError: the file cannot be made; ``error`` (as for
            :func:`open_regular`): it is not a regular file.
    """
    import fcntl

    while True:
        try:
            fd = open_regular(path, os.O_RDWR | os.O_CREAT, follow=False, mode=0o666, error=error)
        except PermissionError:
            fd = open_regular(path, os.O_RDONLY, follow=False, error=error)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                if not wait:
                    os.close(fd)
                    return None
                if waiting is not None:
                    waiting(fd)
                fcntl.flock(fd, fcntl.LOCK_EX)
            if _in_place(path, fd):
                return fd
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)


def unlock_removable(path: str | os.PathLike, fd: int) -> None:
    """Remove the lock file ``path``, then let go of its lock ``fd`` (from
    :func:`lock_removable`): a waiter that then holds the removed file
    opens the next one.  A file that cannot be removed (another user's, in
    a sticky folder) stays, and a waiter locks it."""
    try:
        os.unlink(path)
    except OSError:
        pass
    finally:
        os.close(fd)


def _in_place(path: str | os.PathLike, fd: int) -> bool:
    """Whether the file open as ``fd`` is the regular file at ``path``."""
    try:
        there = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return stat.S_ISREG(there.st_mode) and (there.st_dev, there.st_ino) == (held.st_dev, held.st_ino)


def described(exc: OSError, path: str | os.PathLike | Path, doing: str) -> str:
    """``exc`` in words with the path and what was being done, e.g.
    ``"/cache/x.page: cannot write it: No space left on device (ENOSPC)"``."""
    name = errno.errorcode.get(exc.errno or 0, str(exc.errno))
    return f"{path}: cannot {doing}: {exc.strerror or exc} ({name})"
