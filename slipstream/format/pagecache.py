"""The node-local page cache: data pages of remote shards, kept on a local
disk and shared by every process of the node.

Layout: ``root/<shard key>/<page number>.page``, one file per page, where
the shard key is a hash of the shard's URL, size and header checksum (a
shard rewritten under the same name gets a new key).  A page file appears
only whole: it is written under a temporary name (straight to the disk,
``O_DIRECT``, see :meth:`PageCache._write`), after its checksum was
checked, and renamed into place, so a process killed mid-download leaves
nothing visible (its temporary file is removed by the next process that
fetches the page).  Each page has a lock file beside it, held (``flock``)
while one process downloads the page, so that processes asking for the same
page at once download it once: the others wait, then find it there.

Size: ``root/usage`` holds the bytes of the page files, updated under a lock
(``flock`` on it) together with every page added or removed.  When a new
page would pass the limit, pages are removed first: those the asking
process does not need again before the end of its plan, then those it
needs farthest in the future (Belady's rule), the oldest first among equals.

A shared folder: the cache works through file descriptors of the folders it
made (``openat``), never follows a symbolic link inside ``root``, opens
only regular files (a FIFO, a socket or a folder where a page, a lock or
``usage`` belongs is refused, named, at once), creates its files with
``O_EXCL`` or ``O_NOFOLLOW``, and removes only regular page files of the
shard folders it made.  What it refuses is reported as a
:class:`~slipstream.errors.StorageError` naming the path and what it is.
A page read back from the cache is checked against its checksum (once per
process); one that fails is removed and downloaded again (see
:meth:`PageCache.discard`).
"""

from __future__ import annotations

import errno
import hashlib
import mmap
import os
import stat
import threading
import weakref
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from slipstream.errors import ArgumentError, StorageError
from slipstream.format import tempfiles
from slipstream.files import CLOEXEC, NOFOLLOW, described, kind, open_regular

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX: no sharing between processes
    fcntl = None  # type: ignore[assignment]

NEVER = np.iinfo(np.int64).max
"""The next use of a page not needed again."""

DIRECTORY = getattr(os, "O_DIRECTORY", 0)
DIRECT = getattr(os, "O_DIRECT", 0)
BLOCK = 4096
"""What ``O_DIRECT`` writes align to: buffer address, length and file offset
(a multiple of the logical block size of any Linux disk, 512 or 4096 bytes)."""
DIRECT_CHUNK = 1 << 20
"""Bytes of a page copied into a download thread's aligned buffer and written at a time."""


def shard_key(url: str, size: int, header_crc32: int) -> str:
    """The cache folder name of a shard: readable start, unique hash."""
    digest = hashlib.sha256(f"{url}\0{size}\0{header_crc32}".encode()).hexdigest()[:24]
    tail = "".join(c if c.isalnum() or c in "-_." else "_" for c in url.rstrip("/").rsplit("/", 1)[-1])[:40]
    return f"{tail}-{digest}"


class PageCache:
    """A size-bounded folder of pages shared by the processes of a node.

    Args:
        root: the cache folder (created if missing).
        limit: bytes the page files may take in all (None: no limit).

    Attributes:
        downloads: pages this process downloaded (its GETs for pages).
        hits: pages this process found in the cache: page files already
            there, and pages it reads again from the mappings an earlier
            epoch left in place.
        evictions: pages this process removed to make room.
        discarded: pages this process removed because they failed their check.
        peak_bytes: the most bytes the cache held after this process
            added a page.

    Raises:
        StorageError: the cache folder, a shard's folder, a page, a lock or
            the usage counter is not what the cache made (a symbolic link, a
            FIFO, a folder where a file belongs, ...), or the disk refuses a
            write (full, read-only, no permission); the message names the path.
    """

    def __init__(self, root: Path, limit: int | None = None) -> None:
        self.root = Path(root)
        self.limit = limit
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StorageError(described(exc, self.root, "create the page cache's folder")) from None
        self.downloads = self.hits = self.evictions = self.discarded = self.peak_bytes = 0
        self._counters = threading.Lock()
        self._next_use: Callable[[str, int], int] = lambda key, page: NEVER
        self._usage_lock = threading.Lock()  # the flock below is per open file, not per thread
        self._kept: dict[str, int] = {}  # shard folders kept open, see _kept_folder
        self._kept_lock = threading.Lock()
        self._direct = bool(DIRECT)  # page files written with O_DIRECT (see _write)
        weakref.finalize(self, _close_all, self._kept)

    def set_priority(self, next_use: Callable[[str, int], int]) -> None:
        """How soon this process needs page ``(key, page)`` again (smaller:
        sooner; :data:`NEVER`: not at all), which eviction consults."""
        self._next_use = next_use

    def path(self, key: str, page: int) -> Path:
        """Where page ``page`` of shard ``key`` lives in the cache."""
        return self.root / key / _page_name(page)

    def open(self, key: str, page: int, download: Callable[[], Any]) -> tuple[int, bool]:
        """A read-only file descriptor of the page, downloading it first
        (``download()`` gives its checked bytes) when no process has, and
        whether this call downloaded it.  The caller closes the descriptor;
        the page stays readable through it even when it is evicted meanwhile."""
        name = _page_name(page)
        fd = self._open_page(self._kept_folder(key), key, name)
        if fd is not None:
            self._count("hits")
            return fd, False
        with self._folder(key) as folder:
            with self._page_lock(folder, key, name):  # waits while another process downloads this page
                fd = self._open_page(folder, key, name)
                if fd is not None:
                    self._count("hits")
                    return fd, False
                tempfiles.remove_stale_in(folder, name)  # left by a process killed while it wrote this page
                data = memoryview(download()).cast("B")
                self._count("downloads")
                return self._admit(folder, key, page, data), True

    def note_hits(self, pages: int) -> None:
        """Count ``pages`` reads of pages this process still has mapped from
        the cache (an earlier epoch's): hits that open no file."""
        with self._counters:
            self.hits += pages

    def discard(self, key: str, page: int, fd: int) -> bool:
        """Remove the page file ``fd`` reads from the cache, if it is still
        the page file there (not one another process put back since), e.g.
        because it failed its checksum; whether it was removed."""
        name = _page_name(page)
        mine = os.fstat(fd)
        with self._folder(key) as folder, self._page_lock(folder, key, name):
            try:
                there = os.stat(name, dir_fd=folder, follow_symlinks=False)
            except FileNotFoundError:
                return False
            if (there.st_dev, there.st_ino) != (mine.st_dev, mine.st_ino):
                return False
            with self._locked_usage() as usage:
                os.unlink(name, dir_fd=folder)
                usage[0] -= there.st_size
            self._count("discarded")
            return True

    def usage(self) -> int:
        """Bytes of page files in the cache now (as its counter says)."""
        with self._locked_usage() as usage:
            return usage[0]

    def stats(self) -> dict[str, int | None]:
        """The cache's counters: ``bytes`` held now, ``limit``, and this
        process's ``downloads``, ``hits``, ``evictions``, ``discarded`` and
        ``peak_bytes``."""
        return {"bytes": self.usage(), "limit": self.limit, "downloads": self.downloads, "hits": self.hits,
                "evictions": self.evictions, "discarded": self.discarded, "peak_bytes": self.peak_bytes}

    # ---------------------------------------------------------------- files

    def _folder(self, key: str) -> _Folder:
        """The shard's folder, created if missing, open as a descriptor."""
        return _Folder(self.root, key)

    def _kept_folder(self, key: str) -> int:
        """The shard's folder as a descriptor kept open while the cache
        lives, so that a page found in the cache costs one ``openat`` (a
        miss goes through a folder opened afresh, which makes the folder
        again if it was removed meanwhile)."""
        with self._kept_lock:
            fd = self._kept.get(key)
            if fd is None:
                with self._folder(key) as folder:
                    fd = self._kept[key] = os.dup(folder)
            return fd

    def _open_page(self, folder: int, key: str, name: str) -> int | None:
        """The page file, open for reading; None when there is none."""
        try:
            return _open_own(name, os.O_RDONLY, folder, self.root / key / name, "open this cached page")
        except FileNotFoundError:
            return None

    def _page_lock(self, folder: int, key: str, name: str) -> _FileLock:
        return _FileLock(folder, f"{name[:-len('.page')]}.lock", self.root / key)

    def _admit(self, folder: int, key: str, page: int, data: memoryview) -> int:
        """Write ``data`` as the page, making room for it under the limit;
        a read-only descriptor of it."""
        name = _page_name(page)
        target = self.root / key / name
        try:
            tmp, file = tempfiles.create_in(folder, name)
        except OSError as exc:
            raise StorageError(described(exc, target, "create a page file in the page cache")) from None
        fd = -1
        try:
            try:
                self._write(folder, tmp, file, data)
            except OSError as exc:
                doing = f"write this page ({len(data):,} bytes) into the page cache"
                raise StorageError(described(exc, target, doing) + "; free space there, or set cache_limit") from None
            # Opened before the rename: the page may be evicted again at once by another admission.
            fd = os.open(tmp, os.O_RDONLY | CLOEXEC | NOFOLLOW, dir_fd=folder)
            with self._locked_usage() as usage:
                self._make_room(usage, len(data), key, page)
                os.replace(tmp, name, src_dir_fd=folder, dst_dir_fd=folder)
                usage[0] += len(data)
                with self._counters:
                    self.peak_bytes = max(self.peak_bytes, usage[0])
            return fd
        except BaseException:
            if fd >= 0:
                os.close(fd)
            try:
                os.unlink(tmp, dir_fd=folder)
            except FileNotFoundError:
                pass
            raise
        finally:
            file.close()

    def _write(self, folder: int, tmp: str, file: BinaryIO, data: memoryview) -> None:
        """Write ``data`` into the new page file ``tmp``: its whole blocks
        straight to the disk (``O_DIRECT``) from a buffer each download
        thread reuses, the rest through the operating system's cache.

        Why: the page is read back by mapping its file, so a copy kept in
        the OS's cache now saves nothing, and making that copy (into memory
        the kernel allocates afresh for each new page) is the largest part
        of what a cold page costs the loader's CPU.  Written directly, the
        bytes go from memory this thread has used before to the disk, and
        the page comes into the OS's cache when it is mapped.  A folder whose
        file system refuses ``O_DIRECT`` (``EINVAL``) is written through the
        OS's cache from then on."""
        whole = len(data) - len(data) % BLOCK if self._direct else 0
        if whole:
            try:
                fd = os.open(tmp, os.O_WRONLY | DIRECT | CLOEXEC | NOFOLLOW, dir_fd=folder)
            except OSError as exc:
                if exc.errno != errno.EINVAL:
                    raise
                self._direct, whole = False, 0
            else:
                try:
                    _write_direct(fd, np.frombuffer(data[:whole], np.uint8))
                except OSError as exc:
                    if exc.errno != errno.EINVAL:
                        raise
                    self._direct, whole = False, 0  # alignment this disk refuses: all through the OS's cache
                finally:
                    os.close(fd)
        file.seek(whole)
        file.write(data[whole:])
        file.flush()

    def _count(self, name: str) -> None:
        with self._counters:
            setattr(self, name, getattr(self, name) + 1)

    def _make_room(self, usage: list[int], size: int, key: str, page: int) -> None:
        """Remove pages until ``size`` more bytes fit under the limit."""
        if self.limit is None or usage[0] + size <= self.limit:
            return
        if size > self.limit:
            raise ArgumentError(f"the page cache's limit ({self.limit:,} bytes) is smaller than one page "
                                f"({size:,} bytes): raise cache_limit")
        pages = _scan(self.root)
        usage[0] = sum(p[3] for p in pages)  # the files are the truth; a crash may have left the counter off
        order = sorted(pages, key=lambda p: (-self._next_use(p[0], p[1]), p[2]))
        for other_key, other_page, _, bytes_, _ in order:
            if usage[0] + size <= self.limit:
                break
            if (other_key, other_page) == (key, page):
                continue
            if _remove_page(self.root, other_key, _page_name(other_page)):
                usage[0] -= bytes_
                self._count("evictions")

    def _locked_usage(self) -> _Usage:
        return _Usage(self.root, self._usage_lock)


_buffers = threading.local()


def _write_direct(fd: int, data: np.ndarray) -> None:
    """Write ``data`` (whole blocks) at the start of ``fd``, opened with
    ``O_DIRECT``, through this thread's block-aligned buffer (an anonymous
    mapping of :data:`DIRECT_CHUNK` bytes, kept for the thread's life, so
    that writing a page touches no fresh memory)."""
    buffer = getattr(_buffers, "buffer", None)
    if buffer is None:
        buffer = _buffers.buffer = np.frombuffer(mmap.mmap(-1, DIRECT_CHUNK), np.uint8)
    for start in range(0, data.size, DIRECT_CHUNK):
        chunk = data[start: start + DIRECT_CHUNK]
        np.copyto(buffer[:chunk.size], chunk)  # numpy copies without the GIL
        written = 0
        while written < chunk.size:
            written += os.pwrite(fd, memoryview(buffer)[written:chunk.size], start + written)


def _close_all(descriptors: dict[str, int]) -> None:
    """Close the descriptors a cache kept open."""
    for fd in descriptors.values():
        os.close(fd)
    descriptors.clear()


def _page_name(page: int) -> str:
    return f"{page:08d}.page"


def _open_own(name: str | os.PathLike, flags: int, dir_fd: int | None, where: Path, doing: str) -> int:
    """A file of the cache (``name`` in the folder ``dir_fd``, shown as
    ``where``) opened with ``flags`` by :func:`open_regular`, never through a
    symbolic link.  What is not a regular file, and any failure but the
    absence of a file not to be created (``FileNotFoundError``), is a
    :class:`StorageError` naming ``where``."""
    try:
        return open_regular(name, flags, dir_fd=dir_fd, follow=False, error=StorageError,
                            shown=f"the page cache's {where}")
    except StorageError:
        raise
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) and not flags & os.O_CREAT:
            raise
        raise StorageError(described(exc, where, doing)) from None


def _open_folder(path: str | os.PathLike, dir_fd: int | None = None, shown: Path | None = None) -> int:
    """A descriptor of the folder ``path``, refusing a symbolic link or
    anything else that is not a folder."""
    try:
        fd = os.open(path, os.O_RDONLY | DIRECTORY | CLOEXEC | NOFOLLOW, dir_fd=dir_fd)
    except FileNotFoundError:
        raise
    except OSError as exc:
        where = shown or Path(path)
        try:
            what = kind(os.stat(path, dir_fd=dir_fd, follow_symlinks=False).st_mode)
        except OSError:
            raise StorageError(described(exc, where, "open this page-cache folder")) from None
        raise StorageError(f"the page cache's {where} is {what}, not a folder the cache made: the cache does not "
                           f"follow links or use what it did not create inside its folder (remove it)") from None
    return fd


class _Folder:
    """A shard's folder in the cache, created if missing, as an open
    descriptor for the ``with`` block (never through a symbolic link)."""

    def __init__(self, root: Path, key: str) -> None:
        self.root, self.key = root, key

    def __enter__(self) -> int:
        try:
            self.root_fd = os.open(self.root, os.O_RDONLY | DIRECTORY | CLOEXEC)
        except OSError as exc:
            raise StorageError(described(exc, self.root, "open the page cache's folder")) from None
        try:
            try:
                os.mkdir(self.key, 0o755, dir_fd=self.root_fd)
            except FileExistsError:
                pass
            except OSError as exc:
                raise StorageError(described(exc, self.root / self.key, "create a shard's folder in the page "
                                                                        "cache")) from None
            self.fd = _open_folder(self.key, self.root_fd, self.root / self.key)
            return self.fd
        finally:
            os.close(self.root_fd)

    def __exit__(self, *exc: Any) -> None:
        os.close(self.fd)


class _FileLock:
    """An exclusive ``flock`` on a lock file in an open folder, for the
    ``with`` block.  The file is created with ``O_NOFOLLOW``: a symbolic
    link in its place is refused, and nothing is created where it points."""

    def __init__(self, folder: int, name: str, where: Path) -> None:
        self.folder, self.name, self.where = folder, name, where

    def __enter__(self) -> int:
        self.fd = _open_own(self.name, os.O_RDWR | os.O_CREAT, self.folder, self.where / self.name,
                            "create a page-cache lock file")
        if fcntl is not None:
            fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self.fd

    def __exit__(self, *exc: Any) -> None:
        os.close(self.fd)  # drops the flock


class _Usage:
    """The cache's byte counter, read and written under its lock."""

    def __init__(self, root: Path, thread_lock: threading.Lock) -> None:
        self.root = root
        self.thread_lock = thread_lock

    def __enter__(self) -> list[int]:
        self.thread_lock.acquire()
        try:
            path = self.root / "usage"
            self.fd = _open_own(path, os.O_RDWR | os.O_CREAT, None, path, "open the page cache's usage counter")
            if fcntl is not None:
                fcntl.flock(self.fd, fcntl.LOCK_EX)
            raw = os.pread(self.fd, 8, 0)
            self.value = [int.from_bytes(raw, "little") if len(raw) == 8 else sum(p[3] for p in _scan(self.root))]
            self.before = self.value[0]
            return self.value
        except BaseException:
            self.thread_lock.release()
            raise

    def __exit__(self, *exc: Any) -> None:
        try:
            if self.value[0] != self.before or os.fstat(self.fd).st_size != 8:
                os.pwrite(self.fd, max(0, self.value[0]).to_bytes(8, "little"), 0)
        finally:
            os.close(self.fd)  # drops the flock
            self.thread_lock.release()


def _scan(root: Path) -> list[tuple[str, int, int, int, str]]:
    """Every page file: (shard key, page, modification time, bytes, name).
    Only regular ``NNNNNNNN.page`` files in real folders count: a symbolic
    link, to a folder or a file, is never followed."""
    found = []
    with os.scandir(root) as folders:
        keys = [entry.name for entry in folders if entry.is_dir(follow_symlinks=False)]
    for key in keys:
        try:
            folder = os.open(root / key, os.O_RDONLY | DIRECTORY | CLOEXEC | NOFOLLOW)
        except OSError:
            continue  # replaced meanwhile by something that is not a folder: not ours
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    name = entry.name
                    if not name.endswith(".page") or not name[:-5].isdigit():
                        continue
                    try:
                        info = entry.stat(follow_symlinks=False)
                    except FileNotFoundError:
                        continue
                    if stat.S_ISREG(info.st_mode):
                        found.append((key, int(name[:-5]), info.st_mtime_ns, info.st_size, name))
        finally:
            os.close(folder)
    return found


def _remove_page(root: Path, key: str, name: str) -> bool:
    """Remove the regular page file ``name`` of the shard folder ``key``
    (never through a link); whether it was removed."""
    try:
        folder = os.open(root / key, os.O_RDONLY | DIRECTORY | CLOEXEC | NOFOLLOW)
    except OSError:
        return False
    try:
        if not stat.S_ISREG(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode):
            return False
        os.unlink(name, dir_fd=folder)
        return True
    except FileNotFoundError:
        return False
    finally:
        os.close(folder)
