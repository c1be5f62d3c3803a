"""Functions the writer tests run in other processes (importable by name,
as spawned processes and ``multiprocessing.Pool`` workers need)."""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path

import numpy as np

import slipstream as ss
from slipstream.format import write_lock

SAMPLES = 400
"""Samples of each writer's dataset."""


def source(value: int) -> dict[str, np.ndarray]:
    """A dataset every sample of which says which writer wrote it."""
    return {"x": np.full((SAMPLES, 3000), value, np.uint8), "y": np.full(SAMPLES, value, np.int64)}


def write(folder: Path, value: int, **options) -> ss.format.WriteResult:
    """:func:`source` ``value`` written over ``folder`` as three shards."""
    return ss.write(folder, source(value), shards=3, overwrite=True, page_size=1 << 14, workers=0, verbose=False,
                    **options)


def write_rounds(folder: str, value: int, rounds: int, start, done, waits) -> None:
    """Write ``folder`` once a round, at the same moment as another writer
    (``start`` and ``done``: barriers with it and the test); report to
    ``waits`` how often this one had to wait for the other."""
    waited = []

    class Counting(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            waited.append(record.getMessage())

    logging.getLogger(write_lock.__name__).addHandler(Counting())
    for _ in range(rounds):
        start.wait()
        write(Path(folder), value)
        done.wait()
    waits.put(len(waited))


def write_in_pool_worker(folder: str) -> tuple[int, list[str]]:
    """``ss.write`` with worker processes, as a ``multiprocessing.Pool``
    task (in a daemonic process); the samples written and the warnings."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = ss.write(os.path.join(folder, "x.slip"), {"x": np.arange(1000)}, workers=2, verbose=False)
    return result.samples, [str(w.message) for w in caught]
