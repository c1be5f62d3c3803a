"""The epoch iterator: one background thread runs the compiled pipeline
batch after batch into a ring of slots; the user's thread takes the results.

Slots: the compiled pipeline keeps ``batches_ahead + 2`` batches of output
memory.  The thread finishes a batch, then waits for room in a queue of
``batches_ahead``; so at any moment at most ``batches_ahead`` finished
batches wait, one is in the user's hands and one is being made: a slot is
written again only after the user has asked for the batch after it.

Stopping: the thread checks a stop flag between batches and while it waits;
``close()`` sets the flag, drains the queue and joins the thread.  The thread
holds no reference to the iterator, and the loader only a weak one, so an
iterator the user drops (``break``) is collected and stops its thread.

The loader's side: it builds an :class:`EpochPlan` (frozen: the batches and
the parts that make them) per epoch, and learns that the epoch ended through
the ``on_end`` callback it gives, and where an iteration stopped before its
end through the plan's ``on_stop``; it reads the iterator's ``position`` and
``closed``.  Neither reads the other's private attributes, and an iterator
runs from a plan without any loader.

Failures: before each batch the thread applies what its stager reported
(:class:`~slipstream.loader.stager.Staged`): records that arrived reach the
decoders' columns through one versioned refresh
(:meth:`~slipstream.fields.decoders.DecodeSource.refresh`), whose version the
batch's call is given, and the samples known to have failed (no values, a
corrupt page) are looked up in the epoch's :class:`KnownFailures`, which the
thread alone owns and writes.  Those statuses go to the compiled pipeline
with the batch, as its indices do; after the batch one function,
:func:`_check_errors`, decides from them and the decoders' status outputs
which samples failed, and records them in the loader's :class:`FailureLog`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from slipstream import native
from slipstream.compiler.pipeline import shown_indices
from slipstream.errors import DecodeError, OperationError, PipelineError, SampleWarning, SlipstreamError
from slipstream.fields.decoders import UNREADABLE
from slipstream.loader.stager import CORRUPT, Staged, Stager
from slipstream.loader.stats import StatsRecorder, Timed, profiled

_END = object()
_EMPTY = object()  # a batch whose every sample failed under on_error="skip"
_POLL_S = 0.05
_NAMED = 5  # failed samples named in an epoch's warning


class FailureLog:
    """Samples a loader skipped or replaced (``on_error`` not ``"raise"``).

    Written by the loader thread, read by the user's: each update is one
    dict or list operation, atomic under the GIL.

    Attributes:
        reasons: dataset index -> why it could not be decoded (latest).
        count: failures over all epochs.
        epoch: (index, reason) of the failures of the running epoch.
    """

    def __init__(self) -> None:
        self.reasons: dict[int, str] = {}
        self.count = 0
        self.epoch: list[tuple[int, str]] = []

    def start_epoch(self) -> None:
        """Forget the failures of an epoch that did not finish."""
        self.epoch = []

    def add(self, index: int, reason: str) -> None:
        """Record one failed sample of the running epoch."""
        self.reasons[index] = reason
        self.epoch.append((index, reason))
        self.count += 1

    def warn(self, path: Any, epoch: int, policy: str) -> None:
        """Warn about the finished epoch's failures, if any, and start afresh."""
        failed, self.epoch = self.epoch, []
        if not failed:
            return
        done = "left out of their batches" if policy == "skip" else "replaced by zeros"
        named = "; ".join(f"sample {index}: {reason}" for index, reason in failed[:_NAMED])
        more = f"; and {len(failed) - _NAMED} more" if len(failed) > _NAMED else ""
        warnings.warn(f"{path}: {len(failed)} samples of epoch {epoch} could not be decoded and were {done} "
                      f"({named}{more})", SampleWarning, stacklevel=4)


class KnownFailures:
    """The samples an epoch knows to have failed before their batch runs:
    an int32 status per dataset index, :data:`UNREADABLE` for a sample the
    dataset holds no values for, :data:`~slipstream.loader.stager.CORRUPT`
    for one whose bytes lie in a page that failed its check, 0 otherwise.

    The epoch's thread makes it and is its only reader and writer, so that
    what the decoders are told of a batch (:meth:`before_batch`) comes from
    one table, never from memory another layer writes.  A decoder's own
    failure is not entered: a crop that reads only part of a damaged image
    may decode in another epoch, or under another draw.

    Args:
        reader: the dataset: the samples it holds no values for
            (``reader.unreadable``, which grows as a first epoch's samples
            arrive).
    """

    def __init__(self, reader: Any) -> None:
        self._reader = reader
        self._status = np.zeros(0, np.int32)
        unreadable = np.array(list(reader.unreadable), np.int64)  # one snapshot: a first epoch's encoders add to it
        if unreadable.size:
            self._cover(int(unreadable.max()) + 1)
            self._status[unreadable] = UNREADABLE

    def _cover(self, size: int) -> None:
        """Hold a status for the indices below ``size`` (a stream's samples
        arrive at indices not known in advance)."""
        if size > self._status.size:
            grown = np.zeros(max(size, 2 * self._status.size), np.int32)
            grown[:self._status.size] = self._status
            self._status = grown

    def before_batch(self, indices: np.ndarray, staged: Staged) -> np.ndarray:
        """Enter what making the batch ready found out, and return the
        status of each of its samples ``indices`` (int32, in their order; a
        copy): samples whose records arrived are known failed exactly when
        the dataset now holds no values for them (a source read again may
        hold them now), and those in corrupt pages failed."""
        arrived = np.zeros(0, np.int64) if staged.arrived is None else staged.arrived
        self._cover(1 + max(int(part.max()) for part in (indices, arrived, staged.corrupt) if part.size))
        self._status[arrived] = [UNREADABLE if index in self._reader.unreadable else 0 for index in arrived.tolist()]
        self._status[staged.corrupt] = CORRUPT
        return self._status[indices]


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


@dataclasses.dataclass(frozen=True, eq=False)
class EpochPlan:
    """Everything an :class:`EpochIterator` needs, fixed when its epoch
    starts: the batches to make and the parts that make them.

    The loader builds one per ``iter()``; the iterator and its thread read
    nothing else of the loader.

    Attributes:
        epoch: the epoch number (seeds the random operations).
        batches: the dataset indices of each batch still to make, in order:
            a sequence, or (epoch 0 over a stream that does not say its
            length) an iterable without a length, whose batches are formed
            as the stream is read and can then be indexed
            (:class:`slipstream.loader.first_epoch.FormedBatches`).
        first_batch: the position in the epoch of ``batches[0]`` (after a
            resume, the batches handed out before).
        pipeline: the compiled pipeline: ``pipeline(indices, epoch, draws)`` makes
            one batch into the next of its ``slots`` output slots.
        memory: the stager that brings the batches' bytes in place
            (:class:`slipstream.loader.stager.Stager`).
        source: what the decoders read: its columns are refreshed, by the
            iterator's thread alone and between batches, with the records
            the stager reports arrived.
        reader: the dataset (named in errors; checked for changes under it).
        names: the outputs yielded, in order.
        as_dict: yield dicts by output name instead of tuples.
        device: a ``torch.device`` the batches are copied to on a side
            stream, or None (the CPU).
        on_error: ``"raise"``, ``"skip"`` or ``"replace"`` for a sample
            that cannot be decoded.
        failures: where skipped or replaced samples are recorded.
        batches_ahead: finished batches waiting at most.
        draws: the draw identities of each batch of ``batches``, what the
            random operations draw from, under repeated augmentation; None
            (default): the indices themselves.
        stop_batches: what makes the loader thread stop waiting for a
            batch (without waiting for anything) when the iterator closes:
            for ``batches`` formed by a thread of their own, what stops it;
            in a first epoch, what stops the wait for samples to arrive.
        on_stop: called with the iterator's ``position`` when it closes
            before its epoch's end (closed, dropped after a ``break`` or an
            exception, or failed), once.
        on_fail: called with the error that ends the epoch (a sample that
            cannot be decoded, a failed operation), after ``on_stop`` and
            before the error reaches the caller; not for an iteration
            left early.
        stats: where both threads add their times
            (:class:`~slipstream.loader.stats.StatsRecorder`); None: kept
            nowhere.
    """

    epoch: int
    batches: Sequence[np.ndarray] | Iterable[np.ndarray]
    first_batch: int
    pipeline: Any
    memory: Stager
    source: Any
    reader: Any
    names: tuple[str, ...]
    as_dict: bool
    device: Any
    on_error: str
    failures: FailureLog
    batches_ahead: int
    draws: tuple[np.ndarray, ...] | None = None
    stop_batches: Callable[[], None] | None = None
    on_stop: Callable[[int], None] | None = None
    on_fail: Callable[[BaseException], None] | None = None
    stats: StatsRecorder | None = None


class EpochIterator:
    """Batches of one epoch (or of its remainder, after a resume).

    Args:
        plan: what to make (see :class:`EpochPlan`).
        on_end: called with the iterator once its last batch has been
            handed out (not when it is closed early or fails).  The
            iterator keeps it, and whatever it refers to, alive while it
            is iterated; its thread does not.
    """

    def __init__(self, plan: EpochPlan, on_end: Callable[[EpochIterator], None] | None = None) -> None:
        self.plan = plan
        self.epoch = plan.epoch
        self.position = plan.first_batch  # batches of the epoch handed out so far
        self._on_end = on_end
        self._queue: queue.Queue = queue.Queue(maxsize=plan.batches_ahead)
        self._stop = threading.Event()
        self._done = False
        plan.memory.start_epoch(plan.batches, plan.source)
        plan.failures.start_epoch()
        self._thread = threading.Thread(target=_produce, args=(plan, self._queue, self._stop),
                                        name=f"slipstream-loader-epoch{plan.epoch}", daemon=True)
        self._thread.start()

    def __iter__(self) -> EpochIterator:
        return self

    def __len__(self) -> int:
        """The batches still to come.

        Raises:
            TypeError: epoch 0 over a stream that does not say its length,
                whose number of batches is known only at its end.
        """
        return len(self.plan.batches) - (self.position - self.plan.first_batch)  # type: ignore[arg-type]

    @property
    def closed(self) -> bool:
        """Whether the iterator gives no more batches: its epoch ended, it
        failed, or it was closed."""
        return self._done

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        stats = self.plan.stats
        if stats is not None:
            stats.asking()
        began = time.perf_counter()
        with profiled("slipstream.next"):
            item = self._take()
            while item is _EMPTY:
                self.position += 1
                item = self._take()
        if item is _END:
            self._done = True  # the epoch's end: not stopped before it
            self.close()
            if self._on_end is not None:
                self._on_end(self)
            raise StopIteration
        if isinstance(item, _Failure):
            self.close()
            if self.plan.on_fail is not None:
                self.plan.on_fail(item.error)
            raise item.error
        outputs, ready, samples = item
        if ready is not None:  # the copy to the device was queued on the loader's stream
            import torch

            torch.cuda.current_stream().wait_event(ready)
            _used_on_current_stream(outputs)
        self.position += 1
        if stats is not None:
            stats.waited(time.perf_counter() - began, samples, self.epoch)
        return outputs

    def _take(self) -> Any:
        """The thread's next item, watching that the thread is alive (an
        iterator closed meanwhile, from another thread, ends)."""
        while True:
            try:
                return self._queue.get(timeout=_POLL_S)
            except queue.Empty:
                if self._done:
                    raise StopIteration from None
                if not self._thread.is_alive():
                    self.close()
                    raise SlipstreamError("the loader thread stopped without a result") from None

    def close(self) -> None:
        """Stop the thread and wait for it (idempotent)."""
        # Once only: closed again (by __del__) when the loader runs another epoch, it would stop that one's wait.
        first, self._done = not self._done, True
        self._stop.set()
        if first and self.plan.stop_batches is not None:
            self.plan.stop_batches()
        if first and self.plan.on_stop is not None:
            self.plan.on_stop(self.position)
        if threading.current_thread() is self._thread:
            return
        while self._thread.is_alive():
            try:  # unblock a thread waiting for room
                while True:
                    self._queue.get_nowait()
            except queue.Empty:
                pass
            self._thread.join(timeout=_POLL_S)

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass


def _produce(plan: EpochPlan, out: queue.Queue, stop: threading.Event) -> None:
    """The thread: make the plan's batches into ``out`` until done or
    ``stop``; an exception goes to the user's thread as a :class:`_Failure`.
    It holds the plan, never the iterator (see the module's docstring)."""
    def put(item: Any) -> bool:
        with Timed(plan.stats, "ahead"):  # waiting for room: the batches ahead are all made
            while not stop.is_set():
                try:
                    out.put(item, timeout=_POLL_S)
                    return True
                except queue.Full:
                    continue
            return False

    try:
        # Copies to the loader's device, and the device work of the pipeline's
        # own torch stages (a decode on the GPU), run on a side stream that
        # the training stream waits on, so they overlap its steps.
        stream, pending = _cuda_stream(plan.device or _torch_device(plan.pipeline.cuda_device)), []
        known_failures = KnownFailures(plan.reader)
        for b, indices in enumerate(plan.batches):
            if stop.is_set():
                return
            while len(pending) >= plan.pipeline.slots:  # the copy out of this slot must be done
                pending.pop(0).synchronize()
            with _on_stream(stream):
                try:
                    with Timed(plan.stats, "reading"):
                        known, tables = _stage(plan, b, indices, known_failures)
                    with Timed(plan.stats, "pipeline"):
                        outputs = _run(plan, b, indices, known, tables)
                except Exception:
                    plan.memory.verify()  # a file changed under the loader explains a failure best
                    raise
                # Nothing read from a file truncated or rewritten under the
                # loader is handed on (the mapping reads lost pages as zeros).
                with Timed(plan.stats, "checks"):
                    plan.memory.verify()
                    try:
                        keep = _check_errors(plan, indices, known)  # its messages may read the batch's values
                    finally:
                        plan.memory.release(b)
                if keep is not None and not keep.size:
                    if not put(_EMPTY):
                        return
                    continue
                with Timed(plan.stats, "to_device"):
                    values = [_to_tensor(_rows(outputs[name], keep)) for name in plan.names]
                    ready = None
                    if stream is not None:
                        values, ready = _to_device(values, plan.device, stream)
                        pending.append(ready)
            batch = dict(zip(plan.names, values)) if plan.as_dict else tuple(values)
            if not put((batch, ready, len(indices) if keep is None else int(keep.size))):
                return
        put(_END)
    except BaseException as exc:  # reaches the user's thread
        put(_Failure(exc))


def _stage(plan: EpochPlan, b: int, indices: np.ndarray, known_failures: KnownFailures) -> tuple[np.ndarray, int]:
    """Make batch ``b`` ready (:meth:`Stager.prepare`) and apply what the
    stager reported: the records that arrived reach the decoders' columns
    (one refresh, which numbers their version), and the table of known
    failures learns of them and of samples in corrupt pages.  Returns the
    batch's known failure statuses and the columns' version, the inputs
    of its call besides its indices."""
    staged = plan.memory.prepare(b)
    tables = plan.source.version if staged.arrived is None else plan.source.refresh(staged.arrived)
    return known_failures.before_batch(indices, staged), tables


def _run(plan: EpochPlan, b: int, indices: np.ndarray, known: np.ndarray, tables: int) -> Any:
    """Batch ``b``, given its samples' known failure statuses and the
    version of the decoders' columns it reads, its failure named by file,
    batch and epoch."""
    where = f"{plan.reader.path}: batch {b} of epoch {plan.epoch}"
    try:
        return plan.pipeline(indices, plan.epoch, None if plan.draws is None else plan.draws[b], known=known,
                             tables=tables)
    except OperationError as exc:
        raise OperationError(f"{where}: {exc}") from exc.__cause__
    except SlipstreamError:
        raise
    except Exception as exc:
        raise PipelineError(f"{where} (samples {shown_indices(indices)}) failed: {type(exc).__name__}: {exc}") from exc


def _check_errors(plan: EpochPlan, indices: np.ndarray, known: np.ndarray) -> np.ndarray | None:
    """Decide which of the batch's samples failed and apply ``on_error`` to
    them: raise, or record them in the loader's failure log
    (``plan.failures``) and return the rows to keep (None: all of them).
    A sample failed when it was known to before the batch (``known``, the
    statuses its call was given: no values, or a corrupt page, reported
    even where no decoder of the pipeline can fail) or when a decoder
    reported it (the pipeline's status outputs,
    ``CompiledPipeline.status``); a known failure comes first, as the
    decoders copy it into their status."""
    errors = np.where(known != 0, known, plan.pipeline.status())
    bad = np.flatnonzero(errors)
    if not bad.size:
        return None
    if plan.on_error == "raise":
        index, status = int(indices[bad[0]]), int(errors[bad[0]])
        raise DecodeError(f"{plan.reader.path}: sample {index} cannot be decoded "
                          f"({_reason(plan.reader, index, status)})", status=status)
    for row in bad.tolist():
        index = int(indices[row])
        plan.failures.add(index, _reason(plan.reader, index, int(errors[row])))
    return np.flatnonzero(errors == 0) if plan.on_error == "skip" else None


def _reason(reader: Any, index: int, status: int) -> str:
    """The cause: the first field that fails again when read in Python
    (and decoded, :meth:`~slipstream.fields.Field.check_decodes`), with its message (a corrupt page, the decoder's message, a stored size
    the JPEG disagrees with); the native status where every field reads."""
    if index in reader.unreadable:
        return f"it could not be written into {reader.path.name}: {reader.unreadable[index]}"
    for field, kind in reader.fields.items():
        try:
            kind.check_decodes(reader.read(index, field))
        except SlipstreamError as exc:  # the reader's message names file and sample again: keep the cause
            return f"field {field!r}: {exc.detail or exc}"
        except Exception:
            break
    return native.strerror(status)


def _cuda_stream(device: Any) -> Any:
    if device is None or device.type != "cuda":
        return None
    import torch

    return torch.cuda.Stream(device=device)


def _torch_device(name: str | None) -> Any:
    if name is None:
        return None
    import torch

    return torch.device(name)


def _on_stream(stream: Any) -> Any:
    """A context in which torch's current CUDA stream is ``stream`` (none: nothing changes)."""
    if stream is None:
        return contextlib.nullcontext()
    import torch

    return torch.cuda.stream(stream)


def _to_device(values: list[Any], device: Any, stream: Any) -> tuple[list[Any], Any]:
    """``values`` copied to ``device`` on ``stream`` (None: left where the
    pipeline put them), and the event that follows the copies."""
    import torch

    with torch.cuda.stream(stream):
        moved = values if device is None else [v.to(device, non_blocking=True) if isinstance(v, torch.Tensor) else v
                                               for v in values]
        return moved, stream.record_event()


def _used_on_current_stream(batch: Any) -> None:
    """Tell torch's caching allocator that the batch's device tensors, made
    on the loader's stream, are used on the current stream: their memory is
    then not handed to a later batch until the work queued on this stream
    before they are freed is done."""
    import torch

    stream = torch.cuda.current_stream()
    for value in (batch.values() if isinstance(batch, dict) else batch):
        if isinstance(value, torch.Tensor) and value.is_cuda:
            value.record_stream(stream)


def _rows(value: Any, keep: np.ndarray | None) -> Any:
    """The rows ``keep`` of one output's batch (all rows when None)."""
    if keep is None:
        return value
    if isinstance(value, np.ndarray):
        return value[keep]
    torch = sys.modules.get("torch")  # a tensor exists only once torch is imported
    if torch is not None and isinstance(value, torch.Tensor):  # a torch stage's, maybe on a device
        return value[torch.from_numpy(keep).to(value.device)]
    return [value[i] for i in keep.tolist()]


def _to_tensor(value: Any) -> Any:
    """NumPy batches as torch tensors over the same (pinned) memory."""
    if isinstance(value, np.ndarray):
        import torch

        return torch.from_numpy(value)
    return value
