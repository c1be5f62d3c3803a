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
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from typing import Any

from slipstream.format import layout as L

NAME = "manifest.json"
"""The manifest's file name in a sharded dataset's folder or prefix."""

FORMAT = "slipstream-manifest"
VERSION = 1
"""Manifest version this module reads and writes."""


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
        return json.dumps({**body, "crc32": _checksum(body)}, sort_keys=True, separators=(",", ":"),
                          ensure_ascii=False).encode("utf-8") + b"\n"

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


def decode(data: bytes) -> Manifest:
    """A manifest from its bytes.

    Raises:
        ValueError: saying what is wrong (not JSON, wrong checksum or
            version, a missing or malformed member, counts that do not add up).
    """
    try:
        raw = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError) as exc:
        raise ValueError(f"the manifest is not JSON: {exc}") from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise ValueError(f"not a slipstream manifest (its \"format\" is not {FORMAT!r})")
    if raw.get("version") != VERSION:
        raise ValueError(f"manifest version {raw.get('version')!r} is not supported (this slipstream reads version "
                         f"{VERSION}); upgrade slipstream")
    stored = raw.pop("crc32", None)
    if stored != _checksum(raw):
        raise ValueError("manifest checksum mismatch: the manifest is corrupt")
    try:
        fields = tuple(L.FieldDescriptor(int(f["type_id"]), str(f["name"]), dict(f["arguments"]),
                                         tuple((str(a), str(b)) for a, b in f["record"])) for f in raw["fields"])
        shards = tuple(ShardEntry(str(s["name"]), int(s["samples"]), int(s["bytes"]), int(s["pages"]),
                                  int(s["header_crc32"])) for s in raw["shards"])
        manifest = Manifest(int(raw["samples"]), L.check_page_size(raw["page_size"]), bool(raw["page_checksums"]),
                            fields, dict(raw["user_metadata"]), shards)
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"the manifest is malformed: {type(exc).__name__}: {exc}") from None
    for d in fields:
        L.record_dtype(d.record)
    if sum(s.samples for s in shards) != manifest.samples:
        raise ValueError(f"the manifest lists {manifest.samples} samples but its shards hold "
                         f"{sum(s.samples for s in shards)}")
    names = [s.name for s in shards]
    if len(set(names)) != len(names) or any(not _plain_name(n) for n in names):
        raise ValueError("the manifest's shard names are repeated, empty or not plain file names")
    return manifest


def shard_name(index: int, header_crc32: int) -> str:
    """The file name of shard ``index``: numbered, and made unique by its
    header checksum, so that a dataset written again over the same folder
    never mixes its shards with the old ones before its manifest replaces
    the old manifest."""
    return f"shard-{index:05d}-{header_crc32:08x}.slip"


def _plain_name(name: str) -> bool:
    return bool(name) and "/" not in name and "\\" not in name and name not in (".", "..")


def _checksum(body: dict[str, Any]) -> int:
    return L.crc32(json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8"))


def from_descriptors(descriptors: Sequence[L.FieldDescriptor], page_size: int, page_checksums: bool,
                     user_metadata: dict[str, Any], shards: Sequence[ShardEntry]) -> Manifest:
    """The manifest of shards written with these fields and settings."""
    return Manifest(sum(s.samples for s in shards), page_size, page_checksums, tuple(descriptors),
                    dict(user_metadata), tuple(shards))
