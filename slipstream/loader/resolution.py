"""The output sizes of a loader's resizable crops, epoch by epoch.

A :class:`~slipstream.ops.crops.Resizable` crop (``RandomResizedCrop``,
``CenterCrop``) whose size is a :class:`~slipstream.ops.ResolutionSchedule`
or below its ``max_size`` has memory for its largest size and decodes at
any size up to it with the same machine code.  The loader compiles the
graph of every such crop at its largest size (the memory plan and the code)
and runs the graph of the epoch's sizes (the shapes and values): the
epoch's sizes come from :meth:`Loader.set_resolution` when given, else from
each crop's schedule at the epoch, else from its size.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any

from slipstream.compiler.graph import Internal
from slipstream.compiler.rewrites import Keyed
from slipstream.errors import ArgumentError
from slipstream.ops.crops import SIZE, CropDecoder, Resizable

Resolved = dict[str, Any]
"""A loader's bound pipelines: output name -> entries, or :class:`Internal` entries."""


def resizable_crops(resolved: Resolved) -> list[Resizable]:
    """The crops of ``resolved`` whose size can change, in output order."""
    return [entry.crop for entries in resolved.values() for entry in _entries(entries)
            if _resizable(entry) is not None]


def at_sizes(resolved: Resolved, size_of: Callable[[Resizable], tuple[int, int]]) -> Resolved:
    """``resolved`` with each resizable crop decoding at ``size_of(crop)``."""

    def resized(entry: Any) -> Any:
        if isinstance(entry, Keyed):
            inner = resized(entry.entry)
            return entry if inner is entry.entry else dataclasses.replace(entry, entry=inner)
        crop = _resizable(entry)
        return entry if crop is None else dataclasses.replace(entry, crop=crop.at(size_of(crop)))

    out: Resolved = {}
    for name, entries in resolved.items():
        if isinstance(entries, Internal):
            out[name] = Internal([resized(entry) for entry in entries.pipeline])
        else:
            out[name] = [resized(entry) for entry in entries]
    return out


def largest(crop: Resizable) -> tuple[int, int]:
    """A crop's largest size: what its memory is planned for."""
    return crop.largest


def epoch_sizes(resolution: tuple[int, int] | None, epoch: int) -> Callable[[Resizable], tuple[int, int]]:
    """Each crop's size at ``epoch``: ``resolution`` when set, else its schedule's or its own."""
    return (lambda crop: resolution) if resolution is not None else (lambda crop: crop.size_at(epoch))


def checked_resolution(size: Any, crops: list[Resizable], where: str) -> tuple[int, int] | None:
    """``size`` (None, an int or (height, width)) as the pair every crop of
    ``crops`` decodes at, checked against their largest sizes.

    Raises:
        ArgumentError: no crop's size can change, or ``size`` is not a
            size or is larger than a crop's largest (the message names it).
    """
    if size is None:
        return None
    if not crops:
        raise ArgumentError(f"{where}: no crop of these pipelines can change its size: give RandomResizedCrop or "
                            f"CenterCrop a max_size (the memory for the largest size) or a ResolutionSchedule")
    try:
        pair = SIZE.accept(size)
    except Exception:
        raise ArgumentError(f"{where}: a resolution is None, an int or an (height, width) pair of ints >= 1, got "
                            f"{size!r}") from None
    for crop in crops:
        if pair[0] > crop.largest[0] or pair[1] > crop.largest[1]:
            raise ArgumentError(f"{where}: {pair} is larger than the largest size of {crop!r}, {crop.largest}: give "
                                f"it a larger max_size (its memory)")
    return pair


def _resizable(entry: Any) -> Resizable | None:
    """The resizable crop a bound entry decodes with, or None."""
    if type(entry) is CropDecoder and isinstance(entry.crop, Resizable) and entry.crop.resizable:
        return entry.crop
    return None


def _entries(entries: Any) -> list[Any]:
    listed = entries.pipeline if isinstance(entries, Internal) else entries
    return [entry.entry if isinstance(entry, Keyed) else entry for entry in listed]


__all__ = ["at_sizes", "checked_resolution", "epoch_sizes", "largest", "resizable_crops"]
