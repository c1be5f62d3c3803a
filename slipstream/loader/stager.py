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
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np


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

    def prepare(self, batch: int) -> None:
        """Make batch ``batch``'s bytes readable in place and its known
        failures marked in the decoders' source, waiting as long as that
        takes."""

    def release(self, batch: int) -> None:
        """Batch ``batch`` is done: what only it needed may go."""

    def verify(self) -> None:
        """Raise when bytes read in place may be wrong (a file changed under the loader)."""

    def close(self) -> None:
        """Let go of everything the stager holds."""


__all__ = ["Stager"]
