"""Encoding a Ray task's rows by the fields: the first step of a write on
Ray, the same for the datasink and for :func:`slipstream.ray.write`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from slipstream.fields.base import Encoded
from slipstream.format.sharded_writer import stored_sizes
from slipstream.format.writer import encode_values, stored_fields
from slipstream.format.write_options import WriteOptions


@dataclasses.dataclass(frozen=True)
class Encoding:
    """What encoding some rows gave, apart from the encoded values: per row
    its stored sizes, or why it was left out.  Small: it goes to the driver,
    which cuts the shards from it."""

    rows: int
    sizes: np.ndarray  # (kept rows, stored fields) int64
    skipped: tuple[tuple[int, str], ...]  # (row among these, why it cannot be encoded)


def encode_rows(options: WriteOptions, blocks: Iterable[Any],
                unnamed: Callable[[int], str]) -> tuple[Encoding, list[list[Encoded]]]:
    """Encode the rows of ``blocks`` by ``options.fields``.  Returns what
    :class:`Encoding` says, and the kept rows' values (one ``Encoded`` per
    field).  Rows are named in messages by their source's key
    (:data:`~slipstream.ray.datasource.KEY`) where they have one, else by
    ``unnamed(k)`` for the ``k``-th row here."""
    encoded: list[list[Encoded]] = []
    sizes, skipped, rows = [], [], 0
    stores = stored_fields(options.descriptors)
    for name, values in _rows(blocks, list(options.columns.values()), unnamed):
        outcome = encode_values(options.fields, name, values)
        if isinstance(outcome, str):
            skipped.append((rows, outcome))
        else:
            encoded.append(outcome)
            sizes.append(stored_sizes(stores, outcome))
        rows += 1
    array = np.asarray(sizes, np.int64).reshape(len(encoded), sum(stores))
    return Encoding(rows, array, tuple(skipped)), encoded


def _rows(blocks: Iterable[Any], columns: list[str], unnamed: Callable[[int], str]) -> Iterator[tuple[str, Any]]:
    """Each row of ``blocks`` as ``(name, values of columns)``, or ``(name,
    exception)`` for a row without them or that its source could not read
    (the :data:`~slipstream.ray.datasource.ERROR` column).

    Blocks are read a column at a time, not as a dict per row: Arrow
    columns of bytes, integers and text as Python values (None where
    missing: integers stay integers), others in Ray's NumPy batch format
    (object arrays of bytes and dicts, tensor columns as arrays).
    """
    from ray.data.block import BlockAccessor

    from slipstream.ray.datasource import ERROR, KEY

    first = 0
    for block in blocks:
        accessor = BlockAccessor.for_block(block)
        batch, count = _columns(block, accessor), accessor.num_rows()
        names = (f"row {key}" for key in batch[KEY]) if KEY in batch else (unnamed(first + k) for k in range(count))
        errors = batch[ERROR] if ERROR in batch else ("",) * count
        missing = [c for c in columns if c not in batch]
        if missing:
            problem = KeyError(f"no column {missing[0]!r} (columns: {', '.join(map(repr, batch))})")
            cells: Iterable[Any] = (problem for _ in range(count))
        else:
            cells = zip(*(batch[c] for c in columns))
        for name, error, values in zip(names, errors, cells):
            yield name, (ValueError(error) if error else values)
        first += count


def _columns(block: Any, accessor: Any) -> dict[str, Any]:
    """The columns of ``block``, name -> a sequence of its values (see :func:`_rows`)."""
    import pyarrow as pa
    from ray.data.block import BlockAccessor

    if not isinstance(block, pa.Table):
        return accessor.to_numpy()
    plain = [name for name, kind in zip(block.column_names, block.schema.types)
             if pa.types.is_integer(kind) or pa.types.is_binary(kind) or pa.types.is_large_binary(kind)
             or pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_null(kind)]
    others = [name for name in block.column_names if name not in plain]
    columns = {name: block.column(name).to_pylist() for name in plain}
    if others:
        columns.update(BlockAccessor.for_block(block.select(others)).to_numpy())
    return {name: columns[name] for name in block.column_names}
