"""The pipeline compiler: operations, nodes, graph, fused stage code generation.

Usable on its own, on in-memory arrays::

    from slipstream.compiler import ArraySource, Pipeline
    compiled = Pipeline([ArraySource(images), *operations]).compile(batch_size=64)
    batch = compiled(np.arange(64))
    print(compiled.explain())   # generated stage source and memory plan
"""

from slipstream.compiler.drawing import draw_graph
from slipstream.compiler.graph import Buffer, Graph, Internal
from slipstream.compiler.handles import Output
from slipstream.compiler.kinds import Geometry, Kind
from slipstream.compiler.nodes import (DecoderNode, EmitContext, Finder, GraphNode, Input, Node, RandomApply, RefNode,
                                       TransformNode)
from slipstream.compiler.operation import STATUS, Decoder, DeclaresGeometry, Operation, TakesKeys, TorchOperation
from slipstream.compiler.pipeline import ArraySource, CompiledPipeline, Pipeline
from slipstream.compiler.rewrites import Keyed
from slipstream.compiler.state import Allocation, State

__all__ = [
    "Allocation",
    "ArraySource",
    "Buffer",
    "CompiledPipeline",
    "DeclaresGeometry",
    "Decoder",
    "DecoderNode",
    "EmitContext",
    "Finder",
    "Graph",
    "GraphNode",
    "Input",
    "Geometry",
    "Internal",
    "Keyed",
    "Kind",
    "Node",
    "Operation",
    "Output",
    "Pipeline",
    "RandomApply",
    "RefNode",
    "STATUS",
    "State",
    "TakesKeys",
    "TorchOperation",
    "TransformNode",
    "draw_graph",
]
