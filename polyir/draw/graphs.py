"""Dependence graphs as arc diagrams: statements (or top-level nests) on a line
in textual order, one arc per dependence.

An arc above the line goes forward in the text (the source is written before
the sink), one below goes backward (only a loop around both can carry it), a
loop over a node is a dependence of a statement on itself. Each arc is
coloured by kind and labelled ``KIND buffer @ loops`` with the loops that
carry it (``=`` when some instance pair is loop-independent). The arcs come
from ``Dependences.graph()`` / ``nest_graph()`` (networkx), one per edge.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from polyir.draw.picture import KIND_COLORS, DrawError, Picture, new_figure
from polyir.ir.nodes import Function, Module
from polyir.polyhedral.dependences import compute_dependences, kind_names
from polyir.polyhedral.extract import extract, function_of
from polyir.polyhedral.report import plural

IR = Module | Function


def _carried_label(levels: tuple[int, ...], carried: tuple[str, ...]) -> str:
    parts = list(carried) + (["="] if 0 in levels else [])
    return ",".join(parts) or "-"


def _arc_diagram(ax: Any, labels: Sequence[str], edges: Sequence[tuple[int, int, str, str]]) -> None:
    """Nodes ``labels`` at x = 0, 1, ...; ``edges``: (source, sink, kind, label)."""
    from matplotlib.patches import FancyArrowPatch
    spacing = 2.2
    for k, label in enumerate(labels):
        ax.text(k * spacing, 0, label, ha="center", va="center", fontsize=8, zorder=3, gid=f"node:{k}",
                bbox={"boxstyle": "round,pad=0.4", "facecolor": "#eef3fb", "edgecolor": "#4c72b0"})
    seen: dict[tuple[int, int], int] = {}
    top = 0.6
    bottom = -0.6
    for source, sink, kind, label in edges:
        nth = seen.get((source, sink), 0)
        seen[(source, sink)] = nth + 1
        color = KIND_COLORS.get(kind, "black")
        xa, xb = source * spacing, sink * spacing
        # arc3 puts the control point at mid + rad * (dy, -dx): a negative rad bends
        # a left-to-right arc upwards and a right-to-left one downwards
        # (in display space: the axes keep an equal aspect, so the apex below is where it is drawn)
        if source == sink:
            rad = -1.6 - 0.7 * nth
            start, end = (xa - 0.3, 0.2), (xa + 0.3, 0.2)
            apex = (xa + 0.3, 0.2 + abs(rad) * 0.6 / 2)
        else:
            rad = -(0.3 + 0.16 * nth)
            sign = 1 if sink > source else -1
            start, end = (xa, 0.2 * sign), (xb, 0.2 * sign)
            apex = ((xa + xb) / 2, sign * (0.2 + abs(rad) * abs(xb - xa) / 2))
        arrow = FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=10, connectionstyle=f"arc3,rad={rad}",
                                shrinkA=2, shrinkB=2, color=color, linewidth=1.1, zorder=2, gid=f"edge:{kind}")
        ax.add_artist(arrow)
        ax.text(apex[0], apex[1], label, ha="left" if source == sink else "center", va="center", fontsize=7,
                color=color, gid="edge-label", zorder=4,
                bbox={"boxstyle": "round,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.8})
        top, bottom = max(top, apex[1] + 0.3), min(bottom, apex[1] - 0.3)
    right = max(len(labels) - 1, 0) * spacing + 1.8
    ax.set_xlim(-1.2, right)
    ax.set_ylim(bottom, top)
    ax.set_aspect("equal")
    ax.set_axis_off()
    width = min(16.0, max(4.5, 1.1 * (right + 1.2)))
    ax.figure.set_size_inches(width, min(12.0, width * (top - bottom) / (right + 1.2) + 0.9))


def _figure(n_nodes: int, n_edges: int) -> Any:
    return new_figure(min(16.0, max(4.5, 2.0 * n_nodes + 1.5)), min(9.0, 2.6 + 0.35 * n_edges))


def dependence_graph(ir: IR, *, kinds: str | Sequence[str] | None = None, title: str | None = None) -> Picture:
    """The statements of ``ir`` and their dependences of the given ``kinds``
    (default all: RAW, WAR, WAW, FLOW), one arc per dependence (statement pair,
    buffer and kind), labelled with the loops that carry it."""
    function = function_of(ir)
    deps = compute_dependences(extract(function))
    try:
        deps = deps.filter(kinds)
    except ValueError as error:
        raise DrawError(str(error)) from None
    graph = deps.graph()
    names = list(deps.scop.statements)
    labels = [f"{name}\n[{', '.join(deps.scop.statements[name].loop_vars)}]" for name in names]
    edges = [(names.index(a), names.index(b), data["kind"],
              f"{data['kind'].upper()} {data['buffer']} @ {_carried_label(data['levels'], data['carried'])}")
             for a, b, data in graph.edges(data=True)]
    figure = _figure(len(names), len(edges))
    ax = figure.add_subplot(111)
    _arc_diagram(ax, labels, edges)
    kinds_text = "/".join(k.upper() for k in kind_names(kinds))
    ax.set_title(title or f"{function.name}: {plural(len(names), 'statement')}, "
                          f"{plural(len(edges), kinds_text + ' dependence')}\n"
                          f"(above: forward in the text; below: backward, carried by a loop)", fontsize=9)
    return Picture(figure, "dependence graph", function.name, {"nodes": len(names), "edges": len(edges)})


def nest_graph(ir: IR, *, kinds: str | Sequence[str] | None = "memory", title: str | None = None) -> Picture:
    """The top-level nests of ``ir`` (with their statements and loops) and the
    dependences between nests, one arc per (kind, buffer) and pair of nests
    (default kinds: RAW, WAR and WAW)."""
    from polyir.report.changes import nests
    function = function_of(ir)
    deps = compute_dependences(extract(function))
    try:
        deps = deps.filter(kinds)
    except ValueError as error:
        raise DrawError(str(error)) from None
    graph = deps.nest_graph()
    listed = nests(function)
    by_statement = {s: n.index for n in listed for s in n.statements}
    nest_of_scop = {data["statements"][0]: node for node, data in graph.nodes(data=True)}
    index_of = {node: by_statement[first] for first, node in nest_of_scop.items()}
    labels = [f"nest {n.index}\n{', '.join(n.statements)}" + (f"\nfor {', '.join(n.loops)}" if n.loops else "")
              for n in listed]
    edges = [(index_of[a], index_of[b], data["kind"], f"{data['kind'].upper()} {data['buffer']}")
             for a, b, data in graph.edges(data=True)]
    figure = _figure(len(labels), len(edges))
    ax = figure.add_subplot(111)
    _arc_diagram(ax, labels, edges)
    ax.set_title(title or f"{function.name}: {plural(len(labels), 'nest')}, "
                          f"{plural(len(edges), 'dependence')} between them",
                 fontsize=9)
    return Picture(figure, "nest graph", function.name, {"nests": len(labels), "edges": len(edges)})
