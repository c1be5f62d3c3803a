"""Where a loader's epochs come from: the one strategy a loader holds for
its dataset, which answers every question on which the kinds of dataset
differ.

- :class:`FileEpochs`: a finished dataset file, its pages fetched by a
  page stager (:class:`slipstream.loader.staging.Stager`).
- :class:`ArrivingEpochs`: a first epoch over a source whose file does not
  exist yet (:mod:`slipstream.loader.first_epoch`): each batch runs once its
  samples, read from the source, have arrived in the file being written.
- :class:`FormingEpochs`: the same over a stream that does not say how many
  samples it holds: epoch 0's batches are formed as the stream is read, so
  the epoch has no length until the stream ends, and its states resume
  only that epoch, on one rank.
- :class:`RefusedEpochs`: no more epochs: completing the first epoch's file
  failed, or its epoch 0 did; it says why at every later epoch.

The loader picks its source once, as it opens the dataset, and replaces it
only with the one a source hands over: a first epoch's by the finished
file's before a later epoch (:meth:`EpochSource.for_epoch`), by the file
written first when the first epoch cannot serve the loader
(:meth:`EpochSource.written_now`), or by a refusal.
"""

from __future__ import annotations

import functools
import os
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from slipstream.convert import build
from slipstream.errors import CacheWarning, SlipstreamError
from slipstream.fields.decoders import IncompleteTables
from slipstream.format import Reader
from slipstream.format import layout as L
from slipstream.loader import staging
from slipstream.loader.arrival_staging import ArrivalStager
from slipstream.loader.epoch_zero import OVER_FILE, RANDOM, STREAMED, EpochZero, stream_name
from slipstream.loader.first_epoch import DISK_FULL, FirstEpoch, FormingStager
from slipstream.loader.options import LoaderOptions, Memory
from slipstream.loader.stager import Stager

DEFAULT_POOL_BYTES = 256 << 20
"""Page pool size of ``os_cache=False`` when ``pool_pages`` is not given."""

Batches = Sequence[np.ndarray] | Iterable[np.ndarray]
"""An epoch's batches of dataset indices (formed batches have no length until their stream ends)."""


@runtime_checkable
class EpochSource(Protocol):
    """What a loader asks of the source of its epochs (see the module docstring)."""

    reader: Any
    """The dataset's tables, as the decoders and the orders read them."""

    stager: Stager
    """What brings each batch's bytes in place before it runs."""

    first: FirstEpoch | None
    """The first epoch that writes the dataset file as the epochs ask for
    its samples; None when none does."""

    counted: bool
    """Whether the dataset's length is known to the epochs: False for epoch
    0 over a stream that does not say it, whose states resume that epoch
    only (as the stream is read again) and any other state needs the file
    finished first (:meth:`finished`)."""

    def columns(self) -> int | None:
        """How many samples the decoders' per-sample arrays cover: None for
        the dataset's length; a stream of unknown length, every index its
        samples can arrive at."""

    def serves(self, subset: bool, repeats: int) -> bool:
        """Whether the epochs can visit a ``subset`` of the indices and
        repeat each sample ``repeats`` times; else the loader reads the file
        written first (:meth:`written_now`)."""

    def yields_to_file(self, error: BaseException) -> bool:
        """Whether ``error``, raised as the loader binds its pipelines to
        :attr:`reader`, makes it read the file written first instead; else
        the error stands."""

    def written_now(self, verbose: bool) -> EpochSource:
        """The source over the dataset file, written now (a progress bar
        with ``verbose``) in place of the first epoch, which is closed."""

    def epoch_zero(self, kind: str) -> EpochZero:
        """How epoch 0 is ordered for the loader's order ``kind``."""

    def sample_pages(self) -> np.ndarray | None:
        """The first data page of each sample in the file, which
        ``"quasi_random"`` orders by; None when there is no file yet."""

    def held_file(self) -> os.PathLike | str | None:
        """The dataset file the epochs read, which the loader holds (a
        shared lock) so that no prune or newer copy of it in the cache
        removes it; None when there is none to hold (a first epoch's file
        in progress, a file of the loader's own out of the cache, a
        dataset that is not one local file)."""

    def for_epoch(self, epoch: int) -> EpochSource:
        """Get ready to run ``epoch``: the source that runs it, this one or
        the one it hands over to (the finished file's, once the first
        epoch's file is complete).

        Raises:
            whatever stopped the file from being completed (see
            :meth:`failed_to_finish`).
        """

    def finished(self) -> EpochSource:
        """The source over the finished file: the first epoch's file is
        completed now (the samples it did not visit included).  This
        source itself when the file is complete already, or when it was
        given up for memory (a full disk) and the epochs go on from the
        source."""

    def failed_to_finish(self, error: BaseException) -> EpochSource | None:
        """What stands in for this source after ``error`` stopped
        :meth:`for_epoch` or :meth:`finished`: a source refusing every
        epoch (this one is then abandoned and the loader closed), or None
        when the error only interrupts (the completion goes on)."""

    def failed_epoch(self, error: BaseException, epoch: int) -> EpochSource | None:
        """What stands in for this source after ``error`` ended ``epoch``: a
        source refusing every epoch, once the loader has closed (letting go
        of the first epoch's file and lock for another loader), or None
        when the loader goes on as it is."""

    def batches(self, start: int, ordered: Callable[[], Sequence[np.ndarray]]) -> \
            tuple[Batches, Callable[[], None] | None]:
        """The running epoch's batches from batch ``start`` on, and what
        stops the loader thread's wait for one without waiting (None:
        nothing waits); ``ordered()`` gives them as the loader's order cuts
        them."""

    def identity(self, zero: EpochZero, epoch: int, indices: Callable[[], np.ndarray]) -> dict[str, Any]:
        """The ``"dataset"``, ``"indices"`` and ``"samples"`` a state of
        ``epoch`` names (:data:`slipstream.loader.resume.IDENTITY`), epoch
        0 being ordered as ``zero`` says and the loader visiting
        ``indices()``."""

    def close(self) -> None:
        """The loader closes: let go of the stager and of the dataset; a
        first epoch's file is completed when every sample has arrived,
        else given up.  Closing again does nothing more."""

    def abandon(self) -> None:
        """Let go of everything without completing anything: the loader
        could not be set up, or the file could not be completed."""


class _NothingToWrite:
    """The answers of a source with no file left to write: the file is
    done, or no epoch will run again."""

    def columns(self) -> int | None:
        """None: the dataset's length."""
        return None

    def serves(self, subset: bool, repeats: int) -> bool:
        """Always: the file's length is known (or nothing is left to serve)."""
        return True

    def yields_to_file(self, error: BaseException) -> bool:
        """Never: no file is left to write."""
        return False

    def written_now(self, verbose: bool) -> EpochSource:
        """This source: no file is left to write."""
        return self

    def epoch_zero(self, kind: str) -> EpochZero:
        """The loader's order over the file."""
        return OVER_FILE


class FileEpochs(_NothingToWrite):
    """Every epoch over a finished dataset file (or any dataset a
    :class:`Reader` reads), its pages staged from the store ``memory``
    chooses.

    Args:
        reader: the dataset.
        memory: the loader's memory options (how pages are held).
        owner: the finished first epoch whose file, out of the cache, this
            is: closing removes it.
    """

    first = None
    counted = True

    def __init__(self, reader: Any, memory: Memory, owner: FirstEpoch | None = None) -> None:
        self.reader = reader
        pages = memory.pool_pages or max(1, DEFAULT_POOL_BYTES // reader.page_size)
        self.stager: Stager = staging.Stager(reader.page_store(memory.os_cache, pages), reader)
        self._owner = owner
        self._taken: dict[str, str] | None = None

    def sample_pages(self) -> np.ndarray:
        """The first data page each sample touches (0 for samples without data)."""
        reader = self.reader
        table = reader.allocations
        pages = np.zeros(len(reader), np.int64)
        if table.size:
            starts = table[np.unique(table["sample"], return_index=True)[1]]
            pages[starts["sample"].astype(np.int64)] = (starts["offset"].astype(np.int64) - reader.data_offset) \
                // reader.page_size
        return pages

    def held_file(self) -> os.PathLike | str | None:
        """The file, unless it is the loader's own or not a single file."""
        if self._owner is None and isinstance(self.reader, Reader) and os.path.isfile(self.reader.path):
            return self.reader.path
        return None

    def for_epoch(self, epoch: int) -> EpochSource:
        """This source: every epoch reads the file."""
        return self

    def finished(self) -> EpochSource:
        """This source: the file is finished."""
        return self

    def failed_to_finish(self, error: BaseException) -> EpochSource | None:
        """None: nothing is completed here."""
        return None

    def failed_epoch(self, error: BaseException, epoch: int) -> EpochSource | None:
        """None: the file stays, and the next epoch reads it."""
        return None

    def batches(self, start: int, ordered: Callable[[], Sequence[np.ndarray]]) -> \
            tuple[Batches, Callable[[], None] | None]:
        """The order's batches; nothing waits but for pages."""
        return ordered(), None

    def identity(self, zero: EpochZero, epoch: int, indices: Callable[[], np.ndarray]) -> dict[str, Any]:
        """The file's records stand for the dataset."""
        if self._taken is None:  # the records' CRC, once
            self._taken = {"dataset": dataset_identity(self.reader), "indices": indices_identity(indices())}
        return _identity(self._taken, self.reader, zero, epoch, indices)

    def close(self) -> None:
        """Let the stager's pages go; a file of the loader's own is removed."""
        self.stager.close()
        owner, self._owner = self._owner, None
        if owner is not None:
            owner.close()

    def abandon(self) -> None:
        """As :meth:`close`: nothing is left to complete."""
        self.close()


class _FirstEpochSource:
    """What the epochs over a first epoch's file (:class:`ArrivingEpochs`,
    :class:`FormingEpochs`) share: the file is written as they ask for
    samples, and handed over to :class:`FileEpochs` once complete."""

    counted = True

    def __init__(self, first: FirstEpoch, memory: Memory, stager: Stager) -> None:
        self.first = first
        self.reader = first.reader
        self.stager = stager
        self._memory = memory

    def columns(self) -> int | None:
        """None: the dataset's length."""
        return None

    def serves(self, subset: bool, repeats: int) -> bool:
        """Always: the source says its length."""
        return True

    def yields_to_file(self, error: BaseException) -> bool:
        """Whether a pipeline needs facts of the whole dataset, which the file only has once complete."""
        return isinstance(error, IncompleteTables)

    def written_now(self, verbose: bool) -> EpochSource:
        """Give the first epoch up for the file, written now from the source and read from the start."""
        first = self.first
        first.close()
        return FileEpochs(Reader(build(first.entry, verbose=verbose)), self._memory)

    def epoch_zero(self, kind: str) -> EpochZero:
        """A stream's order over a stream; random for ``"quasi_random"``
        (no pages yet); else the loader's own."""
        if self.first.streamed:
            return STREAMED
        return RANDOM if kind == "quasi_random" else OVER_FILE

    def sample_pages(self) -> np.ndarray | None:
        """None: the file has no pages to order by yet."""
        return None

    def held_file(self) -> os.PathLike | str | None:
        """None: the file is not complete yet."""
        return None

    def for_epoch(self, epoch: int) -> EpochSource:
        """From the source again when the file was given up; the finished
        file for any epoch after the first, or once the file's completion
        has started (epoch 0 again after a Ctrl-C at the start of epoch 1
        reads the completed file too)."""
        first = self.first
        if first.in_memory:
            first.restart()
            return self
        if epoch > 0 or first.completing:
            return self.finished()
        return self

    def finished(self) -> EpochSource:
        """Complete the file (the samples the epoch did not visit included)
        and hand over to it; or, when the disk cannot hold it, go on from
        the source (see :mod:`slipstream.loader.first_epoch`)."""
        first = self.first
        try:
            path = first.finish()
        except OSError as exc:
            if not first.give_up_file(exc):
                raise
            first.restart()
            return self
        if not first.private:  # a file of its own, out of the cache, is removed when the loader closes
            first.close()
        self.stager.close()
        return FileEpochs(Reader(path), self._memory, owner=first if first.private else None)

    def failed_to_finish(self, error: BaseException) -> EpochSource | None:
        """None for a Ctrl-C on one process: the file goes on being
        completed in its thread, and the next epoch waits for it again.
        Otherwise nothing is left to read."""
        if isinstance(error, KeyboardInterrupt) and self.first.ranks is None:
            return None
        return RefusedEpochs(self, f"completing {self.reader.path} failed ({type(error).__name__}: {error})", error)

    def failed_epoch(self, error: BaseException, epoch: int) -> EpochSource | None:
        """An error that ends epoch 0 on one process: the loader lets go of
        the first epoch (the file completed when every sample has arrived,
        else given up) and of its lock, so that a new loader over the
        source (with ``on_error="skip"``, say) or ``ss.cached`` can write
        or read the file in this process; no more epochs.  With several
        ranks the error stands as it is: the others wait for this one."""
        if self.first.ranks is not None or epoch != 0:
            return None
        return RefusedEpochs(self, f"its epoch 0 failed ({type(error).__name__}: {error}), so it let go of "
                                   f"{self.reader.path} (kept when complete, else given up) for another Loader or "
                                   f"ss.cached: create a new Loader (on_error=\"skip\" leaves out samples that cannot "
                                   f"be read or decoded)", error)

    def close(self) -> None:
        """Complete the file when every sample has arrived (ranks complete
        it together, at the next epoch; a file given up is not), then close
        the first epoch; a full disk only warns that no file is kept."""
        first = self.first
        if first.closed:
            return
        self.stager.close()
        try:
            if first.file.complete and first.ranks is None and not first.in_memory:
                first.finish()
        except OSError as exc:
            if exc.errno not in DISK_FULL:
                raise
            # Training is over: the file is not kept, as when the disk fills during an epoch.
            warnings.warn(f"{exc}: no dataset file is kept (free space, or pass cache_dir= a folder with room "
                          f"for it, and it is written on the next run)", CacheWarning, stacklevel=3)
        finally:
            first.close()

    def abandon(self) -> None:
        """Close the first epoch: its lock, stream, threads and temporary file."""
        self.first.close()


class ArrivingEpochs(_FirstEpochSource):
    """A first epoch over a source that says how many samples it holds:
    each batch runs once its samples have arrived
    (:class:`~slipstream.loader.arrival_staging.ArrivalStager`).

    Args:
        first: the first epoch writing the file.
        memory: the loader's memory options, for the finished file.
    """

    stager: ArrivalStager

    def __init__(self, first: FirstEpoch, memory: Memory) -> None:
        super().__init__(first, memory, ArrivalStager(first.file, first.bring, first.give_up_file))
        self._taken: dict[str, str] | None = None

    def batches(self, start: int, ordered: Callable[[], Sequence[np.ndarray]]) -> \
            tuple[Batches, Callable[[], None] | None]:
        """The order's batches; a batch may wait for a source read that stalls, which stopping ends."""
        return ordered(), self.stager.stop_waiting

    def identity(self, zero: EpochZero, epoch: int, indices: Callable[[], np.ndarray]) -> dict[str, Any]:
        """The name of the file being written stands for its records, not
        all known yet."""
        if self._taken is None:
            self._taken = {"dataset": zero.name(self.reader), "indices": indices_identity(indices())}
        return _identity(self._taken, self.reader, zero, epoch, indices)


class FormingEpochs(_FirstEpochSource):
    """A first epoch over a stream that does not say how many samples it
    holds (on one rank): epoch 0's batches are formed as the stream is read
    (:class:`~slipstream.loader.first_epoch.FormedBatches`), in its order or
    its bounded shuffle.

    Args:
        first: the first epoch writing the file.
        options: the loader's options (its order, seed, ``drop_last`` and
            memory).
        batch_size: the loader's.
    """

    counted = False

    def __init__(self, first: FirstEpoch, options: LoaderOptions, batch_size: int) -> None:
        super().__init__(first, options.memory, FormingStager(first.file))
        self._shuffled = options.order.kind != "sequential"
        self._seed, self._drop_last, self._batch_size = options.order.seed, options.sharding.drop_last, batch_size

    def columns(self) -> int | None:
        """Every index the stream's samples can arrive at."""
        return self.reader.capacity

    def serves(self, subset: bool, repeats: int) -> bool:
        """Neither a subset (it cannot be checked against a length not
        known) nor repeats (they cannot be cut to it)."""
        return not subset and repeats == 1

    def yields_to_file(self, error: BaseException) -> bool:
        """A pipeline needs facts of the whole dataset, or the per-sample
        arrays reserved for a stream of unknown length do not fit (a host
        that commits memory strictly)."""
        return isinstance(error, (IncompleteTables, MemoryError))

    def batches(self, start: int, ordered: Callable[[], Sequence[np.ndarray]]) -> \
            tuple[Batches, Callable[[], None] | None]:
        """Epoch 0's batches as the stream forms them (the ``start`` first
        formed and left out), and what stops forming them."""
        formed = self.first.form_epoch(self._shuffled, self._seed, self._batch_size, self._drop_last, skip=start)
        return formed, functools.partial(formed.stop, wait=False)

    def identity(self, zero: EpochZero, epoch: int, indices: Callable[[], np.ndarray]) -> dict[str, Any]:
        """The file's name, the stream's length unknown (whether it has
        ended yet or not, so that states do not depend on timing)."""
        return {"dataset": stream_name(self.reader), "indices": "all", "samples": -1}


class RefusedEpochs(_NothingToWrite):
    """In place of a source that can run no more epochs: every epoch raises
    why; a state still names the dataset as ``before`` did.

    Args:
        before: the source it replaces, closed or abandoned.
        why: what happened, for the message.
        cause: the error that did.
    """

    first = None

    def __init__(self, before: EpochSource, why: str, cause: BaseException) -> None:
        self._before, self._why, self._cause = before, why, cause
        self.reader = before.reader
        self.stager = before.stager
        self.counted = before.counted

    def sample_pages(self) -> np.ndarray | None:
        """None: no file."""
        return None

    def held_file(self) -> os.PathLike | str | None:
        """None: nothing is read."""
        return None

    def for_epoch(self, epoch: int) -> EpochSource:
        """Raise why no epoch runs."""
        raise self._refusal() from self._cause

    def finished(self) -> EpochSource:
        """Raise why no epoch runs."""
        raise self._refusal() from self._cause

    def failed_to_finish(self, error: BaseException) -> EpochSource | None:
        """None: the refusal stands as it is."""
        return None

    def failed_epoch(self, error: BaseException, epoch: int) -> EpochSource | None:
        """None: no epoch runs."""
        return None

    def batches(self, start: int, ordered: Callable[[], Sequence[np.ndarray]]) -> \
            tuple[Batches, Callable[[], None] | None]:
        """Raise why no epoch runs."""
        raise self._refusal() from self._cause

    def identity(self, zero: EpochZero, epoch: int, indices: Callable[[], np.ndarray]) -> dict[str, Any]:
        """As the source it replaces."""
        return self._before.identity(zero, epoch, indices)

    def close(self) -> None:
        """Nothing: the source it replaces was let go of."""

    def abandon(self) -> None:
        """Nothing: the source it replaces was let go of."""

    def _refusal(self) -> SlipstreamError:
        """Why no epoch runs (raised from the error that caused it)."""
        return SlipstreamError(f"this Loader cannot run another epoch: {self._why}")


def first_epoch_source(first: FirstEpoch, options: LoaderOptions, batch_size: int) -> EpochSource:
    """The epochs of a loader over ``first``: formed as the stream is read
    when it does not say its length, else as the samples arrive."""
    if first.uncounted:
        return FormingEpochs(first, options, batch_size)
    return ArrivingEpochs(first, options.memory)


def dataset_identity(reader: Any) -> str:
    """What tells a dataset from another, cheaply: its sample count and the
    CRC-32 of its per-sample records.  The records hold each sample's field
    values and the offset and size of its stored bytes, so another dataset
    (or this one written again, whose pages may hold its samples in another
    layout and so give ``"quasi_random"`` another order) differs in them,
    while the CRC takes milliseconds for millions of samples, already in
    memory for remote datasets too, where hashing the data pages would mean
    reading the whole dataset."""
    records = np.ascontiguousarray(reader.metadata).view(np.uint8)
    return f"{len(reader)} samples, records CRC-32 {L.crc32(records):08x}"


def indices_identity(indices: np.ndarray) -> str:
    """The loader's indices, told apart by their count, range and CRC-32
    (in their order, which a random order depends on)."""
    if not indices.size:
        return "no indices"
    crc = L.crc32(np.ascontiguousarray(indices, "<i8").view(np.uint8))
    return f"{indices.size} indices in [{indices.min()}, {indices.max()}], CRC-32 {crc:08x}"


def _identity(taken: dict[str, str], reader: Any, zero: EpochZero, epoch: int,
              indices: Callable[[], np.ndarray]) -> dict[str, Any]:
    """A state's names of a dataset whose length is known, from the dataset
    and indices ``taken`` names: in epoch 0, ``zero`` names the dataset."""
    dataset = zero.in_state(reader, taken["dataset"]) if epoch == 0 else taken["dataset"]
    return {"dataset": dataset, "indices": taken["indices"], "samples": int(indices().size)}


__all__ = ["ArrivingEpochs", "DEFAULT_POOL_BYTES", "EpochSource", "FileEpochs", "FormingEpochs", "RefusedEpochs",
           "dataset_identity", "first_epoch_source", "indices_identity"]
