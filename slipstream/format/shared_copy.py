"""A dataset file kept at a URL (an object-store prefix) as well as in the
node-local dataset cache: the copy that machines share.

:func:`slipstream.cached` and :class:`slipstream.Loader` given a URL as
``cache_dir`` keep the file they build in the node-local cache, where it is
read, and store it at the URL once it is complete; a machine that does not
have it yet downloads it from there instead of building it again.  The
object appears whole or not at all (a multipart upload completes last), and
a download goes to a temporary file renamed into place, so neither side
ever sees half a file.
"""

from __future__ import annotations

import copy
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, BinaryIO

from slipstream.errors import StorageError
from slipstream.format.location import LocalFolder
from slipstream.format.remote import Remote

if TYPE_CHECKING:
    from slipstream.format.objectstore import ObjectPrefix

DOWNLOAD_CHUNK = 64 << 20
"""Bytes per ranged request of a download (several in flight)."""

DOWNLOAD_TRIES = 3
"""Downloads tried while the copy keeps changing under them."""


class SharedCopy:
    """The copy of a dataset file named ``name`` under the prefix ``url``.

    Args:
        url: the object-store prefix (``s3://bucket/cache``).
        name: the file's name there (the cache entry's file name).
        remote: object-store options.

    Attributes:
        location: the prefix (where the ranks of a first epoch also leave
            their parts).
        url: where the copy is (for messages).
    """

    def __init__(self, url: str, name: str, remote: Remote | None = None) -> None:
        from slipstream.format.objectstore import ObjectPrefix  # obstore: an extra, needed for URLs only

        self.location: ObjectPrefix = ObjectPrefix(url.rstrip("/"), remote or Remote())
        self.name = name
        self.url = self.location.url_of(name)

    def beside(self, name: str) -> SharedCopy:
        """The copy of a file named ``name`` under the same prefix."""
        other = copy.copy(self)  # the same prefix and its client
        other.name, other.url = name, self.location.url_of(name)
        return other

    def exists(self) -> bool:
        """Whether the copy is there."""
        return self.location.exists(self.name)

    def upload(self, path: Path) -> None:
        """Store the local file ``path`` as the copy."""
        self.location.put_file(self.name, path)

    def download(self, path: Path) -> None:
        """Fetch the copy into the local file ``path``: ranged requests of
        :data:`DOWNLOAD_CHUNK` bytes, a few at once, into a temporary file
        that is renamed onto ``path`` once whole.  A copy uploaded again
        meanwhile (its size or ETag changed) is fetched again, so that the
        file is one upload's, whole.

        Raises:
            DatasetNotFoundError: the copy is not there.
            StorageError: the store cannot be read (naming the URL), or the
                copy changed during each of :data:`DOWNLOAD_TRIES` downloads.
        """
        for _ in range(DOWNLOAD_TRIES):
            version = self.location.head(self.name)
            try:
                LocalFolder(path.parent).write_with(path.name, lambda file: self._fetch(file, version))
                return
            except _Changed:
                continue
        raise StorageError(f"{self.url} changed during each of {DOWNLOAD_TRIES} downloads: is it written again and "
                           f"again?")

    def _fetch(self, file: BinaryIO, version: tuple[int, str | None]) -> None:
        """Write the copy, of ``version`` (size, ETag), into ``file``.

        Raises:
            _Changed: the copy is not of ``version`` any more.
        """
        size, descriptor = version[0], file.fileno()

        def fetch(start: int) -> None:
            data = self.location.read(self.name, start, min(size, start + DOWNLOAD_CHUNK))
            written = 0
            while written < len(data):
                written += os.pwrite(descriptor, data[written:], start + written)

        with ThreadPoolExecutor(4, thread_name_prefix="slipstream-download") as pool:
            list(pool.map(fetch, range(0, size, DOWNLOAD_CHUNK)))
        # An upload replaces the object whole, at once: the same version after the reads means every read was of it.
        if self.location.head(self.name) != version:
            raise _Changed()

    def __repr__(self) -> str:
        return f"SharedCopy({self.url!r})"


class _Changed(Exception):
    """The copy was uploaded again during a download."""


__all__ = ["DOWNLOAD_CHUNK", "DOWNLOAD_TRIES", "SharedCopy"]
