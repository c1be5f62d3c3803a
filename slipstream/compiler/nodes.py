"""Nodes of a pipeline graph.  Each node emits its own Python AST statements
into the generated stage function, so a new kind of node (control flow, a
second input, ...) needs no change to :class:`~slipstream.compiler.Graph`.

The :class:`EmitContext` a node receives names everything it may refer to:
the values of other nodes, its own output memory, its random key, and the
globals (operation code, helpers) the generated code calls.
"""

from __future__ import annotations

import abc
import ast
import copy
from collections.abc import Sequence
from typing import Any

import numpy as np

from slipstream.compiler import astgen as A
from slipstream.compiler.checks import returns_its_input
from slipstream.compiler.kinds import Kind, stage_number
from slipstream.compiler.operation import STATUS, Decoder, Operation, TorchOperation
from slipstream.compiler.random import named_draws
from slipstream.compiler.state import Allocation, State
from slipstream.errors import PipelineError


class EmitContext(abc.ABC):
    """What a node's ``emit*`` methods may use (docs/compiler.md, "Writing a
    node").  Implemented by the code generator; every method returns an AST
    expression."""

    @abc.abstractmethod
    def value(self, node: Node) -> ast.expr:
        """The node's value for the current sample (inside the sample loop)."""

    @abc.abstractmethod
    def batch_value(self, node: Node) -> ast.expr:
        """The node's value for the whole batch (after the sample loop)."""

    @abc.abstractmethod
    def outs(self, node: Node) -> list[ast.expr]:
        """The current sample's views of the node's allocations."""

    @abc.abstractmethod
    def batch_outs(self, node: Node) -> list[ast.expr]:
        """The batch's views of the node's allocations."""

    @abc.abstractmethod
    def output(self, node: Node, name: str) -> ast.expr:
        """The current sample's view of the node's output ``name`` (an
        allocation its operation named: see :class:`Allocation`)."""

    @abc.abstractmethod
    def batch_output(self, node: Node, name: str) -> ast.expr:
        """The batch's view of the node's output ``name``."""

    @abc.abstractmethod
    def inputs(self, node: Node) -> list[ast.expr]:
        """The arrays from outside the graph the node reads (:meth:`Node.arrays`: a decoder's)."""

    @abc.abstractmethod
    def key(self, node: Node, stream: int = 0) -> ast.expr:
        """The current sample's random key for this node; ``stream`` 0 or 1
        gives two independent keys."""

    @abc.abstractmethod
    def keys(self, node: Node) -> ast.expr:
        """A per-sample array of keys, for a batch node (filled in the loop)."""

    @abc.abstractmethod
    def batch_keys(self, node: Node) -> ast.expr:
        """The random keys of the batch's samples for this node, computed
        where they are used (a torch stage)."""

    @abc.abstractmethod
    def code(self, node: Node, op: Operation | None = None) -> ast.expr:
        """The compiled code of the node's operation, or of another
        operation ``op`` that the node calls (a node with control flow may
        call several); each is part of the stage's compile cache key."""

    @abc.abstractmethod
    def helper(self, helper_name: str) -> ast.expr:
        """A runtime helper: ``uniform``, ``copy_sample``, ``sample_key``, ``batch_keys``, ``as_tensor``."""

    @abc.abstractmethod
    def target(self, node: Node) -> str:
        """The variable name that holds the node's value."""

    @property
    @abc.abstractmethod
    def index(self) -> ast.expr:
        """The current sample's index in the dataset."""

    @property
    @abc.abstractmethod
    def sample(self) -> ast.expr:
        """The current sample's position in the batch (inside the sample loop)."""

    @property
    @abc.abstractmethod
    def count(self) -> ast.expr:
        """The number of samples in the batch."""


class Node:
    """A vertex of the pipeline graph: an operation applied to a parent's value.

    Subclasses override :meth:`declare` and the ``emit*`` methods.  The
    graph fills ``parent``, ``id``, ``pipeline``, ``state``, ``allocations``
    and ``stage`` when it is built; a node object given in a pipeline list is
    copied first, so the same object may appear in several places.
    """

    def __init__(self, op: Operation | None = None) -> None:
        self.op = op
        self.parent: Node | None = None
        self.id = -1
        self.pipeline = ""
        self.state: State | None = None
        self.allocations: tuple[Allocation, ...] = ()
        self.stage = 0
        self.stream = 0  # the first of this node's random streams (slipstream.compiler.random.stream_id)
        self.stream_key: str | None = None  # the explicit stream key of a Keyed entry

    def placed(self, parent: Node | None, node_id: int, pipeline: str, stream_key: str | None = None) -> Node:
        """A copy of this node placed in a graph, with the explicit stream
        key ``stream_key`` when its entry gave one (:class:`~slipstream.compiler.Keyed`)."""
        node = copy.copy(self)
        node.parent, node.id, node.pipeline, node.stream_key = parent, node_id, pipeline, stream_key
        return node

    @property
    def kind(self) -> Kind:
        """Where this node's code runs: its operation's kind (a node without
        an operation runs per sample)."""
        return self.op.kind if self.op is not None else Kind.SAMPLE

    def output_position(self, name: str) -> int:
        """Which of this node's allocations is its output ``name``."""
        names = [a.name for a in self.allocations]
        if name not in names:
            given = ", ".join(repr(n) for n in names if n is not None) or "none"
            raise PipelineError(f"pipeline {self.pipeline!r}: {self.describe()} has no output {name!r} "
                                f"(its named outputs: {given})")
        return names.index(name)

    def identity(self) -> str:
        """What kind of node this is, for keying its random streams: its
        class and its operation's class (that of the operation it draws
        like, :meth:`Operation.draws_like`), never the operation's settings,
        so that changing a setting keeps every stream; the graph adds the
        pipeline and how many nodes of the same identity precede this one
        in it.  Module names are left out, so that a class keeps its streams
        whether its module runs as a script or is imported."""
        drawn = self.op.draws_like() if self.op is not None else None
        return f"{type(self).__qualname__}:{type(drawn).__qualname__ if drawn is not None else ''}"

    def dependencies(self) -> Sequence[Node]:
        """Nodes whose values this node reads."""
        return () if self.parent is None else (self.parent,)

    def alias(self) -> tuple[Node, str | None] | None:
        """Where this node's value lives when it has no allocation of its
        own: ``(node, None)`` for that node's value (the parent's, which
        an in-place operation rewrote), ``(node, name)`` for that node's
        named output; None for a node without a parent."""
        return None if self.parent is None else (self.parent, None)

    def arrays(self) -> Sequence[Any]:
        """Arrays from outside the graph that this node's code reads (a
        decoder's dataset columns, :meth:`Decoder.inputs`): parameters of
        its stage, bound on every call."""
        return ()

    def resolve(self, pipelines: dict[str, list[Node]]) -> None:
        """Find the nodes of other pipelines this node reads (``RefNode`` and
        other multi-input nodes), once every pipeline's nodes exist."""

    def stage_number(self) -> int:
        """This node's stage, from those of the nodes it reads (already
        numbered): see :mod:`slipstream.compiler.kinds`."""
        return stage_number(self.kind, ((source.kind, source.stage) for source in self.dependencies()))

    def declare(self) -> tuple[State, tuple[Allocation, ...]]:
        """Output state and allocations, from the parent's state."""
        assert self.op is not None and self.parent is not None and self.parent.state is not None
        return normalize_declared(self.op.declare(self.parent.state))

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
    """The first node of a pipeline: runs a :class:`Decoder`.  For a decoder
    that can fail (:attr:`Decoder.can_fail`) the node adds the status
    output to the decoder's allocations: its code receives it last among
    its outs, and the compiled stage returns it (see
    :meth:`~slipstream.compiler.Graph.statuses`)."""

    def __init__(self, op: Decoder) -> None:
        super().__init__(op)

    def declared(self) -> tuple[State, tuple[Allocation, ...]]:
        """The decoder's own output state and allocations."""
        return normalize_declared(self.op.declare(None))

    def declare(self) -> tuple[State, tuple[Allocation, ...]]:
        state, memory = self.declared()
        if not memory:
            raise ValueError("a decoder must declare the allocation its samples are written to")
        if any(allocation.name == STATUS for allocation in memory):
            raise DeclarationError(f"it declares an allocation named {STATUS!r}, the name of the status output "
                                   f"that the node of a decoder that can fail adds: name it otherwise")
        if self.op.can_fail:
            memory = (*memory, Allocation((), np.int32, name=STATUS))
        return state, memory

    @property
    def status_position(self) -> int | None:
        """Which of the node's allocations is its status output; None for a
        decoder that cannot fail."""
        return len(self.allocations) - 1 if self.op.can_fail else None

    def arrays(self) -> Sequence[Any]:
        return self.op.inputs()

    def emit(self, ctx: EmitContext) -> list[ast.stmt]:
        args = [*ctx.inputs(self), ctx.index, *ctx.outs(self), ctx.key(self)]
        return [A.assign(ctx.target(self), A.call(ctx.code(self), *args))]


class TransformNode(Node):
    """An operation applied to the parent's value."""

    def declare(self) -> tuple[State, tuple[Allocation, ...]]:
        state, memory = super().declare()
        returned = returns_its_input(self.op.generate_code()) if memory and self.kind.compiled else None
        if returned is not None:
            # The stage hands out (and later stages read) the allocation, which such code never fills.
            raise DeclarationError(
                f"it declares an output allocation but its code returns its input {returned!r}, so the "
                f"allocation would stay zeros: write the result into the allocation (the parameter after "
                f"{returned!r}) and return it, or declare no allocation (None) for code that changes its "
                f"input in place")
        return state, memory

    def emit(self, ctx: EmitContext) -> list[ast.stmt]:
        if self.kind is Kind.BATCH:  # the loop only prepares the sample's key
            return [A.assign_item(ctx.keys(self), ctx.sample, ctx.key(self))]
        args = [ctx.value(self.parent), *ctx.outs(self), ctx.key(self)]
        return [A.assign(ctx.target(self), A.call(ctx.code(self), *args))]

    def emit_batch(self, ctx: EmitContext) -> list[ast.stmt]:
        if self.kind is not Kind.BATCH:
            return []
        args = [ctx.batch_value(self.parent), *ctx.batch_outs(self), A.span(ctx.keys(self), None, ctx.count)]
        return [A.assign(ctx.target(self), A.call(ctx.code(self), *args))]

    def emit_torch(self, ctx: EmitContext) -> list[ast.stmt]:
        args = [ctx.batch_value(self.parent)]
        if isinstance(self.op, TorchOperation) and self.op.takes_keys:
            args.append(ctx.batch_keys(self))
        return [A.assign(ctx.target(self), A.call(ctx.code(self), *args))]


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

    def __init__(self, pipeline_name: str | None = None, op: Operation | None = None,
                 output: str | None = None) -> None:
        if pipeline_name is None and op is None:
            raise ValueError("RefNode reads a pipeline (pipeline_name) or an operation (op): give one")
        super().__init__(None)
        self.source_pipeline = pipeline_name
        self.source_op = op
        self.output = output
        self.target: Node | None = None

    @property
    def kind(self) -> Kind:
        """The referenced node's kind: a reference runs where its target runs."""
        return self.target.kind if self.target is not None else Kind.SAMPLE

    def dependencies(self) -> Sequence[Node]:
        return (self.target,) if self.target is not None else ()

    def alias(self) -> tuple[Node, str | None] | None:
        return self.target, self.output

    def resolve(self, pipelines: dict[str, list[Node]]) -> None:
        self.target = find_node(pipelines, self.pipeline, self.source_pipeline, self.source_op)

    def stage_number(self) -> int:
        return self.target.stage

    def declare(self) -> tuple[State, tuple[Allocation, ...]]:
        assert self.target is not None and self.target.state is not None
        if self.output is None:
            return self.target.state, ()
        if not self.target.kind.compiled:
            raise ValueError(f"{self.target.describe()} runs in torch, where operations have no named outputs")
        memory = self.target.allocations[self.target.output_position(self.output)]
        return State(shape=memory.shape, dtype=memory.dtype, device=memory.device), ()

    def _read(self, ctx: EmitContext, batch: bool) -> ast.expr:
        if self.output is not None:
            return (ctx.batch_output if batch else ctx.output)(self.target, self.output)
        return (ctx.batch_value if batch else ctx.value)(self.target)

    def emit(self, ctx: EmitContext) -> list[ast.stmt]:
        return [] if self.kind is Kind.BATCH else [A.assign(ctx.target(self), self._read(ctx, batch=False))]

    def emit_batch(self, ctx: EmitContext) -> list[ast.stmt]:
        return [A.assign(ctx.target(self), self._read(ctx, batch=True))] if self.kind is Kind.BATCH else []

    def emit_torch(self, ctx: EmitContext) -> list[ast.stmt]:
        return [A.assign(ctx.target(self), self._read(ctx, batch=True))]

    def describe(self) -> str:
        """``Ref(pipeline: operation[.output])``: which pipeline's output this reference reads."""
        what = "its output" if self.source_op is None else repr(self.source_op)
        where = "" if self.source_pipeline is None else f"{self.source_pipeline!r}: "
        return f"Ref({where}{what}{'' if self.output is None else '.' + self.output})"


def find_node(pipelines: dict[str, list[Node]], referrer: str, pipeline: str | None, op: Operation | None) -> Node:
    """The node running the operation object ``op`` (in ``pipeline``, or
    in whichever pipeline holds it when ``pipeline`` is None), or the last
    node of ``pipeline`` when ``op`` is None, for a node of pipeline
    ``referrer`` that reads it."""
    if pipeline is None:
        if op is None:
            raise PipelineError(f"pipeline {referrer!r} refers to no pipeline and no operation")
        found = [(name, n) for name, nodes in pipelines.items() for n in nodes if n.op is op]
        if len(found) != 1:
            holders = ", ".join(repr(name) for name, _ in found) or "none"
            raise PipelineError(f"pipeline {referrer!r} reads {op!r}, which {len(found)} entries of the pipelines "
                                f"hold (pipelines: {holders}): place that object once, or name its pipeline")
        return found[0][1]
    source = pipelines.get(pipeline)
    if source is None:
        raise PipelineError(f"pipeline {referrer!r} refers to pipeline {pipeline!r}, which does not exist "
                            f"(pipelines: {', '.join(pipelines)})")
    if op is None:
        return source[-1]
    found_here = [n for n in source if n.op is op]
    if len(found_here) != 1:
        raise PipelineError(f"pipeline {referrer!r} refers to {op!r} in pipeline {pipeline!r}, which holds it "
                            f"{len(found_here)} times")
    return found_here[0]


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

    def declare(self) -> tuple[State, tuple[Allocation, ...]]:
        state, memory = super().declare()
        if (state.shape, state.dtype) != (self.parent.state.shape, self.parent.state.dtype):
            raise ValueError(
                f"RandomApply needs an operation that keeps shape and dtype; {self.op!r} turns "
                f"{self.parent.state.shape} {self.parent.state.dtype} into {state.shape} {state.dtype}"
            )
        return state, memory

    def emit(self, ctx: EmitContext) -> list[ast.stmt]:
        coin = A.call(ctx.helper("uniform"), ctx.key(self, stream=1), A.const(_RANDOM_APPLY_DRAWS.apply))
        applied = [A.assign(ctx.target(self), A.call(ctx.code(self), ctx.value(self.parent), *ctx.outs(self),
                                                       ctx.key(self)))]
        if self.allocations:  # the output buffer must hold the sample either way
            skipped = A.call(ctx.helper("copy_sample"), ctx.outs(self)[0], ctx.value(self.parent))
        else:
            skipped = ctx.value(self.parent)
        return [A.if_else(A.less(coin, A.const(self.p)), applied, [A.assign(ctx.target(self), skipped)])]

    def describe(self) -> str:
        """``RandomApply(op, p=...)``."""
        return f"RandomApply({self.op!r}, p={self.p})"
