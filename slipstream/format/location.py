"""The folder of a sharded dataset, local or in object storage, behind one
small interface: :class:`LocalFolder` here, and
:class:`slipstream.format.objectstore.ObjectPrefix` for URLs.  Readers and
writers of sharded datasets see only this interface.

Which :class:`Location` a URL opens as is told by its scheme: ``file`` and
the schemes of the object-store client (:data:`OBJECT_STORE_SCHEMES`) are
registered here, and :func:`register_location_scheme` adds one (a
file system of one's own, a test double) without editing this module."""

from __future__ import annotations

import errno
import os
import re
import shutil
import threading
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np

from slipstream import native
from slipstream.errors import ArgumentError, DatasetNotFoundError, FormatError, StorageError
from slipstream.format import tempfiles
from slipstream.files import described, open_regular
from slipstream.format.remote import Remote, is_url, local_path


class Location(Protocol):
    """A folder of named files: a local folder or an object-store prefix."""

    url: str

    def url_of(self, name: str) -> str:
        """Where file ``name`` is, for messages."""
        ...

    def local_folder(self) -> Path | None:
        """The local folder holding the files, where they are local files
        that can be written in place and mapped; None where they are not
        (an object store)."""
        ...

    def read(self, name: str, start: int, end: int) -> memoryview:
        """Bytes ``[start, end)`` of file ``name``."""
        ...

    def read_all(self, name: str) -> bytes:
        """The whole of file ``name``."""
        ...

    def read_head(self, name: str, length: int) -> tuple[memoryview, int]:
        """The first ``length`` bytes of file ``name`` (all of it when it is
        shorter) and the file's size."""
        ...

    def size(self, name: str) -> int:
        """The size of file ``name``."""
        ...

    def exists(self, name: str) -> bool:
        """Whether file ``name`` exists."""
        ...

    def put_file(self, name: str, path: Path) -> None:
        """Store the local file ``path`` as ``name``, atomically."""
        ...

    def put_bytes(self, name: str, data: bytes) -> None:
        """Store ``data`` as ``name``, atomically."""
        ...

    def delete(self, name: str) -> None:
        """Remove file ``name`` if it exists."""
        ...

    def names(self) -> list[str]:
        """The files in the folder."""
        ...


class LocalFolder:
    """A local folder as a :class:`Location`."""

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        self.url = str(self.path)

    def url_of(self, name: str) -> str:
        return str(self.path / name)

    def local_folder(self) -> Path:
        return self.path

    def read(self, name: str, start: int, end: int) -> memoryview:
        out = np.empty(end - start, np.uint8)
        fd = self._open(name)
        try:
            native.pread(fd, out, start)
        finally:
            os.close(fd)
        return memoryview(out)

    def read_all(self, name: str) -> bytes:
        fd = self._open(name)
        try:
            with os.fdopen(fd, "rb", closefd=False) as file:
                return file.read()
        finally:
            os.close(fd)

    def read_head(self, name: str, length: int) -> tuple[memoryview, int]:
        fd = self._open(name)
        try:
            size = os.fstat(fd).st_size
            out = np.empty(min(length, size), np.uint8)
            native.pread(fd, out, 0)
        finally:
            os.close(fd)
        return memoryview(out), size

    def _open(self, name: str) -> int:
        """The file ``name``, open for reading; a FIFO, a socket or a folder
        is refused (a FIFO would wait for a writer forever)."""
        try:
            return open_regular(self.path / name, error=FormatError)
        except FileNotFoundError:
            raise DatasetNotFoundError(f"{self.url_of(name)}: no such file") from None
        except OSError as exc:
            raise StorageError(described(exc, self.url_of(name), "open it")) from None

    def size(self, name: str) -> int:
        try:
            return (self.path / name).stat().st_size
        except FileNotFoundError:
            raise DatasetNotFoundError(f"{self.url_of(name)}: no such file") from None

    def exists(self, name: str) -> bool:
        return (self.path / name).is_file()

    def put_file(self, name: str, path: Path) -> None:
        if Path(path).parent.resolve() == self.path.resolve():
            os.replace(path, self.path / name)
            sync_folder(self.path)
            return
        with open(path, "rb") as src:
            self.write_with(name, lambda file: shutil.copyfileobj(src, file, 16 << 20))

    def put_bytes(self, name: str, data: bytes) -> None:
        self.write_with(name, lambda file: file.write(data))

    def write_with(self, name: str, fill: Callable[[BinaryIO], object]) -> None:
        """Write file ``name`` by ``fill(file)`` under a temporary name (a
        file that ``fill`` raises out of is removed), then rename it into
        place."""
        target = self.path / name
        tempfiles.remove_stale(target)
        tmp, file = tempfiles.create(target)
        try:
            fill(file)
            file.flush()
            os.fsync(file.fileno())
            os.replace(tmp, target)
        except BaseException:
            tmp.unlink(missing_ok=True)
            raise
        finally:
            file.close()
        sync_folder(self.path)

    def delete(self, name: str) -> None:
        (self.path / name).unlink(missing_ok=True)

    def names(self) -> list[str]:
        try:
            return sorted(p.name for p in self.path.iterdir() if p.is_file())
        except FileNotFoundError:
            raise DatasetNotFoundError(f"{self.path}: no such folder") from None


LocationFactory = Callable[[str, Remote], Location]
"""Opens the folder or prefix a URL names: ``factory(url, remote)``, with
the object-store options given to :func:`open_location` (their defaults
when none were)."""

OBJECT_STORE_SCHEMES = ("s3", "s3a", "gs", "az", "adl", "azure", "abfs", "abfss", "http", "https", "memory")
"""The URL schemes the object-store client (obstore) opens: S3, Google
Cloud Storage, Azure, plain HTTP(S) servers, and its in-memory store."""

_SCHEME_NAME = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*")
_schemes_lock = threading.Lock()
_schemes: dict[str, LocationFactory] = {}
"""Lower-case scheme -> factory (replaced whole under ``_schemes_lock``, read without it)."""


def register_location_scheme(scheme: str, factory: LocationFactory) -> None:
    """Open URLs of ``scheme`` (``scheme://...``) by ``factory(url, remote)``
    wherever a sharded dataset is read or written (:func:`open_location`);
    a scheme registered again is replaced.  Schemes are case-insensitive.

    Example::

        register_location_scheme("scratch", lambda url, remote: LocalFolder("/scratch/" + url[len("scratch://"):]))

    Raises:
        ArgumentError: ``scheme`` is not a URL scheme (a letter, then
            letters, digits, ``+``, ``-`` or ``.``), or ``factory`` is not callable.
    """
    global _schemes
    if not isinstance(scheme, str) or not _SCHEME_NAME.fullmatch(scheme):
        raise ArgumentError(f"{scheme!r} is not a URL scheme (a letter, then letters, digits, '+', '-' or '.'; "
                            f"without '://')")
    if not callable(factory):
        raise ArgumentError(f"the factory of scheme {scheme!r} must be callable as factory(url, remote), not "
                            f"{factory!r:.80}")
    with _schemes_lock:
        _schemes = {**_schemes, scheme.lower(): factory}


def unregister_location_scheme(scheme: str) -> None:
    """Forget the factory of ``scheme``: its URLs are refused from now on.

    Raises:
        ArgumentError: no factory is registered for ``scheme``.
    """
    global _schemes
    with _schemes_lock:
        if scheme.lower() not in _schemes:
            raise ArgumentError(f"no location scheme {scheme!r} is registered (registered: "
                                f"{', '.join(location_schemes())})")
        _schemes = {name: factory for name, factory in _schemes.items() if name != scheme.lower()}


def location_schemes() -> list[str]:
    """The registered URL schemes, sorted."""
    return sorted(_schemes)


def open_location(path: str | os.PathLike, remote: Remote | None = None) -> Location:
    """The folder or prefix ``path`` names: a local folder for a path, else
    what the factory registered for the URL's scheme opens
    (:func:`register_location_scheme`).

    Raises:
        ArgumentError: no factory is registered for the URL's scheme (the
            message names the URL and the registered schemes).
    """
    if not (isinstance(path, str) and (is_url(path) or path.lower().startswith("file://"))):
        return LocalFolder(local_path(path))
    scheme = path.split("://", 1)[0].lower()
    factory = _schemes.get(scheme)
    if factory is None:
        raise ArgumentError(f"{path}: no storage is registered for URLs of scheme {scheme}:// (registered: "
                            f"{', '.join(location_schemes())}; slipstream.register_location_scheme adds one)")
    return factory(path, remote if remote is not None else Remote())


def _local_folder(url: str, remote: Remote) -> LocalFolder:
    """The local folder a ``file://`` URL names."""
    return LocalFolder(local_path(url))


def _object_prefix(url: str, remote: Remote) -> Location:
    """The object-store prefix a URL names."""
    from slipstream.format.objectstore import ObjectPrefix  # imports obstore, needed for URLs only

    return ObjectPrefix(url, remote)


register_location_scheme("file", _local_folder)
for _scheme in OBJECT_STORE_SCHEMES:
    register_location_scheme(_scheme, _object_prefix)
del _scheme


def sync_folder(folder: Path) -> None:
    """Make the renames in ``folder`` durable."""
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError as exc:
        if exc.errno not in (errno.EINVAL, errno.EBADF):
            raise
    finally:
        os.close(fd)
