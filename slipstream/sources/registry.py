"""The kinds of object :func:`slipstream.write` takes as a source: an
ordered table of ``(kind, adapter)`` entries, the first whose kind matches
an object making it a :class:`~slipstream.sources.protocol.Source`.

The built-in kinds (paths, image folders, arrays, Hugging Face datasets...)
are registered by :mod:`slipstream.sources.any_source`; a type of one's own
is added with :func:`register_source`, without editing them::

    class Recordings: ...                    # a type of one's own
    class RecordingsSource: ...              # a Source over it (see slipstream.sources.protocol)

    slipstream.register_source(Recordings, lambda recordings, fields: RecordingsSource(recordings))
    slipstream.write("recordings.slip", Recordings(...))

A class that implements :class:`~slipstream.sources.protocol.Source`
itself is registered without an adapter: ``register_source(RecordingsSource)``.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Callable, Mapping
from typing import Any

from slipstream.errors import ArgumentError
from slipstream.sources.protocol import Source, missing_methods

Adapter = Callable[[Any, Mapping[str, Any] | None], Source]
"""Makes an object of a registered kind a :class:`Source`, given the fields
the caller gave (None when none): ``adapter(obj, fields)``."""

Kind = type | tuple[type, ...] | Callable[[Any], bool]
"""What a registry entry matches: the instances of a type (or of any of a
tuple of types), or the objects a predicate accepts."""


@dataclasses.dataclass(frozen=True)
class SourceKind:
    """One entry of the registry.

    Attributes:
        kind: the type(s) whose instances it takes, or a predicate.
        adapter: makes a matching object a :class:`Source`; None when the
            objects are sources themselves.
        description: what it takes, in the words of the error listing what
            is accepted (``"an image folder"``).
    """

    kind: Kind
    adapter: Adapter | None
    description: str

    def matches(self, obj: Any) -> bool:
        """Whether ``obj`` is of this kind."""
        if isinstance(self.kind, (type, tuple)):
            return isinstance(obj, self.kind)
        return bool(self.kind(obj))

    def adapt(self, obj: Any, fields: Mapping[str, Any] | None) -> Source:
        """``obj`` as a :class:`Source`.

        Raises:
            ArgumentError: the adapter gave something that is not a source.
        """
        source = obj if self.adapter is None else self.adapter(obj, fields)
        missing = missing_methods(type(source))
        if missing:
            how = f"taken as {self.description}" if self.adapter is None else \
                f"made by {_name(self.adapter)} from a {type(obj).__name__}"
            raise ArgumentError(f"a {type(source).__name__} ({how}) is not a slipstream.sources.Source: it lacks "
                                f"{', '.join(m + '()' for m in missing)}")
        return source


_lock = threading.Lock()
_kinds: tuple[SourceKind, ...] = ()
"""The registry, in the order its entries are tried (replaced whole under ``_lock``, read without it)."""


def register_source(kind: Kind, adapter: Adapter | None = None, *, description: str | None = None,
                    last: bool = False) -> None:
    """Have :func:`slipstream.write`, :func:`slipstream.cached` and the
    loader take objects of ``kind`` as a source.  :func:`slipstream.cached`
    identifies such an object as it identifies any other
    (:mod:`slipstream.sources.identity`): by its own ``identity()`` and
    ``cache_name()`` when it has them (a class that is a source itself
    has), else by those of the Source its adapter makes, else by the
    ``name=`` it is given.

    Args:
        kind: a type (its instances, subclasses' included), a tuple of
            types, or a predicate ``kind(obj) -> bool``.
        adapter: ``adapter(obj, fields)`` makes a matching object a
            :class:`~slipstream.sources.protocol.Source` (``fields``: those
            the caller gave, or None).  None when the objects are sources
            themselves: ``kind`` is then the type(s) of a class that
            implements :class:`~slipstream.sources.protocol.Source`.
        description: what the kind takes, for the error that lists what is
            accepted (default: the type's name); needed for a predicate.
        last: try the kind after every kind registered so far (as the
            built-in kinds are registered, in order); by default it is
            tried before them, so that a kind of one's own comes before
            the catch-alls (any object with ``len()`` and ``[i]``, any
            iterable).  A kind registered again replaces its entry.

    Raises:
        ArgumentError: ``kind`` is neither a type, a tuple of types nor a
            callable; a predicate without a description; no adapter for a
            type that is not a source.
    """
    global _kinds
    entry = SourceKind(kind, adapter, _description(kind, adapter, description))
    with _lock:
        kept = tuple(k for k in _kinds if k.kind != kind)
        _kinds = kept + (entry,) if last else (entry,) + kept


def unregister_source(kind: Kind) -> None:
    """Remove the entry :func:`register_source` made for ``kind``.

    Raises:
        ArgumentError: no entry is registered for ``kind``.
    """
    global _kinds
    with _lock:
        kept = tuple(k for k in _kinds if k.kind != kind)
        if len(kept) == len(_kinds):
            raise ArgumentError(f"no source kind is registered for {_name(kind)}")
        _kinds = kept


def registered_sources() -> tuple[SourceKind, ...]:
    """The registry's entries, in the order they are tried."""
    return _kinds


def adapt(obj: Any, fields: Mapping[str, Any] | None) -> Source:
    """``obj`` as a :class:`Source`, by the first entry whose kind it is.

    Raises:
        ArgumentError: no entry takes ``obj`` (the error lists what is
            accepted), or its adapter refuses it.
    """
    kinds = _kinds
    for entry in kinds:
        if entry.matches(obj):
            return entry.adapt(obj, fields)
    accepted = [entry.description for entry in kinds]
    # Semicolons between the kinds: a kind's own description may list several types with commas.
    listed = "; ".join(accepted[:-1]) + f"; or {accepted[-1]}" if len(accepted) > 1 else "".join(accepted)
    raise ArgumentError(f"cannot write from a {type(obj).__name__}: give {listed} (a type of one's own: "
                        f"slipstream.sources.register_source)")


def _description(kind: Kind, adapter: Adapter | None, description: str | None) -> str:
    """The entry's description, after checking ``kind`` and ``adapter``."""
    types = kind if isinstance(kind, tuple) else (kind,) if isinstance(kind, type) else None
    if types is None:
        if not callable(kind):
            raise ArgumentError(f"kind must be a type, a tuple of types or a predicate, not {kind!r:.80}")
        if description is None:
            raise ArgumentError(f"a source kind given by a predicate ({_name(kind)}) needs a description=")
        return description
    if not types or not all(isinstance(t, type) for t in types):
        raise ArgumentError(f"kind must be a type, a tuple of types or a predicate, not {kind!r:.80}")
    if adapter is None:
        for t in types:
            missing = missing_methods(t)
            if missing:
                raise ArgumentError(f"{t.__name__} is not a slipstream.sources.Source (it lacks "
                                    f"{', '.join(m + '()' for m in missing)}): give an adapter that makes its "
                                    f"objects one")
    if description is not None:
        return description
    return " or ".join(("an " if t.__name__[:1].lower() in "aeiou" else "a ") + t.__name__ for t in types)


def _name(thing: Any) -> str:
    """A function's or type's name, for messages."""
    return getattr(thing, "__qualname__", None) or repr(thing)
