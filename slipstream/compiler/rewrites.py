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
"""

from __future__ import annotations

import abc
from typing import Any

from slipstream.compiler.nodes import DecoderNode
from slipstream.compiler.operation import Decoder


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


def fold(entries: list[Any]) -> list[Any]:
    """``entries`` with the defaults of :class:`LooksAhead` entries settled,
    then each pair of adjacent entries joined where the first is
    :class:`Foldable` and knows how (repeatedly: a joined pair may take in
    the entry after it too)."""
    entries = [entry.settled(entries[k + 1:]) if isinstance(entry, LooksAhead) else entry
               for k, entry in enumerate(entries)]
    folded: list[Any] = []
    for entry in entries:
        joined = folded[-1].fold(entry) if folded and isinstance(folded[-1], Foldable) else None
        if joined is not None:
            folded[-1] = joined
        else:
            folded.append(entry)
    return folded
