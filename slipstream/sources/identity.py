"""What identifies a source's content: the key under which
:func:`slipstream.cached` keeps the dataset file made from it, so that a
source converted once is found again, and a changed source gets a new file.

Sources identify themselves through :class:`IdentifiedSource`: image
folders, COCO and segmentation datasets by their files' paths, sizes and
modification times, WebDataset shards by their names, sizes and versions
(modification times or ETags), LitData datasets by their index.  A Hugging
Face dataset is identified by its fingerprint
(:func:`~slipstream.sources.huggingface.huggingface_identity`).  Any other
source is identified by the name and version the caller gives, or by its
own ``identity()`` and ``cache_name()`` when it implements the protocol.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from slipstream.sources.huggingface import huggingface_identity, is_huggingface


@runtime_checkable
class IdentifiedSource(Protocol):
    """A source that says what identifies its content."""

    def identity(self) -> dict[str, Any]:
        """A JSON object that changes whenever the source's samples may have changed."""

    def cache_name(self) -> str:
        """A short readable name, which starts the cached file's name."""


def source_identity(source: Any) -> tuple[dict[str, Any], str] | None:
    """``(identity, name)`` of ``source``, or None when it cannot identify itself."""
    if isinstance(source, IdentifiedSource):
        return source.identity(), source.cache_name()
    if is_huggingface(source):
        return huggingface_identity(source)
    return None
