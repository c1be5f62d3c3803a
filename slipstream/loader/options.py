"""The loader's option groups: frozen, validated descriptions of how a
:class:`slipstream.Loader` orders, shards and holds its data.

Each group says what it is and checks its own fields when it is made, so a
wrong value fails where it is written, not when the loader starts.  The
groups describe; the loader and its parts (orders, the stager, the
epoch iterator) are what run.  Object-store options are the fourth group,
:class:`slipstream.Remote`.

Example::

    loader = slipstream.Loader(
        "train.slip", 256, pipelines,
        order=slipstream.Order("quasi_random", seed=1, window_pages=16),
        sharding=slipstream.Sharding(drop_last=True),      # ranks from torch.distributed
        memory=slipstream.Memory(os_cache=False, pool_pages=64),
    )
"""

from __future__ import annotations

import dataclasses
import operator
from typing import Any

from slipstream.errors import ArgumentError
from slipstream.loader.orders import DEFAULT_SELECTED_ROUND, DEFAULT_WINDOW_PAGES, MAX_REPEATS, ORDERS


def _integer(value: Any, name: str, least: int, most: int | None = None) -> int:
    """``value`` as an int of at least ``least`` and at most ``most`` (numpy
    integers included; no bools, no floats)."""
    try:
        number = operator.index(value)
    except TypeError:
        number = None
    kind = {0: "a non-negative integer", 1: "a positive integer"}.get(least, "an integer")
    if number is None or isinstance(value, bool) or (number < least and most is None):
        raise ArgumentError(f"{name} must be {kind}, got {value!r}")
    if most is not None and not least <= number <= most:
        raise ArgumentError(f"{name} must be an integer in [{least}, {most}], got {value!r}")
    return int(number)


def _flag(value: Any, name: str, none: bool = False) -> None:
    if not (isinstance(value, bool) or (none and value is None)):
        raise ArgumentError(f"{name} must be True{', False or None' if none else ' or False'}, got {value!r}")


@dataclasses.dataclass(frozen=True)
class Order:
    """Which samples an epoch visits in what sequence, and the seed of its
    randomness (see :mod:`slipstream.loader.orders`).

    An epoch's order depends only on these fields, the epoch and the
    dataset's layout, so every run, rank and resume agrees on it.

    Attributes:
        kind: ``"random"`` (a permutation per epoch), ``"sequential"``
            (dataset order) or ``"quasi_random"`` (pages shuffled, then the
            samples within windows of ``window_pages`` pages: bounded
            memory when the file is not mapped).
        seed: seed of the order and of every random operation of the
            pipelines: an integer in ``[-2**63, 2**64 - 1]`` (torch's
            ``manual_seed`` range), a negative one standing for its 64-bit
            two's complement (``-1`` is ``2**64 - 1``).
        window_pages: pages shuffled together by ``"quasi_random"``.
        repeats: repeated augmentation: each sample ``repeats`` times in a
            row of the epoch order, each copy with its own random draws in
            every random operation (copy 0 draws what the sample draws
            without repeats).  1 (default): no repeats, the epoch as
            described above.
        selected_round: with ``repeats`` > 1, the rounding of the epoch's
            length (see below); 0 or a positive integer.

    Repeated augmentation (``repeats`` > 1) follows torchvision's
    ``RASampler`` (``references/classification/sampler.py``) and timm's
    ``RepeatAugSampler`` (``timm/data/distributed_sampler.py``):

    - the epoch order (of the kind above) is taken with each sample
      ``repeats`` times in a row, and rank ``r`` of ``W`` takes every
      ``W``-th place from place ``r``, so the copies of a sample go to
      ``repeats`` different ranks when ``W >= repeats`` (with fewer ranks,
      a rank gets ``repeats / W`` of them);
    - each rank hands out ``(N // selected_round * selected_round) // W``
      samples per epoch for a dataset (or ``indices``) of ``N`` samples
      (torchvision's rule, and timm's default, with ``selected_round=256``);
      with ``selected_round=0``, ``ceil(N / W)`` (timm's
      ``selected_round=0``).  An epoch so has as many steps as one without
      repeats, and holds about ``N / repeats`` distinct samples, each
      ``repeats`` times (the one at the cut fewer); the next epoch's order
      is another permutation.  Where the repeated order is shorter than
      the epoch (tiny datasets), it is padded by repeating its first places,
      as the samplers do;
    - ``drop_last`` (:class:`Sharding`) drops each rank's last, incomplete
      batch; every rank has the same number of samples anyway;
    - exact and elastic resume hold as without repeats: a resumed epoch
      hands out the places, with the same draws, that the stopped one had
      not handed out (shared by striding among the new ranks).

    ``repeats=1`` is exactly the loader without repeats: the same epochs,
    shares, batches and random draws.
    """

    kind: str = "random"
    seed: int = 0
    window_pages: int = DEFAULT_WINDOW_PAGES
    repeats: int = 1
    selected_round: int = DEFAULT_SELECTED_ROUND

    def __post_init__(self) -> None:
        if self.kind not in ORDERS:
            raise ArgumentError(f"order must be one of {ORDERS}, got {self.kind!r}{_order_spelling(self.kind)}")
        object.__setattr__(self, "seed", _integer(self.seed, "seed", -2**63, 2**64 - 1))
        object.__setattr__(self, "window_pages", _integer(self.window_pages, "window_pages", 1))
        object.__setattr__(self, "repeats", _integer(self.repeats, "repeats", 1))
        if self.repeats > MAX_REPEATS:
            raise ArgumentError(f"repeats must be at most {MAX_REPEATS}, got {self.repeats}")
        object.__setattr__(self, "selected_round", _integer(self.selected_round, "selected_round", 0))
        if self.repeats == 1 and self.selected_round != DEFAULT_SELECTED_ROUND:
            raise ArgumentError(f"selected_round={self.selected_round} rounds the epoch of repeated augmentation, "
                                f"but repeats=1: pass repeats > 1, or leave selected_round out")


def _order_spelling(kind: Any) -> str:
    """Slipstream's spelling of an order written as FFCV writes it
    (``OrderOption.RANDOM``, as the enum or as text, or ``"RANDOM"``), to
    append to the message refusing it; "" for anything else."""
    name = str(kind).rsplit(".", 1)[-1].lower()
    if name not in ORDERS:
        return ""
    return (f": slipstream spells FFCV's OrderOption.{name.upper()} order={name!r} "
            f"(or slipstream.Order({name!r}, seed=...))")


@dataclasses.dataclass(frozen=True)
class Sharding:
    """How an epoch's order is shared among ranks and cut into batches.

    Every rank computes the same epoch order and takes its contiguous
    block, so that a resumed job can share what is left among another
    number of ranks (see :meth:`slipstream.Loader.load_state_dict`).

    Attributes:
        distributed: shard among ranks.  ``None`` (default): when ``rank``
            or ``world_size`` is given, or when ``torch.distributed`` is
            initialised with more than one process.  ``False``: every rank
            loads everything.
        rank, world_size: this process's rank and the number of ranks
            (default: ``torch.distributed``'s; one given without the other
            needs it initialised).
        drop_last: drop the last, incomplete batch, and the samples that do
            not divide evenly among the ranks (by default they are padded by
            repeating the first samples of the order, as torch's
            ``DistributedSampler`` does).  With repeated augmentation
            (:class:`Order`'s ``repeats``) every rank has as many samples
            anyway, and ``drop_last`` drops the last, incomplete batch only.
    """

    distributed: bool | None = None
    rank: int | None = None
    world_size: int | None = None
    drop_last: bool = False

    def __post_init__(self) -> None:
        _flag(self.distributed, "distributed", none=True)
        _flag(self.drop_last, "drop_last")
        if self.rank is not None:
            object.__setattr__(self, "rank", _integer(self.rank, "rank", 0))
        if self.world_size is not None:
            object.__setattr__(self, "world_size", _integer(self.world_size, "world_size", 1))
        if self.rank is not None and self.world_size is not None and self.rank >= self.world_size:
            raise ArgumentError(f"rank {self.rank} is not in [0, {self.world_size})")

    def resolve(self) -> Sharding:
        """This sharding with ``distributed``, ``rank`` and ``world_size``
        filled in (from ``torch.distributed`` where not given): what a
        loader made now runs."""
        import torch.distributed as dist

        initialized = dist.is_available() and dist.is_initialized()
        distributed = self.distributed
        if distributed is None:
            given = self.rank is not None or self.world_size is not None
            distributed = given or (initialized and dist.get_world_size() > 1)
        if not distributed:
            return dataclasses.replace(self, distributed=False, rank=0, world_size=1)
        rank, world_size = self.rank, self.world_size
        if rank is None or world_size is None:
            if not initialized:
                if self.distributed is None:  # one of the two given: the other is torch.distributed's
                    name, value, other = ("rank", rank, "world_size") if rank is not None else \
                        ("world_size", world_size, "rank")
                    raise ArgumentError(f"{name}={value} without {other} needs torch.distributed initialised: "
                                        f"pass both rank and world_size, or neither")
                raise ArgumentError("distributed=True needs torch.distributed initialised, or rank and world_size")
            rank = dist.get_rank() if rank is None else rank
            world_size = dist.get_world_size() if world_size is None else world_size
        return dataclasses.replace(self, distributed=True, rank=rank, world_size=world_size)


@dataclasses.dataclass(frozen=True)
class Memory:
    """How the bytes of upcoming batches are held (see
    :mod:`slipstream.loader.staging` and the stores of
    :mod:`slipstream.format.pagestore`).

    Attributes:
        os_cache: map the file, or a local dataset's shards, and let the
            operating system cache their pages (default: one copy for every
            process of the machine); ``False`` reads the pages the batches
            need into a bounded pool.  A remote dataset's pages are mapped
            from the node-local page cache either way.
        pool_pages: pages of the ``os_cache=False`` pool, or the most pages
            of a remote dataset kept mapped between epochs (default: 256 MiB
            worth).
        batches_ahead: batches prepared while the training step runs; a
            batch's memory is used again ``batches_ahead + 2`` batches
            later, and filled as soon as the batch after it is taken.
    """

    os_cache: bool = True
    pool_pages: int | None = None
    batches_ahead: int = 3

    def __post_init__(self) -> None:
        _flag(self.os_cache, "os_cache")
        if self.pool_pages is not None:
            object.__setattr__(self, "pool_pages", _integer(self.pool_pages, "pool_pages", 1))
        try:
            ahead = operator.index(self.batches_ahead)
        except TypeError:
            raise ArgumentError(f"batches_ahead must be an integer, got {self.batches_ahead!r}") from None
        if ahead < 1:
            raise ArgumentError(f"batches_ahead must be at least 1, got {self.batches_ahead}")
        object.__setattr__(self, "batches_ahead", int(ahead))


@dataclasses.dataclass(frozen=True)
class LoaderOptions:
    """The option groups a loader runs with (``Loader.options``): those
    it was given, with the sharding resolved (``rank`` and ``world_size``
    filled in).  Another loader takes them as they are: ``Loader(path,
    256, pipelines, **vars(loader.options))``.

    Attributes:
        order: the :class:`Order`.
        sharding: the resolved :class:`Sharding`.
        memory: the :class:`Memory`.
        remote: the :class:`slipstream.Remote`, or None.
    """

    order: Order
    sharding: Sharding
    memory: Memory
    remote: Any = None


GROUPS: dict[str, type] = {"order": Order, "sharding": Sharding, "memory": Memory}
"""Loader keyword -> the option group it takes."""

MOVED: dict[str, tuple[str, str]] = {
    "seed": ("order", "seed"), "window_pages": ("order", "window_pages"),
    "drop_last": ("sharding", "drop_last"), "distributed": ("sharding", "distributed"),
    "rank": ("sharding", "rank"), "world_size": ("sharding", "world_size"),
    "os_cache": ("memory", "os_cache"), "pool_pages": ("memory", "pool_pages"),
    "batches_ahead": ("memory", "batches_ahead"),
}
"""Keywords of earlier releases, now fields of an option group -> (the
group keyword, the field)."""


FOREIGN: dict[str, str] = {
    "num_workers": "slipstream runs its pipelines in threads, not worker processes: pass num_threads= (default: "
                   "Numba's thread count)",
    "shuffle": 'pass order="random" (shuffle=True) or order="sequential" (shuffle=False)',
    "prefetch_factor": "pass memory=slipstream.Memory(batches_ahead=...)",
    "fname": "pass the dataset as the first argument, path_or_reader",
}
"""Keywords of FFCV's Loader and torch's DataLoader that the loader does not
take -> what to pass instead."""


def unknown_keyword(name: str) -> str:
    """The message refusing the Loader keyword ``name``, with slipstream's
    spelling when ``name`` is another loader's or an earlier release's."""
    message = f"Loader() got an unexpected keyword argument {name!r}"
    if name in MOVED:
        group, field = MOVED[name]
        return f"{message}: pass {group}=slipstream.{GROUPS[group].__name__}({field}=...)"
    return f"{message}: {FOREIGN[name]}" if name in FOREIGN else message


__all__ = ["LoaderOptions", "Memory", "Order", "Sharding"]
