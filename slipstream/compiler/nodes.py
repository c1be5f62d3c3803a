"""Nodes of a pipeline: the specifications a user writes, and the records
of the graph lowered from them.

Two layers:

- A :class:`Node` is a *specification*: what an entry of a pipeline list
  does.  It says which values it reads (:meth:`Node.reads`), what it makes
  of them (:meth:`Node.declare`) and which statements compute it (the
  ``emit*`` methods).  The compiler never changes it, so one object may
  stand in several places.
- A :class:`GraphNode` is an immutable record of the lowered graph
  (:class:`~slipstream.compiler.Graph`): one placed entry with its id, its
  kind and stage, its random streams, its declared state and allocations,
  and its :class:`Input` values, each another record's value or one of its
  named outputs.  The code generator walks these records, and each hands
  its emission back to its specification with an :class:`EmitContext`
  bound to it.
"""

from __future__ import annotations

import abc
import ast
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from slipstream.compiler import astgen as A
from slipstream.compiler.checks import returns_its_input
from slipstream.compiler.handles import OutputRef
from slipstream.compiler.kinds import Geometry, Kind
from slipstream.compiler.operation import STATUS, Decoder, Operation, TorchOperation
from slipstream.compiler.params import structural_view
from slipstream.compiler.random import named_draws
from slipstream.compiler.state import Allocation, State
from slipstream.errors import PipelineError


@dataclasses.dataclass(frozen=True, eq=False)
class GraphNode:
    """One placed entry of the lowered graph; immutable, built once its
    inputs are.

    Attributes:
        id: its number in the graph (the names of its generated values
            derive from it).
        pipeline: the pipeline whose list holds the entry.
        position: the entry's position in that list.
        spec: the :class:`Node` the entry was lowered from.
        kind: where its code runs (:class:`Kind`).
        inputs: the values it reads, in the order its specification asked for them.
        state: its value's state (shape, dtype, device).
        allocations: the memory it writes; the first holds its value, and
            any may carry a name (a named output).
        stage: the stage whose function runs it (:mod:`slipstream.compiler.kinds`).
        stream: the first of its random streams (:mod:`slipstream.compiler.random`).
    """

    id: int
    pipeline: str
    position: int
    spec: Node
    kind: Kind
    inputs: tuple[Input, ...]
    state: State
    allocations: tuple[Allocation, ...]
    stage: int
    stream: int

    @property
    def op(self) -> Operation | None:
        """The operation of its specification (None for a node without one)."""
        return self.spec.op

    def output(self, name: str | None = None) -> Input:
        """Its value (``name`` None) or its named output ``name``, as an input of another node.

        Raises:
            PipelineError: it has no output ``name``, or it runs in torch,
                where operations have no named outputs.
        """
        if name is not None:
            if not self.kind.compiled:
                raise PipelineError(f"pipeline {self.pipeline!r}: {self.describe()} runs in torch, where operations "
                                    f"have no named outputs: read its value (output None)")
            self.output_position(name)
        return Input(self, name)

    def output_position(self, name: str) -> int:
        """Which of its allocations is its output ``name``."""
        names = [a.name for a in self.allocations]
        if name not in names:
            given = ", ".join(repr(n) for n in names if n is not None) or "none"
            raise PipelineError(f"pipeline {self.pipeline!r}: {self.describe()} has no output {name!r} "
                                f"(its named outputs: {given})")
        return names.index(name)

    def dependencies(self) -> tuple[GraphNode, ...]:
        """The nodes whose values it reads, each once, in the order of its inputs."""
        return tuple(dict.fromkeys(i.node for i in self.inputs))

    def alias(self) -> Input | None:
        """Where its value lives when it has no allocation of its own: its
        first input (the value an in-place operation rewrote, or what a
        reference reads); None when it has an allocation or no input."""
        return None if self.allocations or not self.inputs else self.inputs[0]

    def arrays(self) -> Sequence[Any]:
        """The arrays from outside the graph its code reads (:meth:`Node.arrays`)."""
        return self.spec.arrays()

    def describe(self) -> str:
        """One line naming it in ``explain()``, graph drawings and errors (:meth:`Node.describe`)."""
        return self.spec.describe()


@dataclasses.dataclass(frozen=True)
class Input:
    """A value a node reads: ``node``'s value, or its named output ``output``."""

    node: GraphNode
    output: str | None = None

    @property
    def state(self) -> State:
        """The state of the value read: the node's own, or that of its named output's allocation."""
        if self.output is None:
            return self.node.state
        memory = self.node.allocations[self.node.output_position(self.output)]
        return State(shape=memory.shape, dtype=memory.dtype, device=memory.device)

    def describe(self) -> str:
        """``operation`` or ``operation.output``."""
        return self.node.describe() + ("" if self.output is None else f".{self.output}")


class Finder(abc.ABC):
    """What :meth:`Node.reads` may look up while the graph is lowered, for
    the entry at ``position`` of pipeline ``pipeline``: the other entries,
    and the records of those it reads (lowered on demand, so that a node
    is built after the nodes it reads; a cycle is refused).  Another
    pipeline is referred to by its :class:`~slipstream.compiler.handles.Output`
    handle, resolved by identity, or by its name
    (:data:`~slipstream.compiler.handles.OutputRef`)."""

    @property
    @abc.abstractmethod
    def pipeline(self) -> str:
        """The pipeline of the entry being lowered."""

    @property
    @abc.abstractmethod
    def position(self) -> int:
        """The entry's position in its pipeline's list."""

    @abc.abstractmethod
    def previous(self) -> GraphNode | None:
        """The entry before it in its pipeline (None for the first)."""

    @abc.abstractmethod
    def names(self) -> list[str]:
        """Every pipeline's name, in the order given."""

    @abc.abstractmethod
    def entries(self, pipeline: OutputRef) -> list[Node]:
        """The specifications of pipeline ``pipeline``'s entries, in order."""

    @abc.abstractmethod
    def node(self, pipeline: OutputRef, position: int) -> GraphNode:
        """The record of entry ``position`` of pipeline ``pipeline``."""

    @abc.abstractmethod
    def last(self, pipeline: OutputRef) -> GraphNode:
        """The record of the last entry of pipeline ``pipeline`` (its value)."""

    @abc.abstractmethod
    def holding(self, op: Operation, pipeline: OutputRef | None = None) -> GraphNode:
        """The record of the entry that runs the operation object ``op``,
        in pipeline ``pipeline``, or wherever it stands when None."""


class EmitContext(abc.ABC):
    """What a node's ``emit*`` methods may use (docs/compiler.md, "Writing a
    node"), bound to the record being emitted (:attr:`node`).  Implemented
    by the code generator; every method returns an AST expression."""

    @property
    @abc.abstractmethod
    def node(self) -> GraphNode:
        """The record being emitted: its inputs, allocations, kind and stage."""

    @property
    @abc.abstractmethod
    def target(self) -> str:
        """The variable name that receives the node's value."""

    @abc.abstractmethod
    def value(self, k: int = 0) -> ast.expr:
        """Input ``k``'s value for the current sample (inside the sample loop)."""

    @abc.abstractmethod
    def batch_value(self, k: int = 0) -> ast.expr:
        """Input ``k``'s value for the whole batch (after the sample loop, or in a torch stage)."""

    @abc.abstractmethod
    def outs(self) -> list[ast.expr]:
        """The current sample's views of the node's allocations, in declared order."""

    @abc.abstractmethod
    def batch_outs(self) -> list[ast.expr]:
        """The batch's views of the node's allocations."""

    @abc.abstractmethod
    def arrays(self) -> list[ast.expr]:
        """The arrays from outside the graph the node reads (:meth:`Node.arrays`: a decoder's), in order;
        where a decoder lists :data:`~slipstream.compiler.symbols.KNOWN` instead of an array, the
        current sample's known failure status (:attr:`known`)."""

    @abc.abstractmethod
    def key(self, stream: int = 0) -> ast.expr:
        """The current sample's random key for the node; ``stream`` 0 or 1
        gives two independent keys."""

    @abc.abstractmethod
    def keys(self) -> ast.expr:
        """A per-sample array of keys, for a batch node (filled in the loop)."""

    @abc.abstractmethod
    def batch_keys(self) -> ast.expr:
        """The random keys of the batch's samples for the node, computed
        where they are used (a torch stage)."""

    @abc.abstractmethod
    def code(self, op: Operation | None = None) -> ast.expr:
        """The compiled code of the node's operation, or of another
        operation ``op`` that the node calls (a node with control flow may
        call several); each is part of the stage's compile cache key."""

    @abc.abstractmethod
    def values(self, op: Operation | None = None) -> ast.expr:
        """The run-time values (:meth:`Operation.runtime_values`) of the node's
        operation, or of another operation ``op`` the node calls: a
        parameter of the stage, bound when it runs, never part of its source."""

    @abc.abstractmethod
    def node_values(self) -> ast.expr:
        """The run-time values of the node itself (:meth:`Node.runtime_values`)."""

    def call(self, *args: ast.expr, op: Operation | None = None) -> ast.expr:
        """A call of the code of the node's operation (or of ``op``) on
        ``args``, with the operation's values last when it takes them."""
        called = self.node.op if op is None else op
        taken = [self.values(op)] if called.runtime_values() is not None else []
        return A.call(self.code(op), *args, *taken)

    @abc.abstractmethod
    def helper(self, helper_name: str) -> ast.expr:
        """A runtime helper: ``uniform``, ``copy_sample``, ``sample_key``, ``batch_keys``, ``as_tensor``."""

    @property
    @abc.abstractmethod
    def index(self) -> ast.expr:
        """The current sample's index in the dataset."""

    @property
    @abc.abstractmethod
    def known(self) -> ast.expr:
        """The current sample's failure status known before the batch ran
        (int32, 0 when none is known): the entry of the stage's per-batch
        input :data:`~slipstream.compiler.symbols.KNOWN_FAILURES` for the
        sample, as :attr:`index` is the entry of its indices."""

    @property
    @abc.abstractmethod
    def sample(self) -> ast.expr:
        """The current sample's position in the batch (inside the sample loop)."""

    @property
    @abc.abstractmethod
    def count(self) -> ast.expr:
        """The number of samples in the batch."""


class Node:
    """The specification of a pipeline entry: an operation applied to the
    values it reads.

    Subclasses override what differs: :meth:`reads` (by default, the
    previous entry's value), :meth:`declare`, and the ``emit*`` methods.
    The graph lowers each placed entry to a :class:`GraphNode` and never
    changes the specification, so the same object may stand in several
    places.
    """

    def __init__(self, op: Operation | None = None) -> None:
        self.op = op

    def reads(self, find: Finder) -> Sequence[Input]:
        """The values this node reads, looked up with ``find``: by default
        the previous entry's value (none for a first entry)."""
        previous = find.previous()
        return () if previous is None else (previous.output(),)

    def kind_of(self, inputs: Sequence[Input]) -> Kind:
        """Where this node's code runs: its operation's kind (a node without
        an operation runs per sample)."""
        return self.op.kind if self.op is not None else Kind.SAMPLE

    def geometry(self) -> Geometry:
        """How this entry moves the pixels of its input, as the fields that
        follow its pipeline read it: its operation's declaration
        (:attr:`Operation.geometry`); :attr:`Geometry.UNKNOWN` for a node
        without one."""
        return self.op.geometry if self.op is not None else Geometry.UNKNOWN

    def root(self, root_of: Callable[[OutputRef], str]) -> str:
        """What the pipeline this node starts reads, for keying the random
        streams of that pipeline's entries (:mod:`slipstream.compiler.random`):
        its structure, never an output's name, so that renaming an output
        keeps every draw.  By default the node's :meth:`identity`;
        ``root_of(name)`` gives the root of another pipeline, for a node
        that starts by reading one."""
        return self.identity()

    def identity(self) -> str:
        """What kind of node this is, for keying its random streams: its
        class and its operation's class (that of the operation it draws
        like, :meth:`Operation.draws_like`), never the operation's settings,
        so that changing a setting keeps every stream; the graph adds the
        root of its pipeline (:meth:`root`) and how many nodes of the same
        identity precede this one in it.  Module names are left out, so that a class keeps its streams
        whether its module runs as a script or is imported."""
        drawn = self.op.draws_like() if self.op is not None else None
        return f"{type(self).__qualname__}:{type(drawn).__qualname__ if drawn is not None else ''}"

    def arrays(self) -> Sequence[Any]:
        """Arrays from outside the graph that this node's code reads (a
        decoder's dataset columns, :meth:`Decoder.inputs`): parameters of
        its stage, bound on every call."""
        return ()

    def runtime_values(self) -> tuple[Any, ...] | None:
        """Run-time values of the node's own statements (a probability it
        tests), read through :meth:`EmitContext.node_values`: parameters of
        its stage, so that changing one compiles nothing.  None: none."""
        return None

    def declare(self, inputs: Sequence[Input]) -> tuple[State, tuple[Allocation, ...]]:
        """Output state and allocations, from the states of the values it
        reads (by default its operation's declaration from its first
        input's state)."""
        assert self.op is not None and inputs
        return normalize_declared(self.op.declare(inputs[0].state))

    def emit(self, ctx: EmitContext) -> list[ast.stmt]:
        """Statements for one sample, inside the stage's sample loop."""
        return []

    def emit_batch(self, ctx: EmitContext) -> list[ast.stmt]:
        """Statements after the sample loop (batch operations)."""
        return []

    def emit_torch(self, ctx: EmitContext) -> list[ast.stmt]:
        """Statements of a torch (non-jit) stage."""
        return []

    def describe(self) -> str:
        """One line naming this node in ``explain()``, graph drawings and errors."""
        return repr(self.op) if self.op is not None else type(self).__name__


class DeclarationError(PipelineError):
    """An operation's ``declare()`` returned something that is not what it
    must return (the graph names the operation)."""


def normalize_declared(declared: Any) -> tuple[State, tuple[Allocation, ...]]:
    """``declare()``'s result with the allocations as a tuple.

    Raises:
        DeclarationError: the result is not ``(State, allocations)``, the
            allocations an :class:`Allocation`, a sequence of them or None.
    """
    if not (isinstance(declared, (tuple, list)) and len(declared) == 2 and isinstance(declared[0], State)):
        raise DeclarationError(f"declare() must return (state, allocations): the outgoing State, and an "
                               f"Allocation, a list of them or None; it returned {declared!r:.120}")
    state, memory = declared
    if memory is None:
        return state, ()
    if isinstance(memory, Allocation):
        return state, (memory,)
    memory = tuple(memory) if isinstance(memory, (tuple, list)) else (memory,)
    if not all(isinstance(allocation, Allocation) for allocation in memory):
        raise DeclarationError(f"declare() must return (state, allocations) with an Allocation, a list of them "
                               f"or None as the allocations; it returned {declared[1]!r:.120}")
    return state, memory


class DecoderNode(Node):
    """The first node of a pipeline: runs a :class:`Decoder`, reading
    nothing else.  For a decoder that can fail (:attr:`Decoder.can_fail`)
    the node adds the status output (named :data:`STATUS`) to the
    decoder's allocations: its code receives it last among its outs, and
    the compiled stage returns it (see
    :meth:`~slipstream.compiler.Graph.statuses`)."""

    def __init__(self, op: Decoder) -> None:
        super().__init__(op)

    def root(self, root_of: Callable[[OutputRef], str]) -> str:
        """Its identity and the stored field its decoder reads
        (:meth:`Decoder.stored_field`), when it reads one."""
        field = self.op.stored_field()
        return self.identity() if field is None else f"{self.identity()}[{field}]"

    def reads(self, find: Finder) -> Sequence[Input]:
        return ()

    def declared(self, inputs: Sequence[Input]) -> tuple[State, tuple[Allocation, ...]]:
        """The decoder's own output state and allocations."""
        return normalize_declared(self.op.declare(None))

    def declare(self, inputs: Sequence[Input]) -> tuple[State, tuple[Allocation, ...]]:
        state, memory = self.declared(inputs)
        if not memory:
            raise ValueError("a decoder must declare the allocation its samples are written to")
        if any(allocation.name == STATUS for allocation in memory):
            raise DeclarationError(f"it declares an allocation named {STATUS!r}, the name of the status output "
                                   f"that the node of a decoder that can fail adds: name it otherwise")
        if self.op.can_fail:
            memory = (*memory, Allocation((), np.int32, name=STATUS))
        return state, memory

    def arrays(self) -> Sequence[Any]:
        return self.op.inputs()

    def emit(self, ctx: EmitContext) -> list[ast.stmt]:
        args = [*ctx.arrays(), ctx.index, *ctx.outs(), ctx.key()]
        return [A.assign(ctx.target, ctx.call(*args))]


class TransformNode(Node):
    """An operation applied to the previous entry's value."""

    def declare(self, inputs: Sequence[Input]) -> tuple[State, tuple[Allocation, ...]]:
        state, memory = super().declare(inputs)
        compiled = memory and self.op.kind.compiled
        returned = returns_its_input(structural_view(self.op).generate_code()) if compiled else None
        if returned is not None:
            # The stage hands out (and later stages read) the allocation, which such code never fills.
            raise DeclarationError(
                f"it declares an output allocation but its code returns its input {returned!r}, so the "
                f"allocation would stay zeros: write the result into the allocation (the parameter after "
                f"{returned!r}) and return it, or declare no allocation (None) for code that changes its "
                f"input in place")
        return state, memory

    def emit(self, ctx: EmitContext) -> list[ast.stmt]:
        if ctx.node.kind is Kind.BATCH:  # the loop only prepares the sample's key
            return [A.assign_item(ctx.keys(), ctx.sample, ctx.key())]
        return [A.assign(ctx.target, ctx.call(ctx.value(), *ctx.outs(), ctx.key()))]

    def emit_batch(self, ctx: EmitContext) -> list[ast.stmt]:
        if ctx.node.kind is not Kind.BATCH:
            return []
        args = [ctx.batch_value(), *ctx.batch_outs(), A.span(ctx.keys(), None, ctx.count)]
        return [A.assign(ctx.target, ctx.call(*args))]

    def emit_torch(self, ctx: EmitContext) -> list[ast.stmt]:
        args = [ctx.batch_value()]
        if isinstance(self.op, TorchOperation) and self.op.takes_keys:
            args.append(ctx.batch_keys())
        return [A.assign(ctx.target, ctx.call(*args))]


class RefNode(Node):
    """Reuses another pipeline's value: the output of the node running the
    operation object ``op`` (in pipeline ``pipeline_name``, or wherever it
    stands when no pipeline is named), or the last node of pipeline
    ``pipeline_name`` when ``op`` is None; with ``output``, that node's
    named output (an allocation its operation named).  The value is
    shared, not recomputed: a random parameter drawn in one pipeline
    reaches the other unchanged::

        crop = RandomResizedCrop(224)
        {"image": [crop, Normalize()], "crop_again": [RefNode(op=crop)]}
    """

    def __init__(self, pipeline_name: OutputRef | None = None, op: Operation | None = None,
                 output: str | None = None) -> None:
        if pipeline_name is None and op is None:
            raise ValueError("RefNode reads a pipeline (pipeline_name) or an operation (op): give one")
        super().__init__(None)
        self.source_pipeline = pipeline_name
        self.source_op = op
        self.output = output

    def root(self, root_of: Callable[[OutputRef], str]) -> str:
        """The root of the pipeline it reads (or its operation's class),
        and the output it reads there."""
        source = root_of(self.source_pipeline) if self.source_op is None else \
            type(self.source_op.draws_like()).__qualname__
        return f"{self.identity()}({source}).{self.output}"

    def reads(self, find: Finder) -> Sequence[Input]:
        if self.source_op is None:
            return (find.last(self.source_pipeline).output(self.output),)
        return (find.holding(self.source_op, self.source_pipeline).output(self.output),)

    def kind_of(self, inputs: Sequence[Input]) -> Kind:
        """The referenced node's kind: a reference runs where its target runs."""
        return inputs[0].node.kind

    def declare(self, inputs: Sequence[Input]) -> tuple[State, tuple[Allocation, ...]]:
        return inputs[0].state, ()

    def emit(self, ctx: EmitContext) -> list[ast.stmt]:
        return [] if ctx.node.kind is Kind.BATCH else [A.assign(ctx.target, ctx.value())]

    def emit_batch(self, ctx: EmitContext) -> list[ast.stmt]:
        return [A.assign(ctx.target, ctx.batch_value())] if ctx.node.kind is Kind.BATCH else []

    def emit_torch(self, ctx: EmitContext) -> list[ast.stmt]:
        return [A.assign(ctx.target, ctx.batch_value())]

    def describe(self) -> str:
        """``Ref(pipeline: operation[.output])``: which pipeline's output this reference reads."""
        what = "its output" if self.source_op is None else repr(self.source_op)
        where = "" if self.source_pipeline is None else f"{self.source_pipeline!r}: "
        return f"Ref({where}{what}{'' if self.output is None else '.' + self.output})"


_RANDOM_APPLY_DRAWS = named_draws("apply")


class RandomApply(TransformNode):
    """Apply a per-sample operation to each sample with probability ``p``.

    Emits ``if uniform(key, APPLY) < p: ... else: ...`` into the sample
    loop (``APPLY``: its named draw ``apply``); the draw and the operation
    use independent random keys.  The operation must
    keep the shape and dtype of its input.
    """

    def __init__(self, op: Operation, p: float = 0.5) -> None:
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"RandomApply: p must lie in [0, 1], got {p}")
        if op.kind is not Kind.SAMPLE:
            raise ValueError(f"RandomApply takes a per-sample operation (Kind.SAMPLE), not {op!r} ({op.kind})")
        super().__init__(op)
        self.p = float(p)

    def declare(self, inputs: Sequence[Input]) -> tuple[State, tuple[Allocation, ...]]:
        state, memory = super().declare(inputs)
        given = inputs[0].state
        if (state.shape, state.dtype) != (given.shape, given.dtype):
            raise ValueError(
                f"RandomApply needs an operation that keeps shape and dtype; {self.op!r} turns "
                f"{given.shape} {given.dtype} into {state.shape} {state.dtype}"
            )
        return state, memory

    def emit(self, ctx: EmitContext) -> list[ast.stmt]:
        coin = A.call(ctx.helper("uniform"), ctx.key(stream=1), A.const(_RANDOM_APPLY_DRAWS.apply))
        applied = [A.assign(ctx.target, ctx.call(ctx.value(), *ctx.outs(), ctx.key()))]
        if ctx.node.allocations:  # the output buffer must hold the sample either way
            skipped = A.call(ctx.helper("copy_sample"), ctx.outs()[0], ctx.value())
        else:
            skipped = ctx.value()
        return [A.if_else(A.less(coin, A.index(ctx.node_values(), A.const(0))), applied,
                          [A.assign(ctx.target, skipped)])]

    def geometry(self) -> Geometry:
        """The operation's, when it moves no pixel; otherwise untracked: a
        skipped sample leaves the operation's ``transform`` output
        unwritten, so no map would say where its pixels went."""
        return Geometry.IDENTITY if self.op.geometry is Geometry.IDENTITY else Geometry.UNTRACKED

    def runtime_values(self) -> tuple[float]:
        """``(p,)``: the probability is a value of the stage, not of its source."""
        return (self.p,)

    def describe(self) -> str:
        """``RandomApply(op, p=...)``."""
        return f"RandomApply({self.op!r}, p={self.p})"
