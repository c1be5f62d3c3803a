"""Generation of one Python function per stage, with the ``ast`` module, and
its compilation.

A jit stage becomes one function compiled with
``numba.njit(nogil=True, cache=True)``: a loop takes the batch's samples one
at a time from a counter it shares with the stage's other calls at the same
time (:mod:`slipstream.compiler.threads`) and runs every per-sample node of
the stage on each, in order; then the call that finishes the batch runs the
stage's batch operations.  A torch stage becomes a plain
Python function over tensors.  The source of each stage is written to the
cache directory under a hash of everything that shapes the compiled code, so
that Numba's on-disk cache serves the next process.
"""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import functools
import hashlib
import importlib.util
import inspect
import os
import re
import sys
import types
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import numba
import numpy as np

from slipstream.compiler import astgen as A
from slipstream.compiler import random as rnd
from slipstream.compiler import symbols, threads
from slipstream.compiler.checks import unseeded_draws
from slipstream.compiler.graph import Graph
from slipstream.compiler.jit import cached_njit, uncached_njit, warn_once
from slipstream.compiler.kinds import Kind
from slipstream.compiler.nodes import EmitContext, GraphNode, Input, Node
from slipstream.compiler.operation import Operation
from slipstream.compiler.params import structural_view
from slipstream.compiler.symbols import Symbol
from slipstream._numba_internals import intrinsic_parts, spread_function_ids
from slipstream.cache import cache_root
from slipstream.errors import CompileError, PipelineError


def _distinct_symbol_names() -> None:
    """Make the symbol names of this process's compiled functions differ from
    those compiled by any other process.

    Numba names a compiled function after its qualified name and a number
    from a per-process counter that starts at 1, and links the functions a
    cached stage calls as ``linkonce_odr``, which tells the linker that two
    definitions of one name are the same code.  Operations hand back
    closures (a crop decoder's ``decode``, closing over its size and flip
    probability), so two processes compiling different pipelines in the
    same order give different closures the same name; a third process
    loading both stages from the cache then keeps one definition, and one
    stage silently runs the other's crop.  Starting the counter at a random
    offset below 2**48 makes the names of different processes disjoint (two
    processes collide only if their ranges of a few thousand numbers
    overlap)."""
    import secrets

    spread_function_ids(secrets.randbits(48) + 1)


_distinct_symbol_names()


@cached_njit
def copy_sample(dst, src):
    """Copy a C-contiguous sample into another of the same size; returns dst."""
    d = dst.reshape(-1)
    s = src.reshape(-1)
    for j in range(d.size):
        d[j] = s[j]
    return dst


def as_tensor(value: Any) -> Any:
    """A jit stage's NumPy output as a torch tensor, sharing memory."""
    import torch

    return torch.from_numpy(value) if isinstance(value, np.ndarray) else value


HELPERS: dict[str, Any] = {
    "uniform": rnd.uniform,
    "sample_key": rnd.sample_key,
    "batch_keys": rnd.batch_keys,
    "copy_sample": copy_sample,
    "as_tensor": as_tensor,
    "claim": threads.claim,
    "cycles": threads.cycles,
}


COMPILE_CACHE_VARIABLE = "SLIPSTREAM_COMPILE_CACHE_DIR"
"""The environment variable naming the compile cache's folder."""


def cache_dir() -> Path:
    """Where generated stage sources (and Numba's cache of their machine
    code) live: ``$SLIPSTREAM_COMPILE_CACHE_DIR``, else ``stages`` under the
    cache root (``$SLIPSTREAM_CACHE_DIR``, else ``~/.cache/slipstream``).
    Machine code is made for one CPU: a cache root shared by machines (for
    their datasets) can keep it apart with this variable."""
    configured = os.environ.get(COMPILE_CACHE_VARIABLE)
    return Path(configured) if configured else cache_root() / "stages"


@dataclasses.dataclass
class StageSource:
    """One generated stage: its source, parameters and what it returns."""

    index: int
    jit: bool
    name: str
    params: list[Symbol]
    returns: list[GraphNode]
    source: str
    globals: dict[str, Any]
    lines: dict[int, GraphNode]  # line number of the source -> node whose statement spans it
    scratch: set[Symbol]  # allocations held per thread instead of per sample of the batch
    operations: list[Operation]  # every operation whose code the stage calls (a node may call several)
    statuses: list[Symbol]  # the decoders' status buffers, returned after the values (Graph.statuses)
    values: dict[Symbol, Any]  # the run-time values of the operations and nodes, by the parameter taking them
    finishes: bool = False  # a compiled stage has statements after the samples, which its ``finish`` call runs


class _Stage:
    """What the code generator keeps while it emits one stage: the globals
    the generated code calls, and where each value of the stage lives."""

    def __init__(self, graph: Graph, stage: int) -> None:
        self.graph = graph
        self.stage = stage
        self.globals: dict[str, Any] = {}
        self.operations: list[Operation] = []  # whose code ``code`` handed out, in order
        self.called: dict[int, list[Operation]] = {}  # by node id: the operations whose code it calls, its own first
        self.external: dict[int, GraphNode] = {}  # earlier-stage nodes read here, by id
        self.scratch: set[Symbol] = set()  # buffers held per thread
        self.values_taken: dict[Symbol, Any] = {}  # the run-time values the stage takes, by parameter

    def holder(self, node: GraphNode, output: str | None = None) -> tuple[GraphNode, int | None]:
        """Where a per-sample value is held: ``(node, k)`` for allocation k
        of a node of this stage (its named output ``output``, or up the
        chain of nodes without memory of their own), or ``(node, None)`` for
        the value of a node of an earlier stage."""
        holder = node
        while output is None and not holder.allocations:
            source = holder.alias()
            if source is None:
                raise PipelineError(f"{holder.describe()} declares no allocation and reads no other node: its value "
                                    f"has no memory to live in")
            if source.node.stage != self.stage:  # an earlier stage's value, or the named output it hands over
                return (source.node if source.output is None else holder), None
            holder, output = source.node, source.output
        return holder, (0 if output is None else holder.output_position(output))

    def here(self, node: GraphNode) -> bool:
        return node.stage == self.stage

    def target(self, node: GraphNode) -> str:
        return symbols.value(node.id).name

    def external_value(self, node: GraphNode) -> ast.expr:
        self.external[node.id] = node
        return A.name(symbols.value(node.id).name)

    def sample_view(self, batch: ast.expr, scalar: bool) -> ast.expr:
        i = A.name(symbols.SAMPLE.name)
        return A.span(batch, i, A.add(i, A.const(1))) if scalar else A.index(batch, i)

    def count(self) -> ast.expr:
        return A.name(symbols.COUNT.name)

    def _named_output(self, read: Input) -> int:
        """Which allocation of ``read.node`` (a node of this stage) is its output ``read.output``."""
        if not self.here(read.node):
            raise PipelineError(f"{read.node.describe()}'s output {read.output!r} is read outside its stage; read it "
                                f"through a RefNode, which runs in the stage of the node it reads")
        return read.node.output_position(read.output)

    def value(self, read: Input) -> ast.expr:
        """``read``'s value for the current sample."""
        if read.output is not None:
            return self.outs(read.node)[self._named_output(read)]
        if self.here(read.node):
            return A.name(self.target(read.node))
        return self.sample_view(self.external_value(read.node), read.node.state.shape == ())

    def batch_value(self, read: Input) -> ast.expr:
        """``read``'s value for the whole batch."""
        node = read.node
        if read.output is not None:
            position = self._named_output(read)
            if symbols.buffer(node.id, position) in self.scratch:
                raise PipelineError(f"{node.describe()}'s output {read.output!r} is read for the whole batch, but "
                                    f"it is per-thread memory; read it through a RefNode")
            return self.batch_outs(node)[position]
        if not self.here(node):
            expr = self.external_value(node)
            into_torch = node.kind.compiled and not self.graph.is_jit_stage(self.stage)
            return A.call("as_tensor", expr) if into_torch else expr
        if node.kind is not Kind.SAMPLE:
            return A.name(self.target(node))
        holder, position = self.holder(node)
        if position is None:
            return self.external_value(holder)
        return A.span(A.name(symbols.buffer(holder.id, position).name), None, self.count())

    def outs(self, node: GraphNode) -> list[ast.expr]:
        views = []
        for k, allocation in enumerate(node.allocations):
            scalar = allocation.shape == ()
            symbol = symbols.buffer(node.id, k)
            if symbol in self.scratch:  # one slot per thread, reused sample after sample
                tid = A.name(symbols.THREAD.name)
                views.append(A.span(A.name(symbol.name), tid, A.add(tid, A.const(1))) if scalar
                             else A.index(A.name(symbol.name), tid))
            else:
                views.append(self.sample_view(A.name(symbol.name), scalar))
        return views

    def batch_outs(self, node: GraphNode) -> list[ast.expr]:
        return [A.span(A.name(symbols.buffer(node.id, k).name), None, self.count())
                for k in range(len(node.allocations))]

    def _position(self, node: GraphNode, op: Operation) -> int:
        """Which of the operations ``node`` calls ``op`` is: 0 its own, 1, 2, ... others (a node with
        control flow), in the order they are first asked for."""
        called = self.called.setdefault(node.id, [node.op])
        if not any(op is seen for seen in called):
            called.append(op)
        return next(k for k, seen in enumerate(called) if seen is op)

    def values(self, node: GraphNode, op: Operation | None) -> ast.expr:
        op = node.op if op is None else op
        given = op.runtime_values()
        if given is None:
            raise PipelineError(f"pipeline {node.pipeline!r}: {node.describe()} asks for the values of {op!r}, "
                                f"which takes none (its runtime_values() is None)")
        return self._taken(symbols.values(node.id, self._position(node, op)), given)

    def node_values(self, node: GraphNode) -> ast.expr:
        given = node.spec.runtime_values()
        if given is None:
            raise PipelineError(f"pipeline {node.pipeline!r}: {node.describe()} asks for its own values, but its "
                                f"runtime_values() is None")
        return self._taken(symbols.node_values(node.id), given)

    def _taken(self, symbol: Symbol, given: tuple[Any, ...]) -> ast.expr:
        """The expression that rebuilds ``given`` from the stage parameter
        ``symbol``, which takes its leaves as one flat tuple, one parameter
        per operation whatever its nesting; the nesting is rebuilt where the
        values are used (None, which carries no data, is written as a
        constant)."""
        leaves: list[Any] = []
        expr = _rebuilt(given, A.name(symbol.name), leaves)
        if leaves:
            self.values_taken[symbol] = tuple(leaves)
        return expr

    def code(self, node: GraphNode, op: Operation | None) -> ast.expr:
        op = node.op if op is None else op
        # The node's own operation is op<id>; others it calls (a node with control flow) op<id>_1, op<id>_2, ...
        position = self._position(node, op)
        fn_name = f"op{node.id}" if position == 0 else f"op{node.id}_{position}"
        if fn_name not in self.globals:
            code = structural_view(op).generate_code()
            unseeded = unseeded_draws(code) if node.kind.compiled else None
            if unseeded is not None:
                what = node.describe() if op is node.op else f"{op!r} in {node.describe()}"
                raise PipelineError(
                    f"pipeline {node.pipeline!r}: the code of {what} draws from {unseeded}, whose "
                    f"numbers follow no seed: the same batch would differ from run to run.  Draw from the "
                    f"sample's key instead: slipstream.compiler.random's uniform(key, k), integers(key, k, low, "
                    f"high), normal(key, k), with a different k for each draw")
            if node.kind.compiled and not isinstance(code, numba.core.registry.CPUDispatcher):
                code = _jitted(op, code)
            self.globals[fn_name] = code
            self.operations.append(op)
        return A.name(fn_name)


class _Emitter(EmitContext):
    """The :class:`EmitContext` of one node of a stage being generated."""

    def __init__(self, stage: _Stage, node: GraphNode) -> None:
        self._stage, self._node = stage, node

    @property
    def node(self) -> GraphNode:
        return self._node

    @property
    def target(self) -> str:
        return self._stage.target(self._node)

    def _input(self, k: int) -> Input:
        if not 0 <= k < len(self._node.inputs):
            raise PipelineError(f"pipeline {self._node.pipeline!r}: {self._node.describe()} reads input {k}, but it "
                                f"has {len(self._node.inputs)} (see Node.reads)")
        return self._node.inputs[k]

    def value(self, k: int = 0) -> ast.expr:
        return self._stage.value(self._input(k))

    def batch_value(self, k: int = 0) -> ast.expr:
        return self._stage.batch_value(self._input(k))

    def outs(self) -> list[ast.expr]:
        return self._stage.outs(self._node)

    def batch_outs(self) -> list[ast.expr]:
        return self._stage.batch_outs(self._node)

    def arrays(self) -> list[ast.expr]:
        return [self.known if takes_known(array) else A.name(symbols.input_array(self._node.id, k).name)
                for k, array in enumerate(self._node.arrays())]

    def key(self, stream: int = 0) -> ast.expr:
        return A.call("sample_key", A.name(symbols.SEED.name), A.name(symbols.EPOCH.name),
                      A.name(symbols.DRAW.name), A.const(self._node.stream + stream))

    def keys(self) -> ast.expr:
        return A.name(symbols.keys(self._node.id).name)

    def batch_keys(self) -> ast.expr:
        return A.call("batch_keys", A.name(symbols.SEED.name), A.name(symbols.EPOCH.name),
                      A.name(symbols.DRAWS.name), self.count, A.const(self._node.stream))

    def code(self, op: Operation | None = None) -> ast.expr:
        return self._stage.code(self._node, op)

    def values(self, op: Operation | None = None) -> ast.expr:
        return self._stage.values(self._node, op)

    def node_values(self) -> ast.expr:
        return self._stage.node_values(self._node)

    def helper(self, helper_name: str) -> ast.expr:
        return A.name(helper_name)

    @property
    def index(self) -> ast.expr:
        return A.name(symbols.INDEX.name)

    @property
    def known(self) -> ast.expr:
        return A.name(symbols.KNOWN.name)

    @property
    def sample(self) -> ast.expr:
        return A.name(symbols.SAMPLE.name)

    @property
    def count(self) -> ast.expr:
        return self._stage.count()


def takes_known(array: Any) -> bool:
    """Whether an entry of a decoder's inputs is the marker
    :data:`~slipstream.compiler.symbols.KNOWN` (the sample's known failure
    status, taken from the stage's per-batch input), not an array."""
    return isinstance(array, Symbol) and array == symbols.KNOWN


def input_arrays(node: GraphNode) -> list[tuple[Symbol, Any]]:
    """The arrays ``node`` reads from outside the graph, each with the
    stage parameter that takes it; the :data:`~slipstream.compiler.symbols.KNOWN`
    marker takes none (it is an entry of a batch parameter)."""
    return [(symbols.input_array(node.id, k), array) for k, array in enumerate(node.arrays())
            if not takes_known(array)]


def stage_parameters(nodes: list[GraphNode], external: Iterable[int], compiled: bool,
                     values: Iterable[Symbol] = ()) -> list[Symbol]:
    """The parameters of the stage running ``nodes``, reading the values of
    the nodes ``external`` from earlier stages and the run-time values
    ``values``: what the runtime binds."""
    params = list(symbols.BATCH_PARAMETERS) + ([symbols.DONE, symbols.TICKS] if compiled else [])
    taken = set(values)
    for node in nodes:
        params += [symbol for symbol, _ in input_arrays(node)]
        params += [symbols.buffer(node.id, k) for k in range(len(node.allocations))]
        if node.kind is Kind.BATCH and node.op is not None:
            params.append(symbols.keys(node.id))
        params += sorted((v for v in taken if v.node == node.id), key=lambda v: (v.role.value, v.position))
    return params + [symbols.value(i) for i in sorted(external)]


def generate_stage(graph: Graph, stage: int, trace: bool = False) -> StageSource:
    """The source of one stage of the graph.

    A compiled stage takes the :data:`~slipstream.compiler.symbols.CALL_PARAMETERS`
    first: the shared counter its concurrent calls take samples from, which
    call this is (its row of the per-thread buffers), and whether this call
    runs the batch's statements after the samples, which the runtime asks
    of one call once all calls have returned.

    With ``trace``, a diagnostic version of a compiled stage, which the
    runtime calls alone: before each node's statements the stage records
    in its last parameter, ``trace``, the node's id and the sample's
    position, so that an exception raised by an operation can be traced to
    the operation and the sample."""
    ctx = _Stage(graph, stage)
    nodes = graph.nodes_in(stage)
    emitters = {node.id: _Emitter(ctx, node) for node in nodes}
    jit = graph.is_jit_stage(stage)
    later = [n for n in graph.nodes if n.stage > stage]
    needed_later = {d.id for n in later for d in n.dependencies() if d.stage == stage}
    outputs = {n.id for n in graph.outputs.values() if n.stage == stage}
    returns = [n for n in nodes if n.id in needed_later | outputs]

    emitted: list[tuple[GraphNode, list[ast.stmt]]] = []

    def emit_all(emit: Callable[[Node, EmitContext], list[ast.stmt]], position: ast.expr) -> list[ast.stmt]:
        """Every node's statements from one of its specification's emit methods, in order; in a compiled
        stage, each node's between two readings of the cycle counter, whose difference adds to its
        entry of ``TICKS`` (its share of the stage's time, :meth:`CompiledPipeline.operation_seconds`)."""
        statements: list[ast.stmt] = []
        for k, node in enumerate(nodes):
            own = emit(node.spec, emitters[node.id])
            emitted.append((node, own))
            if trace and own:
                statements += [A.assign_item(A.name(symbols.TRACE.name), A.const(0), A.const(node.id)),
                               A.assign_item(A.name(symbols.TRACE.name), A.const(1), position)]
            if jit and own:
                started, ticks = symbols.cycles(node.id).name, A.name(symbols.TICKS.name)
                entry = A.tuple_of([A.name(symbols.THREAD.name), A.const(k)])
                own = [A.assign(started, A.call("cycles")), *own,
                       A.assign_item(ticks, entry, A.add(A.index(ticks, entry),
                                                         A.sub(A.call("cycles"), A.name(started))))]
            statements += own
        return statements

    statuses = [b.symbol for b in graph.statuses() if b.node.stage == stage] if jit else []
    after: list[ast.stmt] = []
    if jit:
        ctx.scratch = _scratch_buffers(ctx, nodes, returns) - set(statuses)
        sample = A.name(symbols.SAMPLE.name)
        take = A.assign(symbols.SAMPLE.name, A.call("claim", A.name(symbols.CLAIMS.name)))
        loop: list[ast.stmt] = [A.assign(symbols.INDEX.name, A.index(A.name(symbols.INDICES.name), sample)),
                                A.assign(symbols.DRAW.name, A.index(A.name(symbols.DRAWS.name), sample)),
                                A.assign(symbols.KNOWN.name, A.index(A.name(symbols.KNOWN_FAILURES.name), sample))]
        loop += emit_all(lambda spec, ctx: spec.emit(ctx), sample)
        # The runtime checks that every sample was done: a sample no call took would be a batch of stale values.
        loop += [A.assign_item(A.name(symbols.DONE.name), sample, A.const(1)), take]
        after = emit_all(lambda spec, ctx: spec.emit_batch(ctx), A.const(-1))
        body = [take, A.while_loop(A.less(sample, ctx.count()), loop)]
        if after:
            body.append(A.if_else(A.name(symbols.FINISH.name), after, []))
    else:
        body = emit_all(lambda spec, ctx: spec.emit_torch(ctx), A.const(-1))
    # The batch's per-sample statuses are outputs of the stage, as its values are: the runtime reads them from
    # what the stage returns, not from memory the compiled code shares with it.
    body.append(A.ret([ctx.batch_value(n.output()) for n in returns]
                      + [A.span(A.name(symbol.name), None, ctx.count()) for symbol in statuses]))

    params = stage_parameters(nodes, ctx.external, jit, ctx.values_taken) + ([symbols.TRACE] if trace else [])
    fn_name = f"stage_{stage}"
    own = list(symbols.CALL_PARAMETERS) if jit else []
    function = A.function(fn_name, [p.name for p in own + params], body)
    kind = "numba.njit(nogil=True, cache=True)" if jit else "plain Python over torch tensors"
    # Named by structure alone: the source keys the compile cache, and changing a value must not change it.
    header = ast.Expr(A.const(f"Stage {stage} ({kind}), generated by slipstream from: "
                              + "; ".join(f"{symbols.value(n.id)} = {_structure(n)}" for n in nodes)))
    tree = ast.Module(body=[header, function], type_ignores=[])
    source = A.unparse(tree)
    return StageSource(stage, jit, fn_name, params, returns, source, {**HELPERS, **ctx.globals},
                       _line_map(tree, source, emitted), ctx.scratch, ctx.operations, statuses, ctx.values_taken,
                       bool(after))


def _rebuilt(value: Any, flat: ast.expr, leaves: list[Any]) -> ast.expr:
    """``value`` (nested tuples of numbers, arrays and None) as an
    expression over ``flat``, the tuple of its leaves, which this appends
    to ``leaves`` in order."""
    if isinstance(value, tuple):
        return A.tuple_of([_rebuilt(item, flat, leaves) for item in value])
    if value is None:
        return A.const(None)
    leaves.append(value)
    return A.index(flat, A.const(len(leaves) - 1))


def _structure(node: GraphNode) -> str:
    """A node named for a stage's source by its structure: the source keys
    the compile cache, and the values of an operation that declares its
    arguments are parameters of the stage, which its fingerprint leaves
    out (``explain()`` describes the nodes with their values)."""
    op = node.op
    if op is None:
        return type(node.spec).__name__
    text = op.fingerprint().removeprefix(f"{type(op).__module__}.") if op.runtime_values() is not None else repr(op)
    return text if node.spec.describe() == repr(op) else f"{type(node.spec).__name__}({text})"


def _scratch_buffers(ctx: _Stage, nodes: list[GraphNode], returns: list[GraphNode]) -> set[Symbol]:
    """Allocations whose values never leave the sample loop: nothing after
    the loop reads them (not returned, not read by a batch operation), so
    one slot per thread serves every sample and the whole chain of a sample
    stays in cache."""
    kept = set()
    for node in nodes:
        if node in returns and node.kind is Kind.SAMPLE:
            kept.add(ctx.holder(node))
        if node.kind is Kind.BATCH:  # a batch operation reads its per-sample inputs for the whole batch
            kept.update(ctx.holder(i.node, i.output) for i in node.inputs
                        if ctx.here(i.node) and i.node.kind is Kind.SAMPLE)
    return {symbols.buffer(node.id, k) for node in nodes if node.kind is Kind.SAMPLE
            for k in range(len(node.allocations)) if (node, k) not in kept}


def _line_map(tree: ast.Module, source: str,
              emitted: list[tuple[GraphNode, list[ast.stmt]]]) -> dict[int, GraphNode]:
    """Source line -> the node whose emitted statement spans it.  The source
    is parsed again: its statements come in the order of the tree's, and
    carry the line numbers the text has."""
    owners = {id(statement): node for node, statements in emitted for statement in statements}
    lines: dict[int, GraphNode] = {}
    for made, parsed in zip(ast.walk(tree), ast.walk(ast.parse(source))):
        node = owners.get(id(made))
        if node is not None:
            lines.update(dict.fromkeys(range(parsed.lineno, parsed.end_lineno + 1), node))
    return lines


@functools.lru_cache(maxsize=None)
def _file_digest(path: str | None) -> str:
    if path is None:
        return ""
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return ""


def _code_digest(cls: type) -> str:
    """Hash of the code an operation's class may run.  Numba's disk cache
    does not notice when a function a stage calls changes, so an edited
    operation (a library upgrade, a changed user module) must change the
    stage's fingerprint: slipstream's own classes are covered by the
    code their stages call (:func:`called_code`), others by the files
    defining them and their bases."""
    parts = []
    for c in cls.__mro__:
        if c is object or c.__module__.split(".")[0] == "slipstream":
            continue
        try:
            parts.append(_file_digest(inspect.getsourcefile(c)))
        except (TypeError, OSError):  # defined where there is no file: a notebook, exec()
            parts.append(hashlib.sha256(b"".join(_code_bytes(getattr(v, "__code__", None))
                                                 for _, v in sorted(vars(c).items()))).hexdigest())
    return "".join(parts)


def _code_bytes(code: Any) -> bytes:
    """What a function's code does (bytecode, names, constants, nested
    functions), without its file name and line numbers."""
    if not isinstance(code, types.CodeType):
        return b""
    nested = b"".join(_code_bytes(c) if isinstance(c, types.CodeType) else _constant_bytes(c) for c in code.co_consts)
    return code.co_code + repr(code.co_names).encode() + nested


def _constant_bytes(constant: Any) -> bytes:
    """A value a function holds (a code constant, a closure's cell) as bytes
    that are the same in every process: a frozenset's order depends on the
    string hash seed (sorted), an array is its dtype, shape and bytes, and
    an object of another kind is its type alone (its ``repr`` may hold an
    address, which differs from process to process)."""
    if isinstance(constant, frozenset):
        return repr(sorted(repr(item) for item in constant)).encode()
    if isinstance(constant, (tuple, list)):
        return b"(" + b",".join(_constant_bytes(item) for item in constant) + b")"
    if isinstance(constant, np.ndarray):
        return f"{constant.dtype.str}{constant.shape}".encode() + np.ascontiguousarray(constant).tobytes()
    if constant is None or isinstance(constant, (bool, int, float, complex, str, bytes, np.generic, np.dtype)):
        return repr(constant).encode()
    return f"<{type(constant).__module__}.{type(constant).__qualname__}>".encode()


def _code_names(code: types.CodeType) -> set[str]:
    """Every global or attribute name ``code`` and the functions nested in it read."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, types.CodeType):
            names |= _code_names(constant)
    return names


def called_code(roots: Iterable[Any]) -> str:
    """Hash of the code the functions ``roots`` may run, and of nothing
    else: the source files of the modules defining every function they
    reach (through globals, module attributes, closures and compiled
    dispatchers; a function without a file by its code), and the C
    signature and ABI version of every native kernel they call.  Editing a
    module a stage never reaches leaves the hash as it is."""
    from slipstream import _native

    files: set[str] = set()
    h = hashlib.sha256()
    seen: set[int] = set()
    stack = list(roots)
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if _versioned(obj):
            continue  # covered by the versions the key holds (_machine)
        if isinstance(obj, numba.core.dispatcher.Dispatcher):
            stack.append(obj.py_func)
        elif (intrinsic := intrinsic_parts(obj)) is not None:
            name, definition = intrinsic
            kernel = _native.FUNCTIONS.get(name)
            if kernel is not None:
                h.update(f"{kernel} abi {_native.ABI_VERSION}".encode())
            else:
                stack.append(definition)
        elif isinstance(obj, types.FunctionType):
            source = inspect.getsourcefile(obj) if obj.__code__.co_filename[:1] not in ("<", "") else None
            if source is not None and os.path.exists(source):
                files.add(source)
            else:
                h.update(_code_bytes(obj.__code__))
            for cell in obj.__closure__ or ():
                try:
                    value = cell.cell_contents
                except ValueError:  # a cell not filled yet
                    continue
                if callable(value) and not isinstance(value, type):
                    stack.append(value)
                else:
                    h.update(_constant_bytes(value))
            names = sorted(_code_names(obj.__code__))
            read = [(name, obj.__globals__[name]) for name in names if name in obj.__globals__]
            for module in [value for _, value in read if isinstance(value, types.ModuleType) and not _versioned(value)]:
                read += [(f"{module.__name__}.{name}", getattr(module, name)) for name in names
                         if hasattr(module, name)]
            for name, value in read:
                if isinstance(value, (type, types.ModuleType)):
                    continue
                if callable(value):
                    stack.append(value)
                else:  # a constant, perhaps imported from a module no function reached
                    h.update(name.encode() + _constant_bytes(value))
    for path in sorted(files):
        h.update(f"{path}:{_file_digest(path)}".encode())
    return h.hexdigest()


_VERSIONED = frozenset({"numba", "llvmlite", "numpy", "ctypes", "builtins", "math", "cmath"})


def _versioned(obj: Any) -> bool:
    """Whether ``obj`` comes from a package whose version the key holds
    (Numba, llvmlite, NumPy, Python's own): not walked into."""
    module = obj.__name__ if isinstance(obj, types.ModuleType) else getattr(obj, "__module__", None)
    return isinstance(module, str) and module.split(".")[0] in _VERSIONED


def _machine() -> str:
    """What else the machine code depends on: Numba, llvmlite, NumPy and
    Python versions, and the CPU it is made for (target, name, features)."""
    import llvmlite

    codegen = numba.core.registry.cpu_target.target_context.codegen()
    return f"{numba.__version__} {llvmlite.__version__} {np.__version__} {sys.version} {codegen.magic_tuple()}"


def fingerprint(graph: Graph, stage: StageSource) -> str:
    """The compile cache key of a stage: its generated source, the
    structure of its operations (their values are parameters of the
    stage), the code it calls (:func:`called_code`: nothing it does not
    reach), its memory plan, and the versions and CPU its machine code is
    made for."""
    h = hashlib.sha256()
    h.update(stage.source.encode())
    # Each node's operation, and every operation whose code the stage calls wherever a node keeps it (a node
    # with control flow may call several): each once.
    own = [node.op for node in graph.nodes_in(stage.index) if node.op is not None]
    operations = {id(op): op for op in own + stage.operations}
    for op in operations.values():
        h.update(op.fingerprint().encode())
        h.update(_code_digest(type(op)).encode())
    for node in graph.nodes_in(stage.index):
        h.update(_code_digest(type(node.spec)).encode())  # a node class of the user's emits code of its own
        h.update(repr((node.state, node.allocations)).encode())
    h.update(called_code(stage.globals.values()).encode())
    h.update(_machine().encode())
    return h.hexdigest()[:24]


_jitted_code: dict[str, Any] = {}
"""Operations' compiled code in this process, by what it is made of: a stage
that calls an operation of a structure another stage called already reuses
its machine code instead of compiling it again."""


def _jitted(op: Operation, code: Callable[..., Any]) -> Any:
    """``code``, the code ``op`` generated, compiled with ``numba.njit``: one
    dispatcher per distinct code in this process, keyed by the operation's
    structure (its fingerprint), the function and what it reaches and holds
    (:func:`called_code`: its closure's constants included)."""
    where = f"{code.__module__}.{code.__qualname__}:{code.__code__.co_firstlineno}"
    key = f"{type(op).__module__}.{type(op).__qualname__}|{op.fingerprint()}|{where}|{called_code([code])}"
    if key not in _jitted_code:
        _jitted_code[key] = uncached_njit(code)
    return _jitted_code[key]


_loaded: dict[str, Callable[..., Any]] = {}
"""Stage functions of this process by fingerprint: a pipeline compiled again
(a new loader over the same pipeline) reuses the machine code instead of
loading another copy that Numba would never free."""


def load_stage(graph: Graph, stage: StageSource) -> Callable[..., Any]:
    """Write the stage's source to the cache directory (once per content
    hash) and return its function, compiled for jit stages."""
    digest = fingerprint(graph, stage)
    if stage.jit and digest in _loaded:
        return _loaded[digest]
    path = cache_dir() / f"stage_{digest}.py"
    cached = _write_source(path, stage)
    module_name = f"slipstream_stage_{digest}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    module = importlib.util.module_from_spec(spec)
    module.__dict__.update(stage.globals)
    # Numba's disk cache finds a function's globals again by module name.
    sys.modules[module_name] = module
    if cached:
        spec.loader.exec_module(module)
    else:  # the same code, named after the file it would be (errors point into it alike)
        exec(compile(stage.source, str(path), "exec"), module.__dict__)
    fn = getattr(module, stage.name)
    if not stage.jit:
        return fn
    _loaded[digest] = (cached_njit if cached else uncached_njit)(fn, entry=True)
    return _loaded[digest]


def _write_source(path: Path, stage: StageSource) -> bool:
    """Write the stage's source at ``path`` unless it is there, whole;
    whether it is there, for Numba's disk cache.  A file there with other
    text (truncated, damaged) is written again.  A folder that cannot hold
    it (a full disk, a read-only cache) is a :class:`~slipstream.CacheWarning`,
    and the stage is compiled without the disk cache."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    text = stage.source.encode()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if not path.exists() or path.read_bytes() != text:
            tmp.write_bytes(text)
            os.replace(tmp, path)  # atomic: concurrent processes write identical text
        return True
    except OSError as exc:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        warn_once(str(path.parent), f"the source of stage {stage.index}", exc)
        return False


def load_diagnostic(stage: StageSource) -> Callable[..., Any]:
    """A stage generated with ``trace=True``, compiled without threads and
    without the disk cache: it runs only after a batch failed."""
    namespace = dict(stage.globals)
    exec(compile(stage.source, f"<diagnostic stage {stage.index}>", "exec"), namespace)
    return uncached_njit(namespace[stage.name], entry=True)


def typing_error(stage: StageSource, exc: Exception) -> CompileError:
    """A CompileError naming the operation whose generated line failed."""
    message = str(exc)
    node = None
    line_text = ""
    for match in re.finditer(r"stage_[0-9a-f]+\.py\", line (\d+)", message):
        number = int(match.group(1))
        if number in stage.lines:
            node = stage.lines[number]
            line_text = stage.source.splitlines()[number - 1].strip()
    if node is None:
        return CompileError(f"stage {stage.index} could not be compiled: {message}")
    return CompileError(
        f"stage {stage.index}: Numba cannot compile {node.describe()} (pipeline {node.pipeline!r}), "
        f"called by the generated line `{line_text}`:\n{message}"
    )
