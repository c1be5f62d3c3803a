"""Compiling a graph and running it on batches: the standalone entry point
of the compiler, usable on in-memory arrays without any file or loader."""

from __future__ import annotations

import dataclasses
import logging
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numba
import numpy as np

from slipstream.compiler import symbols, threads
from slipstream.compiler.codegen import (StageSource, generate_stage, input_arrays, load_diagnostic, load_stage,
                                         typing_error)
from slipstream.compiler.graph import Graph, Internal, check_pipeline, unwrapped
from slipstream.compiler.handles import OutputRef, output_name
from slipstream.compiler.jit import cache_state
from slipstream.compiler.operation import Decoder, torch_dtype
from slipstream.compiler.rewrites import fold
from slipstream.compiler.state import Allocation, State
from slipstream.compiler.symbols import Role, Symbol
from slipstream.errors import ArgumentError, OperationError, PipelineError

SINGLE_OUTPUT = "output"

LOGGER = logging.getLogger("slipstream.compiler")
"""Where each jit stage's first call is recorded (INFO): compiled, loaded from
the compile cache or reused, how long it took and where the cache is."""

MAX_THREADS = 1024
"""Most threads :meth:`Pipeline.compile` runs a compiled stage on: each has
its own row of every per-thread buffer."""


@dataclasses.dataclass(frozen=True, eq=False)
class ArraySource(Decoder):
    """Decoder reading sample ``index`` of an in-memory array (its first axis
    indexes samples); the sample is copied into the pipeline's memory."""

    array: np.ndarray

    def __post_init__(self) -> None:
        array = np.ascontiguousarray(self.array)
        if array.ndim < 1 or array.shape[0] == 0:
            raise ValueError(f"ArraySource needs an array with at least one sample, got shape {array.shape}")
        object.__setattr__(self, "array", array)

    def inputs(self) -> tuple[np.ndarray, ...]:
        return (self.array,)

    def declare(self, state: State | None) -> tuple[State, Allocation]:
        shape = self.array.shape[1:]
        return State(shape=shape, dtype=self.array.dtype), Allocation(shape, self.array.dtype)

    def generate_code(self):
        from slipstream.compiler.codegen import copy_sample

        if self.array.ndim == 1:

            def read_scalar(data, index, out, key):
                out[0] = data[index]
                return out

            return read_scalar

        def read(data, index, out, key):
            return copy_sample(out, data[index])

        return read

    def fingerprint(self) -> str:
        # The data is a stage argument, not compiled in: only its type matters.
        return f"ArraySource:{self.array.dtype}:{self.array.ndim}"

    def __repr__(self) -> str:
        # Without the sample count: the stage's source names its nodes, and a dataset of another length must not
        # make it another stage to compile.
        return f"ArraySource({self.array.dtype} samples of shape {self.array.shape[1:]})"


def _prepared(name: str, given: Any) -> Sequence[Any] | Internal:
    """Pipeline ``name``'s entries checked and folded (as the loader's: ``ToTensor()`` then
    ``Normalize(...)`` run as one operation), an :class:`Internal` one's kept internal."""
    entries, output = unwrapped(given)
    prepared = fold(check_pipeline(name, entries))
    return prepared if output else Internal(prepared)


class Pipeline:
    """Pipelines to compile: ``{output_name: [decoder, operations...]}``, or
    one list for a single output; a pipeline that others read but that is
    no output is given as :class:`~slipstream.compiler.graph.Internal`.

    Example::

        compiled = Pipeline([ArraySource(images), Crop(...), Normalize(...)]).compile(batch_size=64)
        batch = compiled(np.arange(64))         # samples 0..63, processed
    """

    def __init__(self, pipelines: Mapping[OutputRef, Sequence[Any] | Internal] | Sequence[Any]) -> None:
        self.single = not isinstance(pipelines, Mapping)
        given = {SINGLE_OUTPUT: pipelines} if self.single else dict(pipelines)
        self.pipelines = {key: _prepared(output_name(key), entries) for key, entries in given.items()}

    def compile(self, batch_size: int, *, seed: int = 0, slots: int = 2, verbose: bool = False,
                threads: int | None = None) -> CompiledPipeline:
        """Build the graph, generate and compile its stages, allocate memory.

        Args:
            batch_size: most samples per call.
            seed: seed of every random operation.
            slots: number of batches whose outputs stay valid: a call reuses
                the memory of the call ``slots`` calls before it.
            verbose: a progress bar while the first call compiles the stages
                (machine code is made on first use, or loaded from the disk
                cache); shown on a terminal only, and only when that takes
                longer than half a second.
            threads: how many threads a compiled stage runs on at once, 1 to
                :data:`MAX_THREADS` (default ``NUMBA_NUM_THREADS``, the CPUs
                this process may use).
        """
        if batch_size < 1 or slots < 1:
            raise ArgumentError(f"batch_size ({batch_size}) and slots ({slots}) must be positive")
        if threads is not None and (isinstance(threads, bool) or not isinstance(threads, int)
                                    or not 1 <= threads <= MAX_THREADS):
            raise ArgumentError(f"threads must be None or an integer from 1 to {MAX_THREADS}, got {threads!r}")
        return CompiledPipeline(Graph(self.pipelines), batch_size, seed, slots, self.single, verbose, threads)


@dataclasses.dataclass(frozen=True)
class _Batch:
    """What one call binds to every stage's batch parameters."""

    indices: np.ndarray  # the samples' dataset indices, int64
    draws: np.ndarray  # their draw identities, int64: the indices themselves unless repeated
    known: np.ndarray  # their failure statuses known before the call, int32: 0 where none is known
    count: int
    epoch: np.int64


class CompiledPipeline:
    """A compiled pipeline: call it with the dataset indices of a batch.

    Calls must not overlap: the memory of a call (its ring slot and the
    per-thread scratch of its compiled stages) is reused by the next ones.
    The loader runs one compiled pipeline from its single worker thread,
    and each compiled stage on ``threads`` threads (default
    ``NUMBA_NUM_THREADS``, the CPUs this process may use).
    """

    def __init__(self, graph: Graph, batch_size: int, seed: int, slots: int, single: bool,
                 verbose: bool = False, threads: int | None = None) -> None:
        self.graph = graph
        self.verbose = verbose
        self.batch_size = batch_size
        self.seed = int(seed)
        self.slots = slots
        self._single = single
        self.sources: list[StageSource] = [generate_stage(graph, s) for s in graph.stages]
        self.functions = [load_stage(graph, source) for source in self.sources]
        scratch = set().union(*(source.scratch for source in self.sources))
        self.threads = threads or numba.config.NUMBA_NUM_THREADS
        """How many calls of a compiled stage run at once, each in a thread of its own."""
        self.buffers = {b.symbol: _allocate((slots, batch_size, *b.allocation.shape), b.allocation.dtype)
                        for b in graph.buffers() if b.symbol not in scratch}
        self.scratch = {b.symbol: np.zeros((self.threads, *b.allocation.shape), b.allocation.dtype)
                        for b in graph.buffers() if b.symbol in scratch}
        parameters = {p for source in self.sources for p in source.params}
        self.keys = {p: np.zeros(batch_size, np.uint64) for p in sorted(parameters, key=str) if p.role is Role.KEYS}
        self._inputs: dict[Symbol, np.ndarray] = {}
        self.tables: int | None = None
        """The version of the decoders' input arrays bound (see :meth:`bind_inputs`); None: as compiled."""
        self.bind_inputs(None)
        self.planned = graph
        self._bind_shapes(graph)
        self._done = np.zeros(batch_size, np.uint8)  # which samples a compiled stage finished (see codegen)
        self._slot = 0
        self._statuses: list[np.ndarray] = []  # the last call's status outputs, as its stages returned them
        self._count = 0  # the last call's number of samples
        self._compiled = [False] * len(self.sources)
        self._stage_seconds = [0.0] * len(self.sources)  # each stage's time over its calls but its first
        # Each compiled stage's cycles per node, per concurrent call (symbols.TICKS), what of them earlier calls
        # were counted for, and each node's seconds: each call's time shared by the cycles it added.
        nodes = {source.index: len(graph.nodes_in(source.index)) for source in self.sources if source.jit}
        self._ticks = {stage: np.zeros((self.threads, count), np.int64) for stage, count in nodes.items()}
        self._ticks_counted = {stage: np.zeros(count, np.int64) for stage, count in nodes.items()}
        self._node_seconds = {stage: np.zeros(count) for stage, count in nodes.items()}
        self.compile_seconds = 0.0
        """Seconds the first calls of the compiled stages took (compiling them, or loading them from the cache)."""
        # Asynchronous copies to a CUDA device read a slot's host memory after
        # the call returns; the event recorded after them is waited on before
        # that slot is written again.
        self.cuda_device: str | None = next((str(node.state.device) for node in graph.nodes
                                             if str(node.state.device).startswith("cuda")), None)
        """The CUDA device the pipeline's torch stages put values on, or None."""
        self._uses_cuda = self.cuda_device is not None
        self._slot_read: list[Any] = [None] * slots

    def reshape(self, graph: Graph) -> None:
        """Run from now on at the shapes and values of ``graph``: the graph
        of the same pipelines with other values and sizes (a crop's output
        size within its largest, :class:`~slipstream.ops.crops.Resizable`),
        whose stages have the compiled ones' source and whose every buffer
        fits in the memory planned for it.  Compiles nothing.  Calls must
        not overlap with it.

        Raises:
            PipelineError: ``graph`` needs other code (another stage
                source) or more memory than was planned (the message says
                which).
        """
        sources = [generate_stage(graph, s) for s in graph.stages]
        if [s.source for s in sources] != [s.source for s in self.sources]:
            raise PipelineError("these pipelines need other compiled code than the one compiled: only values and "
                                "sizes within a crop's largest can change without compiling (build a new loader)")
        planned = {b.symbol: b.allocation for b in self.planned.buffers()}
        for buffer in graph.buffers():
            memory, wanted = planned.get(buffer.symbol), buffer.allocation
            if memory is None or memory.dtype != wanted.dtype or len(memory.shape) != len(wanted.shape) or \
                    wanted.nbytes > memory.nbytes:
                raise PipelineError(f"{buffer.node.describe()} needs {wanted.shape} {wanted.dtype} per sample, "
                                    f"where {memory.shape if memory else 'nothing'} was planned: it cannot grow past "
                                    f"the memory its largest size was given")
        for source, new in zip(self.sources, sources):
            source.values.clear()
            source.values.update(new.values)
        self.graph = graph
        self._bind_shapes(graph)

    def renew_outputs(self) -> None:
        """Give every slot fresh memory, so that no batch handed out before
        is written again: an iteration stopped by another thread's, whose
        last batch that thread may still be reading.  The old memory lives
        as long as a handed-out batch refers to it.  Calls must not overlap
        with it."""
        for slot, event in enumerate(self._slot_read):
            if event is not None:  # a copy to the device still reads the old memory
                event.synchronize()
                self._slot_read[slot] = None
        self.buffers = {symbol: _allocate(array.shape, array.dtype) for symbol, array in self.buffers.items()}
        self._slot = 0
        self._bind_shapes(self.graph)

    def bind_inputs(self, version: int | None) -> None:
        """Bind the arrays the decoders read (each node's
        :meth:`~slipstream.compiler.nodes.GraphNode.arrays`) anew, as
        version ``version`` of them: their owner numbers each change it
        makes to them (a refresh of records that arrived), and a call given
        another version binds them again first (see :meth:`__call__`), so
        that a call reads the tables it was told to, whether the owner
        wrote them in place or made new arrays.  Calls must not overlap
        with it."""
        self._inputs = {symbol: _jit_view(array) for node in self.graph.nodes
                        for symbol, array in input_arrays(node)}
        self.tables = version

    def _bind_shapes(self, graph: Graph) -> None:
        """The views of the planned memory that the stages take, at ``graph``'s shapes (C-contiguous
        prefixes of each slot's memory, so that a smaller sample size compiles nothing)."""
        shapes = {b.symbol: b.allocation.shape for b in graph.buffers()}

        def at_shape(memory: np.ndarray, shape: tuple[int, ...]) -> np.ndarray:
            """The first elements of ``memory`` (C-contiguous) as an array of ``shape``."""
            return memory.reshape(-1)[:int(np.prod(shape, dtype=np.int64))].reshape(shape)

        self._host_buffers = {symbol: [at_shape(slot, (slot.shape[0], *shapes[symbol])) for slot in array]
                              for symbol, array in self.buffers.items()}
        self._jit_buffers = {symbol: [_jit_view(slot) for slot in slots]
                             for symbol, slots in self._host_buffers.items()}
        self._jit_scratch = {symbol: _jit_view(at_shape(array, (array.shape[0], *shapes[symbol])))
                             for symbol, array in self.scratch.items()}

    def __call__(self, indices: Any, epoch: int = 0, draws: Any = None, known: Any = None,
                 tables: int | None = None) -> Any:
        """Run the pipelines on the samples ``indices`` (at most ``batch_size``).

        ``draws``: each sample's draw identity, what its random keys come
        from (default: its index; under repeated augmentation a copy's own,
        see :func:`slipstream.loader.orders.draw_identities`).

        ``known``: each sample's failure status known before the call (a
        native status, int32; 0 where none is known; default: none known),
        an input of the call as ``indices`` is: a decoder that takes it
        (:data:`~slipstream.compiler.symbols.KNOWN`) does not decode a
        sample with a status, and reports that status as its own.

        ``tables``: the version of the decoders' input arrays this call
        reads, as their owner numbers it; when it is not the version bound,
        they are bound anew first (:meth:`bind_inputs`).  None: those bound.

        Returns the output of each pipeline for the batch (a dict by output
        name, or the single output): NumPy arrays from compiled stages, torch
        tensors from torch stages.  They stay valid for ``slots`` calls.
        """
        idx = np.ascontiguousarray(indices, dtype=np.int64)
        if idx.ndim != 1 or not 0 < idx.size <= self.batch_size:
            raise ArgumentError(f"indices must be 1-D with 1 to {self.batch_size} entries, got shape {idx.shape}")
        n = int(idx.size)
        identities = idx if draws is None else np.ascontiguousarray(draws, dtype=np.int64)
        if identities.shape != idx.shape:
            raise ArgumentError(f"draws must have the shape of indices {idx.shape}, got {identities.shape}")
        statuses_known = np.zeros(n, np.int32) if known is None else np.ascontiguousarray(known, dtype=np.int32)
        if statuses_known.shape != idx.shape:
            raise ArgumentError(f"known must have the shape of indices {idx.shape}, got {statuses_known.shape}")
        if tables is not None and tables != self.tables:
            self.bind_inputs(tables)
        batch = _Batch(idx, identities, statuses_known, n, np.int64(epoch))
        slot = self._slot
        self._slot = (slot + 1) % self.slots
        if self._slot_read[slot] is not None:
            self._slot_read[slot].synchronize()
            self._slot_read[slot] = None
        values: dict[int, Any] = {}
        statuses: list[np.ndarray] = []
        self._statuses, self._count = statuses, n
        progress = self._compile_progress()
        try:
            for k, (source, fn) in enumerate(zip(self.sources, self.functions)):
                args = [self._argument(name, source, batch, slot, values) for name in source.params]
                if source.jit:
                    self._done[:n] = 0
                first = source.jit and not self._compiled[k]
                counts, started = _cache_counts(fn) if first else None, time.perf_counter()
                try:
                    results = self._run_compiled(source, fn, args, n) if source.jit else fn(*args)
                except numba.core.errors.NumbaError as exc:
                    if self._compiled[k]:
                        raise
                    raise typing_error(source, exc) from exc
                except Exception:
                    if source.jit:
                        self._raise_operation_error(source, args, idx)
                    raise
                if source.jit and not self._done[:n].all():  # no call took these samples
                    self._raise_operation_error(source, args, idx)
                    raise OperationError(f"stage {source.index} stopped before samples "
                                         f"{idx[:n][self._done[:n] == 0].tolist()} were done, and running them "
                                         f"again one by one did not fail")
                if progress is not None and first:
                    progress.update(1)
                elapsed = time.perf_counter() - started
                if first:
                    self.compile_seconds += elapsed
                    self._record_compile(source, fn, counts, elapsed)
                else:
                    self._stage_seconds[k] += elapsed
                if source.jit:
                    self._share(source.index, 0.0 if first else elapsed)
                self._compiled[k] = True
                statuses += results[len(source.returns):]
                for node, value in zip(source.returns, results):
                    if source.jit and node.state.dtype == np.float16:
                        value = value.view(np.float16)
                    values[node.id] = value
        finally:
            if progress is not None:
                progress.close()
        if self._uses_cuda:
            import torch

            self._slot_read[slot] = torch.cuda.current_stream().record_event()
        outputs = {name: values[node.id] for name, node in self.graph.outputs.items()}
        return outputs[SINGLE_OUTPUT] if self._single else outputs

    def _run_compiled(self, source: StageSource, fn: Any, args: list[Any], n: int) -> Any:
        """One batch of ``n`` samples through a compiled stage: up to
        :attr:`threads` calls at once share the samples; then, where the
        stage has batch statements, one more call runs them.  Returns the
        stage's values (what every call returns)."""
        claims, results = np.zeros(1, np.int64), []

        def part(thread: int) -> None:
            values = fn(claims, thread, False, *args)
            if thread == 0:
                results.append(values)

        threads.run_parts(part, min(self.threads, n))
        return fn(claims, 0, True, *args) if source.finishes else results[0]

    def status(self) -> np.ndarray:
        """The per-sample status of the last call's samples, in their order:
        int32, 0 where every decoder that can fail decoded the sample, else
        the status of the first that failed (in graph order; see
        :attr:`~slipstream.compiler.Decoder.can_fail`).  A copy: the
        stages' status outputs are memory of the call's slot."""
        combined = np.zeros(self._count, np.int32)
        for status in self._statuses:
            combined = np.where(combined != 0, combined, status)
        return combined

    def _raise_operation_error(self, source: StageSource, args: list[Any], idx: np.ndarray) -> None:
        """After a jit stage failed: run the batch again through the stage's
        diagnostic version (one sample after the other, recording where it
        is) and raise an :class:`OperationError` naming the operation, its
        pipeline and the sample, from the operation's own exception.  Returns
        when the run does not fail."""
        trace = np.full(2, -1, np.int64)
        try:
            load_diagnostic(generate_stage(self.graph, source.index, trace=True))(np.zeros(1, np.int64), 0, True,
                                                                                   *args, trace)
        except Exception as cause:
            node = next((n for n in self.graph.nodes if n.id == trace[0]), None)
            if node is None:
                return
            where = (f"sample {int(idx[trace[1]])}" if trace[1] >= 0 else
                     f"the batch of samples {shown_indices(idx)}")
            raise OperationError(f"{node.describe()} in pipeline {node.pipeline!r} failed on {where}: "
                                 f"{type(cause).__name__}: {cause}") from cause

    def _record_compile(self, source: StageSource, fn: Any, before: tuple[int, int], seconds: float) -> None:
        """One record on the ``slipstream.compiler`` logger for a jit stage's
        first call: whether its machine code was compiled, loaded from the
        compile cache or was in this process already, how long that took,
        which pipelines the stage serves and where its cache is."""
        hits, misses = _cache_counts(fn)
        outcome = "compiled" if misses > before[1] else "loaded" if hits > before[0] else "reused"
        cache = fn.stats.cache_path
        pipelines = self.stage_pipelines(source.index)
        what = f"stage {source.index} of pipeline{'s' if len(pipelines) > 1 else ''} {', '.join(map(repr, pipelines))}"
        text = {"compiled": f"compiled {what} in {seconds:.2f} s ({'cached in ' + cache if cache else 'not cached'})",
                "loaded": f"loaded {what} from the compile cache in {seconds:.2f} s ({cache})",
                "reused": f"reused {what}, compiled in this process already ({seconds:.2f} s)"}[outcome]
        LOGGER.info("%s", text, extra={"stage": source.index, "pipelines": pipelines, "outcome": outcome,
                                 "seconds": seconds, "cache": cache})

    def stage_pipelines(self, stage: int) -> list[str]:
        """The pipelines whose nodes stage ``stage`` runs, in graph order."""
        return list(dict.fromkeys(node.pipeline for node in self.graph.nodes_in(stage)))

    def _compile_progress(self) -> Any:
        """A progress bar over the jit stages the coming call compiles (None
        when there are none or ``verbose`` is off)."""
        cold = sum(1 for k, source in enumerate(self.sources) if source.jit and not self._compiled[k])
        if not cold or not self.verbose:
            return None
        from tqdm import tqdm

        return tqdm(total=cold, desc="compiling pipeline stages", unit="stage", delay=0.5, leave=False,
                    disable=None)

    def _argument(self, symbol: Symbol, source: StageSource, batch: _Batch, slot: int,
                  values: dict[int, Any]) -> Any:
        """The value bound to one parameter of a stage, by what it stands for."""
        role = symbol.role
        if role is Role.INDICES:
            return batch.indices
        if role is Role.DRAWS:
            return batch.draws
        if role is Role.KNOWN_FAILURES:
            return batch.known
        if role is Role.COUNT:
            return batch.count
        if role is Role.SEED:
            return np.uint64(self.seed % 2**64)
        if role is Role.EPOCH:
            return batch.epoch
        if role is Role.INPUT:
            return self._inputs[symbol]
        if role is Role.KEYS:
            return self.keys[symbol]
        if role is Role.DONE:
            return self._done
        if role is Role.TICKS:
            return self._ticks[source.index]
        if role is Role.BUFFER:
            if symbol in self._jit_scratch:
                return self._jit_scratch[symbol]
            return self._jit_buffers[symbol][slot] if source.jit else self._host_buffers[symbol][slot]
        if role is Role.VALUES or role is Role.NODE_VALUES:
            return source.values[symbol]
        if role is not Role.VALUE:
            raise AssertionError(f"a stage cannot take {symbol} as a parameter")
        value = values[symbol.node]
        if source.jit:
            if not isinstance(value, np.ndarray):
                value = value.numpy()  # a CPU tensor from a torch stage, shared memory
            value = _jit_view(value)
        return value

    @property
    def dispatchers(self) -> list[Any]:
        """The compiled function of each jit stage (one Numba dispatcher each)."""
        return [fn for source, fn in zip(self.sources, self.functions) if source.jit]

    def stage_seconds(self) -> dict[str, float]:
        """Seconds each stage has run over all calls but its first (which
        compiles it, or loads it from the cache), by the stage's name in
        :meth:`explain`: ``"stage 0 (jit)"``, ``"stage 1 (torch)"``."""
        return {f"stage {source.index} ({'jit' if source.jit else 'torch'})": seconds
                for source, seconds in zip(self.sources, self._stage_seconds)}

    def _share(self, stage: int, seconds: float) -> None:
        """Share ``seconds``, a call of compiled stage ``stage``, among its
        nodes by the cycles the call added to each."""
        ticks = self._ticks[stage].sum(axis=0)
        added = ticks - self._ticks_counted[stage]
        self._ticks_counted[stage] = ticks
        total = int(added.sum())
        if total > 0:
            self._node_seconds[stage] += seconds * added / total

    def operation_seconds(self) -> dict[str, float]:
        """The compiled stages' time (:meth:`stage_seconds`) shared among
        their nodes, each call's by the cycles each node's statements took
        in it, by
        ``"pipeline: Operation"`` (``"image: CropDecoder"``; ``#2``, ``#3``
        after a name that repeats).  Every node's statements run between
        two readings of the processor's cycle counter, a few cycles each,
        nothing beside a sample's decode."""
        shares: dict[str, float] = {}
        named: dict[str, int] = {}  # how many nodes have had each name
        for stage, seconds in self._node_seconds.items():
            for node, spent in zip(self.graph.nodes_in(stage), seconds):
                what = node.op if node.op is not None else node.spec
                name = f"{node.pipeline}: {type(what).__name__}"
                named[name] = named.get(name, 0) + 1
                shares[name if named[name] == 1 else f"{name} #{named[name]}"] = float(spent)
        return shares

    def explain(self) -> str:
        """The generated source of every stage (whether its machine code is
        compiled, in the compile cache or still to be compiled; its nodes and
        the values it takes) and the memory plan."""
        parts = []
        for source, fn in zip(self.sources, self.functions):
            kind = f"jit: one numba.njit function, on {self.threads} threads" if source.jit else "torch: Python"
            nodes = "".join(f"# {symbols.value(n.id)} = {n.describe()}\n" for n in self.graph.nodes_in(source.index))
            taken = "".join(f"# {symbol} = {value!r}\n" for symbol, value in source.values.items())
            machine = f"# machine code: {cache_state(fn)}\n" if source.jit else ""
            parts.append(f"=== stage {source.index} ({kind}) ===\n{machine}{nodes}{taken}{source.source}")
        parts.append(self.memory_plan())
        return "\n".join(parts)

    def memory_plan(self) -> str:
        """Each buffer's shape, dtype and size, and the total."""
        lines = ["=== memory plan ===", f"{'buffer':<10} {'node':<40} {'shape':<24} {'dtype':<10} {'bytes':>12}"]
        total = 0
        for buffer in self.graph.buffers():
            per_thread = buffer.symbol in self.scratch
            array = self.scratch[buffer.symbol] if per_thread else self.buffers[buffer.symbol]
            total += array.nbytes
            where = "per thread: " if per_thread else ""
            lines.append(f"{buffer.symbol.name:<10} {(where + buffer.node.describe())[:40]:<40} "
                         f"{str(array.shape):<24} {str(array.dtype):<10} {array.nbytes:>12,}")
        for symbol, array in self.keys.items():
            total += array.nbytes
            lines.append(f"{symbol.name:<10} {'random keys of a batch operation':<40} {str(array.shape):<24} "
                         f"{str(array.dtype):<10} {array.nbytes:>12,}")
        lines.append(f"{'total':<10} {'':<40} {'':<24} {'':<10} {total:>12,}")
        return "\n".join(lines)


def _cache_counts(fn: Any) -> tuple[int, int]:
    """How many signatures of the dispatcher ``fn`` were loaded from its
    disk cache, and how many compiled, so far."""
    return sum(fn.stats.cache_hits.values()), sum(fn.stats.cache_misses.values())


def shown_indices(indices: np.ndarray) -> str:
    """The first sample indices of a batch, for messages."""
    return ", ".join(map(str, indices[:8].tolist())) + (", ..." if indices.size > 8 else "")


def _jit_view(array: np.ndarray) -> np.ndarray:
    """The array as compiled code sees it: Numba has no float16 on the CPU,
    so float16 memory is passed as its uint16 bit patterns (write it with
    ``slipstream.native.slip_pack``); everything else unchanged."""
    return array.view(np.uint16) if array.dtype == np.float16 else array


def _allocate(shape: tuple[int, ...], dtype: Any) -> np.ndarray:
    """Zeroed host memory, pinned when a CUDA device can use it.  torch is
    consulted only when the program has imported it: importing it costs more
    than a second, and a program without torch has no device to pin for."""
    np_dtype = np.dtype(dtype)
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available():
        return np.zeros(shape, np_dtype)
    return torch.zeros(shape, dtype=torch_dtype(np_dtype), pin_memory=True).numpy()
