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

import copy
import dataclasses
import io
import itertools
import json
import math
import os
import re
import threading
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from slipstream.errors import ArgumentError, DatasetNotFoundError, FormatError, SourceWarning
from slipstream.files import open_regular
from slipstream.format.remote import Remote, is_url, local_path
from slipstream.format.writer import SampleStream
from slipstream.sources import tarstream
from slipstream.sources.shard_index import MAX_COUNT, ShardIndex, names_shard_index, read_shard_index

DEFAULT_MEMBERS: Mapping[str, str] = {"image": "jpg;jpeg;png;webp", "video": "mp4;webm;mkv;mov;avi", "label": "cls",
                                      "json": "json", "text": "txt"}
"""The member extensions a field of one of these names reads when none are
given (alternatives separated by ``;``, the first present wins); a field of
another name reads the extension equal to its name."""

_INTEGERS = frozenset({"cls", "cls2", "index", "id", "label"})
_TEXTS = frozenset({"txt", "text", "caption"})
_DECIMAL = re.compile(rb"-?[0-9]{1,40}(\r?\n)?")


def member_value(extension: str, data: bytes) -> Any:
    """A member's value as a field takes it, by the last part of its
    extension: ``cls``/``cls2``/``index``/``id``/``label`` an integer,
    ``json`` the parsed JSON, ``txt``/``text``/``caption`` a string,
    ``npy`` a NumPy array; anything else (images) the bytes as they are.

    An integer is written in ASCII decimal digits, with an optional ``-``
    and a final newline; anything else (other digits, ``_`` separators,
    spaces) is refused rather than read as some number.

    Raises:
        ValueError: the member's content does not parse as its extension says.
    """
    kind = extension.rsplit(".", 1)[-1].lower()
    if kind in _INTEGERS:
        if _DECIMAL.fullmatch(data) is None:  # int() would take "٣", "1_000" and " 3 " too
            text = data[:40].decode("utf-8", "replace")
            raise ValueError(f"a .{extension} member must hold an integer, it holds {text!r}: only ASCII decimal "
                             f"digits are read as one (an optional '-', at most 40 digits, a final newline)")
        return int(data)
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
            ``.tar`` directly in it, sorted; not on an ``http(s)://``
            server, which lists no folder), a single tar file, or a shard
            index (``.json``, as ``wids`` reads: the shards it lists, in its
            order, with their sample counts; see
            :mod:`slipstream.sources.shard_index`), or a
            :class:`~slipstream.sources.shard_index.ShardIndex` already
            read.  Shards on an HTTP server are read by ranged requests,
            which the server must answer (most do; Python's
            ``http.server`` does not).
        fields: field name -> field (default: from the members of the first
            sample, by the names of :data:`DEFAULT_MEMBERS`: ``image``
            (:class:`~slipstream.RGBImageField`), ``video``
            (:class:`~slipstream.VideoField`, ``.mp4`` members and the
            like), ``label``
            (:class:`~slipstream.IntField`), ``json`` and ``text``
            (:class:`~slipstream.JSONField`, the caption a string)).
        members: field name -> member extension(s) it reads, alternatives
            separated by ``;`` (default: :data:`DEFAULT_MEMBERS`, else the
            field's name).  Members that no field reads are left out; once
            a pass over the shards ends, one
            :class:`~slipstream.errors.SourceWarning` counts and names them.
        remote: object-store options for URLs.
        length: the number of samples the shards hold (unreadable ones
            included), when known from elsewhere (the dataset's card, its
            paper), for shards in object storage that nothing else counts
            (:meth:`length_hint`): a loader's first epoch over them then
            streams on several ranks too, with ``indices`` and with
            repeated augmentation, and has a ``len()`` from its start.  A
            length that turns out wrong stops that epoch with a
            :class:`~slipstream.FormatError` saying so.

    A sample that lacks a member a field needs, has a member twice, has a
    key that came before other samples (its members are not consecutive),
    has a member that is a hard or symbolic link, a sparse member or one
    over :data:`~slipstream.sources.tarstream.MAX_MEMBER_SIZE`, or whose
    member does not parse (:func:`member_value`), is reported as
    unreadable, named by shard and key, and follows the writer's
    ``on_error``.  So does a shard that breaks off, wherever it is cut (at a
    block boundary, inside a header or inside a member: a shard must end
    with tar's end-of-archive marker), or whose header is corrupt: one
    failure names the shard, the sample in progress, which may miss
    members, and says that every sample after it is lost.
    """

    def __init__(self, shards: str | os.PathLike | Sequence[str | os.PathLike] | ShardIndex,
                 fields: Mapping[str, Any] | None = None, members: Mapping[str, str] | None = None,
                 remote: Remote | None = None, length: int | None = None) -> None:
        if length is not None and (not isinstance(length, (int, np.integer)) or isinstance(length, bool)
                                   or not 0 <= length <= MAX_COUNT):
            raise ArgumentError(f"length must be a number of samples (an integer from 0 to {MAX_COUNT}), not "
                                f"{length!r:.80}")
        self.remote = remote or Remote()
        self.index = shards if isinstance(shards, ShardIndex) else \
            read_shard_index(shards, self.remote) if names_shard_index(shards) else None
        """The shard index the shards come from, if any (with their counts)."""
        self.shards = list(self.index.shards) if self.index is not None else _shard_list(shards, self.remote)
        if not self.shards:
            raise DatasetNotFoundError(f"no tar shards in {shards}")
        self.given_members = dict(members or {})
        self._read_into(dict(fields) if fields is not None else self._default_fields())
        self._length: int | None = None if length is None else int(length)

    def _read_into(self, fields: dict[str, Any]) -> None:
        """Read the members into ``fields`` (the given members, else the defaults)."""
        unknown = sorted(set(self.given_members) - set(fields))
        if unknown:
            raise ArgumentError(f"members names {unknown}, which are not fields (fields: {list(fields)})")
        self.fields = fields
        self.members = {name: tuple(self.given_members.get(name, DEFAULT_MEMBERS.get(name, name)).split(";"))
                        for name in fields}

    def with_fields(self, fields: Mapping[str, Any]) -> WebDataset:
        """The same shards, members and count, read into ``fields``."""
        other = copy.copy(self)
        other.shards, other.given_members = list(self.shards), dict(self.given_members)
        other._read_into(dict(fields))
        return other

    def __iter__(self) -> Iterator[tuple[str, Sequence[Any] | Exception]]:
        """Every sample, in shard order; once all are read, a
        :class:`~slipstream.errors.SourceWarning` names the members that no
        field reads, if any (left out of every sample)."""
        unread = _Unread()
        for shard in self.shards:
            yield from self.read_shard(shard, unread)
        unread.warn(self.members)

    def read_shard(self, shard: str, unread: _Unread | None = None) -> Iterator[tuple[str, Sequence[Any] | Exception]]:
        """The samples of one shard as ``(name, values)`` (see
        :class:`SampleStream`); ``unread`` notes the members no field reads."""
        for key, found in _samples(shard, self.remote):
            name = f"{shard}: {key}"
            if isinstance(found, Exception):
                yield name, found
                continue
            if unread is not None:
                read = {next((e for e in self.members[field] if e in found), None) for field in self.fields}
                unread.note(name, found.keys() - read)
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
        from slipstream.fields import IntField, JSONField, RGBImageField, VideoField

        first: dict[str, bytes] | Exception | None = None
        for _, first in _samples(self.shards[0], self.remote):
            if isinstance(first, dict):
                break
        if not isinstance(first, dict):
            why = f" (the last: {first})" if first is not None else ""
            raise ArgumentError(f"{self.shards[0]} has no readable sample to take the fields from{why}: pass fields=")
        kinds = {"image": RGBImageField, "video": VideoField, "label": IntField, "json": JSONField, "text": JSONField}
        fields = {name: kind() for name, kind in kinds.items()
                  if any(e in first for e in DEFAULT_MEMBERS[name].split(";"))}
        if not fields:
            raise ArgumentError(f"the first sample of {self.shards[0]} has members {sorted(first)}, none of which "
                                f"has a default field: pass fields= and members=")
        return fields

    def length_hint(self) -> int | None:
        """The number of samples: the ``length`` given, else counted once.
        Shards from a shard index are counted by it (its ``nsamples``).
        Otherwise a shard that is a local file is counted from its members'
        headers alone (a seek past each member's data), so exactly as many
        as iterating yields, unreadable ones included; a shard that is a
        URL, whose headers would each be a
        request of its own, is counted by the ``<shard>_stats.json`` that
        ``img2dataset`` writes beside it (its ``"successes"``: the samples
        it wrote into the shard); None when one has none."""
        if self._length is None and self.index is not None:
            self._length = sum(self.index.counts)
        if self._length is None:
            urls = [shard for shard in self.shards if is_url(shard)]
            stated = _stated_counts(urls, self.remote) if urls else {}
            if len(stated) == len(urls):
                self._length = sum(stated[shard] if is_url(shard) else
                                   sum(1 for _ in _samples(shard, self.remote, read_data=False))
                                   for shard in self.shards)
        return self._length

    def default_fields(self) -> dict[str, Any]:
        """The fields the samples are read into: those given, else those of
        the first sample's members (see the class docstring)."""
        return dict(self.fields)

    def samples_for(self, fields: Mapping[str, Any]) -> WebDataset:
        """Itself when ``fields`` are those it reads into, else the same
        shards read into ``fields`` (:meth:`with_fields`)."""
        return self if dict(fields) == self.fields else self.with_fields(fields)

    def user_metadata(self) -> dict[str, Any]:
        """Nothing: tar shards carry no dataset-wide metadata."""
        return {}

    def identity(self) -> dict[str, Any]:
        """What :func:`slipstream.cached` keys the dataset file by: every
        shard's name, size and version (a local file's modification time, an
        object's ETag), the fields' members, in order.  Rewriting a shard
        changes it.

        Raises:
            DatasetNotFoundError: a shard is missing.
        """
        versions = _versions([shard for shard in self.shards if is_url(shard)], _Stores(self.remote))
        shards = []
        for shard in self.shards:
            if is_url(shard):
                if shard not in versions:
                    raise DatasetNotFoundError(f"{shard}: no such tar shard")
                size, version = versions[shard]
            else:
                try:
                    stat = os.stat(local_path(shard))
                except FileNotFoundError:
                    raise DatasetNotFoundError(f"{shard}: no such tar shard") from None
                size, version = stat.st_size, stat.st_mtime_ns
            shards.append([shard if is_url(shard) else str(Path(local_path(shard)).resolve()), size, version])
        return {"webdataset": shards, "members": {name: list(m) for name, m in self.members.items()}}

    def cache_name(self) -> str:
        """The name of the shards' folder (or of the only shard), which starts the cached file's name."""
        first = self.shards[0].rstrip("/")
        parent = first.rsplit("/", 2)[-2] if "/" in first else ""
        return parent if len(self.shards) > 1 and parent else first.rsplit("/", 1)[-1].removesuffix(".tar")

    def __repr__(self) -> str:
        origin = f"listed by {self.index.location!r}" if self.index is not None else f"from {self.shards[0]!r}"
        return f"WebDataset({len(self.shards)} shards {origin}, fields {list(self.fields)})"


class _Unread:
    """The members of a pass over the shards that no field reads: their
    count and first sample, by extension."""

    def __init__(self) -> None:
        self.samples = 0
        self.extensions: dict[str, list[Any]] = {}  # extension -> [count, first sample's name]

    def note(self, sample: str, extensions: Iterable[str]) -> None:
        """The members of ``extensions`` of ``sample`` are read by no field."""
        self.samples += 1
        for extension in extensions:
            self.extensions.setdefault(extension, [0, sample])[0] += 1

    def warn(self, members: Mapping[str, Sequence[str]]) -> None:
        """One :class:`~slipstream.errors.SourceWarning` naming the members
        left out, if any, the fields' members and how to read them."""
        if not self.extensions:
            return
        left = sum(count for count, _ in self.extensions.values())
        shown = sorted(self.extensions.items(), key=lambda item: -item[1][0])[:3]
        kinds = "; ".join(f".{extension} ({count:,}, the first in {first})" for extension, (count, first) in shown)
        more = f"; and {len(self.extensions) - 3} more extensions" if len(self.extensions) > 3 else ""
        read = ", ".join(f"{name} (.{' or .'.join(extensions)})" for name, extensions in members.items())
        example = shown[0][0]
        warnings.warn(f"{left:,} tar members of {self.samples:,} samples match no field and were left out: {kinds}"
                      f"{more}. The fields read {read}; to read the others, pass fields= with a field for each "
                      f"and members= naming its extension (e.g. members={{'<field>': {example!r}}})",
                      SourceWarning, stacklevel=3)


STATS_SUFFIX = "_stats.json"
"""What ``img2dataset`` appends to a shard's name (less ``.tar``) for the
JSON object describing the shard, whose ``"successes"`` counts the samples
in it."""


class _Stores:
    """One :class:`~slipstream.format.objectstore.ObjectPrefix` per prefix
    of the URLs asked about (each holds a client)."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote
        self._stores: dict[str, Any] = {}
        self._lock = threading.Lock()

    def of(self, prefix: str) -> Any:
        """The store of ``prefix``."""
        from slipstream.format.objectstore import ObjectPrefix

        with self._lock:
            if prefix not in self._stores:
                self._stores[prefix] = ObjectPrefix(prefix, self.remote)
            return self._stores[prefix]

    def split(self, url: str) -> tuple[Any, str]:
        """The store of ``url``'s prefix, and the object's name in it."""
        prefix, name = url.rsplit("/", 1)
        return self.of(prefix), name


def _on_http(url: str) -> bool:
    """Whether ``url`` is on an HTTP server, whose folders list nothing
    (listing takes WebDAV, which file servers lack)."""
    return url.lower().startswith(("http://", "https://"))


def _versions(urls: list[str], stores: _Stores) -> dict[str, tuple[int, Any]]:
    """The size and ETag (or None) of each object of ``urls`` that exists:
    listed once per prefix, or, on an HTTP server, asked of each object in
    parallel."""
    versions: dict[str, tuple[int, Any]] = {}
    http = [url for url in urls if _on_http(url)]
    for prefix in sorted({url.rsplit("/", 1)[0] for url in set(urls).difference(http)}):
        versions.update({f"{prefix}/{name}": entry for name, entry in stores.of(prefix).listing().items()})

    def head(url: str) -> tuple[int, Any] | None:
        store, name = stores.split(url)
        try:
            return store.head(name)
        except DatasetNotFoundError:
            return None

    if http:
        with ThreadPoolExecutor(min(16, len(http)), thread_name_prefix="slipstream-head") as pool:
            versions.update((url, entry) for url, entry in zip(http, pool.map(head, http)) if entry is not None)
    return versions


def _stated_counts(urls: list[str], remote: Remote) -> dict[str, int]:
    """The sample count of each shard of ``urls`` that has an
    ``img2dataset`` stats object beside it (found as :func:`_versions`
    finds objects, read in parallel).

    Raises:
        FormatError: a stats object is not JSON with a ``"successes"`` count.
    """
    stats_of = {url: url.removesuffix(".tar") + STATS_SUFFIX for url in urls}
    stores = _Stores(remote)
    there = _versions(list(stats_of.values()), stores)
    stats = {url: stores.split(stats_url) for url, stats_url in stats_of.items() if stats_url in there}
    if not stats:
        return {}

    def count(url: str) -> int:
        store, name = stats[url]
        try:
            successes = json.loads(store.read_all(name))["successes"]
        except (ValueError, TypeError, KeyError) as exc:
            raise FormatError(f"{store.url_of(name)}: not the stats img2dataset writes beside {url} (a JSON "
                              f"object with \"successes\"): {type(exc).__name__}: {exc}") from None
        if not isinstance(successes, int) or isinstance(successes, bool) or successes < 0:
            raise FormatError(f"{store.url_of(name)}: \"successes\" must be a count of samples, not {successes!r}")
        return successes

    with ThreadPoolExecutor(min(16, len(stats)), thread_name_prefix="slipstream-stats") as pool:
        return dict(zip(stats, pool.map(count, stats)))


@dataclasses.dataclass
class _Sample:
    """The members of one sample, as they are read."""

    key: str
    found: dict[str, bytes] = dataclasses.field(default_factory=dict)
    names: dict[str, str] = dataclasses.field(default_factory=dict)  # extension -> member name
    problem: str = ""

    def add(self, extension: str, member: tarstream.Member) -> None:
        """Take ``member`` as the sample's ``extension``; the first refused
        or repeated member makes the whole sample unreadable."""
        if self.problem:
            return
        if member.data is None:
            self.problem = member.refusal
        elif extension in self.found:  # which of the two is the sample's is anyone's guess
            self.problem = (f"the sample has two .{extension} members, {self.names[extension]!r} and {member.name!r} "
                            f"(at byte {member.offset}): which one it means is unknown")
        else:
            self.found[extension], self.names[extension] = member.data, member.name

    def outcome(self) -> dict[str, bytes] | Exception:
        """The members by extension, or the error that makes the sample unreadable."""
        return FormatError(self.problem) if self.problem else self.found


def _samples(shard: str, remote: Remote, read_data: bool = True) -> Iterator[tuple[str, dict[str, bytes] | Exception]]:
    """``(key, {extension: bytes})`` per sample of a tar shard, in order, or
    ``(key, error)`` for a sample that cannot be read; a shard that breaks
    off ends with ``(key of the sample in progress, error)`` naming what is
    lost (that sample, which may miss members, and every one after it).  A
    key that comes again after other samples is an unreadable sample: its
    members are not consecutive.
    With ``read_data`` false, the members' contents are ``b""`` (see
    :func:`tarstream.members`): the same items, from the headers alone."""
    current: _Sample | None = None
    read = 0
    keys: set[str] = set()  # of the samples finished
    stream, size = _open(shard, remote)
    with stream:
        try:
            for member in tarstream.members(stream, size, read_data):
                key, extension = _member_key(member.name)
                if key is None:
                    continue
                finished, current = _advance(current, key)
                if finished is not None:
                    yield finished.key, finished.outcome()
                    read += 1
                    keys.add(finished.key)
                    if key in keys:  # webdataset would make it a second sample of that key
                        current.problem = (f"sample key {key!r} comes again at byte {member.offset}, after other "
                                           f"samples: the members of a sample must be consecutive")
                current.add(extension, member)
        except (FormatError, OSError) as exc:
            key = _member_key(exc.member)[0] if isinstance(exc, tarstream.TarDamage) else None
            if key is not None:  # the damage is inside a member: the sample before it, if another, is whole
                finished, current = _advance(current, key)
                if finished is not None:
                    yield finished.key, finished.outcome()
                    read += 1
            if not isinstance(exc, FormatError):  # the file or object could not be read
                exc = FormatError(f"the tar shard cannot be read: {exc}")
            yield (current.key if current else "(start)"), FormatError(f"{exc}; {_lost(current, read)}")
            return
    if current is not None:
        yield current.key, current.outcome()


def _advance(current: _Sample | None, key: str) -> tuple[_Sample | None, _Sample]:
    """The sample finished by a member of sample ``key`` (None if it is
    ``current``'s), and the sample that member belongs to: members of one
    sample are consecutive."""
    if current is not None and current.key == key:
        return None, current
    return current, _Sample(key)


def _member_key(name: str) -> tuple[str | None, str]:
    """A member's sample key and extension (``dir/n0144_10026``, ``jpg``),
    or ``(None, "")`` for a file that is not a sample member (no extension,
    or a dot file)."""
    directory, _, base = name.rpartition("/")
    stem, dot, extension = base.partition(".")
    if not dot or not stem:
        return None, ""
    return (f"{directory}/{stem}" if directory else stem), extension.lower()


def _lost(current: _Sample | None, read: int) -> str:
    """What a shard that breaks off loses, for its error message."""
    if current is None:
        return "no sample of the shard could be read"
    members = ", ".join("." + e for e in current.found) or "none"
    return (f"sample {current.key!r} (members read: {members}) and any samples after it in the shard are lost "
            f"(samples read before it: {read})")


def _open(shard: str, remote: Remote) -> tuple[BinaryIO, int]:
    """The shard's bytes as a stream, and their number."""
    if is_url(shard):
        from slipstream.format.objectstore import ObjectPrefix

        parent, _, name = shard.rpartition("/")
        raw = _ObjectStream(ObjectPrefix(parent, remote), name)
        return io.BufferedReader(raw, buffer_size=1 << 20), raw.size
    try:
        # A FIFO in place of a shard is refused, not waited on for a writer.
        descriptor = open_regular(local_path(shard), shown=shard,
                                  error=lambda problem: FormatError(f"{problem}, so not a tar shard"))
    except FileNotFoundError:
        raise DatasetNotFoundError(f"{shard}: no such tar shard") from None
    except OSError as exc:
        raise FormatError(f"{shard}: the tar shard cannot be opened: {exc.strerror}") from None
    return open(descriptor, "rb"), os.fstat(descriptor).st_size


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
_NESTED = re.compile(r"\{[^}]*\{")
_RANGE = re.compile(r"(\d+)\.\.(\d+)")

MAX_SHARDS = 1_000_000
"""The most shard names a brace pattern may stand for: far more than any
dataset has shards, and few enough to list (a mistyped range such as
``{0..999999999999}`` would exhaust memory)."""


def expand_braces(pattern: str) -> list[str]:
    """Every text ``pattern`` stands for: ``{0000..0099}`` (a numeric range,
    zero-padded as written) and ``{a,b,c}`` (alternatives), as the
    ``webdataset`` package and shells expand shard lists.

    Raises:
        ArgumentError: the pattern stands for more than :data:`MAX_SHARDS`
            names (counted before any is made), or nests braces.
    """
    if _NESTED.search(pattern):
        raise ArgumentError(f"{pattern!r} nests braces, which shard patterns do not: write each brace group "
                            f"on its own ({{a,b}}-{{0..9}})")
    groups = list(_BRACES.finditer(pattern))
    total = math.prod(_choice_count(group.group(1), pattern) for group in groups)
    if total > MAX_SHARDS:
        raise ArgumentError(f"{pattern!r} stands for {total:,} shard names, more than the {MAX_SHARDS:,} a shard "
                            f"pattern may: is a range mistyped?")
    pieces, end = [], 0
    for group in groups:
        pieces += [[pattern[end:group.start()]], _choices(group.group(1))]
        end = group.end()
    pieces.append([pattern[end:]])
    return ["".join(parts) for parts in itertools.product(*pieces)]


def _choice_count(body: str, pattern: str) -> int:
    """How many texts the brace group ``{body}`` stands for."""
    bounds = _RANGE.fullmatch(body)
    if bounds is None:
        return len(body.split(","))
    if max(len(b) for b in bounds.groups()) > 18:
        raise ArgumentError(f"{pattern!r}: the range {{{body[:60]}}} has bounds of more than 18 digits")
    low, high = (int(b) for b in bounds.groups())
    return max(0, high - low + 1)


def _choices(body: str) -> list[str]:
    """The texts the brace group ``{body}`` stands for, in order."""
    bounds = _RANGE.fullmatch(body)
    if bounds is None:
        return body.split(",")
    low, high = bounds.groups()
    width = len(low) if low.startswith("0") else 0
    return [str(k).zfill(width) for k in range(int(low), int(high) + 1)]


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

        if _on_http(text):
            raise ArgumentError(f"{text}: a folder on an HTTP server cannot be listed; name its shards (a brace "
                                f"pattern such as {text}train-{{000000..000099}}.tar, or a shard index .json)")
        return [text + name for name in ObjectPrefix(text.rstrip("/"), remote).names() if name.endswith(".tar")]
    path = Path(local_path(text))
    if path.is_dir():
        return [str(p) for p in sorted(path.glob("*.tar"))]
    if not path.exists():
        raise DatasetNotFoundError(f"{text}: no such tar shard or folder")
    return [str(path)]
