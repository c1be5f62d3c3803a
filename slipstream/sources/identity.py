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

What an identity does not see, a cached file does not follow: a file whose
bytes change while its size and modification time stay the same (a tool
that restores modification times, a file system with coarse ones) keeps
the old file in use; touching the changed files, or removing the cached
file (``slipstream cache prune``), makes a new one.

:func:`source_location` keeps of an identity what stays when the content
changes (a folder's path, not its files' sizes): the copies of one source
made before and after a change share it, so that the newer copy
supersedes the older (:mod:`slipstream.cache_files`).
"""

from __future__ import annotations

from typing import Any

from slipstream.sources.adapters import identity_of
from slipstream.sources.huggingface import huggingface_identity, is_huggingface
from slipstream.sources.protocol import IdentifiedSource

__all__ = ["CONTENT_KEYS", "IdentifiedSource", "source_identity", "source_location"]


CONTENT_KEYS = ("content", "classes", "index", "version")
"""The keys of the identities above that record a source's content (or
its version), not where it is."""


def source_location(identity: dict[str, Any]) -> dict[str, Any] | None:
    """What stays of ``identity`` when the source's content changes: its
    keys but :data:`CONTENT_KEYS`, with files (tar shards, the files a
    streaming Hugging Face dataset reads) by name alone; None for a
    Hugging Face dataset identified by its fingerprint alone, which says
    nothing of where it comes from."""
    if "huggingface" in identity:
        return None
    location = {key: value for key, value in identity.items() if key not in CONTENT_KEYS}
    for key in ("webdataset", "files"):
        if isinstance(location.get(key), list):  # [name, size, version] -> name
            location[key] = [item[0] if isinstance(item, list) else item for item in location[key]]
    return location


def source_identity(source: Any) -> tuple[dict[str, Any], str] | None:
    """``(identity, name)`` of ``source``, or None when it cannot identify itself."""
    if isinstance(source, IdentifiedSource):
        return identity_of(source)
    if is_huggingface(source):
        return huggingface_identity(source)
    return None
