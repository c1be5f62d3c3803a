"""Writing dataset files: values are encoded in worker processes, and the
parent lays them out in sample order, so the bytes of the file depend only
on the input, never on the number of workers or their timing.

The file is written under a temporary name in the target's folder, flushed
to disk, and only then renamed over the target: a failed or interrupted
write leaves nothing at the target path.  A writer killed outright leaves
its temporary file, which the next write to the same target removes
(:mod:`slipstream.format.tempfiles`); its worker processes end with it.
"""

from __future__ import annotations

import abc
import collections
import ctypes
import dataclasses
import itertools
import os
import signal
import sys
import threading
import time
import warnings
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from slipstream import _threading, native
from slipstream.errors import FieldValueError, LossWarning, SlipstreamError
from slipstream.format import layout as L
from slipstream.format import tempfiles
from slipstream.format.location import sync_folder
from slipstream.format.remote import local_path


class SampleSource(Protocol):
    """What the writer reads: ``len(source)`` samples, ``source[i]`` a tuple
    with one value per field (in field order), ``source.describe(i)`` a short
    text naming sample ``i`` in error messages (e.g. its file path)."""

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Sequence[Any]: ...

    def describe(self, index: int) -> str:
        """A short text naming sample ``index`` in error messages (e.g. its path)."""
        ...


class SampleStream(abc.ABC):
    """What the writer reads from sources without random access (tar
    shards, streaming datasets): samples in order, each once.

    Iterating yields ``(name, values)``: ``name`` names the sample in error
    messages (e.g. ``shard-000003.tar: n01440764_10026``); ``values`` is a
    tuple with one value per field (in field order), or the exception that
    made the sample unreadable, which the writer reports like a sample that
    cannot be encoded (``on_error``).
    """

    @abc.abstractmethod
    def __iter__(self) -> Iterator[tuple[str, Sequence[Any] | Exception]]: ...

    def length_hint(self) -> int | None:
        """The number of items iterating yields (unreadable samples
        included), when it is known without reading the samples, else None.
        The writer shows it in its progress.  A loader's first epoch
        streams from a stream without it on one rank only, where the
        epoch's length is known once the stream has ended; on several
        ranks, with ``indices`` or with repeated augmentation such a stream
        is converted before training starts."""
        return None

    def repeatable(self) -> bool:
        """Whether iterating again, in this process or another, yields the
        same items in the same order.  The ranks of a loader's first epoch
        each read the stream (a stream that is not repeatable is converted
        before training starts on several ranks)."""
        return True


@dataclasses.dataclass(frozen=True)
class WriteResult:
    """What :func:`write_dataset` did.

    Attributes:
        path: the file written.
        samples: number of samples in it.
        skipped: ``(source index, reason)`` of every sample left out with
            ``on_error="skip"``.
    """

    path: Path | str
    samples: int
    skipped: tuple[tuple[int, str], ...] = ()
    shards: tuple[str, ...] = ()


def write_file(path: str | os.PathLike, descriptors: list[L.FieldDescriptor], page_size: int, page_checksums: bool,
               user: bytes, encoded: Iterable[tuple[int, Any]], count: int | None, on_error: str,
               verbose: bool) -> WriteResult:
    """Lay out the ``encoded`` samples (index and encoded values, or the
    reason a sample could not be encoded) into one dataset file at
    ``path``, written under a temporary name and renamed when complete."""
    from tqdm import tqdm  # imported here: it is slow to import and only writing needs it

    path = local_path(path)
    tempfiles.remove_stale(path)
    try:
        tmp, file = tempfiles.create(path)
    except OSError as exc:  # no such folder, no permission: the message names the target
        raise OSError(exc.errno, f"{path} was not written: {exc.strerror or exc}") from exc
    try:
        with tqdm(total=count, unit="img", unit_scale=True, desc=f"writing {path.name}",
                  disable=None if verbose else True) as progress:
            layout = Layout(file, descriptors, page_size, page_checksums, count or 0)
            skipped = []
            for index, outcome in encoded:
                if isinstance(outcome, str):
                    if on_error == "raise":
                        raise FieldValueError(outcome)
                    skipped.append((index, outcome))
                else:
                    layout.add(outcome)
                progress.update(1)
            layout.finish(user)
            file.flush()
            os.fsync(file.fileno())
        os.replace(tmp, path)  # still locked: a clean-up by another writer cannot take it first
        file.close()
    except BaseException as exc:
        file.close()
        tmp.unlink(missing_ok=True)
        if isinstance(exc, SlipstreamError):
            raise type(exc)(f"{path} was not written: {exc}", status=exc.status, detail=exc.detail) from exc
        if isinstance(exc, OSError):  # disk full, file too large, I/O error: the message names the target
            raise OSError(exc.errno, f"{path} was not written: {exc.strerror or exc}") from exc
        raise
    sync_folder(path.parent)
    return WriteResult(path, layout.samples, tuple(skipped))




DEFAULT_SHARD_SIZE = 1 << 30
"""Shard size of a dataset written to a URL without ``shard_size`` or ``shards``."""


@dataclasses.dataclass(frozen=True)
class ShardPlan:
    """Where shards end: at a data size, or at equal shares of the source."""

    size: int | None
    count: int | None
    samples: int

    def shard_of(self, index: int) -> int | None:
        """The shard of source sample ``index`` under ``shards=N`` (None: by size)."""
        return None if self.count is None else index * self.count // max(1, self.samples)


def stored_user_metadata(user_metadata: Mapping[str, Any] | None) -> bytes:
    """The user metadata as a file stores it: JSON, keys sorted, UTF-8
    (:func:`~slipstream.format.layout.json_bytes`)."""
    return L.json_bytes(dict(user_metadata or {}), sort_keys=True)


def field_descriptors(fields: Mapping[str, Any]) -> list[L.FieldDescriptor]:
    """The descriptor a file stores for each of ``fields`` (name -> field), in order."""
    return [L.FieldDescriptor(f.type_id, name, f.arguments(), L.record_spec(f.record_dtype()))
            for name, f in fields.items()]


# ---------------------------------------------------------------- encoding, in workers

_worker: tuple[SampleSource, dict[str, Any]] | None = None


def _start_worker(source: SampleSource, fields: dict[str, Any], parent: int, limits: dict[int, int]) -> None:
    """A worker process's set-up: watch ``parent``, take the writing
    process's native limits, keep the context."""
    global _worker
    _watch_parent(parent)
    for limit, value in limits.items():  # a spawned worker starts with the defaults
        native.set_limit(limit, value)
    _worker = (source, fields)


def _watch_parent(parent: int) -> None:
    """End this worker when the writing process ``parent`` ends, however it
    ends: a worker left running would hold the temporary file and block
    forever on the pipe to its dead parent.  On Linux the kernel sends
    SIGKILL (``PR_SET_PDEATHSIG``); elsewhere a thread watches the parent."""
    if sys.platform.startswith("linux"):
        pr_set_pdeathsig = 1
        if ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, int(signal.SIGKILL), 0, 0, 0) == 0:
            if os.getppid() != parent:  # it died before the request was made
                os._exit(1)
            return
    threading.Thread(target=_exit_when_orphaned, args=(parent,), name="slipstream-parent-watch", daemon=True).start()


def _exit_when_orphaned(parent: int, interval: float = 0.5) -> None:
    """Exit the process as soon as its parent is no longer ``parent``."""
    while os.getppid() == parent:
        time.sleep(interval)
    os._exit(1)


Context = tuple[Any, dict[str, Any]]
"""What encoding reads: the source (None for a stream) and the fields."""


def _encode_range(bounds: tuple[int, int], context: Context | None = None) -> list[Any]:
    """Encoded samples ``start .. stop-1``: per sample, a list with one
    ``Encoded`` per field, or a text saying why it cannot be encoded.
    ``context`` is the worker's (:func:`_start_worker`) unless given."""
    source, fields = context if context is not None else _worker_context()
    return [_encode_sample(source, fields, i) for i in range(*bounds)]


def _encode_chunk(chunk: list[tuple[str, Any]], context: Context | None = None) -> list[Any]:
    """:func:`_encode_values` of each ``(name, values)`` of a stream's chunk."""
    fields = (context if context is not None else _worker_context())[1]
    return [encode_values(fields, name, values) for name, values in chunk]


def _worker_context() -> Context:
    """The source and fields :func:`_start_worker` gave this worker process."""
    if _worker is None:
        raise RuntimeError("a writer worker was asked to encode before its initializer ran")
    return _worker


def _encode_sample(source: SampleSource, fields: dict[str, Any], index: int) -> Any:
    try:
        values = source[index]
    except Exception as exc:
        return f"sample {index} ({source.describe(index)}): {type(exc).__name__}: {exc}"
    return encode_values(fields, f"sample {index} ({source.describe(index)})", values)


class Unencodable(str):
    """Why a sample cannot be encoded (a text naming it), from
    :func:`encode_values`.

    Attributes:
        io_error: whether an ``OSError`` caused it, the source failing to
            give the sample or a field failing to read its file (a missing
            file, a connection reset): what reading it again may not meet,
            unlike values that cannot be encoded (a damaged image).
    """

    io_error: bool = False

    @classmethod
    def of(cls, text: str, cause: BaseException | None = None) -> Unencodable:
        """``text``, caused by ``cause``."""
        failure = cls(text)
        failure.io_error = isinstance(cause, OSError)
        return failure


def encode_values(fields: Mapping[str, Any], name: str, values: Sequence[Any] | Exception) -> Any:
    """One sample's values encoded by ``fields``: a list with one
    ``Encoded`` per field, or an :class:`Unencodable` text starting with
    ``name`` that says why the sample cannot be encoded (``values`` may be
    the exception that made it unreadable)."""
    if isinstance(values, Exception):
        return Unencodable.of(f"{name}: {type(values).__name__}: {values}", values)
    if len(values) != len(fields):
        return Unencodable.of(f"{name}: {len(values)} values for {len(fields)} fields")
    encoded = []
    for (field_name, field), value in zip(fields.items(), values):
        try:
            encoded.append(field.encode(value))
        except Exception as exc:
            return Unencodable.of(f"{name}, field {field_name!r}: {exc}", exc)
    return encoded


class Losses:
    """What the fields lost encoding a write's samples
    (:attr:`~slipstream.fields.base.Encoded.loss`), counted per field and
    kind of loss as the samples are encoded (from any thread), and told
    once, when the dataset is written: :meth:`report`."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = list(names)
        self.samples = 0
        self._seen: dict[tuple[str, str], list[Any]] = {}  # (field, loss) -> [count, first indices]
        self._lock = threading.Lock()

    def add(self, index: int, outcome: Any) -> None:
        """Count sample ``index``'s encoded values (an :class:`Unencodable`
        text counts nothing)."""
        if isinstance(outcome, str):
            return
        with self._lock:
            self.samples += 1
            for name, value in zip(self.names, outcome):
                if value.loss:
                    seen = self._seen.setdefault((name, value.loss), [0, []])
                    seen[0] += 1
                    if len(seen[1]) < 3:
                        seen[1].append(index)

    def report(self, target: str | os.PathLike, stacklevel: int = 2) -> None:
        """One :class:`~slipstream.errors.LossWarning` per field and kind of
        loss, naming ``target`` (the dataset written), counting the samples
        stored with the loss and naming the first ones."""
        for (name, loss), (count, first) in sorted(self._seen.items()):
            listed = ", ".join(map(str, sorted(first))) + (", ..." if count > len(first) else "")
            warnings.warn(f"{target}: field {name!r}: {count:,} of {self.samples:,} samples "
                          f"(sample{'s' if count > 1 else ''} {listed}) were {loss}", LossWarning,
                          stacklevel=stacklevel + 1)


def reporting_losses(encoded: Iterable[tuple[int, Any]], names: Sequence[str],
                     target: str | os.PathLike) -> Iterator[tuple[int, Any]]:
    """``encoded`` (index and encoded values, or why a sample cannot be
    encoded) passed on as it is; once all of it has passed, its
    :class:`Losses` are reported: a write that loses something says so
    once, not per sample (or never)."""
    losses = Losses(names)
    for index, outcome in encoded:
        losses.add(index, outcome)
        yield index, outcome
    losses.report(target)


def _encoded_samples(source: SampleSource | SampleStream, fields: dict[str, Any], workers: int,
                     count: int | None) -> Iterator[tuple[int, Any]]:
    """(index, encoded or error text) for every sample, in source order."""
    if isinstance(source, SampleStream):
        chunks: Iterable[Any] = _stream_chunks(source, _STREAM_CHUNK)
        encode: Any = _encode_chunk
    else:
        assert count is not None
        size = max(1, min(64, -(-count // max(1, workers * 16))))
        chunks = [(start, min(start + size, count)) for start in range(0, count, size)]
        encode = _encode_range
        workers = min(workers, len(chunks))
    index = 0
    for results in _in_order(encode, chunks, source, fields, workers):
        for outcome in results:
            yield index, outcome
            index += 1


def _stream_chunks(stream: SampleStream, size: int) -> Iterator[list[tuple[str, Any]]]:
    """The stream's samples in lists of ``size``."""
    samples = iter(stream)
    while chunk := list(itertools.islice(samples, size)):
        yield chunk


_STREAM_CHUNK = 16
"""Samples of a stream sent to a writer worker at once."""


def _in_order(encode: Any, chunks: Iterable[Any], source: Any, fields: dict[str, Any],
              workers: int) -> Iterator[list[Any]]:
    """``encode(chunk)`` of every chunk, in order: in this process when
    ``workers`` is 0, else by that many encoders (:func:`_encoders`)."""
    if workers == 0:
        # The context is passed, not set as the workers' global: a generator left suspended holding such a
        # global would restore it when collected, possibly inside a worker forked later, after its initializer.
        for chunk in chunks:
            yield encode(chunk, (source, fields))
        return
    from concurrent.futures.process import BrokenProcessPool  # imported here: only writing with workers needs it

    # At most _AHEAD chunks per worker in flight, so memory stays bounded
    # when encoding outpaces the disk.
    pool, submit, method = _encoders(encode, source, fields, workers)
    try:
        pending: collections.deque = collections.deque()
        chunks = iter(chunks)
        for chunk in itertools.islice(chunks, workers * _AHEAD):
            pending.append((chunk, submit(chunk)))
        while pending:
            chunk, future = pending.popleft()
            try:
                results = future.result()
            except BrokenProcessPool:
                raise SlipstreamError(f"a writer worker process died while encoding {_chunk_text(chunk)} "
                                      f"({_death_causes(method)})") from None
            for following in itertools.islice(chunks, 1):
                pending.append((following, submit(following)))
            yield results
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _encoders(encode: Any, source: Any, fields: dict[str, Any], workers: int) -> tuple[Any, Any, str]:
    """``workers`` encoders: the pool, a function that gives it a chunk (and
    returns the chunk's future), and how they were started (``"fork"``,
    ``"spawn"`` or ``"thread"``).

    Worker processes forked from this one where the platform can fork and
    no thread pool would be forked live
    (:func:`slipstream._threading.fork_is_safe`): they inherit the source as
    it is, so it needs no pickling and a script needs no ``__main__`` guard
    (as with torch's DataLoader).  Where Numba's pool would be forked live
    (parallel Numba code of the user's ran), threads of this process: a
    fork would hand the children a pool in an undefined state, and
    processes started fresh would run the main script again, which a
    script that relies on fork does not expect.  The native
    encoders release the GIL, so threads encode in parallel where they
    dominate.  Threads too in a daemonic process (a ``multiprocessing.Pool``
    worker), which may not have children.  Where the platform cannot fork,
    spawned processes.  A process
    pool fails every pending task when a worker dies (where
    ``multiprocessing.Pool`` would wait forever for the lost task)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor

    can_fork = "fork" in multiprocessing.get_all_start_methods()
    daemonic = multiprocessing.current_process().daemon
    if daemonic:
        warnings.warn(f"slipstream is writing from a daemonic process ({multiprocessing.current_process().name}, "
                      f"e.g. a multiprocessing.Pool worker), which may not start processes: it encodes on {workers} "
                      f"threads of this process instead (pass workers=0 to encode in this thread and silence this)",
                      RuntimeWarning, stacklevel=2)
    if daemonic or (can_fork and not _threading.fork_is_safe()):
        threads = ThreadPoolExecutor(workers, thread_name_prefix="slipstream-encode")
        context = (source, fields)
        return threads, lambda chunk: threads.submit(encode, chunk, context), "thread"
    method = "fork" if can_fork else "spawn"
    limits = {int(limit): native.get_limit(limit) for limit in native.Limit}
    sent = None if isinstance(source, SampleStream) else source  # a stream's workers need the fields only
    processes = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context(method),
                                    initializer=_start_worker, initargs=(sent, fields, os.getpid(), limits))
    return processes, lambda chunk: processes.submit(encode, chunk), method


def _death_causes(method: str) -> str:
    """What kills a writer worker started by ``method``, for messages."""
    causes = "killed by a signal or by the out-of-memory killer"
    if method == "fork":
        return causes
    return (f"{causes}; it was started by {method!r}, which imports the main script again in each worker: "
            f"a script that writes with workers must run its work under `if __name__ == '__main__':`")


def _chunk_text(chunk: Any) -> str:
    """The samples of a chunk, for messages."""
    if isinstance(chunk, tuple):
        return f"samples {chunk[0]} to {chunk[1] - 1}"
    return f"samples {chunk[0][0]} to {chunk[-1][0]}"


_AHEAD = 4
"""Chunks queued per writer worker."""


# ---------------------------------------------------------------- layout, in the parent


def stored_fields(descriptors: Sequence[L.FieldDescriptor]) -> list[bool]:
    """Per field, whether its values are stored in the pages (not only in the record)."""
    return [bool({"offset", "size"} <= set(d.record_dtype.names)) for d in descriptors]


def stored_record(sub: Any) -> dict[str, Any]:
    """A field's record in a file (``sub``, one field of a metadata row) as
    the field encoded it: every value but where its bytes are (``offset``,
    ``size``), which the layout fills in."""
    return {key: sub[key] for key in sub.dtype.names if key not in ("offset", "size")}


def place(pos: int, size: int, page_size: int) -> int:
    """Where the layout puts a value of ``size`` bytes when ``pos`` bytes of
    page data are written (data-relative): inside the current page when it
    fits there, else from the start of a fresh page on.  The layout needs
    only the sizes of the values, so it can be planned before they exist."""
    if size == 0:
        return pos
    start = L.align(pos, L.ALLOCATION_ALIGNMENT)
    page_end = (pos // page_size + 1) * page_size
    if size > page_size:
        start = L.align(pos, page_size)
    elif start + size > page_end:
        start = page_end
    return start


class Layout:
    """Lays samples out in the file as they arrive: each one's values after
    the last's, its records at its index (by default, the next one)."""

    def __init__(self, file: Any, descriptors: list[L.FieldDescriptor], page_size: int, page_checksums: bool,
                 capacity: int) -> None:
        self.file = file
        self.descriptors = descriptors
        self.page_size = page_size
        self.data_offset = L.align(L.HEADER_DTYPE.itemsize, L.DATA_ALIGNMENT)
        self.metadata = np.zeros(capacity, L.metadata_dtype(descriptors))
        self.stores = stored_fields(descriptors)
        self.allocations = np.zeros(max(16, capacity), L.ALLOCATION_DTYPE)
        self.allocation_count = 0
        self.samples = 0
        self.pos = 0  # bytes of page data written, relative to data_offset
        self.page_crcs: list[int] | None = [] if page_checksums else None
        self.crc = 0
        file.write(bytes(self.data_offset))

    def add(self, encoded: list[Any], index: int | None = None) -> None:
        """Lay out one sample's encoded values; its records go to row
        ``index`` of the tables (default: the next row, in order)."""
        if index is None:
            index = self.samples
        if index == len(self.metadata):  # the next row of a stream of unknown length
            self.metadata = np.concatenate([self.metadata, np.zeros(max(1024, len(self.metadata)),
                                                                    self.metadata.dtype)])
        record = self.metadata[index]
        for k, (descriptor, value) in enumerate(zip(self.descriptors, encoded)):
            sub = record[descriptor.name]
            for key, v in value.record.items():
                sub[key] = v
            if self.stores[k]:
                data = b"" if value.data is None else value.data
                offset = self.data_offset + self._allocate(data)
                sub["offset"], sub["size"] = offset, len(data)
                self._note_allocation(index, k, offset, len(data))
        self.samples += 1

    def _note_allocation(self, sample: int, field: int, offset: int, size: int) -> None:
        if self.allocation_count == len(self.allocations):
            self.allocations = np.concatenate([self.allocations, np.zeros_like(self.allocations)])
        row = self.allocations[self.allocation_count]
        row["sample"], row["field"], row["offset"], row["size"] = sample, field, offset, size
        self.allocation_count += 1

    def placement(self, size: int) -> int:
        """Where a value of ``size`` bytes would go (data-relative): see :func:`place`."""
        return place(self.pos, size, self.page_size)

    def _allocate(self, data: Any) -> int:
        """Place ``data`` where :meth:`placement` says.  Returns its data-relative offset."""
        size = len(data)
        if size == 0:
            return self.pos
        start = self.placement(size)
        if start > self.pos:
            self._emit(bytes(start - self.pos))
        self._emit(data)
        return start

    def _emit(self, data: Any) -> None:
        view = memoryview(data).cast("B")
        self.file.write(view)
        if self.page_crcs is None:
            self.pos += len(view)
            return
        while len(view):
            part = view[: self.page_size - self.pos % self.page_size]
            self.crc = L.crc32(part, self.crc)
            self.pos += len(part)
            view = view[len(part):]
            if self.pos % self.page_size == 0:
                self.page_crcs.append(self.crc)
                self.crc = 0

    def finish(self, user: bytes) -> None:
        """Write the tables after the pages, then the header."""
        if self.page_crcs is not None and self.pos % self.page_size:
            self.page_crcs.append(self.crc)
        header = np.zeros(1, L.HEADER_DTYPE)[0]
        end = self.data_offset + self.pos

        def table(name: str, data: bytes) -> None:
            nonlocal end
            start = L.align(end, L.TABLE_ALIGNMENT)
            self.file.write(bytes(start - end))
            self.file.write(data)
            end = start + len(data)
            header[f"{name}_offset"] = start
            header[f"{name}_crc32"] = L.crc32(data)

        metadata = self.metadata[: self.samples].tobytes()
        allocations = self.allocations[: self.allocation_count].tobytes()
        table("descriptors", L.encode_descriptors(self.descriptors))
        header["descriptors_size"] = end - header["descriptors_offset"]
        table("metadata", metadata)
        header["metadata_size"] = len(metadata)
        table("allocations", allocations)
        header["allocation_count"] = self.allocation_count
        table("user", user)
        header["user_size"] = len(user)
        page_count = -(-self.pos // self.page_size)
        if self.page_crcs is not None:
            table("page_checksums", np.asarray(self.page_crcs, L.PAGE_CHECKSUM_DTYPE).tobytes())
        header["magic"], header["version"], header["header_size"] = L.MAGIC, L.VERSION, L.HEADER_DTYPE.itemsize
        header["sample_count"], header["field_count"] = self.samples, len(self.descriptors)
        header["page_size"], header["record_size"] = self.page_size, self.metadata.dtype.itemsize
        header["flags"] = L.FLAG_PAGE_CHECKSUMS if self.page_crcs is not None else 0
        header["data_offset"], header["page_count"], header["data_size"] = self.data_offset, page_count, self.pos
        raw = header.tobytes()
        header["header_crc32"] = L.crc32(raw[: L.HEADER_CRC_SPAN])
        self.file.seek(0)
        self.file.write(header.tobytes())
        self.header = header
