"""What a loader did, and whether the training loop waited for it:
:meth:`slipstream.Loader.stats`.

Two threads keep the figures.  The training loop's thread measures how
long each ``next()`` blocked (``waiting``) and the time from a batch handed
out to the next ``next()`` (``step``: the training step, as the loader sees
it); their ratio says whether the loader is the bottleneck.  The loader's
thread measures where its own time goes per batch: bringing the samples'
pages in (``reading``), the compiled stages (``pipeline``, and each
stage's share), the checks of failed samples (``checks``), the copy to the
device (``to_device``), and the time it waited for room because the batches
ahead were all made (``ahead``: the loader was faster than the step).  Each
is one ``time.perf_counter()`` pair per batch, nothing per sample.

``logging.getLogger("slipstream.loader")`` at ``INFO`` logs the epoch's
figures when it ends; ``torch.profiler`` traces of the training loop show
each of its waits for a batch as a range ``slipstream.next``.
"""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Mapping
from typing import Any

LOG = logging.getLogger("slipstream.loader")

PHASES = ("reading", "pipeline", "checks", "to_device", "ahead")
"""The loader thread's phases, in the order a batch goes through them."""

BOTTLENECK_SHARE = 0.1
"""The waiting share above which the loader is said to hold the training loop back."""


@dataclasses.dataclass(frozen=True)
class LoaderStats:
    """A loader's figures since it was made or last reset (see the module
    docstring).  All times in seconds.

    Attributes:
        epoch: the epoch running or last run.
        batches: batches handed to the training loop.
        samples: samples in them.
        waiting: time the training loop blocked in ``next()``.
        step: time from each batch handed out to the following ``next()``.
        phases: the loader thread's time by phase (:data:`PHASES`).
        stages: the compiled pipeline's time by stage (its first call's
            compile left out), keyed as ``explain()`` names the stages.
        operations: the compiled stages' time shared among their
            operations by the processor cycles each took, keyed
            ``"pipeline: Operation"``
            (:meth:`~slipstream.compiler.CompiledPipeline.operation_seconds`).
        compiling: time the first batch spent compiling the pipeline's
            stages (or loading them from the cache), which ``waiting`` and
            the ``pipeline`` phase include and the shares leave out.
        skipped: samples that failed and were left out or replaced.
    """

    epoch: int
    batches: int
    samples: int
    waiting: float
    step: float
    phases: Mapping[str, float]
    stages: Mapping[str, float]
    operations: Mapping[str, float]
    compiling: float
    skipped: int

    @property
    def _loop(self) -> float:
        """The training loop's time, compiling left out."""
        return max(0.0, self.waiting - self.compiling) + self.step

    @property
    def waiting_share(self) -> float:
        """The share of the training loop's time spent waiting for batches,
        compiling left out (0: never waited; 1: did nothing else); 0 before
        any batch."""
        loop = self._loop
        return max(0.0, self.waiting - self.compiling) / loop if loop > 0 else 0.0

    @property
    def samples_per_s(self) -> float:
        """Samples handed out per second of the training loop's time, compiling left out."""
        loop = self._loop
        return self.samples / loop if loop > 0 else 0.0

    def __sub__(self, earlier: LoaderStats) -> LoaderStats:
        """The figures between ``earlier`` and these (``earlier``'s epoch
        to this one's): what one epoch did, say."""
        return LoaderStats(self.epoch, self.batches - earlier.batches, self.samples - earlier.samples,
                           self.waiting - earlier.waiting, self.step - earlier.step,
                           _minus(self.phases, earlier.phases),
                           _minus(self.stages, earlier.stages), _minus(self.operations, earlier.operations),
                           self.compiling - earlier.compiling, self.skipped - earlier.skipped)

    @property
    def bottleneck(self) -> bool:
        """Whether the loader holds the training loop back: it waited for
        more than :data:`BOTTLENECK_SHARE` of its time."""
        return self.waiting_share > BOTTLENECK_SHARE

    def __str__(self) -> str:
        busy = sum(self.phases[name] for name in PHASES if name != "ahead") - self.compiling
        lines = [f"epoch {self.epoch}: {self.batches} batches, {self.samples} samples, "
                 f"{self.samples_per_s:,.1f} samples/s; the training loop waited {self.waiting_share:.1%} of its "
                 f"time ({max(0.0, self.waiting - self.compiling):.3f} s of {self._loop:.3f} s): "
                 + ("the loader is the bottleneck" if self.bottleneck else "the loader keeps up")
                 + (f"; compiling took {self.compiling:.3f} s more" if self.compiling else "")]
        phases = {**self.phases, "pipeline": max(0.0, self.phases["pipeline"] - self.compiling)}
        lines.append("loader thread: " + ", ".join(
            f"{name} {phases[name]:.3f} s" + (f" ({phases[name] / busy:.0%})" if busy > 0 and name != "ahead" else "")
            for name in PHASES))
        if self.stages:
            total = sum(self.stages.values())
            lines.append("stages: " + ", ".join(f"{name} {seconds:.3f} s" + (f" ({seconds / total:.0%})" if total
                                                                             else "")
                                               for name, seconds in self.stages.items()))
        if self.operations:
            total = sum(self.operations.values())
            lines.append("operations: " + ", ".join(
                f"{name} {seconds:.3f} s" + (f" ({seconds / total:.0%})" if total else "")
                for name, seconds in sorted(self.operations.items(), key=lambda item: -item[1])))
        if self.skipped:
            lines.append(f"{self.skipped} samples skipped (loader.failure_log says which and why)")
        return "\n".join(lines)


class StatsRecorder:
    """The counters behind :class:`LoaderStats`: the training loop's thread
    adds to ``waiting`` and ``step``, the loader's thread to the phases;
    each addition is one float operation, atomic under the GIL."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset({}, {}, 0.0, 0)

    def reset(self, stages: Mapping[str, float], operations: Mapping[str, float], compiling: float,
              skipped: int) -> None:
        """Start the figures again from zero; ``stages``, ``operations``,
        ``compiling`` and ``skipped`` are the pipeline's and the failure
        log's running totals now."""
        with self._lock:
            self.batches = self.samples = 0
            self.waiting = self.step = 0.0
            self.phases = dict.fromkeys(PHASES, 0.0)
            self.epoch: int | None = None  # that of the latest batch handed out
            self._handed_at: float | None = None
            self._base = (dict(stages), dict(operations), compiling, skipped)

    def waited(self, seconds: float, samples: int, epoch: int) -> None:
        """The training loop got a batch of ``samples`` of ``epoch`` after blocking ``seconds``."""
        self.waiting += seconds
        self.batches += 1
        self.samples += samples
        self.epoch = epoch
        self._handed_at = time.perf_counter()

    def asking(self) -> None:
        """The training loop asks for the next batch: the step since the last one ended."""
        if self._handed_at is not None:
            self.step += time.perf_counter() - self._handed_at
            self._handed_at = None

    def phase(self, name: str, seconds: float) -> None:
        """The loader thread spent ``seconds`` in phase ``name``."""
        self.phases[name] += seconds

    def snapshot(self, epoch: int, stages: Mapping[str, float], operations: Mapping[str, float], compiling: float,
                 skipped: int) -> LoaderStats:
        """The figures now, labelled with the epoch of the latest batch (or
        ``epoch`` before any); ``stages``, ``operations``, ``compiling`` and
        ``skipped`` are the running totals of the pipeline and the failure
        log, counted here from the last reset."""
        with self._lock:
            stage_base, operation_base, compile_base, skipped_base = self._base
            return LoaderStats(epoch if self.epoch is None else self.epoch, self.batches, self.samples, self.waiting,
                               self.step, dict(self.phases), _minus(stages, stage_base),
                               _minus(operations, operation_base), compiling - compile_base, skipped - skipped_base)


def _minus(totals: Mapping[str, float], base: Mapping[str, float]) -> dict[str, float]:
    """``totals`` less ``base``, name by name (a name ``base`` lacks counts from 0)."""
    return {name: seconds - base.get(name, 0.0) for name, seconds in totals.items()}


class Timed:
    """A phase of the loader thread timed into a recorder (none: not timed)::

        with Timed(recorder, "pipeline"):
            ...
    """

    def __init__(self, recorder: StatsRecorder | None, phase: str) -> None:
        self.recorder, self.phase = recorder, phase

    def __enter__(self) -> Timed:
        self.started = time.perf_counter()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.recorder is not None:
            self.recorder.phase(self.phase, time.perf_counter() - self.started)


def profiled(name: str) -> Any:
    """A ``torch.profiler`` range named ``name`` (``record_function``) in
    the calling thread: it costs a few microseconds, and shows the loader
    in the traces people take of their training."""
    from torch.autograd.profiler import record_function

    return record_function(name)


__all__ = ["BOTTLENECK_SHARE", "LOG", "LoaderStats", "PHASES", "StatsRecorder", "Timed", "profiled"]
