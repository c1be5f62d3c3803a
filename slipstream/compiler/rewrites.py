"""What a pipeline list may hold besides operations and nodes, and the
rewrites that turn such a list into one the graph takes.

Two explicit protocols, so that the loader and :class:`~slipstream.compiler.Pipeline`
recognise entries by what they are, not by the attributes they happen to have:

* :class:`FieldOperation`: an entry that becomes a :class:`~slipstream.compiler.Decoder`
  once it is known which field of which dataset it reads (the crops of
  :mod:`slipstream.ops`, which decode just the region they keep).  The
  loader binds it to the field whose pipeline it starts.
* :class:`Foldable`: an entry that can take in the entry after it, so that
  the two run as one (a flip into the crop before it, ``ToTensor`` into
  ``Normalize``).  :func:`fold` applies it to a whole list.
* :class:`LooksAhead`: an entry whose defaults depend on the entries after
  it (``RandomErasing`` fills with the colour that a later ``Normalize``
  turns into 0).  :func:`fold` settles them first.

And one wrapper, :class:`Keyed`: an entry whose random stream comes from an
explicit key rather than from its place.  After a first entry that makes
windows of frames, :func:`each_frame` wraps the per-sample operations to
apply to every frame (:mod:`slipstream.compiler.frames`).
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Sequence
from typing import Any

from slipstream.compiler.frames import EachFrame, MakesWindows, TakesWindows
from slipstream.compiler.kinds import Kind
from slipstream.compiler.nodes import DecoderNode
from slipstream.compiler.operation import Decoder, Operation


class FieldOperation(abc.ABC):
    """A pipeline's first entry that decodes a field of a dataset, and so
    is a decoder only once bound to the dataset and the field."""

    @abc.abstractmethod
    def bind(self, source: Any, field: str) -> Decoder | DecoderNode | list[Any]:
        """The decoder this entry becomes as the first of ``field``'s
        pipeline over ``source`` (a :class:`~slipstream.fields.decoders.DecodeSource`):
        a :class:`~slipstream.compiler.Decoder`, or a
        :class:`~slipstream.compiler.DecoderNode` for a decoder that also
        reads other pipelines (the boxes and masks of
        :mod:`slipstream.ops.detection` read the image's transforms), or a
        list of entries that starts with one of those (an entry that is
        carried out in two stages: the decode on the GPU of
        :mod:`slipstream.ops.device_decode`).

        Raises:
            ValueError: the entry cannot decode this field as it stands (the
                message says why and what to write instead).
        """


class Foldable(abc.ABC):
    """An entry that can take in the entry that follows it."""

    @abc.abstractmethod
    def fold(self, following: Any) -> Any:
        """This entry joined with ``following`` as one entry, or None when
        the two stay separate."""


class LooksAhead(abc.ABC):
    """An entry whose defaults depend on the entries after it in its pipeline."""

    @abc.abstractmethod
    def settled(self, following: list[Any]) -> Any:
        """This entry with the defaults that ``following`` (the entries
        after it, in order) decide."""


@dataclasses.dataclass(frozen=True, eq=False)
class Keyed(LooksAhead):
    """A pipeline entry whose random draws come from ``key`` alone, not
    from where it stands (docs/compiler.md, "Randomness")::

        pipelines = {
            "image": [slipstream.Keyed(RandomResizedCrop(224), key="crop"), Normalize()],
            "view_2": slipstream.View("image", [slipstream.Keyed(RandomResizedCrop(224), key="crop"),
                                                ColorJitter(0.4, 0.4, 0.4), Normalize()]),
        }

    Its stream keeps its draws when other entries are inserted or removed,
    when alike operations come before it, and when its output is renamed;
    the same key in two outputs draws the same numbers (above: both outputs
    cropped alike).  One output may not hold the same key twice.  A keyed
    entry is never folded with its neighbours (a flip after a keyed crop
    stays a flip of its own), so that the key keys just the entry it wraps.

    Args:
        entry: an operation, a node (``RandomApply``), a torch module, or a
            first entry that decodes a field (a crop, in a loader: the key
            keys the decoder it becomes).
        key: a non-empty string.
    """

    entry: Any
    key: str

    def __post_init__(self) -> None:
        if not isinstance(self.key, str) or not self.key:
            raise ValueError(f"Keyed: key must be a non-empty string, got {self.key!r}")
        if isinstance(self.entry, Keyed):
            raise ValueError(f"Keyed: {self.entry!r} has a key already")

    def settled(self, following: list[Any]) -> Keyed:
        """The wrapped entry's defaults settled, the key kept."""
        if isinstance(self.entry, LooksAhead):
            return Keyed(self.entry.settled(following), self.key)
        return self

    def __repr__(self) -> str:
        return f"Keyed({self.entry!r}, key={self.key!r})"


def unkeyed(entry: Any) -> Any:
    """The entry a :class:`Keyed` wraps; any other entry itself."""
    return entry.entry if isinstance(entry, Keyed) else entry


def fold(entries: list[Any]) -> list[Any]:
    """``entries`` with the defaults of :class:`LooksAhead` entries settled,
    then each pair of adjacent entries joined where the first is
    :class:`Foldable` and knows how (repeatedly: a joined pair may take in
    the entry after it too); a :class:`Keyed` entry is left as it is.
    After a first entry that makes windows of frames, the per-sample
    operations apply to each frame with one draw per window
    (:func:`each_frame`)."""
    entries = [entry.settled(entries[k + 1:]) if isinstance(entry, LooksAhead) else entry
               for k, entry in enumerate(entries)]
    folded: list[Any] = []
    for entry in entries:
        joined = None
        if folded and isinstance(folded[-1], Foldable) and not isinstance(entry, Keyed):
            joined = folded[-1].fold(entry)
        if joined is not None:
            folded[-1] = joined
        else:
            folded.append(entry)
    return each_frame(folded)


def each_frame(entries: Sequence[Any]) -> list[Any]:
    """``entries``, a pipeline list, with every per-sample operation after a
    first entry that :class:`MakesWindows` wrapped in :class:`EachFrame`
    (one inside a ``Keyed`` too), unless it :class:`TakesWindows`."""
    entries = list(entries)
    if not entries or not isinstance(entries[0], MakesWindows):
        return entries

    def wrapped(entry: Any) -> Any:
        if isinstance(entry, Keyed):
            return Keyed(wrapped(entry.entry), entry.key)
        framewise = isinstance(entry, Operation) and entry.kind is Kind.SAMPLE
        return EachFrame(entry) if framewise and not isinstance(entry, (TakesWindows, EachFrame)) else entry

    return [entries[0], *(wrapped(entry) for entry in entries[1:])]
