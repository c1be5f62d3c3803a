"""The stager of a loader's first epoch: each batch runs once its samples
have arrived in the file being written
(:class:`~slipstream.format.arriving.ArrivingFile`), read from the source
and encoded by :class:`slipstream.loader.first_epoch.FirstEpoch`.

The first epoch makes the samples arrive, in the order the epoch asks for
them; this stager only waits for each batch's, makes them readable in place
and reports that their records arrived
(:attr:`~slipstream.loader.stager.Staged.arrived`), for the epoch iterator
to bring into the decoders' columns.  A wait can be stopped from
another thread (:meth:`ArrivalStager.stop_waiting`), since a sample may wait
for a source read that stalls.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from concurrent.futures import Future, wait
from typing import Any

import numpy as np

from slipstream.format.arriving import ArrivingFile
from slipstream.loader.stager import Staged

_POLL_S = 0.1
"""How often, in seconds, a wait for a batch's samples looks whether it was stopped."""


class StoppedWaiting(Exception):
    """The wait for a batch's samples was stopped (:meth:`ArrivalStager.stop_waiting`)."""


class ArrivalStager:
    """The stager of a first epoch: before each batch runs, its samples
    have arrived (encoded by ``bring``) and are reported arrived, so that
    their records reach the compiled pipeline's columns (a
    :class:`~slipstream.loader.stager.Stager`).

    Args:
        file: the file the samples arrive in.
        bring: ``bring(batches)`` starts making the samples of ``batches``
            (in order) arrive, and gives one future per batch, done when its
            samples have arrived (and raising why one could not), with the
            file's :attr:`~ArrivingFile.arrivals` then.
        give_up_file: ``give_up_file(error)``, for an ``OSError`` writing
            the file: whether the file was given up for memory
            (:meth:`ArrivingFile.keep_in_memory`), so that the batch's
            samples are brought again; False: the error stands.
    """

    pages_fetched = 0

    def __init__(self, file: ArrivingFile, bring: Callable[[list[np.ndarray]], list[Future[int]]],
                 give_up_file: Callable[[OSError], bool]) -> None:
        self.file = file
        self.storage = file.range.storage
        self.pages_ahead = 0
        self._bring, self._give_up_file = bring, give_up_file
        self._ready: list[Future[int]] = []
        self._batches: list[np.ndarray] = []
        self._arrivals: dict[int, int] = {}  # batch -> the file's arrivals once its samples had arrived
        self._stopped = threading.Event()

    def start_epoch(self, batches: Sequence[np.ndarray], source: Any) -> None:
        """Start making the samples of ``batches`` arrive, in order (those
        arrived already are not read again); ``source``, what the decoders
        read, is not needed."""
        batches = list(batches)
        self._batches = batches
        self._arrivals = {}
        self._stopped = threading.Event()
        self._ready = self._bring(batches)

    def stop_waiting(self) -> None:
        """Make :meth:`prepare`, in the loader thread, stop waiting for the
        epoch's samples (raising :class:`StoppedWaiting`), without waiting for
        anything: the epoch was left, and a sample may wait for a source read
        that stalls.  The samples go on arriving."""
        self._stopped.set()

    def prepare(self, batch: int) -> Staged:
        """Wait until ``batch``'s samples have arrived, make them readable
        in place and report them arrived.  When writing the file fails and
        it is given up for memory, the samples of this batch and the next
        ones arrive again, in memory.

        Raises:
            FieldValueError: a sample of the batch (or before it) cannot be
                read or encoded, naming it.
            OSError: the file cannot be written, nor given up.
        """
        try:
            self._arrivals[batch] = self._arrived(batch)
            self.file.publish()
        except OSError as exc:
            if not self._give_up_file(exc):
                raise
            self._ready[batch:] = self._bring(self._batches[batch:])
            self._arrivals[batch] = self._arrived(batch)
        return Staged(arrived=self._batches[batch])

    def _arrived(self, batch: int) -> int:
        """Wait until ``batch``'s samples have arrived: the file's arrivals then."""
        ready, stopped = self._ready[batch], self._stopped
        while not wait([ready], timeout=_POLL_S).done:
            if stopped.is_set():
                raise StoppedWaiting(f"the epoch over {self.file.path} was left")
        return ready.result()

    def release(self, batch: int) -> None:
        """In memory, give back the batch's samples (and those before);
        the pages of a file stay mapped until it is complete."""
        self.file.forget(self._arrivals.pop(batch))

    def verify(self) -> None:
        """Nothing can change under it."""

    def close(self) -> None:
        """The first epoch's owner closes the file."""


__all__ = ["ArrivalStager", "StoppedWaiting"]
