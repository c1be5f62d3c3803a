"""WebDataset tar shards as a source: what ``img2dataset`` and the
``webdataset`` package write.

A shard is a tar file; a sample is a run of consecutive members sharing a
key (the member's path up to the first dot of its file name), each member
one value named by its extension: ``n01440764_10026.jpg`` and
``n01440764_10026.cls`` are the image and the label of sample
``n01440764_10026``.  Shards are read in order, each once, as a stream
(local files, or URLs through :mod:`slipstream.format.objectstore` in
ranged reads), so a shard is never held in memory whole.
"""

from __future__ import annotations

import io
import json
import os
import re
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from slipstream.errors import ArgumentError, DatasetNotFoundError
from slipstream.format.remote import Remote, is_url, local_path
from slipstream.format.writer import SampleStream

DEFAULT_MEMBERS: Mapping[str, str] = {"image": "jpg;jpeg;png;webp", "label": "cls", "json": "json", "text": "txt"}
"""The member extensions a field of one of these names reads when none are
given (alternatives separated by ``;``, the first present wins); a field of
another name reads the extension equal to its name."""

_INTEGERS = frozenset({"cls", "cls2", "index", "id", "label"})
_TEXTS = frozenset({"txt", "text", "caption"})


def member_value(extension: str, data: bytes) -> Any:
    """A member's value as a field takes it, by the last part of its
    extension: ``cls``/``cls2``/``index``/``id``/``label`` an integer,
    ``json`` the parsed JSON, ``txt``/``text``/``caption`` a string,
    ``npy`` a NumPy array; anything else (images) the bytes as they are.

    Raises:
        ValueError: the member's content does not parse as its extension says.
    """
    kind = extension.rsplit(".", 1)[-1].lower()
    if kind in _INTEGERS:
        text = data.decode("utf-8", "replace").strip()
        try:
            return int(text)
        except ValueError:
            raise ValueError(f"a .{extension} member must hold an integer, it holds {text[:40]!r}") from None
    if kind == "json":
        return json.loads(data.decode("utf-8"))
    if kind in _TEXTS:
        return data.decode("utf-8")
    if kind == "npy":
        return np.load(io.BytesIO(data), allow_pickle=False)
    return data


class WebDataset(SampleStream):
    """Samples of WebDataset tar shards, in shard order then member order.

    Example::

        source = WebDataset("s3://bucket/laion/{000000..000127}.tar")
        slipstream.write("s3://bucket/laion-slip", source, shard_size="1GB")

    Args:
        shards: the tar shards: a list of paths or URLs; or one text that
            is a path or URL with brace ranges (``train-{0000..0099}.tar``,
            ``{a,b}``), a folder or a prefix ending in ``/`` (every
            ``.tar`` directly in it, sorted), or a single tar file.
        fields: field name -> field (default: from the members of the first
            sample, by the names of :data:`DEFAULT_MEMBERS`: ``image``
            (:class:`~slipstream.RGBImageField`), ``label``
            (:class:`~slipstream.IntField`), ``json``
            (:class:`~slipstream.JSONField`), ``text``).
        members: field name -> member extension(s) it reads, alternatives
            separated by ``;`` (default: :data:`DEFAULT_MEMBERS`, else the
            field's name).
        remote: object-store options for URLs.

    A sample that lacks a member a field needs, or whose member does not
    parse (:func:`member_value`), is reported as unreadable, named by shard
    and key, and follows the writer's ``on_error``; so does the rest of a
    shard that ends inside a member (truncated or corrupt tar).
    """

    def __init__(self, shards: str | os.PathLike | Sequence[str | os.PathLike], fields: Mapping[str, Any] | None = None,
                 members: Mapping[str, str] | None = None, remote: Remote | None = None) -> None:
        self.remote = remote or Remote()
        self.shards = _shard_list(shards, self.remote)
        if not self.shards:
            raise DatasetNotFoundError(f"no tar shards in {shards}")
        self.fields = dict(fields) if fields is not None else self._default_fields()
        self.given_members = dict(members or {})
        members = self.given_members
        unknown = sorted(set(members) - set(self.fields))
        if unknown:
            raise ArgumentError(f"members names {unknown}, which are not fields (fields: {list(self.fields)})")
        self.members = {name: tuple(members.get(name, DEFAULT_MEMBERS.get(name, name)).split(";"))
                        for name in self.fields}

    def __iter__(self) -> Iterator[tuple[str, Sequence[Any] | Exception]]:
        for shard in self.shards:
            yield from self.read_shard(shard)

    def read_shard(self, shard: str) -> Iterator[tuple[str, Sequence[Any] | Exception]]:
        """The samples of one shard as ``(name, values)`` (see :class:`SampleStream`)."""
        for key, found in _samples(shard, self.remote):
            name = f"{shard}: {key}"
            if isinstance(found, Exception):
                yield name, found
                continue
            try:
                yield name, tuple(self._value(field, found) for field in self.fields)
            except Exception as exc:
                yield name, exc

    def _value(self, field: str, found: dict[str, bytes]) -> Any:
        for extension in self.members[field]:
            if extension in found:
                return member_value(extension, found[extension])
        raise KeyError(f"no .{' or .'.join(self.members[field])} member for field {field!r} (members: "
                       f"{', '.join('.' + e for e in found)})")

    def _default_fields(self) -> dict[str, Any]:
        from slipstream.fields import IntField, JSONField, RGBImageField

        first = next((found for _, found in _samples(self.shards[0], self.remote) if isinstance(found, dict)), None)
        if first is None:
            raise ArgumentError(f"{self.shards[0]} has no readable sample to take the fields from: pass fields=")
        kinds = {"image": RGBImageField, "label": IntField, "json": JSONField}
        fields = {name: kind() for name, kind in kinds.items()
                  if any(e in first for e in DEFAULT_MEMBERS[name].split(";"))}
        if not fields:
            raise ArgumentError(f"the first sample of {self.shards[0]} has members {sorted(first)}, none of which "
                                f"has a default field: pass fields= and members=")
        return fields

    def user_metadata(self) -> dict[str, Any]:
        """Nothing: tar shards carry no dataset-wide metadata."""
        return {}

    def __repr__(self) -> str:
        return f"WebDataset({len(self.shards)} shards from {self.shards[0]!r}, fields {list(self.fields)})"


def _samples(shard: str, remote: Remote) -> Iterator[tuple[str, dict[str, bytes] | Exception]]:
    """``(key, {extension: bytes})`` per sample of a tar shard, in order; a
    shard that breaks off ends with ``(last key, error)``."""
    key: str | None = None
    found: dict[str, bytes] = {}
    with _open(shard, remote) as stream:
        try:
            with tarfile.open(fileobj=stream, mode="r|") as tar:
                for member in tar:
                    if not member.isfile():
                        continue
                    directory, _, base = member.name.rpartition("/")
                    stem, dot, extension = base.partition(".")
                    if not dot or not stem:  # no extension, or a dot file: not a sample member
                        continue
                    member_key = f"{directory}/{stem}" if directory else stem
                    if member_key != key and key is not None:
                        yield key, found
                        found = {}
                    key = member_key
                    handle = tar.extractfile(member)
                    found[extension.lower()] = handle.read() if handle is not None else b""
        except (tarfile.TarError, EOFError, OSError) as exc:
            where = f"after sample {key!r}" if key is not None else "at its start"
            yield key or "(start)", ValueError(f"the tar shard is truncated or corrupt {where} ({exc}); the rest of "
                                               f"the shard is not read")
            return
    if key is not None:
        yield key, found


def _open(shard: str, remote: Remote) -> BinaryIO:
    if is_url(shard):
        from slipstream.format.objectstore import ObjectPrefix

        parent, _, name = shard.rpartition("/")
        return io.BufferedReader(_ObjectStream(ObjectPrefix(parent, remote), name), buffer_size=1 << 20)
    try:
        return open(local_path(shard), "rb")
    except FileNotFoundError:
        raise DatasetNotFoundError(f"{shard}: no such tar shard") from None


class _ObjectStream(io.RawIOBase):
    """An object read front to back in ranged requests of :data:`CHUNK`
    bytes, the next one in flight while the current one is consumed."""

    CHUNK = 16 << 20

    def __init__(self, prefix: Any, name: str) -> None:
        self.prefix, self.name = prefix, name
        self.size = prefix.size(name)
        self.next_start = 0
        self.buffer = memoryview(b"")
        self.fetcher = ThreadPoolExecutor(1, thread_name_prefix="slipstream-tar")
        self.ahead: Future | None = self._fetch()

    def _fetch(self) -> Future | None:
        if self.next_start >= self.size:
            return None
        start, end = self.next_start, min(self.size, self.next_start + self.CHUNK)
        self.next_start = end
        return self.fetcher.submit(self.prefix.read, self.name, start, end)

    def readable(self) -> bool:
        return True

    def readinto(self, target: Any) -> int:
        if not len(self.buffer):
            if self.ahead is None:
                return 0
            self.buffer = memoryview(self.ahead.result())
            self.ahead = self._fetch()
        n = min(len(target), len(self.buffer))
        target[:n] = self.buffer[:n]
        self.buffer = self.buffer[n:]
        return n

    def close(self) -> None:
        self.fetcher.shutdown(wait=True, cancel_futures=True)
        super().close()


_BRACES = re.compile(r"\{([^{}]*)\}")


def expand_braces(pattern: str) -> list[str]:
    """Every text ``pattern`` stands for: ``{0000..0099}`` (a numeric range,
    zero-padded as written) and ``{a,b,c}`` (alternatives), as the
    ``webdataset`` package and shells expand shard lists."""
    match = _BRACES.search(pattern)
    if match is None:
        return [pattern]
    body = match.group(1)
    bounds = re.fullmatch(r"(\d+)\.\.(\d+)", body)
    if bounds:
        lo, hi = bounds.groups()
        width = len(lo) if lo.startswith("0") else 0
        choices = [str(k).zfill(width) for k in range(int(lo), int(hi) + 1)]
    else:
        choices = body.split(",")
    head, tail = pattern[:match.start()], pattern[match.end():]
    return [expanded for choice in choices for expanded in expand_braces(head + choice + tail)]


def _shard_list(shards: str | os.PathLike | Sequence[str | os.PathLike], remote: Remote) -> list[str]:
    if not isinstance(shards, (str, os.PathLike)):
        return [str(s) for s in shards]
    text = str(shards)
    if "{" in text:
        return expand_braces(text)
    if is_url(text):
        if not text.endswith("/"):
            return [text]
        from slipstream.format.objectstore import ObjectPrefix

        return [text + name for name in ObjectPrefix(text.rstrip("/"), remote).names() if name.endswith(".tar")]
    path = Path(local_path(text))
    if path.is_dir():
        return [str(p) for p in sorted(path.glob("*.tar"))]
    if not path.exists():
        raise DatasetNotFoundError(f"{text}: no such tar shard or folder")
    return [str(path)]
