"""The pipeline graph: nodes built from ``{output_name: [operations]}``,
references resolved, states propagated, memory collected and nodes grouped
into stages."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from slipstream.compiler import symbols
from slipstream.compiler.kinds import Kind, is_compiled_stage
from slipstream.compiler.nodes import DeclarationError, DecoderNode, Node, TransformNode
from slipstream.compiler.operation import Decoder, Operation, as_operation
from slipstream.compiler.random import keyed_stream_id, stream_id
from slipstream.compiler.rewrites import FieldOperation, Keyed
from slipstream.compiler.state import Allocation
from slipstream.errors import PipelineError


@dataclasses.dataclass(frozen=True)
class Internal:
    """A pipeline that other pipelines read (through :class:`RefNode`) but
    that is not an output: its value is not handed out, so it can stay in
    per-thread memory inside the sample loop.  ``pipeline`` is what an
    output would be given: a list of entries, or, for a loader, a
    :class:`~slipstream.View`::

        {"crops": Internal(View("image", [MultiCrop(sizes, scales)])),
         "global_0": [RefNode("crops", output="crop_0"), Normalize(mean, std)]}
    """

    pipeline: Any


def unwrapped(given: Any) -> tuple[Any, bool]:
    """A pipeline's entries and whether it is an output (not :class:`Internal`)."""
    return (given.pipeline, False) if isinstance(given, Internal) else (given, True)


@dataclasses.dataclass(frozen=True)
class Buffer:
    """One allocation of one node: ``(slots, batch_size, *allocation.shape)``."""

    node: Node
    index: int
    allocation: Allocation

    @property
    def symbol(self) -> symbols.Symbol:
        """The buffer's parameter in generated code."""
        return symbols.buffer(self.node.id, self.index)


class Graph:
    """Nodes of every pipeline, in an order where each node follows the
    nodes it reads, with states, allocations and stages assigned.

    Stage numbers follow from the kinds of the operations along each
    pipeline (:mod:`slipstream.compiler.kinds`); nodes of all pipelines with
    the same stage number are compiled into one function.

    A pipeline given as :class:`Internal` is read by other pipelines
    (``RefNode``) but is not an output.

    Args:
        pipelines: pipeline name -> its entries (or :class:`Internal`
            entries), each already checked by :func:`check_pipeline` (a
            :class:`~slipstream.compiler.Pipeline` or a loader checks them
            once, and folds them).
    """

    def __init__(self, pipelines: Mapping[str, Sequence[Any] | Internal]) -> None:
        self.outputs: dict[str, Node] = {}
        self.pipelines: dict[str, list[Node]] = {}
        next_id = 0
        for name, spec in pipelines.items():
            given, output = unwrapped(spec)
            if isinstance(given, (str, bytes)) or not isinstance(given, Sequence):
                raise PipelineError(f"pipeline {name!r} must be a list of operations, got {given!r}")
            items = list(given)
            if not items:
                raise PipelineError(f"pipeline {name!r} is empty")
            nodes: list[Node] = []
            for position, item in enumerate(items):
                stream_key = item.key if isinstance(item, Keyed) else None
                node = _node_for(item.entry if isinstance(item, Keyed) else item, name, position)
                node = node.placed(nodes[-1] if nodes else None, next_id, name, stream_key)
                next_id += 1
                nodes.append(node)
            self.pipelines[name] = nodes
            _number_streams(name, nodes)
            if output:
                self.outputs[name] = nodes[-1]
        if not self.outputs:
            raise PipelineError("a pipeline needs at least one output" +
                                (" (every pipeline given is Internal)" if pipelines else ""))
        self._resolve_references()
        self.nodes = self._ordered()
        for node in self.nodes:
            self._declare(node)
            node.stage = node.stage_number()
        self.stages = sorted({node.stage for node in self.nodes})

    def _resolve_references(self) -> None:
        for nodes in self.pipelines.values():
            for node in nodes:
                node.resolve(self.pipelines)

    def _ordered(self) -> list[Node]:
        """Every node after the nodes it reads (depth-first, stable)."""
        order: list[Node] = []
        state: dict[int, str] = {}

        def visit(node: Node) -> None:
            if state.get(node.id) == "done":
                return
            if state.get(node.id) == "visiting":
                raise PipelineError(f"pipelines refer to each other in a cycle through {node.describe()}")
            state[node.id] = "visiting"
            for dependency in node.dependencies():
                visit(dependency)
            state[node.id] = "done"
            order.append(node)

        for nodes in self.pipelines.values():
            for node in nodes:
                visit(node)
        return order

    def _declare(self, node: Node) -> None:
        parent = node.parent
        if node.kind.compiled and parent is not None and str(parent.state.device).startswith("cuda"):
            raise PipelineError(
                f"pipeline {node.pipeline!r}: {node.describe()} is compiled code for the CPU, placed after "
                f"{parent.describe()}, whose output is on {parent.state.device}: place it before the entries that "
                f"move the batch to the device, or use a torch operation (slipstream.ops.batch) there")
        try:
            node.state, node.allocations = node.declare()
        except DeclarationError as exc:  # the operation's own mistake, not its input's
            raise PipelineError(f"pipeline {node.pipeline!r}: {node.describe()}: {exc}") from None
        except (ValueError, TypeError) as exc:
            parent = node.parent
            if node.kind.compiled and parent is not None and parent.kind is Kind.TORCH:
                raise PipelineError(
                    f"pipeline {node.pipeline!r}: {node.describe()} is compiled code, placed after "
                    f"{parent.describe()}, a torch operation, whose output ({parent.state.describe()}) it cannot "
                    f"take: {exc}. Compiled operations work on the arrays a pipeline makes before its torch "
                    f"operations: place it before {parent.describe()}") from exc
            if node.parent is None:
                raise PipelineError(f"pipeline {node.pipeline!r}: {node.describe()} failed to declare its "
                                    f"output: {exc}") from exc
            raise PipelineError(
                f"pipeline {node.pipeline!r}: {node.parent.describe()} produces {node.parent.state.describe()}, "
                f"which {node.describe()} cannot take: {exc}"
            ) from exc
        if node.kind.compiled and node.allocations and node.state is not None:
            # compiled code returns its first allocation as its value (see slipstream.compiler.operation)
            memory, state = node.allocations[0], node.state
            if tuple(memory.shape) != tuple(state.shape) or np.dtype(memory.dtype) != np.dtype(state.dtype):
                raise PipelineError(
                    f"pipeline {node.pipeline!r}: {node.describe()} declares its output as {node.state.describe()} but "
                    f"allocates {memory.shape} {np.dtype(memory.dtype)} for it: compiled code returns its first "
                    f"Allocation, so the two must have the same shape and dtype")
        if (node.parent is not None and node.kind.compiled and not node.parent.kind.compiled
                and node.parent.state.device != "cpu"):
            raise PipelineError(f"pipeline {node.pipeline!r}: {node.describe()} is compiled code but "
                                f"{node.parent.describe()} leaves its output on {node.parent.state.device}")

    def nodes_in(self, stage: int) -> list[Node]:
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
        return [Buffer(node, node.status_position, node.allocations[node.status_position])
                for node in self.decoders() if node.status_position is not None]

    def decoders(self) -> list[DecoderNode]:
        """The decoder nodes, one per decoded field and pipeline, in graph order."""
        return [node for node in self.nodes if isinstance(node, DecoderNode)]


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


def _number_streams(pipeline: str, nodes: list[Node]) -> None:
    """Give each node of a pipeline its random streams, from the pipeline's
    name, what the node is and how many alike nodes precede it (see
    :mod:`slipstream.compiler.random`), or from its explicit key alone.  A
    keyed node still counts among its alike nodes, so that keying one
    keeps the streams of the others."""
    seen: dict[str, int] = {}
    keyed: dict[str, Node] = {}
    for node in nodes:
        identity = node.identity()
        node.stream = stream_id(pipeline, identity, seen.get(identity, 0))
        seen[identity] = seen.get(identity, 0) + 1
        if node.stream_key is not None:
            if node.stream_key in keyed:
                raise PipelineError(f"pipeline {pipeline!r} gives key {node.stream_key!r} to both "
                                    f"{keyed[node.stream_key].describe()} and {node.describe()}: one output's "
                                    f"entries draw alike only by mistake, so each key may appear once in it")
            keyed[node.stream_key] = node
            node.stream = keyed_stream_id(node.stream_key)


__all__ = ["Buffer", "Graph", "Internal"]
