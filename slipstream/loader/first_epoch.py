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

A stream (tar shards: read front to back, each sample once) makes its
samples arrive in its own order, which is their index order: a batch waits
for every sample of the stream up to the last it needs, and the epoch's
``"random"`` order is the bounded shuffle of
:func:`slipstream.loader.orders.stream_order`, which never needs a sample
far ahead of those it has given.  A stream that does not say how many
samples it holds has an epoch 0 whose batches are formed as it is read
(:class:`FormedBatches`: its length is learnt at the stream's end), on one
rank only.  On several ranks, a stream that says its length and that every
rank reads alike (``SampleStream.repeatable``) is read whole by each rank,
which keeps the samples of its own batches (the ranks share the
order place by place, so that each reads about as far as the others); a
sample it passed by and needs later (to complete the file) makes it read
the stream again.

While the file is written this process holds the cache's lock for it: other
processes asking for the same file wait for it (as with ``ss.cached``).  A
process that stops before the end leaves no dataset file, only a temporary
file that the next writer removes; the next run starts over.  The file is
completed in a thread of its own: an interrupted wait for it (Ctrl-C at the
start of epoch 1) leaves it going on, and the next epoch waits for it again
(epoch 0 run again included: it reads the file).

With ``on_error`` ``"skip"`` or ``"replace"``, a sample that cannot be
encoded (a damaged image) is recorded in the file, as
:func:`slipstream.write` records it, and skipped or replaced in every epoch.
One that could not be *read* (an ``OSError``: a file missing for a while, a
connection reset) is read once more when the file is completed (from a
source read in any order; on several ranks, by the rank that owns it); one
that still cannot be keeps the file out of the cache: the loader reads its
later epochs from a file of its own, removed when it closes, and the next
run reads the source again.

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
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import numpy as np

from slipstream import cache_use
from slipstream.convert import share
from slipstream.errors import ArgumentError, CacheWarning, FieldValueError, FormatError
from slipstream.format.arriving import ArrivingFile, unknown_length
from slipstream.format.writer import Losses, SampleStream, Unencodable, encode_values
from slipstream.loader.orders import StreamShuffle
from slipstream.loader.stager import Staged

CHUNK = 64
"""Samples read, then encoded in parallel, at a time."""


class FirstEpoch:
    """The file of a cache entry, written as a loader's epochs ask for its
    samples (see the module docstring).

    Args:
        entry: where the file goes and what it holds
            (:class:`slipstream.convert.CacheEntry`), its source indexable
            or a stream (one that does not give its length,
            ``length_hint()``, on one rank only).
        lock: the held cache lock of the entry, released once the file is
            complete or given up.
        ranks: ``(rank, world_size)`` of the ``torch.distributed`` group
            whose ranks share the epoch (each runs a first epoch of its
            own); None: this process alone.
        on_error: the loader's: with ``"raise"``, a sample that cannot be
            read or encoded stops the epoch (``FieldValueError`` naming
            it); with ``"skip"`` or ``"replace"`` it arrives without values
            and the file records why (``Reader.unreadable``), so that every
            epoch skips or replaces it (one that could not be read is read
            again first: see the module docstring).
        workers: threads encoding samples.

    Attributes:
        file: the file being written (its tables are the loader's reader).
    """

    def __init__(self, entry: Any, lock: contextlib.AbstractContextManager[Any],
                 ranks: tuple[int, int] | None = None, on_error: str = "raise", workers: int | None = None) -> None:
        self.entry = entry
        self._lock = lock
        self.ranks, self.on_error = ranks, on_error
        self.samples = entry.samples
        self.fields = dict(entry.fields)
        self.losses = Losses(list(self.fields))  # what the fields lose, told once when the file is complete
        self.streamed = isinstance(self.samples, SampleStream)
        """Whether the source is a stream (read in order, each sample once)."""
        count = self.samples.length_hint() if self.streamed else len(self.samples)
        self.uncounted = count is None
        """Whether the source is a stream that does not say its length: its
        epoch 0 is formed as the stream is read (:meth:`form_epoch`)."""
        if self.uncounted and ranks is not None:
            raise ArgumentError(f"{self.samples!r} does not say how many samples it holds: a first epoch on several "
                                f"ranks cannot stream from it (convert it first, with slipstream.cached)")
        self._stream = _Stream(self.samples, count) if self.streamed else None
        # On several ranks, the samples a stream's reader keeps as it passes them: those of the rank's batches.
        self._wanted: set[int] | None = None
        self.file = ArrivingFile(entry.path, self.fields, count, entry.page_size, entry.user_metadata)
        self._forming: FormedBatches | None = None
        self._pool = ThreadPoolExecutor(workers or os.cpu_count() or 1, thread_name_prefix="slipstream-encode")
        self._run: _Run | None = None
        self._runs = threading.Lock()  # a run started, or the first epoch closed: one at a time
        self._laying = threading.Lock()  # samples laid out, or the first epoch closed: one at a time
        self._closed = False
        self._completion: _Completion | None = None
        self._unread: dict[int, str] = {}  # samples whose latest read failed with an OSError, and why
        self.path: Path | None = None
        """The finished file, once complete."""
        self.private = False
        """Whether the finished file is this first epoch's own, out of the
        cache (a sample could not be read): :meth:`close` removes it."""
        self.removals: list[Callable[[], None]] = []
        """What removes the copies of a file of its own that this process
        holds beside :attr:`file` (on several ranks), run by :meth:`close`."""

    @property
    def reader(self) -> Any:
        """The file's tables as they grow."""
        return self.file.reader

    @property
    def samples_read(self) -> int:
        """Samples read from a stream so far (its samples ``0`` to this, less one, have arrived)."""
        assert self._stream is not None
        return self._stream.position

    @property
    def completing(self) -> bool:
        """Whether the file's completion has started (on one process): its
        epochs are over, whatever epoch the loader runs next."""
        return self._completion is not None

    @property
    def in_memory(self) -> bool:
        """Whether the file was given up: every epoch reads the source."""
        return not self.file.kept

    @property
    def closed(self) -> bool:
        """Whether :meth:`close` was called: nothing arrives any more."""
        return self._closed

    def bring(self, batches: list[np.ndarray]) -> list[Future[int]]:
        """Encode the samples of ``batches`` in order, in a thread of its
        own, then (alone, with a file) every sample not yet arrived; one
        future per batch, done when the batch's samples have arrived (with
        the file's :attr:`~ArrivingFile.arrivals` then), or raising why
        they could not."""
        with self._runs:
            if self._closed:
                raise _Stopped()
            # The run before may still wait in a source read (a stalled download): the new one waits for it only
            # before reading, so that batches whose samples have arrived go on at once.
            before = self._stop_run(wait=False)
            if self._stream is not None and self.ranks is not None:
                self._wanted = set(np.concatenate(batches).tolist()) if batches else set()
            run = self._run = _Run(self, batches, rest=self.ranks is None and self.file.kept, after=before)
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
        self._unread.clear()
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
        the cache and let go of the lock: the dataset's path (see
        :attr:`private` for a file kept out of the cache).  With several
        ranks, every rank calls it at once (it exchanges what each has).

        On one process the file is completed in a thread of its own: a wait
        interrupted (``KeyboardInterrupt``) leaves it going on, and calling
        this again waits for it again.

        Raises:
            the error that stopped the completion, on every call.
        """
        if self.path is None:
            if self.ranks is not None:
                from slipstream.loader.first_epoch_ranks import assemble

                self.path, self._unread = assemble(self, *self.ranks)
                self.private = bool(self._unread)
            else:
                with self._runs:
                    if self._completion is None:
                        self._completion = _Completion(self._complete)
                    self._completion.start()
                self.path, self.private = self._completion.result()
            if self.private:
                warnings.warn(self._kept_out(), CacheWarning, stacklevel=2)
            else:  # in the cache now: its note, and the older copy it supersedes goes
                cache_use.used(self.entry)
            self.losses.report(self.path)
            self._release()
        return self.path

    def _complete(self) -> tuple[Path, bool]:
        """(In the completion's thread.)  Make the rest arrive, read again
        the samples whose reading failed, write the file: its path, and
        whether it is kept out of the cache."""
        if self._closed:
            raise _Stopped()
        if self.uncounted:
            self._stop_run()
            while self.file.count is None:  # an epoch left early: the rest of the stream arrives now
                if self._closed:
                    raise _Stopped()
                self.arrive_next()
        elif self._run is None or self._run.error is not None:
            self.bring([])  # a run that stopped early, or none yet: the rest arrives now
        self.wait()
        self.read_again(sorted(self.file.pending))
        if self._unread:
            return self.file.finish(keep=False), True
        path = self.file.finish()
        share(self.entry)  # with a URL as the cache folder: other machines find it there
        return path, False

    def _kept_out(self) -> str:
        """Why the file is kept out of the cache."""
        (index, why), *rest = sorted(self._unread.items())
        more = f" (and {len(rest)} more)" if rest else ""
        return (f"{why}{more}: read again, it still could not be read, so {self.entry.path.name} is not kept in the "
                f"cache (the loader reads the rest of its epochs from a file of its own, removed when it closes); "
                f"the next run reads the source again")

    def unread(self, indices: Sequence[int]) -> dict[int, str]:
        """Of the samples ``indices``, those whose latest read failed (an
        ``OSError``), and why."""
        return {index: self._unread[index] for index in indices if index in self._unread}

    def read_again(self, indices: Sequence[int]) -> None:
        """Read the samples ``indices`` once more (samples whose reading
        failed, :attr:`ArrivingFile.pending`): those that read now arrive
        with their values; the others, without, for good."""
        self._arrive(list(indices), None, last=True)

    def wait(self) -> None:
        """Wait until the running epoch's samples have arrived.

        Raises:
            the error that stopped them.
        """
        if self._run is not None:
            self._run.join()
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

    def _arrive(self, indices: list[int], stop: threading.Event | None, last: bool = False) -> None:
        """:meth:`arrive` of exactly ``indices`` (``last``: the samples'
        last read, see :meth:`_lay_out`).  Once ``stop`` is set, the
        samples read are laid out (a stream's would be lost) and no more
        are read; once the first epoch is closed, nothing is laid out."""
        for start in range(0, len(indices), CHUNK):
            chunk = indices[start:start + CHUNK]
            read = []
            for index in chunk:
                if stop is not None and stop.is_set():
                    break
                read.append(self.read(index))
            with self._laying:
                if self._closed:
                    raise _Stopped()
                if read:
                    self._lay_out(chunk[:len(read)], read, last)
            if len(read) < len(chunk):
                raise _Stopped()

    def arrive_next(self) -> None:
        """From a stream that does not say its length, make its next
        samples arrive (a chunk of them), or, at its end, end the file
        (:meth:`ArrivingFile.end`).

        Raises:
            FieldValueError: a sample cannot be read or encoded and
                ``on_error`` is ``"raise"``.
        """
        stream = self._stream
        assert stream is not None and self.file.count is None
        if stream.broken is not None:
            raise stream.broken
        start = stream.position
        try:
            read = [item for item in (stream.take() for _ in range(CHUNK)) if item is not None]
            self._lay_out(list(range(start, start + len(read))), read)
        except BaseException as exc:  # samples read from the stream were lost: it cannot go on
            stream.broken = exc
            raise
        if stream.ended:
            self.file.end(stream.position)

    def _lay_out(self, chunk: list[int], read: list[tuple[str, Any]], last: bool = False) -> None:
        """Encode the samples ``chunk`` (as :meth:`read` gave them) in
        parallel and lay them out in order, as ``on_error`` says for those
        that cannot be: a sample whose reading failed (an ``OSError``) is
        read again when the file is completed (see the module docstring),
        unless this is its ``last`` read, the source is a stream or the file
        is given up."""
        for index, outcome in zip(chunk, self._pool.map(self.encode, chunk, read)):
            if not isinstance(outcome, str):
                self.file.add(index, outcome)
                self._unread.pop(index, None)
            elif self.on_error == "raise":
                raise FieldValueError(f"{self.entry.path} was not written: {outcome}")
            else:  # the loader skips or replaces it, in this epoch and every later one
                io_error = isinstance(outcome, Unencodable) and outcome.io_error
                again = io_error and not last and self._stream is None and self.file.kept
                self.file.fail(index, outcome, final=not again)
                if io_error:
                    self._unread[index] = outcome
                else:
                    self._unread.pop(index, None)

    def form_epoch(self, shuffled: bool, seed: int, batch_size: int, drop_last: bool,
                   skip: int = 0) -> FormedBatches:
        """Epoch 0 over a stream that does not say its length: its batches,
        formed as the stream is read (by a thread started with the epoch:
        :meth:`FormedBatches.start`).

        Args:
            shuffled: in the bounded shuffle of
                :func:`slipstream.loader.orders.stream_order` (what it gives
                once the stream's length is known), else in the stream's order.
            seed: the order's seed.
            batch_size, drop_last: as the loader's.
            skip: batches of the epoch handed out before (a resumed state):
                formed, not given.
        """
        self._stop_run()
        self._forming = FormedBatches(self, StreamShuffle(seed, 0) if shuffled else None, batch_size, drop_last,
                                      skip)
        return self._forming

    def close(self) -> None:
        """Stop encoding; the file in progress is given up (its temporary
        file removed), and the lock let go.  A file of its own
        (:attr:`private`) is removed."""
        with self._runs:
            self._closed = True
        # A run waiting in a source read is not waited for: once the read returns it lays nothing out (_arrive)
        # and ends, so that closing waits at most for samples being laid out.
        reading = self._stop_run(wait=False)
        with self._laying:
            pass
        if self._completion is not None:
            self._completion.join()
        self._pool.shutdown(wait=True, cancel_futures=True)
        if self._stream is not None and (reading is None or not reading.alive):
            self._stream.close()  # else the run reads from it still: it is closed once the run lets go of it
        self.file.discard()
        removals, self.removals = self.removals, []
        for remove in removals:
            remove()
        self._release()

    def _stop_run(self, wait: bool = True) -> _Run | None:
        """Stop the run making samples arrive, and with ``wait`` wait until
        it has ended; the run, unless it has ended (it may still be in a
        source read, after which it stops)."""
        run = self._run
        if run is not None:
            run.stop.set()
            if wait:
                run.join()
        if self._forming is not None:  # before another reads the stream
            self._forming.stop()
        return run if run is not None and run.alive else None

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
        encoded = encode_values(self.fields, *read)
        self.losses.add(index, encoded)
        return encoded


class _Completion:
    """``complete()`` run once, in a thread, and its outcome, which any
    thread waits for.  Starting it is safe to repeat after an interruption
    anywhere (a Ctrl-C): a thread that finds it run already ends at once."""

    def __init__(self, complete: Callable[[], tuple[Path, bool]]) -> None:
        self._future: Future[tuple[Path, bool]] = Future()
        self._complete = complete
        self._claimed = threading.Lock()  # taken for good by the thread that runs it

    def start(self) -> None:
        """Run it in a thread of its own, unless a thread has claimed it."""
        if not self._claimed.locked():
            threading.Thread(target=self._main, name="slipstream-complete", daemon=True).start()

    def _main(self) -> None:
        if not self._claimed.acquire(blocking=False):
            return  # started again after an interruption: another thread runs it
        try:
            self._future.set_result(self._complete())
        except BaseException as exc:
            self._future.set_exception(exc)

    def result(self) -> tuple[Path, bool]:
        """Wait for the outcome: the file's path and whether it is kept out of the cache.

        Raises:
            the error that stopped the completion.
        """
        return self._future.result()

    def join(self) -> None:
        """Wait until it has run, if a thread has claimed it."""
        if self._claimed.locked():
            wait([self._future])


class _Run:
    """One thread making samples arrive: a batch's samples, encoded by the
    pool in parallel, are laid out in their order; then the next batch."""

    def __init__(self, first: FirstEpoch, batches: list[np.ndarray], rest: bool, after: _Run | None = None) -> None:
        self.first, self.batches, self.rest = first, batches, rest
        self.after = after
        """The stopped run before this one, which may still be in a source
        read: this one reads nothing before it has ended."""
        self.ready: list[Future[int]] = [Future() for _ in batches]
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._main, name="slipstream-first-epoch", daemon=True)

    @property
    def alive(self) -> bool:
        """Whether this run, or one before it, has not ended."""
        after = self.after  # None once joined, by another thread too
        return self.thread.is_alive() or (after is not None and after.alive)

    def join(self) -> None:
        """Wait until this run and those before it have ended."""
        self.thread.join()
        self._join_after()

    def _join_after(self) -> None:
        after = self.after
        if after is not None:
            after.join()
            self.after = None

    def _unarrived(self, indices: Iterable[int], anew: bool) -> list[int]:
        """Of ``indices``, those to read, once the run before has ended
        (it may lay out the samples it read when stopped)."""
        arrived = self.first.file.arrived
        todo = [i for i in indices if anew or not arrived[i]]
        if todo and self.after is not None:  # what arrived only grows: none to read stays none
            self._join_after()
            todo = [i for i in todo if anew or not arrived[i]]
        return todo

    def _main(self) -> None:
        file = self.first.file
        anew = not file.kept  # in memory, each batch brings its own samples (those before it are let go)
        try:
            for batch, ready in zip(self.batches, self.ready):
                file.wait_for_room(self.stop)  # in memory, a few batches ahead of those done at most
                # dict.fromkeys: once each, in order (repeated augmentation repeats samples within a batch).
                self.first.arrive(self._unarrived(dict.fromkeys(batch.tolist()), anew), self.stop)
                ready.set_result(file.arrivals)
            if self.rest:
                self._join_after()
                self.first.arrive(np.flatnonzero(~file.arrived).tolist(), self.stop)
        except BaseException as exc:
            self.error = exc
            for ready in self.ready:
                if not ready.done():
                    ready.set_exception(exc)


class _Stream:
    """A stream source read front to back, once, checked against the
    number of samples it said it holds (None: it did not say)."""

    def __init__(self, samples: SampleStream, count: int | None) -> None:
        self.samples, self.count = samples, count
        self.position = 0
        """The index of the next sample."""
        self.ended = False
        """Whether the stream has ended (:meth:`take` read past its last sample)."""
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

    def take(self) -> tuple[str, Any] | None:
        """The next sample as ``(description, values or why not)``, or None
        once the stream has ended."""
        item = next(self._items, None) if not self.ended else None
        if item is None:
            self.ended = True
            return None
        name, values = item
        self.position += 1
        return f"sample {self.position - 1} ({name})", values

    def close(self) -> None:
        """Let go of what the stream holds open (a shard's file)."""
        if isinstance(self._items, Generator):  # a plain iterator holds nothing to let go
            self._items.close()


class FormedBatches:
    """The batches of epoch 0 over a stream that does not say its length,
    formed by a thread as it reads the stream: it makes the stream's
    samples arrive a chunk at a time, follows the epoch's order (the
    stream's own, or its bounded shuffle, :class:`StreamShuffle`, which
    gives a sample only once those it draws from have arrived) and hands
    each batch on once it is whole.  Iterating waits for each batch and
    ends when the stream has (after its last, shorter batch, unless
    ``drop_last``); it has no length until then.  Every sample of the
    stream arrives, those of a batch ``drop_last`` drops too: the file is
    complete when the epoch ends.
    """

    def __init__(self, first: FirstEpoch, shuffle: StreamShuffle | None, batch_size: int, drop_last: bool,
                 skip: int) -> None:
        self._first, self._shuffle = first, shuffle
        self.batch_size, self.drop_last, self.skip = batch_size, drop_last, skip
        self._formed: list[np.ndarray] = []
        self._ended = False
        self._error: BaseException | None = None
        self._changed = threading.Condition()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._main, name="slipstream-first-epoch", daemon=True)

    def __len__(self) -> int:
        """The batches iterating gives (those ``skip`` leaves out not counted).

        Raises:
            TypeError: the stream has not ended yet.
        """
        if not self._ended:
            raise TypeError(unknown_length(self._first.file.path, "batches in epoch 0"))
        return len(self._formed)

    def start(self) -> None:
        """Start reading the stream and forming batches."""
        self._thread.start()

    def stop(self, wait: bool = True) -> None:
        """Stop forming batches (iterating ends, raising why), and with
        ``wait`` wait for the thread (which stops once the chunk of samples
        it is reading has arrived)."""
        self._stop.set()
        if wait and self._thread.is_alive():
            self._thread.join()

    def __getitem__(self, batch: int) -> np.ndarray:
        """Batch ``batch`` (of those iterating gave)."""
        return self._formed[batch]

    def __iter__(self) -> Iterator[np.ndarray]:
        batch = 0
        while True:
            with self._changed:
                while batch >= len(self._formed) and not self._ended and self._error is None \
                        and not self._stop.is_set():
                    self._changed.wait(0.1)
                if batch < len(self._formed):
                    formed = self._formed[batch]
                elif self._error is not None:
                    raise self._error
                elif self._stop.is_set():
                    raise _Stopped()
                else:
                    return
            yield formed
            batch += 1

    def _main(self) -> None:
        try:
            formed = 0  # batches formed, the skipped ones included
            for batch in self._batches():
                if formed >= self.skip:
                    with self._changed:
                        self._formed.append(batch)
                        self._changed.notify_all()
                formed += 1
            if formed < self.skip:
                raise ArgumentError(f"the state resumes epoch 0 at batch {self.skip}, but the stream "
                                    f"{self._first.samples!r} makes {formed} batches of {self.batch_size}: it is "
                                    f"another stream, or changed since")
            with self._changed:
                self._ended = True
                self._changed.notify_all()
        except BaseException as exc:
            with self._changed:
                self._error = exc
                self._changed.notify_all()

    def _batches(self) -> Iterator[np.ndarray]:
        """The epoch's batches, each once its samples have arrived."""
        batch: list[int] = []
        for index in self._order():
            batch.append(index)
            if len(batch) == self.batch_size:
                yield np.asarray(batch, np.int64)
                batch = []
        if batch and not self.drop_last:
            yield np.asarray(batch, np.int64)

    def _order(self) -> Iterator[int]:
        """The epoch's samples in order, each once it has arrived."""
        shuffle, index = self._shuffle, 0
        while True:
            if shuffle is None:
                if not self._holds(index):
                    return
                yield index
                index += 1
                continue
            while shuffle.wants():
                if self._holds(index):
                    shuffle.enter(index)
                    index += 1
                else:
                    shuffle.end()
            if not shuffle.has_more():
                return
            yield shuffle.give()

    def _holds(self, index: int) -> bool:
        """Whether the stream holds sample ``index``, which has then arrived
        (its samples arrive in index order, read when first needed)."""
        first = self._first
        while first.file.count is None and index >= first.samples_read:
            if self._stop.is_set():
                raise _Stopped()
            first.arrive_next()
        return first.file.count is None or index < first.file.count


class FormingStager:
    """The stager (:class:`~slipstream.loader.stager.Stager`) of epoch 0
    over a stream that does not say its length: the batches are :class:`FormedBatches`, whose samples have arrived when
    they are handed on; before each batch runs, what arrived is made
    readable in place and the batch's samples are reported arrived, so that
    their records reach the decoders' columns.  Writing the file fails for
    good (a stream cannot be read again)."""

    pages_fetched = 0
    pages_ahead = 0

    def __init__(self, file: ArrivingFile) -> None:
        self.file = file
        self.storage = file.range.storage
        self._batches: FormedBatches | None = None

    def start_epoch(self, batches: FormedBatches, source: Any) -> None:
        """Start forming ``batches``; ``source``, what the decoders read, is not needed."""
        self._batches = batches
        batches.start()

    def prepare(self, batch: int) -> Staged:
        """Make what has arrived readable and report batch ``batch``'s
        samples arrived.

        Raises:
            OSError: the file cannot be written.
        """
        assert self._batches is not None
        self.file.publish()
        return Staged(arrived=self._batches[batch])

    def release(self, batch: int) -> None:
        """The pages of the file stay mapped until it is complete."""

    def verify(self) -> None:
        """Nothing can change under it."""

    def close(self) -> None:
        """The first epoch's owner closes the file."""


DISK_FULL = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
"""Errors writing the file after which training goes on from the source."""


class _Stopped(Exception):
    """A run stopped for another to take over."""


__all__ = ["CHUNK", "DISK_FULL", "FirstEpoch", "FormedBatches", "FormingStager"]
