"""Traversal orders: which samples a rank visits in an epoch, in what order.

An order depends only on (seed, epoch, rank, world size) and the dataset's
layout, never on timing or thread count, so every run, every rank and every
resume agree on it.

Distributed sharding: the whole epoch order is made once, identically on
every rank; it is padded (by repeating its first samples) or cut to a
multiple of the world size, then rank ``r`` takes the ``r``-th contiguous
block.  Blocks are disjoint, of equal length, together cover the dataset,
and (for the random orders) change with the epoch.  Contiguous blocks keep
the page locality of ``"quasi_random"`` within each rank.

Repeated augmentation (``repeats`` > 1, :func:`repeated`): each place of
the epoch order is taken ``repeats`` times in a row, each copy with its own
draw identity (:func:`draw_identities`), so that its random operations draw
anew; the ranks take the places by striding (rank ``r`` takes places ``r``,
``r + W``, ``r + 2W``...), so the copies of a sample go to ``repeats``
different ranks when there are at least that many, and the epoch is cut to
the length rule of torchvision's ``RASampler`` and timm's
``RepeatAugSampler`` (:func:`selected`).

Elastic resume: because every rank computes the same epoch order, what a
stopped job handed out is known from each rank's position alone, and the
samples not yet handed out can be shared among any number of ranks
(:func:`remaining`).
"""

from __future__ import annotations

import numpy as np

from slipstream.compiler.jit import cached_njit
from slipstream.errors import ArgumentError

ORDERS = ("sequential", "random", "quasi_random")

DEFAULT_WINDOW_PAGES = 8
"""Pages shuffled together by ``"quasi_random"``."""

DEFAULT_SELECTED_ROUND = 256
"""The multiple the dataset size is rounded down to by the length rule of
repeated augmentation (torchvision's ``RASampler`` and timm's
``RepeatAugSampler`` default)."""

COPY_SHIFT = 48
"""The low bits of a draw identity hold the sample's dataset index (a
dataset has fewer than 2**48 samples: its per-sample records alone would
fill 256 TiB); the copy number sits above them."""

MAX_REPEATS = 1 << 15
"""The most copies of a sample an epoch may hold: copy numbers fit the 15
bits of an int64 above :data:`COPY_SHIFT`."""

_INDEX_MASK = (1 << COPY_SHIFT) - 1


def _generator(seed: int, epoch: int, stream: int) -> np.random.Generator:
    return np.random.Generator(np.random.PCG64([seed % 2**64, epoch % 2**63, stream, 0x51495053]))


def epoch_order(order: str, indices: np.ndarray, pages: np.ndarray | None, seed: int, epoch: int,
                window_pages: int = DEFAULT_WINDOW_PAGES) -> np.ndarray:
    """Every sample of ``indices`` once, in the order's sequence for ``epoch``.

    Args:
        order: ``"sequential"``, ``"random"`` or ``"quasi_random"``.
        indices: the dataset indices to visit (sorted or not).
        pages: the first data page of each sample of the dataset (needed by
            ``"quasi_random"``).
        seed, epoch: what the randomness depends on.
        window_pages: pages shuffled together by ``"quasi_random"``.

    ``"quasi_random"`` shuffles the order of the pages, then cuts that page
    sequence into windows of ``window_pages`` pages and shuffles the samples
    within each window.  Consecutive samples therefore come from at most
    ``window_pages`` pages (``2 * window_pages`` across a window boundary),
    which bounds the pages a batch needs when the file is not mapped.
    """
    if order == "sequential":
        return np.sort(indices)
    rng = _generator(seed, epoch, 0)
    if order == "random":
        return rng.permutation(indices)
    if order != "quasi_random":
        raise ValueError(f"order must be one of {ORDERS}, got {order!r}")
    if pages is None:
        raise ValueError("quasi_random order needs the page of every sample")
    sample_pages = pages[indices]
    unique_pages = np.unique(sample_pages)
    page_rank = np.empty(int(unique_pages.max()) + 1 if unique_pages.size else 0, np.int64)
    page_rank[rng.permutation(unique_pages)] = np.arange(unique_pages.size)
    window = page_rank[sample_pages] // max(1, window_pages)
    jitter = rng.random(indices.size)
    return indices[np.lexsort((jitter, window))]


STREAM_BUFFER = 16384
"""The most samples a streamed random order (:func:`stream_order`) mixes
at once."""

STREAM_FIRST = 256
"""Samples a streamed random order has read before it gives its first."""


def stream_order(indices: np.ndarray, size: int, seed: int, epoch: int, buffer: int = STREAM_BUFFER,
                 first: int = STREAM_FIRST) -> np.ndarray:
    """Every sample of ``indices`` once, shuffled as a stream of ``size``
    samples read in index order allows: through a buffer that holds
    ``first`` samples before it gives one, then takes in two samples for
    each it gives until it holds ``buffer``, then one for one; each sample
    given is drawn uniformly from those held.  So the ``k``-th sample given
    (of all ``size``) is one of the first ``min(first + 2k, buffer + k)``
    of the stream: the order can be followed while the stream is read,
    ``buffer`` samples ahead at most.  ``indices`` (a subset, possibly with
    repeats) is put in that order.  Deterministic in ``(size, seed, epoch)``, like
    the other orders.
    """
    given = _stream_given(_generator(seed, epoch, 1).random(size), max(1, min(first, buffer)), buffer)
    place = np.empty(size, np.int64)
    place[given] = np.arange(size)
    return indices[np.argsort(place[indices], kind="stable")]


@cached_njit(entry=True)  # the orders call it from Python
def _stream_given(uniform: np.ndarray, first: int, buffer: int) -> np.ndarray:
    """The samples :func:`stream_order` gives, in order: the ``k``-th drawn
    by ``uniform[k]`` (in [0, 1)) from those held (compiled: an epoch of
    millions of samples is planned when it starts)."""
    size = uniform.size
    given = np.empty(size, np.int64)
    held = np.empty(size, np.int64)
    count = 0  # samples held
    entered = 0
    for k in range(size):
        target = min(size, first + 2 * k, buffer + k)
        while entered < target:
            held[count] = entered
            count += 1
            entered += 1
        slot = int(uniform[k] * count)
        given[k] = held[slot]
        count -= 1
        held[slot] = held[count]
    return given


class StreamShuffle:
    """:func:`stream_order` followed while the stream is read, for a stream
    whose length is not known until it ends: the samples it gives, in
    order, are those of ``stream_order(indices, size, seed, epoch)`` once
    the stream turns out to hold ``size`` samples (the same draws, one per
    sample given).

    Feed it the stream's indices with :meth:`enter` while :meth:`wants`
    asks for more, :meth:`end` it when the stream ends, and take samples
    with :meth:`give`.
    """

    def __init__(self, seed: int, epoch: int, buffer: int = STREAM_BUFFER, first: int = STREAM_FIRST) -> None:
        self._rng = _generator(seed, epoch, 1)
        # Drawn a block at a time: the generator gives the same numbers in blocks as one by one.
        self._uniform: list[float] = []
        self._first, self._buffer = max(1, min(first, buffer)), buffer
        self._held: list[int] = []
        self.entered = 0
        """Samples of the stream entered so far."""
        self.given = 0
        """Samples given so far."""
        self.ended = False
        """Whether the stream has ended (every sample entered)."""

    def wants(self) -> bool:
        """Whether the next sample given must wait for another of the stream."""
        return not self.ended and self.entered < min(self._first + 2 * self.given, self._buffer + self.given)

    def enter(self, index: int) -> None:
        """The stream's next sample."""
        self._held.append(index)
        self.entered += 1

    def end(self) -> None:
        """The stream has no more samples."""
        self.ended = True

    def has_more(self) -> bool:
        """Whether samples are left to give (once the stream has ended: held ones)."""
        return bool(self._held) or not self.ended

    def give(self) -> int:
        """The next sample of the order (once :meth:`wants` is False)."""
        assert not self.wants() and self._held, "give() before the samples it draws from have entered"
        held = self._held
        if not self._uniform:
            self._uniform = self._rng.random(4096).tolist()[::-1]
        slot = int(self._uniform.pop() * len(held))
        chosen = held[slot]
        held[slot] = held[-1]
        held.pop()
        self.given += 1
        return chosen


def selected(samples: int, world_size: int, selected_round: int) -> int:
    """Samples each of ``world_size`` ranks hands out in an epoch of repeated
    augmentation over ``samples`` samples: the dataset size rounded down to
    a multiple of ``selected_round``, divided among the ranks and rounded
    down (torchvision's ``references/classification/sampler.py``
    ``RASampler`` with 256, timm's ``timm/data/distributed_sampler.py``
    ``RepeatAugSampler`` with its ``selected_round``); with
    ``selected_round`` 0, the dataset size divided among the ranks and
    rounded up (timm's ``selected_round=0``).  Either way a rank hands out
    about as many samples as without repeats: an epoch holds about
    ``samples / repeats`` distinct samples, each ``repeats`` times."""
    if selected_round:
        return samples // selected_round * selected_round // world_size
    return -(-samples // world_size)


def draw_identities(order: np.ndarray, repeats: int) -> np.ndarray:
    """Each place of ``order`` ``repeats`` times in a row, as draw
    identities: copy ``c`` of dataset index ``i`` is ``i + (c << 48)``.
    The random operations draw from a sample's identity, so copy 0 draws
    what the sample draws without repeats and every other copy draws anew.
    A place of ``order`` that is already copy ``k`` of its sample (see
    :func:`numbered_copies`) gives copies ``k * repeats`` to
    ``k * repeats + repeats - 1``."""
    copies = np.arange(repeats, dtype=np.int64)
    places = order.astype(np.int64)
    numbers = (places >> COPY_SHIFT)[:, None] * repeats + copies
    return ((places & _INDEX_MASK)[:, None] + (numbers << COPY_SHIFT)).reshape(-1)


def numbered_copies(order: np.ndarray) -> np.ndarray:
    """``order``, a sequence of dataset indices in which an index may occur
    several times, as draw identities: its ``k``-th occurrence is copy
    ``k`` (``i + (k << 48)``), so that each occurrence draws its own random
    numbers (several video windows, oversampling); an index that occurs
    once stays itself.

    Raises:
        ArgumentError: an index occurs more than :data:`MAX_REPEATS` times.
    """
    places = order.astype(np.int64)
    by_index = np.argsort(places, kind="stable")
    ordered = places[by_index]
    position = np.arange(ordered.size, dtype=np.int64)
    starts = np.ones(ordered.size, bool)
    starts[1:] = ordered[1:] != ordered[:-1]
    occurrence = position - np.maximum.accumulate(np.where(starts, position, 0))
    if occurrence.size and occurrence.max() >= MAX_REPEATS:
        raise ArgumentError(f"dataset index {int(ordered[occurrence.argmax()])} occurs more than {MAX_REPEATS} times "
                            f"in the indices")
    numbered = places.copy()
    numbered[by_index] += occurrence << COPY_SHIFT
    return numbered


def repeated(order: np.ndarray, repeats: int, world_size: int, selected_round: int) -> np.ndarray:
    """The places an epoch of ``world_size`` ranks hands out with
    ``repeats`` copies of each sample: ``order`` itself for 1; else
    :func:`draw_identities`, cut (or, for tiny datasets, padded by repeating
    its first places) to :func:`selected` places per rank."""
    if repeats == 1:
        return order
    length = selected(order.size, world_size, selected_round) * world_size
    needed = -(-length // repeats)  # the places of ``order`` the epoch reaches (all of them when padded)
    return np.resize(draw_identities(order[:needed], repeats), length)


def sample_of(draws: np.ndarray) -> np.ndarray:
    """The dataset indices of draw identities."""
    return draws & _INDEX_MASK


def share_size(samples: int, world_size: int, drop_last: bool) -> int:
    """Samples in each rank's block when ``world_size`` ranks share an epoch
    order of ``samples`` (cut to equal blocks with ``drop_last``, else
    padded to them)."""
    return samples // world_size if drop_last else -(-samples // world_size)


def batch_count(samples: int, batch_size: int, drop_last: bool) -> int:
    """Batches of ``batch_size`` that ``samples`` samples make (the last,
    shorter one kept unless ``drop_last``)."""
    return samples // batch_size if drop_last else -(-samples // batch_size)


def shard(order: np.ndarray, rank: int, world_size: int, drop_last: bool, strided: bool = False) -> np.ndarray:
    """Rank ``rank``'s share of an epoch order among ``world_size`` equal
    shares: its contiguous block, or with ``strided`` every
    ``world_size``-th place from place ``rank`` (repeated augmentation)."""
    if world_size == 1:
        return order
    n = order.size
    per_rank = share_size(n, world_size, drop_last)
    total = per_rank * world_size
    if total > n:  # pad with the first samples of the order, as torch's DistributedSampler does
        order = np.concatenate([order, np.resize(order, total - n)])
    if strided:
        return order[rank:total:world_size]
    return order[rank * per_rank:(rank + 1) * per_rank]


def batches(samples: np.ndarray, batch_size: int, drop_last: bool) -> list[np.ndarray]:
    """The epoch's batches: consecutive slices of ``batch_size`` samples; the
    last, shorter one is kept unless ``drop_last``."""
    return [samples[k * batch_size:(k + 1) * batch_size] for k in range(batch_count(samples.size, batch_size,
                                                                                     drop_last))]


def delivered(samples: int, world_size: int, positions: list[int], batch_size: int, drop_last: bool,
              strided: bool = False) -> np.ndarray:
    """Which of the ``samples`` places of an epoch order ``world_size`` ranks
    have handed out after rank ``r`` gave ``positions[r]`` batches of its
    share (:func:`shard`): a mask over the places.  A place handed out only
    as padding (a repeat of the order's first places) counts as handed out.
    The work is linear in the samples and the ranks, whatever the positions."""
    per_rank = share_size(samples, world_size, drop_last)
    given = np.minimum(np.asarray(positions, np.int64), batch_count(per_rank, batch_size, drop_last)) * batch_size
    # Place p of the padded order is place p % samples of the order; it is position p % per_rank of rank
    # p // per_rank's block, or with striding position p // world_size of rank p % world_size.
    handed_by_rank = np.arange(per_rank) < given[:, None]
    handed = np.flatnonzero((handed_by_rank.T if strided else handed_by_rank).reshape(-1))
    mask = np.zeros(samples, bool)
    if samples:
        mask[handed % samples] = True
    return mask


def remaining(order: np.ndarray, segments: list[tuple[int, list[int]]], batch_size: int,
              drop_last: bool, strided: bool = False) -> np.ndarray:
    """What is left of an epoch order after the segments run so far.

    Each segment is ``(world_size, positions)``: the epoch ran on that many
    ranks, rank ``r`` handing out ``positions[r]`` batches of its block of
    what was left, until the job stopped.  The samples not handed out stay,
    in their order; a sample handed out only as padding counts as handed
    out.  The next segment shards the rest among its own ranks.  The
    shares are those of :func:`shard` (``strided`` or not).
    """
    rest = order
    for world_size, positions in segments:
        if len(positions) != world_size:
            raise ValueError(f"a segment on {world_size} ranks needs {world_size} positions, got {len(positions)}")
        rest = rest[~delivered(rest.size, world_size, positions, batch_size, drop_last, strided)]
    return rest
