"""A loader's first epoch over a source whose dataset file does not exist
yet: training starts at once, decoding straight from the source, while the
file is written.

:class:`slipstream.Loader` given a source (an image folder, a Hugging Face
dataset, a LitData dataset...) looks for its file in the cache of
:func:`slipstream.cached`.  When it is missing, and the source can be read
in any order, the loader runs its epochs over an
:class:`~slipstream.format.arriving.ArrivingFile` instead: before each batch
runs, the source's samples of the batch are read and encoded by the fields
(exactly as :func:`slipstream.write` encodes them, JPEG checks included:
read in one thread, encoded by a pool of threads) working ahead, in the order the epoch asks for them,
and laid out in the file; the compiled pipelines then decode them from the
file's pages, as they decode any dataset.  So the first epoch's batches are
those a loader over the finished file gives, in the same order.  After the
epoch's samples, the ones it does not visit (a subset of indices, a last
incomplete batch dropped) are encoded too; the file is then complete, and
renamed into the cache.  The next epoch reads the file.

A stream (tar shards: read front to back, each sample once) that says how
many samples it holds makes its samples arrive in its own order, which is
their index order: a batch waits for every sample of the stream up to the
last it needs, and the epoch's ``"random"`` order is the bounded shuffle of
:func:`slipstream.loader.orders.stream_order`, which never needs a sample
far ahead of those it has given.  On several ranks, a stream that every
rank reads alike (``SampleStream.repeatable``) is read whole by each rank,
which keeps the samples of its own batches (the ranks share the
order place by place, so that each reads about as far as the others); a
sample it passed by and needs later (to complete the file) makes it read
the stream again.

While the file is written this process holds the cache's lock for it: other
processes asking for the same file wait for it (as with ``ss.cached``).  A
process that stops before the end leaves no dataset file, only a temporary
file that the next writer removes; the next run starts over.

When the file cannot be written (a full disk, a quota, a file size limit),
training goes on from the source: the file is given up (a
:class:`~slipstream.CacheWarning` says so), the lock let go, and every
epoch from then on reads the source as the first does, each batch's samples
held in memory until the batch is done, encoding running a bounded amount
ahead (:meth:`~slipstream.format.arriving.ArrivingFile.keep_in_memory`).  Not for
a stream (its samples cannot be read again) nor on several ranks: there the
error stands.

With a URL as the cache folder, the finished file is uploaded there
(:class:`~slipstream.format.shared_copy.SharedCopy`), where other machines
find it.

With several ranks of ``torch.distributed``, each rank makes the samples of
its own batches arrive in a file of its own, and the file is assembled once
from every rank's part at the start of the next epoch (see
:mod:`slipstream.loader.first_epoch_ranks`).
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
import warnings
from collections.abc import Generator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from slipstream.convert import share
from slipstream.errors import ArgumentError, CacheWarning, FieldValueError, FormatError
from slipstream.format.arriving import ArrivalStager, ArrivingFile
from slipstream.format.writer import SampleStream, encode_values


class FirstEpoch:
    """The file of a cache entry, written as a loader's epochs ask for its
    samples (see the module docstring).

    Args:
        entry: where the file goes and what it holds
            (:class:`slipstream.convert.CacheEntry`), its source indexable,
            or a stream that gives its length (``length_hint()``).
        lock: the held cache lock of the entry, released once the file is
            complete or given up.
        ranks: ``(rank, world_size)`` of the ``torch.distributed`` group
            whose ranks share the epoch (each runs a first epoch of its
            own); None: this process alone.
        on_error: the loader's: with ``"raise"``, a sample that cannot be
            read or encoded stops the epoch (``FieldValueError`` naming
            it); with ``"skip"`` or ``"replace"`` it arrives without values
            and the file records why (``Reader.unreadable``), so that every
            epoch skips or replaces it.
        workers: threads encoding samples.

    Attributes:
        file: the file being written (its tables are the loader's reader).
        stager: what the loader's epochs use in place of a page stager.
    """

    def __init__(self, entry: Any, lock: contextlib.AbstractContextManager[Any],
                 ranks: tuple[int, int] | None = None, on_error: str = "raise", workers: int | None = None) -> None:
        self.entry = entry
        self._lock = lock
        self.ranks, self.on_error = ranks, on_error
        self.samples = entry.samples
        self.fields = dict(entry.fields)
        self.streamed = isinstance(self.samples, SampleStream)
        """Whether the source is a stream (read in order, each sample once)."""
        count = self.samples.length_hint() if self.streamed else len(self.samples)
        if count is None:
            raise ArgumentError(f"{self.samples!r} does not say how many samples it holds: a first epoch cannot "
                                f"stream from it (convert it first, with slipstream.cached)")
        self._stream = _Stream(self.samples, count) if self.streamed else None
        # On several ranks, the samples a stream's reader keeps as it passes them: those of the rank's batches.
        self._wanted: set[int] | None = None
        self.file = ArrivingFile(entry.path, self.fields, count, entry.page_size, entry.user_metadata)
        self.stager = ArrivalStager(self.file, self._bring, self.give_up_file)
        self._pool = ThreadPoolExecutor(workers or os.cpu_count() or 1, thread_name_prefix="slipstream-encode")
        self._run: _Run | None = None
        self.path: Path | None = None
        """The finished file, once complete."""

    @property
    def reader(self) -> Any:
        """The file's tables as they grow."""
        return self.file.reader

    @property
    def in_memory(self) -> bool:
        """Whether the file was given up: every epoch reads the source."""
        return not self.file.kept

    def _bring(self, batches: list[np.ndarray]) -> list[Future[int]]:
        """Encode the samples of ``batches`` in order, in a thread of its
        own, then (alone, with a file) every sample not yet arrived; one
        future per batch."""
        self._stop_run()
        if self._stream is not None and self.ranks is not None:
            self._wanted = set(np.concatenate(batches).tolist()) if batches else set()
        run = self._run = _Run(self, batches, rest=self.ranks is None and self.file.kept)
        run.thread.start()
        return run.ready

    def give_up_file(self, error: OSError) -> bool:
        """After ``error`` writing the file: give the file up and go on
        from the source, when the disk is the cause (no space, a quota, a
        file size limit), the source is not a stream and the process is
        alone; then True (every sample arrives anew, in memory), else False."""
        if error.errno not in DISK_FULL or self.in_memory or self._stream is not None or self.ranks is not None:
            return False
        self._stop_run()
        self._run = None
        self.file.keep_in_memory()
        self._release()
        warnings.warn(f"{error}: training goes on from the source, which every epoch reads again; no dataset "
                      f"file is kept (free space, or pass cache_dir= a folder with room for it, and it is written "
                      f"on the next run)", CacheWarning, stacklevel=2)
        return True

    def restart(self) -> None:
        """In memory: the next epoch reads every sample from the source again."""
        self._stop_run()
        self._run = None
        self.file.restart()

    def finish(self) -> Path:
        """Make the file complete (encoding what has not arrived), put it in
        the cache and let go of the lock: the dataset's path.  With several
        ranks, every rank calls it at once (it exchanges what each has)."""
        if self.path is None:
            if self.ranks is not None:
                from slipstream.loader.first_epoch_ranks import assemble

                self.path = assemble(self, *self.ranks)
            else:
                if self._run is None or self._run.error is not None:
                    self._bring([])  # a run that stopped early, or none yet: the rest arrives now
                self.wait()
                self.path = self.file.finish()
                share(self.entry)  # with a URL as the cache folder: other machines find it there
            self._release()
        return self.path

    def wait(self) -> None:
        """Wait until the running epoch's samples have arrived.

        Raises:
            the error that stopped them.
        """
        if self._run is not None:
            self._run.thread.join()
            if self._run.error is not None:
                raise self._run.error

    def arrive(self, indices: Sequence[int], stop: threading.Event | None = None) -> None:
        """Make the samples ``indices`` arrive now: read them from the source
        in this thread (not every source can be read from several at once),
        encode them in parallel, and lay them out in order, a chunk at a
        time; between chunks, give up once ``stop`` is set.  From a stream,
        every sample not arrived up to the last of ``indices`` (on several
        ranks, those of ``indices`` and of the rank's batches), reading the
        stream again from its start when one of ``indices`` was passed by.

        Raises:
            FieldValueError: a sample cannot be read or encoded and
                ``on_error`` is ``"raise"``.
            FormatError: a stream holds fewer or more samples than it said.
        """
        indices = list(indices)
        if self._stream is not None:  # a stream's samples arrive in its order: all of them up to the last asked for
            stream = self._stream
            if stream.broken is not None:
                raise stream.broken
            arrived = self.file.arrived
            if any(index < stream.position and not arrived[index] for index in indices):
                stream.close()  # passed by (another rank's, then): read the stream again
                stream = self._stream = _Stream(self.samples, stream.count)
            keep = None if self._wanted is None else self._wanted.union(indices)
            passing = range(stream.position, max(indices, default=-1) + 1)
            try:
                self._arrive([i for i in passing if not arrived[i] and (keep is None or i in keep)], stop)
            except _Stopped:
                raise
            except BaseException as exc:  # samples read from the stream were lost: it cannot go on
                stream.broken = exc
                raise
        else:
            self._arrive(indices, stop)

    def _arrive(self, indices: list[int], stop: threading.Event | None) -> None:
        """:meth:`arrive` of exactly ``indices``."""
        for start in range(0, len(indices), 64):
            if stop is not None and stop.is_set():
                raise _Stopped()
            chunk = indices[start:start + 64]
            read = [self.read(index) for index in chunk]
            for index, outcome in zip(chunk, self._pool.map(self.encode, chunk, read)):
                if not isinstance(outcome, str):
                    self.file.add(index, outcome)
                elif self.on_error == "raise":
                    raise FieldValueError(f"{self.entry.path} was not written: {outcome}")
                else:  # the loader skips or replaces it, in this epoch and every later one
                    self.file.fail(index, outcome)

    def close(self) -> None:
        """Stop encoding; the file in progress is given up (its temporary
        file removed), and the lock let go."""
        self._stop_run()
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._stream is not None:
            self._stream.close()
        self.file.discard()
        self._release()

    def _stop_run(self) -> None:
        if self._run is not None:
            self._run.stop.set()
            self._run.thread.join()

    def _release(self) -> None:
        lock, self._lock = self._lock, contextlib.nullcontext()
        lock.__exit__(None, None, None)

    def read(self, index: int) -> tuple[str, Any]:
        """Sample ``index``'s description and values as the source gives
        them (or why it cannot); a stream's next sample, which must be
        ``index``.

        Raises:
            FormatError: a stream gives fewer or more samples than it said.
        """
        if self._stream is not None:
            return self._stream.next(index)
        description = f"sample {index} ({self.samples.describe(index)})"
        try:
            return description, self.samples[index]
        except Exception as exc:
            return description, exc

    def encode(self, index: int, read: tuple[str, Any]) -> list[Any] | str:
        """The values of sample ``index`` (with their description, from
        :meth:`read`) encoded by the fields, or why they cannot be, naming
        the sample and the field (as :func:`slipstream.write` does)."""
        return encode_values(self.fields, *read)


class _Run:
    """One thread making samples arrive: a batch's samples, encoded by the
    pool in parallel, are laid out in their order; then the next batch."""

    def __init__(self, first: FirstEpoch, batches: list[np.ndarray], rest: bool) -> None:
        self.first, self.batches, self.rest = first, batches, rest
        self.ready: list[Future[int]] = [Future() for _ in batches]
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name="slipstream-first-epoch", daemon=True)

    def _main(self) -> None:
        file = self.first.file
        anew = not file.kept  # in memory, each batch brings its own samples (those before it are let go)
        try:
            for batch, ready in zip(self.batches, self.ready):
                file.wait_for_room(self.stop)  # in memory, a few batches ahead of those done at most
                # dict.fromkeys: once each, in order (repeated augmentation repeats samples within a batch).
                self.first.arrive([i for i in dict.fromkeys(batch.tolist()) if anew or not file.arrived[i]],
                                  self.stop)
                ready.set_result(file.arrivals)
            if self.rest:
                self.first.arrive(np.flatnonzero(~file.arrived).tolist(), self.stop)
        except BaseException as exc:
            self.error = exc
            for ready in self.ready:
                if not ready.done():
                    ready.set_exception(exc)


class _Stream:
    """A stream source read front to back, once, checked against the
    number of samples it said it holds."""

    def __init__(self, samples: SampleStream, count: int) -> None:
        self.samples, self.count = samples, count
        self.position = 0
        """The index of the next sample."""
        self.broken: BaseException | None = None
        """Why the stream cannot go on (samples read from it were lost)."""
        self._items = iter(samples)

    def next(self, index: int) -> tuple[str, Any]:
        """Sample ``index`` as ``(description, values or why not)``, passing
        by the samples before it (``index`` is the next or further on).

        Raises:
            FormatError: the stream ends before ``count`` samples, or goes on after.
        """
        assert index >= self.position, (index, self.position)
        while True:
            item = next(self._items, None)
            if item is None:
                raise FormatError(f"{self.samples!r} ended after {self.position} samples, but said it holds "
                                  f"{self.count}: did the source change while it was read?")
            self.position += 1
            if self.position == self.count and next(self._items, None) is not None:
                raise FormatError(f"{self.samples!r} holds more than the {self.count} samples it said it holds: "
                                  f"did the source change while it was read?")
            if self.position > index:
                name, values = item
                return f"sample {index} ({name})", values

    def close(self) -> None:
        """Let go of what the stream holds open (a shard's file)."""
        if isinstance(self._items, Generator):  # a plain iterator holds nothing to let go
            self._items.close()


DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
"""Errors writing the file after which training goes on from the source."""


class _Stopped(Exception):
    """A run stopped for another to take over."""


__all__ = ["DISK_FULL", "FirstEpoch"]
