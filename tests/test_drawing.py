"""draw_graph: one box per node, one arrow per edge, a colour per stage."""

from __future__ import annotations

import dataclasses
import io
import types

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib")
matplotlib.use("Agg")

import matplotlib.pyplot as plt
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch
from test_compiler import Invert

from slipstream.compiler import Allocation, ArraySource, Graph, Operation, RefNode, draw_graph
from slipstream.ops import Convert


@dataclasses.dataclass(frozen=True)
class Copy(Operation):
    """x, into its own memory."""

    def declare(self, state):
        return state, Allocation(state.shape, state.dtype)

    def generate_code(self):
        def copy(x, out, key):
            out[...] = x
            return out

        return copy


@pytest.fixture
def graph():
    rng = np.random.default_rng(0)
    invert = Invert()
    # image: decode, invert (jit, stage 0), convert (torch, stage 1); label: one decoder;
    # view: a reference to the inverted image, then a copy of it.
    return Graph({
        "image": [ArraySource(rng.integers(0, 256, (8, 6, 6, 3), dtype=np.uint8)), invert, Convert(np.float32)],
        "label": [ArraySource(np.arange(8, dtype=np.int64))],
        "view": [RefNode("image", invert), Copy()],
    })


def edges(graph):
    return {(d.id, n.id) for n in graph.nodes for d in n.dependencies()}


def test_one_box_per_node_and_one_arrow_per_edge(graph):
    ax = draw_graph(graph)
    boxes = [p for p in ax.patches if isinstance(p, FancyBboxPatch)]
    arrows = [p for p in ax.patches if isinstance(p, FancyArrowPatch)]
    assert sorted(b.get_gid() for b in boxes) == sorted(f"node-{n.id}" for n in graph.nodes)
    assert edges(graph) == {(0, 1), (1, 2), (1, 4), (4, 5)}
    assert sorted(a.get_gid() for a in arrows) == sorted(f"edge-{a}-{b}" for a, b in edges(graph))
    texts = [t.get_text().replace("\n", " ") for t in ax.texts]
    for node in graph.nodes:
        assert node.describe() in texts
    assert "array (6, 6, 3) uint8" in texts and "tensor (6, 6, 3) float32" in texts
    assert {"image", "label", "view"} <= set(texts)
    assert _png(ax).startswith(b"\x89PNG")  # renders: arrows are clipped to their boxes at draw time
    plt.close(ax.figure)


def test_stages_have_their_own_colours_and_legend(graph):
    ax = draw_graph(graph)
    colour = {int(p.get_gid().split("-")[1]): p.get_facecolor() for p in ax.patches if isinstance(p, FancyBboxPatch)}
    stage = {n.id: n.stage for n in graph.nodes}
    assert graph.stages == [0, 1] and stage[2] == 1
    for a, colour_a in colour.items():
        for b, colour_b in colour.items():
            assert (colour_a == colour_b) == (stage[a] == stage[b])
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert len(labels) == 2 and "jit" in labels[0] and "torch" in labels[1]
    plt.close(ax.figure)


def test_a_reader_sits_below_what_it_reads(graph):
    ax = draw_graph(graph)
    top = {int(p.get_gid().split("-")[1]): p.get_y() for p in ax.patches if isinstance(p, FancyBboxPatch)}
    for a, b in edges(graph):
        assert top[b] < top[a]
    plt.close(ax.figure)


def test_takes_compiled_pipelines_and_loaders_and_an_axes(graph):
    _, ax = plt.subplots()
    compiled = types.SimpleNamespace(graph=graph)
    assert draw_graph(compiled, ax=ax) is ax
    loader = types.SimpleNamespace(compiled=compiled)
    assert len([p for p in draw_graph(loader).patches if isinstance(p, FancyBboxPatch)]) == len(graph.nodes)
    with pytest.raises(TypeError, match="not list"):
        draw_graph([1, 2])
    plt.close("all")


def _png(ax) -> bytes:
    buffer = io.BytesIO()
    ax.figure.savefig(buffer, format="png")
    return buffer.getvalue()
