"""A picture of a pipeline graph, drawn with matplotlib (an optional
dependency, imported when :func:`draw_graph` is called)."""

from __future__ import annotations

import textwrap
from typing import Any

from slipstream.compiler.graph import Graph

_JIT_COLOURS = ("#cfe2f3", "#d9ead3", "#d0e0e3", "#d9d2e9")
_TORCH_COLOURS = ("#fce5cd", "#fff2cc", "#f4cccc", "#ead1dc")
_GAP = 1.6  # lines of space between two rows of boxes, for the arrows


def _graph_of(obj: Any) -> Graph:
    """The graph of a Graph, a CompiledPipeline (``.graph``) or a Loader
    (``.compiled.graph``)."""
    for path in ((), ("graph",), ("compiled", "graph")):
        found = obj
        for attribute in path:
            found = getattr(found, attribute, None)
        if isinstance(found, Graph):
            return found
    raise TypeError(f"draw_graph takes a Graph, a CompiledPipeline or a Loader, not {type(obj).__name__}")


def draw_graph(graph: Any, ax: Any = None) -> Any:
    """Draw a pipeline graph: one column per pipeline, one box per node.

    Each box shows the node's ``describe()`` and the state of its output
    (array or tensor, per-sample shape, dtype), in its stage's colour.  An
    arrow goes from every node to each node that reads it, so a
    :class:`~slipstream.compiler.RefNode` or a node with several inputs
    shows as an arrow between columns.  A node sits one row below the
    lowest node it reads.

    Args:
        graph: a :class:`~slipstream.compiler.Graph`, a
            :class:`~slipstream.compiler.CompiledPipeline` or a
            :class:`slipstream.Loader`.
        ax: the matplotlib Axes to draw in; a new figure (at most 10 x 6
            inches) when None.  The text is sized to fit the Axes.

    Returns:
        The Axes.  Boxes are ``FancyBboxPatch`` patches with ``gid``
        ``"node-<id>"``, arrows ``FancyArrowPatch`` patches with ``gid``
        ``"edge-<from id>-<to id>"``.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch, Patch

    graph = _graph_of(graph)
    names = list(graph.pipelines)
    row: dict[int, int] = {}
    for node in graph.nodes:  # each node comes after the nodes it reads
        row[node.id] = 1 + max((row[d.id] for d in node.dependencies()), default=-1)

    def layout(width_pt: float, fontsize: float) -> tuple[dict[int, str], list[float], list[float], float]:
        """Wrapped descriptions, each row's top and height, and the total height, in lines of text."""
        chars = max(16, int(0.9 * width_pt / len(names) / (0.6 * fontsize)))
        texts = {n.id: textwrap.fill(n.describe(), chars, break_long_words=False, break_on_hyphens=False)
                 for n in graph.nodes}
        tops, heights, y = [], [], 0.0
        for r in range(1 + max(row.values())):
            tops.append(y)
            heights.append(1.8 + max(texts[n.id].count("\n") + 1 for n in graph.nodes if row[n.id] == r))
            y -= heights[-1] + _GAP
        return texts, tops, heights, 1.5 - y - _GAP  # 1.5: the pipelines' names above the first row

    if ax is None:
        width = min(10.0, 3.4 * len(names))
        height = min(6.0, 0.6 + layout(width * 72 * 0.96, 7.0)[3] * 7.0 * 1.3 / 72)
        _, ax = plt.subplots(figsize=(width, height), dpi=80)
        ax.figure.subplots_adjust(left=0.02, right=0.98, top=0.98, bottom=0.4 / height)
    box_in = ax.get_window_extent().transformed(ax.figure.dpi_scale_trans.inverted())
    fontsize = 7.0
    for _ in range(2):  # the font that fits the Axes' height, then the wrapping that fits that font
        texts, tops, heights, span = layout(box_in.width * 72, fontsize)
        fontsize = min(7.0, box_in.height * 72 / span / 1.3)
    colours, counts = {}, {True: 0, False: 0}
    for stage in graph.stages:
        jit = graph.is_jit_stage(stage)
        palette = _JIT_COLOURS if jit else _TORCH_COLOURS
        colours[stage], counts[jit] = palette[counts[jit] % len(palette)], counts[jit] + 1
    boxes = {}
    for column, name in enumerate(names):
        ax.text(column, 0.6, name if name in graph.outputs else f"{name} (internal)", ha="center", va="bottom",
                fontsize=fontsize + 1.5, fontweight="bold")
        for node in graph.pipelines[name]:
            top, box_h = tops[row[node.id]], heights[row[node.id]]
            boxes[node.id] = FancyBboxPatch((column - 0.46, top - box_h), 0.92, box_h, boxstyle="round,pad=0.02",
                                            facecolor=colours[node.stage], edgecolor="#555555", gid=f"node-{node.id}")
            ax.add_patch(boxes[node.id])
            ax.text(column, top - 0.4, texts[node.id], ha="center", va="top", fontsize=fontsize)
            ax.text(column, top - box_h + 0.4, node.state.describe(compact=True), ha="center", va="bottom", fontsize=fontsize,
                    color="#333333", style="italic")
    for node in graph.nodes:
        for source in node.dependencies():
            a, b = boxes[source.id], boxes[node.id]
            ax.add_patch(FancyArrowPatch(
                (a.get_x() + 0.46, a.get_y() + a.get_height() / 2), (b.get_x() + 0.46, b.get_y() + b.get_height() / 2),
                patchA=a, patchB=b, arrowstyle="-|>", mutation_scale=10, color="#333333",
                connectionstyle="arc3" if source.pipeline == node.pipeline else "arc3,rad=0.1",
                gid=f"edge-{source.id}-{node.id}"))
    handles = [Patch(facecolor=colours[s], edgecolor="#555555",
                     label=f"stage {s}: {'jit (one fused loop)' if graph.is_jit_stage(s) else 'torch (Python)'}")
               for s in graph.stages]
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=min(4, len(handles)),
              fontsize=7, frameon=False)
    ax.set_xlim(-0.5, len(names) - 0.5)
    ax.set_ylim(-span + 1.5, 1.5)
    ax.axis("off")
    return ax


__all__ = ["draw_graph"]
