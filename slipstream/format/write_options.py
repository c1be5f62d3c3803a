"""What a dataset write is: its destination and layout, checked once when
made, and shared by :func:`slipstream.write` (one file, or shards and a
manifest), :func:`slipstream.convert` and the Ray writer (which sends it
to every task).  How the samples are encoded (processes, a progress bar)
belongs to each writer, not here."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping
from typing import Any

from slipstream.errors import ArgumentError
from slipstream.format import layout as L
from slipstream.format import manifest as M
from slipstream.format.location import open_location
from slipstream.format.remote import Remote, is_url, local_path, parse_size
from slipstream.format.writer import DEFAULT_SHARD_SIZE, ShardPlan, field_descriptors, stored_user_metadata

ON_ERROR = ("raise", "skip")
"""What a write does with a sample it cannot encode: stop, naming it, or
leave it out and report it."""


@dataclasses.dataclass(frozen=True, eq=False)
class WriteOptions:
    """A write's destination and layout options (make them with :meth:`create`).

    Attributes:
        path: the file, or the folder or prefix of a sharded dataset.
        fields: field name -> field, in the order of each sample's values.
        columns: field name -> the column of a table source that it reads
            (the Ray writer's rows); each field's own name unless given.
        sharded: whether shards and a manifest are written (rather than one file).
        shard_size: with ``sharded``, the data bytes after which a shard
            ends; None with ``shards``.
        shards: with ``sharded``, the number of shards of equal sample
            counts, else None.
        page_size: bytes per data page.
        page_checksums: whether a CRC-32 of each data page is stored.
        on_error: one of :data:`ON_ERROR`.
        user: the user metadata as the file stores it.
        overwrite: whether a dataset already at ``path`` may be replaced.
        remote: object-store options, for a URL.
        descriptors: the descriptor the file stores for each field.
    """

    path: str
    fields: dict[str, Any]
    columns: dict[str, str]
    sharded: bool
    shard_size: int | None
    shards: int | None
    page_size: int
    page_checksums: bool
    on_error: str
    user: bytes
    overwrite: bool
    remote: Remote
    descriptors: tuple[L.FieldDescriptor, ...]

    @classmethod
    def create(cls, path: str | os.PathLike, fields: Mapping[str, Any], *,
               columns: Mapping[str, str] | None = None, shard_size: int | str | None = None,
               shards: int | None = None, page_size: int = L.DEFAULT_PAGE_SIZE, page_checksums: bool = True,
               on_error: str = "raise", user_metadata: Mapping[str, Any] | None = None, overwrite: bool = False,
               remote: Remote | None = None, sharded: bool | None = None) -> WriteOptions:
        """Check and gather a write's options (documented at
        :func:`slipstream.write`).  ``sharded`` None: sharded when
        ``shard_size`` or ``shards`` is given or ``path`` is a URL; a
        sharded write given neither ends shards at
        :data:`~slipstream.format.writer.DEFAULT_SHARD_SIZE`.

        Raises:
            ArgumentError: a bad argument, named, with what it must be.
        """
        fields = dict(fields)
        if not fields:
            raise ArgumentError("no fields given: pass fields={'name': Field(), ...}")
        for name, field in fields.items():
            if not isinstance(name, str) or not name:
                raise ArgumentError(f"field names must be non-empty strings, got {name!r}")
            if not all(hasattr(field, a) for a in ("type_id", "encode", "record_dtype", "arguments")):
                raise ArgumentError(f"field {name!r} is {field!r}, not a slipstream Field")
        if on_error not in ON_ERROR:
            raise ArgumentError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        try:
            L.check_page_size(page_size)
        except ValueError as exc:
            raise ArgumentError(str(exc)) from None
        if shards is not None and (not isinstance(shards, int) or isinstance(shards, bool) or shards < 1):
            raise ArgumentError(f"shards must be a positive integer, got {shards!r}")
        if shards is not None and shard_size is not None:
            raise ArgumentError("give shard_size or shards, not both")
        unknown = set(columns or {}) - set(fields)
        if unknown:
            raise ArgumentError(f"columns names {', '.join(map(repr, sorted(unknown)))}, which are not fields "
                                f"(fields: {', '.join(map(repr, fields))})")
        if sharded is None:
            sharded = shards is not None or shard_size is not None or is_url(path)
        if sharded and shards is None and shard_size is None:
            shard_size = DEFAULT_SHARD_SIZE
        return cls(
            path=str(path).rstrip("/") if sharded else str(path),
            fields=fields,
            columns={name: (columns or {}).get(name, name) for name in fields},
            sharded=sharded,
            shard_size=parse_size(shard_size, "shard_size") if shard_size is not None else None,
            shards=shards,
            page_size=page_size,
            page_checksums=bool(page_checksums),
            on_error=on_error,
            user=stored_user_metadata(user_metadata),
            overwrite=bool(overwrite),
            remote=remote or Remote(),
            descriptors=tuple(field_descriptors(fields)),
        )

    def plan(self, samples: int | None) -> ShardPlan:
        """Where the shards of ``samples`` samples end (the count matters
        only with ``shards``, which needs it).

        Raises:
            ArgumentError: ``shards`` without a count of the samples.
        """
        if self.shards is not None and samples is None:
            raise ArgumentError(f"shards={self.shards} needs the number of samples beforehand, which the source "
                                f"does not give: use shard_size instead")
        return ShardPlan(self.shard_size, self.shards, samples or 0)

    def check_destination(self) -> None:
        """Refuse a destination the write would fail at only after encoding
        everything, or would replace without being asked to.

        Raises:
            FileExistsError: a file (or a sharded dataset's manifest) is at
                ``path`` and ``overwrite`` is off.
            FileNotFoundError: the folder that is to hold the file does not exist.
            NotADirectoryError, IsADirectoryError: ``path``, or the folder
                that is to hold it, is the wrong kind of thing (a path that
                ends with a slash names a folder).
        """
        path = self.path
        if self.sharded:
            if not is_url(path) and local_path(path).is_file():
                raise NotADirectoryError(f"{path} is a file; a sharded dataset is written into a folder")
            if not self.overwrite and open_location(path, self.remote).exists(M.NAME):
                raise FileExistsError(f"{path} already holds a slipstream dataset ({M.NAME}); pass overwrite=True "
                                      f"(--overwrite) to replace it")
            return
        target = local_path(path)
        if path.endswith(("/", os.sep)):  # a folder's name: a file named without the slash would surprise
            raise IsADirectoryError(f"{path} names a folder (it ends with a slash); give the path of a file to "
                                    f"write, or shard_size= or shards= (--shard-size, --shards) to write a sharded "
                                    f"dataset into the folder")
        folder = target.parent
        if not folder.is_dir():
            if folder.exists():
                raise NotADirectoryError(f"{target} cannot be written: {folder} is not a folder")
            raise FileNotFoundError(f"{target} cannot be written: the folder {folder} does not exist")
        if target.is_dir():
            raise IsADirectoryError(f"{target} is a folder; give the path of a file to write, or shard_size= or "
                                    f"shards= (--shard-size, --shards) to write a sharded dataset into the folder")
        if target.exists() and not self.overwrite:
            raise FileExistsError(f"{target} already exists; pass overwrite=True (--overwrite) to replace it")


__all__ = ["ON_ERROR", "WriteOptions"]
