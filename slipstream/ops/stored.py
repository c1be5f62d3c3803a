"""Operations that hand over stored values as they are."""

from __future__ import annotations

import dataclasses
from typing import Any

from slipstream.compiler.params import Declares, Int, param
from slipstream.compiler.rewrites import FieldOperation

SAMPLE_BYTES = Int(1, 1 << 30)
"""Bytes of a sample's memory for its stored value (at most 1 GiB)."""


@dataclasses.dataclass(frozen=True)
class StoredBytes(Declares, FieldOperation):
    """The first operation of a field's pipeline: each sample's stored bytes,
    undecoded, at the start of a (max_size,) uint8 sample.  For measuring
    what reading alone costs, or for decoding elsewhere (on the GPU).  The
    loader binds it to the field it is the pipeline of."""

    max_size: int = param(SAMPLE_BYTES, "length in bytes of each output sample", structural=True)

    def bind(self, source: Any, field: str) -> Any:
        """The decoder this operation becomes when it is the first of ``field``'s pipeline."""
        from slipstream.fields.decoders import StoredBytesDecoder

        return StoredBytesDecoder(source, field, self.max_size)
