"""What a path or URL holds when it is a source to convert rather than a
dataset to open: an image folder, WebDataset tar shards (one ``.tar`` file,
a folder or prefix of them, or a shard index: the ``.json`` file of
:mod:`~slipstream.sources.shard_index`) or a LitData dataset (a folder or prefix with
LitData's ``index.json``).  :class:`slipstream.Loader`, :func:`slipstream.cached`
and :func:`slipstream.write` take these paths as they take the source objects.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from slipstream.errors import ArgumentError
from slipstream.files import read_head
from slipstream.format.manifest import NAME as MANIFEST
from slipstream.format.remote import Remote, is_url, local_path
from slipstream.sources.folders import IMAGE_SUFFIXES, ImageFolder
from slipstream.sources.litdata import LitData
from slipstream.sources.shard_index import ShardIndex, shard_index_at
from slipstream.sources.webdataset import WebDataset

LITDATA_INDEX = "index.json"
"""The file ``litdata.optimize`` writes beside its chunks."""

_TAR_MAGIC_AT = 257
"""Where a POSIX tar header holds ``ustar``."""


def holds_dataset(path: str | os.PathLike, remote: Remote | None = None) -> bool:
    """Whether ``path`` is a dataset to open (a slipstream or FFCV file, a
    sharded dataset's folder, manifest or URL) rather than a source to
    convert (see :func:`source_at`).

    Raises:
        FormatError: ``path`` is a shard index whose listing is wrong.
    """
    return _source_kind(path, remote or Remote()) is None


def source_at(path: str | os.PathLike, remote: Remote | None = None) -> Any:
    """The source ``path`` holds: a :class:`~slipstream.sources.WebDataset`
    for a tar file, a shard index, or a folder or URL prefix of tar files; a
    :class:`~slipstream.sources.LitData` dataset for a folder or prefix
    holding LitData's ``index.json``; otherwise an
    :class:`~slipstream.sources.ImageFolder` (which says what it found when
    the folder holds no images, or that ``path`` is not a folder).

    Raises:
        DatasetNotFoundError: nothing is at ``path``, or it is neither a
            source above nor a folder.
        ArgumentError: a folder holds no images and nothing else a source
            reads, or both tar shards and folders of images.
    """
    remote = remote or Remote()
    return _source(path, _source_kind(path, remote) or "folder", remote)


def find_source(path: str | os.PathLike, remote: Remote | None = None) -> Any | None:
    """The source ``path`` holds, as :func:`source_at` says, or None when
    ``path`` holds a dataset (:func:`holds_dataset`): one look at ``path``,
    so a shard index is read once."""
    remote = remote or Remote()
    kind = _source_kind(path, remote)
    return None if kind is None else _source(path, kind, remote)


def _source(path: str | os.PathLike, kind: ShardIndex | str, remote: Remote) -> Any:
    """The source of ``kind`` (as :func:`_source_kind` gives) at ``path``."""
    text = str(path)
    if isinstance(kind, ShardIndex):
        return WebDataset(kind, remote=remote)
    if kind == "webdataset":
        return WebDataset(text if text.endswith(".tar") or not is_url(text) else text.rstrip("/") + "/",
                          remote=remote)
    if kind == "litdata":
        return LitData(text, remote=remote)
    return ImageFolder(local_path(text))


def _source_kind(path: str | os.PathLike, remote: Remote) -> ShardIndex | str | None:
    """The shard index ``path`` holds, else ``"webdataset"``, ``"litdata"``,
    ``"folder"`` (images), or None for a dataset."""
    text = str(path)
    index = shard_index_at(text, remote)
    if index is not None:
        return index
    if is_url(text):
        if text.endswith(".tar"):
            return "webdataset"
        from slipstream.format.objectstore import ObjectPrefix

        names = ObjectPrefix(text, remote).names()
        if MANIFEST in names:
            return None
        if LITDATA_INDEX in names:
            return "litdata"
        return "webdataset" if any(name.endswith(".tar") for name in names) else None
    local = Path(local_path(text))
    if local.name == MANIFEST:  # a dataset's manifest, whatever is there: its reader says what is wrong
        return None
    if local.is_file():
        return "webdataset" if _is_tar(local) else None
    if not local.exists():
        # A brace pattern of shards (``shards-{0000..0099}.tar``), else a folder whose reader says nothing is there.
        return "webdataset" if "{" in local.name and text.endswith(".tar") else "folder"
    if not local.is_dir() or os.path.lexists(local / MANIFEST):  # a dataset, even a broken one: its reader says why
        return None
    if is_litdata_index(local / LITDATA_INDEX):
        return "litdata"
    return "webdataset" if holds_tar_shards(local, text) else "folder"


def holds_tar_shards(folder: Path, name: str | None = None) -> bool:
    """Whether ``folder`` holds tar shards (``.tar`` files), and no folders
    of images beside them.

    Raises:
        ArgumentError: it holds both, naming the source classes that read
            each (``name``: the folder as the user gave it).
    """
    tars = sorted(child.name for child in folder.iterdir() if child.suffix == ".tar" and child.is_file())
    if not tars:
        return False
    classes = sorted(child.name for child in folder.iterdir() if child.is_dir() and _holds_an_image(child))
    if classes:
        given = str(folder) if name is None else name
        raise ArgumentError(f"{folder} holds both tar shards ({len(tars)}, such as {tars[0]}) and folders of images "
                            f"({len(classes)}, such as {classes[0]}/): say which to read, "
                            f"slipstream.sources.ImageFolder({given!r}) or slipstream.WebDataset({given!r})")
    return True


def is_litdata_index(path: Path) -> bool:
    """Whether ``path`` is the ``index.json`` of a LitData dataset (its
    chunks and their config), not some other JSON file of that name."""
    try:
        index = json.loads(read_head(path))
    except (OSError, ValueError):
        return False
    return isinstance(index, dict) and "chunks" in index and "config" in index


def _holds_an_image(folder: Path) -> bool:
    """Whether any file below ``folder`` has an image suffix."""
    return any(p.suffix.lower() in IMAGE_SUFFIXES and p.is_file() for p in folder.rglob("*"))


def _is_tar(path: Path) -> bool:
    """Whether the file starts with a POSIX (or GNU) tar header."""
    try:
        head = read_head(path, _TAR_MAGIC_AT + 5)
    except OSError:
        return False
    return head[_TAR_MAGIC_AT:_TAR_MAGIC_AT + 5] == b"ustar"
