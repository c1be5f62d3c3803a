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
"""

from __future__ import annotations

import queue
import threading
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

from slipstream import native
from slipstream.errors import DecodeError, OperationError, PipelineError, SampleWarning, SlipstreamError

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


class _Failure:
    def __init__(self, error: BaseException) -> None:
        self.error = error


class EpochIterator:
    """Batches of one epoch (or of its remainder, after a resume)."""

    def __init__(self, loader: Any, epoch: int, batches: list[np.ndarray], first_batch: int) -> None:
        self._loader = loader  # kept alive while its batches are iterated
        self.epoch = epoch
        self.position = first_batch  # batches of the epoch handed out so far
        self._remaining = len(batches)
        self._queue: queue.Queue = queue.Queue(maxsize=loader.batches_ahead)
        self._stop = threading.Event()
        self._done = False
        loader.memory.start_epoch(batches, loader.source)
        loader.failure_log.epoch = []
        work = _Work(loader, epoch, batches, self._queue, self._stop)
        self._thread = threading.Thread(target=work.run, name=f"slipstream-loader-epoch{epoch}", daemon=True)
        self._thread.start()

    def __iter__(self) -> EpochIterator:
        return self

    def __len__(self) -> int:
        return self._remaining

    def __next__(self) -> Any:
        if self._done:
            raise StopIteration
        item = self._take()
        while item is _EMPTY:
            self.position += 1
            self._remaining -= 1
            item = self._take()
        if item is _END:
            self.close()
            self._loader._epoch_finished(self)
            raise StopIteration
        if isinstance(item, _Failure):
            self.close()
            raise item.error
        outputs, ready = item
        if ready is not None:  # the copy to the device was queued on the loader's stream
            import torch

            torch.cuda.current_stream().wait_event(ready)
        self.position += 1
        self._remaining -= 1
        return outputs

    def _take(self) -> Any:
        """The thread's next item, watching that the thread is alive."""
        while True:
            try:
                return self._queue.get(timeout=_POLL_S)
            except queue.Empty:
                if not self._thread.is_alive():
                    self.close()
                    raise SlipstreamError("the loader thread stopped without a result") from None

    def close(self) -> None:
        """Stop the thread and wait for it (idempotent)."""
        self._done = True
        self._stop.set()
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


class _Work:
    """What the thread runs; holds the loader's parts, not the iterator."""

    def __init__(self, loader: Any, epoch: int, batches: list[np.ndarray], out: queue.Queue,
                 stop: threading.Event) -> None:
        self.compiled, self.memory, self.source = loader.compiled, loader.memory, loader.source
        self.reader, self.names, self.as_dict = loader.reader, loader.output_names, loader.as_dict
        self.device, self.threads = loader.device, loader.num_threads
        self.on_error, self.failure_log = loader.on_error, loader.failure_log
        self.epoch, self.batches, self.out, self.stop = epoch, batches, out, stop
        self.convert: Callable[[Any], Any] = _to_tensor

    def run(self) -> None:
        try:
            import numba

            if self.threads is not None:
                numba.set_num_threads(self.threads)  # applies to this thread's parallel launches
            stream, pending = self._cuda_stream(), []
            for b, indices in enumerate(self.batches):
                if self.stop.is_set():
                    return
                while len(pending) >= self.compiled.slots:  # the copy out of this slot must be done
                    pending.pop(0).synchronize()
                try:
                    self.memory.prepare(b)
                    outputs = self._run(b, indices)
                except Exception:
                    self.reader.verify()  # a file changed under the loader explains a failure best
                    raise
                # Nothing read from a file truncated or rewritten under the
                # loader is handed on (the mapping reads lost pages as zeros).
                self.reader.verify()
                self.memory.release(b)
                keep = self._check_errors(indices)
                if keep is not None and not keep.size:
                    if not self._put(_EMPTY):
                        return
                    continue
                values = [self.convert(_rows(outputs[name], keep)) for name in self.names]
                ready = None
                if stream is not None:
                    values, ready = self._to_device(values, stream)
                    pending.append(ready)
                batch = dict(zip(self.names, values)) if self.as_dict else tuple(values)
                if not self._put((batch, ready)):
                    return
            self._put(_END)
        except BaseException as exc:  # reaches the user's thread
            self._put(_Failure(exc))

    def _run(self, b: int, indices: np.ndarray) -> Any:
        try:
            return self.compiled(indices, self.epoch)
        except OperationError as exc:
            raise OperationError(f"{self.reader.path}: batch {b} of epoch {self.epoch}: {exc}") from exc.__cause__
        except SlipstreamError:
            raise
        except Exception as exc:
            shown = ", ".join(map(str, indices[:8].tolist())) + (", ..." if indices.size > 8 else "")
            raise PipelineError(f"{self.reader.path}: batch {b} of epoch {self.epoch} (samples {shown}) failed: "
                                f"{type(exc).__name__}: {exc}") from exc

    def _put(self, item: Any) -> bool:
        while not self.stop.is_set():
            try:
                self.out.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def _check_errors(self, indices: np.ndarray) -> np.ndarray | None:
        """Apply ``on_error`` to the batch's failed samples: raise, or record
        them and return the rows to keep (None: all of them)."""
        errors = self.source.errors[indices]
        bad = np.flatnonzero(errors)
        if not bad.size:
            return None
        self.source.errors[indices] = 0
        if self.on_error == "raise":
            index, status = int(indices[bad[0]]), int(errors[bad[0]])
            raise DecodeError(f"{self.reader.path}: sample {index} cannot be decoded ({self._reason(index, status)})",
                              status=status)
        for row in bad.tolist():
            index = int(indices[row])
            self.failure_log.add(index, self._reason(index, int(errors[row])))
        return np.flatnonzero(errors == 0) if self.on_error == "skip" else None

    def _reason(self, index: int, status: int) -> str:
        """The native status, with the cause from reading the sample again
        in Python where that fails as well (a corrupt page, the decoder's
        message, a stored size the JPEG disagrees with)."""
        try:
            self.reader[index]
        except SlipstreamError as exc:  # the reader's message names file and sample again: keep the cause
            return f"{native.strerror(status)}: {exc.detail or exc}"
        except Exception:
            pass
        return native.strerror(status)

    def _cuda_stream(self) -> Any:
        if self.device is None or self.device.type != "cuda":
            return None
        import torch

        return torch.cuda.Stream(device=self.device)

    def _to_device(self, values: list[Any], stream: Any) -> tuple[list[Any], Any]:
        import torch

        with torch.cuda.stream(stream):
            moved = [v.to(self.device, non_blocking=True) if isinstance(v, torch.Tensor) else v for v in values]
            return moved, stream.record_event()


def _rows(value: Any, keep: np.ndarray | None) -> Any:
    """The rows ``keep`` of one output's batch (all rows when None)."""
    if keep is None:
        return value
    if isinstance(value, np.ndarray):
        return value[keep]
    if type(value).__module__.startswith("torch"):  # a torch stage's tensor, maybe on a device
        import torch

        return value[torch.from_numpy(keep).to(value.device)]
    return [value[i] for i in keep.tolist()]


def _to_tensor(value: Any) -> Any:
    """NumPy batches as torch tensors over the same (pinned) memory."""
    if isinstance(value, np.ndarray):
        import torch

        return torch.from_numpy(value)
    return value
