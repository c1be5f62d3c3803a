"""The contract every source of :func:`slipstream.write` keeps: :class:`Source`.

A source is what a user hands to :func:`slipstream.write` or
:func:`slipstream.cached` (a folder, a COCO dataset, tar shards, a Hugging
Face dataset, arrays...), seen through what writing it needs: the fields
to write when none are given, the user metadata to store, what identifies
its content, and its samples as the writer reads them.

The samples are the writer's own contract (:mod:`slipstream.format.writer`),
not a second one: either random access, a
:class:`~slipstream.format.writer.SampleSource` (``len(samples)`` samples,
``samples[i]`` a tuple with one value per field, ``samples.describe(i)``
naming sample ``i`` in error messages), or a stream, a
:class:`~slipstream.format.writer.SampleStream` (iterating yields
``(name, values)`` once per sample, ``length_hint()`` the count when known
without reading, else None, ``repeatable()``).  A source whose items are
already such tuples (:class:`~slipstream.sources.ImageFolder`, tar shards)
is its own samples; one whose items are dicts
(:class:`~slipstream.sources.COCODetection`) gives a view of them in field
order.

Which objects are sources, and how other objects are made into one, is the
registry's business (:func:`slipstream.sources.register_source`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

from slipstream.format.writer import SampleSource, SampleStream

Samples = SampleSource | SampleStream
"""What the writer reads: random access or a stream (see the module docstring)."""

WriterInput = tuple[Samples, dict[str, Any], dict[str, Any]]
"""``(samples, fields, user metadata)``: a source as :func:`slipstream.write` passes it to the writer."""


@runtime_checkable
class IdentifiedSource(Protocol):
    """A source that says what identifies its content."""

    def identity(self) -> dict[str, Any] | None:
        """A JSON object that changes whenever the source's samples may have
        changed; None when the source cannot tell (an adapter around an
        object that does not identify itself)."""

    def cache_name(self) -> str:
        """A short readable name, which starts the cached file's name."""


class Source(Protocol):
    """A source :func:`slipstream.write` reads (see the module docstring).

    Implemented by every source of :mod:`slipstream.sources`; a type of
    one's own that implements it is written once registered with
    :func:`slipstream.sources.register_source`.
    """

    def default_fields(self) -> dict[str, Any]:
        """The fields written when none are given: field name -> field, in
        the order of the samples' values.

        Raises:
            ArgumentError: the source cannot tell its fields (they must be given).
        """
        ...

    def user_metadata(self) -> dict[str, Any]:
        """What the dataset file stores as user metadata besides the
        caller's (an image folder's class names); a JSON object, often empty."""
        ...

    def identity(self) -> dict[str, Any] | None:
        """A JSON object that changes whenever the samples may have changed
        (files' sizes and modification times, a dataset's fingerprint), by
        which :func:`slipstream.cached` finds the file made from the source
        (see :mod:`slipstream.sources.identity`); None when the source
        cannot tell, and the caller names it instead."""
        ...

    def cache_name(self) -> str:
        """A short readable name, which starts the name of the file
        :func:`slipstream.cached` makes from the source."""
        ...

    def samples_for(self, fields: Mapping[str, Any]) -> Samples:
        """The samples the writer reads for ``fields`` (name -> field, in
        the order of the values): a
        :class:`~slipstream.format.writer.SampleSource` or a
        :class:`~slipstream.format.writer.SampleStream`.

        Raises:
            ArgumentError: the source cannot give samples for ``fields``
                (a field it has no values for, one it cannot store).
        """
        ...


SOURCE_METHODS = ("default_fields", "user_metadata", "identity", "cache_name", "samples_for")
"""The methods of :class:`Source`."""


def missing_methods(kind: type) -> list[str]:
    """The methods of :class:`Source` that the class ``kind`` lacks."""
    return [name for name in SOURCE_METHODS if not callable(getattr(kind, name, None))]


def sample_count(samples: Samples) -> int | None:
    """How many samples the writer will read: ``len()`` of random-access
    samples; a stream's ``length_hint()``, None when it is not known
    without reading the stream."""
    return samples.length_hint() if isinstance(samples, SampleStream) else len(samples)


def writer_input(source: Source, fields: Mapping[str, Any] | None) -> WriterInput:
    """``(samples, fields, user metadata)`` of ``source`` for ``fields``,
    or for its :meth:`~Source.default_fields` when none (or an empty
    mapping) are given."""
    chosen = dict(fields or source.default_fields())
    return source.samples_for(chosen), chosen, dict(source.user_metadata())
