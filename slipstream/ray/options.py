"""What a conversion on Ray writes: the destination, the fields and the
layout options, checked once on the driver and sent to every task."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from slipstream.errors import ArgumentError
from slipstream.format import layout as L
from slipstream.format.write import check_destination as check_write_destination
from slipstream.format.remote import Remote, parse_size
from slipstream.format.writer import (
    DEFAULT_SHARD_SIZE,
    _check_arguments,
    _ShardPlan,
    check_sharding,
    field_descriptors,
    stored_user_metadata,
)


@dataclasses.dataclass(frozen=True, eq=False)
class WriteOptions:
    """A sharded write's destination and options (see :meth:`create`)."""

    path: str
    fields: dict[str, Any]
    columns: dict[str, str]  # field name -> the column it reads
    shard_size: int | None
    shards: int | None
    page_size: int
    page_checksums: bool
    on_error: str
    user: bytes  # the user metadata, as stored
    overwrite: bool
    remote: Remote
    descriptors: tuple[L.FieldDescriptor, ...]

    @classmethod
    def create(cls, path: str, fields: Mapping[str, Any], *, columns: Mapping[str, str] | None = None,
               shard_size: int | str | None = None, shards: int | None = None,
               page_size: int = L.DEFAULT_PAGE_SIZE, page_checksums: bool = True, on_error: str = "raise",
               user_metadata: Mapping[str, Any] | None = None, overwrite: bool = False,
               remote: Remote | None = None) -> WriteOptions:
        """Check and gather the options of :func:`slipstream.ray.write` and
        :class:`~slipstream.ray.SlipstreamDatasink` (documented there).

        Raises:
            ArgumentError: bad arguments, named.
        """
        fields = dict(fields)
        _check_arguments(fields, page_size, on_error, None)
        check_sharding(shard_size, shards)
        unknown = set(columns or {}) - set(fields)
        if unknown:
            raise ArgumentError(f"columns names {', '.join(map(repr, sorted(unknown)))}, which are not fields "
                                f"(fields: {', '.join(map(repr, fields))})")
        return cls(
            path=str(path).rstrip("/"),
            fields=fields,
            columns={name: (columns or {}).get(name, name) for name in fields},
            shard_size=parse_size(shard_size, "shard_size") if shard_size is not None else
            (None if shards is not None else DEFAULT_SHARD_SIZE),
            shards=shards,
            page_size=page_size,
            page_checksums=page_checksums,
            on_error=on_error,
            user=stored_user_metadata(user_metadata),
            overwrite=overwrite,
            remote=remote or Remote(),
            descriptors=tuple(field_descriptors(fields)),
        )

    def plan(self, rows: int) -> _ShardPlan:
        """Where the shards of ``rows`` rows end (``rows`` matters only with ``shards``)."""
        return _ShardPlan(self.shard_size, self.shards, rows)


def check_destination(path: str, overwrite: bool, remote: Remote) -> None:
    """Refuse ``path`` when it holds a dataset (a manifest) and ``overwrite``
    is off, or is a file: the checks of a sharded ``slipstream.write``."""
    check_write_destination(path, sharded=True, overwrite=overwrite, remote=remote)
