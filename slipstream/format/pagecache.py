"""The node-local page cache: data pages of remote shards, kept on a local
disk and shared by every process of the node.

Layout: ``root/<shard key>/<page number>.page``, one file per page, where
the shard key is a hash of the shard's URL, size and header checksum (a
shard rewritten under the same name gets a new key).  A page file appears
only whole: it is written under a temporary name, after its checksum was
checked, and renamed into place, so a process killed mid-download leaves
nothing visible (its temporary file is removed by the next process that
fetches the page).  Each page has a lock file beside it, held (``flock``)
while one process downloads the page, so that processes asking for the same
page at once download it once: the others wait, then find it there.

Size: ``root/usage`` holds the bytes of the page files, updated under the
lock ``root/.lock`` together with every page added or removed.  When a new
page would pass the limit, pages are removed first: those the asking
process does not need again before the end of its plan, then those it
needs farthest in the future (Belady's rule), the oldest first among equals.
"""

from __future__ import annotations

import hashlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError
from slipstream.format import tempfiles

try:
    import fcntl
except ImportError:  # pragma: no cover - non-POSIX: no sharing between processes
    fcntl = None  # type: ignore[assignment]

NEVER = np.iinfo(np.int64).max
"""The next use of a page not needed again."""


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
        hits: pages this process found in the cache.
        evictions: pages this process removed to make room.
        peak_bytes: the most bytes the cache held after this process
            added a page.
    """

    def __init__(self, root: Path, limit: int | None = None) -> None:
        self.root = Path(root)
        self.limit = limit
        self.root.mkdir(parents=True, exist_ok=True)
        self.downloads = self.hits = self.evictions = self.peak_bytes = 0
        self._counters = threading.Lock()
        self._next_use: Callable[[str, int], int] = lambda key, page: NEVER
        self._usage_lock = threading.Lock()  # the flock below is per open file, not per thread

    def set_priority(self, next_use: Callable[[str, int], int]) -> None:
        """How soon this process needs page ``(key, page)`` again (smaller:
        sooner; :data:`NEVER`: not at all), which eviction consults."""
        self._next_use = next_use

    def path(self, key: str, page: int) -> Path:
        """Where page ``page`` of shard ``key`` lives in the cache."""
        return self.root / key / f"{page:08d}.page"

    def open(self, key: str, page: int, download: Callable[[], Any]) -> int:
        """A read-only file descriptor of the page, downloading it first
        (``download()`` gives its checked bytes) when no process has.  The
        caller closes it; the page stays readable through it even when it is
        evicted meanwhile."""
        target = self.path(key, page)
        fd = _open_existing(target)
        if fd is not None:
            self._count("hits")
            return fd
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target.with_suffix(".lock"), "a") as lock:
            if fcntl is not None:
                fcntl.flock(lock, fcntl.LOCK_EX)  # waits while another process downloads this page
            fd = _open_existing(target)
            if fd is not None:
                self._count("hits")
                return fd
            tempfiles.remove_stale(target)  # left by a process killed while it wrote this page
            data = memoryview(download()).cast("B")
            self._count("downloads")
            tmp, file = tempfiles.create(target)
            fd = -1
            try:
                file.write(data)
                file.flush()
                # Opened before the rename: the page may be evicted again at once by another admission.
                fd = os.open(tmp, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                with self._locked_usage() as usage:
                    self._make_room(usage, len(data), key, page)
                    os.replace(tmp, target)
                    usage[0] += len(data)
                    with self._counters:
                        self.peak_bytes = max(self.peak_bytes, usage[0])
                return fd
            except BaseException:
                if fd >= 0:
                    os.close(fd)
                tmp.unlink(missing_ok=True)
                raise
            finally:
                file.close()

    def usage(self) -> int:
        """Bytes of page files in the cache now (as its counter says)."""
        with self._locked_usage() as usage:
            return usage[0]

    def stats(self) -> dict[str, int | None]:
        """The cache's counters: ``bytes`` held now, ``limit``, and this
        process's ``downloads``, ``hits``, ``evictions`` and ``peak_bytes``."""
        return {"bytes": self.usage(), "limit": self.limit, "downloads": self.downloads, "hits": self.hits,
                "evictions": self.evictions, "peak_bytes": self.peak_bytes}

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
        for other_key, other_page, _, bytes_, path in order:
            if usage[0] + size <= self.limit:
                break
            if (other_key, other_page) == (key, page):
                continue
            try:
                path.unlink()
            except FileNotFoundError:
                continue
            usage[0] -= bytes_
            self._count("evictions")

    def _locked_usage(self) -> _Usage:
        return _Usage(self.root, self._usage_lock)


class _Usage:
    """The cache's byte counter, read and written under its lock."""

    def __init__(self, root: Path, thread_lock: threading.Lock) -> None:
        self.root = root
        self.thread_lock = thread_lock

    def __enter__(self) -> list[int]:
        self.thread_lock.acquire()
        try:
            self.fd = os.open(self.root / "usage", os.O_RDWR | os.O_CREAT | getattr(os, "O_CLOEXEC", 0), 0o644)
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


def _open_existing(path: Path) -> int | None:
    try:
        return os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None


def _scan(root: Path) -> list[tuple[str, int, int, int, Path]]:
    """Every page file: (shard key, page, modification time, bytes, path)."""
    found = []
    for folder in os.scandir(root):
        if not folder.is_dir():
            continue
        for entry in os.scandir(folder.path):
            name = entry.name
            if not name.endswith(".page") or not name[:-5].isdigit():
                continue
            try:
                stat = entry.stat()
            except FileNotFoundError:
                continue
            found.append((folder.name, int(name[:-5]), stat.st_mtime_ns, stat.st_size, Path(entry.path)))
    return found
