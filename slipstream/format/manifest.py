"""The manifest of a sharded dataset: which shard files make it up, in what
order, and what each must look like.

A sharded dataset is a folder (or an object-store prefix) holding shard
files, each a complete slipstream file (``docs/format.md``), and one
manifest, :data:`NAME`, a UTF-8 JSON object::

    {"format": "slipstream-manifest", "version": 1,
     "samples": 1281167, "page_size": 8388608, "page_checksums": true,
     "fields": [{"type_id": 1, "name": "image", "arguments": {...}, "record": [["offset", "<u8"], ...]}, ...],
     "user_metadata": {"classes": [...]},
     "shards": [{"name": "shard-00000-1a2b3c4d.slip", "samples": 5000, "bytes": 1073745920,
                 "pages": 128, "header_crc32": 3735928559}, ...],
     "crc32": 305419896}

The shards' samples follow each other in the order listed: sample ``i`` of
the dataset is sample ``i - (samples of the shards before)`` of its shard.
``crc32`` is the CRC-32 of the canonical JSON of every other member (keys
sorted, no spaces, UTF-8), so a manifest damaged in a copy is recognised.
Every shard's header checksum is recorded, so a shard replaced or
rewritten after the manifest was written is recognised when it is opened.
Writers put the manifest last, after every shard is complete: a dataset
whose manifest can be read is whole.

The checksum only recognises damage: anyone can compute it again.  So
:func:`decode` also checks every member's type and range (counts and sizes
are whole numbers, never ``true``, ``64.0``, ``Infinity`` or ``NaN``; CRCs
fit 32 bits; the page size is a power of two in range; shard names are
plain, distinct file names of at most :data:`MAX_NAME_BYTES` bytes) and that
the totals add up, and the reader checks every shard against its entry.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterable, Sequence
from typing import Any

from slipstream.errors import FormatError
from slipstream.format import layout as L

NAME = "manifest.json"
"""The manifest's file name in a sharded dataset's folder or prefix."""

FORMAT = "slipstream-manifest"
VERSION = 1
"""Manifest version this module reads and writes."""

MAX_COUNT = 2 ** 63 - 1
"""Largest sample count, size or page count a manifest may give (readers add them up in 64-bit integers)."""

MAX_CRC32 = 2 ** 32 - 1

MAX_NAME_BYTES = 255
"""Longest shard name, in bytes of UTF-8: the file-name limit of common file systems (NAME_MAX)."""


@dataclasses.dataclass(frozen=True)
class ShardEntry:
    """What the manifest says about one shard file.

    Attributes:
        name: the file's name, relative to the manifest's folder or prefix.
        samples: samples in it.
        bytes: the file's size.
        pages: its data pages.
        header_crc32: its header's checksum (which covers every table's).
    """

    name: str
    samples: int
    bytes: int
    pages: int
    header_crc32: int


@dataclasses.dataclass(frozen=True)
class Manifest:
    """A sharded dataset's manifest (see the module docstring)."""

    samples: int
    page_size: int
    page_checksums: bool
    fields: tuple[L.FieldDescriptor, ...]
    user_metadata: dict[str, Any]
    shards: tuple[ShardEntry, ...]

    def encode(self) -> bytes:
        """The manifest's bytes, its checksum included."""
        body = self._body()
        return _canonical({**body, "crc32": _checksum(body)}) + b"\n"

    def _body(self) -> dict[str, Any]:
        return {
            "format": FORMAT, "version": VERSION, "samples": self.samples, "page_size": self.page_size,
            "page_checksums": self.page_checksums,
            "fields": [{"type_id": d.type_id, "name": d.name, "arguments": d.arguments,
                        "record": [list(r) for r in d.record]} for d in self.fields],
            "user_metadata": self.user_metadata,
            "shards": [dataclasses.asdict(s) for s in self.shards],
        }


def looks_like_manifest(head: bytes) -> bool:
    """Whether a file starting with ``head`` is meant as a manifest."""
    return head.lstrip()[:1] == b"{" and FORMAT.encode() in head[:4096]


def decode(data: bytes, where: str = NAME) -> Manifest:
    """A manifest from its bytes, with every member checked: its type, its
    range, and that the shards' counts add up.

    Args:
        data: the manifest's bytes.
        where: the manifest's path or URL, for messages.

    Raises:
        FormatError: naming ``where``, the member (e.g.
            ``shards[3].header_crc32``) and what is wrong with it: not
            JSON, a wrong checksum or version, a member missing, of the
            wrong type or out of range, a shard name that is not a plain
            file name or is repeated, counts that do not add up.
    """
    try:
        return _decode(data)
    except _Problem as exc:
        raise FormatError(f"{where}: {exc}") from None


class _Problem(Exception):
    """What is wrong with a manifest (``decode`` adds where it is)."""


def _decode(data: bytes) -> Manifest:
    raw = _parse(data)
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise _Problem(f"not a slipstream manifest (its \"format\" is not {FORMAT!r})")
    version = raw.get("version")
    if type(version) is not int:
        raise _Problem(f"version is {shown(version)}: it must be a whole number (this slipstream reads version "
                       f"{VERSION})")
    if version != VERSION:
        raise _Problem(f"manifest version {version} is not supported (this slipstream reads version {VERSION}); "
                       f"upgrade slipstream")
    if "crc32" not in raw:
        raise _Problem("the manifest has no crc32 member: it is corrupt")
    stored = _whole(raw.pop("crc32"), "crc32", 0, MAX_CRC32)
    if stored != _checksum(raw):
        raise _Problem("manifest checksum mismatch: the manifest is corrupt")
    page_size = _page_size(_member(raw, "page_size"))
    shards = tuple(_shard_entry(entry, f"shards[{k}]", page_size)
                   for k, entry in enumerate(_array(raw, "shards", nonempty=True)))
    manifest = Manifest(_whole(_member(raw, "samples"), "samples"), page_size,
                        _boolean(_member(raw, "page_checksums"), "page_checksums"),
                        tuple(_field(f, f"fields[{k}]") for k, f in enumerate(_array(raw, "fields"))),
                        _object(_member(raw, "user_metadata"), "user_metadata"), shards)
    _unique((d.name for d in manifest.fields), "fields", "field name")
    _unique((s.name for s in shards), "shards", "shard name")
    held = sum(s.samples for s in shards)
    if held != manifest.samples:
        raise _Problem(f"samples is {manifest.samples:,} but the shards listed hold {held:,}")
    return manifest


def _parse(data: bytes) -> Any:
    """The JSON value in ``data``; an object that repeats a member is refused
    (readers that keep the first and readers that keep the last would see
    different manifests)."""
    try:
        return json.loads(data.decode("utf-8"), object_pairs_hook=_no_repeats)
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise _Problem(f"the manifest is not JSON: {exc}") from None


def _no_repeats(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    members: dict[str, Any] = {}
    for key, value in pairs:
        if key in members:
            raise _Problem(f"the manifest repeats the member {shown(key)} in one object: it is malformed")
        members[key] = value
    return members


def _member(members: dict[str, Any], key: str, at: str = "") -> Any:
    if key not in members:
        raise _Problem(f"{at}{'.' if at else ''}{key} is missing")
    return members[key]


def _whole(value: Any, what: str, low: int = 0, high: int = MAX_COUNT) -> int:
    # JSON's true is a Python int, and 64.0, 1e400 (infinity) and NaN are floats: only an int will do.
    if type(value) is not int or not low <= value <= high:
        raise _Problem(f"{what} is {shown(value)}: it must be a whole number from {low:,} to {high:,}")
    return value


def _boolean(value: Any, what: str) -> bool:
    if type(value) is not bool:
        raise _Problem(f"{what} is {shown(value)}: it must be true or false")
    return value


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise _Problem(f"{what} is {shown(value)}: it must be a JSON object")
    return value


def _array(members: dict[str, Any], key: str, *, nonempty: bool = False) -> list[Any]:
    value = _member(members, key)
    if not isinstance(value, list) or (nonempty and not value):
        raise _Problem(f"{key} is {shown(value)}: it must be a{' non-empty' if nonempty else 'n'} JSON array")
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise _Problem(f"{what} is {shown(value)}: it must be a non-empty string")
    return value


def _page_size(value: Any) -> int:
    if type(value) is not int or not L.MIN_PAGE_SIZE <= value <= L.MAX_PAGE_SIZE or value & (value - 1):
        raise _Problem(f"page_size is {shown(value)}: it must be a power of two from {L.MIN_PAGE_SIZE:,} to "
                       f"{L.MAX_PAGE_SIZE:,}")
    return value


def _field(value: Any, at: str) -> L.FieldDescriptor:
    members = _object(value, at)
    record = _member(members, "record", at)
    if not isinstance(record, list) or not all(
            isinstance(r, list) and len(r) == 2 and all(isinstance(s, str) for s in r) for r in record):
        raise _Problem(f"{at}.record is {shown(record)}: it must be a list of [name, numpy dtype string] pairs")
    descriptor = L.FieldDescriptor(_whole(_member(members, "type_id", at), f"{at}.type_id", 0, MAX_CRC32),
                                   _text(_member(members, "name", at), f"{at}.name"),
                                   _object(_member(members, "arguments", at), f"{at}.arguments"),
                                   tuple((name, code) for name, code in record))
    try:
        L.record_dtype(descriptor.record)
    except (ValueError, TypeError) as exc:
        raise _Problem(f"{at}.record: {exc}") from None
    return descriptor


def _shard_entry(value: Any, at: str, page_size: int) -> ShardEntry:
    members = _object(value, at)
    entry = ShardEntry(_shard_name(_member(members, "name", at), f"{at}.name"),
                       _whole(_member(members, "samples", at), f"{at}.samples"),
                       # Every shard holds at least its header.
                       _whole(_member(members, "bytes", at), f"{at}.bytes", L.HEADER_DTYPE.itemsize),
                       _whole(_member(members, "pages", at), f"{at}.pages"),
                       _whole(_member(members, "header_crc32", at), f"{at}.header_crc32", 0, MAX_CRC32))
    if entry.pages and (entry.pages - 1) * page_size >= entry.bytes:
        raise _Problem(f"{at}.pages is {entry.pages:,}: more pages of {page_size:,} bytes than fit in the "
                       f"{entry.bytes:,} bytes of {at}.bytes")
    return entry


def _shard_name(value: Any, what: str) -> str:
    name = _text(value, what)
    problem = _name_problem(name)
    if problem:
        raise _Problem(f"{what} {shown(name)} {problem}")
    return name


def _name_problem(name: str) -> str | None:
    """What makes ``name`` unfit as a shard's name (a plain file name in the
    dataset's folder or prefix, at most :data:`MAX_NAME_BYTES` long), in
    words; None when it is fit."""
    if name in (".", ".."):
        return "is not a file name"
    if "/" in name or "\\" in name:
        return "holds a path separator: a shard is a file directly in the dataset's folder or prefix"
    control = next((c for c in name if ord(c) < 32 or ord(c) == 127), None)
    if control is not None:
        return "holds a NUL byte" if control == "\0" else f"holds the control character U+{ord(control):04X}"
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "is not valid Unicode (it holds a lone surrogate)"
    if size > MAX_NAME_BYTES:
        return f"is {size:,} bytes long: the limit is {MAX_NAME_BYTES} (a file name's, on common file systems)"
    return None


def _unique(names: Iterable[str], where: str, what: str) -> None:
    seen: set[str] = set()
    for name in names:
        if name in seen:
            raise _Problem(f"{where} lists the {what} {shown(name)} twice")
        seen.add(name)


def shown(value: Any, limit: int = 60) -> str:
    """``value`` as JSON for a message, cut at ``limit`` characters (a
    hostile manifest's values can be long, or hold control characters)."""
    try:
        text = json.dumps(value, ensure_ascii=True, sort_keys=True)
    except (TypeError, ValueError, RecursionError):
        text = type(value).__name__
    return text if len(text) <= limit else text[:limit] + "..."


def shard_name(index: int, header_crc32: int) -> str:
    """The file name of shard ``index``: numbered, and made unique by its
    header checksum, so that a dataset written again over the same folder
    never mixes its shards with the old ones before its manifest replaces
    the old manifest."""
    return f"shard-{index:05d}-{header_crc32:08x}.slip"


def _canonical(value: dict[str, Any]) -> bytes:
    """The canonical JSON of ``value`` (docs/format.md): keys sorted, no
    spaces, UTF-8; all ASCII, with ``\\u`` escapes, where some text has no
    UTF-8 form (a class name from a file name that is not UTF-8)."""
    return L.json_bytes(value, sort_keys=True, separators=(",", ":"))


def _checksum(body: dict[str, Any]) -> int:
    return L.crc32(_canonical(body))


def from_descriptors(descriptors: Sequence[L.FieldDescriptor], page_size: int, page_checksums: bool,
                     user_metadata: dict[str, Any], shards: Sequence[ShardEntry]) -> Manifest:
    """The manifest of shards written with these fields and settings."""
    return Manifest(sum(s.samples for s in shards), page_size, page_checksums, tuple(descriptors),
                    dict(user_metadata), tuple(shards))
