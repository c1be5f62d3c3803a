"""The pipeline graph: ``{output_name: [entries]}`` lowered to immutable
records (:class:`~slipstream.compiler.nodes.GraphNode`) with explicit
inputs, states, memory and stages."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from slipstream.compiler import symbols
from slipstream.compiler.handles import Handles, OutputRef, output_name
from slipstream.compiler.kinds import Kind, is_compiled_stage, stage_number
from slipstream.compiler.nodes import DeclarationError, DecoderNode, Finder, GraphNode, Input, Node, TransformNode
from slipstream.compiler.operation import STATUS, Decoder, Operation, as_operation
from slipstream.compiler.random import keyed_stream_id, stream_id
from slipstream.compiler.rewrites import FieldOperation, Keyed
from slipstream.compiler.state import Allocation, State
from slipstream.errors import PipelineError


@dataclasses.dataclass(frozen=True)
class Internal:
    """A pipeline that other pipelines read (through :class:`RefNode`) but
    that is not an output: its value is not handed out, so it can stay in
    per-thread memory inside the sample loop.  ``pipeline`` is what an
    output would be given: a list of entries, or, for a loader, a
    :class:`View`::

        {"crops": Internal(View("image", [MultiCrop(sizes, scales)])),
         "global_0": [RefNode("crops", output="crop_0"), Normalize(mean, std)]}
    """

    pipeline: Any


@dataclasses.dataclass(frozen=True)
class View:
    """An output that reads field ``field`` of the dataset, besides (or
    instead of) the field's own output.

    Its operations are placed as a field's would be: a first entry that
    decodes (a crop) reads ``field``; a list that starts with no decoder
    gets the field's default decoder in front.  A field that only views
    read is not loaded whole unless the mapping gives it a pipeline too::

        pipelines = {
            "image": [RandomResizedCrop(224), RandomHorizontalFlip(), Normalize()],
            "view_2": slipstream.View("image", [RandomResizedCrop(224), RandomHorizontalFlip(), Normalize()]),
        }
    """

    field: str
    operations: Sequence[Any] = ()


def unwrapped(given: Any) -> tuple[Any, bool]:
    """A pipeline's entries and whether it is an output (not :class:`Internal`)."""
    return (given.pipeline, False) if isinstance(given, Internal) else (given, True)


@dataclasses.dataclass(frozen=True)
class Buffer:
    """One allocation of one node: ``(slots, batch_size, *allocation.shape)``."""

    node: GraphNode
    index: int
    allocation: Allocation

    @property
    def symbol(self) -> symbols.Symbol:
        """The buffer's parameter in generated code."""
        return symbols.buffer(self.node.id, self.index)


@dataclasses.dataclass(frozen=True)
class _Entry:
    """One entry of a pipeline list, placed: its specification, id and random streams."""

    spec: Node
    id: int
    stream: int


class Graph:
    """The lowered graph: a :class:`GraphNode` for every entry of every
    pipeline, in an order where each node follows the nodes it reads.

    Lowering is one pass.  Each entry becomes a specification
    (:class:`Node`) with an id and random streams; then each entry, once the
    entries it reads (:meth:`Node.reads`) are lowered, becomes an immutable
    record with its inputs, kind, stage, state and allocations.  Stage
    numbers follow from the kinds of the nodes along the inputs
    (:mod:`slipstream.compiler.kinds`); nodes of all pipelines with the
    same stage number are compiled into one function.

    A pipeline given as :class:`Internal` is read by other pipelines
    (``RefNode``) but is not an output.

    Args:
        pipelines: pipeline name -> its entries (or :class:`Internal`
            entries), each already checked by :func:`check_pipeline` (a
            :class:`~slipstream.compiler.Pipeline` or a loader checks them
            once, and folds them).
    """

    def __init__(self, pipelines: Mapping[OutputRef, Sequence[Any] | Internal]) -> None:
        self._handles = Handles(pipelines)
        self._entries: dict[str, list[_Entry]] = {}
        output_names: list[str] = []
        placed: dict[str, tuple[list[Node], list[str | None]]] = {}
        for key, spec in pipelines.items():
            name = output_name(key)
            given, output = unwrapped(spec)
            if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
                raise PipelineError(f"pipeline {name!r} must be a list of operations, got {given!r}")
            items = list(given)
            if not items:
                raise PipelineError(f"pipeline {name!r} is empty")
            placed[name] = ([_node_for(item.entry if isinstance(item, Keyed) else item, name, position)
                             for position, item in enumerate(items)],
                            [item.key if isinstance(item, Keyed) else None for item in items])
            if output:
                output_names.append(name)
        roots = _roots({name: specs[0] for name, (specs, _) in placed.items()}, self._handles)
        next_id = 0
        for name, (specs, keys) in placed.items():
            streams = _streams(name, roots[name], specs, keys)
            self._entries[name] = [_Entry(s, next_id + k, stream) for k, (s, stream) in enumerate(zip(specs, streams))]
            next_id += len(specs)
        if not output_names:
            raise PipelineError("a pipeline needs at least one output" +
                                (" (every pipeline given is Internal)" if pipelines else ""))
        self._lowered: dict[int, GraphNode] = {}
        self._visiting: set[int] = set()
        self.nodes: list[GraphNode] = []
        """Every node, each after the nodes it reads."""
        for name, entries in self._entries.items():
            for position in range(len(entries)):
                self._lower(name, position)
        self.pipelines: dict[str, list[GraphNode]] = {
            name: [self._lowered[entry.id] for entry in entries] for name, entries in self._entries.items()}
        """Pipeline name -> its nodes, in the order of its list."""
        self.outputs: dict[str, GraphNode] = {name: self.pipelines[name][-1] for name in output_names}
        """Output name -> the node whose value it is (Internal pipelines are not outputs)."""
        self.stages = sorted({node.stage for node in self.nodes})

    def _lower(self, pipeline: str, position: int) -> GraphNode:
        """The record of entry ``position`` of ``pipeline``, lowered (with
        the entries it reads) when first asked for."""
        entry = self._entries[pipeline][position]
        done = self._lowered.get(entry.id)
        if done is not None:
            return done
        if entry.id in self._visiting:
            raise PipelineError(f"pipelines refer to each other in a cycle through {entry.spec.describe()} "
                                f"(pipeline {pipeline!r})")
        self._visiting.add(entry.id)
        spec = entry.spec
        inputs = tuple(spec.reads(_Finder(self, pipeline, position)))
        if not all(isinstance(i, Input) for i in inputs):
            raise PipelineError(f"pipeline {pipeline!r}: {spec.describe()}'s reads() must return Input values "
                                f"(node.output(name)), got {inputs!r:.120}")
        kind = spec.kind_of(inputs)
        stage = stage_number(kind, ((i.node.kind, i.node.stage) for i in inputs))
        state, allocations = _declare(spec, pipeline, kind, inputs)
        node = GraphNode(entry.id, pipeline, position, spec, kind, inputs, state, allocations, stage, entry.stream)
        self._visiting.discard(entry.id)
        self._lowered[entry.id] = node
        self.nodes.append(node)
        return node

    def _entries_read(self, pipeline: OutputRef, referrer: str) -> list[_Entry]:
        """The entries of ``pipeline`` (a handle or a name), which pipeline ``referrer`` reads."""
        return self._entries[self._handles.name_of(pipeline, referrer)]

    def nodes_in(self, stage: int) -> list[GraphNode]:
        """The nodes that run in ``stage``, in graph order."""
        return [node for node in self.nodes if node.stage == stage]

    def is_jit_stage(self, stage: int) -> bool:
        """Whether ``stage`` is compiled with Numba (else it is a torch stage)."""
        return is_compiled_stage(stage)

    def buffers(self) -> list[Buffer]:
        """Every allocation of every node, in node order."""
        return [Buffer(node, k, a) for node in self.nodes for k, a in enumerate(node.allocations)]

    def statuses(self) -> list[Buffer]:
        """The status outputs of the decoders that can fail
        (:attr:`~slipstream.compiler.Decoder.can_fail`), in graph order:
        buffers every call writes for each sample, which the stage that runs
        the decoder returns after its values."""
        return [b for b in self.buffers() if isinstance(b.node.spec, DecoderNode) and b.allocation.name == STATUS]

    def decoders(self) -> list[GraphNode]:
        """The decoder nodes, one per decoded field and pipeline, in graph order."""
        return [node for node in self.nodes if isinstance(node.spec, DecoderNode)]


class _Finder(Finder):
    """The lookups of the entry being lowered (see :class:`Finder`)."""

    def __init__(self, graph: Graph, pipeline: str, position: int) -> None:
        self._graph, self._pipeline, self._position = graph, pipeline, position

    @property
    def pipeline(self) -> str:
        return self._pipeline

    @property
    def position(self) -> int:
        return self._position

    def previous(self) -> GraphNode | None:
        return None if self._position == 0 else self._graph._lower(self._pipeline, self._position - 1)

    def names(self) -> list[str]:
        return list(self._graph._entries)

    def entries(self, pipeline: OutputRef) -> list[Node]:
        return [entry.spec for entry in self._graph._entries_read(pipeline, self._pipeline)]

    def node(self, pipeline: OutputRef, position: int) -> GraphNode:
        count = len(self._graph._entries_read(pipeline, self._pipeline))
        if not (isinstance(position, int) and 0 <= position < count):
            raise PipelineError(f"pipeline {self._pipeline!r} refers to entry {position!r} of pipeline {pipeline!r}, "
                                f"which has entries 0 to {count - 1}")
        return self._graph._lower(self._graph._handles.name_of(pipeline, self._pipeline), position)

    def last(self, pipeline: OutputRef) -> GraphNode:
        return self.node(pipeline, len(self._graph._entries_read(pipeline, self._pipeline)) - 1)

    def holding(self, op: Operation, pipeline: OutputRef | None = None) -> GraphNode:
        names = self.names() if pipeline is None else [self._graph._handles.name_of(pipeline, self._pipeline)]
        found = [(name, k) for name in names for k, spec in enumerate(self.entries(name)) if spec.op is op]
        if len(found) != 1:
            if pipeline is not None:
                raise PipelineError(f"pipeline {self._pipeline!r} refers to {op!r} in pipeline {pipeline!r}, which "
                                    f"holds it {len(found)} times")
            holders = ", ".join(repr(name) for name, _ in found) or "none"
            raise PipelineError(f"pipeline {self._pipeline!r} reads {op!r}, which {len(found)} entries of the "
                                f"pipelines hold (pipelines: {holders}): place that object once, or name its "
                                f"pipeline")
        return self._graph._lower(*found[0])


def _declare(spec: Node, pipeline: str, kind: Kind, inputs: tuple[Input, ...]) -> tuple[State, tuple[Allocation, ...]]:
    """The state and allocations ``spec`` declares from its inputs, or a
    PipelineError naming the entry and what it could not take."""
    parent = inputs[0].node if inputs else None
    describe = spec.describe()
    if kind.compiled and parent is not None and str(parent.state.device).startswith("cuda"):
        raise PipelineError(
            f"pipeline {pipeline!r}: {describe} is compiled code for the CPU, placed after "
            f"{parent.describe()}, whose output is on {parent.state.device}: place it before the entries that "
            f"move the batch to the device, or use a torch operation (slipstream.ops.batch) there")
    try:
        state, allocations = spec.declare(inputs)
    except DeclarationError as exc:  # the operation's own mistake, not its input's
        raise PipelineError(f"pipeline {pipeline!r}: {describe}: {exc}") from None
    except (ValueError, TypeError) as exc:
        if kind.compiled and parent is not None and parent.kind is Kind.TORCH:
            raise PipelineError(
                f"pipeline {pipeline!r}: {describe} is compiled code, placed after "
                f"{parent.describe()}, a torch operation, whose output ({parent.state.describe()}) it cannot "
                f"take: {exc}. Compiled operations work on the arrays a pipeline makes before its torch "
                f"operations: place it before {parent.describe()}") from exc
        if parent is None:
            raise PipelineError(f"pipeline {pipeline!r}: {describe} failed to declare its output: {exc}") from exc
        raise PipelineError(f"pipeline {pipeline!r}: {inputs[0].describe()} produces {inputs[0].state.describe()}, "
                            f"which {describe} cannot take: {exc}") from exc
    if kind.compiled and allocations and state is not None:
        # compiled code returns its first allocation as its value (see slipstream.compiler.operation)
        memory = allocations[0]
        if tuple(memory.shape) != tuple(state.shape) or np.dtype(memory.dtype) != np.dtype(state.dtype):
            raise PipelineError(
                f"pipeline {pipeline!r}: {describe} declares its output as {state.describe()} but "
                f"allocates {memory.shape} {np.dtype(memory.dtype)} for it: compiled code returns its first "
                f"Allocation, so the two must have the same shape and dtype")
    if parent is not None and kind.compiled and not parent.kind.compiled and parent.state.device != "cpu":
        raise PipelineError(f"pipeline {pipeline!r}: {describe} is compiled code but {parent.describe()} leaves its "
                            f"output on {parent.state.device}")
    return state, allocations


def check_pipeline(pipeline: str, entries: Any) -> list[Any]:
    """The entries of pipeline ``pipeline`` as a list, each an operation, a
    node or a torch module; else a :class:`PipelineError` that names the
    entry and says what to write instead (see :func:`entry_problem`)."""
    if isinstance(entries, (str, bytes)) or not isinstance(entries, Sequence):
        raise PipelineError(f"pipeline {pipeline!r} must be a list of operations (None drops a field), "
                            f"got {entries!r}")
    for position, item in enumerate(entries):
        problem = entry_problem(item)
        if problem is not None:
            raise PipelineError(f"pipeline {pipeline!r}, entry {position}: {problem}")
    return list(entries)


def entry_problem(item: Any) -> str | None:
    """What is wrong with ``item`` as an entry of a pipeline list, said so
    that the user sees what to write instead; None for an operation, a node
    or a torch module (whether it fits where it stands is checked when the
    graph is built)."""
    torch = sys.modules.get("torch")  # a module instance means torch is imported already
    if isinstance(item, Keyed):
        problem = entry_problem(item.entry)
        return None if problem is None else f"{item!r} wraps what is not an entry: {problem}"
    if isinstance(item, (Operation, Node, FieldOperation)):
        return None
    if torch is not None and isinstance(item, torch.nn.Module):
        return None
    if isinstance(item, str):
        return (f"{item!r} is a string; a pipeline lists operation objects, e.g. "
                f"[slipstream.ops.RandomResizedCrop(224), slipstream.ops.RandomHorizontalFlip()]")
    if isinstance(item, type):
        return (f"{item.__qualname__} is a class, not an operation object: write {item.__qualname__}(...) "
                f"with its arguments")
    if callable(item):
        return (f"{item!r} is a plain callable, which a pipeline cannot compile or place: write an Operation "
                f"(docs/compiler.md), or wrap code over torch tensors in a torch.nn.Module")
    return f"{item!r} ({type(item).__name__}) is not an Operation, a Node or a torch.nn.Module"


def _node_for(item: Any, pipeline: str, position: int) -> Node:
    """The node for one entry of a pipeline list (checked by :func:`check_pipeline`)."""
    if isinstance(item, FieldOperation):
        raise PipelineError(f"pipeline {pipeline!r}, entry {position}: {item!r} decodes a field of a dataset, so "
                            f"only slipstream.Loader, which knows the dataset, can place it; a compiled Pipeline "
                            f"starts with a Decoder (e.g. ArraySource)")
    if isinstance(item, Node):
        if position == 0 and isinstance(item, TransformNode):
            raise PipelineError(f"pipeline {pipeline!r} must start with a decoder or a node that reads other "
                                f"pipelines, not {item.describe()}, which transforms the entry before it")
        return item
    try:
        op = as_operation(item)
    except TypeError as exc:
        raise PipelineError(f"pipeline {pipeline!r}, entry {position}: {exc}") from exc
    if isinstance(op, Decoder):
        if position != 0:
            raise PipelineError(f"pipeline {pipeline!r}: decoder {op!r} can only be the first entry")
        return DecoderNode(op)
    if position == 0:
        raise PipelineError(f"pipeline {pipeline!r} must start with a decoder, not {op!r}")
    return TransformNode(op)


def _roots(firsts: Mapping[str, Node], handles: Handles) -> dict[str, str]:
    """Pipeline name -> what keys its entries' random streams: the root of
    its first entry (:meth:`Node.root`: a decoder and the field it reads, a
    reference and what it refers to), then how many pipelines of the same
    root come before it, in the order given.  Names play no part, so that
    renaming an output keeps every draw, and adding an output changes none
    of another root's."""
    roots: dict[str, str] = {}
    resolving: set[str] = set()

    def root_of(ref: OutputRef) -> str:
        try:
            name = handles.name_of(ref, "")
        except PipelineError:  # refused, naming the entry, as the graph is lowered
            return "?"
        if name in roots:
            return roots[name]
        if name in resolving:  # a cycle, refused as the graph is lowered
            return "?"
        resolving.add(name)
        roots[name] = firsts[name].root(root_of)
        resolving.discard(name)
        return roots[name]

    seen: dict[str, int] = {}
    numbered = {}
    for name in firsts:
        root = root_of(name)
        numbered[name] = f"{root}#{seen.get(root, 0)}"
        seen[root] = seen.get(root, 0) + 1
    return numbered


def _streams(pipeline: str, root: str, specs: list[Node], keys: list[str | None]) -> list[int]:
    """The first random stream of each entry of pipeline ``pipeline``,
    from the pipeline's ``root`` (:func:`_roots`), what the entry is and
    how many alike entries precede it (see :mod:`slipstream.compiler.random`),
    or from its explicit key alone.  A keyed entry still counts among its
    alike entries, so that keying one keeps the streams of the others."""
    seen: dict[str, int] = {}
    keyed: dict[str, Node] = {}
    streams = []
    for spec, key in zip(specs, keys):
        identity = spec.identity()
        streams.append(stream_id(root, identity, seen.get(identity, 0)))
        seen[identity] = seen.get(identity, 0) + 1
        if key is not None:
            if key in keyed:
                raise PipelineError(f"pipeline {pipeline!r} gives key {key!r} to both {keyed[key].describe()} and "
                                    f"{spec.describe()}: one output's entries draw alike only by mistake, so each "
                                    f"key may appear once in it")
            keyed[key] = spec
            streams[-1] = keyed_stream_id(key)
    return streams


__all__ = ["Buffer", "Graph", "Internal"]
