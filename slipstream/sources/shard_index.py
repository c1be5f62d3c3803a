"""WebDataset shard indexes: the JSON files of ``wids``, the indexed reader
of the ``webdataset`` package (written by its ``widsindex create``), which
list a dataset's tar shards with the number of samples in each::

    {"__kind__": "wids-shard-index-v1", "wids_version": 1,
     "shardlist": [{"url": "train-000000.tar", "nsamples": 10000}, ...]}

A shard's ``url`` is a path or URL; a relative one is relative to the
folder (or URL prefix) of the index itself, or to the index's ``"base"``
when it gives one.  An index may instead (or as well) list ``"datasets"``:
each either an inline ``"shardlist"`` (with its own optional ``"base"``) or
a ``"source_url"`` naming another index (relative to the first), whose
shards are relative to that index.  Weights and other keys are ignored: the source reads every shard
once, in the index's order.

With the counts, a loader streams its first epoch from shards in object
storage without reading them first (see :mod:`slipstream.loader.first_epoch`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import posixpath
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from slipstream.errors import DatasetNotFoundError, FormatError, SlipstreamError
from slipstream.files import read_head
from slipstream.format.remote import Remote, is_url, local_path

SUFFIX = ".json"
"""How the name of a shard index ends."""


@dataclasses.dataclass(frozen=True)
class ShardIndex:
    """The shards an index lists, in its order, and their sample counts.

    Attributes:
        location: the index's path or URL.
        shards: each shard's path or URL, relative ones resolved.
        counts: the samples in each shard (its ``nsamples``).
    """

    location: str
    shards: tuple[str, ...]
    counts: tuple[int, ...]


MAX_COUNT = 1 << 40
"""The most samples a shard index may give one shard (or ``length`` a
stream): far beyond any real shard, low enough that a corrupt count is not
taken for a dataset to plan."""


def names_shard_index(shards: Any) -> bool:
    """Whether ``shards`` (what :class:`~slipstream.WebDataset` is given)
    names a shard index rather than shards: one path or URL ending in
    ``.json`` that is not a folder on this machine."""
    if not isinstance(shards, (str, os.PathLike)) or not str(shards).lower().endswith(SUFFIX):
        return False
    return is_url(str(shards)) or not local_path(str(shards)).is_dir()


def shard_index_at(location: str | os.PathLike, remote: Remote) -> ShardIndex | None:
    """The index at ``location`` when it is a file or object holding a JSON
    object with ``"wids_version"``, read once; None when ``location`` names
    no shard index (see :func:`names_shard_index`), cannot be read or
    parsed, or holds other JSON (say, LitData's ``index.json``).

    Raises:
        FormatError: as :func:`read_shard_index`, for a shard index whose
            listing is wrong.
    """
    if not names_shard_index(location):
        return None
    try:
        description = json.loads(_read(str(location), remote))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(description, dict) or "wids_version" not in description:
        return None
    return _listed(str(location), _checked(str(location), description), remote)


def read_shard_index(location: str | os.PathLike, remote: Remote) -> ShardIndex:
    """The shards and counts the index at ``location`` lists.

    Raises:
        DatasetNotFoundError: there is no index at ``location`` (or at a
            ``source_url`` it names).
        FormatError: the index is not JSON, is not ``wids_version`` 1, names
            another index that names a third, lists no shard, or lists a
            shard without a ``url`` or a count of samples; the message names
            the index and the entry.
    """
    location = str(location)
    return _listed(location, _parse(location, remote), remote)


def _listed(location: str, description: dict[str, Any], remote: Remote) -> ShardIndex:
    """The shards and counts of the index ``description``, read from ``location``."""
    entries = _rebased(location, description.get("shardlist", []), description.get("base"), _folder(location))
    datasets = description.get("datasets", [])
    if not isinstance(datasets, list):
        raise FormatError(f"{location}: \"datasets\" must be a list, not {type(datasets).__name__}")
    for component in datasets:
        if not isinstance(component, dict):
            raise FormatError(f"{location}: each of \"datasets\" must be an object, not {component!r:.80}")
        if "source_url" in component:
            other = _resolved(str(component["source_url"]), _folder(location))
            component = _parse(other, remote)
            if "datasets" in component:
                raise FormatError(f"{other}: an index named by another's \"source_url\" ({location}) must list "
                                  f"its shards itself, not name further datasets")
            entries += _rebased(other, component.get("shardlist"), component.get("base"), _folder(other))
        else:
            entries += _rebased(location, component.get("shardlist"), component.get("base"), _folder(location))
    if not entries:
        raise FormatError(f"{location}: the shard index lists no shards")
    return ShardIndex(location, tuple(url for url, _ in entries), tuple(count for _, count in entries))


def _parse(location: str, remote: Remote) -> dict[str, Any]:
    try:
        data = _read(location, remote)
    except SlipstreamError:
        raise
    except FileNotFoundError:
        raise DatasetNotFoundError(f"{location}: no such shard index") from None
    except OSError as exc:
        raise FormatError(f"{location}: the shard index cannot be read: {exc.strerror or exc}") from None
    try:
        description = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise FormatError(f"{location}: a shard index must be JSON: {type(exc).__name__}: {exc}") from None
    if not isinstance(description, dict):
        raise FormatError(f"{location}: a shard index must be a JSON object, not {type(description).__name__}")
    return _checked(location, description)


def _checked(location: str, description: dict[str, Any]) -> dict[str, Any]:
    """``description``, an index's JSON object, once it says ``wids_version`` 1."""
    version = description.get("wids_version")
    if type(version) is not int or version != 1:
        found = "has none" if version is None else f"has {version!r}"
        raise FormatError(f"{location}: a shard index (wids) gives \"wids_version\": 1; this one {found}")
    return description


def _read(location: str, remote: Remote) -> bytes:
    if is_url(location):
        from slipstream.format.objectstore import ObjectPrefix

        prefix, name = location.rsplit("/", 1)
        return ObjectPrefix(prefix, remote).read_all(name)
    return read_head(local_path(location))


def _rebased(location: str, shardlist: Any, base: Any, folder: str) -> list[tuple[str, int]]:
    """``(url, nsamples)`` of each entry of ``shardlist``, relative URLs
    resolved against ``base`` (itself relative to ``folder``) or ``folder``."""
    if not isinstance(shardlist, list):
        raise FormatError(f"{location}: \"shardlist\" must be a list of shards, not {type(shardlist).__name__}")
    if base is not None:
        if not isinstance(base, str):
            raise FormatError(f"{location}: \"base\" must be a path or URL, not {base!r:.80}")
        folder = _resolved(base, folder)
    entries = []
    for k, shard in enumerate(shardlist):
        if not isinstance(shard, dict) or not isinstance(shard.get("url"), str):
            raise FormatError(f"{location}: shard {k} of the shard list must be an object with a \"url\", not "
                              f"{shard!r:.80}")
        count = shard.get("nsamples")
        if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= MAX_COUNT:
            raise FormatError(f"{location}: shard {k} ({shard['url']}) must give its number of samples as "
                              f"\"nsamples\" (0 to {MAX_COUNT}), not {count!r:.80}")
        entries.append((_resolved(shard["url"], folder), count))
    return entries


def _folder(location: str) -> str:
    """The folder or URL prefix holding ``location``."""
    return location.rsplit("/", 1)[0] if is_url(location) else str(local_path(location).parent)


def _resolved(url: str, folder: str) -> str:
    """``url`` relative to ``folder``: a URL or a ``file://`` URL as it is;
    a path from the root (``/data/a.tar``) or the network location
    (``//host/a.tar``) within the folder's store; anything else joined to
    the folder."""
    if is_url(url):
        return url
    if url.lower().startswith("file://"):
        return str(local_path(url))
    if is_url(folder):
        scheme, bucket, path, _, _ = urlsplit(folder)
        if url.startswith("//"):
            return f"{scheme}:{url}"
        path = url if url.startswith("/") else posixpath.normpath(posixpath.join(path or "/", url))
        return urlunsplit((scheme, bucket, path, "", ""))
    return os.path.normpath(Path(folder) / local_path(url))


__all__ = ["MAX_COUNT", "SUFFIX", "ShardIndex", "names_shard_index", "read_shard_index", "shard_index_at"]
