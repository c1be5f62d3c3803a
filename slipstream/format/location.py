"""The folder of a sharded dataset, local or in object storage, behind one
small interface: :class:`LocalFolder` here, and
:class:`slipstream.format.objectstore.ObjectPrefix` for URLs.  Readers and
writers of sharded datasets see only this interface."""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO, Protocol

import numpy as np

from slipstream import native
from slipstream.errors import DatasetNotFoundError, FormatError, StorageError
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


def open_location(path: str | os.PathLike, remote: Remote | None = None) -> Location:
    """The folder or prefix ``path`` names (a path, a ``file://`` URL or a
    URL of a remote store)."""
    if is_url(path):
        from slipstream.format.objectstore import ObjectPrefix

        return ObjectPrefix(str(path), remote or Remote())
    return LocalFolder(local_path(path))


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
