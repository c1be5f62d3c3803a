"""Resume states: what :meth:`slipstream.Loader.state_dict` records, and the
checks :meth:`slipstream.Loader.load_state_dict` runs on a state before it
changes anything.

A state is a plain dict (it goes through ``torch.save`` and JSON alike):

- where the saved rank stood: ``epoch``, ``batch`` (batches of its share
  handed out), ``world_size``, ``rank`` and ``segments`` (earlier runs of
  the epoch on other world sizes, ``[world_size, positions]`` each);
- what it was taken over, which the loading loader must share: ``dataset``,
  ``indices``, ``samples``, ``order``, ``seed``, ``window_pages``,
  ``repeats``, ``selected_round``, ``batch_size`` and ``drop_last``;
- ``resolution``: the size :meth:`slipstream.Loader.set_resolution` set
  (``[height, width]``, or None: each crop's own), which the loading loader
  takes (a state written before it has none: None).

A state comes from a checkpoint, which may be another job's, another
dataset's, damaged or written by hand, so it is checked whole (types,
ranges, sizes, identity, and every position against the epoch it names)
before the loader changes, and refused with an :class:`ArgumentError`
naming the field, the state's value and this loader's or what is allowed.
The sizes a state can make the loader work through are bounded
(:data:`MAX_WORLD_SIZE`, :data:`MAX_SEGMENTS`, :data:`MAX_POSITIONS`)
before anything is allocated for them.
"""

from __future__ import annotations

import dataclasses
import operator
import reprlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from slipstream.errors import ArgumentError
from slipstream.loader import orders

MAX_WORLD_SIZE = 1 << 20
"""The most ranks a state may name: beyond any job, small enough that a
position per rank costs little."""

MAX_SEGMENTS = 1024
"""The most runs on other world sizes one epoch of a state may record
(each elastic resume within an epoch adds one); each costs a pass over the
epoch's order when an epoch starts."""

MAX_POSITIONS = 1 << 22
"""The most positions (one per rank) all the segments of a state may hold together."""

MAX_EPOCH = 2**63 - 1
"""The largest epoch a state may name (epochs seed 64-bit generators), and
the bound of its batches before they are checked against their epoch."""

IDENTITY = ("dataset", "indices", "samples", "order", "seed", "window_pages", "repeats", "selected_round",
            "batch_size", "drop_last")
"""The fields a state must share with the loader that loads it."""

POSITION = ("epoch", "batch", "world_size", "rank", "segments")
"""The fields that say where the saved rank stood."""

LATER = ("dataset", "indices", "window_pages")
"""Fields that states written before slipstream recorded them lack (see
:func:`check_identity`)."""

REPEATS = ("repeats", "selected_round")
"""Fields that states written before repeated augmentation lack (see
:func:`check_identity`)."""

_HINTS = {"dataset": " (another dataset, or this one written again)",
          "indices": " (the loaders' indices= differ)"}

Segments = tuple[tuple[int, tuple[int, ...]], ...]


class _Short(reprlib.Repr):
    """Reprs cut short, integers included: a forged state may hold anything,
    of any size (``repr`` of an int over 4300 digits even raises)."""

    def __init__(self) -> None:
        super().__init__()
        self.maxstring = self.maxother = 80
        self.maxlist = self.maxtuple = self.maxdict = 6

    def repr_int(self, x: int, level: int) -> str:
        if x.bit_length() > 128:
            return f"<an integer of {x.bit_length()} bits>"
        return repr(x)


_short = _Short()


@dataclasses.dataclass(frozen=True)
class Position:
    """Where one saved rank stood, its fields checked for type and range."""

    epoch: int
    batch: int
    world_size: int
    rank: int
    segments: Segments


@dataclasses.dataclass(frozen=True)
class ResumePoint:
    """Where a loader continues: the epoch, the batch of its own share it
    starts at, and the runs of that epoch so far on other world sizes."""

    epoch: int
    batch: int
    segments: list[tuple[int, list[int]]]


def shown(value: Any) -> str:
    """``value``'s repr, shortened: a forged state may hold anything, of any size."""
    return _short.repr(value)


def _refuse(problem: str) -> ArgumentError:
    return ArgumentError(f"cannot resume: {problem}")


def states_of(state: Any) -> list[Mapping[str, Any]]:
    """The states ``load_state_dict`` was given: one state, or the list of
    every rank's."""
    if isinstance(state, Mapping):
        return [state]
    if not isinstance(state, (list, tuple)):
        raise _refuse(f"a state is the dict Loader.state_dict() returns (or the list of every rank's), "
                      f"got {type(state).__name__} {shown(state)}")
    if not state:
        raise _refuse("load_state_dict needs a state (or the list of every rank's state), got an empty list")
    if len(state) > MAX_WORLD_SIZE:
        raise _refuse(f"a list of {len(state)} states: at most {MAX_WORLD_SIZE} ranks are allowed")
    for k, one in enumerate(state):
        if not isinstance(one, Mapping):
            raise _refuse(f"state {k} of the list is {type(one).__name__} {shown(one)}, not the dict "
                          f"Loader.state_dict() returns")
    return list(state)


def field(state: Mapping[str, Any], key: str) -> Any:
    """``state[key]``, refused by name when the state lacks it."""
    if key not in state:
        raise _refuse(f"the state has no {key!r} (Loader.state_dict() records {', '.join(POSITION + IDENTITY)})")
    return state[key]


def integer(value: Any, name: str, least: int, most: int) -> int:
    """``value`` as an int in ``[least, most]`` (numpy integers included; no bools, no floats)."""
    try:
        number = None if isinstance(value, bool) else operator.index(value)
    except TypeError:
        number = None
    if number is None or not least <= number <= most:
        raise _refuse(f"the state has {name}={shown(value)}: it must be an integer in [{least}, {most}]")
    return int(number)


def _segments(value: Any) -> Segments:
    """The state's ``segments``, each ``[world_size, positions]`` with a
    non-negative position per rank; their sizes are checked before their
    positions are read."""
    if not isinstance(value, (list, tuple)):
        raise _refuse(f"the state has segments={shown(value)}: it must be a list of [world_size, positions]")
    if len(value) > MAX_SEGMENTS:
        raise _refuse(f"the state has {len(value)} segments: at most {MAX_SEGMENTS} runs on other world sizes "
                      f"in one epoch are allowed")
    shapes = [_segment_shape(k, segment) for k, segment in enumerate(value)]
    total = sum(world_size for world_size, _ in shapes)
    if total > MAX_POSITIONS:
        raise _refuse(f"the state's segments hold {total} positions together: at most {MAX_POSITIONS} are allowed")
    return tuple((world_size, tuple(integer(p, f"segments[{k}][1][{r}]", 0, MAX_EPOCH) for r, p in enumerate(done)))
                 for k, (world_size, done) in enumerate(shapes))


def _segment_shape(k: int, segment: Any) -> tuple[int, Sequence[Any]]:
    """Segment ``k``'s world size and its positions (one per rank, not yet read)."""
    if not (isinstance(segment, (list, tuple)) and len(segment) == 2 and isinstance(segment[1], (list, tuple))):
        raise _refuse(f"the state has segments[{k}]={shown(segment)}: it must be [world_size, positions]")
    world_size = integer(segment[0], f"segments[{k}][0]", 1, MAX_WORLD_SIZE)
    if len(segment[1]) != world_size:
        raise _refuse(f"the state has segments[{k}] on {world_size} ranks with {len(segment[1])} positions: "
                      f"it needs one per rank")
    return world_size, segment[1]


def position(state: Mapping[str, Any]) -> Position:
    """Where the saved rank of ``state`` stood, every field checked for type
    and range (the batch against its epoch later, by :func:`resume_point`)."""
    world_size = integer(field(state, "world_size"), "world_size", 1, MAX_WORLD_SIZE)
    return Position(epoch=integer(field(state, "epoch"), "epoch", 0, MAX_EPOCH),
                    batch=integer(field(state, "batch"), "batch", 0, MAX_EPOCH),
                    world_size=world_size,
                    rank=integer(field(state, "rank"), "rank", 0, world_size - 1),
                    segments=_segments(field(state, "segments")))


def check_identity(state: Mapping[str, Any], mine: Mapping[str, Any], legacy: Callable[[str], str | None]) -> None:
    """Refuse ``state`` unless it was taken over what this loader loads:
    every :data:`IDENTITY` field equal to ``mine``'s.

    A state written before slipstream recorded the :data:`LATER` fields
    (or the :data:`REPEATS` fields) lacks all of them; ``legacy(key)``
    says why such a state cannot stand in for this loader's value of
    ``key`` (``None``: it can).
    """
    missing = []
    for later in (LATER, REPEATS):
        lacking = [key for key in later if key not in state]
        if lacking and len(lacking) != len(later):
            field(state, lacking[0])  # refused: a state records all of them, or (an older one) none
        missing += lacking
    for key in IDENTITY:
        if key in missing:
            problem = legacy(key)
            if problem is not None:
                raise _refuse(f"the state does not record {key} (it was written before slipstream recorded it) "
                              f"and {problem}; this loader has {key}={mine[key]!r}")
            continue
        theirs = field(state, key)
        if type(theirs) is not type(mine[key]) and not _same_integer(theirs, mine[key]):
            raise _refuse(f"the state has {key}={shown(theirs)} ({type(theirs).__name__}), this loader "
                          f"{mine[key]!r} ({type(mine[key]).__name__})")
        if theirs != mine[key]:
            raise _refuse(f"the state has {key}={shown(theirs)}, this loader {mine[key]!r}{_HINTS.get(key, '')}")


def _same_integer(theirs: Any, mine: Any) -> bool:
    """Whether both are integers (numpy's included) other than bools, which
    compare as numbers."""
    def whole(value: Any) -> bool:
        return isinstance(value, (int, np.integer)) and not isinstance(value, bool)

    return whole(theirs) and whole(mine)


def positions(states: Sequence[Mapping[str, Any]], mine: Mapping[str, Any],
              legacy: Callable[[str], str | None]) -> list[Position]:
    """The positions of ``states``, each checked against the loader's
    identity ``mine`` (:func:`check_identity`) and together
    (:func:`check_together`)."""
    saved = []
    for one in states:
        check_identity(one, mine, legacy)
        saved.append(position(one))
    check_together(saved)
    return saved


def check_together(saved: Sequence[Position]) -> None:
    """Refuse a list of states that are not every rank of one run: the
    same epoch, world size and segments, one state per rank."""
    first = saved[0]
    for one in saved[1:]:
        for name in ("epoch", "world_size", "segments"):
            if getattr(one, name) != getattr(first, name):
                raise _refuse(f"the states come from different runs: one has {name}={shown(getattr(first, name))}, "
                              f"another {shown(getattr(one, name))}")
    if len(saved) > 1:
        ranks = sorted(one.rank for one in saved)
        if ranks != list(range(first.world_size)):
            raise _refuse(f"the states are of ranks {shown(ranks)}, not of all {first.world_size}")


def resume_point(saved: Sequence[Position], order: np.ndarray, world_size: int, batch_size: int,
                 drop_last: bool, strided: bool = False) -> ResumePoint:
    """Where a loader on ``world_size`` ranks continues from ``saved``,
    every position checked against the epoch's ``order``: a rank can have
    handed out at most the batches of its share.

    On the saved world size, one state resumes at its own batch; otherwise
    (or from every rank's state) the saved run becomes one more segment and
    the rest of the epoch is shared anew (:func:`orders.remaining`, the
    shares ``strided`` or not).
    """
    first = saved[0]
    rest = order
    for k, (ranks, done) in enumerate(first.segments):
        _check_positions(f"segments[{k}][1][{{rank}}]", done, rest.size, batch_size, drop_last)
        rest = orders.remaining(rest, [(ranks, list(done))], batch_size, drop_last, strided)
    positions = [first.batch] * first.world_size  # in lockstep, any rank's state serves for all
    for one in saved:
        positions[one.rank] = one.batch
    _check_positions("batch", positions, rest.size, batch_size, drop_last)
    segments = [(ranks, list(done)) for ranks, done in first.segments]
    if first.world_size == world_size and len(saved) == 1:
        return ResumePoint(first.epoch, first.batch, segments)
    return ResumePoint(first.epoch, 0, segments + [(first.world_size, positions)])


def _check_positions(name: str, positions: Sequence[int], samples: int, batch_size: int, drop_last: bool) -> None:
    """Refuse a run whose ranks handed out more batches than their shares of
    the ``samples`` samples left hold; ``name`` names a rank's position
    (``{rank}`` filled in)."""
    most = orders.batch_count(orders.share_size(samples, len(positions), drop_last), batch_size, drop_last)
    rank = int(np.argmax(positions))
    if positions[rank] > most:
        raise _refuse(f"the state has {name.format(rank=rank)}={positions[rank]} (rank {rank} of {len(positions)}), "
                      f"but a rank's share of the {samples} samples left in the epoch is {most} batches: it must "
                      f"lie in [0, {most}]")
