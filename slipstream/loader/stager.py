"""What a loader needs of a stager: the part that makes each batch's bytes
readable in place before the compiled pipeline decodes it.

Three stagers implement it: :class:`slipstream.loader.staging.Stager`
fetches the pages of a finished dataset from its page store;
:class:`slipstream.loader.arrival_staging.ArrivalStager` waits for the
samples of a first epoch to arrive in the file being written; and
:class:`slipstream.loader.first_epoch.FormingStager` does the same for
batches formed as a stream of unknown length is read.  The loader and its
epoch iterator use nothing else of them, so they never ask which one they
have.

A stager writes nothing the decoders read: what preparing a batch finds
out (samples in corrupt pages, records that arrived) it reports as a
:class:`Staged`, which the epoch iterator applies.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from slipstream import native

CORRUPT = int(native.Status.ECORRUPT)
"""The known failure status of a sample reported in :attr:`Staged.corrupt`:
its bytes lie in a page that failed its check."""


@dataclasses.dataclass(frozen=True, eq=False)
class Staged:
    """What a stager found out making a batch ready, for the epoch iterator
    to apply before the batch runs.

    Attributes:
        corrupt: dataset indices of the batch's samples whose values lie in
            a page that failed its checksum: known failures, which the
            decoders do not decode and ``on_error`` applies to.
        arrived: dataset indices of the samples whose records arrived
            (a first epoch): they must reach the decoders' columns
            (:meth:`slipstream.fields.decoders.DecodeSource.refresh`) before
            the batch runs, and what is known of their failures is what the
            dataset records now; None: no record changed.
    """

    corrupt: np.ndarray = dataclasses.field(default_factory=lambda: np.zeros(0, np.int64))
    arrived: np.ndarray | None = None


@runtime_checkable
class Stager(Protocol):
    """Brings each batch's bytes into :attr:`storage` ahead of the decoders.

    The epoch iterator calls :meth:`start_epoch` once per epoch, then, in
    its thread, :meth:`prepare` before each batch runs, :meth:`verify` after
    it (and after a failure), and :meth:`release` once the batch is done;
    the loader reads :attr:`storage` when it binds its decoders and calls
    :meth:`close` when it lets the stager go.
    """

    storage: np.ndarray
    """The bytes the decoders read every value from, in place at the offset its record gives."""

    def start_epoch(self, batches: Sequence[np.ndarray] | Iterable[np.ndarray], source: Any) -> None:
        """Plan an epoch of ``batches`` (dataset indices per batch, in
        order; batches formed as a stream is read have no length) read by
        the decoders' ``source``."""

    def prepare(self, batch: int) -> Staged:
        """Make batch ``batch``'s bytes readable in place, waiting as long
        as that takes, and report what that found out (its samples in
        corrupt pages, the records that arrived)."""

    def release(self, batch: int) -> None:
        """Batch ``batch`` is done: what only it needed may go."""

    def verify(self) -> None:
        """Raise when bytes read in place may be wrong (a file changed under the loader)."""

    def close(self) -> None:
        """Let go of everything the stager holds."""


__all__ = ["CORRUPT", "Staged", "Stager"]
