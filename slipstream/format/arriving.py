"""A dataset file written as its samples arrive, in any order of their
indices, and read in place while it grows: the pages under a loader's first
epoch over a source (see :mod:`slipstream.loader.first_epoch`).

Samples are laid out in the order they arrive, by the writer's own rule
(:func:`~slipstream.format.writer.place`), into a locked temporary file next
to the target; each sample's records go into the tables at its index.  Each
batch's bytes are flushed to the file before the batch runs, and the
decoders read them through a mapping of the file's pages into one address
range, at their offsets in the file, as they read any dataset: nothing is
copied.  When every sample has arrived the tables and the header are written
and the file is renamed onto its target; until then no complete-looking
dataset exists, and a process that dies leaves only a temporary file, which
the next writer of the target removes.

A file written in the order of its indices (an epoch in sequential order)
is byte for byte the file :func:`slipstream.write` writes; in another order,
it holds the same samples and records in the same index space, its values
in the order they arrived.

When the file cannot be written (a full disk), it can be given up for
memory (:meth:`ArrivingFile.keep_in_memory`): samples are then laid out in
fresh memory mapped into the same range, each batch's samples anew for
that batch, given back once the batch is done (:meth:`ArrivingFile.forget`);
no file is written.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from slipstream.errors import FormatError
from slipstream.format import tempfiles
from slipstream.format.address_range import OS_PAGE, AddressRange
from slipstream.format.layout import UNREADABLE_KEY
from slipstream.format.location import sync_folder
from slipstream.format.reader import PAGE_GOOD, python_value
from slipstream.fields.base import Encoded
from slipstream.format.writer import Layout, field_descriptors, stored_record, stored_user_metadata

RESERVED_BYTES = 1 << 42
"""Address space reserved for the file's pages (4 TiB, none of it memory
until mapped): the most data a first epoch can write."""

STREAM_CAPACITY = 1 << 27
"""The most samples a file of a stream that does not say its length can
hold: per-sample arrays (which samples arrived, the decoders' columns) are
reserved for that many, none of their memory touched until samples fill
it (a few bytes per sample then)."""

MEMORY_AHEAD_BYTES = 512 << 20
"""In memory (a file given up), the most bytes of samples held for batches
not done yet before encoding waits (a batch larger than this is still
encoded, alone)."""


def unknown_length(path: Path, what: str) -> str:
    """Why the number of ``what`` of the file at ``path``, written from a
    stream that does not say its length, is not known yet."""
    return (f"{path}: the stream it is written from does not say how many samples it holds, so its number of {what} "
            f"is known only at its end (give the source's length, as WebDataset(length=) does, to know it "
            f"beforehand)")


class ArrivingFile:
    """A dataset file of ``count`` samples (or of a stream's, however many
    it holds), filled in any order.

    Args:
        path: the file to create when complete.
        fields: field name -> field object, in the order of each sample's values.
        count: samples in the dataset (each arrives once); None: a stream
            that does not say its length, whose samples arrive in index
            order until it ends (:meth:`end`), at most
            :data:`STREAM_CAPACITY`.
        page_size: bytes per data page.
        user_metadata: the JSON object to store (the source's, such as a folder's class names).

    Attributes:
        reader: the tables as they grow, read as a dataset's
            (:class:`ArrivingTables`).
        arrived: per sample, whether it has arrived (``capacity`` of them).
        count: the samples of the dataset, None until a stream of unknown
            length has ended.
        capacity: the indices samples can arrive at: ``count``, or
            :data:`STREAM_CAPACITY` until the stream has ended.
    """

    def __init__(self, path: Path, fields: Mapping[str, Any], count: int | None, page_size: int,
                 user_metadata: Mapping[str, Any]) -> None:
        self.path = Path(path)
        tempfiles.remove_stale(self.path)
        self._tmp, self._file = tempfiles.create(self.path)
        self._user = stored_user_metadata(user_metadata)
        self.user_metadata = dict(user_metadata)
        # A stream of unknown length grows the layout's tables as samples arrive, in index order.
        try:
            with self._writing():
                self._layout = Layout(self._file, field_descriptors(fields), page_size, True,
                                      1024 if count is None else count)
            self.range = AddressRange(RESERVED_BYTES)  # the pages' addresses, reserved (and refused) at once
        except BaseException:
            with contextlib.suppress(OSError):  # flushing what was buffered fails as the write did
                self._file.close()
            self._tmp.unlink(missing_ok=True)
            raise
        self.count = count
        self.capacity = STREAM_CAPACITY if count is None else count
        self.arrived = np.zeros(self.capacity, bool)
        self.unreadable: dict[int, str] = {}
        """Samples that arrived without values, and why (see :meth:`fail`)."""
        self.pending: set[int] = set()
        """Samples of :attr:`unreadable` not laid out yet: each arrives again
        before the file is complete (see :meth:`fail`)."""
        self.reader = ArrivingTables(self, dict(fields))
        self._mapped = 0  # bytes of the file mapped into the range, from its start
        self._lock = threading.Lock()  # the layout and the file: one sample added, or a flush, at a time
        self._forgotten = threading.Condition()  # notified when memory is given back
        self._memory: _MemoryPages | None = None  # where samples are laid out once the file is given up
        self._starts: list[int] = []  # in memory: where each arrival's bytes start in the range, in order
        self._forgot = 0  # in memory: the arrivals forgotten (memory given back)

    @property
    def kept(self) -> bool:
        """Whether the samples go to the file (False: to memory, see :meth:`keep_in_memory`)."""
        return self._memory is None

    @property
    def arrivals(self) -> int:
        """In memory: the samples that have arrived so far, a sample that
        arrived again counted again (see :meth:`forget`)."""
        return len(self._starts)

    @property
    def complete(self) -> bool:
        """Whether every sample has arrived (a stream's: it has ended too)."""
        return self.count is not None and bool(self.arrived[:self.count].all())

    def end(self, count: int) -> None:
        """A stream of unknown length has ended after ``count`` samples,
        which arrived at indices 0 to ``count`` - 1."""
        self.count = self.capacity = count
        self.arrived = self.arrived[:count].copy()

    def add(self, index: int, encoded: Sequence[Any]) -> None:
        """Lay out sample ``index`` (its values encoded by the fields); in
        memory, again if it arrived before (its records then name the new
        copy)."""
        self._check_index(index)
        size = sum(0 if value.data is None else len(value.data) for value in encoded)
        with self._lock, self._writing():
            # The sample must fit in the reserved range wherever the layout puts it (a page further at most).
            start = self._layout.data_offset + self._layout.pos
            if start + size + self._layout.page_size > RESERVED_BYTES:
                raise FormatError(f"{self.path}: a first epoch writes at most {RESERVED_BYTES:,} bytes of data; "
                                  f"write the dataset first with slipstream.write")
            self._layout.add(encoded, index)
            if self._memory is not None:
                self._starts.append(start)
            if index in self.pending:  # read again, and read this time
                self.pending.discard(index)
                del self.unreadable[index]
        self.arrived[index] = True

    def fail(self, index: int, why: str, final: bool = True) -> None:
        """Sample ``index`` could not be read or encoded (``why``): it
        arrives without values (its records zeros), and the file records it
        (:data:`~slipstream.format.layout.UNREADABLE_KEY`).  Not ``final``:
        it is not laid out yet, and must arrive again (:meth:`add`, or this
        once more) before the file is complete (see :attr:`pending`)."""
        self._check_index(index)
        with self._lock, self._writing():
            if final:
                # Empty values: zero records, stored fields zero bytes long at the layout's position (as any empty
                # value).
                self._layout.add([Encoded({})] * len(self._layout.descriptors), index)
                self.pending.discard(index)
            else:
                self.pending.add(index)
            self.unreadable[index] = why
        self.arrived[index] = True

    def _check_index(self, index: int) -> None:
        """Refuse a sample arriving a second time (but in memory) or beyond the capacity."""
        if index >= self.capacity:
            raise FormatError(f"{self.path}: a stream that does not say its length streams its first epoch for "
                              f"at most {self.capacity:,} samples; give its length (length=), or write it first "
                              f"with slipstream.write")
        if self.arrived[index] and self._memory is None and index not in self.pending:
            raise ValueError(f"sample {index} arrived twice")

    def stored(self, index: int) -> list[Encoded]:
        """Sample ``index``'s values as laid out (one per field, their
        bytes read in place: :meth:`publish` first), as the fields encoded
        them."""
        return [self.stored_value(index, position) for position in range(len(self._layout.descriptors))]

    def stored_value(self, index: int, position: int) -> Encoded:
        """The value of sample ``index``'s field number ``position``, as
        laid out (see :meth:`stored`)."""
        sub = self._layout.metadata[index][self._layout.descriptors[position].name]
        kept = stored_record(sub)
        if not self._layout.stores[position]:
            return Encoded(kept)
        offset, size = int(sub["offset"]), int(sub["size"])
        return Encoded(kept, self.range.storage[offset: offset + size])

    def publish(self) -> None:
        """Make what has arrived readable in place: flush it to the file and
        map what is new of it (in memory: it is in place already)."""
        if self._memory is not None:
            return
        with self._lock, self._writing():
            self._file.flush()
            end = self._layout.data_offset + self._layout.pos
            start = self._mapped - self._mapped % OS_PAGE if self._mapped else 0
            if end > start:
                # The last page may grow: it is mapped again with the bytes that follow.
                self.range.map_file(start, end - start, self._file.fileno(), start)
                self._mapped = end

    @contextlib.contextmanager
    def _writing(self) -> Iterator[None]:
        """A write that fails (a full disk, a file size limit) names the file."""
        try:
            yield
        except OSError as exc:
            raise OSError(exc.errno, f"{self.path} was not written: {exc.strerror or exc}") from exc

    def keep_in_memory(self) -> None:
        """Give the file up (its temporary file removed, its pages no longer
        mapped) and lay samples out in memory from now on, where every
        sample arrives anew.  For a file that cannot be written: training
        goes on from the source."""
        self.discard()
        with self._lock:
            self._lay_out_in_memory()

    def restart(self) -> None:
        """In memory: give back every sample's memory and lay samples out
        from the start of the range again (an epoch's start)."""
        assert self._memory is not None, "a file is restarted only in memory"
        with self._lock:
            self._memory.give_back(self._memory.mapped)
            self._lay_out_in_memory()

    def _lay_out_in_memory(self) -> None:
        """(Under the lock.)  Lay samples out from the start of the range
        in fresh memory, none of them arrived."""
        self._memory = _MemoryPages(self.range)
        old = self._layout
        self._layout = Layout(self._memory, old.descriptors, old.page_size, False, len(old.metadata))
        self._starts, self._forgot = [], 0
        self.arrived[:] = False
        self.unreadable.clear()
        self.pending.clear()

    def forget(self, arrivals: int) -> None:
        """In memory: give back the memory of the first ``arrivals`` samples
        that arrived (:attr:`arrivals` once a batch's samples had: no batch
        after it reads them, each bringing its own)."""
        if self._memory is None:
            return
        with self._lock:
            keep = self._starts[arrivals] if arrivals < len(self._starts) else \
                self._layout.data_offset + self._layout.pos
            self._memory.give_back(keep - keep % OS_PAGE)
            self._forgot = max(self._forgot, arrivals)
        with self._forgotten:
            self._forgotten.notify_all()

    def wait_for_room(self, stop: threading.Event) -> None:
        """In memory, wait until the samples that arrived and are not
        forgotten hold less than :data:`MEMORY_AHEAD_BYTES`, or none is left
        (or ``stop`` is set): encoding runs at most that far ahead of the
        batches done, and never waits for batches not encoded yet."""
        memory = self._memory
        if memory is None:
            return
        with self._forgotten:
            while self._forgot < len(self._starts) and memory.position - memory.freed >= MEMORY_AHEAD_BYTES \
                    and not stop.is_set():
                self._forgotten.wait(0.1)

    def finish(self, keep: bool = True) -> Path:
        """Write the tables and the header, and rename the file onto its
        target: the dataset, complete.  Returns its path.  Not ``keep``: the
        complete file stays where it is, under its temporary name, open and
        locked (so that no other writer of the target removes it) until
        :meth:`discard` removes it; returns that name."""
        if self._memory is not None:
            raise ValueError(f"{self.path} was given up: its samples are in memory only")
        if not self.complete or self.pending:
            missing = np.flatnonzero(~self.arrived[:self.count]).tolist() or sorted(self.pending)
            raise ValueError(f"{self.path}: samples {missing[:5]} have not arrived")
        user = self._user
        if self.unreadable:
            user = stored_user_metadata({**self.user_metadata, UNREADABLE_KEY: {
                str(index): why for index, why in sorted(self.unreadable.items())}})
        with self._writing():
            self._layout.finish(user)
            self._file.flush()
            os.fsync(self._file.fileno())
        if not keep:
            return self._tmp
        os.replace(self._tmp, self.path)  # still locked: a clean-up by another writer cannot take it first
        self._file.close()
        sync_folder(self.path.parent)
        return self.path

    def discard(self) -> None:
        """Give up: remove the temporary file (the target is not written)
        and no longer map its pages, whose disk space a mapping would keep
        for as long as the loader lives."""
        if not self._file.closed:
            self._tmp.unlink(missing_ok=True)
            self.hand_over()

    def hand_over(self) -> None:
        """Let go of the file, complete under its temporary name
        (:meth:`finish` without ``keep``), without removing it: for readers
        that hold it themselves (:func:`slipstream.format.tempfiles.hold`),
        the last of which removes it."""
        if not self._file.closed:
            try:
                self._file.close()
            except OSError:
                pass  # flushing what was buffered failed (a full disk): the file is gone anyway
            with self._lock:
                if self._mapped:
                    self.range.map_zeros(0, self._mapped)
                self._mapped = 0

    @property
    def page_count(self) -> int:
        """Data pages laid out so far (the last one possibly partly)."""
        return -(-self._layout.pos // self._layout.page_size)


class _MemoryPages:
    """What a layout writes to in memory: the bytes go to their offset in
    ``range``, in fresh memory mapped a chunk at a time as they come."""

    CHUNK = 8 << 20
    """Bytes mapped at a time."""

    def __init__(self, range: AddressRange) -> None:
        self.range = range
        self.position = 0  # the next byte written
        self.mapped = 0  # bytes mapped writable from the range's start (given back below `freed`)
        self.freed = 0
        self._views: dict[int, np.ndarray] = {}  # chunk start -> a writable view of it

    def write(self, data: Any) -> int:
        """Copy ``data`` to the next bytes; returns its length."""
        view = np.frombuffer(memoryview(data).cast("B"), np.uint8)
        while self.mapped < self.position + len(view):
            self._views[self.mapped] = self.range.map_memory(self.mapped, self.CHUNK)
            self.mapped += self.CHUNK
        done = 0
        while done < len(view):
            chunk = (self.position // self.CHUNK) * self.CHUNK
            at = self.position - chunk
            part = min(len(view) - done, self.CHUNK - at)
            self._views[chunk][at: at + part] = view[done: done + part]
            done += part
            self.position += part
        return done

    def give_back(self, end: int) -> None:
        """Let go of the memory below ``end`` (a whole number of OS pages):
        read-only zeros take its place."""
        end = min(end, self.mapped)
        if end > self.freed:
            self.range.map_zeros(self.freed, end - self.freed)
            for chunk in [c for c in self._views if c + self.CHUNK <= end]:
                del self._views[chunk]
            self.freed = end


class ArrivingTables:
    """The tables of an :class:`ArrivingFile` as a loader reads a dataset's:
    records at their samples' indices (zeros until a sample arrives), every
    page in place and good (it was just written), and the samples that
    arrived without values (``unreadable``, index -> why)."""

    format = "slipstream"
    complete = False
    """Samples are still arriving: facts of the whole dataset are not known."""

    def __init__(self, file: ArrivingFile, fields: dict[str, Any]) -> None:
        self._file = file
        layout = file._layout
        self.path = file.path
        self.fields = fields
        self.descriptors = layout.descriptors
        self.page_size, self.data_offset = layout.page_size, layout.data_offset
        self.storage = file.range.storage
        self.user_metadata = file.user_metadata
        self.unreadable = file.unreadable
        self._page_state = np.zeros(0, np.uint8)

    @property
    def metadata(self) -> np.ndarray:
        """The records, row ``i`` sample ``i``'s (zeros until it arrives;
        a stream's grow as its samples arrive)."""
        return self._file._layout.metadata

    @property
    def capacity(self) -> int:
        """The indices samples can arrive at (see :attr:`ArrivingFile.capacity`)."""
        return self._file.capacity

    def __len__(self) -> int:
        """The samples of the dataset.

        Raises:
            TypeError: a stream that does not say its length has not ended.
        """
        if self._file.count is None:
            raise TypeError(unknown_length(self.path, "samples"))
        return self._file.count

    @property
    def page_count(self) -> int:
        """Data pages laid out so far."""
        return self._file.page_count

    @property
    def page_state(self) -> np.ndarray:
        """Every page good: each was checked (its samples encoded) as it was written."""
        if len(self._page_state) != self.page_count:
            self._page_state = np.full(self.page_count, PAGE_GOOD, np.uint8)
        return self._page_state

    def read(self, index: int, field: str) -> Any:
        """One field of sample ``index``, arrived and published, as a
        Python value (as :meth:`slipstream.Reader.read` gives it)."""
        position = list(self.fields).index(field)
        return python_value(self, index, field, lambda: self._file.stored_value(index, position).data)

    def verify(self) -> None:
        """Nothing can change under it: the file is this process's own."""

    def close(self) -> None:
        """Let go of nothing: the file is the first epoch's."""


__all__ = ["ArrivingFile", "ArrivingTables", "MEMORY_AHEAD_BYTES", "RESERVED_BYTES", "STREAM_CAPACITY",
           "unknown_length"]
