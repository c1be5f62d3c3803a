"""The order of a loader's epoch 0, and the dataset its states name.

Epoch 0 follows the loader's order over the dataset file
(:data:`OVER_FILE`), except when a first epoch writes the file as it
trains (:mod:`slipstream.loader.first_epoch`) and cannot follow that order:

- over a stream (:data:`STREAMED`), epoch 0 is the bounded shuffle of
  :func:`slipstream.loader.orders.stream_order` (or the stream's own order,
  for ``"sequential"``), which ranks share place by place, so that no rank
  reads far into the stream;
- in ``"quasi_random"`` order over a source read in any order
  (:data:`RANDOM`), epoch 0 is ``"random"``: the file has no pages to
  order by yet.

A state taken in such an epoch 0 names the dataset by the file the first
epoch writes (its records are not all known yet), and in that order: a run
resumed from it, over the finished file or over a first epoch writing it
again, goes on in the same order.  That is why the order of epoch 0 outlives
the first epoch that chose it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from slipstream.loader import orders


class EpochZero:
    """How epoch 0 is ordered (one of :data:`OVER_FILE`, :data:`STREAMED`
    and :data:`RANDOM`), and what its states call the dataset."""

    words = "of"
    """How the dataset's name in a state says the first epoch wrote the file."""

    strided = False
    """Whether ranks share epoch 0's order place by place (:func:`orders.shard`) rather than in blocks."""

    def order(self, kind: str, indices: np.ndarray, pages: np.ndarray | None, seed: int, window_pages: int,
              size: int) -> np.ndarray:
        """Epoch 0's order of ``indices`` (a dataset of ``size`` samples) for
        the loader's order ``kind``, the file's ``pages`` (None: no file
        yet), ``seed`` and ``window_pages``."""
        return orders.epoch_order(kind, indices, pages, seed, 0, window_pages)

    def name(self, reader: Any) -> str:
        """The dataset of a state taken while a first epoch, in this order,
        wrote ``reader``'s file: the file's name, which its content
        decides, stands for its records (not all known yet)."""
        return f"{len(reader)} samples, first epoch {self.words} {reader.path.name}"

    def in_state(self, reader: Any, dataset: str) -> str:
        """The dataset a state taken in epoch 0 names, ``dataset`` being the
        one a state of any other epoch names: a first epoch's order is
        resumed by the name of its file."""
        return self.name(reader)

    def __repr__(self) -> str:
        return f"EpochZero({self.words!r})"


class _OverFile(EpochZero):
    """Epoch 0 in the loader's order over the file, as every other epoch."""

    def in_state(self, reader: Any, dataset: str) -> str:
        """``dataset``: nothing sets epoch 0 apart."""
        return dataset


class _Streamed(EpochZero):
    """Epoch 0 as a stream's first epoch reads it."""

    words = "streamed into"
    strided = True

    def order(self, kind: str, indices: np.ndarray, pages: np.ndarray | None, seed: int, window_pages: int,
              size: int) -> np.ndarray:
        """The stream's bounded shuffle, for any order but ``"sequential"``."""
        if kind == "sequential":
            return super().order(kind, indices, pages, seed, window_pages, size)
        return orders.stream_order(indices, size, seed, 0)


class _Random(EpochZero):
    """Epoch 0 of a ``"quasi_random"`` first epoch: random, without pages."""

    words = "in random order into"

    def order(self, kind: str, indices: np.ndarray, pages: np.ndarray | None, seed: int, window_pages: int,
              size: int) -> np.ndarray:
        """``"random"`` in place of ``"quasi_random"``."""
        return super().order("random" if kind == "quasi_random" else kind, indices, pages, seed, window_pages, size)


OVER_FILE: EpochZero = _OverFile()
"""Epoch 0 in the loader's order over the file."""

STREAMED: EpochZero = _Streamed()
"""Epoch 0 in a stream's order (its bounded shuffle)."""

RANDOM: EpochZero = _Random()
"""Epoch 0 random, for a ``"quasi_random"`` first epoch without the file's pages."""

EPOCH_ZEROS = (OVER_FILE, STREAMED, RANDOM)
"""Every order epoch 0 can take."""


def stream_name(reader: Any) -> str:
    """The dataset of a state taken in epoch 0 over a stream that does not
    say its length (whether it has ended yet or not, so that states do not
    depend on timing): the name of the file it is written into."""
    return f"a stream of unknown length, first epoch {STREAMED.words} {reader.path.name}"


__all__ = ["EPOCH_ZEROS", "EpochZero", "OVER_FILE", "RANDOM", "STREAMED", "stream_name"]
