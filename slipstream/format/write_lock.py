"""One writer at a time into a local folder that holds a sharded dataset.

A sharded write replaces shards and then the manifest, and removes the
shards the manifest it replaced listed: two writes interleaved in one
folder would each remove shards the other's manifest lists.  So a write
holds :class:`FolderWriteLock` on the folder from the check of the
destination to the removal of the replaced shards; a second write waits for
the first (saying so, naming it) and then finds the dataset the first left.

The lock is an ``flock`` on a file in the folder, released by the kernel
when its holder exits however it exits, so a killed writer never leaves the
folder locked.  The holder removes the file as it finishes; a waiter that
then finds it has locked a file no longer in the folder locks the new one.
A child forked while the lock is held (the writer's encoding workers)
closes its copy at once, so that a child outliving the write cannot keep
the folder locked; a second write into the folder from the process that
holds it is refused, naming the first, rather than waiting for itself.
An object-store prefix has no such lock: writes into one prefix at once are
refused nowhere, and the last manifest written wins.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import threading
import time
import weakref
from pathlib import Path
from types import TracebackType
from typing import Any

from slipstream.errors import StorageError
from slipstream.files import described, lock_removable, unlock_removable

NAME = ".slipstream-write.lock"
"""The lock file's name, in the folder being written."""

log = logging.getLogger(__name__)

_held: dict[str, int] = {}  # folder -> the descriptor of its lock, for every lock this process holds
_held_lock = threading.Lock()


def _close_in_child() -> None:
    """(In a child just forked.)  Close the inherited descriptors of the
    parent's locks: the lock is the parent's write, not the child's."""
    for fd in _held.values():
        try:
            os.close(fd)
        except OSError:
            pass
    _held.clear()


os.register_at_fork(after_in_child=_close_in_child)


class FolderWriteLock:
    """Exclusive hold on writing the dataset in ``folder``, waiting for a
    write that holds it (use as a context manager)."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self.path = self.folder / NAME
        self._fd: int | None = None
        self._key = os.path.realpath(self.folder)
        self._finalizer: weakref.finalize | None = None

    def __getstate__(self) -> dict[str, Any]:
        # A lock held is this process's: a copy elsewhere (a Ray task's datasink) holds nothing.
        return {**self.__dict__, "_fd": None, "_finalizer": None}

    def __enter__(self) -> FolderWriteLock:
        self.acquire()
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 traceback: TracebackType | None) -> None:
        self.release()

    def acquire(self) -> None:
        """Hold the lock, waiting for the write that holds it (the wait is
        logged once, naming that write).

        Raises:
            StorageError: the lock file cannot be made (a read-only folder),
                something other than a regular file has its name, or this
                process holds the lock already (a write into the folder
                that has not finished: one interrupted and still
                referenced, say).
        """
        with _held_lock:
            if self._key in _held and self._fd is None:
                raise StorageError(f"{self.folder} is being written by this process already (an earlier write into "
                                   f"it has not finished, or was interrupted and is still referenced): wait for it, "
                                   f"or let it go, before writing there again")
        try:
            fd = lock_removable(self.path, waiting=self._tell_waiting, error=StorageError)
        except StorageError:
            raise  # something other than a regular file has the lock's name
        except OSError as exc:
            raise StorageError(described(exc, self.path, "make the lock that keeps writers apart")) from None
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, _holder().encode("utf-8"), 0)
        except OSError:
            pass  # opened for reading only (another user's file): the lock holds, waiters hear of "another process"
        self._fd = fd
        with _held_lock:
            _held[self._key] = fd
        # A lock its writer lost without releasing it (an interrupted write dropped) is let go when collected.
        self._finalizer = weakref.finalize(self, _let_go, self._key, self.path, fd)

    def _tell_waiting(self, fd: int) -> None:
        log.warning("%s is being written by %s: waiting for that write to finish", self.folder,
                    os.pread(fd, 512, 0).decode("utf-8", "replace").strip() or "another process")

    def release(self) -> None:
        """Give the lock up (removing its file first, so that a waiter
        holding the removed file knows to lock afresh)."""
        if self._fd is None:
            return
        self._fd = None
        if self._finalizer is not None:
            self._finalizer()  # removes the file and closes the descriptor, once


def _let_go(key: str, path: Path, fd: int) -> None:
    """Remove the lock file ``path``, release its lock ``fd`` and forget it."""
    with _held_lock:
        if _held.get(key) == fd:
            del _held[key]
    unlock_removable(path, fd)


def _holder() -> str:
    """This process in words, for a writer that waits for it."""
    started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    return f"process {os.getpid()} on {socket.gethostname()} (since {started})"


def holding(location: Any) -> contextlib.AbstractContextManager[Any]:
    """The lock that keeps writers of the sharded dataset at ``location``
    (a :class:`~slipstream.format.location.Location`) apart: a
    :class:`FolderWriteLock` on its local folder, made if missing; nothing
    for an object-store prefix (see the module docstring)."""
    folder = location.local_folder()
    if folder is None:
        return contextlib.nullcontext()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise StorageError(described(exc, folder, "make the folder")) from None
    return FolderWriteLock(folder)
